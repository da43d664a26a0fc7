"""Undoing deletions the safety valve holds (docs/architecture.md §4): the
other choice beside confirming them.

A deletion is held on the side it would be carried out on
(:meth:`~ohsync.engine.sync.valve.DeleteValve.held`): ``remote`` — the file was
deleted in the mirror and would be deleted on the server; restoring brings
the server's copy back into the mirror (:func:`~ohsync.engine.transfer.pull`).
``local`` — the file was deleted on the server and would be deleted here;
restoring puts the mirror's copy back on the server (the normal push, with
read-back; large files streamed).  The next full pass then finds both sides
alike and holds nothing.  Call on the thread that owns the engine.
"""

from __future__ import annotations

import os

from ..context import MirrorContext
from ..errors import OhsyncError
from ..events import SyncEvent
from ..transfer import pull, push
from ..transfer_large import LARGE_FILE, push_large
from ..write_path import current_remote

__all__ = ["restore_held"]


def restore_held(ctx: MirrorContext, held: list[tuple[str, str]]) -> tuple[list[str], list[tuple[str, str]]]:
    """Bring back each held deletion's file on the side it was deleted on.

    :param held: ``(rel path, side)`` as the valve holds them.
    :returns: ``(restored paths, [(path, why not)])``; a path gone from both
        sides, or one that failed, is in the second list and stays held.
    """
    restored: list[str] = []
    left: list[tuple[str, str]] = []
    for rel, side in held:
        try:
            if side == "remote":  # deleted here: the server's copy comes back
                remote = current_remote(ctx, rel)
                if remote is None or remote.is_dir:
                    left.append((rel, "it is gone from the server too"))
                    continue
                if os.path.lexists(ctx.local_path(rel)):
                    restored.append(rel)  # already back
                    continue
                pull(ctx, rel, remote, None)
                ctx.emit(SyncEvent("synced", rel, "down", action="restore"))
            else:  # deleted on the server: the mirror's copy goes back up
                path = ctx.local_path(rel)
                if not path.is_file() or path.is_symlink():
                    left.append((rel, "it is gone from the mirror too"))
                    continue
                base = ctx.state.get_base(rel)
                if os.stat(path).st_size > LARGE_FILE:
                    push_large(ctx, rel, base)
                else:
                    push(ctx, rel, base)
                ctx.emit(SyncEvent("synced", rel, "up", action="restore"))
            restored.append(rel)
        except (OhsyncError, OSError) as exc:
            left.append((rel, str(exc)))
    ctx.state.replace_remote_snapshot(ctx.snapshot.values())
    return restored, left
