"""The folder services ask the kernel for changes only: a file or folder
opened, or closed after reading (every scan, hash and editor read causes
them), is never queued, parsed by watchdog or handed to a handler; a
change, and a close after writing, still is."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import wait_for
from ohsync.daemon.filing_service import FilingService
from ohsync.daemon.prompt_observer import CHANGE_EVENTS, prompt_observer
from ohsync.daemon.service_thread import ServiceThread
from ohsync.daemon.watcher import Watcher


class _Raw(FileSystemEventHandler):
    """Every event the observer hands on, as ``(type, path)``."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def on_any_event(self, event: FileSystemEvent) -> None:
        with self.lock:
            self.events.append((event.event_type, os.fsdecode(event.src_path)))

    def types(self) -> set[str]:
        with self.lock:
            return {t for t, _ in self.events}


class _Service(ServiceThread):
    event_filter = CHANGE_EVENTS


def test_reads_raise_no_event_and_changes_still_do(tmp_path: Path) -> None:
    (tmp_path / "notes").mkdir()
    note = tmp_path / "notes" / "n.md"
    note.write_text("a note\n", encoding="utf-8")
    raw = _Raw()
    observer = _Service("test-watch", prompt_observer).watch(tmp_path, raw)
    try:
        for _ in range(20):  # a scan's reads: the file and its folder opened and closed
            note.read_bytes()
            os.listdir(tmp_path / "notes")
        (tmp_path / "notes" / "later.md").write_text("written after the reads\n", encoding="utf-8")
        wait_for(lambda: "closed" in raw.types(), timeout=15, what="the close after writing later.md")
        # the kernel queues events in order: the reads' events, had any been asked for, came first
        assert raw.types() & {"opened", "closed_no_write"} == set()
        assert {"created", "closed"} <= raw.types()
        assert any(p.endswith("later.md") for _, p in raw.events)
        assert not any(p.endswith("n.md") for _, p in raw.events)
    finally:
        observer.stop()
        observer.join(5)


def test_both_folder_services_watch_changes_only() -> None:
    assert Watcher.event_filter is CHANGE_EVENTS and FilingService.event_filter is CHANGE_EVENTS


def test_a_link_to_a_folder_elsewhere_is_not_followed_by_the_filtered_watch(tmp_path: Path) -> None:
    """The filtered inotify mask keeps ``IN_DONT_FOLLOW``: a link to a folder
    outside, met when a new folder is watched, does not have its target
    watched (saves there would come in as paths of the watched folder)."""
    watched, elsewhere = tmp_path / "watched", tmp_path / "elsewhere"
    watched.mkdir()
    elsewhere.mkdir()
    raw = _Raw()
    observer = _Service("test-watch", prompt_observer).watch(watched, raw)
    try:
        (watched / "new").mkdir()
        os.symlink(elsewhere, watched / "new" / "docs")
        (watched / "new" / "first.txt").write_text("after the link\n", encoding="utf-8")
        wait_for(lambda: any(p.endswith("first.txt") for _, p in raw.events), timeout=15, what="first.txt")
        (elsewhere / "secret.txt").write_text("saved elsewhere\n", encoding="utf-8")
        (watched / "new" / "later.txt").write_text("written after the save elsewhere\n", encoding="utf-8")
        wait_for(lambda: any(t == "closed" and p.endswith("later.txt") for t, p in raw.events), timeout=15,
                 what="the close after writing later.txt")
        # in order: an event of secret.txt, had its folder been watched, came before later.txt's
        assert not any("secret" in p for _, p in raw.events), raw.events
    finally:
        observer.stop()
        observer.join(5)
