"""A kill between taking a live version away and checking it, then a restart.

``install`` exchanges the new version with the live file and only then
checks what it took; ``remove`` renames the live file away and then checks
it.  A save that lands just before the exchange or the rename is, for that
instant, only under the temp name ``.ohsync-tmp-*``.  A process killed
there (a power cut, an OOM kill: here a ``BaseException`` raised at the
step, which no ``except`` clause of the engine catches) must not lose it:
the next start keeps it as a conflict copy, and drops only what is known.
"""
from __future__ import annotations

import time

import pytest

from breaker_helpers import all_files, everywhere, synced_small
from engine_helpers import make_mirror
from ohsync.engine import local_replace
from ohsync.engine.crashpoints import set_hook
from ohsync.engine.ignore import TEMP_PREFIX
from ohsync.engine.temp_marks import OURS_SUFFIX

BASE = b"one\ntwo\nthree\n"
SAVED = b"PERSON SAVED LINE\n"


class Killed(BaseException):
    """Stands for SIGKILL: nothing of the engine runs after it (no except clause catches it)."""


@pytest.fixture
def hooks():
    armed: dict[str, object] = {}
    fired: list[str] = []

    def hook(name: str) -> None:
        action = armed.pop(name, None)
        if action is not None:
            fired.append(name)
            action()

    previous = set_hook(hook)
    yield armed, fired
    set_hook(previous)


def _kill() -> None:
    raise Killed("killed")


def _temps(folder) -> list[bytes]:
    """The contents of the temp files (not their marks) in ``folder``."""
    return [p.read_bytes() for p in folder.iterdir()
            if p.name.startswith(TEMP_PREFIX) and not p.name.endswith(OURS_SUFFIX)]


def _restart_and_sync(devserver, m, tmp_path):
    """A new process on the same state and folder, three passes; returns it (closed)."""
    m.state.close()
    m.client.close()
    m2 = make_mirror(devserver, m.repo_id, tmp_path, "m")
    m2.engine._started = time.time() + 2  # the new process starts after the leftovers' last change
    try:
        for _ in range(3):
            assert m2.sync().errors == []
    finally:
        m2.state.close()
        m2.client.close()
    return m2


def _conflict_copies(m) -> dict[str, bytes]:
    return {k: v for k, v in all_files(m.root).items() if k.startswith("/.conflict/")}


def _save_is_live(m, tmp_path) -> None:
    where = everywhere(m, tmp_path)
    places = {k: [b for b in v if SAVED in b] for k, v in where.items()}
    assert places["mirror"] and places["server"], f"the saved line is not live: {places}"
    assert not any(p.name.startswith(TEMP_PREFIX) for p in m.root.rglob("*")), "temp files left behind"


def test_save_before_the_exchange_then_kill_then_restart_keeps_the_save(devserver, tmp_path, hooks):
    armed, fired = hooks
    m = synced_small(devserver, tmp_path, {"/docs/a.txt": BASE})
    devserver.put_file(m.repo_id, "/docs/a.txt", BASE + b"remote line\n")
    path = m.root / "docs" / "a.txt"

    def person_saves() -> None:   # an in-place save (echo >> file) after the backup, before the exchange
        with open(path, "ab") as fh:
            fh.write(SAVED)

    armed["replace.ready"] = person_saves
    armed["replace.exchanged"] = _kill
    with pytest.raises(Killed):
        m.sync()
    assert fired == ["replace.ready", "replace.exchanged"]
    assert _temps(path.parent) == [BASE + SAVED]  # the save's only copy

    m2 = _restart_and_sync(devserver, m, tmp_path)
    _save_is_live(m2, tmp_path)
    copies = _conflict_copies(m2)
    assert list(copies.values()) == [BASE + SAVED], copies
    assert all(k.startswith("/.conflict/docs/a__local__") for k in copies), copies


@pytest.mark.parametrize("point", ["replace.ready", "replace.exchanged"])
def test_kill_around_the_exchange_of_an_unsaved_file_leaves_no_copy(devserver, tmp_path, hooks, point):
    # the temp file holds our download, or the synced version taken away: both known, both dropped
    armed, _fired = hooks
    m = synced_small(devserver, tmp_path, {"/docs/a.txt": BASE})
    devserver.put_file(m.repo_id, "/docs/a.txt", BASE + b"remote line\n")
    armed[point] = _kill
    with pytest.raises(Killed):
        m.sync()
    assert len(_temps(m.root / "docs")) == 1

    m2 = _restart_and_sync(devserver, m, tmp_path)
    assert _conflict_copies(m2) == {}
    assert (m2.root / "docs" / "a.txt").read_bytes() == BASE + b"remote line\n"
    assert not any(p.name.startswith(TEMP_PREFIX) for p in m2.root.rglob("*"))


def test_save_before_a_local_remove_then_kill_then_restart_keeps_the_save(devserver, tmp_path, hooks, monkeypatch):
    armed, fired = hooks
    m = synced_small(devserver, tmp_path, {"/docs/a.txt": BASE})
    devserver.delete_path(m.repo_id, "/docs/a.txt")
    path = m.root / "docs" / "a.txt"

    def person_saves() -> None:   # after the backup, before the file is renamed away
        with open(path, "ab") as fh:
            fh.write(SAVED)

    real_fp = local_replace._fp

    def fp_killed_on_the_hold(p):   # the check of what the rename took away: killed just before it
        if p.name.startswith(TEMP_PREFIX):
            raise Killed("killed after the rename away")
        return real_fp(p)

    armed["delete.local_backed_up"] = person_saves
    monkeypatch.setattr(local_replace, "_fp", fp_killed_on_the_hold)
    with pytest.raises(Killed):
        m.sync()
    monkeypatch.setattr(local_replace, "_fp", real_fp)
    assert fired == ["delete.local_backed_up"]
    assert not path.exists() and _temps(path.parent) == [BASE + SAVED]  # the save's only copy

    m2 = _restart_and_sync(devserver, m, tmp_path)
    _save_is_live(m2, tmp_path)
    assert list(_conflict_copies(m2).values()) == [BASE + SAVED]
