"""Reading a library's commit history (``GET /api2/repos/{id}/history/``)
and what one commit changed (``GET /api/v2.1/repos/{id}/commits/{commit_id}/``).

The api2 history view answers ``{"commits": [...], "page_next": bool}``,
newest first, each commit a serialized RPC object with ``id``,
``parent_id``, ``second_parent_id``, ``root_id``, ``ctime`` (Unix seconds)
and ``desc`` (seafile-web-api.md §2.6).  The history starts at the current
head and follows parents, so it tells whether an older head is an ancestor
of the current one; it may be trimmed by the library's history limit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import NotFoundError, ProtocolError
from .errors import check_id
from .transport import SeafileHTTP

__all__ = ["CommitChange", "CommitInfo", "CommitReads", "first_parents"]


@dataclass(frozen=True)
class CommitInfo:
    """One commit of a library.

    :ivar id: 40-hex commit id.
    :ivar parent_id: the first parent's id, None for the library's first commit.
    :ivar second_parent_id: a merge commit's other parent, else None.
    :ivar root_id: the commit's root directory id.
    :ivar ctime: commit time, Unix seconds (server clock).
    :ivar desc: the commit description (``Added "a.md".``).
    """

    id: str
    parent_id: str | None
    second_parent_id: str | None
    root_id: str
    ctime: int
    desc: str


@dataclass(frozen=True)
class CommitChange:
    """One line of what a commit changed relative to its (first) parent.

    :ivar op: ``new``, ``removed``, ``renamed``, ``modified``, ``newdir``,
        ``deldir``, or ``""`` for a change the server did not name.
    :ivar path: the remote path (absolute, leading ``/``).
    :ivar new_path: the remote path after a rename, else ``""``.
    """

    op: str
    path: str
    new_path: str = ""


def first_parents(commits: list[CommitInfo], old_head: str, new_head: str, *, limit: int | None = None,
                  merges: bool = True) -> list[CommitInfo] | None:
    """The commits after ``old_head`` up to ``new_head``, newest first, by
    first parents through ``commits`` (one history page, any order).

    :param limit: at most this many commits (None: any number).
    :param merges: False refuses a merge commit on the way.
    :returns: ``[]`` when the heads are equal; None when a commit on the way
        is missing from ``commits``, is the library's first commit (so
        ``old_head`` is no ancestor), is a refused merge, or the chain is
        longer than ``limit``.
    """
    by_id = {c.id: c for c in commits}
    chain: list[CommitInfo] = []
    at = new_head
    while at != old_head:
        commit = by_id.get(at)
        if commit is None or commit.parent_id is None or (commit.second_parent_id and not merges) \
                or (limit is not None and len(chain) >= limit):
            return None
        chain.append(commit)
        at = commit.parent_id
    return chain


_REPO_ID = re.compile(r"^[-0-9a-f]{36}$")


def _optional_id(value: Any) -> str | None:
    if value in (None, ""):
        return None
    return check_id(value, what="the library history")


def _repo(repo_id: str) -> str:
    repo = repo_id.strip().lower() if isinstance(repo_id, str) else ""
    if not _REPO_ID.match(repo):
        raise NotFoundError(f"{repo_id!r} is not a Seafile library id (a UUID).")
    return repo


class CommitReads:
    """Commit-history reads of :class:`~ohsync.engine.client.SeafileClient`."""

    def __init__(self, http: SeafileHTTP) -> None:
        self.http = http

    def commit_changes(self, repo_id: str, commit_id: str) -> list[CommitChange]:
        """``GET /api/v2.1/repos/{id}/commits/{commit_id}/``: what one commit
        changed relative to its parent (``commit_diffs``, seafile-web-api.md §2.6).

        :param commit_id: 40-hex commit id.
        :returns: the changes in the server's order; paths absolute in the library.
        :raises NotFoundError: no such library or commit (or a server without the endpoint).
        :raises ProtocolError: the answer has the wrong shape.
        """
        repo = _repo(repo_id)
        commit = check_id(commit_id, what="a commit id")
        body = self.http.get_json(f"/api/v2.1/repos/{repo}/commits/{commit}/", what="reading what a commit changed")
        diffs = body.get("commit_diffs") if isinstance(body, dict) else None
        if not isinstance(diffs, list):
            raise ProtocolError("The commit's changes are not an object with a commit_diffs list.")
        out = []
        for item in diffs:
            if not isinstance(item, dict) or not isinstance(item.get("path"), str) \
                    or not isinstance(item.get("op_type") or "", str) \
                    or not isinstance(item.get("new_path") or "", str):
                raise ProtocolError("A change in the commit's changes has an unexpected shape.")
            out.append(CommitChange(str(item.get("op_type") or ""), item["path"], str(item.get("new_path") or "")))
        return out

    def commit_history(self, repo_id: str, *, page: int = 1, per_page: int = 100) -> tuple[list[CommitInfo], bool]:
        """``GET /api2/repos/{id}/history/?page=&per_page=``: one page of commits, newest first.

        :param page: 1-based page number.
        :param per_page: commits per page.
        :returns: ``(commits, more)``; ``more`` is True when a next page exists.
        :raises NotFoundError: no such library.
        :raises ProtocolError: the answer has the wrong shape.
        """
        repo = _repo(repo_id)
        body = self.http.get_json(f"/api2/repos/{repo}/history/", params={"page": str(page), "per_page": str(per_page)},
                                  what="reading the library history")
        if not isinstance(body, dict) or not isinstance(body.get("commits"), list):
            raise ProtocolError("The library history is not an object with a commits list.")
        commits = []
        for item in body["commits"]:
            if not isinstance(item, dict):
                raise ProtocolError("A commit in the library history is not an object.")
            try:
                ctime = int(item.get("ctime") or 0)
            except (TypeError, ValueError) as exc:
                raise ProtocolError("A commit in the library history has a non-number ctime.") from exc
            commits.append(CommitInfo(
                id=check_id(item.get("id"), what="the library history"),
                parent_id=_optional_id(item.get("parent_id")),
                second_parent_id=_optional_id(item.get("second_parent_id")),
                root_id=str(item.get("root_id") or ""),
                ctime=ctime,
                desc=str(item.get("desc") or ""),
            ))
        return commits, bool(body.get("page_next"))
