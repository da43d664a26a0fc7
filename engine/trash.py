"""The library's trash, which lives on the server only: list, restore, purge.

A file deleted in the mirror is moved into ``/.trash/<path>`` on the server
(:func:`~ohsync.engine.sync.deletes.delete_remote`; ``<stem>__<UTC time><ext>`` when
the name is taken), and ``.trash/`` is never mirrored down
(:func:`~ohsync.engine.ignore.server_only`), so a deleted file frees its space
locally.  This module is what ``ohsync trash`` does with it:

* :func:`entries` lists it from the remote snapshot the passes keep (no request);
* :func:`restore_local` writes an entry back at its original path (or another
  one) in the mirror, never over a file that exists on either side; the caller
  then pushes it through the normal write path (read-merge-write with
  read-back) and :func:`finish_restore` removes the trash entry once the
  server holds the restored file;
* :func:`purge` deletes entries trashed more than a number of days ago — only
  entries whose trash time is known (recorded when ohsync trashed them, or in
  their time suffix); one trashed by another client is never purged by a guess.

Requests: none to list; one download and the push's own to restore, plus one
delete; one delete per purged entry.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from .context import MirrorContext
from .errors import OhsyncError
from .ids import sha1_bytes
from .local_lookups import scandir_or_none
from .nofollow import entry_stat, write_file
from .paths import normalize_rel
from .special_dirs import ALT_SUFFIX
from .sync.deletes import TRASH_DIR, is_trash_path, trashed_key

__all__ = ["TRASH_DIR", "is_trash_path", "TrashEntry", "TrashError", "PurgeResult", "entries", "restore_local",
           "finish_restore", "purge", "local_trash_note"]

#: ``__20261201T205553Z`` before the extension: the time a taken name was trashed
_SUFFIX = re.compile(r"__(\d{8}T\d{6}Z)(?=\.[^./]*$|$)")
_TOP = re.compile(re.escape(TRASH_DIR) + r"(?:" + re.escape(ALT_SUFFIX) + r"(?:-\d+)?)?/")


class TrashError(OhsyncError):
    """A trash request that cannot be done as asked; the message says why and what to do."""

    title = "Trash"


@dataclass(frozen=True)
class TrashEntry:
    """One file in the library's trash.

    :ivar path: its mirror-relative path in the trash (``.trash/notes/a.md``).
    :ivar original: where it was (``notes/a.md``).
    :ivar size: bytes.
    :ivar mtime: the file's own modification time on the server (Unix seconds).
    :ivar trashed: when it was trashed (UTC), or None when nothing records it
        (trashed by another client with a free name).
    """

    path: str
    original: str
    size: int
    mtime: int
    trashed: datetime | None

    def as_dict(self) -> dict[str, object]:
        """The socket's shape: ``{"path", "original", "size", "mtime", "trashed"}`` (ISO time or None)."""
        return {"path": self.path, "original": self.original, "size": self.size, "mtime": self.mtime,
                "trashed": self.trashed.isoformat().replace("+00:00", "Z") if self.trashed else None}


def _parse(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    try:
        return datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
    except ValueError:
        return None


def _original(trash_rel: str) -> str:
    """The path a trash entry came from: without the trash folder and a time suffix (a
    conflict copy's own ``__<origin>__<time>`` is part of its name, not a trash suffix)."""
    inside = _TOP.sub("", trash_rel, count=1)
    stripped = _SUFFIX.sub("", inside, count=1)
    if re.search(r"__[a-z]+(?:\.[^./]*)?$", stripped.rsplit("/", 1)[-1]):
        return inside  # <stem>__remote__<time>.ext: a conflict copy trashed under its free name
    return stripped


def entries(ctx: MirrorContext) -> list[TrashEntry]:
    """Every file in the trash, newest trashed first (unknown times last), from the snapshot.

    :returns: the entries (folders are not listed).
    """
    found = []
    for rel, remote in ctx.snapshot.items():
        if remote.is_dir or not is_trash_path(rel) or "/" not in rel:
            continue
        suffix = _SUFFIX.search(rel.rsplit("/", 1)[1])
        trashed = _parse(ctx.state.get_meta(trashed_key(rel))) or (_parse(suffix.group(1)) if suffix else None)
        found.append(TrashEntry(rel, _original(rel), remote.size, remote.mtime, trashed))
    epoch = datetime.min.replace(tzinfo=timezone.utc)
    return sorted(found, key=lambda e: (e.trashed or epoch, e.path), reverse=True)


def _entry(ctx: MirrorContext, trash_rel: str) -> TrashEntry:
    wanted = normalize_rel(trash_rel)
    for entry in entries(ctx):
        if wanted in (entry.path, entry.original):
            return entry
    raise TrashError(f"{trash_rel} is not in the trash; `ohsync trash` lists what is.")


def restore_local(ctx: MirrorContext, trash_rel: str, to: str | None = None) -> tuple[TrashEntry, str, bytes]:
    """Write a trash entry back into the mirror (first step of a restore).

    :param trash_rel: the entry's path in the trash, or its original path.
    :param to: where to restore it (default: its original path).
    :returns: ``(entry, target rel path, content)``.
    :raises TrashError: no such entry; the target exists in the mirror or on the server
        (nothing is replaced: the message names it and says to pass another target); the
        target lies in the trash itself.
    :raises OhsyncError: the download failed.
    """
    entry = _entry(ctx, trash_rel)
    target = normalize_rel(to) if to else entry.original
    if not target or is_trash_path(target):
        raise TrashError(f"cannot restore into {target or 'the mirror root'}: choose a path outside .trash/.")
    if target in ctx.snapshot or entry_stat(ctx.local_root, target) is not None:
        raise TrashError(f"{target} exists; restoring would replace it. Restore to another path with "
                         f"`ohsync trash restore {entry.path} --to NEW/PATH`, or move {target} first.")
    with tempfile.TemporaryFile() as fh:
        ctx.client.download(ctx.repo_id, ctx.remote_path(entry.path), fh)
        fh.seek(0)
        data = fh.read()
    write_file(ctx.local_root, target, data)
    return entry, target, data


def finish_restore(ctx: MirrorContext, entry: TrashEntry, target: str, data: bytes) -> bool:
    """Last step of a restore: once the server holds ``target`` with ``data`` (its base
    says so after the push), delete the trash entry.

    :returns: True when the entry was removed; False when the push has not been verified
        (the entry stays; nothing is lost).
    """
    base = ctx.state.get_base(target)
    if base is None or base.sha1 != sha1_bytes(data):
        return False
    ctx.client.delete(ctx.repo_id, ctx.remote_path(entry.path))
    ctx.snapshot.pop(entry.path, None)
    ctx.state.set_meta(trashed_key(entry.path), None)
    return True


@dataclass
class PurgeResult:
    """What :func:`purge` did: ``removed`` and ``kept_unknown`` (entries without a known
    trash time, left alone) as trash paths; ``bytes`` freed."""

    removed: list[str]
    kept_unknown: list[str]
    bytes: int


def purge(ctx: MirrorContext, older_than_days: float, *, dry_run: bool = False,
          now: datetime | None = None) -> PurgeResult:
    """Delete, for good, trash entries trashed more than ``older_than_days`` days ago.

    ``DELETE /api2/repos/{id}/file/?p=`` per entry (a delete inside the trash is final; the
    server's own file history still has it).

    :param dry_run: only say what would be removed.
    :returns: :class:`PurgeResult`.
    """
    cutoff = (now or datetime.now(timezone.utc)) - timedelta(days=older_than_days)
    result = PurgeResult([], [], 0)
    for entry in entries(ctx):
        if entry.trashed is None:
            result.kept_unknown.append(entry.path)
            continue
        if entry.trashed >= cutoff:
            continue
        if not dry_run:
            ctx.client.delete(ctx.repo_id, ctx.remote_path(entry.path))
            ctx.snapshot.pop(entry.path, None)
            ctx.state.set_meta(trashed_key(entry.path), None)
        result.removed.append(entry.path)
        result.bytes += entry.size
    return result


def local_trash_note(ctx: MirrorContext) -> str | None:
    """A sentence, once per mirror, about a local ``.trash/`` left from when the trash was
    mirrored (it is not synced any more; its files are on the server); None otherwise."""
    if ctx.state.get_meta("local_trash_noted"):
        return None
    entries = scandir_or_none(ctx.local_path(TRASH_DIR))
    if entries is None:  # no such folder (the usual case), or not a folder
        return None
    count = len(entries)
    ctx.state.set_meta("local_trash_noted", "1")
    return (f"The folder {TRASH_DIR}/ in the mirror ({count} item(s)) is no longer synced: deleted files stay "
            "in the library's trash on the server only (`ohsync trash` lists and restores them). The folder "
            "here is left alone; delete it to free the space.")
