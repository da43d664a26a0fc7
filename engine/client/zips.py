"""Zip download of several items of one folder (a call group of
:class:`~ohsync.engine.client.SeafileClient`), ``docs/seafile-api.md`` §5.9:
``zip-task`` → ``query-zip-progress`` → ``{FILE_SERVER_ROOT}/zip/{token}``.

Many small files in one stream: the cold mirror's cheap path
(:mod:`ohsync.engine.sync.bulk`).  Memory is bounded by 1 MiB pieces whatever
the archive size.
"""

from __future__ import annotations

import re
from typing import BinaryIO
from urllib.parse import quote, urlencode

import httpx

from .answers import check_repo_id
from .errors import parse_json
from .transport import SeafileHTTP
from .paths import name_problem, normalize_remote_path
from ..errors import NotFoundError, ProtocolError, QuotaError, RemoteError, RemoteOperationError, ServerError

__all__ = ["ZipDownloads"]

_ZIP_POLL = 0.5  # seconds between two zip progress queries
_ZIP_MAX_POLLS = 240  # bounded wait for a zip being prepared (≈ 2 min)
_TOKEN = re.compile(r"^[0-9A-Za-z-]{8,64}$")


class ZipDownloads:
    """Zip download (see the module docstring)."""

    def __init__(self, http: SeafileHTTP) -> None:
        self.http = http

    _fs_root: str | None = None

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
        repo = check_repo_id(repo_id)
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
            self.http.stream_into(url, dest, parent, None, state)

        self.http.download_retrying(dest, fetch)

    def _zip_token(self, repo: str, parent: str, names: list[str]) -> str:
        query = urlencode([("parent_dir", parent)] + [("dirents", n) for n in names], quote_via=quote)
        body = self.http.get_json(f"/api/v2.1/repos/{repo}/zip-task/?{query}",
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
                resp = self.http.request("GET", "/api/v2.1/query-zip-progress/", params={"token": token},
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
            self.http.sleep(_ZIP_POLL)
        raise ServerError(f"The server did not finish zipping {parent} in time.", path=parent)

    def _fileserver_root(self, repo: str, parent: str) -> str:
        """``FILE_SERVER_ROOT`` (absolute, no trailing slash), learnt once from
        an upload link (``…/upload-api/<token>``); ``<server>/seafhttp`` when
        no link can be had (read-only library)."""
        if self._fs_root is None:
            try:
                link = self.http.links.upload_link(repo, parent)
                root = str(link.copy_with(query=None)).rsplit("/upload-api/", 1)
                self._fs_root = root[0] if len(root) == 2 else self.http.server_url + "/seafhttp"
            except (RemoteOperationError, NotFoundError, ProtocolError, QuotaError):
                self._fs_root = self.http.server_url + "/seafhttp"
        return self._fs_root

