"""Several new files in one upload request, with one upload link per folder
(a call group of :class:`~ohsync.engine.client.SeafileClient`).

Seafile's upload endpoint takes any number of ``file`` parts in one
multipart POST and makes one commit of them (``docs/seafile-api.md``
§5.3, verified: the Go file server answers in request order, the C one in
reverse order).  An upload link is multi-use until it expires (1 h by
default) and bound to its folder, so one link per folder serves every batch
sent there (:mod:`ohsync.engine.client.links`: kept while valid, fetched
again when the file server answers 403 "Access token not found", which it
does before anything is stored, so sending the batch again is safe).

Safe to call from several threads at once (the link cache has a lock; the
httpx client may be shared between threads).
"""

from __future__ import annotations

from collections.abc import Sequence

import httpx

from ..errors import ProtocolError, RemoteOperationError
from ..models import UploadResult
from .answers import as_int, check_repo_id
from .errors import check_id, parse_json
from .paths import join_remote, name_problem, normalize_remote_path, upload_name_problem
from .transport import SeafileHTTP

__all__ = ["BatchUploads"]


class BatchUploads:
    """Multi-file upload (see the module docstring)."""

    def __init__(self, http: SeafileHTTP) -> None:
        self.http = http

    def upload_files(self, repo_id: str, folder: str, files: Sequence[tuple[str, bytes]], *,
                     under: str | None = None) -> list[UploadResult]:
        """Upload new files into one folder with one request:
        ``POST <upload link>?ret-json=1`` multipart ``parent_dir=<folder>``,
        ``replace=0`` and one ``file`` part per file.

        With ``under`` (an existing folder at or above ``folder``) the link
        of ``under`` is used: ``parent_dir=<under>`` and
        ``relative_path=<folder below under>``, which makes the file server
        create the missing folders of ``folder`` (``upload-file.c``; verified
        on the C and Go file servers: a link is bound to the folder it was
        asked for and refuses another ``parent_dir``).  One link then serves
        uploads into any folder of the tree, with no ``mkdir``.

        Names already taken are stored auto-renamed (``name (1).ext``), never
        overwritten.  The POST itself is not retried, except once with a new
        link when the cached one was refused (403 "Access token not found").

        :param folder: the remote folder (must exist).
        :param files: ``(name, content)`` pairs; names unique, without ``/``.
        :param under: see above; the folders between it and ``folder`` must
            not be files on the server (the server answers 500 then).
        :returns: one :class:`UploadResult` per stored file, **in the order the
            server answered** (request order on the Go file server, reverse on
            the C one); ``path`` is where it was stored.
        :raises ValueError: ``files`` is empty, or ``under`` is not ``folder``
            or one of its ancestors.
        :raises RemoteOperationError: a name the form cannot carry faithfully
            (refused before any request), or a 4xx refusal.
        :raises NotFoundError: the folder does not exist.
        :raises QuotaError: out of quota (443) or a file too large (442).
        :raises ServerError, NetworkError, ThrottledError: the request failed;
            some or all files may have been stored (read the folder to know).
        :raises ProtocolError: the answer has an unexpected shape.
        """
        if not files:
            raise ValueError("upload_files needs at least one file")
        repo = check_repo_id(repo_id)
        parent = normalize_remote_path(folder)
        linked, form = parent, {"parent_dir": parent, "replace": "0"}
        if under is not None:
            linked = normalize_remote_path(under)
            below = relative_below(linked, parent)
            form = {"parent_dir": linked, "replace": "0"}
            if below:
                for part in below.split("/"):
                    problem = upload_name_problem(part)
                    if problem:
                        raise RemoteOperationError(f"Cannot create the folder {parent!r} by an upload: {problem}.",
                                                   path=parent, title="Name not allowed")
                form["relative_path"] = below
        for name, _ in files:
            problem = upload_name_problem(name)
            if problem or "/" in name:
                raise RemoteOperationError(f"Cannot upload {join_remote(parent, name)!r}: "
                                           f"{problem or 'a name with /'}.", path=join_remote(parent, name),
                                           title="Name not allowed")
        resp = self.http.links.send("upload", repo, linked, lambda link: self.http.fs_post(
            link.copy_merge_params({"ret-json": "1"}), form, files,
            what=f"uploading {len(files)} files", path=parent))
        return _results(resp, parent, len(files))


def relative_below(ancestor: str, folder: str) -> str:
    """``folder`` relative to ``ancestor`` (both normalized remote paths), "" when equal.

    :raises ValueError: ``ancestor`` is not ``folder`` nor one of its ancestors.
    """
    if ancestor == folder:
        return ""
    prefix = ancestor.rstrip("/") + "/"
    if not folder.startswith(prefix):
        raise ValueError(f"{ancestor!r} is not a folder above {folder!r}")
    return folder[len(prefix):]


def _results(resp: httpx.Response, parent: str, sent: int) -> list[UploadResult]:
    body = parse_json(resp.content, what="the upload", path=parent)
    if not isinstance(body, list) or len(body) != sent or not all(isinstance(i, dict) for i in body):
        raise ProtocolError(f"The answer to an upload of {sent} files has an unexpected shape.", path=parent)
    out = []
    for item in body:
        stored = item.get("name")
        problem = name_problem(stored)
        if problem:
            raise ProtocolError(f"The server stored an upload under an unsafe name: {problem}.", path=parent)
        out.append(UploadResult(path=join_remote(parent, stored),
                                id=check_id(item.get("id"), what="the upload answer", path=parent),
                                size=as_int(item.get("size", 0), "the upload answer")))
    return out

