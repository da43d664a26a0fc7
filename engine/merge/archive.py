"""Carrying out the resolver's conflict copy (:class:`ohsync.engine.merge.resolve.Copy`).

Two ways, as the resolver chose:

* ``upload`` — theirs' bytes are in hand: uploaded to the copy's path on
  the server (never replacing) and written into the mirror's
  ``.conflict/``; a copy already holding exactly those bytes (a pass that
  died after archiving) is reused.
* ``move`` — the version is only on the server (too large to merge, or a
  Seafile conflict file): a server-side rename to the copy's name, a move
  into the matching folder under ``/.conflict/``, then one download, so
  its bytes never go up again.

Either way the conflict is recorded in the state and announced once.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone

from ..context import MirrorContext
from ..crashpoints import reach
from ..events import ConflictRecord, SyncEvent
from ..ids import seafile_file_id, sha1_bytes
from ..localfs import atomic_write, hash_file, temp_beside
from ..models import RemoteEntry
from ..paths import from_remote, parent_rel
from ..remote_dirs import ensure_remote_dir, remote_written
from ..special_dirs import working_dir
from ..state import Base
from ..write_path import send
from .choose import is_text
from .conflict_names import CONFLICT_DIR
from .resolve import Copy

__all__ = ["archive", "copies_of"]


def archive(ctx: MirrorContext, rel_path: str, copy: Copy, *, theirs: bytes | None = None,
            remote: RemoteEntry | None = None, when: datetime | None = None) -> ConflictRecord:
    """Make the conflict copy ``copy`` of ``rel_path`` on both sides and record the conflict.

    :param theirs: the version's bytes (``copy.how == "upload"``).
    :param remote: the server's entry of ``copy.source`` (``copy.how == "move"``).
    :param when: the conflict time (UTC now by default), in the name and the record.
    :returns: the conflict record (``archived`` names the copy).
    :raises RemoteError: from the client (nothing recorded then).
    :raises ValueError: the bytes or entry the chosen way needs are missing.
    """
    now = when or datetime.now(timezone.utc)
    if copy.how == "upload":
        if theirs is None:
            raise ValueError("an uploaded conflict copy needs theirs' bytes")
        stored = _upload_copy(ctx, rel_path, copy, theirs, now)
    else:
        if remote is None:
            raise ValueError("a moved conflict copy needs the server's entry")
        stored = _move_copy(ctx, rel_path, copy, remote, now)
    record = ConflictRecord(rel_path, stored, now.isoformat(timespec="seconds"), copy.reason, copy.fields)
    if ctx.state.add_conflict(record):  # the same version archived again is the same conflict
        ctx.emit(SyncEvent("conflict", rel_path, action=stored, message=copy.announce.format(stored=stored)))
    return record


def _taken(ctx: MirrorContext, candidate: str) -> bool:
    return candidate in ctx.snapshot or ctx.local_path(candidate).exists()


def copies_of(ctx: MirrorContext, rel_path: str) -> dict[str, str]:
    """The conflict copies of ``rel_path`` the server listing holds, by
    whichever client made them: ``{copy rel path: file id}`` (no request)."""
    top = working_dir(ctx, CONFLICT_DIR)
    folder, _, name = rel_path.rpartition("/")
    stem = name.rsplit(".", 1)[0] if "." in name[1:] else name
    prefix = f"{top}/{folder}/{stem}__" if folder else f"{top}/{stem}__"
    return {path: entry.id for path, entry in ctx.snapshot.items() if path.startswith(prefix) and not entry.is_dir}


def _existing_copy(ctx: MirrorContext, rel_path: str, theirs_id: str) -> str | None:
    """A conflict copy of ``rel_path`` already holding exactly theirs (a pass
    that died after archiving), so it is not archived twice."""
    return next((path for path, fid in copies_of(ctx, rel_path).items() if fid == theirs_id), None)


def _upload_copy(ctx: MirrorContext, rel_path: str, copy: Copy, theirs: bytes, now: datetime) -> str:
    """Upload ``theirs`` as the conflict copy and write it locally; returns its rel path."""

    theirs_id = seafile_file_id(theirs)
    top = working_dir(ctx, CONFLICT_DIR)
    stored_rel = _existing_copy(ctx, rel_path, theirs_id)
    if stored_rel is None:
        copy_rel = copy.path(rel_path, lambda p: _taken(ctx, p), now, top)
        ensure_remote_dir(ctx, parent_rel(copy_rel))
        # a new file, never replacing: a name taken meanwhile is renamed by the server
        result = send(ctx, copy_rel, theirs, len(theirs), exists=False)
        stored_rel = from_remote(ctx.remote_root, result.path) or copy_rel
        remote_written(ctx, stored_rel)
        theirs_id = result.id
        ctx.snapshot[stored_rel] = RemoteEntry(stored_rel, False, theirs_id, len(theirs))
        reach("conflict.archived_remote")
    fp = atomic_write(ctx.local_path(stored_rel), theirs)
    ctx.state.set_base(Base(stored_rel, False, sha1_bytes(theirs), theirs_id, *fp),
                       theirs if is_text(theirs) else None)
    reach("conflict.archived")
    return stored_rel


def _move_copy(ctx: MirrorContext, rel_path: str, copy: Copy, remote: RemoteEntry, now: datetime) -> str:
    """Move the server's file ``copy.source`` (``rel_path`` itself, or an
    SFConflict file beside it) to the conflict copy's path and fetch it into
    the mirror; returns the copy's rel path as the server named it.

    Requests: ``POST …/file/`` rename (301) and move (301), a folder
    creation when ``/.conflict/<dir>`` is new, one download.
    """

    source_rel = copy.source
    copy_rel = copy.path(rel_path, lambda p: _taken(ctx, p), now, working_dir(ctx, CONFLICT_DIR))
    ensure_remote_dir(ctx, parent_rel(copy_rel))
    renamed = ctx.client.rename(ctx.repo_id, ctx.remote_path(source_rel), copy_rel.rsplit("/", 1)[1])
    moved = ctx.client.move(ctx.repo_id, renamed, ctx.remote_path(parent_rel(copy_rel)))
    stored_rel = from_remote(ctx.remote_root, moved) or copy_rel
    remote_written(ctx, source_rel, stored_rel)
    ctx.snapshot.pop(source_rel, None)
    target = ctx.local_path(stored_rel)
    target.parent.mkdir(parents=True, exist_ok=True)
    with temp_beside(target) as (fh, tmp):
        file_id = ctx.client.download_resumable(ctx.repo_id, moved, fh)
        fh.flush()
        os.fsync(fh.fileno())
        fh.close()
        os.replace(tmp, target)
    sha1, _, size, fp = hash_file(target)
    ctx.state.set_base(Base(stored_rel, False, sha1, file_id, *fp))
    ctx.snapshot[stored_rel] = RemoteEntry(stored_rel, False, file_id, size, remote.mtime)
    return stored_rel
