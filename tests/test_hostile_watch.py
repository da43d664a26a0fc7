"""A folder moved into the mirror from outside is watched like any other."""

from __future__ import annotations

import os
import sys
import threading

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import wait_for
from ohsync.daemon.watcher import Watcher


def test_edits_inside_a_folder_moved_in_from_outside_are_seen(tmp_path) -> None:
    root, outside = tmp_path / "mirror", tmp_path / "elsewhere" / "project"
    root.mkdir()
    (outside / "sub").mkdir(parents=True)
    (outside / "sub" / "a.md").write_text("a\n")
    lock = threading.Lock()
    seen: list[tuple[list[str], bool]] = []

    def on_dirty(paths: list[str], scan: bool) -> None:
        with lock:
            seen.append((paths, scan))

    def dirty() -> set[str]:
        with lock:
            return {p for paths, _ in seen for p in paths}

    w = Watcher(root, lambda p: os.path.relpath(p, root), on_dirty, quiet=0.2)
    w.start()  # returns with the tree watched (watchdog adds its inotify watches in start())
    try:
        os.rename(outside, root / "project")
        wait_for(lambda: any(scan for _, scan in seen), timeout=10, what="a full scan for the moved-in folder")
        with lock:
            seen.clear()
        (root / "project" / "sub" / "a.md").write_text("a, edited\n")
        (root / "project" / "sub" / "new.md").write_text("new\n")
        (root / "project" / "sub" / "deeper").mkdir()
        # a created folder: the tree is watched afresh before its scan is reported
        wait_for(lambda: any(scan for _, scan in seen), timeout=10, what="the scan for the new folder deeper/")
        (root / "project" / "sub" / "deeper" / "b.md").write_text("b\n")
        wait_for(lambda: {"project/sub/a.md", "project/sub/new.md", "project/sub/deeper/b.md"} <= dirty(),
                 timeout=10, what="edits inside the moved-in folder")
        assert w.is_alive()
    finally:
        w.stop()
