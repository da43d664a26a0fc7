"""Local file events → debounced dirty paths.

A watchdog observer reports raw events for the mirror folder; this module
maps each to a library-relative path through the engine's ``rel_path``
(which returns None for ignored names and our own ``.ohsync-tmp-*`` files),
and hands a path on only after it has been quiet for ``quiet`` seconds, so an
editor's burst of writes and temp-file renames becomes one dirty path.
Directory creations, deletions and moves ask for a full local scan instead
(the engine then sees every file below).  A folder moved in from outside the
mirror arrives as a plain "created" event and inotify watches nothing inside
it, so after a directory creation the observer is started afresh (it then
watches the whole tree again) before the full scan is reported: later
edits inside the moved-in folder are seen, and anything written during the
swap is found by that scan.  The watcher never touches state: it only calls
``on_dirty``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

__all__ = ["Watcher", "DirtyCallback"]

log = logging.getLogger(__name__)

#: ``on_dirty(paths, full_scan)``: library-relative paths that changed, and
#: whether a full local scan is needed (directory-level changes).
DirtyCallback = Callable[[list[str], bool], None]

_IGNORED_TYPES = {"opened", "closed_no_write"}

#: Seconds between two sweeps of watchdog's move records (see :meth:`Watcher._sweep_move_records`).
MOVE_RECORD_SWEEP = 60.0


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: Watcher) -> None:
        self._watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in _IGNORED_TYPES:
            return
        if event.is_directory:
            if event.event_type in ("created", "deleted", "moved"):
                self._watcher._note_scan(rewatch=event.event_type == "created")
            if event.event_type in ("deleted", "moved"):
                self._watcher._restructured()
            return  # a directory's "modified" only echoes its children's events
        paths = [event.src_path]
        if event.event_type == "moved" and event.dest_path:
            paths.append(event.dest_path)
        self._watcher._note(os.fsdecode(p) for p in paths)


class Watcher:
    """Watch one mirror folder and report dirty paths after a quiet period.

    :param root: the local mirror folder.
    :param rel_path: absolute local path → library-relative path, or None
        when the path is outside the mirror or ignored (the engine's).
    :param on_dirty: called from the watcher's debounce thread.
    :param quiet: seconds without events before a path is reported.
    :param on_restructure: called at once (from the observer thread, not
        debounced) when a folder is moved or deleted, so that a running pass
        can stop before it writes into a folder that is no longer there.
    :param observer_factory: makes the watchdog observer (tests may pass a
        polling observer).
    """

    def __init__(
        self,
        root: Path,
        rel_path: Callable[[str], str | None],
        on_dirty: DirtyCallback,
        *,
        quiet: float = 0.7,
        observer_factory: Callable[[], BaseObserver] = Observer,
        on_restructure: Callable[[], None] = lambda: None,
    ) -> None:
        self.root = root
        self._rel_path = rel_path
        self._on_dirty = on_dirty
        self._quiet = quiet
        self._observer_factory = observer_factory
        self._on_restructure = on_restructure
        self._observer: BaseObserver | None = None
        self._pending: dict[str, float] = {}
        self._scan_at: float | None = None
        self._rewatch = False  # a folder appeared: watch the tree afresh before the scan
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._old_moves: dict[int, set[int]] = {}  # inotify object id -> cookies seen at the last sweep
        self._swept_at = time.monotonic()
        self._sweep_due = False

    def start(self) -> None:
        """Start the observer and the debounce thread.

        :raises OSError: the folder cannot be watched (missing, inotify limit).
        """
        self._observer = self._new_observer()
        self._thread = threading.Thread(target=self._debounce_loop, name="ohsync-watcher", daemon=True)
        self._thread.start()

    def _new_observer(self) -> BaseObserver:
        observer = self._observer_factory()
        observer.name = "ohsync-watch-observer"
        observer.schedule(_Handler(self), str(self.root), recursive=True)
        try:
            observer.start()
        except BaseException:
            observer.stop()
            raise
        return observer

    def _renew_observer(self) -> None:
        """Watch the whole tree afresh (called from the debounce thread, no lock held)."""
        old = self._observer
        try:
            self._observer = self._new_observer()
        except OSError as exc:  # e.g. the mirror folder itself is gone: the scan says so
            log.warning("cannot watch %s afresh (%s); keeping the current watch", self.root, exc.strerror or exc)
            return
        if old is not None:
            old.stop()
            old.join(timeout=5)

    def stop(self) -> None:
        """Stop both threads; pending paths that are not yet quiet are dropped
        (the next start's full scan finds them)."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def is_alive(self) -> bool:
        """True while both the observer and the debounce thread run."""
        return bool(self._observer and self._observer.is_alive() and self._thread and self._thread.is_alive())

    @property
    def pending(self) -> int:
        """Paths seen but not yet reported (still in their quiet period)."""
        with self._cond:
            return len(self._pending)

    def _note(self, local_paths: Iterable[str]) -> None:
        now = time.monotonic()
        rels = []
        for local_path in local_paths:
            try:
                rel = self._rel_path(local_path)
            except Exception:  # noqa: BLE001 - a bad name must not kill the observer
                log.exception("cannot map %s to a library path", local_path)
                continue
            if rel is not None:
                rels.append(rel)
        if not rels:
            return
        with self._cond:
            for rel in rels:
                self._pending[rel] = now
            self._cond.notify_all()

    def _restructured(self) -> None:
        try:
            self._on_restructure()
        except Exception:  # noqa: BLE001 - keep watching whatever the consumer did
            log.exception("restructure consumer failed")

    def _note_scan(self, rewatch: bool = False) -> None:
        with self._cond:
            self._scan_at = time.monotonic()
            self._rewatch = self._rewatch or rewatch
            self._cond.notify_all()

    def _debounce_loop(self) -> None:
        while True:
            with self._cond:
                if self._stopping:
                    return
                stamps = list(self._pending.values())
                if self._scan_at is not None:
                    stamps.append(self._scan_at)
                if not stamps:
                    # idle: wake only while watchdog holds move records to sweep
                    self._cond.wait(timeout=MOVE_RECORD_SWEEP if self._old_moves or self._sweep_due else None)
                    if not self._pending and self._scan_at is None and not self._stopping:
                        self._cond.release()
                        try:
                            self._sweep_move_records()
                        finally:
                            self._cond.acquire()
                    continue
                wake = min(stamps) + self._quiet
                now = time.monotonic()
                if wake > now:
                    self._cond.wait(timeout=wake - now)
                    continue
                # a full scan waits for the whole tree to be quiet, then takes every path along
                scan = self._scan_at is not None and max(stamps) + self._quiet <= now
                rewatch = False
                if scan:
                    ready = list(self._pending)
                    self._pending.clear()
                    self._scan_at = None
                    rewatch, self._rewatch = self._rewatch, False
                else:
                    ready = [p for p, t in self._pending.items() if t + self._quiet <= now]
                    for p in ready:
                        del self._pending[p]
                    if not ready:  # only the scan marker is due but the tree is still busy
                        self._cond.wait(timeout=self._quiet / 4)
                        continue
            if rewatch:
                self._renew_observer()  # before the scan: what changes during the swap is in it
            try:
                self._on_dirty(sorted(ready), scan)
            except Exception:  # noqa: BLE001 - keep watching whatever the consumer did
                log.exception("dirty-path consumer failed")
            if time.monotonic() - self._swept_at >= MOVE_RECORD_SWEEP:
                self._sweep_move_records()
            else:
                self._sweep_due = True  # these events may have left records: sweep when idle

    def _sweep_move_records(self) -> None:
        """Drop watchdog's records of renames that are over.

        watchdog 6's inotify backend keeps every ``IN_MOVED_FROM`` event by
        its cookie to pair it with the ``IN_MOVED_TO`` that follows, and never
        forgets it (gorakhargosh/watchdog#1041): one record per atomic save or
        download, about 300 bytes each, 9 MiB after a 30,000-file cold mirror.
        The kernel sends the two halves of a rename together, so a record
        already present at the previous sweep (at least a minute ago) will never
        be paired: it is dropped.  Reaches into watchdog's internals, so every
        step is guarded; a watchdog without them is left alone.
        """
        self._swept_at = time.monotonic()
        self._sweep_due = False
        seen: dict[int, set[int]] = {}
        for emitter in list(getattr(self._observer, "emitters", ()) or ()):
            inotify = getattr(getattr(emitter, "_inotify", None), "_inotify", None)
            records = getattr(inotify, "_moved_from_events", None)
            lock = getattr(inotify, "_lock", None)
            if not isinstance(records, dict) or lock is None:
                continue
            with lock:
                for cookie in self._old_moves.get(id(inotify), set()) & records.keys():
                    del records[cookie]
                if records:
                    seen[id(inotify)] = set(records)
        self._old_moves = seen
