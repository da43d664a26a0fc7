"""Raw ``except OSError`` handlers in ``engine/`` cannot grow in number.

A local failure is either a "missing is fine" case, which uses a helper of
``engine/local_lookups.py`` (``stat_or_none``, ``read_bytes_or_none``,
``scandir_or_none``, ``fsync_dir_best_effort``), or goes through
``engine/errors.py`` ``local_error`` (one sentence per cause); each new
bare handler is one more place that may swallow an error silently.  The
handlers left tell errnos apart, clean up and raise again, or translate
at a boundary.  The count (the helpers' own handlers included) is a
ratchet, as ``.ci/devserver_mypy_errors`` is for devserver's types: lower
:data:`ALLOWED` when handlers are replaced.
"""
from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
#: Raw ``except OSError`` (alone or in a tuple) handlers in engine/ today: 68, and seven that tell errnos
#: apart, clean up and raise again or translate at a boundary: engine/backups.py (a name too long for the backup
#: disk, a backup that cannot be written), engine/temp_marks.py (no hard links), engine/nofollow.py and
#: engine/local_replace.py (a taken-away version kept after a failed exchange).
ALLOWED = 75


def _names(node: ast.expr | None) -> list[str]:
    if node is None:
        return []
    if isinstance(node, ast.Tuple):
        return [n for elt in node.elts for n in _names(elt)]
    return [node.id] if isinstance(node, ast.Name) else []


def raw_oserror_handlers(folder: Path) -> list[str]:
    """``file:line`` (below ``folder``) of every ``except`` clause naming ``OSError``."""
    return [f"{path.relative_to(folder)}:{node.lineno}" for path in sorted(folder.rglob("*.py"))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.ExceptHandler) and "OSError" in _names(node.type)]


def test_the_counter_sees_bare_and_tuple_handlers(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text("try:\n    pass\nexcept OSError:\n    pass\ntry:\n    pass\n"
                      "except (ValueError, OSError):\n    pass\ntry:\n    pass\nexcept FileNotFoundError:\n    pass\n")
    assert raw_oserror_handlers(tmp_path) == ["m.py:3", "m.py:7"]


def test_raw_oserror_handlers_in_the_engine_do_not_grow() -> None:
    found = raw_oserror_handlers(REPO / "engine")
    assert len(found) <= ALLOWED, (f"{len(found)} raw `except OSError` in engine/ (at most {ALLOWED}): use "
                                   f"engine/errors.py local_error or a named helper; {found}")
    assert len(found) == ALLOWED, f"{len(found)} raw `except OSError` now: lower ALLOWED to {len(found)}"
