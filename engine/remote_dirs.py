"""Our own writes to the server's folders: creating a folder and what a
write of ours means for the snapshot.

Below transfers and conflict copies alike (both call it), so it imports
nothing of either.
"""

from __future__ import annotations

from .context import MirrorContext
from .errors import RemoteOperationError
from .models import RemoteEntry
from .paths import parent_rel

__all__ = ["remote_written", "ensure_remote_dir"]


def remote_written(ctx: MirrorContext, *rel_paths: str) -> None:
    """Our own write changed ``rel_paths`` on the server: forget the folder ids
    the snapshot holds for their ancestors (and the root's), so the next
    remote scan lists those folders again.

    Without this, a folder that later returns to exactly the id it had when
    it was last listed (a file moved away by us and moved back by another
    client, a file we uploaded and someone deleted) is taken as unchanged and
    its children are copied from our edited snapshot: the change is missed.
    Costs nothing in the usual case (our write changed the ids anyway).
    """
    ctx.head_stale.update(rel_paths)
    ctx.since_listed.update(rel_paths)
    for rel in rel_paths:
        parent = parent_rel(rel)
        while parent:
            known = ctx.snapshot.get(parent)
            if known is not None and known.is_dir and known.id:
                ctx.snapshot[parent] = RemoteEntry(parent, True, "", known.size, known.mtime)
            parent = parent_rel(parent)
    ctx.state.set_meta("root_oid", None)
    ctx.state.set_meta("wrote_since_head", "1")  # see regression.check_own_writes


def ensure_remote_dir(ctx: MirrorContext, rel_dir: str) -> None:
    """Create a remote folder (and its parents) unless the snapshot has it.

    :raises RemoteOperationError: a file on the server has the name of the
        folder or of one of its parents (the server would only say HTTP 520).
    """
    if not rel_dir:
        return
    known = ctx.snapshot.get(rel_dir)
    if known is not None and known.is_dir:
        return
    parts = rel_dir.split("/")
    for i in range(1, len(parts) + 1):
        sub = "/".join(parts[:i])
        entry = ctx.snapshot.get(sub)
        if entry is not None and not entry.is_dir:
            raise RemoteOperationError(
                f"Cannot create the folder {rel_dir} on the server: a file named {sub} is in the way. "
                f"Rename or move that file.", path=rel_dir, title="A file is in the way")
    ctx.client.mkdir(ctx.repo_id, ctx.remote_path(rel_dir), parents=True)
    remote_written(ctx, rel_dir)
    parts = rel_dir.split("/")
    for i in range(1, len(parts) + 1):
        sub = "/".join(parts[:i])
        if sub not in ctx.snapshot:
            ctx.snapshot[sub] = RemoteEntry(sub, True, "")
