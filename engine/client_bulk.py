"""Bulk and resumable transfers of the Seafile client (a mixin of
:class:`~ohsync.engine.client.SeafileClient`).

Three transfers that the one-shot ``upload``/``download`` cannot do well
(``docs/seafile-api.md`` §5.1, §5.5, §5.9 and §7, the facts verified on real
servers):

* :meth:`BulkTransfers.download_zip`: many small files as one zip stream
  (``zip-task`` → ``query-zip-progress`` → ``{FS}/zip/{token}``);
* :meth:`BulkTransfers.upload_chunked`: a large file in ``Content-Range``
  chunks to an upload link (new file) or an update link (existing file),
  resumable from the server's ``file-uploaded-bytes`` after a dropped
  connection or a restart of the program;
* :meth:`BulkTransfers.download_resumable`: a ``reuse=1`` link fetched with
  ``Range: bytes=N-`` so a dropped connection continues where it stopped.

Memory use of each is bounded by one chunk (uploads) or 1 MiB (downloads),
whatever the file size.  Errors are the typed ones of
:mod:`ohsync.engine.errors`, mapped by :mod:`ohsync.engine.client_errors`;
``NetworkError``, ``ServerError`` (incl. an expired link) and a short
``ThrottledError`` are retried here with backoff, everything else is raised.
"""

from __future__ import annotations

import hashlib
import io
import logging
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, BinaryIO
from urllib.parse import quote, urlencode

import httpx

from .client_answers import REPO_ID, as_int, parse_update_answer, tell_or_none
from .client_errors import check_id, error_for_response, parse_json, translate_errors
from .client_http import SeafileHTTP
from .client_paths import join_remote, name_problem, normalize_remote_path
from .client_paths import upload_target as _upload_target
from .errors import (
    LocalError,
    NetworkError,
    NotFoundError,
    ProtocolError,
    QuotaError,
    RemoteError,
    RemoteOperationError,
    ServerError,
    ThrottledError,
)
from .ids import BLOCK_SIZE
from .models import UploadResult

__all__ = ["BulkTransfers", "CHUNK_SIZE", "Progress"]

log = logging.getLogger("ohsync.client")

#: Default chunk of a chunked upload: Seafile's block size, 8 MiB.
CHUNK_SIZE = BLOCK_SIZE
#: ``progress(done_bytes, total_bytes)``; total 0 when unknown.
Progress = Callable[[int, int], None]

_READ = 1024 * 1024
_ZIP_POLL = 0.5  # seconds between two zip progress queries
_ZIP_MAX_POLLS = 240  # bounded wait for a zip being prepared (≈ 2 min)
_TOKEN = re.compile(r"^[0-9A-Za-z-]{8,64}$")
_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+)\s*$")
_RETRY = (NetworkError, ServerError, ThrottledError)


class BulkTransfers(SeafileHTTP):
    """Zip download, chunked upload and resumable download (see the module
    docstring).  Mixed into :class:`~ohsync.engine.client.SeafileClient`; uses
    its transport (``_request``, ``_link``, ``_http``, retry settings)."""

    _fs_root: str | None = None

    # -- zip download of several items -------------------------------------

    def download_zip(self, repo_id: str, parent_dir: str, names: list[str], dest: BinaryIO) -> None:
        """Download the items ``names`` of folder ``parent_dir`` as one zip into ``dest``.

        1. ``GET /api/v2.1/repos/{id}/zip-task/?parent_dir=<dir>&dirents=<a>&dirents=<b>``
           → ``{"zip_token": "<uuid>"}`` (one-time token);
        2. ``GET /api/v2.1/query-zip-progress/?token=<t>`` once: a 200
           ``{"zipped", "total", "failed", "failed_reason", "canceled"}`` is
           polled every 0.5 s until ``zipped == total`` (at most ≈ 2 min; C
           file server); any other answer means "no preparation step" (Go
           file server) and the zip is fetched at once;
        3. ``GET {FILE_SERVER_ROOT}/zip/<t>`` streamed into ``dest`` (1 MiB
           pieces).  The file-server root is learnt once per client from an
           upload link of ``parent_dir`` (fallback ``<server>/seafhttp``).

        Archive layout: with one name every entry starts with ``<name>/``;
        with several, the items are at the top level.  Entries are deflated;
        empty folders appear as ``dir/`` entries.  A failed attempt is
        retried with a new zip task after rewinding ``dest`` (only when it
        is seekable).

        :param parent_dir: the remote folder holding the items (``/`` for
            the library root).
        :param names: names of files or folders directly in ``parent_dir``.
        :param dest: a binary file object opened for writing (a temp file).
        :raises ValueError: ``names`` is empty or holds a name with ``/``.
        :raises NotFoundError: the library, the folder or an item is missing.
        :raises RemoteOperationError: the server refused (too large, no
            permission) or reported the zipping as failed/canceled.
        :raises ServerError: the zip was not ready within the wait.
        :raises LocalError: writing ``dest`` failed.
        """
        repo = _repo(repo_id)
        parent = normalize_remote_path(parent_dir)
        if not names:
            raise ValueError("download_zip needs at least one name")
        for name in names:
            if name_problem(name):
                raise ValueError(f"not a name in {parent}: {name!r}")
        def fetch(state: dict[str, int]) -> None:
            token = self._zip_token(repo, parent, names)
            self._wait_for_zip(token, parent)
            url = httpx.URL(self._fileserver_root(repo, parent) + "/zip/" + token)
            self._stream_into(url, dest, parent, None, state)

        self._download_retrying(dest, fetch)

    def _zip_token(self, repo: str, parent: str, names: list[str]) -> str:
        query = urlencode([("parent_dir", parent)] + [("dirents", n) for n in names], quote_via=quote)
        body = self._get_json(f"/api/v2.1/repos/{repo}/zip-task/?{query}",
                              what="asking for a zip of a folder", path=parent)
        token = body.get("zip_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not _TOKEN.match(token):
            raise ProtocolError("The zip task answer holds no valid token.", path=parent)
        return token

    def _wait_for_zip(self, token: str, parent: str) -> None:
        """Poll ``query-zip-progress`` while it answers 200 and is not done."""
        what = "asking whether the zip is ready"
        for _ in range(_ZIP_MAX_POLLS):
            try:
                resp = self._request("GET", "/api/v2.1/query-zip-progress/", params={"token": token},
                                     what=what, path=parent)
                body = parse_json(resp.content, what=what, path=parent)
            except RemoteError:
                return  # Go file server: nothing to wait for
            if not isinstance(body, dict):
                return
            if body.get("failed") or body.get("canceled"):
                reason = str(body.get("failed_reason") or "canceled")
                raise RemoteOperationError(f"The server could not zip {parent}: {reason}.", path=parent,
                                           title="Zip download refused")
            zipped, total = body.get("zipped"), body.get("total")
            if not isinstance(zipped, int) or not isinstance(total, int) or zipped >= total:
                return
            self._sleep(_ZIP_POLL)
        raise ServerError(f"The server did not finish zipping {parent} in time.", path=parent)

    def _fileserver_root(self, repo: str, parent: str) -> str:
        """``FILE_SERVER_ROOT`` (absolute, no trailing slash), learnt once from
        an upload link (``…/upload-api/<token>``); ``<server>/seafhttp`` when
        no link can be had (read-only library)."""
        if self._fs_root is None:
            try:
                link = self._retrying(lambda: self._link(
                    f"/api2/repos/{repo}/upload-link/", parent, what="finding the file server", path=parent))
                root = str(link.copy_with(query=None)).rsplit("/upload-api/", 1)
                self._fs_root = root[0] if len(root) == 2 else self.server_url + "/seafhttp"
            except (RemoteOperationError, NotFoundError, ProtocolError, QuotaError):
                self._fs_root = self.server_url + "/seafhttp"
        return self._fs_root

    # -- chunked, resumable upload -------------------------------------------

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
        repo = _repo(repo_id)
        target, parent, name = _upload_target(remote_path)
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
            except _RETRY as exc:
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

    def _backoff(self, failures: int, exc: Exception) -> None:
        if isinstance(exc, ThrottledError):
            self._sleep(exc.retry_after)
        else:
            self._sleep(min(self._retry_cap, self._retry_base * 2 ** (failures - 1)))

    # -- resumable download --------------------------------------------------

    def download_resumable(self, repo_id: str, path: str, dest: BinaryIO, *,
                           progress: Progress | None = None, resume_id: str | None = None) -> str:
        """Download a file into ``dest``, continuing after dropped connections.

        ``GET /api2/repos/{id}/file/?p=<path>&reuse=1`` gives a link usable
        many times (1 h) for exactly the version named by its ``oid`` header.
        Every request for it carries ``Range: bytes=<N>-`` (``N`` = bytes
        already held, 0 at first).  A 206 whose ``Content-Range`` starts at
        ``N`` is appended; after a drop the next attempt asks from the new
        ``N``.  A 200 (range ignored, e.g. an encrypted library) restarts
        cleanly: ``dest`` is rewound and truncated, and the whole file
        written.  A 403 (link expired) gets a fresh link; if that one names
        another version the download restarts with it.  Failures in a row
        are bounded by the client's ``retries`` (at least one retry); an
        attempt that brought bytes resets the count.

        :param dest: a binary file object opened for writing, written from
            its current position (with ``resume_id``: from offset 0).
            Without seeking, a restart after bytes were written raises.
        :param progress: ``progress(done_bytes, total_bytes)`` about every
            MiB and at the end; ``done`` includes resumed bytes.
        :param resume_id: continue an interrupted download (e.g. after a
            restart of the program): ``dest`` holds the first bytes of version
            ``resume_id`` (the id from a listing) from offset 0 and is
            positioned at their end.  If the server's current version is
            another one, ``dest`` is truncated to 0 and that version fetched.
        :returns: the id of the version downloaded (40 hex).
        :raises NotFoundError: no such file.
        :raises ProtocolError: the server answered with another range than asked.
        :raises NetworkError, ServerError: still failing after the retries.
        :raises LocalError: writing to ``dest`` failed.
        """
        repo = _repo(repo_id)
        remote = normalize_remote_path(path)
        pos = tell_or_none(dest)
        st = _Fetch(dest, remote, start=0 if resume_id is not None else pos,
                    held=(pos or 0) if resume_id is not None else 0)
        file_id: str = resume_id or ""   # "" differs from any listed id: a fresh start
        link: httpx.URL | None = None
        limit = self._retries + 1
        failures = 0
        while True:
            before = st.held
            try:
                if link is None:
                    link, new_id = self._reuse_link(repo, remote)
                    if new_id != file_id:
                        st.restart()
                        file_id = new_id
                if self._range_get(link, st, progress):
                    return file_id
                failures += 1  # 416: dest held more than the file; restarted
                if failures >= limit:
                    raise ProtocolError(f"The download of {remote} could not be resumed.", path=remote)
            except _RETRY as exc:
                failures = 1 if st.held > before else failures + 1
                if failures >= limit or (isinstance(exc, ThrottledError)
                                         and exc.retry_after > self._max_retry_after):
                    raise
                log.info("download of %s interrupted at %d bytes (%s); resuming", remote, st.held, exc.title)
                self._backoff(failures, exc)
                if isinstance(exc, ServerError) and exc.status == 403:
                    link = None  # expired: a fresh link (same version continues, another restarts)

    def _reuse_link(self, repo: str, remote: str) -> tuple[httpx.URL, str]:
        """``GET /api2/repos/{id}/file/?p=&reuse=1`` → (link, file id)."""
        what = "getting a download link"
        resp = self._retrying(lambda: self._request(
            "GET", f"/api2/repos/{repo}/file/", params={"p": remote, "reuse": "1"}, what=what, path=remote))
        file_id = check_id(resp.headers.get("oid"), what="the download link's oid header", path=remote)
        return self._resolve_link(resp, what=what, path=remote), file_id

    def _range_get(self, url: httpx.URL, st: _Fetch, progress: Progress | None) -> bool:
        """One GET with ``Range: bytes=<held>-`` appending to ``st.dest``.

        :returns: True when the file is complete; False after a 416 that
            meant "held more than the file" (``st`` was restarted).
        """
        what, remote = "downloading a file", st.remote
        headers = {"Accept": "*/*", "Range": f"bytes={st.held}-"}
        with translate_errors(what=what, path=remote), self._http.stream("GET", url, headers=headers) as resp:
            if resp.status_code == 416:
                resp.read()
                m = re.match(r"^\s*bytes\s+\*/(\d+)\s*$", resp.headers.get("Content-Range", ""))
                if m is not None and int(m.group(1)) == st.held:
                    return True  # everything was there already
                st.restart()
                return False
            if resp.status_code not in (200, 206):
                resp.read()
                raise error_for_response(resp, what=what, path=remote, fileserver=True, secrets=(self._token,))
            if resp.status_code == 206:
                m = _CONTENT_RANGE.match(resp.headers.get("Content-Range", ""))
                if m is None or int(m.group(1)) != st.held:
                    raise ProtocolError("The server answered a range request with another range.", path=remote)
                total = int(m.group(3))
            else:
                st.restart()
                total = as_int(resp.headers.get("Content-Length", -1) or -1, "the download")
            encoded = resp.headers.get("Content-Encoding", "identity") not in ("", "identity")
            reported = st.held
            for chunk in resp.iter_bytes():  # unbuffered: a drop loses no received byte
                st.dest.write(chunk)
                st.held += len(chunk)
                if progress is not None and (st.held - reported >= _READ or st.held == total):
                    progress(st.held, max(total, 0))
                    reported = st.held
        if total >= 0 and not encoded and st.held != total:
            raise NetworkError(f"The download of {remote} ended after {st.held} of {total} bytes.", path=remote)
        return True


class _Fetch:
    """Where a resumable download stands: ``held`` bytes of the file are in
    ``dest``, which starts at offset ``start`` (None: not seekable)."""

    def __init__(self, dest: BinaryIO, remote: str, *, start: int | None, held: int) -> None:
        self.dest, self.remote, self.start, self.held = dest, remote, start, held

    def restart(self) -> None:
        """Throw away what is held (rewind and truncate ``dest``)."""
        if not self.held:
            return
        if self.start is None:
            raise NetworkError(f"The download of {self.remote} broke off and cannot restart "
                               "(the destination is not seekable).", path=self.remote)
        with translate_errors(what="restarting a download", path=self.remote):
            self.dest.seek(self.start)
            self.dest.truncate()
        self.held = 0


# -- helpers -----------------------------------------------------------------


def _repo(repo_id: str) -> str:
    repo = repo_id.strip().lower() if isinstance(repo_id, str) else ""
    if not REPO_ID.match(repo):
        raise NotFoundError(f"{repo_id!r} is not a Seafile library id (a UUID).")
    return repo


def _read_at(fh: BinaryIO, offset: int, length: int, target: str) -> bytes:
    try:
        fh.seek(offset)
        data = fh.read(length)
    except OSError as exc:
        raise LocalError(f"Reading the file for {target} failed: {exc.strerror or exc}.", path=target) from exc
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
        raise LocalError(f"Reading the file for {target} failed: {exc.strerror or exc}.", path=target) from exc
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
