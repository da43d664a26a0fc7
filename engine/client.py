"""The Seafile Web API client: the only module that speaks HTTP to Seafile.

:class:`SeafileClient` wraps the api2 endpoints ohsync needs (see
``docs/seafile-api.md``) and converts every answer into the engine's
value types (:mod:`ohsync.engine.models`); Seafile JSON never leaves this
module.  Failures are typed (:mod:`ohsync.engine.errors`), mapped in one
place (:mod:`ohsync.engine.client_errors`).

Rules it follows: every URL ends with a slash; ``Authorization: Token <t>``
goes to Seahub only, never to file-server links (they carry their own
one-time credential); api2 writes use form bodies; file-server links may be
relative and are resolved against the server URL; a 301 from rename/move is
success and is never followed.  Idempotent reads (info, listings, links,
downloads) are retried with tenacity on ServerError/NetworkError/
ThrottledError (honouring ``Retry-After``), each attempt with a fresh link;
uploads, updates, deletes and moves are never retried here (the engine
re-plans).  The token never appears in a message, a log line or a repr.
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, BinaryIO

import httpx

from .client_answers import (
    REPO_ID,
    as_int,
    as_str,
    location_path,
    move_result,
    parse_update_answer,
    payload_size,
    repo_from_json,
)
from .client_errors import (
    api_missing_error,
    check_id,
    error_for_response,
    parse_json,
    server_message,
    translate_errors,
)
from .client_batch import BatchUploads
from .client_bulk import BulkTransfers
from .client_commits import CommitReads
from .client_history import HistoryCalls
from .client_notify import NotificationAPI
from .client_http import USER_AGENT, Payload, SeafileHTTP, check_server_url
from .client_listing import parse_listing
from .client_paths import (
    join_remote,
    name_problem,
    normalize_remote_path,
    split_remote,
)
from .client_paths import upload_target as _upload_target
from .errors import (
    AuthError,
    NotFoundError,
    ProtocolError,
    RemoteOperationError,
    ServerError,
    TwoFactorRequired,
)
from .models import AccountInfo, DirListing, RemoteEntry, RepoInfo, UploadResult

__all__ = ["SeafileClient"]

log = logging.getLogger("ohsync.client")


class SeafileClient(CommitReads, HistoryCalls, BatchUploads, NotificationAPI, BulkTransfers, SeafileHTTP):
    """A synchronous client of one Seafile server for one account.

    :param server_url: the Seafile base URL, e.g. ``https://cloud.tsinghua.edu.cn``.
    :param token: the API token (``None``: only ``server_info`` and
        ``obtain_token`` make sense; everything else gets AuthError).
    :param timeout: seconds for connecting and between bytes of an answer.
    :param transport: an httpx transport (tests pass ``httpx.MockTransport``).
    :param retries: extra attempts for idempotent requests (0 = no retry).
    :param on_request: called as ``on_request(method, url)`` for every HTTP
        request sent, including file-server transfers (for counting).
    :param retry_base: first backoff in seconds (doubles each attempt).
    :param retry_cap: longest backoff between two attempts, seconds.
    :param max_retry_after: a 429 asking to wait longer than this is not
        retried here but raised (the scheduler backs off instead).
    :param sleep: the sleep function used between attempts (tests inject one).

    :ivar last_rejected: after each ``list_dir``: ``(path, reason)`` for every
        entry the server listed with an unsafe name (``..``, ``/``, NUL, over
        255 bytes, outside the listed folder…); such entries are left out of
        the returned listing and must be reported as skipped by the caller.
    """

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
        if resp.status_code in (404, 405):  # every Seafile has this endpoint: the URL is wrong
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
            return self._get_json(endpoint, what=what)
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
        body = self._get_json("/api2/repos/", what="listing the libraries")
        if not isinstance(body, list):
            raise ProtocolError("The library list is not a JSON array.")
        return [repo_from_json(item, "the library list") for item in body]

    def create_repo(self, name: str, desc: str = "") -> RepoInfo:
        """``POST /api2/repos/`` (form ``name``, ``desc``): create a library.

        :returns: the new library (``root`` is ``""``: read ``repo_info`` for it).
        :raises RemoteOperationError: invalid name or no permission to create.
        """
        resp = self._request(
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
        repo = _check_repo_id(repo_id)
        body = self._get_json(f"/api2/repos/{repo}/", what="reading the library info")
        info = repo_from_json(body, "the library info")
        if info.root:
            check_id(info.root, what="the library info")
        return info

    # -- directories -------------------------------------------------------

    def list_dir(
        self, repo_id: str, path: str, *, oid: str | None = None, recursive: bool = False
    ) -> DirListing:
        """``GET /api2/repos/{id}/dir/?p=<path>[&oid=][&recursive=1]``.

        :param path: the remote folder.
        :param oid: the folder id seen last time: if unchanged the server
            answers ``"uptodate"`` and the result has ``uptodate=True`` and no
            entries (one cheap request).
        :param recursive: list every descendant (pre-order); paths are rebuilt
            from the server's ``parent_dir`` (``/`` for root entries, ``/x/``
            directly under ``p=/x``, ``/x/y`` deeper).
        :returns: :class:`DirListing` with full remote paths and the folder's
            ``oid`` header.  Entries with unsafe names are left out and listed
            in :attr:`last_rejected`.
        :raises NotFoundError: the folder (or library) does not exist, or
            ``path`` names a file.
        """
        listing, rejected = self._list(
            _check_repo_id(repo_id), normalize_remote_path(path), oid=oid, recursive=recursive
        )
        self.last_rejected = rejected
        for rejected_path, reason in rejected:
            log.warning("skipping unsafe remote name %r: %s", rejected_path, reason)
        return listing

    def _list(self, repo: str, folder: str, *, oid: str | None = None,
              recursive: bool = False) -> tuple[DirListing, list[tuple[str, str]]]:
        """List without touching :attr:`last_rejected` (internal checks)."""
        params: dict[str, str] = {"p": folder}
        if oid:
            params["oid"] = oid
        if recursive:
            params["recursive"] = "1"
        what = "listing a folder"
        resp = self._retrying(
            lambda: self._request("GET", f"/api2/repos/{repo}/dir/", params=params, what=what, path=folder)
        )
        return parse_listing(resp, folder, recursive=recursive, requested_oid=oid)

    def mkdir(self, repo_id: str, path: str, *, parents: bool = True) -> None:
        """Create a folder: ``POST /api2/repos/{id}/dir/?p=`` form ``operation=mkdir``
        (``create_parents=true`` when ``parents``).

        An existing folder is not an error and never produces ``x (1)``: the
        parent is listed first, and an existing folder returns at once.

        :param parents: create missing ancestors (``mkdir -p``); without it a
            missing parent raises NotFoundError.
        :raises RemoteOperationError: a file stands at ``path``, or the
            server created the folder under another name (a race).
        :raises NotFoundError: parent missing and ``parents`` is False.
        """
        repo = _check_repo_id(repo_id)
        folder = normalize_remote_path(path)
        if folder == "/":
            return
        parent, name = split_remote(folder)
        try:
            siblings, _ = self._list(repo, parent)
        except NotFoundError:
            if not parents:
                raise
        else:
            for entry in siblings.entries:
                if entry.name == name:
                    if entry.is_dir:
                        return
                    raise RemoteOperationError(
                        f"Cannot create the folder {folder}: a file with that name exists.",
                        path=folder,
                        status=None,
                    )
        data = {"operation": "mkdir"}
        if parents:
            data["create_parents"] = "true"
        resp = self._request(
            "POST", f"/api2/repos/{repo}/dir/", params={"p": folder}, data=data,
            what="creating a folder", path=folder, expect=(200, 201),
        )
        created = location_path(resp)
        if created is not None and created != folder:
            raise RemoteOperationError(
                f"The server created the folder as {created} instead of {folder} "
                f"(someone created {folder} at the same time).",
                path=folder,
            )

    # -- files -------------------------------------------------------------

    def file_detail(self, repo_id: str, path: str) -> RemoteEntry:
        """``GET /api2/repos/{id}/file/detail/?p=``: the file's current id.

        :returns: :class:`RemoteEntry` (``id`` file id, ``size`` bytes,
            ``mtime`` Unix seconds).
        :raises NotFoundError: no such file (also when ``path`` is a folder).
        """
        repo = _check_repo_id(repo_id)
        remote = normalize_remote_path(path)
        body = self._get_json(
            f"/api2/repos/{repo}/file/detail/", params={"p": remote},
            what="reading file details", path=remote,
        )
        if not isinstance(body, dict) or body.get("type", "file") != "file":
            raise ProtocolError("The file details have an unexpected shape.", path=remote)
        return RemoteEntry(
            path=remote,
            is_dir=False,
            id=check_id(body.get("id"), what="the file details", path=remote),
            size=as_int(body.get("size", 0), "the file details"),
            mtime=as_int(body.get("mtime", 0), "the file details"),
        )

    def download(
        self,
        repo_id: str,
        path: str,
        dest: BinaryIO,
        *,
        progress: Callable[[int, int], None] | None = None,
    ) -> str:
        """Download a file into ``dest``, streaming (memory independent of size).

        ``GET /api2/repos/{id}/file/?p=`` gives a one-time link and the file
        id (``oid`` header); the link is then fetched in 1 MiB chunks.  A
        failed attempt is retried with a fresh link after rewinding ``dest``
        to where it started (only if ``dest`` is seekable; otherwise a failure
        after the first byte is raised).

        :param dest: a binary file object opened for writing.
        :param progress: ``progress(done_bytes, total_bytes)`` after each
            chunk; ``total_bytes`` is the Content-Length, 0 when unknown.
        :returns: the id of the version downloaded (the ``oid`` header).
        :raises NotFoundError: no such file.
        :raises LocalError: writing to ``dest`` failed.
        """
        repo = _check_repo_id(repo_id)
        remote = normalize_remote_path(path)
        def fetch(state: dict[str, int]) -> str:
            link, file_id = self._download_link(repo, remote)
            self._stream_into(link, dest, remote, progress, state)
            return str(file_id)

        file_id: str = self._download_retrying(dest, fetch)
        return file_id

    def download_bytes(self, repo_id: str, path: str) -> tuple[bytes, str]:
        """Download a small file into memory (see :meth:`download`).

        :returns: ``(content, file_id)``.
        """
        buffer = io.BytesIO()
        file_id = self.download(repo_id, path, buffer)
        return buffer.getvalue(), file_id

    def upload(
        self,
        repo_id: str,
        remote_path: str,
        data: Payload,
        *,
        replace: bool = False,
        mtime: float | None = None,
    ) -> UploadResult:
        """Upload a new file: ``GET /api2/repos/{id}/upload-link/?p=<parent>``,
        then ``POST <link>?ret-json=1`` multipart ``parent_dir``, ``replace``
        (0/1), ``last_modify`` (ISO UTC, when ``mtime`` is given), ``file``.

        Not retried (the engine re-plans). With ``replace=False`` a taken name
        is stored as ``name (1).ext``; with ``replace=True`` the entry of that
        name is overwritten, **even a folder** — check the type first.

        :param data: the content; a file object is read from its start.
        :param mtime: the file's modification time, Unix seconds.
        :returns: :class:`UploadResult` with the path actually stored.
        :raises RemoteOperationError: a name the form cannot carry faithfully
            (``"``, ``\\``, control characters, ``..``, > 255 bytes), refused
            before any request.
        :raises NotFoundError: the parent folder does not exist.
        :raises QuotaError: out of quota (443) or file too large (442).
        """
        repo = _check_repo_id(repo_id)
        target, parent, name = _upload_target(remote_path)
        what = "uploading a file"
        link = self._retrying(
            lambda: self._link(f"/api2/repos/{repo}/upload-link/", parent, what="getting an upload link", path=target)
        )
        form = {"parent_dir": parent, "replace": "1" if replace else "0"}
        if mtime is not None:
            form["last_modify"] = datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        url = link.copy_merge_params({"ret-json": "1"})
        resp = self._fs_post(url, form, name, data, what=what, path=target)
        body = parse_json(resp.content, what="the upload", path=target)
        if not isinstance(body, list) or len(body) != 1 or not isinstance(body[0], dict):
            raise ProtocolError("The upload answer has an unexpected shape.", path=target)
        stored = body[0].get("name")
        problem = name_problem(stored)
        if problem:
            raise ProtocolError(f"The server stored the upload under an unsafe name: {problem}.", path=target)
        return UploadResult(
            path=join_remote(parent, str(stored)),
            id=check_id(body[0].get("id"), what="the upload answer", path=target),
            size=as_int(body[0].get("size", 0), "the upload answer"),
        )

    def update(self, repo_id: str, remote_path: str, data: Payload, *, head: str | None = None) -> UploadResult:
        """Replace an existing file's content in place:
        ``GET /api2/repos/{id}/update-link/?p=<parent>``, then ``POST <link>[?head=]``
        multipart ``target_file``, ``file``.  The answer is the bare new id.

        Not retried. Identical content returns the same id (no new commit).

        :param head: the library commit the new content is based on (sent in
            the query, which both file servers read).  If the file changed
            since that commit the server keeps the other edit live and stores
            ours beside it as ``<stem> (SFConflict <user> <time>).<ext>``; the
            answer is still our content's id, so only a read-back shows it.

        :returns: :class:`UploadResult` (``path`` = ``remote_path``, ``size``
            = bytes sent).
        :raises NotFoundError: the file (441) or its folder (404) is missing.
        :raises QuotaError: out of quota.
        """
        repo = _check_repo_id(repo_id)
        target = normalize_remote_path(remote_path)
        parent, name = split_remote(target)
        if not name:
            raise ValueError("cannot update the library root")
        what = "updating a file"
        link = self._retrying(
            lambda: self._link(f"/api2/repos/{repo}/update-link/", parent, what="getting an update link", path=target)
        )
        size = payload_size(data)
        if head:
            link = link.copy_merge_params({"head": check_id(head, what="the head commit id", path=target)})
        resp = self._fs_post(link, {"target_file": target}, name, data, what=what, path=target)
        file_id = parse_update_answer(resp.content, target)
        return UploadResult(path=target, id=file_id, size=size)

    def delete(self, repo_id: str, path: str) -> None:
        """``DELETE /api2/repos/{id}/file/?p=``: delete a file or a folder.

        Idempotent: a missing path is not an error. Not retried.

        :raises ValueError: ``path`` is the library root.
        """
        repo = _check_repo_id(repo_id)
        remote = normalize_remote_path(path)
        if remote == "/":
            raise ValueError("refusing to delete the library root")
        self._request(
            "DELETE", f"/api2/repos/{repo}/file/", params={"p": remote},
            what="deleting", path=remote,
        )

    def rename(self, repo_id: str, path: str, new_name: str, *, is_dir: bool = False) -> str:
        """Rename in place.

        Files: ``POST /api2/repos/{id}/file/?p=`` form ``operation=rename``,
        ``newname``; success is **301** and the ``Location`` names the result.
        Folders (``is_dir=True``): ``POST /api2/repos/{id}/dir/?p=`` (same
        form; the answer does not name the result, so the parent is listed
        before and, on a clash, after).

        :returns: the resulting path; the server appends `` (1)`` when
            ``new_name`` is taken. Renaming to the same name returns ``path``.
        :raises NotFoundError: the source is missing (the server's 404/520
            for a missing file are both mapped here).
        :raises RemoteOperationError: ``new_name`` is invalid.
        """
        repo = _check_repo_id(repo_id)
        remote = normalize_remote_path(path)
        parent, old_name = split_remote(remote)
        problem = name_problem(new_name)
        if problem or not old_name:
            raise RemoteOperationError(
                f"Cannot rename {remote} to {new_name!r}: {problem or 'the root'}.", path=remote
            )
        if new_name == old_name:
            return remote
        form = {"operation": "rename", "newname": new_name}
        if is_dir:
            before = self._names(repo, parent)
            self._request(
                "POST", f"/api2/repos/{repo}/dir/", params={"p": remote}, data=form,
                what="renaming a folder", path=remote,
            )
            if new_name not in before:
                return join_remote(parent, new_name)
            return join_remote(parent, self._new_name(repo, parent, before, new_name, remote))
        resp = self._mutate_file(
            repo, remote, form, what="renaming a file", expect=(301, 200)
        )
        # Only the final name is taken from Location (it differs from
        # new_name after an auto-rename): seahub 12 drops the slash between
        # folder and name (``?p=/subagain.txt``), 13 doubles it at the root.
        result = location_path(resp)
        final = split_remote(result)[1] if result is not None else ""
        if result is not None and split_remote(result)[0] != parent:
            final = _final_name(result, parent, new_name)
        if not final or name_problem(final):
            raise ProtocolError("The rename answer does not say where the file went.", path=remote)
        return join_remote(parent, final)

    def move(self, repo_id: str, path: str, dst_dir: str, *, is_dir: bool = False) -> str:
        """Move into another folder of the same library.

        Files: ``POST /api2/repos/{id}/file/?p=`` form ``operation=move``,
        ``dst_repo``, ``dst_dir`` (success 301 with ``{"parent_dir",
        "obj_name"}``).  Folders (``is_dir=True``): ``POST
        /api/v2.1/repos/sync-batch-move-item/`` (JSON), with the destination
        listed before and, on a clash, after to learn the final name.

        A move into the folder the item is already in returns ``path``
        without a request (the server would make a copy named ``x (1)``).
        Note: the server answers success for a missing source and changes
        nothing; check existence first where it matters.

        :returns: the new path (``name (1)`` when the name was taken).
        :raises NotFoundError: the destination folder does not exist.
        """
        repo = _check_repo_id(repo_id)
        remote = normalize_remote_path(path)
        dst = normalize_remote_path(dst_dir)
        parent, name = split_remote(remote)
        if not name:
            raise ValueError("cannot move the library root")
        if dst == parent:
            return remote
        if dst == remote or dst.startswith(remote + "/"):
            raise RemoteOperationError(f"Cannot move {remote} into itself.", path=remote)
        if is_dir:
            before = self._names(repo, dst)
            self._request(
                "POST", "/api/v2.1/repos/sync-batch-move-item/",
                json={"src_repo_id": repo, "src_parent_dir": parent, "src_dirents": [name],
                      "dst_repo_id": repo, "dst_parent_dir": dst},
                what="moving a folder", path=remote,
            )
            if name not in before:
                return join_remote(dst, name)
            return join_remote(dst, self._new_name(repo, dst, before, name, remote))
        resp = self._mutate_file(
            repo, remote, {"operation": "move", "dst_repo": repo, "dst_dir": dst},
            what="moving a file", expect=(301, 200),
        )
        return move_result(resp, dst, name, remote)

    # -- internals ---------------------------------------------------------

    def _mutate_file(self, repo: str, remote: str, form: dict[str, str], *, what: str,
                     expect: tuple[int, ...]) -> httpx.Response:
        try:
            return self._request(
                "POST", f"/api2/repos/{repo}/file/", params={"p": remote}, data=form,
                what=what, path=remote, expect=expect,
            )
        except ServerError as exc:
            # 520 "Failed to rename file: file does not exist"
            if exc.status == 520 and "not exist" in str(exc).lower():
                raise NotFoundError(
                    f"The file {remote} does not exist (while {what}).", status=520, path=remote
                ) from exc
            raise

    def _names(self, repo: str, folder: str) -> set[str]:
        return {entry.name for entry in self._list(repo, folder)[0].entries}

    def _new_name(self, repo: str, folder: str, before: set[str], wanted: str, source: str) -> str:
        """After an operation that auto-renamed on a clash: find the new name."""
        after = self._names(repo, folder)
        stem, dot, ext = wanted.rpartition(".") if "." in wanted[1:] else (wanted, "", "")
        patterns = [  # "x (1).ext" (files) or "x.ext (1)" (Python splitext on dirs)
            re.compile(re.escape(stem) + r" \(\d+\)" + re.escape(dot + ext) + "$"),
            re.compile(re.escape(wanted) + r" \(\d+\)$"),
        ]
        appeared = after - before
        new = sorted(n for n in appeared if any(p.match(n) for p in patterns))
        if not new and len(appeared) == 1:
            new = sorted(appeared)
        if len(new) != 1:
            raise ProtocolError(
                f"Could not tell the name the server gave {source} in {folder}.", path=source
            )
        return new[0]


def _final_name(location: str, parent: str, wanted: str) -> str:
    """The new name in a seahub 12 rename ``Location`` (``parent`` + name with
    no slash between): the text after ``parent``; "" when it does not fit."""
    glued = location[len(parent):] if parent != "/" and location.startswith(parent) else ""
    stem = wanted.rsplit(".", 1)[0] if "." in wanted[1:] else wanted
    if glued and (glued == wanted or glued.startswith(stem)):
        return glued
    return ""


def _check_repo_id(repo_id: str) -> str:
    repo = repo_id.strip().lower() if isinstance(repo_id, str) else ""
    if not REPO_ID.match(repo):
        raise NotFoundError(f"{repo_id!r} is not a Seafile library id (a UUID).")
    return repo
