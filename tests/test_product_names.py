"""Names that mean one thing in the product: ``decide`` is the resolver's
(engine/merge/resolve.py, what a conflict keeps); the reconciliation table's
lookup is ``reconcile.action_for``."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _functions_named(name: str) -> list[str]:
    found = []
    for folder in ("engine", "daemon", "tray"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                    found.append(f"{path.relative_to(REPO)}:{node.lineno}")
    return found


def test_there_is_one_decide_the_resolvers() -> None:
    found = _functions_named("decide")
    assert [hit.split(":")[0] for hit in found] == ["engine/merge/resolve.py"], found

