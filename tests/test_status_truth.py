"""Status tells the truth: a full scan is overdue only by the scheduler's own
plan; a missing optional endpoint is no failed file; ``wait`` counts the
conflicts of the pass a ``resume`` or ``refresh`` just started."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import FakeEngine, FakeSession, idle_snapshot, wait_for  # noqa: E402

from ohsync.daemon.status import StatusModel, build_status  # noqa: E402
from ohsync.daemon.worker import SyncWorker  # noqa: E402


def _worker(engine: FakeEngine, poll: float) -> tuple[SyncWorker, StatusModel]:
    status = StatusModel(library="OH-Memory", local=str(engine.local_root), poll_interval=poll)
    status.watcher_alive = lambda: True

    def open_session(on_event):  # noqa: ANN001, ANN202
        engine.on_event = on_event
        return FakeSession(engine)

    return SyncWorker(open_session, status, poll_interval=poll), status


def test_a_scan_spaced_by_its_cost_is_not_overdue() -> None:
    now = time.time()
    # poll 2 s; the scheduler spaces scans by 1,000 × a 1 s scan: the next one is due in 1,000 s
    planned = idle_snapshot(poll_interval=2, last_poll=now - 1, last_scan=now - 700, next_scan=now + 300)
    assert build_status(planned)["state"] == "idle"
    # a scan starts at the first poll after it is due: a few polls late is not overdue
    assert build_status(replace(planned, now=now + 330, last_poll=now + 329))["state"] == "idle"
    overdue = replace(planned, next_scan=now - 100)
    st = build_status(overdue)
    assert st["state"] == "error" and st["message"].startswith("No local scan since")
    # without a plan, the configured spacing (10 polls, at least 60 s) is the plan
    assert build_status(replace(planned, next_scan=None))["state"] == "error"


def test_the_worker_tells_status_when_the_scheduler_plans_the_next_scan(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path, delay=0.2)  # every pass, the full scan too, takes 0.2 s
    w, status = _worker(engine, poll=0.5)
    w.start()
    try:
        wait_for(lambda: status.get("next_scan") is not None and status.get("polls") >= 2, what="a scan and polls")
        snap = status.snapshot()
        assert snap.next_scan - snap.last_scan >= 150  # 1,000 × ~0.2 s, not the 60 s of the configured spacing
        later = snap.last_scan + 170  # past 2 × 60 + 30 s, before the planned scan
        assert build_status(replace(snap, now=later, last_poll=later - 1))["state"] == "idle"
        assert status.status()["next_scan"] is not None
    finally:
        assert w.shutdown(10)
