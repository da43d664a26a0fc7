"""Seahub history views: api2 and v2.1 commit history and the v2.1 commit
diff (what one commit changed relative to its parent)."""
from __future__ import annotations

import heapq
from typing import Any

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
        commits = self._all_commits(repo_id)
        chunk = commits[(page - 1) * per_page: page * per_page]
        out = [{"id": c["commit_id"], "creator_name": c["creator_name"], "creator": c["creator"],
                "desc": c["description"], "ctime": c["ctime"], "parent_id": c["parent_id"],
                "second_parent_id": c["second_parent_id"], "repo_id": repo_id, "root_id": c["root_id"],
                "version": 1, "new_merge": False, "conflict": bool(c.get("conflict")), "rev_file_id": None,
                "rev_file_size": 0,
                "rev_renamed_old_path": None, "device_name": None, "client_version": None,
                "next_start_commit": None} for c in chunk]
        return django_json({"commits": out, "page_next": len(commits) > page * per_page})

    def _all_commits(self, repo_id: str) -> list[dict[str, Any]]:
        """Every commit reachable from the head through both parents, newest
        first by ``ctime`` (seafile's commit-tree traversal behind the api2
        history): a merged branch's commits are listed too.  Equal times keep
        the order they were reached in (first parents first)."""
        head = self.store.repos[repo_id].head
        heap: list[tuple[int, int, str]] = []
        seen: set[str] = set()
        order = 0
        out = []

        def push(cid: str | None) -> None:
            nonlocal order
            if cid and cid not in seen:
                seen.add(cid)
                heapq.heappush(heap, (-int(self.store.read_commit(repo_id, cid)["ctime"]), order, cid))
                order += 1

        push(head)
        while heap:
            _, _, cid = heapq.heappop(heap)
            c = self.store.read_commit(repo_id, cid)
            out.append(c)
            push(c["parent_id"])
            push(c.get("second_parent_id"))
        return out

    def v21_history(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api/v2.1/repos/{id}/history/?page=&per_page=``."""
        if self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        page = max(1, int(req.args.get("page", 1) or 1))
        per_page = max(1, int(req.args.get("per_page", 100) or 100))
        # merge commits that merged without conflict are not listed (seahub skips them)
        commits = [c for c in self._all_commits(repo_id) if not c["second_parent_id"] or c.get("conflict")]
        chunk = commits[(page - 1) * per_page: page * per_page]
        data = [{"email": c["creator_name"], "name": user_name(c["creator_name"]), "contact_email": "",
                 "time": iso_time(c["ctime"]), "commit_id": c["commit_id"], "description": c["description"],
                 "client_version": None, "device_name": None, "second_parent_id": c["second_parent_id"], "tags": []}
                for c in chunk]
        return drf({"data": data, "more": len(commits) > page * per_page})

    def _changed(self, old_root: str, new_root: str) -> tuple[dict[str, str], dict[str, str],
                                                             dict[str, str], dict[str, str]]:
        """The files (path → id) of both trees where they differ, and the
        folders (path → id) only one tree has.  Subtrees with equal ids are
        skipped, and a folder only one side has is not entered (seafile's
        ``diff_commits`` with ``fold_dir_diff``, as seahub calls it): its
        files are not named, only the folder (``newdir`` / ``deldir``)."""
        old_f: dict[str, str] = {}
        new_f: dict[str, str] = {}
        old_d: dict[str, str] = {}
        new_d: dict[str, str] = {}
        stack = [("", old_root, new_root)]
        while stack:
            prefix, a, b = stack.pop()
            if a == b:
                continue
            olds = {e["name"]: e for e in self.store.read_dir(a)} if a else {}
            news = {e["name"]: e for e in self.store.read_dir(b)} if b else {}
            for name in set(olds) | set(news):
                o, n = olds.get(name), news.get(name)
                p = f"{prefix}/{name}"
                o_dir = o is not None and o["mode"] == ids.DIR_MODE
                n_dir = n is not None and n["mode"] == ids.DIR_MODE
                if o is not None and n is not None and o["id"] == n["id"] and o_dir == n_dir:
                    continue
                if o is not None and o_dir and n is not None and n_dir:
                    stack.append((p, o["id"], n["id"]))
                elif o is not None and o_dir:
                    old_d[p] = o["id"]
                elif n is not None and n_dir:
                    new_d[p] = n["id"]
                if o is not None and not o_dir:
                    old_f[p] = o["id"]
                if n is not None and not n_dir:
                    new_f[p] = n["id"]
        return old_f, new_f, old_d, new_d

    @staticmethod
    def _renames(gone: dict[str, str], made: dict[str, str], empty: str) -> dict[str, str]:
        """new path → old path of the pairs seafile's ``diff_resolve_renames``
        finds: a removed and an added entry with the same id; empty ones only
        when exactly one was removed and one added."""
        pair_empty = list(gone.values()).count(empty) == 1 and list(made.values()).count(empty) == 1
        by_id: dict[str, str] = {}
        for p in sorted(gone):
            if gone[p] != empty or pair_empty:
                by_id[gone[p]] = p
        out: dict[str, str] = {}
        for q in sorted(made):
            old = by_id.pop(made[q], None)
            if old is not None:
                out[q] = old
        return out

    def commit_diff(self, req: Request, user: str, repo_id: str, commit_id: str) -> Response:
        """``GET /api/v2.1/repos/{id}/commits/{commit_id}/``: ``commit_info`` and
        ``commit_diffs`` (``new``, ``removed``, ``renamed``, ``modified``,
        ``newdir``, ``deldir``; a renamed folder has ``op_type`` ``""``, as
        seahub answers for a status it has no name for)."""
        if self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        try:
            c = self.store.read_commit(repo_id, commit_id)
        except (OSError, ValueError):
            return api_error(404, f"Commit {commit_id} not found.")
        old_root = self.store.read_commit(repo_id, c["parent_id"])["root_id"] if c["parent_id"] else ids.EMPTY_ID
        old_f, new_f, old_d, new_d = self._changed(old_root, c["root_id"])
        removed = {p: old_f[p] for p in set(old_f) - set(new_f)}
        added = {q: new_f[q] for q in set(new_f) - set(old_f)}
        renamed_from = self._renames(removed, added, ids.EMPTY_ID)
        dir_renamed = self._renames(old_d, new_d, ids.EMPTY_ID)
        diffs = [{"op_type": "renamed", "path": p, "new_path": q} for q, p in sorted(renamed_from.items())]
        diffs += [{"op_type": "", "path": p, "new_path": q} for q, p in sorted(dir_renamed.items())]
        diffs += [{"op_type": "new", "path": q, "new_path": ""} for q in sorted(added) if q not in renamed_from]
        gone = set(renamed_from.values())
        diffs += [{"op_type": "removed", "path": p, "new_path": ""} for p in sorted(removed) if p not in gone]
        diffs += [{"op_type": "modified", "path": p, "new_path": ""}
                  for p in sorted(set(old_f) & set(new_f)) if old_f[p] != new_f[p]]
        diffs += [{"op_type": "newdir", "path": p, "new_path": ""} for p in sorted(new_d) if p not in dir_renamed]
        dirs_gone = set(dir_renamed.values())
        diffs += [{"op_type": "deldir", "path": p, "new_path": ""} for p in sorted(old_d) if p not in dirs_gone]
        info = {"creator_email": c["creator_name"], "creator_name": user_name(c["creator_name"]),
                "creator_contact_email": "", "time": iso_time(c["ctime"]), "description": c["description"],
                "device_name": None}
        return drf({"commit_info": info, "commit_diffs": diffs})
