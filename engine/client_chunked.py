"""Chunked, resumable upload of one large file (a mixin of
:class:`~ohsync.engine.client.SeafileClient`), ``docs/seafile-api.md`` §5.5.

A large file goes up in ``Content-Range`` chunks to an upload link (new
file) or an update link (existing file), resumable from the server's
``file-uploaded-bytes`` after a dropped connection or a restart of the
program.  Memory use is bounded by the chunk buffers, whatever the file size.
"""

from __future__ import annotations

import hashlib
import io
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, BinaryIO
from urllib.parse import quote

import httpx

from .client_answers import as_int, check_repo_id, parse_update_answer
from .client_errors import check_id, error_for_response, parse_json, translate_errors
from .client_http import TRANSIENT, SeafileHTTP
from .client_paths import join_remote, name_problem, upload_target
from .errors import LocalError, ProtocolError, RemoteError, ThrottledError, local_error
from .ids import BLOCK_SIZE
from .models import UploadResult

__all__ = ["CHUNK_SIZE", "ChunkedUploads", "Progress"]

log = logging.getLogger("ohsync.client")

#: Default chunk of a chunked upload: Seafile's block size, 8 MiB.
CHUNK_SIZE = BLOCK_SIZE
#: ``progress(done_bytes, total_bytes)``; total 0 when unknown.
Progress = Callable[[int, int], None]

_READ = 1024 * 1024


class ChunkedUploads(SeafileHTTP):
    """Chunked, resumable upload (see the module docstring)."""

    def upload_chunked(
        self,
        repo_id: str,
        remote_path: str,
        fh: BinaryIO,
        *,
        size: int,
        replace: bool = False,
        exists: bool = False,
        chunk_size: int = CHUNK_SIZE,
        progress: Progress | None = None,
        resume: bool = True,
        mtime: float | None = None,
        attempts: int | None = None,
        before_chunk: Callable[[int, int], None] | None = None,
        head: str | None = None,
    ) -> UploadResult:
        """Upload bytes ``[0, size)`` of ``fh`` to ``remote_path`` in chunks.

        New file (``exists=False``): ``GET /api2/repos/{id}/upload-link/?p=<parent>``,
        then ``POST <link>?ret-json=1`` multipart ``parent_dir``, ``replace``
        (0/1), ``last_modify``, one ``file`` part.  Existing file
        (``exists=True``): ``GET /api2/repos/{id}/update-link/?p=<parent>``,
        then ``POST <link>`` multipart ``target_file``, ``file``.  Each chunk
        carries ``Content-Range: bytes <first>-<last>/<size>`` and
        ``Content-Disposition: attachment; filename="<pct-encoded name>"``;
        non-final chunks answer ``{"success": true}``, the final one the
        normal answer (``[{"id","name","size"}]`` / the bare id).  A file of
        at most ``chunk_size`` bytes goes up in one ordinary request.

        Resuming: with ``resume`` the server is first asked
        ``GET /api/v2.1/repos/{id}/file-uploaded-bytes/?parent_dir=&file_name=``
        → ``{"uploadedBytes": N}`` and the upload continues at ``N`` (after a
        crash or restart).  Only pass ``resume=True`` when an interrupted
        upload to this path can only have been of this same content: the
        server keeps one partial file per path.  A chunk that fails with a
        dropped connection, a 5xx or an expired link is sent again with a
        fresh link from the last offset both sides agree on (the server's,
        capped at what it confirmed), up to ``attempts`` failures in a row.
        If the final chunk's answer was lost, the file on the server is
        checked (``file/detail``) before anything is sent again, so a new
        file is not stored twice as ``name (1)``.

        :param remote_path: the target file (its folder must exist).
        :param fh: seekable binary file; read ``chunk_size`` bytes at a time.
        :param size: bytes to send, from offset 0 of ``fh``.
        :param replace: new-file mode only: overwrite an entry of that name
            (**even a folder**; prefer ``exists=True`` for files).
        :param exists: update the existing file in place (takes precedence
            over ``replace``).
        :param chunk_size: bytes per request (default 8 MiB).
        :param progress: ``progress(done_bytes, size)`` after each chunk.
        :param resume: continue a partial upload the server holds.
        :param mtime: modification time, Unix seconds (``last_modify``;
            new files only).
        :param attempts: failures in a row before giving up (default: the
            client's ``retries + 1``).
        :param before_chunk: ``before_chunk(first, end)`` before each chunk
            ``[first, end)`` is read and sent; raising stops the upload (it
            can be resumed later).
        :param head: update mode only: the library commit the content is
            based on (``?head=`` on the update link, see ``SeafileClient.update``).
        :returns: :class:`UploadResult` (``path`` as stored: a new file may
            be auto-renamed ``name (1).ext``; ``id``; ``size`` in bytes).
        :raises RemoteOperationError: a name the form cannot carry (refused
            before any request) or another 4xx.
        :raises NotFoundError: the folder (404) or, for ``exists``, the file (441) is missing.
        :raises QuotaError: out of quota (443) or too large (442); not retried.
        :raises NetworkError, ServerError: still failing after ``attempts``.
        :raises LocalError: ``fh`` is shorter than ``size`` or unreadable.
        """
        repo = check_repo_id(repo_id)
        target, parent, name = upload_target(remote_path)
        if size < 0 or chunk_size < 1:
            raise ValueError("size must be >= 0 and chunk_size >= 1")
        limit = self._retries + 1 if attempts is None else max(1, attempts)
        form = {"target_file": target} if exists else {"parent_dir": parent, "replace": "1" if replace else "0"}
        if mtime is not None and not exists:
            form["last_modify"] = datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        kind = "update" if exists else "upload"
        single = size <= chunk_size  # one ordinary request, no Content-Range
        confirmed = 0
        if resume and not single:
            held = self._uploaded_bytes(repo, parent, name, target)
            confirmed = held if 0 <= held < size else 0
        offset, failures, link = confirmed, 0, None
        # One buffer for every chunk: httpx's request/response objects form
        # reference cycles that outlive a chunk until the garbage collector
        # runs; they only ever point at this buffer, so memory stays bounded.
        view = memoryview(bytearray(min(chunk_size, size)))
        while True:
            end = min(size, offset + chunk_size)
            if before_chunk is not None:
                before_chunk(offset, end)
            body = _read_chunk(fh, offset, view[:end - offset], target)
            try:
                if link is None:
                    link = self._fresh_link(repo, kind, parent, target)
                    if head and exists:
                        link = link.copy_merge_params({"head": check_id(head, what="the head commit id")})
                resp = self._post(link, form, name, body, None if single else (offset, size), target, exists)
            except TRANSIENT as exc:
                failures += 1
                if failures >= limit or (isinstance(exc, ThrottledError)
                                         and exc.retry_after > self._max_retry_after):
                    raise
                log.info("bytes %d-%d of %s failed (%s); resuming", offset, end, target, exc.title)
                self._backoff(failures, exc)
                link = None
                held = 0 if single else self._uploaded_bytes(repo, parent, name, target, default=offset)
                if end == size and held == 0:  # the final request may have been committed
                    done = self._committed(repo, target, fh, size)
                    if done is not None:
                        return done
                offset = min(max(held, 0), confirmed)
                continue
            failures = 0
            confirmed = offset = end
            if progress is not None:
                progress(end, size)
            if end == size:
                return self._final_answer(resp, exists, target, parent, size)

    def _fresh_link(self, repo: str, kind: str, parent: str, target: str) -> httpx.URL:
        url: httpx.URL = self._retrying(lambda: self._link(
            f"/api2/repos/{repo}/{kind}-link/", parent, what=f"getting an {kind} link", path=target))
        return url

    def _post(self, link: httpx.URL, form: dict[str, str], name: str, data: _ChunkBody,
              crange: tuple[int, int] | None, target: str, exists: bool) -> httpx.Response:
        """POST one multipart request (a chunk when ``crange = (first, total)``)."""
        what = "uploading a file in chunks" if crange else ("updating a file" if exists else "uploading a file")
        headers = {}
        if crange is not None:
            first, total = crange
            headers = {"Content-Range": f"bytes {first}-{first + data.size - 1}/{total}",
                       "Content-Disposition": f'attachment; filename="{quote(name, safe="")}"'}
        url = link if exists else link.copy_merge_params({"ret-json": "1"})
        timeout = httpx.Timeout(self._timeout, read=max(self._timeout * 10, 300.0))
        with translate_errors(what=what, path=target):
            # _ChunkBody is a binary file object (io.RawIOBase), which httpx streams
            resp = self._http.post(url, data=form,
                                   files={"file": (name, data, "application/octet-stream")},  # type: ignore[dict-item]
                                   headers=headers, timeout=timeout)
        if resp.status_code != 200:
            raise error_for_response(resp, what=what, path=target, fileserver=True, secrets=(self._token,))
        return resp

    def _final_answer(self, resp: httpx.Response, exists: bool, target: str, parent: str,
                      size: int) -> UploadResult:
        if exists:
            return UploadResult(path=target, id=parse_update_answer(resp.content, target), size=size)
        body = parse_json(resp.content, what="the upload", path=target)
        if not isinstance(body, list) or len(body) != 1 or not isinstance(body[0], dict):
            raise ProtocolError("The upload answer has an unexpected shape.", path=target)
        stored = body[0].get("name")
        problem = name_problem(stored)
        if problem:
            raise ProtocolError(f"The server stored the upload under an unsafe name: {problem}.", path=target)
        stored_size = as_int(body[0].get("size", size), "the upload answer")
        if stored_size != size:
            raise ProtocolError(f"The server stored {stored_size} of {size} bytes.", path=target)
        return UploadResult(path=join_remote(parent, str(stored)),
                            id=check_id(body[0].get("id"), what="the upload answer", path=target), size=size)

    def _uploaded_bytes(self, repo: str, parent: str, name: str, target: str, *, default: int = 0) -> int:
        """``file-uploaded-bytes``: bytes of a partial upload the server holds
        (``default`` when it cannot say)."""
        try:
            body = self._get_json(f"/api/v2.1/repos/{repo}/file-uploaded-bytes/",
                                  params={"parent_dir": parent, "file_name": name},
                                  what="asking how much was uploaded", path=target)
        except RemoteError:
            return default
        value = body.get("uploadedBytes") if isinstance(body, dict) else None
        return value if isinstance(value, int) and value >= 0 else default

    def _committed(self, repo: str, target: str, fh: BinaryIO, size: int) -> UploadResult | None:
        """After the final chunk's answer was lost: the result if the server's
        file at ``target`` is provably ours (same size and content id)."""
        try:
            resp = self._request("GET", f"/api2/repos/{repo}/file/detail/", params={"p": target},
                                 what="checking the uploaded file", path=target)
            body = parse_json(resp.content, what="the file details", path=target)
        except RemoteError:
            return None
        if not isinstance(body, dict) or body.get("size") != size:
            return None
        if body.get("id") != _content_id(fh, size, target):
            return None
        return UploadResult(path=target, id=check_id(body.get("id"), what="the file details"), size=size)


def _read_at(fh: BinaryIO, offset: int, length: int, target: str) -> bytes:
    try:
        fh.seek(offset)
        data = fh.read(length)
    except OSError as exc:
        raise local_error(exc, target, what="reading the file to upload") from exc
    if len(data) != length:
        raise LocalError(f"The file for {target} became shorter while uploading.", path=target)
    return data


def _read_chunk(fh: BinaryIO, offset: int, view: memoryview, target: str) -> _ChunkBody:
    """Fill ``view`` with the bytes of ``fh`` at ``offset``; a body reading it."""
    got = 0
    try:
        fh.seek(offset)
        while got < len(view):
            n = fh.readinto(view[got:])  # type: ignore[attr-defined]
            if not n:
                break
            got += n
    except OSError as exc:
        raise local_error(exc, target, what="reading the file to upload") from exc
    if got != len(view):
        raise LocalError(f"The file for {target} became shorter while uploading.", path=target)
    return _ChunkBody(view)


class _ChunkBody(io.RawIOBase):
    """A read-only, seekable file over a slice of the chunk buffer: httpx
    streams it into the multipart body without a copy of the whole chunk."""

    def __init__(self, view: memoryview) -> None:
        super().__init__()
        self._view, self._pos = view, 0
        self.size = len(view)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        n = max(0, min(len(b), self.size - self._pos))
        b[:n] = self._view[self._pos:self._pos + n]
        self._pos += n
        return n

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos


def _content_id(fh: BinaryIO, size: int, target: str) -> str:
    """The Seafile id of bytes ``[0, size)`` of ``fh`` (8 MiB blocks), streamed."""
    blocks: list[str] = []
    for first in range(0, size, BLOCK_SIZE):
        block = hashlib.sha1()
        for piece in range(first, min(size, first + BLOCK_SIZE), _READ):
            block.update(_read_at(fh, piece, min(_READ, size - piece, first + BLOCK_SIZE - piece), target))
        blocks.append(block.hexdigest())
    if size == 0:
        return "0" * 40
    text = '{"block_ids": [%s], "size": %d, "type": 1, "version": 1}' % (
        ", ".join('"%s"' % b for b in blocks), size)
    return hashlib.sha1(text.encode("ascii")).hexdigest()
