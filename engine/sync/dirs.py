"""The folder steps of a pass: create folders both ways, finish folder deletes.

:class:`FolderSteps` creates a folder new on one side on the other before the
files inside it move, and deletes a folder deleted on one side only after
the files inside were handled, and only when it is empty then (a file
another client put there meanwhile keeps it; ignored junk such as
``.DS_Store`` never brings a server-deleted folder back).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..errors import OhsyncError
from ..events import SyncEvent, SyncReport
from ..local_replace import BeingWritten
from ..localfs import LocalFile
from ..models import RemoteEntry
from ..paths import normalize_rel
from ..state import Base
from ..transfer import ensure_remote_dir, remote_written
from ..upload_batch import BATCH_MAX_FILE
from .deletes import delete_local, delete_remote
from .echoes import OwnFolders, make_dirs
from .kind_change import (
    archive_local_file,
    archive_remote_file,
    clear_desktop_junk,
    local_tree_changed,
    remote_tree_changed,
)
from .reconcile import Side
from .run import RunSteps

__all__ = ["FolderSteps"]


class FolderSteps(RunSteps):
    """Folder creation and deletion (no public API; a layer of the sync engine)."""

    #: the folders this engine created here (echo suppression of the watcher's events)
    own_folders: OwnFolders

    def _sync_dirs(self, candidates: set[str], local: dict[str, LocalFile],
                   bases: dict[str, Base], report: SyncReport) -> list[str]:
        """Create folders both ways; return folders deleted on one side.

        Folder deletes are finished after the files inside them were
        handled (:meth:`_finish_dir_deletes`).
        """
        deletes: list[str] = []
        uploading = self._uploads_create(candidates, local, bases)
        for rel in sorted(candidates, key=lambda p: p.count("/")):
            entry, remote = local.get(rel), self.ctx.snapshot.get(rel)
            local_dir = entry is not None and entry.is_dir
            remote_dir = remote is not None and remote.is_dir
            base = bases.get(rel)
            if not (local_dir or remote_dir or (base is not None and base.is_dir)):
                continue
            if self._through_symlink(rel):
                report.skipped.append((rel, "inside a symbolic link to a folder (not followed)"))
                continue
            if (local_dir and remote is not None and not remote_dir) \
                    or (remote_dir and entry is not None and not local_dir):
                assert entry is not None and remote is not None
                kind = ("kind", local_dir, remote.id, entry.fingerprint)
                if self.failure_book.held(rel, kind) is not None:
                    continue
                try:
                    folder_kept = self._kind_change(rel, entry, remote, base, bases, report)
                except BeingWritten as exc:  # a program is saving the file: after it closes it, no error
                    report.skipped.append((rel, str(exc)))
                    self._writer_held.add(rel)  # the folder's files wait for it too
                    continue
                except (OhsyncError, OSError) as exc:
                    self._dir_failed(rel, self._per_path(exc, rel, what="replacing a file by a folder"), kind,
                                     report)
                    continue
                if not folder_kept:
                    deletes.append(rel)  # the file wins: the folder is emptied by its files' deletes first
                    continue
                # the file went away (trash, backups or /.conflict/): the folder is made on both sides
                remote = self.ctx.snapshot.get(rel)
                remote_dir = remote is not None and remote.is_dir
                base = self.state.get_base(rel)  # a folder's base, or none (the file's went)
            elif base is not None and base.is_dir and not (local_dir and remote_dir):
                deletes.append(rel)
                continue
            if local_dir and not remote_dir and base is None and self._only_ignored(rel):
                continue  # nothing to sync in it (only ignored files): no folder on the server
            version = ("dir", local_dir, remote.id if remote is not None else None)
            if self.failure_book.held(rel, version) is not None:
                continue  # failed on these very versions: waits (backoff) or needs the person
            if local_dir and not remote_dir and base is None and rel in uploading:
                continue  # the batched upload of a new file in it creates it (and records its base)
            try:
                if local_dir and not remote_dir:
                    ensure_remote_dir(self.ctx, rel)
                elif remote_dir and not local_dir:
                    make_dirs(self.ctx.local_path, rel, self.own_folders)  # their watcher events are echoes
                if base is None:
                    self.state.set_base(Base(rel, True, None, None))
            except (OhsyncError, OSError) as exc:
                self._dir_failed(rel, self._per_path(exc, rel, what="creating the folder"), version, report)
            else:
                self.failure_book.succeeded(rel)
                self._went_through()
        return deletes

    def _kind_change(self, rel: str, entry: LocalFile, remote: RemoteEntry, base: Base | None,
                     bases: dict[str, Base], report: SyncReport) -> bool:
        """Settle ``rel``, a folder on one side and a file on the other (rule:
        :mod:`~ohsync.engine.sync.kind_change`).

        :returns: True when the folder keeps the name (the file was moved into
            ``/.trash/``, backed up and removed here, or archived in
            ``/.conflict/``); False when the file wins: the folder, unchanged
            on its side, is emptied by the deletes of its files and removed
            (:meth:`_finish_dir_deletes`), then the file takes its place.
        :raises OhsyncError, OSError: a step failed (nothing lost: the file is
            still where it was, or already archived).
        """
        ctx = self.ctx
        if entry.is_dir:  # a folder here, a file on the server
            if base is None and self._only_ignored(rel):
                return False  # a folder with nothing to sync in it (.DS_Store): no rival for the file
            if base is not None and base.is_dir:
                if not local_tree_changed(ctx, rel, bases, self.ignore):
                    return False
                reason = "the folder was replaced by a file on the server while files in it changed here"
            elif base is not None and remote.id == base.remote_id:
                delete_remote(ctx, rel, base)  # replaced by a folder here; unchanged there: into /.trash/
                report.deleted_remote.append(rel)
                ctx.emit(SyncEvent("synced", rel, "up", action="delete", message="replaced by a folder here"))
                return True
            else:
                reason = ("the file was replaced by a folder here while it changed on the server"
                          if base is not None else "a file on the server and a folder here took the same name")
            record = archive_remote_file(ctx, rel, remote, reason)
        else:  # a file here, a folder on the server
            if base is not None and base.is_dir:
                if not remote_tree_changed(ctx, rel, bases):
                    return False
                reason = "the folder was replaced by a file here while files in it changed on the server"
            elif base is not None and (side := self._classify_local(rel, entry, base))[0] is Side.SAME:
                delete_local(ctx, rel, side[1])  # replaced by a folder there; unchanged here: backed up
                report.deleted_local.append(rel)
                ctx.emit(SyncEvent("synced", rel, "down", action="delete", message="replaced by a folder on the "
                                                                                    "server"))
                return True
            else:
                reason = ("the file was replaced by a folder on the server while it changed here"
                          if base is not None else "a file here and a folder on the server took the same name")
            record = archive_local_file(ctx, rel, reason)
        report.conflicts.append(record)
        return True

    def _uploads_create(self, candidates: set[str], local: dict[str, LocalFile],
                        bases: dict[str, Base]) -> set[str]:
        """Folders the pass's batched upload of new files will create
        (:mod:`.upload_batch`: ``relative_path``, no ``mkdir``): every
        folder above a small local file that has no base and is not on the
        server.  One that gets no file after all is created next pass."""
        folders: set[str] = set()
        for rel in candidates:
            entry = local.get(rel)
            if (entry is None or entry.is_dir or entry.fingerprint[0] > BATCH_MAX_FILE or rel in bases
                    or rel in self.ctx.snapshot):
                continue
            parent = rel.rpartition("/")[0]
            while parent and parent not in folders:
                folders.add(parent)
                parent = parent.rpartition("/")[0]
        return folders

    def _dir_failed(self, rel: str, exc: OhsyncError, version: tuple[Any, ...], report: SyncReport) -> None:
        """Report and remember a folder that could not be created."""
        item = self.failure_book.record(rel, exc, version)
        message = str(exc)
        if item.failure.permanent:
            message += " (not retried until it changes or you run `ohsync refresh`)"
        report.errors.append((rel, message))
        self.ctx.emit(SyncEvent("error", rel, message=message))

    def _only_ignored(self, rel: str) -> bool:
        """True when local folder ``rel`` holds something, all of it ignored
        (junk such as ``.DS_Store``, at any depth)."""
        root = self.ctx.local_path(rel)
        seen = False
        for folder, dirs, files in os.walk(root):
            sub = Path(folder).relative_to(self.local_root).as_posix()
            for name in files:
                if not self.ignore.match(normalize_rel(f"{sub}/{name}"), False):
                    return False
                seen = True
            for name in list(dirs):
                if self.ignore.match(normalize_rel(f"{sub}/{name}"), True):
                    dirs.remove(name)
                    seen = True
        return seen

    def _finish_dir_deletes(self, folders: list[str], report: SyncReport) -> None:
        """Propagate folder deletes, deepest first, only for emptied folders.

        A folder that still holds something on the side that kept it (a new
        file, a held delete) is re-created on the other side instead.
        """
        replaced: list[str] = []
        for rel in sorted(folders, key=lambda p: -p.count("/")):
            local_path = self.ctx.local_path(rel)
            remote = self.ctx.snapshot.get(rel)
            try:
                if remote is not None and remote.is_dir:  # deleted (or replaced by a file) locally
                    if any(p.startswith(rel + "/") for p in self.ctx.snapshot):
                        if local_path.exists() and not local_path.is_dir():
                            if not report.rescan:  # else the full scan it asks for deletes them first
                                report.skipped.append((rel, "replaced by a file here while the server's "
                                                            "folder still holds files"))
                        else:
                            local_path.mkdir(parents=True, exist_ok=True)
                        continue
                    # Look again right before deleting: a file another client put there
                    # during this pass must not go with the folder.
                    if self.ctx.client.list_dir(self.ctx.repo_id, self.ctx.remote_path(rel)).entries:
                        remote_written(self.ctx, rel + "/")
                        if not local_path.exists():
                            local_path.mkdir(parents=True, exist_ok=True)
                        continue
                    self.ctx.client.delete(self.ctx.repo_id, self.ctx.remote_path(rel))
                    self.ctx.snapshot.pop(rel, None)
                    remote_written(self.ctx, rel)
                elif local_path.is_dir():  # deleted (or replaced by a file) on the server
                    if any(local_path.iterdir()) and not (remote is not None and clear_desktop_junk(self.ctx, rel)):
                        if remote is not None:
                            report.skipped.append((rel, "replaced by a file on the server while the local "
                                                        "folder still holds files"))
                        elif self._only_ignored(rel):
                            # ignored leftovers (.DS_Store) stay here, local only: they never
                            # bring the folder back on the server
                            self.state.delete_base(rel)
                        else:
                            ensure_remote_dir(self.ctx, rel)
                        continue
                    local_path.rmdir()
                self.state.delete_base(rel)
                if remote is not None and not remote.is_dir or local_path.is_file():
                    replaced.append(rel)
            except (OhsyncError, OSError) as exc:
                report.errors.append((rel, str(self._per_path(exc, rel))))
        # The file that took a removed folder's place can move now.
        for rel in replaced:
            entry = self._stat_paths({rel}).get(rel)
            plan = self._plan_file(rel, entry, self.ctx.snapshot.get(rel), None, report)
            if plan is not None:
                self._run(plan, report)
