"""docs/architecture.md describes the code as it is: every file it names
exists, its method table lists every socket method the daemon serves, and
its status section names every state."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

from ohsync.daemon.memory_service import METHODS as MEMORY_METHODS
from ohsync.daemon.protocol import DAEMON_METHODS, STATUS_KEYS, Method
from ohsync.daemon.status import STATES

REPO = Path(__file__).resolve().parent.parent
DOC = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")


def _section(number: str) -> str:
    """The text of section ``number`` (up to the next heading of the same or a higher level)."""
    m = re.search(rf"^(#+) {re.escape(number)}\.? .*$", DOC, re.M)
    assert m, f"docs/architecture.md has no section {number}"
    level = len(m.group(1))
    end = re.compile(rf"^#{{1,{level}}} ", re.M).search(DOC, m.end())
    return DOC[m.end():end.start() if end else len(DOC)]


def _key(node: ast.expr) -> str:
    """A handler table key: a string, or ``Method.NAME`` of daemon/protocol.py."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Method":
        return str(getattr(Method, node.attr))
    raise AssertionError(f"daemon/daemon_methods.py: a handler key that is not a method name: {ast.dump(node)}")


def _daemon_methods() -> set[str]:
    """The method names of ``Methods.table`` in daemon/daemon_methods.py (read from the source)."""
    tree = ast.parse((REPO / "daemon" / "daemon_methods.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "table":
            for table in ast.walk(node):
                if isinstance(table, ast.Dict):
                    return {_key(k) for k in table.keys if k is not None}
    raise AssertionError("daemon/daemon_methods.py has no Methods.table building a dict")


def test_every_file_the_page_names_exists() -> None:
    named = set(re.findall(r"`((?:engine|daemon|tray|devserver|bench|packaging|tests|docs)/[\w./-]+\.(?:py|md))`",
                           DOC))
    assert len(named) > 30
    missing = sorted(p for p in named if not (REPO / p).exists())
    assert missing == [], f"docs/architecture.md names files that do not exist: {missing}"


def test_the_method_table_lists_every_socket_method() -> None:
    methods = _section("7.1")
    served = _daemon_methods() | set(MEMORY_METHODS) | {Method.SUBSCRIBE}
    assert {"status", "wait", "confirm_deletes"} <= served
    missing = sorted(name for name in served if f"`{name}`" not in methods)
    assert missing == [], f"docs/architecture.md §7.1 does not list: {missing}"


def test_the_status_section_names_every_state() -> None:
    status = _section("7.2")
    missing = [state for state in STATES if f"`{state}`" not in status]
    assert missing == [], f"docs/architecture.md §7.2 does not name the states {missing}"


def test_the_protocol_module_names_every_served_method() -> None:
    assert _daemon_methods() == set(DAEMON_METHODS)
    names = {v for k, v in vars(Method).items() if k.isupper()}
    assert names == set(DAEMON_METHODS) | set(MEMORY_METHODS) | {Method.SUBSCRIBE}


def test_the_status_section_shows_the_contract_keys_in_order() -> None:
    status = _section("7.2")
    block = re.search(r"```json\n(.*?)```", status, re.S)
    assert block, "docs/architecture.md §7.2 has no JSON example"
    keys = re.findall(r'"(\w+)":', block.group(1))
    assert keys[:len(STATUS_KEYS)] == list(STATUS_KEYS)


def test_the_lint_paragraph_names_the_rules_ruff_runs() -> None:
    paragraph = re.search(r"^\*\*Lint\*\*(.*?)\n\n", DOC, re.M | re.S)
    assert paragraph, "docs/architecture.md has no **Lint** paragraph"
    text = " ".join(paragraph.group(1).split())
    rules = re.search(r"with the rules (.*?): ", text)
    assert rules, "the **Lint** paragraph does not list the rules (`with the rules ...:`)"
    ruff = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]
    assert re.findall(r"`(\w+)`", rules.group(1)) == ruff["lint"]["select"]
    assert f"at {ruff['line-length']} columns" in text
