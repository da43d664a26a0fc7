"""File calls of the Seafile client (a call group of
:class:`~ohsync.engine.client.SeafileClient`): details, one-shot download,
upload, update in place and delete (``docs/seafile-api.md`` §5).

Uploads and updates take their link from the link cache
(:mod:`ohsync.engine.client.links`): a save costs one request to the file
server, not two, while the link is valid.  Large files go through
:mod:`ohsync.engine.client.chunked` instead.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from datetime import UTC, datetime
from typing import BinaryIO

from ..errors import ProtocolError
from ..models import RemoteEntry, UploadResult
from .answers import as_int, check_repo_id, parse_update_answer, parse_upload_answer, payload_size
from .errors import check_id
from .paths import normalize_remote_path, split_remote, upload_target
from .transport import Payload, SeafileHTTP

__all__ = ["FileCalls"]


class FileCalls:
    """Per-file reads and writes (see the module docstring)."""

    def __init__(self, http: SeafileHTTP) -> None:
        self.http = http

    def file_detail(self, repo_id: str, path: str) -> RemoteEntry:
        """``GET /api2/repos/{id}/file/detail/?p=``: the file's current id.

        :returns: :class:`RemoteEntry` (``id`` file id, ``size`` bytes,
            ``mtime`` Unix seconds).
        :raises NotFoundError: no such file (also when ``path`` is a folder).
        """
        repo = check_repo_id(repo_id)
        remote = normalize_remote_path(path)
        body = self.http.get_json(
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
        repo = check_repo_id(repo_id)
        remote = normalize_remote_path(path)
        def fetch(state: dict[str, int]) -> str:
            link, file_id = self.http.download_link(repo, remote)
            self.http.stream_into(link, dest, remote, progress, state)
            return str(file_id)

        file_id: str = self.http.download_retrying(dest, fetch)
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
        """Upload a new file: ``POST <upload link>?ret-json=1`` multipart
        ``parent_dir``, ``replace`` (0/1), ``last_modify`` (ISO UTC, when
        ``mtime`` is given), ``file``; the link of ``<parent>`` comes from
        the link cache (``GET /api2/repos/{id}/upload-link/?p=<parent>`` when
        none is held).

        Sent again only when nothing was stored: once with a new link when
        the file server refused the cached one (403), and after a 429's
        ``Retry-After`` (:func:`~ohsync.engine.failures.resend_wait`); any
        other failure is raised (the engine re-plans). With ``replace=False`` a taken name
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
        repo = check_repo_id(repo_id)
        target, parent, name = upload_target(remote_path)
        what = "uploading a file"
        form = {"parent_dir": parent, "replace": "1" if replace else "0"}
        if mtime is not None:
            form["last_modify"] = datetime.fromtimestamp(mtime, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        resp = self.http.links.send("upload", repo, parent, lambda link: self.http.fs_post(
            link.copy_merge_params({"ret-json": "1"}), form, [(name, data)], what=what, path=target))
        return parse_upload_answer(resp.content, parent, target)

    def update(self, repo_id: str, remote_path: str, data: Payload, *, head: str | None = None) -> UploadResult:
        """Replace an existing file's content in place: ``POST <update link>[?head=]``
        multipart ``target_file``, ``file``; the library's update link comes
        from the link cache (``GET /api2/repos/{id}/update-link/?p=<parent>``
        when none is held).  The answer is the bare new id.

        Sent again only when nothing was stored, as :meth:`upload` is.  Identical content returns the
        same id (no new commit).

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
        repo = check_repo_id(repo_id)
        target = normalize_remote_path(remote_path)
        parent, name = split_remote(target)
        if not name:
            raise ValueError("cannot update the library root")
        what = "updating a file"
        size = payload_size(data)
        query = {"head": check_id(head, what="the head commit id", path=target)} if head else {}
        resp = self.http.links.send("update", repo, parent, lambda link: self.http.fs_post(
            link.copy_merge_params(query), {"target_file": target}, [(name, data)], what=what, path=target))
        file_id = parse_update_answer(resp.content, target)
        return UploadResult(path=target, id=file_id, size=size)

    def delete(self, repo_id: str, path: str) -> None:
        """``DELETE /api2/repos/{id}/file/?p=``: delete a file or a folder.

        Idempotent: a missing path is not an error. Not retried.

        :raises ValueError: ``path`` is the library root.
        """
        repo = check_repo_id(repo_id)
        remote = normalize_remote_path(path)
        if remote == "/":
            raise ValueError("refusing to delete the library root")
        self.http.request(
            "DELETE", f"/api2/repos/{repo}/file/", params={"p": remote},
            what="deleting", path=remote,
        )

