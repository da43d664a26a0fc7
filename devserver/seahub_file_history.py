"""Seahub's per-file history views: the revisions of one file and a download
link for one of them (``docs/seafile-api.md`` §5.8).

A revision is a commit (on the first-parent chain from the head) in which the
file's id differs from its id in the commit's parent; the walk stops where
the file did not exist.  Renames are not followed.
"""
from __future__ import annotations

import re
from typing import Any

from werkzeug.wrappers import Request, Response

from .http_util import api_error, drf, iso_time, location_quote
from .names import norm_path, parent_and_name
from .repo_ops import is_dir
from .seahub_api import SeahubBase, user_name

__all__ = ["SeahubFileHistory"]


class SeahubFileHistory(SeahubBase):
    """``/api2/repos/{id}/file/history/``, ``/api/v2.1/repos/{id}/file/history/``
    and ``/api2/repos/{id}/file/revision/``."""

    def _revisions(self, repo_id: str, path: str,
                   limit: int | None = None) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """``(commit, file entry)`` of every revision of ``path``, newest first."""
        out: list[tuple[dict[str, Any], dict[str, Any]]] = []
        for c in self.store.history(repo_id):
            e = self.ops.lookup(repo_id, path, root=c["root_id"])
            if e is None or is_dir(e):
                break
            before = None
            if c["parent_id"]:
                parent_root = self.store.read_commit(repo_id, c["parent_id"])["root_id"]
                before = self.ops.lookup(repo_id, path, root=parent_root)
            if before is None or is_dir(before) or before["id"] != e["id"]:
                out.append((c, e))
                if limit is not None and len(out) >= limit:
                    break
        return out

    def file_history(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api2/repos/{id}/file/history/?p=``: ``{"commits": [...]}``, each a
        commit object with ``rev_file_id``, ``rev_file_size``, ``user_info``."""
        if self.repo(repo_id, user) is None:
            return api_error(404, "Library not found.")
        p = req.args.get("p")
        if not p:
            return api_error(400, "Path is missing.")
        path = norm_path(p)
        revisions = self._revisions(repo_id, path)
        if not revisions:
            return api_error(404, "File not found.")
        commits = [{"id": c["commit_id"], "repo_id": repo_id, "root_id": c["root_id"],
                    "parent_id": c["parent_id"], "second_parent_id": c["second_parent_id"],
                    "creator": c["creator"], "creator_name": c["creator_name"], "ctime": c["ctime"],
                    "desc": c["description"], "version": 1, "new_merge": False,
                    "conflict": bool(c.get("conflict")), "device_name": None, "client_version": None,
                    "rev_file_id": e["id"], "rev_file_size": e.get("size", 0), "rev_renamed_old_path": None,
                    "user_info": {"email": c["creator_name"], "name": user_name(c["creator_name"]),
                                  "contact_email": ""}}
                   for c, e in revisions]
        return drf({"commits": commits})

    def v21_file_history(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api/v2.1/repos/{id}/file/history/?path=&limit=``: ``{"data": [...],
        "next_start_commit": false}``."""
        if self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        p = req.args.get("path")
        if not p:
            return api_error(400, "path invalid.")
        try:
            limit = max(1, int(req.args.get("limit", 50) or 50))
        except ValueError:
            return api_error(400, "limit invalid.")
        path = norm_path(p)
        revisions = self._revisions(repo_id, path, limit)
        if not revisions:
            return api_error(404, f"File {path} not found.")
        data = [{"commit_id": c["commit_id"], "rev_file_id": e["id"], "size": e.get("size", 0),
                 "ctime": iso_time(c["ctime"]), "description": c["description"],
                 "creator_email": c["creator_name"], "creator_name": user_name(c["creator_name"]),
                 "creator_contact_email": "", "creator_avatar_url": "", "rev_renamed_old_path": "",
                 "path": path} for c, e in revisions]
        return drf({"data": data, "next_start_commit": False})

    def file_revision(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api2/repos/{id}/file/revision/?p=&commit_id=``: a one-time
        download link (JSON string) of the file as of that commit."""
        if self.repo(repo_id, user) is None:
            return api_error(404, "Library not found.")
        p, commit_id = req.args.get("p"), req.args.get("commit_id")
        if not p or not commit_id:
            return api_error(400, "Path is missing." if not p else "Commit id is missing.")
        try:
            if not re.fullmatch(r"[0-9a-f]{40}", commit_id):
                raise ValueError(commit_id)
            c = self.store.read_commit(repo_id, commit_id)
        except (OSError, ValueError):
            return api_error(404, "Commit not found.")
        path = norm_path(p)
        e = self.ops.lookup(repo_id, path, root=c["root_id"])
        if e is None or is_dir(e):
            return api_error(404, "File not found.")
        name = parent_and_name(path)[1]
        tok = self.store.new_web_token("download", repo_id, user, obj=e["id"], name=name, reuse=False)
        return drf(f"{self.fs_root(req)}/files/{tok}/{location_quote(name)}")
