"""The status object: exact keys of docs/architecture.md §7.2 and honest states."""

from __future__ import annotations

import time

from daemon_helpers import idle_snapshot
from ohsync.daemon import protocol
from ohsync.daemon.status import STATES, StatusModel, build_status

KEYS = ["protocol", "state", "message", "last_sync", "pending_up", "pending_down", "conflicts",
        "damaged", "skipped", "held_deletes", "transfer", "mirrors"]


def _idle(**kw):
    return idle_snapshot(**kw)


def test_exact_shape_and_types() -> None:
    st = build_status(_idle(conflicts=1))
    assert list(st)[:len(KEYS)] == KEYS
    assert st["protocol"] == 1
    assert st["state"] == "attention" and st["message"].startswith("Needs attention: 1 conflict needs you")
    assert isinstance(st["last_sync"], str) and st["last_sync"][10] == "T"
    for k in ("pending_up", "pending_down", "conflicts", "damaged", "skipped", "held_deletes"):
        assert type(st[k]) is int
    assert st["conflicts"] == 1
    assert st["transfer"] is None
    [item] = st["mirrors"]
    assert {k: item[k] for k in ("name", "library", "local", "state", "message")} == {
        "name": "OH-Memory", "library": "OH-Memory", "local": "/home/u/OH-Memory",
        "state": "attention", "message": st["message"]}
    assert item["conflicts"] == 1 and item["attention"] == [] and item["last_sync"] == st["last_sync"]


def test_the_protocol_module_states_the_same_shape() -> None:
    """daemon/protocol.py, which the tray reads, names the keys and states build_status uses."""
    st = build_status(_idle())
    assert protocol.STATUS_KEYS == tuple(KEYS) == tuple(st)[:len(KEYS)]
    assert tuple(st["mirrors"][0]) == protocol.MIRROR_KEYS
    assert STATES == protocol.STATES and st["state"] == protocol.State.IDLE
    assert st["protocol"] == protocol.PROTOCOL


def test_transfer_shape() -> None:
    st = build_status(_idle(syncing=True, transfer={"path": "a.md", "direction": "up", "done": 3, "total": 9}))
    assert st["state"] == "syncing"
    assert st["transfer"] == {"path": "a.md", "direction": "up", "done": 3, "total": 9}


def test_idle_needs_poll_scan_and_watcher() -> None:
    now = time.time()
    assert build_status(_idle(last_poll=None))["state"] == "starting"
    assert build_status(_idle(last_scan=None))["state"] == "starting"
    assert build_status(_idle(phase="starting"))["state"] == "starting"
    st = build_status(_idle(watcher_alive=False))
    assert st["state"] == "error" and "watcher" in st["message"]
    assert build_status(_idle(last_poll=now - 1000))["state"] == "error"
    assert build_status(_idle(last_scan=now - 5000))["state"] == "error"
    assert build_status(_idle(pending_up=2))["state"] == "syncing"
    assert build_status(_idle(errors=1))["state"] == "error"


def test_named_problems() -> None:
    st = build_status(_idle(problem="auth_required"))
    assert st["state"] == "auth_required" and "ohsync login" in st["message"]
    st = build_status(_idle(problem="offline", problem_message="Cannot reach the server", retry_at=time.time() + 10))
    assert st["state"] == "offline" and "retrying in 10 s" in st["message"]
    st = build_status(_idle(problem="offline", problem_message="Cannot reach the server", retry_at=time.time() - 1))
    assert st["message"] == "Cannot reach the server; retrying now"
    assert build_status(_idle(problem="stopped", problem_message="gone"))["state"] == "stopped"
    assert build_status(_idle(paused=True))["state"] == "paused"
    assert build_status(_idle(problem="error", problem_message="boom"))["message"] == "boom"
    for s in (_idle(), _idle(paused=True), _idle(problem="offline"), _idle(last_poll=None)):
        assert build_status(s)["state"] in STATES


def test_model_notifies_on_change_only() -> None:
    model = StatusModel(library="L", local="/x", poll_interval=30)
    seen = []
    model.add_listener(seen.append)
    model.update(paused=True)
    model.update(paused=True)
    assert [s["state"] for s in seen] == ["paused"]
    model.update(paused=False)
    assert seen[-1]["state"] == "starting"


def test_a_far_off_clock_is_reported_and_changes_nothing_else() -> None:
    import time as _time

    from ohsync.daemon.status import Snapshot, build_status

    now = _time.time()
    base = dict(phase="running", watcher_alive=True, last_poll=now, last_scan=now, last_sync=now, now=now)
    assert build_status(Snapshot(**base, clock_offset=12.0))["message"] == "Up to date"
    st = build_status(Snapshot(**base, clock_offset=-3600.0))
    assert st["state"] == "idle" and "clock is 60 min ahead of the server" in st["message"]
    assert st["clock_offset"] == -3600


def test_an_open_conflict_needs_the_person_and_is_never_up_to_date() -> None:
    """A conflict copy needs the person to look at it: the state is ``attention`` and the message
    names the commands that list and settle it."""
    st = build_status(idle_snapshot(conflicts=2))
    assert st["state"] == "attention" and st["conflicts"] == 2
    assert st["message"] == ("Needs attention: 2 conflicts need you (`ohsync conflicts`, or compare both "
                             "versions in `ohsync panel`)")
    assert "Up to date" not in st["message"]
    one = build_status(idle_snapshot(conflicts=1, held_deletes=3))
    assert one["message"].startswith("Needs attention: 1 conflict needs you (`ohsync conflicts`")
    assert "3 deletions held by the safety valve (`ohsync confirm-deletes`)" in one["message"]
    assert build_status(idle_snapshot())["message"] == "Up to date"
