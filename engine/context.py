"""What every stage of one mirror's sync needs: client, ids, roots, state.

Kept in one small value so the stages (``transfer``, ``sync``) take one
argument instead of eight.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .events import SyncEvent
from .models import RemoteEntry
from .paths import to_local, to_remote
from .place import local_offset
from .state import StateStore

__all__ = ["EngineOptions", "MirrorContext"]

log = logging.getLogger(__name__)


@dataclass
class EngineOptions:
    """Tunables of one mirror.

    :ivar backup_dir: where overwritten/removed local files are copied
        first (``state_dir/backups``); None disables backups (tests only).
    :ivar library_name: the library's name, used in backup paths.
    :ivar ignore: extra gitignore-style patterns (config ``ignore``).
    :ivar readback_full_limit: files up to this many bytes are downloaded
        again after an upload and compared by sha1 when the id the server
        reports is not the content hash computed locally (docs/architecture.md §5, step 3).
    :ivar max_attempts: read-merge-write rounds before giving up on a path.
    :ivar upload_chunk: bytes of the first request of a chunked upload (the
        chunk size when ``upload_max_request`` is no larger).
    :ivar upload_max_request: bytes one upload request carries at most.  A
        large file up to this size goes up in one streamed request (a plain
        upload, verified on Seafile 12 and 13: no round trip per chunk); a
        larger one, or the retry after that request failed, in resumable
        chunks that start at ``upload_chunk`` and grow up to this size to take
        about 4 s each (``engine/client/chunked.py``).  A drop or a restart
        of the program loses at most one request's bytes.
    :ivar upload_in_flight: chunk requests of one chunked upload sent at once
        when the engine has a transfer pool (1, the default: strictly one
        after another).  More overlap the chunks' round trips, as both file
        servers' source allows (``engine/client/chunked.py``), but a resume
        after a kill then sends up to ``2 * upload_in_flight - 1`` chunks twice
        and it was not checked against a live server.
    :ivar backup_days: backups older than this many days are pruned.
    :ivar history_check: after a verified update, read the file's history to
        make sure the revision ours replaced is the one we merged with (for
        servers that ignore the update's ``head``).  True: after every
        update; False: never; None (default): after every update of
        ``push`` (whose read-back reads the history anyway) and after batched
        updates that merged another writer's version, until the server was
        seen honouring ``head`` (it stored one of ours as an SFConflict file).
    :ivar max_delete_files/max_delete_percent/percent_floor: the mass-delete
        safety valve: deletes on one side are held beyond ``max_delete_files``,
        or from ``percent_floor`` on beyond ``max_delete_percent`` % of the
        mirror (``valve.exceeds``).
    :ivar stamp_edits: stamp ``modified``/``origin`` into memory entities a
        person edited, before pushing them (:mod:`.memory.stamp`).
    :ivar stamp_quiet: seconds such a file must stay unchanged first.
    :ivar time_offset: offset of the stamped time (``±HH:MM``; default: the computer's).
    :ivar origin: the ``origin`` this computer writes.
    :ivar being_written: ``being_written(path)`` → truthy (the program's
        name where it is known, else True) while a program is
        saving the existing local file ``path`` (holds it open for writing,
        or, where that cannot be seen, modified it a moment ago); asked just
        before the file would be replaced or removed, which then waits for a
        later pass (:class:`~ohsync.engine.local_replace.BeingWritten`).  The
        daemon's :class:`~ohsync.daemon.open_files.WriterCheck`; None: never
        asked (tests, tools without a daemon).
    """

    backup_dir: Path | None = None
    library_name: str = "OH-Memory"
    ignore: tuple[str, ...] = ()
    readback_full_limit: int = 1024 * 1024
    max_attempts: int = 4
    max_delete_files: int = 50
    upload_chunk: int = 8 * 1024 * 1024
    upload_max_request: int = 256 * 1024 * 1024
    upload_in_flight: int = 1
    backup_days: int = 30
    max_delete_percent: float = 25.0
    percent_floor: int = 10
    history_check: bool | None = None
    stamp_edits: bool = False
    stamp_quiet: float = 1.0
    time_offset: str = field(default_factory=local_offset)
    origin: str = "desktop"
    being_written: Callable[[Path], bool | str] | None = None


@dataclass
class MirrorContext:
    """The shared context of one mirror's sync stages.

    :ivar snapshot: the current remote listing by rel path, kept up to date
        by the stages as they write; read from the state's ``remote`` table
        on first use, and dropped again between passes by
        :meth:`release_snapshot` (an idle daemon need not hold it).
    :ivar head: a library head commit id read before anything the pass
        read since (the ``head`` an update is based on), None when unknown.
    :ivar head_stale: rel paths we wrote after ``head`` was read: an update
        of one of them needs a fresh head.
    :ivar listed_head: the head the snapshot was listed with (a head read
        alone later does not replace it).
    :ivar since_listed: rel paths (a folder's as ``"folder/"``) we wrote
        after ``listed_head``: the snapshot no longer speaks for them at it.
    :ivar head_read_at: ``time.monotonic()`` when ``listed_head`` was set.
    """

    client: Any
    repo_id: str
    remote_root: str
    local_root: Path
    state: StateStore
    options: EngineOptions
    on_event: Callable[[SyncEvent], None] | None = None
    #: the listing while held (see :attr:`snapshot`); None: in the state's table only
    held_snapshot: dict[str, RemoteEntry] | None = field(default=None, repr=False)
    #: ``rel path → sentence``: names in the way that need the person (e.g. a
    #: file called ``.conflict``); listed with the skipped names.
    notices: dict[str, str] = field(default_factory=dict)
    head: str | None = None
    head_stale: set[str] = field(default_factory=set)
    #: the running pass's ``should_stop`` (True once the daemon saw a local
    #: folder moved or deleted, or is shutting down); None between passes
    should_stop: Callable[[], bool] | None = None
    #: runs transfer requests in parallel (``submit(fn, *args)`` → future;
    #: the daemon's transfer pool); None: one after the other
    executor: Any = None
    #: ``time.monotonic()`` when ``listed_head`` was set (:meth:`set_head`)
    head_read_at: float = 0.0
    listed_head: str | None = None
    since_listed: set[str] = field(default_factory=set)
    #: rel path → the file ids our verified uploads stored there since the
    #: snapshot's head was recorded, oldest first (:meth:`wrote`): lets
    #: :mod:`.remote_diffs` tell the commits of our own writes (echoes) apart
    written: dict[str, list[str]] = field(default_factory=dict)
    #: rel path → ``(commit id, file id)``: a commit whose tree holds the
    #: version of ours at that path the read-back verified (the file's
    #: history named it, :func:`.write_path.read_back_with_history`); the
    #: next update of the path may carry it as its ``head`` until a new
    #: listing vouches for the path again (:meth:`written_head_for`)
    written_at: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: commit id → the rel path of every verified write :attr:`written_at`
    #: recorded since the last listing (not only the latest per path): the
    #: commit diffs tell such a commit's change without asking
    #: (:mod:`.remote_diffs`)
    own_commits: dict[str, list[str]] = field(default_factory=dict)
    #: ``hook(True)`` before a pass writes many new files at once from an
    #: archive (:data:`~ohsync.engine.sync.bulk.QUIET_WATCH_FILES` or more; a
    #: cold mirror), ``hook(False)`` when they are in place: the daemon stops
    #: watching the folder meanwhile (every file written would be an echo
    #: event) and scans it afterwards; None: nobody asks
    on_bulk_writes: Callable[[bool], None] | None = None
    #: False once the server answered 404 to a commit's changes (no such endpoint)
    commit_diffs: bool = True
    #: False once the server answered 404 to the history of a file it has (:mod:`.capabilities`)
    file_history: bool = True
    #: rel path → ``(folder key, time.monotonic())`` of a file whose absence
    #: the server confirmed (404) while its local delete is held by the valve:
    #: not asked again until its folder changes (:mod:`ohsync.engine.sync.confirm`)
    confirmed_absent: dict[str, tuple[str, float]] = field(default_factory=dict)
    #: rel paths whose upload the server stored wrong (read back as its own
    #: damaged copy, :func:`.write_path.damaged_copy`) and that were sent
    #: again, once per failed upload; the pass moves them into its report
    upload_retries: list[str] = field(default_factory=list)
    #: rel paths whose save the daemon's watcher saw complete, for the next
    #: pass (:meth:`~ohsync.engine.sync.SyncEngine.note_saved`)
    saved: set[str] = field(default_factory=set)
    #: True once ``on_event`` raised (:meth:`emit` logs only that first failure)
    event_failed: bool = field(default=False, repr=False)

    def wrote(self, rel_path: str, file_id: str) -> None:
        """An upload of ours to ``rel_path`` was verified by read-back to hold ``file_id``."""
        self.written.setdefault(rel_path, []).append(file_id)

    @property
    def snapshot(self) -> dict[str, RemoteEntry]:
        """The current remote listing by rel path (read from the state when not held)."""
        if self.held_snapshot is None:
            self.held_snapshot = self.state.remote_snapshot()
        return self.held_snapshot

    @snapshot.setter
    def snapshot(self, value: dict[str, RemoteEntry]) -> None:
        self.held_snapshot = value

    def release_snapshot(self) -> bool:
        """Stop holding the listing in memory when the state's table holds
        exactly it (the next use reads it back, about 0.1 s at 30,000 paths).

        :returns: True when a held listing was dropped; False when none was
            held or the table differs (then it stays: nothing is lost).
        """
        held = self.held_snapshot
        if held is None or not self.state.release_remote_cache(held):
            return False
        self.held_snapshot = None
        return True

    def set_head(self, head: str | None, *, listed: bool) -> None:
        """Record the library head an update is based on.

        :param listed: True when the snapshot was listed with this head (the
            pass's scan): it becomes ``listed_head``, at which a push may take
            a path's entry from the snapshot (:meth:`listed_head_for`); False
            for a head read alone, which is newer than the snapshot and does
            not vouch for it (see ``LISTING_TRUST`` in engine/transfer.py).
        """
        self.head = head
        if listed:
            self.listed_head = head
            self.head_read_at = time.monotonic()
            self.since_listed.clear()
            self.written_at.clear()
            self.own_commits.clear()

    def head_age(self) -> float:
        """Seconds since the snapshot was listed with ``listed_head`` (infinite
        when none is known)."""
        return time.monotonic() - self.head_read_at if self.listed_head and self.head_read_at else float("inf")

    def listed_head_for(self, rel_path: str) -> str | None:
        """``listed_head`` when the snapshot still shows ``rel_path`` as it was
        at that commit: nothing of ours was written to the path, nor moved or
        removed over one of its folders, since; else None."""
        if self.listed_head is None or rel_path in self.since_listed:
            return None
        folder = rel_path
        while "/" in folder:
            folder = folder.rpartition("/")[0]
            if folder + "/" in self.since_listed:
                return None
        return self.listed_head

    def written_head_for(self, rel_path: str, file_id: str) -> str | None:
        """The commit our verified write of ``file_id`` to ``rel_path`` is
        known by (:attr:`written_at`), or None.

        An update based on it keeps any later edit of the path by another
        writer (the server stores ours as an SFConflict file), as one based
        on the listing's head does; unlike that head it speaks only for this
        path, so folder moves since do not matter.
        """
        known = self.written_at.get(rel_path)
        return known[0] if known is not None and known[1] == file_id else None

    def stopping(self) -> bool:
        """True when the running pass was asked to stop between two files."""
        return self.should_stop is not None and bool(self.should_stop())

    def remote_path(self, rel_path: str) -> str:
        """The remote path of a rel path."""
        return to_remote(self.remote_root, rel_path)

    def local_path(self, rel_path: str) -> Path:
        """The local path of a rel path."""
        return to_local(self.local_root, rel_path)

    def emit(self, event: SyncEvent) -> None:
        """Hand an event to the caller; its failures never break a sync (the first is logged)."""
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:  # a display bug must not stop syncing
                if not self.event_failed:  # logged once: a handler failing on every event would flood the log
                    self.event_failed = True
                    log.exception("the sync event handler failed on a %s event of %s; syncing goes on",
                                  event.kind, event.path)
