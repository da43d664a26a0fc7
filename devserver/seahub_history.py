"""Seahub history views: api2 and v2.1 commit history and the v2.1 commit
diff (what one commit changed relative to its parent)."""
from __future__ import annotations

from werkzeug.wrappers import Request, Response

from . import ids
from .http_util import api_error, django_json, drf, iso_time
from .seahub_api import SeahubBase, user_name


class SeahubHistory(SeahubBase):
    """``/api2/repos/{id}/history/``, ``/api/v2.1/repos/{id}/history/``,
    ``/api/v2.1/repos/{id}/commits/{commit_id}/``."""

    def history(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api2/repos/{id}/history/?page=&per_page=``: commits newest first."""
        if self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        try:
            page = max(1, int(req.args.get("page", 1)))
            per_page = max(1, int(req.args.get("per_page", 25)))
        except ValueError:
            page, per_page = 1, 25
        commits = self.store.history(repo_id)
        chunk = commits[(page - 1) * per_page: page * per_page]
        out = [{"id": c["commit_id"], "creator_name": c["creator_name"], "creator": c["creator"],
                "desc": c["description"], "ctime": c["ctime"], "parent_id": c["parent_id"],
                "second_parent_id": c["second_parent_id"], "repo_id": repo_id, "root_id": c["root_id"],
                "version": 1, "new_merge": False, "conflict": bool(c.get("conflict")), "rev_file_id": None, "rev_file_size": 0,
                "rev_renamed_old_path": None, "device_name": None, "client_version": None,
                "next_start_commit": None} for c in chunk]
        return django_json({"commits": out, "page_next": len(commits) > page * per_page})

    def v21_history(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api/v2.1/repos/{id}/history/?page=&per_page=``."""
        if self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        page = max(1, int(req.args.get("page", 1) or 1))
        per_page = max(1, int(req.args.get("per_page", 100) or 100))
        commits = self.store.history(repo_id)
        chunk = commits[(page - 1) * per_page: page * per_page]
        data = [{"email": c["creator_name"], "name": user_name(c["creator_name"]), "contact_email": "",
                 "time": iso_time(c["ctime"]), "commit_id": c["commit_id"], "description": c["description"],
                 "client_version": None, "device_name": None, "second_parent_id": c["second_parent_id"], "tags": []}
                for c in chunk]
        return drf({"data": data, "more": len(commits) > page * per_page})

    def _tree(self, root: str) -> tuple[dict[str, str], set[str]]:
        files: dict[str, str] = {}
        dirs: set[str] = set()
        stack = [("", root)]
        while stack:
            prefix, did = stack.pop()
            for e in self.store.read_dir(did):
                p = f"{prefix}/{e['name']}"
                if e["mode"] == ids.DIR_MODE:
                    dirs.add(p)
                    stack.append((p, e["id"]))
                else:
                    files[p] = e["id"]
        return files, dirs

    def commit_diff(self, req: Request, user: str, repo_id: str, commit_id: str) -> Response:
        """``GET /api/v2.1/repos/{id}/commits/{commit_id}/``: ``commit_info`` and
        ``commit_diffs`` (``new``, ``removed``, ``renamed``, ``modified``, ``newdir``, ``deldir``)."""
        if self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        try:
            c = self.store.read_commit(repo_id, commit_id)
        except (OSError, ValueError):
            return api_error(404, f"Commit {commit_id} not found.")
        old_root = self.store.read_commit(repo_id, c["parent_id"])["root_id"] if c["parent_id"] else ids.EMPTY_ID
        old_f, old_d = self._tree(old_root)
        new_f, new_d = self._tree(c["root_id"])
        diffs = []
        removed = sorted(set(old_f) - set(new_f))
        added = sorted(set(new_f) - set(old_f))
        renamed_from: dict[str, str] = {}
        for p in removed:
            fid = old_f[p]
            if fid == ids.EMPTY_ID or list(old_f.values()).count(fid) != 1:
                continue
            cands = [q for q in added if new_f[q] == fid]
            if len(cands) == 1 and list(new_f.values()).count(fid) == 1:
                renamed_from[cands[0]] = p
        for q, p in renamed_from.items():
            diffs.append({"op_type": "renamed", "path": p, "new_path": q})
        diffs += [{"op_type": "new", "path": q, "new_path": ""} for q in added if q not in renamed_from]
        gone = set(renamed_from.values())
        diffs += [{"op_type": "removed", "path": p, "new_path": ""} for p in removed if p not in gone]
        diffs += [{"op_type": "modified", "path": p, "new_path": ""}
                  for p in sorted(set(old_f) & set(new_f)) if old_f[p] != new_f[p]]
        diffs += [{"op_type": "newdir", "path": p, "new_path": ""} for p in sorted(new_d - old_d)]
        diffs += [{"op_type": "deldir", "path": p, "new_path": ""} for p in sorted(old_d - new_d)]
        info = {"creator_email": c["creator_name"], "creator_name": user_name(c["creator_name"]),
                "creator_contact_email": "", "time": iso_time(c["ctime"]), "description": c["description"],
                "device_name": None}
        return drf({"commit_info": info, "commit_diffs": diffs})
