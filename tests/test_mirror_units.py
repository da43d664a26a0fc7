"""Several mirrors, piece by piece: the combined status shape, the worst state,
the worker's own control state, a fatal error that stops one mirror only."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import FakeEngine, FakeSession, wait_for
from ohsync.daemon import protocol
from ohsync.daemon.status import Snapshot, StatusModel, build_status
from ohsync.daemon.worker import FatalError, SyncWorker


def _status(name: str, local: str, **facts) -> dict:
    now = 1_000_000.0
    snap = Snapshot(library=name, local=local, name=name, phase="running", watcher_alive=True, last_poll=now,
                    last_scan=now, last_sync=now, now=now, **facts)
    return build_status(snap)


def test_combined_status_keeps_the_first_mirror_at_the_top_and_lists_all() -> None:
    first = _status("OH-Memory", "/m")
    second = _status("Docs", "/d", problem="stopped", problem_message="Local folder /d is missing",
                     drop_dir="/drop", filing={"held": []})
    combined = protocol.combine_status([first, second])
    assert {k: combined[k] for k in protocol.STATUS_KEYS if k != "mirrors"} == {
        k: first[k] for k in protocol.STATUS_KEYS if k != "mirrors"}
    assert [(m["name"], m["state"]) for m in combined["mirrors"]] == [("OH-Memory", "idle"), ("Docs", "stopped")]
    assert all(tuple(m) == protocol.MIRROR_KEYS for m in combined["mirrors"])
    assert combined["drop_dir"] == "/drop"  # from the mirror that files
    assert protocol.combine_status([first]) == first


def test_worst_state_orders_by_severity_and_distrusts_unknown_states() -> None:
    assert protocol.worst_state(["idle", "syncing"]) == "syncing"
    assert protocol.worst_state(["idle", "attention", "paused"]) == "attention"
    assert protocol.worst_state(["offline", "stopped", "idle"]) == "stopped"
    assert protocol.worst_state(["idle", "from-a-newer-daemon"]) == "error"
    assert protocol.worst_state([]) == "idle"
    assert set(protocol.SEVERITY) == set(protocol.STATES)


def _worker(engine: FakeEngine, status: StatusModel, **kw) -> SyncWorker:
    def open_session(on_event):
        engine.on_event = on_event
        return FakeSession(engine)
    return SyncWorker(open_session, status, poll_interval=0.3, **kw)


def test_the_worker_owns_its_control_state(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path)
    status = StatusModel(library="OH-Memory", local=str(tmp_path), poll_interval=0.3)
    status.watcher_alive = lambda: True
    w = _worker(engine, status)
    w.start()
    try:
        wait_for(lambda: status.status()["state"] == "idle", what="idle")
        # what the status model shows never decides whether a pass runs
        status.update(paused=True, problem="stopped", problem_message="written by someone else")
        calls = len(engine.calls)
        assert w.wait(10) == (True, "")
        assert len(engine.calls) > calls and w.control.problem is None and not w.control.paused
        # the worker's own pause is shown at once and holds passes back
        w.pause()
        assert w.control.paused and status.get("paused")
        assert w.wait(0.5)[0] is False
        w.resume()
        assert not w.control.paused and not status.get("paused")
        assert w.wait(10)[0] is True
    finally:
        w.shutdown(10)


def test_a_fatal_error_of_one_mirror_stops_it_until_a_refresh(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path)
    status = StatusModel(library="Docs", local=str(tmp_path), poll_interval=0.3)
    status.watcher_alive = lambda: True
    fatal: list[BaseException] = []
    attempts = []

    def open_session(on_event):
        attempts.append(1)
        if len(attempts) == 1:
            raise FatalError("The library 'Docs' does not exist.")
        engine.on_event = on_event
        return FakeSession(engine)

    w = SyncWorker(open_session, status, poll_interval=0.3, on_fatal=fatal.append, exit_on_fatal=False)
    w.start()
    try:
        wait_for(lambda: status.status()["state"] == "stopped", what="stopped")
        assert status.status()["message"] == "The library 'Docs' does not exist." and fatal
        assert w.is_alive() and w.control.problem == "stopped"
        assert w.wait(0.5) == (False, "The library 'Docs' does not exist.")
        w.refresh()  # e.g. the library was created meanwhile
        wait_for(lambda: status.status()["state"] == "idle", what="idle after the refresh")
        assert len(attempts) == 2
    finally:
        w.shutdown(10)
