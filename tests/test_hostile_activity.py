"""Repeated failures of one path fold into one activity line; a success ends the run."""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import FakeEngine, FakeSession, wait_for  # noqa: E402

from ohsync.daemon.status import StatusModel  # noqa: E402
from ohsync.daemon.worker import SyncWorker  # noqa: E402
from ohsync.engine.events import SyncEvent, SyncReport  # noqa: E402


class FailingEngine(FakeEngine):
    """Every pass fails ``big.bin`` the same way, until told otherwise."""

    failing = True

    def sync(self, local_paths=None, *, check_remote=True, should_stop=None) -> SyncReport:
        self.calls.append((None, check_remote))
        report = SyncReport()
        if self.failing:
            message = "The upload is larger than the server accepts (HTTP 413)"
            self.on_event(SyncEvent("error", "big.bin", message=message))
            report.errors.append(("big.bin", message))
        else:
            self.on_event(SyncEvent("synced", "big.bin", "up", action="upload"))
            report.uploaded.append("big.bin")
        return report


def test_repeats_fold_into_one_line(tmp_path: Path) -> None:
    engine = FailingEngine(tmp_path)
    status = StatusModel(library="OH-Memory", local=str(tmp_path), poll_interval=0.05)
    status.watcher_alive = lambda: True

    def open_session(on_event):
        engine.on_event = on_event
        return FakeSession(engine)

    w = SyncWorker(open_session, status, poll_interval=0.05)
    w.start()
    try:
        wait_for(lambda: len(engine.calls) >= 6, what="six passes")
        lines = [a for a in w.activity(200) if a["path"] == "big.bin"]
        assert len(lines) == 1, lines
        assert lines[0]["count"] >= 6 - 1 and "failed" in lines[0]["message"] and "times since" in lines[0]["message"]
        engine.failing = False
        wait_for(lambda: any(a["result"] == "ok" for a in w.activity(200) if a["path"] == "big.bin"),
                 what="the success line")
        engine.failing = True
        wait_for(lambda: sum(a["result"] == "error" for a in w.activity(200) if a["path"] == "big.bin") == 2,
                 what="a new run after the success")
    finally:
        w.shutdown(10)
