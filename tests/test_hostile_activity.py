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


def test_a_file_the_server_fails_pass_after_pass_is_one_line_while_the_others_sync(devserver, tmp_path,
                                                                                    monkeypatch) -> None:
    """The real engine under the worker: a 503 on one file's reads, every pass."""
    from engine_helpers import USER, make_mirror, sample_library

    monkeypatch.setattr("ohsync.engine.failures.BACKOFF_BASE", 0.01)  # retried on every pass
    # Every push reads the file's detail before writing, so the fault below
    # fails each attempt before anything is uploaded (a push right after its
    # pass's listing would upload first and fail only at the read-back).
    monkeypatch.setattr("ohsync.engine.transfer.LISTING_TRUST", 0.0)
    repo_id = devserver.create_library(USER, "OH-Memory", from_tree=sample_library(tmp_path / "seed"))
    journal = "journal/2026-11.md"
    mirrors = []

    def open_session(on_event):
        mirror = make_mirror(devserver, repo_id, tmp_path)  # in the worker thread: its SQLite is this thread's
        mirror.engine.ctx.on_event = on_event
        mirrors.append(mirror)
        return FakeSession(mirror.engine)

    status = StatusModel(library="OH-Memory", local=str(tmp_path / "m"), poll_interval=0.05)
    status.watcher_alive = lambda: True
    w = SyncWorker(open_session, status, poll_interval=0.05, activity_size=1000)
    w.start()
    try:
        wait_for(lambda: status.status()["state"] in ("idle", "attention"), timeout=60, what="the first pass")
        mirror = mirrors[0]
        devserver.inject_fault("GET", r"/file/detail/.*2026-11", status=503, count=100_000)
        mirror.write(journal, mirror.read(journal) + b"- [x] 2026-11-30 10:00 local line\n")
        w.post_dirty([journal])
        before = len(w.activity(1000))
        lines = lambda: [a for a in w.activity(1000)[before:] if a["path"] == journal]  # noqa: E731
        wait_for(lambda: any(a.get("count", 1) >= 4 for a in lines()), timeout=60, what="four failed passes")
        (line,) = lines()
        assert line["result"] == "error" and "503" in line["message"] and "times since" in line["message"]
        assert b"local line" not in devserver.read_file(repo_id, "/" + journal)  # it really failed every time
        # another file still syncs while the journal keeps failing
        mirror.write("index.md", mirror.read("index.md") + b"\nedited meanwhile\n")
        w.post_dirty(["index.md"])
        wait_for(lambda: devserver.read_file(repo_id, "/index.md").endswith(b"\nedited meanwhile\n"),
                 timeout=60, what="index.md uploaded")
        assert len(lines()) == 1
        devserver.clear_faults()
        wait_for(lambda: any(a["result"] == "ok" for a in lines()), timeout=60, what="the journal synced")
    finally:
        w.shutdown(10)
