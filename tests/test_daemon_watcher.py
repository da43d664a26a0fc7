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
