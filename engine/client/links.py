"""Upload and update links, reused while valid (a part of the transport,
:class:`~.transport.SeafileHTTP`).

Seafile's upload and update links are multi-use until they expire (1 h by
default, ``web_token_expire_time``; ``docs/seafile-api.md`` §5.3, §5.4): an
upload link is bound to the folder it was asked for (every POST must name
that ``parent_dir``), an update link to nothing but the library.  So the
client keeps one upload link per (library, folder) and one update link per
library for :data:`LINK_TTL` seconds, and a save costs one request to the
file server instead of two.

An expired (or otherwise unknown) link is answered by the file server with
403 ``Access token not found`` before any byte is stored, so
:meth:`LinkCache.send` drops the link, fetches a new one and sends the
request once more; any other failure is raised as it is (a network failure
also drops the link: the next transfer asks for a new one, in case the file
server moved).

Safe to call from several threads at once (the cache has a lock; the httpx
client may be shared between threads).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import httpx

from ..errors import NetworkError, ServerError
from .answers import check_repo_id
from .paths import normalize_remote_path

__all__ = ["LINK_TTL", "LinkCache"]

#: Seconds a link is reused (the server's default lifetime is 3600).
LINK_TTL = 1800.0


class LinkCache:
    """The link cache (see the module docstring).

    :param fetch: ``fetch(kind, repo, folder)`` asks the server for a new
        ``kind`` (``upload``/``update``) link of ``folder`` (the transport's
        :meth:`~.transport.SeafileHTTP.fetch_link`).
    """

    def __init__(self, fetch: Callable[[str, str, str], httpx.URL]) -> None:
        self._fetch = fetch
        self._links: dict[tuple[str, str, str], tuple[httpx.URL, float]] = {}
        self._links_lock = threading.Lock()

    def upload_link(self, repo_id: str, folder: str, *, fresh: bool = False) -> httpx.URL:
        """An upload link for ``folder``: ``GET /api2/repos/{id}/upload-link/?p=<folder>``,
        or the one fetched less than :data:`LINK_TTL` seconds ago.

        :param fresh: drop the cached link and fetch a new one.
        :returns: the absolute link (without ``replace`` in its query).
        :raises NotFoundError: the folder or the library does not exist.
        :raises QuotaError: out of quota (checked by the server here already).
        """
        return self.get("upload", check_repo_id(repo_id), normalize_remote_path(folder), fresh=fresh)

    def update_link(self, repo_id: str, folder: str = "/", *, fresh: bool = False) -> httpx.URL:
        """An update link of the library: ``GET /api2/repos/{id}/update-link/?p=<folder>``
        (``folder`` must exist; the link serves every file of the library), or
        the one fetched less than :data:`LINK_TTL` seconds ago.

        :param fresh: drop the cached link and fetch a new one.
        :raises NotFoundError: the folder or the library does not exist.
        :raises QuotaError: out of quota.
        """
        return self.get("update", check_repo_id(repo_id), normalize_remote_path(folder), fresh=fresh)

    def forget(self) -> None:
        """Drop every cached link (the next transfer fetches new ones)."""
        with self._links_lock:
            self._links.clear()

    def get(self, kind: str, repo: str, folder: str, *, fresh: bool = False) -> httpx.URL:
        """The cached ``kind`` link of ``folder`` (checked ids and path), or a new one."""
        key = (kind, repo, folder if kind == "upload" else "")
        with self._links_lock:
            known = self._links.get(key)
            if known is not None and not fresh and time.monotonic() - known[1] < LINK_TTL:
                return known[0]
            link = self._fetch(kind, repo, folder)
            self._links[key] = (link, time.monotonic())
            return link

    def send(self, kind: str, repo: str, folder: str, send: Callable[[httpx.URL], httpx.Response], *,
             fresh: bool = False) -> httpx.Response:
        """``send(link)`` with the cached ``kind`` link; once more with a new
        link when the file server refused the cached one (403: expired or
        unknown, nothing stored).  Any other failure is raised."""
        link = self.get(kind, repo, folder, fresh=fresh)
        try:
            return send(link)
        except NetworkError:
            self.drop(kind, repo, folder)  # the file server may have moved: ask again next time
            raise
        except ServerError as exc:
            if exc.status != 403 or fresh:
                raise
        return send(self.get(kind, repo, folder, fresh=True))

    def drop(self, kind: str, repo: str, folder: str) -> None:
        """Forget the cached ``kind`` link of ``folder``."""
        with self._links_lock:
            self._links.pop((kind, repo, folder if kind == "upload" else ""), None)
