"""A file replaced by a folder of the same name, or a folder by a file.

The rule (``docs/architecture.md`` §4), for a path that is a file on one
side and a folder on the other:

* the side that still has the old kind did not change it since the last
  sync: the new kind wins there too.  An old file goes the way of a
  deletion (a local file is backed up and removed, a server file moves into
  ``/.trash/``); an old folder is emptied by the ordinary deletes of its
  files and then removed (``engine/sync/dirs.py``);
* both changed (or the path was never synced): the file is archived in
  ``/.conflict/`` on both sides and the folder keeps the name.

This module holds the questions and the two archiving steps;
:class:`~ohsync.engine.sync.dirs.FolderSteps` decides with them.
"""

from __future__ import annotations

import os
import stat
from datetime import datetime, timezone

from ..backups import backup_file
from ..context import MirrorContext
from ..events import ConflictRecord
from ..ignore import IgnoreRules
from ..local_replace import BeingWritten, LocalChanged, refuse_if_written, remove
from ..localfs import hash_file, stat_fingerprint
from ..merge.archive import archive
from ..merge.conflict_names import origin_of
from ..merge.resolve import Copy
from ..models import RemoteEntry
from ..names import is_desktop_junk
from ..nofollow import read_file
from ..paths import normalize_rel
from ..state import Base

__all__ = ["archive_local_file", "archive_remote_file", "clear_desktop_junk", "local_tree_changed",
           "remote_tree_changed"]


def local_tree_changed(ctx: MirrorContext, rel: str, bases: dict[str, Base], ignore: IgnoreRules) -> bool:
    """True when the local folder ``rel`` holds something not synced as it is:
    a file without a base, or one whose content differs from its base.
    Files removed here since the sync do not count (the other side removed
    the folder too).  Symbolic links are not followed; ignored names do not count.

    :raises OSError: a file cannot be read (the caller reports it for ``rel``).
    """
    top = ctx.local_path(rel)
    for folder, dirs, files in os.walk(top):
        sub = normalize_rel(os.path.relpath(folder, ctx.local_root).replace(os.sep, "/"))
        dirs[:] = [d for d in dirs if not ignore.match(normalize_rel(f"{sub}/{d}"), True)]
        for name in files:
            path = normalize_rel(f"{sub}/{name}")
            if ignore.match(path, False):
                continue
            st = os.lstat(os.path.join(folder, name))
            if not stat.S_ISREG(st.st_mode):
                continue
            base = bases.get(path)
            if base is None or base.is_dir:
                return True
            if stat_fingerprint(st) != base.fingerprint() and hash_file(ctx.local_path(path))[0] != base.sha1:
                return True
    return False


def remote_tree_changed(ctx: MirrorContext, rel: str, bases: dict[str, Base]) -> bool:
    """True when the server's folder ``rel`` (as the snapshot lists it) holds a
    file without a base or with another id than its base's.  Files removed
    there since the sync do not count."""
    prefix = rel + "/"
    for path, entry in ctx.snapshot.items():
        if entry.is_dir or not path.startswith(prefix):
            continue
        base = bases.get(path)
        if base is None or base.is_dir or base.remote_id != entry.id:
            return True
    return False


def archive_local_file(ctx: MirrorContext, rel: str, reason: str) -> ConflictRecord:
    """Archive the local file ``rel`` in ``/.conflict/`` on both sides and
    remove it here (after a backup), so a folder can take its name.

    :returns: the conflict record (``archived`` names the copy).
    :raises BeingWritten: a program is saving the file (nothing archived, it stays).
    :raises LocalChanged: the file changed while it was archived (it stays;
        the next pass looks again).
    :raises OSError, RemoteError: reading, uploading or removing failed.
    """
    refuse_if_written(ctx, rel)  # not archived (and uploaded) every pass while a program saves it
    data, st = read_file(ctx.local_root, rel)  # the mirror's own regular file, never a link's target
    before = stat_fingerprint(st)
    origin = origin_of(data)
    copy = Copy("upload", rel, "local" if origin == "remote" else origin, reason, ("kind",),
                announce="the file here was archived as {stored}; the folder keeps the name")
    record = archive(ctx, rel, copy, theirs=data, when=datetime.now(timezone.utc))
    try:
        remove(ctx, rel, before)  # after a backup; checked on the very file taken away
    except BeingWritten:
        raise
    except (FileNotFoundError, LocalChanged):
        raise LocalChanged(f"{rel} changed while it was archived; keeping it", path=rel) from None
    ctx.state.delete_base(rel)
    return record


def archive_remote_file(ctx: MirrorContext, rel: str, remote: RemoteEntry, reason: str) -> ConflictRecord:
    """Archive the server's file ``rel`` in ``/.conflict/`` on both sides (a
    server-side move, then one download), so a folder can take its name.

    :returns: the conflict record.
    :raises RemoteError: from the client.
    """
    copy = Copy("move", rel, "remote", reason, ("kind",),
                announce="the server's file was archived as {stored}; the folder keeps the name")
    record = archive(ctx, rel, copy, remote=remote, when=datetime.now(timezone.utc))
    ctx.state.delete_base(rel)
    return record


def clear_desktop_junk(ctx: MirrorContext, rel: str) -> bool:
    """Empty the local folder ``rel`` when all it still holds is desktop junk
    (:func:`~ohsync.engine.names.is_desktop_junk`, in it or in folders below):
    each such file is backed up, then removed, and so are the folders below.
    Anything else (a file, a link) leaves everything as it is.

    :returns: True when the folder is empty now (the caller removes it).
    :raises BackupError: a backup could not be written (that file and the rest stay).
    :raises OutsideMirrorError: a file became a link meanwhile (it stays, never followed).
    :raises OSError: a removal failed.
    """
    top = ctx.local_path(rel)
    junk: list[str] = []
    folders: list[str] = []
    for folder, dirs, files in os.walk(top):
        sub = os.path.relpath(folder, ctx.local_root).replace(os.sep, "/")
        for name in dirs:
            if os.path.islink(os.path.join(folder, name)):
                return False
            folders.append(f"{sub}/{name}")
        for name in files:
            if not is_desktop_junk(name) or not stat.S_ISREG(os.lstat(os.path.join(folder, name)).st_mode):
                return False
            junk.append(f"{sub}/{name}")
    for path in junk:
        if ctx.options.backup_dir is not None:
            backup_file(ctx.local_root, path, ctx.options.backup_dir, ctx.options.library_name)
        ctx.local_path(path).unlink()
    for path in sorted(folders, key=lambda p: -p.count("/")):
        ctx.local_path(path).rmdir()
    return True
