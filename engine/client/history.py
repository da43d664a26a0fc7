"""Per-file history of the Seafile client (a call group of
:class:`~ohsync.engine.client.SeafileClient`): the revisions of one file and
the content of one of them (``docs/seafile-api.md`` §5.8).

The write path uses them to tell which revision another client's upload was
based on (a blind overwrite) and to fetch that revision as a merge base.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from ..errors import NotFoundError, ProtocolError
from .answers import REPO_ID, as_int, as_str
from .errors import check_id
from .paths import normalize_remote_path
from .transport import SeafileHTTP

__all__ = ["FileRevision", "HistoryCalls"]


@dataclass(frozen=True)
class FileRevision:
    """One revision of a file.

    :ivar commit_id: the commit that introduced it (40 hex).
    :ivar file_id: the file's id in that commit.
    :ivar size: bytes.
    :ivar creator: the account e-mail that made the commit.
    """

    commit_id: str
    file_id: str
    size: int
    creator: str


class HistoryCalls:
    """File history calls; uses the transport of :class:`SeafileHTTP`."""

    def __init__(self, http: SeafileHTTP) -> None:
        self.http = http

    def file_history(self, repo_id: str, path: str, *, limit: int = 10) -> list[FileRevision]:
        """``GET /api/v2.1/repos/{id}/file/history/?path=&limit=``: the newest
        ``limit`` revisions of a file, newest first (the first is the live one).

        :raises NotFoundError: no such file (or library).
        :raises ProtocolError: the answer has an unexpected shape.
        """
        repo = _repo(repo_id)
        remote = normalize_remote_path(path)
        body = self.http.get_json(f"/api/v2.1/repos/{repo}/file/history/",
                                  params={"path": remote, "limit": str(max(1, limit))},
                                  what="reading a file's history", path=remote)
        items = body.get("data") if isinstance(body, dict) else None
        if not isinstance(items, list):
            raise ProtocolError("The file history has an unexpected shape.", path=remote)
        out = []
        for item in items[:limit]:
            if not isinstance(item, dict):
                raise ProtocolError("An entry of the file history is not an object.", path=remote)
            out.append(FileRevision(
                commit_id=check_id(item.get("commit_id"), what="the file history", path=remote),
                file_id=check_id(item.get("rev_file_id"), what="the file history", path=remote),
                size=as_int(item.get("size", 0), "the file history"),
                creator=as_str(item.get("creator_email")),
            ))
        return out

    def download_revision(self, repo_id: str, path: str, commit_id: str) -> bytes:
        """The content of ``path`` as of ``commit_id``:
        ``GET /api2/repos/{id}/file/revision/?p=&commit_id=`` gives a one-time
        link, which is then fetched (small files only: held in memory).

        :raises NotFoundError: no such file in that commit, or no such commit.
        """
        repo = _repo(repo_id)
        remote = normalize_remote_path(path)
        what = "downloading an older version"

        def fetch(state: dict[str, int]) -> None:
            resp = self.http.request("GET", f"/api2/repos/{repo}/file/revision/",  # once: download_retrying loops
                                     params={"p": remote, "commit_id": commit_id}, what=what, path=remote,
                                     once=True)
            link = self.http.resolve_link(resp, what=what, path=remote)
            self.http.stream_into(link, buffer, remote, None, state)

        buffer = io.BytesIO()
        self.http.download_retrying(buffer, fetch)
        return buffer.getvalue()


def _repo(repo_id: str) -> str:
    repo = repo_id.strip().lower() if isinstance(repo_id, str) else ""
    if not REPO_ID.match(repo):
        raise NotFoundError(f"{repo_id!r} is not a Seafile library id (a UUID).")
    return repo
