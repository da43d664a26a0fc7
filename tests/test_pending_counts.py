"""``pending_up`` and ``pending_down`` are honest: pending_up counts distinct
paths awaiting push after echo suppression (our own writes are not
changes), pending_down counts the remote changes a pass found and has not
applied yet, both follow the pass and say what it left."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import FakeEngine, FakeSession, wait_for
from engine_helpers import USER, make_mirror, read_tree, sample_library
from ohsync.daemon.status import (
    Snapshot,
    StatusModel,
    build_status,
)
from ohsync.daemon.worker import SyncWorker
from ohsync.engine.events import SyncEvent, SyncReport


def _synced(devserver, tmp_path: Path):
    repo = devserver.create_library(USER, "OH-Memory", from_tree=sample_library(tmp_path / "seed"))
    m = make_mirror(devserver, repo, tmp_path)
    m.sync()
    return m


def _files(m) -> list[str]:
    return [p.lstrip("/") for p in read_tree(m.root)]


def test_our_own_downloads_do_not_await_push_and_real_edits_do(devserver, tmp_path: Path) -> None:
    m = _synced(devserver, tmp_path)
    downloaded = _files(m)
    assert len(downloaded) > 10
    assert m.engine.awaiting_push(downloaded) == set()          # every event of our writes is an echo
    edited, gone = downloaded[0], downloaded[1]
    m.write(edited, b"edited at the desk\n")
    (m.root / gone).unlink()
    m.write("brand-new.md", b"# new\n")
    m.write(".ohsync-tmp-partial", b"ours, ignored")
    seen = [edited, edited, gone, "brand-new.md", ".ohsync-tmp-partial", "never-existed.md", *downloaded[2:]]
    assert m.engine.awaiting_push(seen) == {edited, gone, "brand-new.md"}


def test_pending_down_counts_the_remote_changes_the_pass_has_not_applied(devserver, tmp_path: Path) -> None:
    m = _synced(devserver, tmp_path)
    targets = sorted(p for p in _files(m) if p.endswith(".md"))[:4]
    for rel in targets:
        devserver.put_file(m.repo_id, "/" + rel, b"changed on the phone: " + rel.encode() + b"\n")
    m.write("local-only.md", b"# written here\n")
    events: list[SyncEvent] = []
    m.engine.ctx.on_event = events.append
    report = m.sync()
    pending = [(e.direction, e.total) for e in events if e.kind == "pending"]
    downs = [t for d, t in pending if d == "down"]
    ups = [t for d, t in pending if d == "up"]
    assert downs[0] == 4 and downs[-1] == 0 and downs == sorted(downs, reverse=True)
    assert ups[0] == 1 and ups[-1] == 0
    # each count drops right after its path was carried across, not at the end
    first_synced = next(i for i, e in enumerate(events) if e.kind == "synced")
    assert any(e.kind == "pending" and e.direction == "down" and e.total == 3 for e in events[first_synced:])
    assert sorted(report.downloaded) == targets and report.waiting_down == [] and report.waiting_up == []


def test_an_interrupted_pass_reports_what_still_waits(devserver, tmp_path: Path) -> None:
    m = _synced(devserver, tmp_path)
    targets = sorted(p for p in _files(m) if p.endswith(".md"))[:3]
    for rel in targets:
        devserver.put_file(m.repo_id, "/" + rel, b"changed remotely\n")
    events: list[SyncEvent] = []
    m.engine.ctx.on_event = events.append
    report = m.engine.sync(should_stop=lambda: any(e.kind == "synced" for e in events))
    assert report.interrupted and len(report.downloaded) == 1
    assert sorted(report.waiting_down) == sorted(set(targets) - set(report.downloaded))
    assert [e.total for e in events if e.kind == "pending" and e.direction == "down"][-1] == 2
    finished = m.sync()
    assert sorted(finished.downloaded) == report.waiting_down and finished.waiting_down == []


def test_the_worker_counts_distinct_paths_awaiting_push_without_echoes(devserver, tmp_path: Path) -> None:
    m = _synced(devserver, tmp_path)
    status = StatusModel(library="OH-Memory", local=str(m.root), poll_interval=60)
    status.watcher_alive = lambda: True
    w = SyncWorker(lambda on_event: FakeSession(m.engine), status, poll_interval=60)  # type: ignore[arg-type]
    w.start()
    try:
        settled = ("idle", "attention")  # the sample library holds a damaged memory file on purpose
        wait_for(lambda: status.status()["state"] in settled, timeout=60, what="the first pass")
        w.pause()
        wait_for(lambda: status.status()["state"] == "paused", what="paused")
        downloaded = _files(m)
        w.post_dirty(downloaded)                  # the watcher's events of our own writes
        m.write(downloaded[0], b"edited\n")
        m.write("new.md", b"# new\n")
        w.post_dirty([downloaded[0], "new.md"])
        w.post_dirty(["new.md"])                  # seen twice: one path
        wait_for(lambda: status.status()["pending_up"] == 2, what="two paths awaiting push")
        assert status.status()["pending_down"] == 0
        w.resume()
        wait_for(lambda: status.status()["state"] in settled, timeout=60, what="synced after resume")
        assert status.status()["pending_up"] == 0
        assert devserver.read_file(m.repo_id, "/new.md") == b"# new\n"
    finally:
        assert w.shutdown(10)
        m.state.close()
        m.client.close()


class _SlowDownloads(FakeEngine):
    """Says the pass found three remote changes, then waits to be released."""

    release: threading.Event

    def sync(self, local_paths=None, *, check_remote=True, should_stop=None) -> SyncReport:
        if local_paths is None and self.on_event is not None and len(self.calls) == 1:
            self.calls.append((None, check_remote))
            self.on_event(SyncEvent("pending", "", "down", total=3))
            self.on_event(SyncEvent("synced", "a.md", "down", action="download"))
            self.on_event(SyncEvent("pending", "", "down", total=2))
            self.release.wait(10)
            return SyncReport(downloaded=["a.md"], interrupted=False, waiting_down=[])
        return super().sync(local_paths, check_remote=check_remote, should_stop=should_stop)


def test_the_worker_shows_pending_down_during_the_pass_and_clears_it_after(tmp_path: Path) -> None:
    engine = _SlowDownloads(tmp_path)
    engine.release = threading.Event()
    engine.calls.append(("first", True))  # type: ignore[arg-type]  # the slow pass is the first real one
    status = StatusModel(library="OH-Memory", local=str(tmp_path), poll_interval=60)
    status.watcher_alive = lambda: True

    def open_session(on_event):
        engine.on_event = on_event
        return FakeSession(engine)

    w = SyncWorker(open_session, status, poll_interval=60)
    w.start()
    try:
        wait_for(lambda: status.status()["pending_down"] == 2, what="pending_down during the pass")
        assert status.status()["state"] == "syncing"
        engine.release.set()
        wait_for(lambda: status.status()["state"] == "idle", what="idle")
        assert status.status()["pending_down"] == 0
    finally:
        engine.release.set()
        assert w.shutdown(10)


def test_status_says_which_way_the_waiting_changes_go() -> None:
    st = build_status(Snapshot(phase="running", watcher_alive=True, last_poll=1.7e9, last_scan=1.7e9, now=1.7e9,
                               pending_up=2, pending_down=1))
    assert st["state"] == "syncing" and (st["pending_up"], st["pending_down"]) == (2, 1)
    assert st["message"] == "3 change(s) waiting to sync: 2 to upload, 1 to download"


def test_deletes_the_valve_holds_are_never_counted_as_waiting_to_upload(devserver, tmp_path: Path) -> None:
    m = _synced(devserver, tmp_path)
    victims = sorted(p for p in _files(m) if p.endswith(".md"))[:14]   # past the valve's floor and share
    for rel in victims:
        (m.root / rel).unlink()
    assert len(m.sync().held_deletes) == 14
    events: list[SyncEvent] = []
    m.engine.ctx.on_event = events.append
    m.write("knowledge/after.md", b"a real change\n")
    m.sync()                                              # a full pass with the deletes still held
    m.sync(["knowledge/after.md", *victims[:3]])          # a watcher-shaped pass naming some of them
    ups = [e.total for e in events if e.kind == "pending" and e.direction == "up"]
    assert ups and max(ups) <= 1, ups                     # only the real change ever waited
    assert len(m.engine.held_deletes()) == 14
    assert m.engine.confirm_deletes() == 14
    events.clear()
    report = m.sync()
    ups = [e.total for e in events if e.kind == "pending" and e.direction == "up"]
    assert len(report.deleted_remote) == 14 and ups[0] == 14 and ups[-1] == 0   # confirmed: they wait, then go
