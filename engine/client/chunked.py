"""Chunked, resumable upload of one large file (a call group of
:class:`~ohsync.engine.client.SeafileClient`), ``docs/seafile-api.md`` §5.5.

A large file goes up to an upload link (new file) or an update link
(existing file): in one streamed request up to ``max_request`` bytes, else
(or after that request failed) in ``Content-Range`` chunks, resumable from
the server's ``file-uploaded-bytes`` after a dropped connection or a restart
of the program.  Memory use is bounded by the 64 KiB reads of a streamed
request, or by the chunk buffers of chunks in flight, whatever the file size.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from datetime import UTC, datetime
from typing import Any, BinaryIO
from urllib.parse import quote

import httpx

from ..errors import LocalError, RemoteError, local_error
from ..ids import BLOCK_SIZE, ContentHasher
from ..models import UploadResult
from ..upload_body import BufferBody, FileSlice, read_chunk
from .answers import check_repo_id, parse_update_answer, parse_upload_answer
from .errors import check_id, parse_json, translate_errors
from .paths import upload_target
from .transport import SeafileHTTP

__all__ = ["CHUNK_SECONDS", "CHUNK_SIZE", "IN_FLIGHT", "ChunkedUploads", "Progress"]

log = logging.getLogger("ohsync.client")

#: Default chunk of a chunked upload: Seafile's block size, 8 MiB.
CHUNK_SIZE = BLOCK_SIZE
#: ``progress(done_bytes, total_bytes)``; total 0 when unknown.
Progress = Callable[[int, int], None]

_READ = 1024 * 1024
#: Chunk requests at most at once when an executor is given.
IN_FLIGHT = 4
#: Chunks sent one at a time grow (up to ``max_request``) to take about this
#: many seconds each at the rate the previous chunk went.
CHUNK_SECONDS = 4.0


class ChunkedUploads:
    """Chunked, resumable upload (see the module docstring)."""

    def __init__(self, http: SeafileHTTP) -> None:
        self.http = http

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
        hasher: ContentHasher | None = None,
        executor: Any = None,
        in_flight: int = IN_FLIGHT,
        resume_cap: int | None = None,
        max_request: int | None = None,
        sending: Progress | None = None,
    ) -> UploadResult:
        """Upload bytes ``[0, size)`` of ``fh`` to ``remote_path`` in chunks.

        New file (``exists=False``): ``POST <upload link>?ret-json=1``
        multipart ``parent_dir``, ``replace`` (0/1), ``last_modify``, one
        ``file`` part.  Existing file (``exists=True``): ``POST <update link>``
        multipart ``target_file``, ``file``.  Links come from the link cache
        (``GET /api2/repos/{id}/upload-link/?p=<parent>`` /
        ``update-link/`` when none is held; a fresh one after a failure).
        Each chunk carries ``Content-Range: bytes <first>-<last>/<size>`` and
        ``Content-Disposition: attachment; filename="<pct-encoded name>"``;
        non-final chunks answer ``{"success": true}``, the final one the
        normal answer (``[{"id","name","size"}]`` / the bare id).  A file of
        at most ``chunk_size`` bytes goes up in one ordinary request.

        Request size: with ``max_request`` a file of at most that many bytes
        also goes in one ordinary request (a plain upload as §4.5, verified on
        Seafile 12 and 13; no round trip per chunk), unless a partial upload
        of it may be resumed (``resume`` with a ``resume_cap`` other than 0);
        if that request fails, the upload goes on in resumable chunks.  Chunks
        sent one at a time start at ``chunk_size`` and grow, up to
        ``max_request``, to take about ``CHUNK_SECONDS`` each at the rate the
        previous one went (chunks of any size in order are what the servers
        accept; each is no larger than a plain upload of that size).  Sent one
        at a time, a chunk is read from ``fh`` only as httpx sends it: memory
        does not grow with the chunk.

        Chunks in flight: with an ``executor`` (``submit(fn, *args)`` →
        future) up to ``in_flight`` chunks are sent at once, while the next
        one is read and hashed here.  Both file servers write each chunk at
        its ``first`` offset into one temp file per (library, path)
        (seafile-server ``fileserver/fileop.go`` ``writeBlockDataToTmpFile``
        seeks to the chunk's start; ``server/upload-file.c``
        ``copy_block_to_tmp_file`` lseeks likewise), which the first chunk
        creates and the chunk ending at ``size - 1`` assembles and commits.
        So the first chunk goes alone, the middle ones in any order, and the
        final one only after every other was confirmed.  This follows the
        servers' source and devserver, not a live check; ``in_flight=1``
        (or no executor) sends strictly in order.

        Hashing: ``hasher`` (a new one when None) is fed the bytes in order
        as they are read for sending, or, with an ``executor`` and one
        request at a time, by a task on it that reads the file beside the
        sender (so the body goes out as fast as a plain upload's and the
        server can start on it sooner; the read-back checks that the
        server's bytes are the hashed ones); either way no pass over the
        file precedes the first byte; after the upload it holds the content's sha1 and Seafile
        id.  A resumed upload first feeds it the bytes the server already
        holds, read from ``fh``.

        Resuming: with ``resume`` the server is first asked
        ``GET /api/v2.1/repos/{id}/file-uploaded-bytes/?parent_dir=&file_name=``
        → ``{"uploadedBytes": N}`` and the upload continues at ``N``, or at
        ``resume_cap`` when that is lower (the server reports the end of its
        temp file, which may lie past a gap left by chunks in flight when the
        program stopped: pass the prefix ``progress`` last reported).  Only pass
        ``resume=True`` when an interrupted upload to this path can only
        have been of this same content: the server keeps one partial file
        per path.  A chunk that fails with a dropped connection, a 5xx or an
        expired link is sent again with a fresh link from the last offset
        both sides agree on (the server's, capped at the contiguous prefix
        confirmed here), up to ``attempts`` failures in a row.  If the final
        chunk's answer was lost, the file on the server is checked
        (``file/detail``) before anything is sent again, so a new file is not
        stored twice as ``name (1)``.

        :param remote_path: the target file (its folder must exist).
        :param fh: seekable binary file; read ``chunk_size`` bytes at a time.
        :param size: bytes to send, from offset 0 of ``fh``.
        :param replace: new-file mode only: overwrite an entry of that name
            (**even a folder**; prefer ``exists=True`` for files).
        :param exists: update the existing file in place (takes precedence
            over ``replace``).
        :param chunk_size: bytes per request (default 8 MiB); the first chunk's
            size when ``max_request`` lets chunks grow.
        :param progress: ``progress(done_bytes, size)`` after each chunk
            (``done`` = the contiguous prefix confirmed).
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
        :param hasher: receives the content as it is sent (see above).
        :param executor: runs chunk requests (and hashes, see above); None
            sends them one by one and hashes on this thread.
        :param in_flight: chunk requests at most at once (with an executor).
        :param resume_cap: resume at most from this offset (see above).
        :param max_request: bytes one request may carry (see "Request size";
            None: every request at most ``chunk_size``).
        :param sending: ``sending(bytes_sent, size)`` about every MiB while a
            request streams from ``fh`` (handed to the connection, not yet
            confirmed: for display; one request at a time only).
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
        form = {"target_file": target} if exists else {"parent_dir": parent, "replace": "1" if replace else "0"}
        if mtime is not None and not exists:
            form["last_modify"] = datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        max_request = max(chunk_size, max_request or chunk_size)
        # one ordinary request, no Content-Range: a small file, or one up to
        # ``max_request`` unless a partial upload of it may be resumed
        single = size <= chunk_size or (size <= max_request and not (resume and resume_cap != 0))
        run = _Run(self, repo, target, parent, name, fh, size, chunk_size, form, exists,
                   head=check_id(head, what="the head commit id") if head and exists else None,
                   hasher=hasher if hasher is not None else ContentHasher(), single=single,
                   before_chunk=before_chunk, progress=progress,
                   limit=self.http.retries + 1 if attempts is None else max(1, attempts),
                   max_request=max_request, sending=sending)
        offset = 0
        if resume and not single:
            held = self._uploaded_bytes(repo, parent, name, target)
            offset = min(held, max(0, resume_cap)) if resume_cap is not None else held
            offset = offset if 0 <= held < size else 0
        window = max(1, in_flight) if executor is not None and not single else 1
        return run.go(offset, executor if window > 1 else _Inline(), window, hash_pool=executor)

    def _post(self, link: httpx.URL, form: dict[str, str], name: str, data: FileSlice | BufferBody,
              crange: tuple[int, int] | None, target: str, exists: bool) -> httpx.Response:
        """POST one multipart request (a chunk when ``crange = (first, total)``)."""
        what = "uploading a file in chunks" if crange else ("updating a file" if exists else "uploading a file")
        headers = {}
        if crange is not None:
            first, total = crange
            headers = {"Content-Range": f"bytes {first}-{first + data.size - 1}/{total}",
                       "Content-Disposition": f'attachment; filename="{quote(name, safe="")}"'}
        url = link if exists else link.copy_merge_params({"ret-json": "1"})
        timeout = httpx.Timeout(self.http.timeout, read=max(self.http.timeout * 10, 300.0))
        with translate_errors(what=what, path=target):
            # the body is a raw binary file object, which httpx streams
            resp = self.http.httpx.post(url, data=form,
                                        files={"file": (name, data, "application/octet-stream")},  # type: ignore[dict-item]
                                        headers=headers, timeout=timeout)
        if resp.status_code != 200:
            raise self.http.fileserver_error(resp, what=what, path=target)
        return resp

    def _final_answer(self, resp: httpx.Response, exists: bool, target: str, parent: str,
                      size: int) -> UploadResult:
        if exists:
            return UploadResult(path=target, id=parse_update_answer(resp.content, target), size=size)
        return parse_upload_answer(resp.content, parent, target, size=size)

    def _uploaded_bytes(self, repo: str, parent: str, name: str, target: str, *, default: int = 0) -> int:
        """``file-uploaded-bytes``: bytes of a partial upload the server holds
        (``default`` when it cannot say)."""
        try:
            body = self.http.get_json(f"/api/v2.1/repos/{repo}/file-uploaded-bytes/",
                                      params={"parent_dir": parent, "file_name": name},
                                      what="asking how much was uploaded", path=target)
        except RemoteError:
            return default
        value = body.get("uploadedBytes") if isinstance(body, dict) else None
        return value if isinstance(value, int) and value >= 0 else default

    def _committed(self, repo: str, target: str, file_id: str, size: int) -> UploadResult | None:
        """After the final chunk's answer was lost: the result if the server's
        file at ``target`` is provably ours (same size and content id ``file_id``)."""
        try:
            resp = self.http.request("GET", f"/api2/repos/{repo}/file/detail/", params={"p": target},
                                     what="checking the uploaded file", path=target)
            body = parse_json(resp.content, what="the file details", path=target)
        except RemoteError:
            return None
        if not isinstance(body, dict) or body.get("size") != size:
            return None
        if body.get("id") != file_id:
            return None
        return UploadResult(path=target, id=check_id(body.get("id"), what="the file details"), size=size)


class _Inline:
    """A stand-in executor that runs each request at once, on this thread."""

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed over like a pool would
            future.set_exception(exc)
        return future


class _Run:
    """One chunked upload in progress (see ``ChunkedUploads.upload_chunked``).

    ``confirmed`` is the prefix of the file the server acknowledged chunk by
    chunk; chunks above it that were acknowledged out of order wait in
    ``acked`` until the gap below them closes.
    """

    def __init__(self, client: ChunkedUploads, repo: str, target: str, parent: str, name: str, fh: BinaryIO,
                 size: int, chunk_size: int, form: dict[str, str], exists: bool, *, head: str | None,
                 hasher: ContentHasher, single: bool, before_chunk: Callable[[int, int], None] | None,
                 progress: Progress | None, limit: int, max_request: int, sending: Progress | None) -> None:
        self.client, self.repo, self.target, self.parent, self.name = client, repo, target, parent, name
        self.fh, self.size, self.chunk_size, self.form, self.exists = fh, size, chunk_size, form, exists
        self.head, self.hasher, self.single, self.limit = head, hasher, single, limit
        self.before_chunk, self.progress = before_chunk, progress
        self.kind = "update" if exists else "upload"
        self.max_request = max_request
        self.next_size = size if single else chunk_size  # grows with the measured rate, see _grow
        self.lock = threading.Lock()  # one reader of ``fh`` at a time
        self.sending, self.reported = sending, -1
        self.hash_job: Future[None] | None = None  # hashing on a pool thread (see go)
        self.stop_hash = False

    def go(self, offset: int, executor: Any, window: int, hash_pool: Any = None) -> UploadResult:
        """Send everything from ``offset``; returns the final answer.

        :param hash_pool: with one chunk at a time, a pool (``submit``) that
            hashes the file while this thread sends it (the body then goes
            out as fast as a plain upload's); None: hashed as it is sent.
        """
        self.hasher.reset()
        if hash_pool is not None and window == 1:
            self.hash_job = hash_pool.submit(self._hash_to, self.size)
        else:
            self._hash_prefix(offset)
        try:
            return self._go(offset, executor, window)
        finally:
            self.stop_hash = self.hash_job is not None and not self.hash_job.done()
            if self.hash_job is not None:
                wait([self.hash_job])  # nobody may read ``fh`` once we return

    def _go(self, offset: int, executor: Any, window: int) -> UploadResult:
        # One at a time, each chunk is streamed from the file and hashed as
        # it is sent (a None slot).  Chunks in flight are read and hashed
        # here first, into buffers allocated once and reused: httpx's
        # request/response objects form reference cycles that outlive a
        # chunk until the garbage collector runs; they only ever point at
        # these buffers, so memory stays bounded by ``window`` chunks.
        free: list[memoryview | None] = [None] if window == 1 else [
            memoryview(bytearray(min(self.chunk_size, self.size))) for _ in range(window)]
        failures, fresh = 0, False
        while True:
            outcome = self._round(offset, executor, free, fresh)
            if isinstance(outcome, UploadResult):
                self._hashed()
                return outcome
            exc, final_failed, confirmed = outcome
            failures = 1 if confirmed > offset else failures + 1  # a round that got bytes through starts over
            pause = self.client.http.resend_wait(exc, failures)  # chunks resume: idempotent
            if failures >= self.limit or pause is None:
                raise exc
            log.info("a chunk of %s failed after %d bytes (%s); resuming", self.target, confirmed, exc.title)
            self.client.http.backoff(pause, failures, exc)
            self.next_size = self.chunk_size  # a link that drops gets small chunks again
            if self.single and self.size > self.chunk_size:
                self.single = False  # the one request failed: go on in resumable chunks
            held = 0 if self.single else self.client._uploaded_bytes(
                self.repo, self.parent, self.name, self.target, default=confirmed)
            if final_failed and held == 0:  # the final request may have been committed
                self._hashed()
                done = self.client._committed(self.repo, self.target, self.hasher.file_id(), self.size)
                if done is not None:
                    return done
            offset, fresh = min(max(held, 0), confirmed), True

    def _hashed(self) -> None:
        """Make sure the hasher has seen the whole file (waits for the hash job)."""
        if self.hash_job is not None:
            self.hash_job.result()  # raises what the job raised (a file that became shorter)
        else:
            self._hash_to(self.size)

    def _round(self, offset: int, executor: Any, free: list[memoryview | None],
               fresh: bool) -> UploadResult | tuple[RemoteError, bool, int]:
        """Send from ``offset`` until done or a transient failure: the result,
        or ``(error, whether the final chunk failed, confirmed prefix)``."""
        try:
            link = self.client.http.links.get(self.kind, self.repo, self.parent, fresh=fresh)
        except RemoteError as refused:
            if not self._resent(refused):
                raise
            return refused, False, offset
        if self.head:
            link = link.copy_merge_params({"head": self.head})
        confirmed = next_off = offset
        acked: dict[int, int] = {}
        pending: dict[Future[Any], tuple[int, int, memoryview | None, float]] = {}
        failed: tuple[RemoteError, bool] | None = None
        first = True  # the first chunk of a round goes alone: it creates the server's temp file
        final_sent = False
        try:
            while True:
                while failed is None and free and not final_sent:
                    end = min(self.size, next_off + (self.next_size if free[-1] is None else self.chunk_size))
                    if (first and pending) or (end == self.size and (pending or confirmed != next_off)):
                        break  # the final chunk only once everything below it is confirmed
                    if self.before_chunk is not None:
                        self.before_chunk(next_off, end)
                    view = free.pop()
                    body: FileSlice | BufferBody
                    if view is None:
                        body = FileSlice(self.fh, next_off, end, None if self.hash_job else self.hasher,
                                         self.target, self.lock, self._sent if self.sending is not None else None)
                    else:
                        body = read_chunk(self.fh, next_off, view[:end - next_off], self.target)
                        if end > self.hasher.size:
                            self.hasher.update(view[self.hasher.size - next_off:end - next_off])
                    crange = None if self.single else (next_off, self.size)
                    future = executor.submit(self.client._post, link, self.form, self.name, body, crange,
                                             self.target, self.exists)
                    pending[future] = (next_off, end, view, time.monotonic())
                    next_off, final_sent = end, end == self.size
                if not pending:
                    assert failed is not None
                    return failed[0], failed[1], confirmed
                ready, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in ready:
                    start, end, view, sent_at = pending.pop(future)
                    free.append(view)
                    exc = future.exception()
                    if exc is not None:
                        if not isinstance(exc, RemoteError) or not self._resent(exc):
                            raise exc
                        failed = failed or (exc, end == self.size)
                        continue
                    if end == self.size:
                        if self.progress is not None:
                            self.progress(end, self.size)
                        return self.client._final_answer(future.result(), self.exists, self.target,
                                                         self.parent, self.size)
                    first = False
                    if view is None:
                        self._grow(end - start, time.monotonic() - sent_at)
                    acked[start] = end
                    while confirmed in acked:
                        confirmed = acked.pop(confirmed)
                    if self.progress is not None:
                        self.progress(confirmed, self.size)
        except BaseException:
            wait(pending)  # no request may still read a buffer when we leave
            raise

    def _resent(self, exc: RemoteError) -> bool:
        """True when the failure policy would send the chunk again at all
        (:meth:`_go` decides when, counting failures in a row)."""
        return self.client.http.resend_wait(exc, 1) is not None

    def _sent(self, offset: int) -> None:
        """``sending`` about every MiB of the body read, and at its end."""
        assert self.sending is not None
        if offset == self.size or not self.reported <= offset < self.reported + _READ:
            self.reported = offset
            self.sending(offset, self.size)

    def _grow(self, sent: int, seconds: float) -> None:
        """Size the next chunk to take about ``CHUNK_SECONDS`` at the rate the
        last one went (between ``chunk_size`` and ``max_request``): on a fast
        link a round trip per 8 MiB would cost more than the bytes, while a
        dropped connection loses at most one chunk's sending time."""
        rate = sent / max(seconds, 1e-3)
        self.next_size = int(min(self.max_request, max(self.chunk_size, rate * CHUNK_SECONDS)))

    def _hash_prefix(self, offset: int) -> None:
        """Feed the hasher bytes ``[0, offset)`` (a resumed upload), read from ``fh``."""
        self._hash_to(offset)

    def _hash_to(self, stop: int) -> None:
        """Feed the hasher the bytes of ``fh`` from where it stands up to ``stop``."""
        done = self.hasher.size
        try:
            while done < stop and not self.stop_hash:
                with self.lock:  # the sender reads the same ``fh``
                    self.fh.seek(done)
                    piece = self.fh.read(min(_READ, stop - done))
                if not piece:
                    break
                self.hasher.update(piece)
                done += len(piece)
        except OSError as exc:
            raise local_error(exc, self.target, what="reading the file to upload") from exc
        if done != stop and not self.stop_hash:
            raise LocalError(f"The file for {self.target} became shorter while uploading.", path=self.target)
