"""The one way bytes go to the server, and the one read-back
(docs/architecture.md §5, steps 2 and 3).

Every writer uses these two: the sync's read-merge-write of small files
(:func:`ohsync.engine.transfer.push`), of large files
(:func:`ohsync.engine.transfer_large.push_large`), conflict copies
(:mod:`ohsync.engine.merge.archive`) and drop-folder filing (through
:class:`ohsync.engine.mirror_api.EngineMirror`).  The batch of new files
(:mod:`ohsync.engine.upload_batch`) uses the batch variant,
:func:`send_batch`, and checks it with :func:`batch_listing`.

* :func:`send` uploads a new file or updates an existing one: bytes in
  memory in one request (``upload`` / ``update``), a file object streamed
  in chunks (``upload_chunked``, resumable).
* :func:`read_back` decides whether the server now holds exactly what was
  sent: the live entry must carry the id the upload answered, and
  (:func:`holds_content`) unless that id is the content id computed locally
  (the sha1 of the 8 MiB blocks' sha1s), the file is downloaded again
  (streamed) and compared by sha1 and size.
* :func:`damaged_copy` tells a read-back that failed because the server
  stored our own upload wrong (the C fileserver sometimes keeps a file of a
  multi-file upload with one extra trailing ``\r``) from one that failed
  because another writer's version is there: the first is a failed upload,
  sent again on top of what the server holds (:func:`adopt_damaged`), never
  merged or archived as someone else's version.
"""

from __future__ import annotations

import hashlib
import io
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, BinaryIO

from .capabilities import file_history
from .context import MirrorContext
from .errors import NotFoundError, ProtocolError, ServerError
from .ids import ContentHasher, seafile_file_id, sha1_bytes
from .merge.choose import is_text
from .models import RemoteEntry, UploadResult
from .state import Base

__all__ = ["DamagedCopy", "adopt_damaged", "batch_listing", "current_remote", "damaged_copy", "damaged_upload",
           "holds_content", "read_back", "read_back_with_history", "send", "send_batch"]


def current_remote(ctx: MirrorContext, rel_path: str) -> RemoteEntry | None:
    """The server's entry of file ``rel_path`` now (``GET …/file/detail/``), or None."""
    try:
        detail = ctx.client.file_detail(ctx.repo_id, ctx.remote_path(rel_path))
    except NotFoundError:
        return None
    return RemoteEntry(rel_path, False, detail.id, detail.size, detail.mtime)


def send(ctx: MirrorContext, rel_path: str, content: bytes | BinaryIO, size: int, *, exists: bool,
         head: str | None = None, resume: bool = False, attempts: int | None = None,
         chunk_size: int | None = None, progress: Callable[[int, int], None] | None = None,
         before_chunk: Callable[[int, int], None] | None = None, hasher: ContentHasher | None = None,
         resume_cap: int | None = None, max_request: int | None = None,
         sending: Callable[[int, int], None] | None = None) -> UploadResult:
    """Upload ``content`` to ``rel_path``.

    :param content: bytes (one request: ``POST`` to the upload or update
        link, API §4.5/§4.6), or a seekable binary file read from offset 0
        (chunked, API §5.5; a file of at most ``chunk_size`` bytes still
        goes in one request).
    :param size: bytes in ``content``.
    :param exists: update the existing file in place (``update-link``,
        based on ``head``); False uploads a new file, never replacing: a
        name taken meanwhile is auto-renamed by the server (see the result's
        ``path``).
    :param head: the library commit an update is based on (ignored for new files).
    :param resume: chunked only: continue a partial upload the server holds.
    :param attempts: chunked only: failures in a row of one chunk before giving up.
    :param chunk_size: chunked only: bytes per request (default the
        mirror's ``upload_chunk``).
    :param progress: chunked only: ``progress(done_bytes, size)`` after each chunk.
    :param before_chunk: chunked only: ``before_chunk(first, end)`` before
        each chunk; raising stops the upload.
    :param hasher: chunked only: fed the bytes as they are sent (their sha1
        and content id afterwards, with no pass over the file first).
    :param resume_cap: chunked only: resume from at most this offset (the
        prefix the server confirmed before the program stopped).
    :param max_request: file objects only: bytes one request may carry; a
        file up to that size goes in one streamed request, chunks grow up
        to it (``upload_chunked``); None: requests of ``chunk_size``.
    :param sending: file objects only: ``sending(bytes_sent, size)`` while a
        request streams (display only, not confirmed by the server).

    Chunked uploads keep ``ctx.options.upload_in_flight`` chunks in flight
    on ``ctx.executor`` (the transfer pool) when there is one.
    :returns: the server's :class:`UploadResult` (path as stored, id, size).
    :raises RemoteError: from the client (QuotaError, NotFoundError for a
        missing folder, …).
    """
    remote_path = ctx.remote_path(rel_path)
    if isinstance(content, (bytes, bytearray)):
        if exists:
            result: UploadResult = ctx.client.update(ctx.repo_id, remote_path, content, head=head)
        else:
            result = ctx.client.upload(ctx.repo_id, remote_path, content, replace=False)
        return result
    result = ctx.client.upload_chunked(ctx.repo_id, remote_path, content, size=size, exists=exists,
                                       progress=progress, resume=resume,
                                       chunk_size=chunk_size or ctx.options.upload_chunk,
                                       attempts=attempts, before_chunk=before_chunk,
                                       head=head if exists else None, hasher=hasher,
                                       executor=ctx.executor, in_flight=ctx.options.upload_in_flight,
                                       resume_cap=resume_cap, max_request=max_request, sending=sending)
    return result


def send_batch(ctx: MirrorContext, folder: str, files: list[tuple[str, bytes]],
               under: str | None = None) -> list[UploadResult]:
    """Upload several new files into one remote folder in one request
    (``POST`` to a folder-bound upload link, API §4.5, ``relative_path``
    for ``under``); never replacing (a taken name is auto-renamed).

    :param folder: the remote folder (library path) the link is bound to.
    :param files: ``(name or path below the folder, content)`` pairs.
    :param under: the subfolder below ``folder`` they go to, or None.
    :returns: the server's answers, one per file (order: the server's;
        see :func:`ohsync.engine.upload_batch` for the pairing).
    :raises RemoteError: from the client.
    """
    results: list[UploadResult] = ctx.client.upload_files(ctx.repo_id, folder, files, under=under)
    return results


def batch_listing(ctx: MirrorContext, folder_rel: str, single: str | None = None) -> dict[str, RemoteEntry]:
    """What the server holds after a batch of new files went up: the
    folder's entries by name (``GET …/dir/``), or for a batch of one file
    (``single``, its rel path) that file's entry (``GET …/file/detail/``,
    ``{}`` when it is not there).

    :raises RemoteError: from the client (NotFoundError: the folder is gone).
    """
    if single is not None:
        try:
            entry = ctx.client.file_detail(ctx.repo_id, ctx.remote_path(single))
        except NotFoundError:
            return {}
        return {single.rsplit("/", 1)[-1]: entry}
    listing = ctx.client.list_dir(ctx.repo_id, ctx.remote_path(folder_rel))
    return {entry.name: entry for entry in listing.entries}


class _HashSink:
    """A write-only file that hashes what the client downloads into it
    (rewinding to 0 starts over, so the client may retry the download)."""

    def __init__(self) -> None:
        self.sha1 = hashlib.sha1()
        self.size = 0

    def tell(self) -> int:
        return self.size

    def seek(self, offset: int, whence: int = 0) -> int:
        if (offset, whence) != (0, 0):
            raise io.UnsupportedOperation("a hash sink only rewinds to its start")
        self.sha1, self.size = hashlib.sha1(), 0
        return 0

    def truncate(self, size: int | None = None) -> int:
        return self.size

    def write(self, data: bytes) -> int:
        self.sha1.update(data)
        self.size += len(data)
        return len(data)

    def writable(self) -> bool:
        return True


def read_back(ctx: MirrorContext, rel_path: str, uploaded_id: str, *, sha1: str, size: int,
              file_id: str) -> RemoteEntry | None:
    """Is what the server holds at ``rel_path`` now exactly what was sent?

    ``GET …/file/detail/``: the live id must be ``uploaded_id``; then
    :func:`holds_content`.  On success the snapshot entry of ``rel_path``
    is updated.

    :param uploaded_id: the id the upload answered.
    :param sha1: hex sha1 of the bytes sent.
    :param size: their size in bytes.
    :param file_id: the Seafile id computed locally from them
        (:func:`ohsync.engine.ids.file_hashes`).
    :returns: the server's entry when verified, else None (another writer
        slipped in, or the server stored something else).
    :raises RemoteError: from the client.
    """
    current = current_remote(ctx, rel_path)
    if current is None or current.id != uploaded_id:
        return None
    if not holds_content(ctx, current, sha1=sha1, size=size, file_id=file_id):
        return None
    ctx.snapshot[rel_path] = current
    ctx.wrote(rel_path, current.id)
    return current


def read_back_with_history(ctx: MirrorContext, rel_path: str, uploaded_id: str, *, sha1: str, size: int,
                           file_id: str, limit: int = 1) -> tuple[RemoteEntry | None, list[Any] | None]:
    """:func:`read_back` through the file's history, which also names the
    commit that holds our version.

    ``GET /api/v2.1/repos/{id}/file/history/?limit=`` (newest first, the
    first is the live version): when its first revision is ``uploaded_id``
    of ``size`` bytes and :func:`holds_content` agrees, the write is
    verified in that one request and its commit is kept
    (``ctx.written_at``) for the path's next update
    (:meth:`~ohsync.engine.context.MirrorContext.written_head_for`).
    Anything else (another version live, no history on this server, a
    history the server failed to read: 5xx or a malformed answer) is decided
    by :func:`read_back` (``file/detail``), as without the history.

    :param limit: revisions to read (2 also shows the one ours replaced).
    :returns: ``(entry, revisions)``: the server's entry when verified, else
        None; the revisions read (None when the server keeps no history or
        the file is gone).
    :raises RemoteError: from the client.
    """
    try:
        revisions = file_history(ctx, rel_path, limit=limit)
    except NotFoundError:
        revisions = None
    except (ServerError, ProtocolError):
        # the history is a walk the server may fail at (a long one): the detail still tells
        revisions = None
    live = revisions[0] if revisions else None
    if live is not None and live.file_id == uploaded_id and live.size == size:
        # mtime: the history gives the commit's time only; no pass reads a pushed file's mtime
        entry = RemoteEntry(rel_path, False, uploaded_id, size, int(time.time()))
        if holds_content(ctx, entry, sha1=sha1, size=size, file_id=file_id):
            ctx.snapshot[rel_path] = entry
            ctx.wrote(rel_path, uploaded_id)
            ctx.written_at[rel_path] = (live.commit_id, uploaded_id)
            ctx.own_commits.setdefault(live.commit_id, []).append(rel_path)
            return entry, revisions
    return read_back(ctx, rel_path, uploaded_id, sha1=sha1, size=size, file_id=file_id), revisions


def holds_content(ctx: MirrorContext, entry: RemoteEntry, *, sha1: str, size: int, file_id: str) -> bool:
    """Does the server's file ``entry`` (just read) hold exactly the bytes
    with this sha1, size and content id?

    A file whose id is the locally computed ``file_id`` does: that id is
    the sha1 of the 8 MiB blocks' sha1s, so the server provably stored
    those bytes, and nothing is downloaded.  Anything else (a server that
    cut the blocks otherwise) is downloaded (streamed, never held in
    memory) and compared by sha1 and size.

    :raises RemoteError: from the client.
    """
    if entry.id == file_id and entry.size == size:
        return True
    sink = _HashSink()
    ctx.client.download(ctx.repo_id, ctx.remote_path(entry.path), sink)
    return sink.sha1.hexdigest() == sha1 and sink.size == size


@dataclass(frozen=True)
class DamagedCopy:
    """What the server made of one of our uploads when it stored other bytes.

    :ivar entry: the server's file now (rel path, its id and size).
    :ivar content: the bytes it holds.
    """

    entry: RemoteEntry
    content: bytes


def damaged_copy(ctx: MirrorContext, sent: bytes, entry: RemoteEntry | None,
                 answered_id: str | None) -> DamagedCopy | None:
    """Is the server's file ``entry`` its own damaged copy of our upload of
    ``sent`` (a failed upload to repeat), not another writer's version?

    Two tells: it holds ``sent`` plus exactly one trailing ``\r`` (size and
    content id, computed here with no request: the C fileserver's stray
    ``\r``); or its id is the one the upload answered for this file while
    that is not the content id of ``sent`` (the server said it stored that
    for us; its bytes are then downloaded, ``GET …/file/`` + the download).
    Another writer's version shows neither unless it is byte for byte that
    damaged copy, and then overwriting it loses nothing of theirs.

    :param entry: the server's file at the path now (rel path), None: none.
    :param answered_id: the id the upload answered for this path, if known.
    :returns: the damaged copy, or None (it holds ``sent`` exactly, or it is
        another writer's version: merge as usual).
    :raises RemoteError: from the download.
    """
    if entry is None or entry.is_dir or entry.id == seafile_file_id(sent):
        return None
    stray = sent + b"\r"
    if entry.size == len(stray) and entry.id == seafile_file_id(stray):
        return DamagedCopy(entry, stray)
    if answered_id is None or entry.id != answered_id:
        return None
    content, file_id = ctx.client.download_bytes(ctx.repo_id, ctx.remote_path(entry.path))
    if file_id != entry.id or seafile_file_id(content) != entry.id:
        return None  # changed since the listing: someone else's now
    return DamagedCopy(entry, content)


def damaged_upload(ctx: MirrorContext, rel_path: str, sent: bytes, uploaded_id: str) -> DamagedCopy | None:
    """After a failed :func:`read_back` of one upload: :func:`damaged_copy` of
    what the server holds at ``rel_path`` now (``GET …/file/detail/``).

    :raises RemoteError: from the client.
    """
    return damaged_copy(ctx, sent, current_remote(ctx, rel_path), uploaded_id)


def adopt_damaged(ctx: MirrorContext, rel_path: str, copy: DamagedCopy) -> Base:
    """Record the server's damaged copy as the base of ``rel_path`` (and its
    snapshot entry), so the next write is an update on top of it, based on
    what the server provably holds: the local file differs from that base and
    is sent again; a version another writer puts there meanwhile is merged
    against it.  The stat fingerprint is left empty (the local file never
    held these bytes).  Counted in ``ctx.upload_retries``.

    :returns: the base recorded.
    """
    base = Base(rel_path, False, sha1_bytes(copy.content), copy.entry.id, len(copy.content))
    ctx.state.set_base(base, copy.content if is_text(copy.content) else None)
    ctx.snapshot[rel_path] = copy.entry
    ctx.head_stale.add(rel_path)  # the copy landed after the head the pass read: update on a fresh one
    ctx.upload_retries.append(rel_path)
    return base
