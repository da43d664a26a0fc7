"""Propagating deletes, carefully.

A remote delete is soft: the file moves into ``/.trash/<path>`` (keeping its
folders; a taken name gets ``__<UTC time>`` before the extension), so a
person can take it back from the web interface or with ``ohsync trash restore``
(the trash lives on the server only, ``engine/trash.py``).
A local delete first copies the file to the dated backup folder.  Both
re-check the other side right before acting: if it changed since the plan
was made, the delete is dropped and the path re-planned (modification beats
deletion).
"""

from __future__ import annotations

import os
from datetime import datetime, timezone

from ..merge.conflict_names import _split
from ..names import fit_name
from ..context import MirrorContext
from ..crashpoints import reach
from ..errors import NotFoundError
from ..local_replace import remove
from ..localfs import temp_beside
from ..models import RemoteEntry
from ..paths import parent_rel, to_local
from ..state import Base
from ..special_dirs import is_under, working_dir
from ..transfer import LocalChanged, ensure_remote_dir, remote_written

__all__ = ["TRASH_DIR", "is_trash_path", "trash_path", "trashed_key", "delete_local", "delete_remote"]

TRASH_DIR = ".trash"


def is_trash_path(rel_path: str) -> bool:
    """True for paths inside ``.trash/`` (or the working name it gets when a
    file occupies ``.trash``, see ``special_dirs``)."""
    return is_under(rel_path, TRASH_DIR)


def trashed_key(trash_rel: str) -> str:
    """The state meta key holding when ohsync moved a file to ``trash_rel`` (``ohsync trash purge``)."""
    return f"trashed:{trash_rel}"


def trash_path(rel_path: str, taken: bool, when: datetime | None = None, folder_name: str = TRASH_DIR) -> str:
    """Where ``rel_path`` goes in the trash (``.trash/<path>``, time-suffixed if taken).

    :param folder_name: the trash folder (another name when a file occupies ``.trash``).
    """
    target = f"{folder_name}/{rel_path}"
    if not taken:
        return target
    when = when or datetime.now(timezone.utc)
    folder, _, name = target.rpartition("/")
    stem, ext = _split(name)
    return f"{folder}/{fit_name(stem, '__' + when.strftime('%Y%m%dT%H%M%SZ') + ext)}"


def _around_files(ctx: MirrorContext, target: str, when: datetime | None = None) -> str:
    """``target`` (a path in the trash), with the first of its folders that is a
    file in the trash already (a file ``x`` trashed before the folder ``x/``
    that replaced it) renamed ``<name>__<UTC time>``, so both are kept."""
    parts = target.split("/")
    for i in range(1, len(parts) - 1):
        known = ctx.snapshot.get("/".join(parts[:i + 1]))
        if known is not None and not known.is_dir:
            when = when or datetime.now(timezone.utc)
            parts[i] = fit_name(parts[i], "__" + when.strftime("%Y%m%dT%H%M%SZ"))
            break
    return "/".join(parts)


def _backup_remote(ctx: MirrorContext, rel_path: str) -> None:
    """Download the server's version of ``rel_path`` into the backup folder."""
    if ctx.options.backup_dir is None:
        return
    day = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    dest = to_local(ctx.options.backup_dir / day / ctx.options.library_name, rel_path)
    if dest.exists():
        dest = dest.with_name(f"{dest.stem}__{datetime.now(timezone.utc).strftime('%H%M%S%f')}{dest.suffix}")
    with temp_beside(dest) as (fh, tmp):
        ctx.client.download_resumable(ctx.repo_id, ctx.remote_path(rel_path), fh)
        fh.close()
        os.replace(tmp, dest)


def delete_local(ctx: MirrorContext, rel_path: str, expected: tuple[int, int, int] | None) -> None:
    """Remove a local file the server no longer has, after a backup.

    :param expected: the fingerprint the plan saw.
    :raises LocalChanged: the file changed since the plan (it will be uploaded).
    """
    if expected is None:
        if os.path.lexists(ctx.local_path(rel_path)):
            raise LocalChanged(f"{rel_path} appeared locally; keeping it", path=rel_path)
        ctx.state.delete_base(rel_path)
        return
    try:
        remove(ctx, rel_path, expected)  # checked on the very file taken away (a save meanwhile stays)
    except FileNotFoundError:
        pass
    ctx.state.delete_base(rel_path)


def delete_remote(ctx: MirrorContext, rel_path: str, base: Base) -> str | None:
    """Soft-delete a remote file the person deleted locally.

    :returns: the rel path in the trash, or None when the file was already
        gone or lived in the trash itself (then it is deleted for good).
    :raises LocalChanged: the remote file changed since base (it will be pulled).
    """
    remote_path = ctx.remote_path(rel_path)
    try:
        current = ctx.client.file_detail(ctx.repo_id, remote_path)
    except NotFoundError:
        ctx.snapshot.pop(rel_path, None)
        ctx.state.delete_base(rel_path)
        return None
    if current.id != base.remote_id:
        raise LocalChanged(f"{rel_path} changed on the server; downloading it instead", path=rel_path)
    if is_trash_path(rel_path):
        # Emptying the trash is final on the server; keep a copy as a backup.
        _backup_remote(ctx, rel_path)
        ctx.client.delete(ctx.repo_id, remote_path)
        remote_written(ctx, rel_path)
        ctx.snapshot.pop(rel_path, None)
        ctx.state.delete_base(rel_path)
        return None
    top = working_dir(ctx, TRASH_DIR)
    plain = trash_path(rel_path, False, folder_name=top)
    taken = plain in ctx.snapshot
    if not taken:
        try:
            ctx.client.file_detail(ctx.repo_id, ctx.remote_path(plain))
            taken = True
        except NotFoundError:
            pass
    target = _around_files(ctx, trash_path(rel_path, taken, folder_name=top))
    ensure_remote_dir(ctx, parent_rel(target))
    source = remote_path
    if taken:
        source = ctx.client.rename(ctx.repo_id, remote_path, target.rsplit("/", 1)[1])
    moved: str = ctx.client.move(ctx.repo_id, source, ctx.remote_path(parent_rel(target)))
    moved_rel = moved[len(ctx.remote_path("")):].lstrip("/") if ctx.remote_root.strip("/") else moved.lstrip("/")
    remote_written(ctx, rel_path, moved_rel)
    ctx.snapshot.pop(rel_path, None)
    ctx.snapshot[moved_rel] = RemoteEntry(moved_rel, False, current.id, current.size, current.mtime)
    reach("delete.remote_trashed")
    ctx.state.set_meta(trashed_key(moved_rel), datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ"))
    ctx.state.delete_base(rel_path)
    return moved_rel
