"""The import rules of docs/architecture.md §2, read from the source with ``ast``.

* ``tray/`` imports of ohsync only itself, ``ohsync.daemon.protocol`` and
  the thread base ``ohsync.daemon.service_thread``;
* ``daemon/protocol.py`` and ``daemon/service_thread.py`` import nothing else
  of ohsync (so the tray pulls in no more of the daemon than those two);
* ``engine/`` imports nothing of ``daemon``, ``tray`` or ``devserver``;
* ``devserver/`` imports nothing of ohsync outside itself (no code shared
  with ``engine/``);
* ``daemon/`` imports ``tray`` only lazily (inside functions), never at
  module level;
* memory (``engine/memory/``) and filing (``engine/filing/``) are features on
  top of the sync core: the core never imports filing, and of memory only
  the hooks a sync pass calls (the memory-file merge, the damaged check, the
  edit stamp); filing sees the engine only through ``engine/filing/api.py``;
  neither feature imports the other;
* the product imports itself relatively (``from ..engine.errors import …``),
  never as ``ohsync.…``;
* composition, not mixins: the Seafile client (``engine/client/``) and the
  sync worker (``daemon/worker/``) hold their parts, and no class in
  ``daemon/`` has more than two bases;
* no import cycle in ``engine/``, ``daemon/`` and ``tray/``, imports inside
  functions counted (only ``if TYPE_CHECKING:`` ones are not).
"""

from __future__ import annotations

import ast
import graphlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FOLDERS = ("engine", "daemon", "tray", "devserver")


def imported_modules(source: str, module: str, *, top_level_only: bool = False) -> Iterator[tuple[int, str]]:
    """``(line, dotted name)`` of every ohsync module that ``source`` imports.

    :param module: the dotted name of the module the source belongs to
        (``ohsync.tray.app``), to resolve relative imports.
    :param top_level_only: only statements at module level (not inside a
        function or class), i.e. imports that run when the module loads.
    """
    tree = ast.parse(source)
    if top_level_only:  # imports under a module-level if/try still run when the module loads
        nodes = [n for stmt in tree.body if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                 for n in ast.walk(stmt)]
    else:
        nodes = list(ast.walk(tree))
    package = module.rsplit(".", 1)[0]  # ohsync.tray for ohsync.tray.app and ohsync.tray.__init__
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "ohsync" or alias.name.startswith("ohsync."):
                    yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            if target != "ohsync" and not target.startswith("ohsync."):
                continue
            for alias in node.names:
                # ``from ohsync.daemon import protocol`` imports the module ohsync.daemon.protocol
                yield node.lineno, target if target.count(".") >= 2 else f"{target}.{alias.name}"


def _sources(folder: str) -> Iterator[tuple[Path, str]]:
    for path in sorted((REPO / folder).rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        yield path, "ohsync." + ".".join(rel.parts)


def _violations(folder: str, allowed: Callable[[str], bool], *, top_level_only: bool = False) -> list[str]:
    found = []
    for path, module in _sources(folder):
        for line, name in imported_modules(path.read_text(encoding="utf-8"), module, top_level_only=top_level_only):
            if not allowed(name):
                found.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    return found


def _within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def test_the_checker_resolves_every_import_form() -> None:
    source = ("import ohsync.daemon.config\nfrom ohsync.daemon import protocol\n"
              "from ohsync.daemon.protocol import Method\n"
              "from . import icons\nfrom .menu_model import Action\nfrom ..engine import sync\nimport json\n"
              "def f():\n    from ohsync.engine.errors import OhsyncError\n")
    names = [name for _line, name in imported_modules(source, "ohsync.tray.app")]
    assert names == ["ohsync.daemon.config", "ohsync.daemon.protocol", "ohsync.daemon.protocol",
                     "ohsync.tray.icons", "ohsync.tray.menu_model", "ohsync.engine.sync", "ohsync.engine.errors"]
    top = [name for _line, name in imported_modules(source, "ohsync.tray.app", top_level_only=True)]
    assert "ohsync.engine.errors" not in top and "ohsync.daemon.config" in top


TRAY_MAY_IMPORT = ("ohsync.daemon.protocol", "ohsync.daemon.service_thread")


def test_the_tray_imports_only_the_protocol_and_the_thread_base_of_the_daemon() -> None:
    found = _violations("tray", lambda n: _within(n, "ohsync.tray") or n in TRAY_MAY_IMPORT)
    assert found == [], f"tray/ may import only {TRAY_MAY_IMPORT} of the daemon (§2):\n" + "\n".join(found)


@pytest.mark.parametrize("module", TRAY_MAY_IMPORT)
def test_what_the_tray_imports_of_the_daemon_imports_nothing_else_of_ohsync(module: str) -> None:
    path = REPO / (module.removeprefix("ohsync.").replace(".", "/") + ".py")
    found = list(imported_modules(path.read_text(encoding="utf-8"), module))
    assert found == [], f"{path.relative_to(REPO)} must stand alone (the tray imports it): {found}"


def test_the_engine_imports_nothing_of_daemon_tray_or_devserver() -> None:
    found = _violations("engine", lambda n: not any(_within(n, f"ohsync.{p}")
                                                    for p in ("daemon", "tray", "devserver")))
    assert found == [], "engine/ must not import daemon, tray or devserver (§2):\n" + "\n".join(found)


@pytest.mark.parametrize("other", ["engine", "daemon", "tray"])
def test_the_devserver_shares_no_code_with_ohsync(other: str) -> None:
    found = _violations("devserver", lambda n: not _within(n, f"ohsync.{other}"))
    assert found == [], f"devserver/ must not import {other} (§2):\n" + "\n".join(found)


def test_the_daemon_imports_the_tray_only_lazily() -> None:
    found = _violations("daemon", lambda n: not _within(n, "ohsync.tray"), top_level_only=True)
    assert found == [], "daemon/ imports tray only inside the commands that show it (§2):\n" + "\n".join(found)


def _absolute_self_imports(source: str) -> Iterator[tuple[int, str]]:
    """``(line, statement)`` of every import of ohsync that names it absolutely."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "ohsync" or alias.name.startswith("ohsync."):
                    yield node.lineno, f"import {alias.name}"
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module \
                and (node.module == "ohsync" or node.module.startswith("ohsync.")):
            yield node.lineno, f"from {node.module} import …"


def test_the_absolute_import_checker_sees_both_forms() -> None:
    source = ("import ohsync.devserver\nfrom ohsync.engine.errors import OhsyncError\nfrom . import icons\n"
              "from ..engine import sync\nimport json\ndef f():\n    from ohsync import engine\n")
    assert [line for line, _ in _absolute_self_imports(source)] == [1, 2, 7]


@pytest.mark.parametrize("folder", FOLDERS)
def test_the_product_imports_itself_relatively(folder: str) -> None:
    found = [f"{path.relative_to(REPO)}:{line} {what}" for path, _module in _sources(folder)
             for line, what in _absolute_self_imports(path.read_text(encoding="utf-8"))]
    assert found == [], (f"{folder}/ imports ohsync relatively (`from .x import`, `from ..engine.x import`), "
                         "as httpx and Maestral do:\n" + "\n".join(found))


def _process_reach(path: Path, root: Path = REPO) -> list[str]:
    """Where a module kills a process, sends signals or reads ``/proc``."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [f"import {a.name}" for a in node.names if a.name == "signal"]
        elif isinstance(node, ast.ImportFrom) and node.module == "signal":
            found.append("from signal import …")
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [f"from os import {a.name}" for a in node.names if a.name in ("kill", "killpg")]
        elif isinstance(node, ast.Attribute) and node.attr in ("kill", "killpg") \
                and isinstance(node.value, ast.Name) and node.value.id == "os":
            found.append(f"os.{node.attr}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "/proc" in node.value:
            found.append(f"the string {node.value!r}")
    return [f"{path.relative_to(root)}:{what}" for what in found]


def test_the_process_checker_sees_kills_signals_and_proc(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import os, signal\nfrom os import kill\ndef f():\n    os.kill(1, signal.SIGKILL)\n"
                     "    return open(f'/proc/{1}/fd')\n", encoding="utf-8")
    found = sorted(hit.split(":", 1)[1] for hit in _process_reach(probe, tmp_path))
    assert found == sorted(["import signal", "from os import kill", "os.kill", "the string '/proc/'"])


def test_the_engine_kills_no_process_and_reads_no_proc() -> None:
    found = [hit for path, _module in _sources("engine") for hit in _process_reach(path)]
    assert found == [], ("engine/ is pure: no os.kill, no signals, no /proc (crash points only announce, "
                         "the daemon decides; /proc checks live in daemon/):\n" + "\n".join(found))


#: The engine's features on top of the sync core (subpackages of engine/).
FEATURES = ("memory", "filing")
#: What the sync core may import of each feature: the memory hooks a sync pass calls
#: (the memory-file merge, the damaged check, the stamp of a person's edit), nothing of filing.
CORE_MAY_USE = {"memory": ("merge", "check", "stamp"), "filing": ()}


def _feature_of(path: Path) -> str | None:
    """The feature package of engine/ that ``path`` belongs to, or None for the sync core."""
    parts = path.relative_to(REPO / "engine").parts
    return parts[0] if len(parts) > 1 and parts[0] in FEATURES else None


def test_the_feature_checker_tells_features_from_the_core() -> None:
    assert _feature_of(REPO / "engine" / "memory" / "index.py") == "memory"
    assert _feature_of(REPO / "engine" / "filing" / "__init__.py") == "filing"
    assert _feature_of(REPO / "engine" / "sync.py") is None
    assert _feature_of(REPO / "engine" / "client" / "seafile.py") is None
    assert {_feature_of(path) for path, _module in _sources("engine")} == {None, *FEATURES}


def test_the_sync_core_uses_its_features_only_through_their_hooks() -> None:
    """engine/ outside engine/memory/ and engine/filing/ imports nothing of
    filing and of memory only the modules a sync pass calls."""
    found = []
    for path, module in _sources("engine"):
        if _feature_of(path) is not None:
            continue
        for line, name in imported_modules(path.read_text(encoding="utf-8"), module):
            for feature in FEATURES:
                if _within(name, f"ohsync.engine.{feature}") and not any(
                        _within(name, f"ohsync.engine.{feature}.{hook}") for hook in CORE_MAY_USE[feature]):
                    found.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    assert found == [], ("the sync core does not depend on the features on top of it (memory: only "
                         f"{', '.join(CORE_MAY_USE['memory'])}; filing: nothing):\n" + "\n".join(found))


def test_memory_and_filing_do_not_import_each_other() -> None:
    found = []
    for path, module in _sources("engine"):
        feature = _feature_of(path)
        if feature is None:
            continue
        for line, name in imported_modules(path.read_text(encoding="utf-8"), module):
            if any(_within(name, f"ohsync.engine.{other}") for other in FEATURES if other != feature):
                found.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    assert found == [], "engine/memory/ and engine/filing/ are separate features:\n" + "\n".join(found)


def test_filing_sees_the_engine_only_through_its_api() -> None:
    """engine/filing/ imports nothing of the engine's insides (context,
    state, transfers, sync, client): it goes through engine/filing/api.py."""
    inside = ("context", "state", "transfer", "transfer_large", "sync", "client", "upload_batch", "mirror_api")
    found = []
    for path, module in _sources("engine"):
        if _feature_of(path) != "filing":
            continue
        for line, name in imported_modules(path.read_text(encoding="utf-8"), module):
            if any(_within(name, f"ohsync.engine.{m}") or name.startswith("ohsync.engine.client")
                   for m in inside):
                found.append(f"{path.relative_to(REPO)}:{line} imports {name}")
    assert found == [], "filing uses only its narrow engine API (engine/filing/api.py):\n" + "\n".join(found)


def _classes(folder: Path) -> list[tuple[Path, ast.ClassDef]]:
    return [(path, node) for path in sorted(folder.rglob("*.py"))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(node, ast.ClassDef)]


def _inherited(folder: Path, *, most_bases: int) -> tuple[set[str], list[str]]:
    """The class names defined under ``folder``, and the classes there that
    derive from one of them or have more than ``most_bases`` bases."""
    classes = _classes(folder)
    ours = {node.name for _, node in classes}
    found = []
    for path, node in classes:
        bases = [ast.unparse(b) for b in node.bases]
        if len(bases) > most_bases or any(b in ours for b in bases):
            found.append(f"{path.relative_to(REPO)}:{node.lineno} class {node.name}({', '.join(bases)})")
    return ours, found


def test_the_seafile_client_is_composed_not_inherited() -> None:
    """engine/client/: one transport and call groups composed onto it; no class
    there derives from another class of the package, none has more than two bases."""
    ours, found = _inherited(REPO / "engine" / "client", most_bases=2)
    assert "SeafileClient" in ours and "SeafileHTTP" in ours
    assert found == [], "the client's parts are composed, not mixed in:\n" + "\n".join(found)


def test_the_sync_worker_holds_its_parts() -> None:
    """daemon/worker/: the worker holds its requests and recovery parts; no
    class there derives from another class of the package or has more than one base."""
    ours, found = _inherited(REPO / "daemon" / "worker", most_bases=1)
    assert {"SyncWorker", "WorkerRequests", "WorkerRecovery", "MirrorFacts"} <= ours
    assert found == [], "the worker's parts are composed, not mixed in:\n" + "\n".join(found)


def test_no_class_of_the_daemon_has_more_than_two_bases() -> None:
    found = [f"{path.relative_to(REPO)}:{node.lineno} class {node.name}" for path, node in _classes(REPO / "daemon")
             if len(node.bases) > 2]
    assert found == [], "composition, not mixins:\n" + "\n".join(found)


# ----------------------------------------------------------------------------- cycles

def _type_checking_only(tree: ast.Module) -> set[int]:
    """Ids of the nodes under ``if TYPE_CHECKING:`` (imported for annotations only, never run)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skip.update(id(n) for n in ast.walk(child))
    return skip


def import_graph(sources: dict[str, str], packages: set[str]) -> dict[str, set[str]]:
    """Module → the modules of ``sources`` it imports anywhere (module level
    or inside a function: both run), ``from pkg import module`` resolved to
    the module; imports under ``if TYPE_CHECKING:`` do not count.

    :param sources: dotted module name → its source.
    :param packages: the names in ``sources`` that are packages (``__init__``).
    """
    graph: dict[str, set[str]] = {}
    for module, source in sources.items():
        tree = ast.parse(source)
        skip = _type_checking_only(tree)
        package = module if module in packages else module.rsplit(".", 1)[0]
        deps: set[str] = set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in sources)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1])
                    target = f"{base}.{node.module}" if node.module else base
                else:
                    target = node.module or ""
                names = {f"{target}.{a.name}" for a in node.names} & set(sources)
                deps.update(names or ({target} & set(sources)))
        deps.discard(module)
        graph[module] = deps
    return graph


def _product_sources() -> tuple[dict[str, str], set[str]]:
    sources: dict[str, str] = {}
    packages: set[str] = set()
    for folder in ("engine", "daemon", "tray"):
        for path, module in _sources(folder):
            if path.name == "__init__.py":
                module = module.removesuffix(".__init__")
                packages.add(module)
            sources[module] = path.read_text(encoding="utf-8")
    return sources, packages


def test_the_cycle_checker_sees_a_cycle_through_an_import_inside_a_function() -> None:
    sources = {"p.a": "from .b import x\n", "p.b": "def f():\n    from .a import y\n",
               "p.c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .a import z\n",
               "p.d": "from p import c\n", "p": ""}
    graph = import_graph(sources, {"p"})
    assert graph["p.a"] == {"p.b"} and graph["p.b"] == {"p.a"}
    assert graph["p.c"] == set(), "an import for annotations only is no edge"
    assert graph["p.d"] == {"p.c"}, "from a package import a module: an edge to the module"
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(graph).prepare()


def test_the_product_has_no_import_cycle_counting_imports_inside_functions() -> None:
    # an import moved into a function to dodge a cycle still runs: the parts must layer
    sources, packages = _product_sources()
    graph = import_graph(sources, packages)
    assert sum(len(d) for d in graph.values()) > 500, "the checker found too few imports to mean anything"
    try:
        graphlib.TopologicalSorter(graph).prepare()
    except graphlib.CycleError as exc:
        raise AssertionError(f"import cycle: {' -> '.join(exc.args[1])}") from None


def test_every_relative_import_names_a_module_of_the_product() -> None:
    # mypy ignores missing imports (for untyped libraries), so a relative import left pointing
    # at a module's old place would only fail when it runs
    sources, packages = _product_sources()
    broken = []
    for module, source in sources.items():
        package = module if module in packages else module.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ImportFrom) and node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
                names = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
                broken += [f"{module}:{node.lineno} imports {name}" for name in names if not _exists(name)]
    assert broken == []


def _exists(name: str) -> bool:
    """A module or package of the checkout by its dotted name (``ohsync.x.y``)."""
    path = REPO.joinpath(*name.split(".")[1:])
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()
