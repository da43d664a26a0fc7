"""Pushing large files: streamed, chunked, resumable, never held in memory.

Files above the merge limit cannot be three-way merged, so their
read-merge-write is simpler: if the remote changed since base, the resolver
(:mod:`ohsync.engine.merge.resolve`, situation ``LARGE``) has the remote
version moved aside on the server into ``/.conflict/<dir>/`` (a
server-side rename + move, no transfer) and fetched into the mirror's
``.conflict/``; then the local file is uploaded, streamed from disk in one
request up to ``EngineOptions.upload_max_request`` and in resumable chunks
above it (or after that request failed), an update based on the head read
before (an edit landing meanwhile makes the server keep it and store ours as
an SFConflict file, which is removed before the next round).  A file the
snapshot shows as its base (absent, for a new file) is not looked up again
first; the update carries the snapshot's head (``LISTING_TRUST``).
The file is hashed while it is sent, on the engine's transfer pool when it
has one (no pass over it before the first byte; only a remote file of the
same size is worth hashing first, to see whether it already holds our
bytes); chunks in flight only with ``upload_in_flight`` above 1.  Upload
and read-back are the shared ones of :mod:`.write_path` (the id the server
reports must be the upload's and the id computed locally from the bytes
sent, else the file is downloaded again and compared).  An upload
interrupted by a crash resumes (``file-uploaded-bytes``) only when the
state says the partial upload was of exactly this file version (same
fingerprint).
"""

from __future__ import annotations

import os
import stat

from .context import MirrorContext
from .errors import LocalError
from .events import ConflictRecord, SyncEvent
from .ids import ContentHasher
from .localfs import Fingerprint, hash_file, stat_fingerprint
from .merge.archive import archive
from .merge.resolve import Facts, Situation, decide
from .merge.sfconflict import find_own, remove_remote
from .models import UploadResult
from .nofollow import OutsideMirrorError, entry_stat, open_regular
from .paths import parent_rel
from .state import Base
from .transfer import HEAD_HONOURED, LocalChanged, PushOutcome, ensure_remote_dir, head_for, listed_head, remote_written
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
    for attempt in range(ctx.options.max_attempts):
        fp = _fingerprint(ctx, rel_path)
        size = fp[0]
        listed = listed_head(ctx, rel_path, base) if attempt == 0 else None
        head: str | None
        if listed is not None:
            head, remote = listed, ctx.snapshot.get(rel_path)  # as push does (see LISTING_TRUST)
        else:
            head, _ = head_for(ctx, rel_path, fresh=attempt > 0)
            remote = current_remote(ctx, rel_path)
        if remote is not None and remote.size == size:
            # Only a remote file of the same size can hold our bytes: hash first.
            try:
                sha1, fid, _, fp = hash_file(path, root=ctx.local_root)
            except OutsideMirrorError as exc:
                raise _changed(rel_path, exc) from exc
            if remote.id == fid:
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
        result, sha1, fid = _stream_up(ctx, rel_path, fp, size, exists=remote is not None, head=head)
        remote_written(ctx, rel_path)
        if _fingerprint(ctx, rel_path) != fp:
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


def _changed(rel_path: str, exc: Exception) -> LocalChanged:
    """A local file that is no longer a regular file one can read without following a link: re-plan."""
    return LocalChanged(f"{rel_path} changed while syncing and is not read: {exc}", path=rel_path)


def _fingerprint(ctx: MirrorContext, rel_path: str) -> Fingerprint:
    """The fingerprint of the local file ``rel_path`` itself (links not followed).

    :raises LocalChanged: it is gone, or now a link, a folder or not a regular file.
    """
    try:
        st = entry_stat(ctx.local_root, rel_path)
    except OutsideMirrorError as exc:
        raise _changed(rel_path, exc) from exc
    if st is None or not stat.S_ISREG(st.st_mode):
        raise LocalChanged(f"{rel_path} is no longer a file here; re-planning", path=rel_path)
    return stat_fingerprint(st)


def _stream_up(ctx: MirrorContext, rel_path: str, fp: Fingerprint, size: int, *, exists: bool,
               head: str | None) -> tuple[UploadResult, str, str]:
    """Stream the local file of fingerprint ``fp`` and ``size`` bytes up to ``rel_path``
    (``send``: one request or resumable chunks), hashing it on the way.

    :returns: the server's answer, and the sha1 and Seafile file id of the bytes sent.
    :raises LocalChanged: the file changed before a chunk was sent.
    :raises RemoteError: from the client.
    """
    # A partial upload on the server is resumed only when it was of this
    # very file version (same fingerprint), and from no further than the
    # prefix the server confirmed to us: with chunks in flight its temp
    # file may end past a gap.
    pending_key = f"upload:{rel_path}"
    version = ",".join(str(n) for n in fp)
    recorded = (ctx.state.get_meta(pending_key) or "").split(":")
    resume = recorded[0] == version
    cap = int(recorded[1]) if resume and len(recorded) > 1 and recorded[1].isdigit() else 0
    ctx.state.set_meta(pending_key, f"{version}:{cap}")
    hasher = ContentHasher()  # hashed while sending: no pass over the file first

    def progress(done: int, total: int) -> None:  # confirmed by the server
        if done < total:
            ctx.state.set_meta(pending_key, f"{version}:{done}")
        ctx.emit(SyncEvent("transfer", rel_path, "up", done=done, total=total))

    def sending(done: int, total: int) -> None:  # streamed so far (one request may carry the file)
        ctx.emit(SyncEvent("transfer", rel_path, "up", done=done, total=total))

    def unchanged(first: int, end: int) -> None:
        # Stop before a chunk of a file that changed under us: the server
        # must never assemble bytes from two versions.
        if _fingerprint(ctx, rel_path) != fp:
            raise LocalChanged(f"{rel_path} changed while it was uploaded; will upload again",
                               path=rel_path)

    try:
        fh = open_regular(ctx.local_root, rel_path)  # what is sent is this very file, never a link's target
    except (OutsideMirrorError, FileNotFoundError, NotADirectoryError, IsADirectoryError) as exc:
        raise _changed(rel_path, exc) from exc
    with fh:
        if stat_fingerprint(os.fstat(fh.fileno())) != fp:
            raise LocalChanged(f"{rel_path} changed before it was uploaded; will upload again", path=rel_path)
        result = send(ctx, rel_path, fh, size, exists=exists, head=head, resume=resume,
                      progress=progress, before_chunk=unchanged, hasher=hasher, resume_cap=cap,
                      max_request=ctx.options.upload_max_request, sending=sending)
    ctx.state.set_meta(pending_key, None)
    return result, hasher.sha1(), hasher.file_id()
