"""Local file events → debounced dirty paths.

A watchdog observer reports raw events for the mirror folder; this module
maps each to a library-relative path through the engine's ``rel_path``
(which returns None for ignored names and our own ``.ohsync-tmp-*`` files),
and hands a path on only after it has been quiet for ``quiet`` seconds, so an
editor's burst of writes and temp-file renames becomes one dirty path.  An
event that says a save is complete ends that wait early: the file closed
after writing (inotify's ``IN_CLOSE_WRITE``, watchdog's "closed") or a rename
onto it (the atomic save of most editors: a temp file renamed onto the
note).  Such a path is handed on once no event of any path came for
``settle`` seconds (:meth:`~ohsync.daemon.debounce.Debouncer.complete`), so
a save goes out at once and a burst still goes out as one batch; without
those signals (watchdog's polling observer reports no closes) the quiet
period applies.  While a full scan is pending every path waits for it, as
before.
Directory creations, deletions and moves ask for a full local scan instead
(the engine then sees every file below).  A folder moved in from outside the
mirror arrives as a plain "created" event and inotify watches nothing inside
it, so after a directory creation the observer is started afresh (it then
watches the whole tree again) before the full scan is reported: later
edits inside the moved-in folder are seen, and anything written during the
swap is found by that scan.  The watcher never touches state: it only calls
``on_dirty``.  Its threads are those of :class:`~ohsync.daemon.service_thread.ServiceThread`
and the quiet period that of :class:`~ohsync.daemon.debounce.Debouncer`,
shared with the drop-folder service.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers.api import BaseObserver

from .debounce import Debouncer
from .prompt_observer import CHANGE_EVENTS, prompt_observer
from .service_thread import ServiceThread

__all__ = ["Watcher", "DirtyCallback"]

log = logging.getLogger(__name__)

#: ``on_dirty(paths, full_scan)``: library-relative paths that changed, and
#: whether a full local scan is needed (directory-level changes).
DirtyCallback = Callable[[list[str], bool], None]

#: Event types after which the path's save is complete (see the module docstring).
_SAVE_DONE_TYPES = {"closed", "moved"}

#: Seconds without any event after which a completed save is handed on.
SAVE_SETTLE = 0.1

#: Seconds between two sweeps of watchdog's move records (see :meth:`Watcher._sweep_move_records`).
MOVE_RECORD_SWEEP = 60.0


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: Watcher) -> None:
        self._watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory:
            if event.event_type in ("deleted", "moved"):
                self._watcher._forget_own_folders()
            if event.event_type == "created":
                self._watcher._note_scan(rewatch=True, created=os.fsdecode(event.src_path))
            elif event.event_type in ("deleted", "moved"):
                self._watcher._note_scan()
            if event.event_type in ("deleted", "moved"):
                self._watcher._restructured()
            return  # a directory's "modified" only echoes its children's events
        paths = [event.src_path]
        if event.event_type == "moved" and event.dest_path:
            paths.append(event.dest_path)
        # the files of a moved folder (synthetic events) wait for the folder's scan
        done = event.event_type in _SAVE_DONE_TYPES and not getattr(event, "is_synthetic", False)
        self._watcher._note((os.fsdecode(p) for p in paths), complete=done)


class Watcher(ServiceThread):
    """Watch one mirror folder and report dirty paths after a quiet period.

    :param root: the local mirror folder.
    :param rel_path: absolute local path → library-relative path, or None
        when the path is outside the mirror or ignored (the engine's).
    :param on_dirty: called from the watcher's debounce thread.
    :param quiet: seconds without events before a path is reported.
    :param settle: seconds without any event before a path whose save is
        complete (closed after writing, renamed onto) is reported.
    :param on_restructure: called at once (from the observer thread, not
        debounced) when a folder is moved or deleted, so that a running pass
        can stop before it writes into a folder that is no longer there.
    :param observer_factory: makes the watchdog observer (default
        :func:`~ohsync.daemon.prompt_observer.prompt_observer`; tests may pass
        a polling observer).
    :param clock: the debounce's monotonic clock (seconds).
    :param own_folder: local path -> True when that folder is one the engine
        created itself (``SyncEngine.own_folder``); asked when the scan a
        created folder asked for is due.  When every folder created in that
        quiet period is the engine's own, and no folder was deleted or moved,
        neither the full scan nor the fresh observer happens: watchdog watches
        a folder made in place and reports its files one by one (echo
        suppression: a cold mirror creates hundreds of folders).  None: every
        created folder asks for both.
    :param forget_own_folders: called (observer thread) when a folder was
        deleted or moved here: a folder moved away and back is one moved in.
    :param on_saved: called from the debounce thread, just before
        ``on_dirty``, with the reported paths whose last event ended a save
        (closed after writing, renamed onto): their writer is done.
    """

    event_filter = CHANGE_EVENTS

    def __init__(
        self,
        root: Path,
        rel_path: Callable[[str], str | None],
        on_dirty: DirtyCallback,
        *,
        quiet: float = 0.7,
        settle: float = SAVE_SETTLE,
        observer_factory: Callable[[], BaseObserver] = prompt_observer,
        clock: Callable[[], float] = time.monotonic,
        on_restructure: Callable[[], None] = lambda: None,
        own_folder: Callable[[str], bool] | None = None,
        forget_own_folders: Callable[[], None] = lambda: None,
        on_saved: Callable[[list[str]], None] | None = None,
    ) -> None:
        super().__init__("ohsync-watcher", observer_factory, observer_name="ohsync-watch-observer")
        self.root = root
        self._rel_path = rel_path
        self._on_dirty = on_dirty
        self._quiet = quiet
        self._on_restructure = on_restructure
        self._paths: Debouncer[str] = Debouncer(quiet, clock, settle=settle)
        self._scan_at: float | None = None
        self._rewatch = False  # a folder appeared: watch the tree afresh before the scan
        self._own_folder = own_folder
        self._forget_own = forget_own_folders
        self._on_saved = on_saved
        self._scan_needed = False  # a cause of the pending scan other than folders created
        self._created: set[str] = set()  # folders created meanwhile: the engine's own need no scan
        self._old_moves: dict[int, set[int]] = {}  # inotify object id -> cookies seen at the last sweep
        self._swept_at = time.monotonic()
        self._sweep_due = False
        self._paused = False  # pause_events: not watching while the engine writes a cold mirror
        self._swap = threading.Lock()  # one observer swap at a time (debounce thread, sync worker)

    def start(self) -> None:
        """Start the observer and the debounce thread.

        :raises OSError: the folder cannot be watched (missing, inotify limit).
        """
        self.start_watching(self.root, _Handler(self))

    def _renew_observer(self) -> None:
        """Watch the whole tree afresh (called from the debounce thread, no lock held);
        not while paused: :meth:`resume_events` does it then."""
        with self._swap:
            if not self._paused:  # e.g. the mirror folder itself is gone: the scan says so
                self.replace_observer(self.root, _Handler(self))

    def pause_events(self) -> None:
        """Stop watching while the engine writes many files of its own (a cold
        mirror's archive): each file written would be several events for
        watchdog and this watcher to handle, and every one an echo.  The
        debounce thread goes on with what it holds; :meth:`resume_events`
        watches again.  Called from the sync worker, without the lock."""
        with self._swap:
            if self._paused:
                return
            self._paused = True
            self.stop_observer()

    def resume_events(self) -> None:
        """Watch the tree afresh after :meth:`pause_events`, then scan it once
        it is quiet: an edit made meanwhile raised no event, and the scan finds
        it (a file whose fingerprint is not its base's).  A tree that cannot be
        watched again leaves the watcher dead, so the mirror starts a new one,
        which scans too."""
        with self._swap:
            if not self._paused:
                return
            self._paused = False
            if not self.should_keep_running():
                return  # stopping: no new observer nobody would stop
            self.replace_observer(self.root, _Handler(self))
        self._note_scan()

    def is_alive(self) -> bool:
        """True while the debounce thread runs and the tree is watched, or
        watching is paused on purpose (:meth:`pause_events`)."""
        return self.thread_alive() if self._paused else super().is_alive()

    @property
    def pending(self) -> int:
        """Paths seen but not yet reported (still in their quiet period)."""
        with self.cond:
            return len(self._paths)

    def _note(self, local_paths: Iterable[str], *, complete: bool = False) -> None:
        rels = []
        for local_path in local_paths:
            try:
                rel = self._rel_path(local_path)
            except Exception:  # a bad name must not kill the observer
                log.exception("cannot map %s to a library path", local_path)
                continue
            if rel is not None:
                rels.append(rel)
        if not rels:
            return
        with self.cond:
            now = self._paths.now()
            for rel in rels:
                if complete:
                    self._paths.complete(rel, at=now)
                else:
                    self._paths.touch(rel, at=now)
            self.cond.notify_all()

    def _restructured(self) -> None:
        try:
            self._on_restructure()
        except Exception:  # keep watching whatever the consumer did
            log.exception("restructure consumer failed")

    def _forget_own_folders(self) -> None:
        try:
            self._forget_own()
        except Exception:  # keep watching whatever the consumer did
            log.exception("forgetting the engine's own folders failed")

    def _note_scan(self, rewatch: bool = False, created: str | None = None) -> None:
        with self.cond:
            self._scan_at = self._paths.now()
            if created is not None and self._own_folder is not None:
                self._created.add(created)  # maybe the engine's own: decided when the scan is due
            else:
                self._scan_needed = True
                self._rewatch = self._rewatch or rewatch
            self.cond.notify_all()

    def _scan_still_needed(self, needed: bool, created: set[str]) -> tuple[bool, bool]:
        """``(scan, rewatch)`` for a due scan: folders created that are all the
        engine's own need neither (called without the lock held)."""
        if not created:
            return needed, False
        if needed:
            return True, True
        try:
            own = self._own_folder is not None and all(self._own_folder(p) for p in created)
        except Exception:  # cannot tell: scan
            log.exception("asking whether the created folders are the engine's own failed")
            own = False
        return (False, False) if own else (True, True)

    def run_loop(self) -> None:
        """The debounce thread: report quiet paths; a full scan once the whole tree is quiet."""
        paths = self._paths
        while True:
            with self.cond:
                if not self.should_keep_running():
                    return
                prompt = self._scan_at is None  # a pending scan takes every path along: no early ones
                due = paths.next_due(prompt=prompt)
                if self._scan_at is not None:
                    due = min(d for d in (due, self._scan_at + self._quiet) if d is not None)
                if due is None:
                    # idle: wake only while watchdog holds move records to sweep
                    self.cond.wait(timeout=MOVE_RECORD_SWEEP if self._old_moves or self._sweep_due else None)
                    if not len(paths) and self._scan_at is None and self.should_keep_running():
                        self.cond.release()
                        try:
                            self._sweep_move_records()
                        finally:
                            self.cond.acquire()
                    continue
                now = paths.now()
                if due > now:
                    self.cond.wait(timeout=due - now)
                    continue
                # a full scan waits for the whole tree to be quiet, then takes every path along
                newest = max(t for t in (paths.newest(), self._scan_at) if t is not None)
                scan = self._scan_at is not None and newest + self._quiet <= now
                rewatch = needed = False
                created: set[str] = set()
                saves = {k for k in paths if paths.is_complete(k)} if self._on_saved is not None else set()
                if scan:
                    ready = paths.pop_all()
                    self._scan_at = None
                    rewatch, self._rewatch = self._rewatch, False
                    needed, self._scan_needed = self._scan_needed, False
                    created, self._created = self._created, set()
                else:
                    ready = paths.pop_due(now, prompt=prompt)
                    if not ready:  # only the scan marker is due but the tree is still busy
                        self.cond.wait(timeout=self._quiet / 4)
                        continue
            if created:
                scan, also_rewatch = self._scan_still_needed(needed, created)
                rewatch = rewatch or also_rewatch
            if rewatch:
                self._renew_observer()  # before the scan: what changes during the swap is in it
            try:
                saved = sorted(saves.intersection(ready))
                if saved and self._on_saved is not None:
                    self._on_saved(saved)
                if ready or scan:
                    self._on_dirty(sorted(ready), scan)
            except Exception:  # keep watching whatever the consumer did
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
