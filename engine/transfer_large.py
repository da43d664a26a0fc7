"""Pushing large files: streamed, chunked, resumable, never held in memory.

Files above the merge limit cannot be three-way merged, so their
read-merge-write is simpler: if the remote changed since base, the resolver
(:mod:`.resolve`, situation ``LARGE``) has the remote version moved aside on the server into ``/.conflict/<dir>/`` (a
server-side rename + move, no transfer) and fetched into the mirror's
``.conflict/``; then the local file is uploaded in chunks, an update based on
the head read before (an edit landing meanwhile makes the server keep it and
store ours as an SFConflict file, which is removed before the next
round).  Upload and read-back are the shared ones of :mod:`.write_path`
(the id the server reports must be the upload's and the id computed
locally from the same bytes, else the file is downloaded again and
compared).  An upload interrupted by a crash resumes
(``file-uploaded-bytes``) only when the state says the partial upload was
of exactly this content.
"""

from __future__ import annotations

import os

from .conflict_archive import archive
from .context import MirrorContext
from .errors import LocalError
from .events import ConflictRecord, SyncEvent
from .localfs import hash_file, stat_fingerprint
from .paths import parent_rel
from .resolve import Facts, Situation, decide
from .state import Base
from .transfer import HEAD_HONOURED, LocalChanged, PushOutcome, ensure_remote_dir, head_for, remote_written
from .write_path import current_remote, read_back, send

__all__ = ["LARGE_FILE", "push_large"]

#: Files above this many bytes take the streamed path.
LARGE_FILE = 4 * 1024 * 1024


def push_large(ctx: MirrorContext, rel_path: str, base: Base | None) -> PushOutcome:
    """Read-merge-write of a large local file, streamed in chunks.

    :raises LocalChanged: the file changed while it was uploaded.
    :raises RemoteError: from the client; base does not advance.
    """
    path = ctx.local_path(rel_path)
    conflict: ConflictRecord | None = None
    from .sfconflict import find_own, remove_remote

    for attempt in range(ctx.options.max_attempts):
        sha1, fid, size, fp = hash_file(path)
        head, _ = head_for(ctx, rel_path, fresh=attempt > 0)
        remote = current_remote(ctx, rel_path)
        if remote is not None and remote.id == fid:
            ctx.state.set_base(Base(rel_path, False, sha1, fid, *fp))
            ctx.snapshot[rel_path] = remote
            return PushOutcome("upload", conflict)
        if remote is not None and (base is None or remote.id != base.remote_id):
            # Too large to merge: the resolver says theirs is moved aside on the server.
            decision = decide(Facts(Situation.LARGE, rel_path))
            assert decision.copy is not None
            conflict = archive(ctx, rel_path, decision.copy, remote=remote)
            remote = None
        ensure_remote_dir(ctx, parent_rel(rel_path))
        pending_key = f"upload:{rel_path}"
        resume = ctx.state.get_meta(pending_key) == sha1
        ctx.state.set_meta(pending_key, sha1)

        def progress(done: int, total: int) -> None:
            ctx.emit(SyncEvent("transfer", rel_path, "up", done=done, total=total))

        def unchanged(first: int, end: int) -> None:
            # Stop before a chunk of a file that changed under us: the server
            # must never assemble bytes from two versions.
            if stat_fingerprint(os.stat(path)) != fp:
                raise LocalChanged(f"{rel_path} changed while it was uploaded; will upload again",
                                   path=rel_path)

        with open(path, "rb") as fh:
            result = send(ctx, rel_path, fh, size, exists=remote is not None, head=head, resume=resume,
                          progress=progress, before_chunk=unchanged)
        ctx.state.set_meta(pending_key, None)
        remote_written(ctx, rel_path)
        if stat_fingerprint(os.stat(path)) != fp:
            raise LocalChanged(f"{rel_path} changed while it was uploaded; will upload again", path=rel_path)
        if result.path != ctx.remote_path(rel_path):
            ctx.client.delete(ctx.repo_id, result.path)  # raced with a new remote file: merge next round
            continue
        if read_back(ctx, rel_path, result.id, sha1=sha1, size=size, file_id=fid) is not None:
            ctx.state.set_base(Base(rel_path, False, sha1, result.id, *fp))
            return PushOutcome("upload", conflict)
        own = find_own(ctx, rel_path, result.id) if remote is not None else None
        if own is not None:
            # The server kept an edit that landed meanwhile; ours is still
            # local: next round archives that edit and uploads ours again.
            remove_remote(ctx, own)
            ctx.state.set_meta(HEAD_HONOURED, "1")
    raise LocalError(f"{rel_path}: another writer kept changing it; will try again later",
                     title="Busy file", path=rel_path)
