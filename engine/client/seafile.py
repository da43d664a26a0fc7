"""The Seafile Web API client: the only package that speaks HTTP to Seafile.

:class:`SeafileClient` wraps the api2 endpoints ohsync needs (see
``docs/seafile-api.md``) and converts every answer into the engine's
value types (:mod:`ohsync.engine.models`); Seafile JSON never leaves this
package.  Failures are typed (:mod:`ohsync.engine.errors`), mapped in one
place (:mod:`.errors`).

Rules it follows: every URL ends with a slash; ``Authorization: Token <t>``
goes to Seahub only, never to file-server links (they carry their own
one-time credential); api2 writes use form bodies; file-server links may be
relative and are resolved against the server URL; a 301 from rename/move is
success and is never followed.  Whether a failed request is sent again
is one decision, :func:`ohsync.engine.failures.resend_wait`: a 429 waits
its ``Retry-After`` (up to ``max_retry_after``) and goes again, whatever the
request (upload, update, chunk, download, API call); a drop, a 5xx or an
unreadable answer is retried with backoff only for idempotent requests
(info, listings, links, downloads with a fresh link, resumable chunks);
uploads, updates, deletes and moves that failed so are not (the engine
re-plans).  The token never appears in a message, a log line or a repr.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from typing import Any, Self

import httpx

from ..errors import AuthError, NotFoundError, ProtocolError, TwoFactorRequired
from ..failures import MAX_RETRY_AFTER
from ..models import AccountInfo, RepoInfo
from .answers import as_int, as_str, check_repo_id, repo_from_json
from .batch import BatchUploads
from .chunked import ChunkedUploads
from .commits import CommitReads
from .dirs import DirCalls
from .errors import api_missing_error, check_id, error_for_response, parse_json, server_message, translate_errors
from .files import FileCalls
from .history import HistoryCalls
from .moves import MoveCalls
from .notify import NotificationAPI
from .resume import ResumableDownloads
from .transport import USER_AGENT, SeafileHTTP, check_server_url
from .zips import ZipDownloads

__all__ = ["SeafileClient"]

log = logging.getLogger("ohsync.client")



def _json_answer(resp: httpx.Response) -> bool:
    """Whether ``resp`` holds JSON (Seafile's API answers, errors included),
    not a web page or an empty body from some other server."""
    try:
        parse_json(resp.content, what="the answer")
    except ProtocolError:
        return False
    return True

class SeafileClient:
    """A synchronous client of one Seafile server for one account.

    One transport (:class:`~.transport.SeafileHTTP`: the connection pool,
    the token, the link cache, answers, errors and retries) and the call
    groups composed onto it: files, folders and moves (:mod:`.files`,
    :mod:`.dirs`, :mod:`ohsync.engine.sync.moves`); transfers (:mod:`.chunked`, :mod:`.resume`,
    :mod:`.zips`, :mod:`.batch`); history and commits (:mod:`.history`,
    :mod:`.commits`); notifications (:mod:`.notify`).  Each call is an
    attribute of the client bound to the group that makes it
    (``client.list_dir`` is ``client.dirs.list_dir``), so callers never see
    the groups; account and library calls are the client's own.

    :param server_url: the Seafile base URL, e.g. ``https://cloud.tsinghua.edu.cn``.
    :param token: the API token (``None``: only ``server_info`` and
        ``obtain_token`` make sense; everything else gets AuthError).
    :param timeout: seconds for connecting and between bytes of an answer.
    :param transport: an httpx transport (tests pass ``httpx.MockTransport``).
    :param retries: extra attempts of a failed request (0 = no retry).
    :param on_request: called as ``on_request(method, url)`` for every HTTP
        request sent, including file-server transfers (for counting).
    :param retry_base: first backoff in seconds (doubles each attempt).
    :param retry_cap: longest backoff between two attempts, seconds.
    :param max_retry_after: a 429 asking to wait longer than this is not
        retried here but raised (the failure book waits it instead).
    :param sleep: the sleep function used between attempts (tests inject one).

    :ivar last_rejected: after each ``list_dir``: ``(path, reason)`` for every
        entry the server listed with an unsafe name (``..``, ``/``, NUL, over
        255 bytes, outside the listed folder…); such entries are left out of
        the returned listing and must be reported as skipped by the caller.
    :ivar http: the transport every call group shares.
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
        self.http = SeafileHTTP(server_url, token, timeout=timeout, transport=transport, retries=retries,
                                on_request=on_request, retry_base=retry_base, retry_cap=retry_cap,
                                max_retry_after=max_retry_after, sleep=sleep)
        http = self.http
        # files, folders, moves
        self.files = FileCalls(http)
        self.dirs = DirCalls(http)
        self.moves = MoveCalls(http, self.dirs)
        # transfers
        self.chunked = ChunkedUploads(http)
        self.resume = ResumableDownloads(http)
        self.zips = ZipDownloads(http)
        self.batch = BatchUploads(http)
        # history and commits
        self.history = HistoryCalls(http)
        self.commits = CommitReads(http)
        # notifications
        self.notify = NotificationAPI(http)

        self.file_detail = self.files.file_detail
        self.download = self.files.download
        self.download_bytes = self.files.download_bytes
        self.upload = self.files.upload
        self.update = self.files.update
        self.delete = self.files.delete
        self.list_dir = self.dirs.list_dir
        self.mkdir = self.dirs.mkdir
        self.rename = self.moves.rename
        self.move = self.moves.move
        self.upload_chunked = self.chunked.upload_chunked
        self.download_resumable = self.resume.download_resumable
        self.download_zip = self.zips.download_zip
        self.upload_files = self.batch.upload_files
        self.upload_link = http.links.upload_link
        self.update_link = http.links.update_link
        self.forget_links = http.links.forget
        self.file_history = self.history.file_history
        self.download_revision = self.history.download_revision
        self.commit_changes = self.commits.commit_changes
        self.commit_history = self.commits.commit_history
        self.notification_url = self.notify.notification_url
        self.notification_ping = self.notify.notification_ping
        self.notification_token = self.notify.notification_token

    # -- the transport's state ---------------------------------------------

    @property
    def server_url(self) -> str:
        """The server base URL (no trailing slash)."""
        return self.http.server_url

    @property
    def request_count(self) -> int:
        """HTTP requests sent so far (the engine reports them per pass)."""
        return self.http.request_count

    @property
    def clock_offset(self) -> float | None:
        """Server clock minus ours, seconds, from the last ``Date`` header (None: unknown)."""
        return self.http.clock_offset

    @property
    def last_rejected(self) -> list[tuple[str, str]]:
        """The entries the last ``list_dir`` left out (see the class docstring)."""
        return self.dirs.last_rejected

    def close(self) -> None:
        """Close the connection pool. The client is unusable afterwards."""
        self.http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:  # never the token
        return repr(self.http).replace(type(self.http).__name__, type(self).__name__, 1)

    @classmethod
    def obtain_token(
        cls,
        server_url: str,
        username: str,
        password: str,
        *,
        otp: str | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 30.0,
    ) -> str:
        """Log in with a password: ``POST /api2/auth-token/`` (form body).

        :param otp: the current two-factor code, sent as ``X-SEAFILE-OTP``.
        :returns: the 40-hex API token.
        :raises TwoFactorRequired: the server answered 400 with
            ``X-Seafile-OTP: required`` (no code given, or the code was wrong).
        :raises AuthError: wrong username or password, or the account is disabled.
        :raises ThrottledError: too many logins from this address (429).
        :raises NetworkError, ServerError, ProtocolError: as for every request.
        """
        base = check_server_url(server_url)
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if otp:
            headers["X-SEAFILE-OTP"] = otp
        secrets = (password, otp)
        what = "signing in"
        with (
            httpx.Client(transport=transport, timeout=timeout, follow_redirects=False) as http,
            translate_errors(what=what, secrets=secrets),
        ):
            resp = http.post(
                base + "/api2/auth-token/",
                data={"username": username, "password": password},
                headers=headers,
            )
        if resp.status_code == 400:
            detail = server_message(resp, secrets)
            if resp.headers.get("X-Seafile-OTP", "").lower() == "required":
                if otp:
                    raise TwoFactorRequired(
                        "The two-factor code was not accepted. Enter the current code from "
                        "your authenticator app.",
                        title="Two-factor code rejected",
                    )
                raise TwoFactorRequired(
                    "This account uses two-factor authentication: enter the current code "
                    "from your authenticator app."
                )
            if "disabled" in detail.lower():
                raise AuthError(
                    "The server says this account is disabled. Contact the server's "
                    "administrator.",
                    status=400,
                )
            if "credentials" in detail.lower() or "unable to login" in detail.lower():
                raise AuthError(
                    "The server did not accept this username and password. Check both "
                    "and try again (on single-sign-on servers, paste an API token from "
                    "the web interface instead).",
                    status=400,
                )
            raise AuthError(f'The server refused the login: "{detail}".', status=400)
        if resp.status_code in (404, 405, 501) or (resp.status_code in (200, 401, 403) and not _json_answer(resp)):
            # every Seafile has this endpoint and answers it in JSON: the URL is wrong
            raise api_missing_error(base, "/api2/auth-token/", resp.status_code)
        if resp.status_code != 200:
            raise error_for_response(resp, what=what, secrets=secrets)
        body = parse_json(resp.content, what="the login")
        token = body.get("token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not re.fullmatch(r"[0-9A-Za-z]{8,128}", token):
            raise ProtocolError("The server's answer to the login holds no valid token.")
        return token

    # -- account and libraries ---------------------------------------------

    def _get_base_json(self, endpoint: str, *, what: str) -> Any:
        """``_get_json`` for an endpoint every Seafile server has: a 404 there
        means the server URL is wrong, and says so (:func:`api_missing_error`)."""
        try:
            return self.http.get_json(endpoint, what=what)
        except NotFoundError as exc:
            raise api_missing_error(self.server_url, endpoint, exc.status or 404) from exc

    def ping(self) -> None:
        """Check the token: ``GET /api2/auth/ping/`` (expects ``"pong"``).

        :raises AuthError: 401 (token rejected) or 403 (no token).
        """
        body = self._get_base_json("/api2/auth/ping/", what="checking the login")
        if body != "pong":
            raise ProtocolError("The server answered the login check with something unexpected.")

    def server_info(self) -> dict[str, Any]:
        """``GET /api2/server-info/``: ``{"version": str, "features": [...], …}``.

        :returns: the server's dict as is (version parsed leniently by callers).
        """
        body = self._get_base_json("/api2/server-info/", what="reading the server info")
        if not isinstance(body, dict):
            raise ProtocolError("The server info is not a JSON object.")
        return body

    def account_info(self) -> AccountInfo:
        """``GET /api2/account/info/``: email, name, quota.

        :returns: :class:`AccountInfo`; ``total`` in bytes, ``None`` when the
            server reports ``<= 0`` (unlimited); ``usage`` in bytes.
        """
        body = self._get_base_json("/api2/account/info/", what="reading the account info")
        if not isinstance(body, dict) or not isinstance(body.get("email"), str):
            raise ProtocolError("The account info has an unexpected shape.")
        total = as_int(body.get("total", 0), "account info")
        return AccountInfo(
            email=body["email"],
            name=as_str(body.get("name")),
            contact_email=as_str(body.get("contact_email")),
            total=total if total > 0 else None,
            usage=max(0, as_int(body.get("usage", 0), "account info")),
        )

    def list_repos(self) -> list[RepoInfo]:
        """``GET /api2/repos/``: every library the account can see.

        :returns: :class:`RepoInfo` per library (owned, shared, group), with
            ``head_commit_id``; ``root`` is ``""`` (this endpoint omits it).
            Names are not unique.
        """
        body = self.http.get_json("/api2/repos/", what="listing the libraries")
        if not isinstance(body, list):
            raise ProtocolError("The library list is not a JSON array.")
        return [repo_from_json(item, "the library list") for item in body]

    def create_repo(self, name: str, desc: str = "") -> RepoInfo:
        """``POST /api2/repos/`` (form ``name``, ``desc``): create a library.

        :returns: the new library (``root`` is ``""``: read ``repo_info`` for it).
        :raises RemoteOperationError: invalid name or no permission to create.
        """
        resp = self.http.request(
            "POST", "/api2/repos/", data={"name": name, "desc": desc}, what="creating a library"
        )
        body = parse_json(resp.content, what="creating a library")
        if not isinstance(body, dict):
            raise ProtocolError("The new library's description has an unexpected shape.")
        return repo_from_json(
            {
                "id": body.get("repo_id"),
                "name": body.get("repo_name", name),
                "head_commit_id": body.get("head_commit_id"),
                "size": body.get("repo_size", 0),
                "mtime": body.get("mtime", 0),
                "encrypted": body.get("encrypted", ""),
                "permission": body.get("permission", "rw"),
            },
            "the new library",
        )

    def repo_info(self, repo_id: str) -> RepoInfo:
        """``GET /api2/repos/{id}/``: head commit id and root directory id.

        :raises NotFoundError: no such library (or no access to it).
        """
        repo = check_repo_id(repo_id)
        body = self.http.get_json(f"/api2/repos/{repo}/", what="reading the library info")
        info = repo_from_json(body, "the library info")
        if info.root:
            check_id(info.root, what="the library info")
        return info
