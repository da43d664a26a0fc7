"""The transport of the Seafile client: one object every call group is composed onto.

:class:`SeafileHTTP` owns the ``httpx.Client`` and the link cache
(:mod:`.links`), and knows how to send one
Seahub request with the token, decode JSON, resolve a file-server link
(absolute, or relative like ``/seafhttp/...``) against the server URL,
stream a download into a file object, POST a multipart form to a link
without the token, and send a failed request again with tenacity when
the failure policy says so (:func:`ohsync.engine.failures.resend_wait`: a
429 after its ``Retry-After``, for any request; a drop or a 5xx of an
idempotent request after ``retry_base * 2**n``, capped at ``retry_cap``).
Every failure becomes a typed error through :mod:`.errors`.
"""

from __future__ import annotations

import email.utils
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, BinaryIO

import httpx
import tenacity

from ..errors import NetworkError, ProtocolError, RemoteError
from ..failures import MAX_RETRY_AFTER, resend_wait
from .answers import as_int, tell_or_none
from .errors import check_id, error_for_response, parse_json, translate_errors
from .links import LinkCache

__all__ = ["USER_AGENT", "Payload", "SeafileHTTP", "check_server_url"]

log = logging.getLogger("ohsync.client")

USER_AGENT = "ohsync/0.1"
_CHUNK = 1024 * 1024

#: Upload content: bytes, or a binary file object (read from its start).
Payload = bytes | BinaryIO


class SeafileHTTP:
    """Transport layer of the Seafile client (see the module docstring).

    Constructor arguments are documented on :class:`~.seafile.SeafileClient`.

    :ivar httpx: the ``httpx.Client`` (file-server requests of the call groups go through it).
    :ivar links: the upload/update link cache.
    :ivar timeout, retries, max_retry_after, sleep: as given.
    """

    def __init__(
        self,
        server_url: str,
        token: str | None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        retries: int = 3,
        on_request: Callable[[str, str], None] | None = None,
        retry_base: float = 0.5,
        retry_cap: float = 8.0,
        max_retry_after: float = MAX_RETRY_AFTER,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.server_url = check_server_url(server_url)
        self._token = token
        self.timeout = timeout
        self.retries = max(0, int(retries))
        self._retry_base = retry_base
        self._retry_cap = retry_cap
        self.max_retry_after = max_retry_after
        self.sleep = sleep
        self._on_request = on_request
        #: HTTP requests sent so far (the engine reports them per pass).
        self.request_count = 0
        self._count_lock = threading.Lock()  # transfers may run on several threads
        #: server clock minus ours, seconds, from the last ``Date`` header (None: unknown)
        self.clock_offset: float | None = None
        hooks: dict[str, list[Callable[..., Any]]] = {"request": [self._count_request],
                                                      "response": [self._read_clock]}
        self.httpx = httpx.Client(
            transport=transport,
            timeout=httpx.Timeout(timeout),
            follow_redirects=False,
            headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
            event_hooks=hooks,
        )
        self.links = LinkCache(self.fetch_link)

    # -- lifecycle ---------------------------------------------------------

    def close(self) -> None:
        """Close the connection pool. The client is unusable afterwards."""
        self.httpx.close()

    def __repr__(self) -> str:  # never the token
        return f"{type(self).__name__}({self.server_url!r}, token={'set' if self._token else None})"

    # -- requests ----------------------------------------------------------

    def fileserver_error(self, resp: httpx.Response, *, what: str, path: str) -> RemoteError:
        """The typed error for a file server's non-success answer (the token redacted)."""
        return error_for_response(resp, what=what, path=path, fileserver=True, secrets=(self._token,))

    def _read_clock(self, response: httpx.Response) -> None:
        date = response.headers.get("Date")
        if not date:
            return
        try:
            server = email.utils.parsedate_to_datetime(date).timestamp()
        except (TypeError, ValueError, IndexError, OverflowError):
            return
        self.clock_offset = server - time.time()

    def _count_request(self, request: httpx.Request) -> None:
        with self._count_lock:
            self.request_count += 1
            if self._on_request is not None:
                self._on_request(request.method, str(request.url))

    def request(
        self,
        method: str,
        api_path: str,
        *,
        what: str,
        path: str | None = None,
        params: dict[str, str] | None = None,
        data: dict[str, str] | None = None,
        json: Any = None,
        expect: tuple[int, ...] = (200,),
        idempotent: bool = False,
        once: bool = False,
    ) -> httpx.Response:
        """A Seahub request with the token; non-``expect`` statuses raise.

        Sent again as :func:`~ohsync.engine.failures.resend_wait` decides (see
        :meth:`retrying`): after a 429's ``Retry-After`` always, after a drop
        or a 5xx only when ``idempotent``.  ``once``: a single attempt, for a
        request inside a retry loop of the caller's.
        """
        headers = {"Authorization": f"Token {self._token}"} if self._token else {}

        def attempt() -> httpx.Response:
            with translate_errors(what=what, path=path, secrets=(self._token,)):
                resp = self.httpx.request(
                    method, self.server_url + api_path, params=params, data=data, json=json,
                    headers=headers,
                )
            if resp.status_code not in expect:
                raise error_for_response(resp, what=what, path=path, secrets=(self._token,))
            return resp

        if once:
            return attempt()
        return self.retrying(attempt, idempotent=idempotent)  # type: ignore[no-any-return]

    def get_json(self, api_path: str, *, what: str, path: str | None = None,
                  params: dict[str, str] | None = None) -> Any:
        """``GET <api_path>`` (retried, see :meth:`retrying`), its JSON body decoded."""
        resp = self.request("GET", api_path, params=params, what=what, path=path, idempotent=True)
        return parse_json(resp.content, what=what, path=path)

    def link(self, api_path: str, folder: str, *, what: str, path: str) -> httpx.URL:
        """``GET <api_path>?p=<folder>`` answered by a file-server link: the absolute link."""
        resp = self.request("GET", api_path, params={"p": folder}, what=what, path=path, idempotent=True)
        return self.resolve_link(resp, what=what, path=path)

    def fetch_link(self, kind: str, repo: str, folder: str) -> httpx.URL:
        """A new ``kind`` (``upload``/``update``) link of ``folder``:
        ``GET /api2/repos/{id}/{kind}-link/?p=<folder>``, retried (for the link cache)."""
        return self.link(f"/api2/repos/{repo}/{kind}-link/", folder, what=f"getting an {kind} link", path=folder)

    def resolve_link(self, resp: httpx.Response, *, what: str, path: str) -> httpx.URL:
        """The link in a JSON-string answer, resolved against the server URL.

        :raises ProtocolError: not a string, or not an http(s) link.
        """
        link = parse_json(resp.content, what=what, path=path)
        if not isinstance(link, str) or not link:
            raise ProtocolError(f"The server's answer to {what} is not a link.", path=path)
        with translate_errors(what=what, path=path):
            url = httpx.URL(self.server_url + "/").join(link)
        if url.scheme not in ("http", "https") or not url.host:
            raise ProtocolError(f"The server's answer to {what} is not an HTTP link.", path=path)
        return url

    def download_link(self, repo: str, remote: str) -> tuple[httpx.URL, str]:
        """``GET /api2/repos/{id}/file/?p=``: a one-time download link and the file id (``oid``)."""
        what = "getting a download link"
        resp = self.request(
            "GET", f"/api2/repos/{repo}/file/", params={"p": remote}, what=what, path=remote, once=True
        )  # once: the download's own loop (download_retrying) sends it again
        file_id = check_id(resp.headers.get("oid"), what="the download link's oid header", path=remote)
        return self.resolve_link(resp, what=what, path=remote), file_id

    def download_retrying(self, dest: BinaryIO, fetch: Callable[[dict[str, int]], Any]) -> Any:
        """Run ``fetch(state)`` (which streams into ``dest`` and counts bytes in
        ``state["written"]``) with the client's retries; before a retry ``dest``
        is rewound to where it started, or the retry is refused when ``dest``
        cannot seek and already holds bytes."""
        start = tell_or_none(dest)
        state = {"written": 0}

        def attempt() -> Any:
            if state["written"]:
                dest.seek(start)  # type: ignore[arg-type]
                dest.truncate()
                state["written"] = 0
            return fetch(state)

        return self.retrying(attempt, can_retry=lambda: start is not None or not state["written"])

    def stream_into(self, url: httpx.URL, dest: BinaryIO, remote: str,
                     progress: Callable[[int, int], None] | None, state: dict[str, int]) -> None:
        """GET a file-server ``url`` into ``dest`` in 1 MiB pieces, counting bytes in ``state["written"]``.

        :raises NetworkError: the answer ended before its ``Content-Length``.
        """
        what = "downloading a file"
        with (
            translate_errors(what=what, path=remote),
            self.httpx.stream("GET", url, headers={"Accept": "*/*"}) as resp,
        ):
            if resp.status_code != 200:
                resp.read()
                raise self.fileserver_error(resp, what=what, path=remote)
            total = as_int(resp.headers.get("Content-Length", 0) or 0, "the download")
            for chunk in resp.iter_bytes(_CHUNK):
                dest.write(chunk)
                state["written"] += len(chunk)
                if progress is not None:
                    progress(state["written"], total)
            encoded = resp.headers.get("Content-Encoding", "identity") not in ("", "identity")
            if total and not encoded and state["written"] != total:
                raise NetworkError(
                    f"The download of {remote} ended after {state['written']} of {total} bytes.",
                    path=remote,
                )

    def fs_post(self, url: httpx.URL, form: dict[str, str], files: Sequence[tuple[str, Payload]], *,
                what: str, path: str) -> httpx.Response:
        """POST a multipart form with one ``file`` part per ``(name, content)``
        of ``files`` to a file-server link (no token header).

        Sent again only after a 429 (nothing was stored), as
        :meth:`resend_wait` decides; any other failure is raised, since the
        file server may have stored the upload before it failed.
        """
        parts = [("file", (name, data, "application/octet-stream")) for name, data in files]
        timeout = httpx.Timeout(self.timeout, read=max(self.timeout * 10, 300.0))

        def attempt() -> httpx.Response:
            with translate_errors(what=what, path=path):
                resp = self.httpx.post(url, data=form, files=parts, timeout=timeout)
            if resp.status_code != 200:
                raise self.fileserver_error(resp, what=what, path=path)
            return resp

        return self.retrying(attempt, idempotent=False)  # type: ignore[no-any-return]

    # -- retries: one decision, engine.failures.resend_wait ------------------

    def resend_wait(self, exc: BaseException, failures: int, *, idempotent: bool = True) -> float | None:
        """:func:`~ohsync.engine.failures.resend_wait` with this client's
        ``retry_base``, ``retry_cap`` and ``max_retry_after``: seconds to wait
        before sending a failed request again, or None to raise ``exc``."""
        return resend_wait(exc, failures, idempotent=idempotent, base=self._retry_base, cap=self._retry_cap,
                           max_wait=self.max_retry_after)

    def backoff(self, wait: float, failures: int, exc: BaseException) -> None:
        """Sleep ``wait`` seconds (from :meth:`resend_wait`) before attempt ``failures + 1``."""
        log.info("retrying in %.3g s after %s (attempt %d)", wait, type(exc).__name__, failures)
        self.sleep(wait)

    def retrying(self, fn: Callable[[], Any], *, can_retry: Callable[[], bool] = lambda: True,
                 idempotent: bool = True) -> Any:
        """Run ``fn`` with tenacity, up to ``retries`` more times, as
        :meth:`resend_wait` decides for each failure (``Retry-After`` of a
        429 honoured; a drop or a 5xx sent again only when ``idempotent``)
        and while ``can_retry()``."""

        def wait_for(state: tenacity.RetryCallState) -> float | None:
            exc = state.outcome.exception() if state.outcome else None
            if exc is None or not can_retry():
                return None
            return self.resend_wait(exc, state.attempt_number, idempotent=idempotent)

        def before_sleep(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            log.info("retrying after %s (attempt %d)", type(exc).__name__, state.attempt_number)

        retryer = tenacity.Retrying(
            retry=lambda state: wait_for(state) is not None,
            stop=tenacity.stop_after_attempt(self.retries + 1),
            wait=lambda state: wait_for(state) or 0.0,
            sleep=self.sleep,
            before_sleep=before_sleep,
            reraise=True,
        )
        return retryer(fn)


# -- helpers -----------------------------------------------------------------


def check_server_url(server_url: str) -> str:
    """The server base URL without query, fragment or trailing slash.

    :raises ValueError: not an http(s) URL with a host.
    """
    url = httpx.URL(server_url.strip())
    if url.scheme not in ("http", "https") or not url.host:
        raise ValueError(f"server URL must start with https:// (got {server_url!r})")
    return str(url.copy_with(query=None, fragment=None)).rstrip("/")
