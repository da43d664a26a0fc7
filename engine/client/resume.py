"""Resumable download of one file (a call group of
:class:`~ohsync.engine.client.SeafileClient`), ``docs/seafile-api.md`` §5.1:
a ``reuse=1`` link fetched with ``Range: bytes=N-`` so a dropped connection
continues where it stopped.  Memory is bounded by the pieces httpx hands
over, whatever the file size.
"""

from __future__ import annotations

import logging
import re
from typing import Any, BinaryIO

import httpx

from ..errors import LocalError, NetworkError, ProtocolError, RemoteError, ServerError
from ..ids import ContentHasher
from .answers import as_int, check_repo_id, tell_or_none
from .chunked import Progress
from .errors import check_id, translate_errors
from .hash_feed import HashFeed
from .paths import normalize_remote_path
from .transport import SeafileHTTP

__all__ = ["ResumableDownloads"]

log = logging.getLogger("ohsync.client")

_READ = 1024 * 1024
_CONTENT_RANGE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+)\s*$")


class ResumableDownloads:
    """Resumable download (see the module docstring)."""

    def __init__(self, http: SeafileHTTP) -> None:
        self.http = http

    def download_resumable(self, repo_id: str, path: str, dest: BinaryIO, *,
                           progress: Progress | None = None, resume_id: str | None = None,
                           hasher: ContentHasher | None = None, hash_pool: Any = None) -> str:
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
        :param hasher: fed every byte of the file in order as it is written
            (reset when the download starts over), so the caller has the
            file's hashes without reading it again; with ``resume_id`` the
            bytes already in ``dest`` are read back into it first (``dest``
            must then be readable).  It is fed in pieces of
            :data:`~ohsync.engine.client.hash_feed.PIECE` bytes and is
            complete when this returns.
        :param hash_pool: an executor (``submit``) on which the hasher runs
            while the next bytes arrive (:class:`HashFeed`); None: on this
            thread.
        :returns: the id of the version downloaded (40 hex).
        :raises NotFoundError: no such file.
        :raises ProtocolError: the server answered with another range than asked.
        :raises NetworkError, ServerError: still failing after the retries.
        :raises LocalError: writing to ``dest`` failed.
        """
        repo = check_repo_id(repo_id)
        remote = normalize_remote_path(path)
        pos = tell_or_none(dest)
        st = _Fetch(dest, remote, start=0 if resume_id is not None else pos,
                    held=(pos or 0) if resume_id is not None else 0,
                    feed=HashFeed(hasher, hash_pool) if hasher is not None else None)
        if st.feed is not None and st.held:
            st.feed_held()
        try:
            return self._download(repo, remote, st, progress, resume_id)
        finally:
            if st.feed is not None:
                st.feed.finish()

    def _download(self, repo: str, remote: str, st: _Fetch, progress: Progress | None,
                  resume_id: str | None) -> str:
        """The attempts of :meth:`download_resumable`; returns the file id."""
        file_id: str = resume_id or ""   # "" differs from any listed id: a fresh start
        link: httpx.URL | None = None
        limit = self.http.retries + 1
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
            except RemoteError as exc:
                failures = 1 if st.held > before else failures + 1
                pause = self.http.resend_wait(exc, failures)  # a ranged GET: idempotent
                if failures >= limit or pause is None:
                    raise
                log.info("download of %s interrupted at %d bytes (%s); resuming", remote, st.held, exc.title)
                self.http.backoff(pause, failures, exc)
                if isinstance(exc, ServerError) and exc.status == 403:
                    link = None  # expired: a fresh link (same version continues, another restarts)

    def _reuse_link(self, repo: str, remote: str) -> tuple[httpx.URL, str]:
        """``GET /api2/repos/{id}/file/?p=&reuse=1`` → (link, file id)."""
        what = "getting a download link"
        resp = self.http.request("GET", f"/api2/repos/{repo}/file/", params={"p": remote, "reuse": "1"},
                                 what=what, path=remote, idempotent=True)
        file_id = check_id(resp.headers.get("oid"), what="the download link's oid header", path=remote)
        return self.http.resolve_link(resp, what=what, path=remote), file_id

    def _range_get(self, url: httpx.URL, st: _Fetch, progress: Progress | None) -> bool:
        """One GET with ``Range: bytes=<held>-`` appending to ``st.dest``.

        :returns: True when the file is complete; False after a 416 that
            meant "held more than the file" (``st`` was restarted).
        """
        what, remote = "downloading a file", st.remote
        headers = {"Accept": "*/*", "Range": f"bytes={st.held}-"}
        with translate_errors(what=what, path=remote), self.http.httpx.stream("GET", url, headers=headers) as resp:
            if resp.status_code == 416:
                resp.read()
                m = re.match(r"^\s*bytes\s+\*/(\d+)\s*$", resp.headers.get("Content-Range", ""))
                if m is not None and int(m.group(1)) == st.held:
                    return True  # everything was there already
                st.restart()
                return False
            if resp.status_code not in (200, 206):
                resp.read()
                raise self.http.fileserver_error(resp, what=what, path=remote)
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
                if st.feed is not None:
                    st.feed.add(chunk)
                if progress is not None and (st.held - reported >= _READ or st.held == total):
                    progress(st.held, max(total, 0))
                    reported = st.held
        if total >= 0 and not encoded and st.held != total:
            raise NetworkError(f"The download of {remote} ended after {st.held} of {total} bytes.", path=remote)
        return True


class _Fetch:
    """Where a resumable download stands: ``held`` bytes of the file are in
    ``dest``, which starts at offset ``start`` (None: not seekable)."""

    def __init__(self, dest: BinaryIO, remote: str, *, start: int | None, held: int,
                 feed: HashFeed | None = None) -> None:
        self.dest, self.remote, self.start, self.held = dest, remote, start, held
        self.feed = feed

    def feed_held(self) -> None:
        """Feed the bytes already in ``dest`` (a resumed download) to the hasher."""
        assert self.feed is not None and self.start is not None
        with translate_errors(what="reading a partial download", path=self.remote):
            self.dest.seek(self.start)
            left = self.held
            while left:
                piece = self.dest.read(min(left, _READ))
                if not piece:
                    raise LocalError(f"The partial download of {self.remote} is shorter than expected.",
                                     path=self.remote)
                self.feed.add(piece)
                left -= len(piece)

    def restart(self) -> None:
        """Throw away what is held (rewind and truncate ``dest``)."""
        if self.feed is not None:
            self.feed.reset()
        if not self.held:
            return
        if self.start is None:
            raise NetworkError(f"The download of {self.remote} broke off and cannot restart "
                               "(the destination is not seekable).", path=self.remote)
        with translate_errors(what="restarting a download", path=self.remote):
            self.dest.seek(self.start)
            self.dest.truncate()
        self.held = 0
