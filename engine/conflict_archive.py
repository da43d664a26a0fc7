"""Archive a remote file into ``/.conflict/`` on the server without moving
its bytes through this machine twice: a server-side rename to the conflict
copy's name, a move into the matching folder under ``/.conflict/``, then one
download into the mirror's ``.conflict/``.

Used for versions that cannot merge and are too large (or not text) to be
uploaded again, and for Seafile's own SFConflict files that do not merge.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone

from .conflict_names import CONFLICT_DIR, conflict_copy_path
from .context import MirrorContext
from .localfs import hash_file, temp_beside
from .models import RemoteEntry
from .paths import from_remote, parent_rel
from .state import Base

__all__ = ["archive_remote_file"]


def archive_remote_file(ctx: MirrorContext, rel_path: str, source_rel: str, remote: RemoteEntry,
                        origin: str = "remote", when: datetime | None = None) -> str:
    """Move the server's file ``source_rel`` to the conflict copy path of
    ``rel_path`` (``/.conflict/<dir>/<stem>__<origin>__<time>.<ext>``) and
    fetch it into the mirror.

    Requests: ``POST …/file/`` rename (301) and move (301), a folder
    creation when ``/.conflict/<dir>`` is new, one download.

    :param source_rel: where the version is now (``rel_path`` itself, or an
        SFConflict file beside it).
    :returns: the rel path of the archived copy (as the server named it).
    :raises RemoteError: from the client (nothing local changed then).
    """
    from .transfer import ensure_remote_dir, remote_written

    now = when or datetime.now(timezone.utc)
    from .special_dirs import working_dir

    copy_rel = conflict_copy_path(rel_path, origin, lambda p: p in ctx.snapshot or ctx.local_path(p).exists(), now,
                                  working_dir(ctx, CONFLICT_DIR))
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
