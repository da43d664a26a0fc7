"""The watcher: bursts of writes become one dirty path; ignored names never appear."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import FakeEngine, wait_for  # noqa: E402

from ohsync.daemon.watcher import Watcher  # noqa: E402


class Recorder:
    def __init__(self) -> None:
        self.batches: list[tuple[list[str], bool]] = []
        self.lock = threading.Lock()

    def __call__(self, paths: list[str], full_scan: bool) -> None:
        with self.lock:
            self.batches.append((paths, full_scan))

    def paths(self) -> list[str]:
        with self.lock:
            return [p for b, _ in self.batches for p in b]


def _watch(root: Path, rec: Recorder, quiet: float = 0.5) -> Watcher:
    engine = FakeEngine(root)
    w = Watcher(root, engine.rel_path, rec, quiet=quiet)
    w.start()
    return w


def test_burst_of_writes_is_one_dirty_path(tmp_path: Path) -> None:
    (tmp_path / "journal").mkdir()
    target = tmp_path / "journal" / "2026-11.md"
    target.write_text("start\n", encoding="utf-8")
    rec = Recorder()
    w = _watch(tmp_path, rec, quiet=0.7)
    try:
        time.sleep(0.3)
        for i in range(10):  # an editor saving repeatedly, 0.1 s apart (< quiet)
            with open(target, "a", encoding="utf-8") as f:
                f.write(f"- [x] line {i}\n")
            time.sleep(0.1)
        wait_for(lambda: rec.paths(), timeout=15, what="a dirty path")
        time.sleep(1.5)  # nothing else may follow
        assert rec.paths() == ["journal/2026-11.md"]
        assert w.is_alive()
    finally:
        w.stop()
    assert not w.is_alive()


def test_temp_file_rename_reports_the_target_only(tmp_path: Path) -> None:
    rec = Recorder()
    w = _watch(tmp_path, rec)
    try:
        time.sleep(0.3)
        tmp = tmp_path / ".ohsync-tmp-abc"
        tmp.write_bytes(b"data")
        os.replace(tmp, tmp_path / "note.md")
        wait_for(lambda: "note.md" in rec.paths(), timeout=15, what="note.md")
        time.sleep(1.0)
        assert rec.paths() == ["note.md"]
    finally:
        w.stop()


def test_two_paths_and_a_new_folder(tmp_path: Path) -> None:
    rec = Recorder()
    w = _watch(tmp_path, rec)
    try:
        time.sleep(0.3)
        (tmp_path / "a.md").write_text("a")
        (tmp_path / "b.md").write_text("b")
        wait_for(lambda: set(rec.paths()) >= {"a.md", "b.md"}, timeout=15, what="a.md and b.md")
        (tmp_path / "sub").mkdir()
        wait_for(lambda: any(scan for _, scan in rec.batches), timeout=15, what="a full-scan request")
    finally:
        w.stop()


def test_move_records_of_finished_renames_are_swept(tmp_path: Path, monkeypatch) -> None:
    import ohsync.daemon.watcher as watcher_mod

    monkeypatch.setattr(watcher_mod, "MOVE_RECORD_SWEEP", 3600.0)
    rec = Recorder()
    w = _watch(tmp_path, rec, quiet=0.2)

    def records() -> int:
        total = 0
        for emitter in list(w._observer.emitters):  # type: ignore[union-attr]
            inotify = getattr(getattr(emitter, "_inotify", None), "_inotify", None)
            total += len(getattr(inotify, "_moved_from_events", {}))
        return total

    def saves(batch: int) -> None:  # atomic saves: a temp file, then a rename over the target
        for i in range(50):
            tmp = tmp_path / f".ohsync-tmp-{batch}-{i}"
            tmp.write_text(f"v{batch}.{i}\n", encoding="utf-8")
            os.replace(tmp, tmp_path / f"note-{i}.md")
        wait_for(lambda: len(rec.paths()) >= 50 * batch, timeout=15, what="the renamed files")
    try:
        time.sleep(0.3)
        saves(1)
        assert records() >= 50  # watchdog keeps one record per rename
        w._sweep_move_records()  # new since the last sweep: kept
        assert records() >= 50
        w._sweep_move_records()  # still there a sweep later: the renames are over
        assert records() == 0
        # the debounce thread does the same on its own, then sleeps without a timeout again
        monkeypatch.setattr(watcher_mod, "MOVE_RECORD_SWEEP", 0.3)
        saves(2)
        wait_for(lambda: records() == 0, timeout=15, what="the move records swept")
        wait_for(lambda: not w._old_moves, timeout=15, what="nothing left to sweep")
        assert sorted(set(rec.paths())) == sorted(f"note-{i}.md" for i in range(50))
        assert w.is_alive()
    finally:
        w.stop()
