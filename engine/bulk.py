"""Bulk first download through Seafile's folder zip task.

Per-file downloads cost two requests each (link + file); for a cold mirror
of thousands of small memory files the zip task (``zip-task`` + one
``/zip/`` stream) is two orders of magnitude faster on a real server
(docs/architecture.md §9).  Every file taken from the archive is verified against its
listed id before it is adopted; anything missing, different or failing
falls back to the ordinary per-file pull.
"""

from __future__ import annotations

import os
import tempfile
import zipfile
from collections.abc import Callable, Iterable

from .context import MirrorContext
from .errors import LocalError, RemoteError
from .ids import seafile_file_id, sha1_bytes
from .localfs import atomic_write
from .merge import is_text
from .models import RemoteEntry
from .state import Base
from .transfer import folder_vanished
from .events import SyncEvent

__all__ = ["BULK_MIN_FILES", "BULK_MAX_FILE", "bulk_pull"]

#: Fewer new files than this are fetched one by one.
BULK_MIN_FILES = 20
#: Larger files are fetched one by one (resumable, streamed).
BULK_MAX_FILE = 4 * 1024 * 1024


def bulk_pull(ctx: MirrorContext, entries: Iterable[RemoteEntry],
              should_stop: Callable[[], bool] | None = None) -> set[str]:
    """Fetch files that are absent locally through one zip download.

    :param entries: remote files (rel paths) with no local file and no base.
    :param should_stop: asked between two files written from the archive;
        True ends the writing there (the rest waits for the next pass).
    :returns: the rel paths written and recorded as synced; the caller pulls
        the rest one by one.  Never raises for server trouble: a failing zip
        task just means per-file downloads.
    """
    wanted = {e.path: e for e in entries if not e.is_dir and 0 < e.size <= BULK_MAX_FILE}
    if len(wanted) < BULK_MIN_FILES or not hasattr(ctx.client, "download_zip"):
        return set()
    tops = sorted({p.split("/", 1)[0] for p in wanted})
    done: set[str] = set()
    try:
        fd, tmp = tempfile.mkstemp(prefix=".ohsync-zip-", suffix=".zip")
    except OSError:
        return set()
    try:
        with os.fdopen(fd, "w+b") as fh:
            try:
                ctx.client.download_zip(ctx.repo_id, ctx.remote_path(""), tops, fh)
            except (RemoteError, LocalError):  # e.g. a full temp disk: file by file instead
                return set()
            fh.seek(0)
            try:
                archive = zipfile.ZipFile(fh)
            except zipfile.BadZipFile:
                return set()
            prefix = f"{tops[0]}/" if len(tops) == 1 else ""
            names = {info.filename: info for info in archive.infolist() if not info.is_dir()}
            for rel, entry in wanted.items():
                if should_stop is not None and should_stop():
                    break
                info = names.get(rel if prefix and rel.startswith(prefix) else rel)
                if info is None or info.file_size != entry.size:
                    continue
                try:
                    data = archive.read(info)
                except (zipfile.BadZipFile, OSError, ValueError):
                    continue
                if seafile_file_id(data) != entry.id:
                    continue  # not provably the listed version: fetch it one by one
                target = ctx.local_path(rel)
                if target.exists() or folder_vanished(ctx, rel):
                    continue  # the person was faster: the next pass plans it again
                try:
                    fp = atomic_write(target, data, entry.mtime or None)
                except OSError:
                    break  # e.g. the disk is full: the rest go one by one, each failure on its own path
                base = Base(rel, False, sha1_bytes(data), entry.id, *fp)
                ctx.state.set_base(base, data if is_text(data) else None)
                done.add(rel)
                ctx.emit(SyncEvent("transfer", rel, "down", done=len(done), total=len(wanted)))
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
    return done
