"""Status tells the truth: a full scan is overdue only by the scheduler's own
plan; a missing optional endpoint is no failed file; ``wait`` counts the
conflicts of the pass a ``resume`` or ``refresh`` just started."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import FakeEngine, FakeSession, idle_snapshot, isolated_env, wait_for  # noqa: F401
from ohsync.daemon.status import StatusModel, build_status
from ohsync.daemon.worker import SyncWorker
from ohsync.engine.events import ConflictRecord, SyncReport


def _worker(engine: FakeEngine, poll: float) -> tuple[SyncWorker, StatusModel]:
    status = StatusModel(library="OH-Memory", local=str(engine.local_root), poll_interval=poll)
    status.watcher_alive = lambda: True

    def open_session(on_event):
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


@dataclass
class ConflictingEngine(FakeEngine):
    """A fake engine whose next pass makes the conflict copy the test sets."""

    conflict_next_pass: ConflictRecord | None = None

    def sync(self, local_paths: Any = None, *, check_remote: bool = True, should_stop: Any = None) -> SyncReport:
        report = super().sync(local_paths, check_remote=check_remote, should_stop=should_stop)
        if self.conflict_next_pass is not None:
            self.conflict_list.append(self.conflict_next_pass)
            report.conflicts.append(self.conflict_next_pass)
            self.conflict_next_pass = None
        return report


@pytest.mark.parametrize("asked", ["refresh", "resume"])
def test_wait_right_after_a_refresh_or_resume_counts_the_conflict_its_pass_made(tmp_path: Path, asked: str) -> None:
    engine = ConflictingEngine(tmp_path)
    w, status = _worker(engine, poll=60.0)
    w.start()
    try:
        wait_for(lambda: status.status()["state"] == "idle", what="idle")
        if asked == "resume":
            w.pause()
            wait_for(lambda: status.status()["state"] == "paused", what="paused")
        engine.conflict_next_pass = ConflictRecord("notes/a.md", ".conflict/a__phone__20261201T230000Z.md",
                                                   "2026-12-01T23:00:00Z", "both edited")
        calls = len(engine.calls)
        getattr(w, asked)()
        # the pass that request started finished (and its conflict is known) before the wait begins
        wait_for(lambda: len(engine.calls) > calls and status.status()["conflicts"] == 1, what="the asked pass")
        synced, message, reasons = w.wait_detail(10)
        assert synced is False
        assert "notes/a.md" in message and ".conflict/a__phone__20261201T230000Z.md" in message
        assert [r["path"] for r in reasons] == ["notes/a.md"]
        assert w.wait(10) == (True, "")  # a wait after that one starts from it
    finally:
        assert w.shutdown(10)


def test_ohsync_wait_after_resume_fails_naming_the_conflict_its_pass_made(isolated_env, seed_daemon) -> None:
    s = seed_daemon(files={"notes/plan.txt": b"line one\nline two\n"}, poll_interval=0.5)
    proc = s.start(wait="idle")
    assert proc.cli("pause").returncode == 0
    (s.mirror / "notes" / "plan.txt").write_bytes(b"line one\nline two, as the desk says\n")
    s.srv.put_file(s.repo_id, "/notes/plan.txt", b"line one\nline two, as the phone says\n")
    assert proc.cli("resume").returncode == 0
    wait_for(lambda: proc.status()["conflicts"] == 1, timeout=60, what="the conflict copy of the resumed pass")
    r = proc.cli("wait", "--timeout", "30")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "Everything is synced" not in r.stdout and "notes/plan.txt" in r.stderr
    r = proc.cli("wait", "--timeout", "30")  # a later wait starts from its own beginning
    assert r.returncode == 0, (r.stdout, r.stderr)


def test_a_merge_on_a_server_without_file_history_never_shows_an_error(isolated_env, seed_daemon) -> None:
    import threading

    memory = b"---\ntitle: Plan\n---\n# Plan\n\n## Observations\n- [note] first #seed\n"
    s = seed_daemon(files={"notes/plan.md": memory}, poll_interval=0.5)
    for rx in (r"/api/v2\.1/repos/[^/]+/file/history/", r"/api2/repos/[^/]+/file/history/",
               r"/api/v2\.1/repos/[^/]+/commits/", r"/api2/repos/[^/]+/file/revision/"):
        s.srv.inject_fault("GET", rx, status=404, count=10_000)
    proc = s.start(wait="idle")
    states: list[str] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            st = proc.status()
            states.append(f"{st['state']}: {st['message']}")
            time.sleep(0.05)  # why: the sampling interval of this status recorder

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        for n in range(2):
            assert proc.cli("pause").returncode == 0
            (s.mirror / "notes" / "plan.md").write_bytes(memory + f"- [note] desk {n} #desk\n".encode())
            s.srv.put_file(s.repo_id, "/notes/plan.md", memory + f"- [note] phone {n} #phone\n".encode())
            assert proc.cli("resume").returncode == 0
            wait_for(lambda n=n: f"desk {n}" in s.srv.read_file(s.repo_id, "/notes/plan.md").decode(), timeout=60,
                     what="the merge")
            time.sleep(1.5)  # why: a quiet period of three more polls, each must not report an error
    finally:
        done.set()
        watcher.join(10)
    assert not [st for st in states if st.startswith("error")], sorted(set(states))
    live = s.srv.read_file(s.repo_id, "/notes/plan.md").decode()
    assert "phone 1" in live and "desk 1" in live
