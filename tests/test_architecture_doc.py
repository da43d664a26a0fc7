"""docs/architecture.md describes the code as it is: every file it names
exists, its method table lists every socket method the daemon serves, its
status section names every state, and the claims a test can check hold:
its thread table (§6.5) names every thread and which are daemon threads,
what is type-checked and which rules ruff runs (§2), where the client's
uploads are called (§5), how the tray loads pystray and Pillow (§2), the
socket's limits (§7) and the names the CLI recipe uses (§11)."""

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


# ----------------------------------------------------------------- claims a test can check

def _modules(*folders: str) -> list[tuple[str, ast.Module]]:
    return [(str(path.relative_to(REPO)), ast.parse(path.read_text(encoding="utf-8")))
            for folder in folders for path in sorted((REPO / folder).rglob("*.py"))]


def _call_name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Attribute):
        return func.attr
    return func.id if isinstance(func, ast.Name) else ""


def _code_threads() -> dict[str, bool]:
    """Thread name → daemon thread?, for every thread the daemon and the tray name
    (the base's, a Ticker's, a ServiceThread subclass's, an executor's prefix, an observer's)."""
    names: dict[str, bool] = {}
    for _file, tree in _modules("daemon", "tray"):
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            daemon = any(k.arg == "daemon" and isinstance(k.value, ast.Constant) and k.value.value is True
                         for k in node.keywords)
            if _call_name(node) in ("ServiceThread", "Ticker", "__init__") and node.args:
                first = node.args[0]
                if isinstance(first, ast.Constant) and str(first.value).startswith("ohsync-"):
                    names[str(first.value)] = daemon
            for k in node.keywords:
                if k.arg in ("thread_name_prefix", "observer_name") and isinstance(k.value, ast.Constant):
                    names[str(k.value.value)] = False
    return names


def _doc_threads() -> dict[str, bool]:
    """Thread name → daemon thread?, from §6.5's table."""
    rows = [line for line in _section("6.5").splitlines() if line.startswith("| `ohsync-")]
    names: dict[str, bool] = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        for name in re.findall(r"`(ohsync-[\w-]+)`", cells[0]):
            names[name] = cells[-1].startswith("yes")
    return names


def test_the_thread_table_names_every_thread_and_which_are_daemon_threads() -> None:
    code, doc = _code_threads(), _doc_threads()
    assert len(code) > 10
    assert sorted(code) == sorted(doc), "docs/architecture.md §6.5 and the code name different threads"
    assert {n for n, d in doc.items() if d} == {n for n, d in code.items() if d}, \
        "docs/architecture.md §6.5's daemon threads differ from the code's daemon=True"


def test_what_is_type_checked_is_what_the_page_says() -> None:
    types = DOC[DOC.index("**Type checking and lint**"):]
    types = types[:types.index("\n\n")]
    assert "not yet" not in types
    assert "strict over every\nmodule of `engine/`, `daemon/`" in types and "`tray/`" in types
    settings = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert settings["strict"] is True
    for override in settings.get("overrides", []):
        modules = override["module"] if isinstance(override["module"], list) else [override["module"]]
        assert all(m.startswith("ohsync.devserver") for m in modules), f"a looser override outside devserver: {modules}"
        assert not override.get("ignore_errors"), "an override that ignores errors"
    lint = (REPO / ".ci" / "lint.sh").read_text(encoding="utf-8")
    assert "-p ohsync.engine -p ohsync.daemon -p ohsync.tray" in lint
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "make lint" in ci or "lint.sh" in ci, ".ci/run does not run the lint"
    bare = [f"{f}:{n}" for folder in ("engine", "daemon", "tray") for path in sorted((REPO / folder).rglob("*.py"))
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            for f in [str(path.relative_to(REPO))] if re.search(r"type:\s*ignore(?!\[)", line)]
    assert bare == [], f"an ignore that names no error code: {bare}"


def test_the_client_uploads_are_called_only_where_the_page_says() -> None:
    writing = _section("5")
    callers = sorted({f for f, tree in _modules("engine") if not f.startswith("engine/client/")
                      for node in ast.walk(tree) if isinstance(node, ast.Call)
                      and isinstance(node.func, ast.Attribute) and node.func.attr.startswith("upload")
                      and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "client"})
    assert callers == ["engine/write_path.py"], callers
    assert all(f"`{f}`" in writing for f in callers)


def test_the_tray_loads_pystray_lazily_and_pillow_with_its_icons() -> None:
    eager = []
    for f, tree in _modules("tray"):
        for stmt in tree.body:
            for node in ast.walk(stmt):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                    eager += [(f, n) for n in names if n.split(".")[0] in ("pystray", "PIL")]
    assert eager == [("tray/icons.py", "PIL")], eager
    assert "pystray only inside `tray/desktop.py` `load_pystray`" in _section("2")
    assert "Pillow as `tray/icons.py` loads" in _section("2")


def test_the_socket_limits_are_the_protocols() -> None:
    from ohsync.daemon.protocol import MAX_DEPTH, MAX_REQUEST
    from ohsync.daemon.socket.server import HANDLER_THREADS

    socket_section = _section("7")
    assert f"a pool of {HANDLER_THREADS} threads" in socket_section
    assert MAX_REQUEST == 1024 * 1024 and "requests over 1 MiB" in socket_section
    assert f"deeper than {MAX_DEPTH} levels" in socket_section
    assert f"up to {HANDLER_THREADS} at once" in _section("6.5")


def test_the_cli_recipe_names_what_exists() -> None:
    from ohsync.daemon.cli import common, main

    recipe = DOC[DOC.index("- **A new CLI command**"):DOC.index("- **A new mirror option**")]
    for name in ("add_command", "add_mirror_option", "Subparsers"):
        assert f"`{name}" in recipe and hasattr(common, name), name
    assert "`COMMANDS`" in recipe and main.COMMANDS
    assert all(callable(getattr(module, "register", None)) for module in main.COMMANDS)


def test_the_lint_sentence_names_the_rules_ruff_runs() -> None:
    lint = DOC[DOC.index("**Type checking and lint**"):]
    text = " ".join(lint[:lint.index("\n\n")].split())
    rules = re.search(r"ruff checks the whole tree .*? with the rules (.*?): ", text)
    assert rules, "the **Type checking and lint** paragraph does not list ruff's rules (`with the rules ...:`)"
    ruff = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["ruff"]
    assert re.findall(r"`(\w+)`", rules.group(1)) == ruff["lint"]["select"]
    assert f"at {ruff['line-length']} columns" in text
