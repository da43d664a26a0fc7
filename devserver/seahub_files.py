"""Seahub file routes: download/upload/update links, file detail and
metadata, rename/move/copy/create/delete (api2 and v2.1), batch operations,
``file-uploaded-bytes`` and the folder zip task.
"""
from __future__ import annotations

from typing import Any

from werkzeug.wrappers import Request, Response

from . import ids
from .http_util import api_error, django_json, drf, iso_time, location_quote
from .names import join_path, name_too_long, nfc, norm_path, parent_and_name, seahub_name_invalid, split_path
from .repo_ops import EntryNotFound, FolderNotFound, NotAFolder, is_dir
from .seahub_api import SeahubBase, dir_slash, form_or_json, user_name


class SeahubFiles(SeahubBase):
    """File-level seahub views."""

    # ------------------------------------------------------------ links
    def download_link(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api2/repos/{id}/file/?p=&reuse=``: JSON string link + ``oid`` header."""
        if self.repo(repo_id, user) is None:
            return api_error(404, "Library not found.")
        p = req.args.get("p")
        if not p:
            return api_error(400, "Path is missing.")
        reuse = req.args.get("reuse", "0")
        if reuse not in ("0", "1"):
            return api_error(400, "If you want to reuse file server access token for download file, "
                                  "you should set 'reuse' argument as '1'.")
        e = self.ops.lookup(repo_id, p)
        if e is None or is_dir(e):
            return api_error(404, "File not found")
        tok = self.store.new_web_token("download", repo_id, user, obj=e["id"], name=e["name"],
                                       reuse=reuse == "1")
        link = f"{self.fs_root(req)}/files/{tok}/{location_quote(e['name'])}"
        return django_json(link, headers={"oid": e["id"]})

    def _link(self, req: Request, user: str, repo_id: str, kind: str) -> Response:
        if self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        p = norm_path(req.args.get("p", "/") or "/")
        if not is_dir(self.ops.lookup(repo_id, p)):
            return api_error(404, f"Folder {p} not found.")
        quota = self.store.users[user].get("quota", -2)
        if quota > 0 and self.store.usage(user) >= quota:
            return api_error(443, "Out of quota.")
        if kind == "upload" and req.args.get("from") == "web":
            kind = "upload-aj"
        tok = self.store.new_web_token(kind, repo_id, user, obj=p)
        segment = {"upload": "upload-api", "update": "update-api"}.get(kind, kind)
        link = f"{self.fs_root(req)}/{segment}/{tok}"
        if kind == "upload" and req.args.get("replace") == "1":
            link += "?replace=1"
        return drf(link)

    def upload_link(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api2/repos/{id}/upload-link/?p=&replace=&from=``: JSON string link bound to ``p``."""
        return self._link(req, user, repo_id, "upload")

    def update_link(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api2/repos/{id}/update-link/?p=``: JSON string update link."""
        return self._link(req, user, repo_id, "update")

    # ------------------------------------------------------------ info
    def _file_entry(self, req: Request, user: str, repo_id: str) -> dict[str, Any] | Response:
        """The file named by ``?p=``, or seahub's 404/400 answer."""
        if self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        p = req.args.get("p")
        if not p:
            return api_error(400, "p invalid.")
        e = self.ops.lookup(repo_id, p)
        if e is None or is_dir(e):
            return api_error(404, f"File {norm_path(p)} not found.")
        return e

    def file_detail(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api2/repos/{id}/file/detail/?p=``."""
        e = self._file_entry(req, user, repo_id)
        if isinstance(e, Response):
            return e
        d = {"type": "file", "id": e["id"], "name": e["name"], "permission": "rw", "mtime": e["mtime"],
             "last_modified": iso_time(e["mtime"]), "last_modifier_email": e["modifier"],
             "last_modifier_name": user_name(e["modifier"]), "last_modifier_contact_email": "",
             "last_modifier_avatar": self.base(req) + "/media/avatars/default.png", "size": e["size"],
             "starred": False, "comment_total": 0, "can_edit": True}
        if e["name"].lower().endswith(".md"):
            d.update(is_draft=False, has_draft=False, draft_file_path="", draft_id=None)
        return drf(d)

    def file_metadata(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api2/repos/{id}/file/metadata/?p=``: ``{"id": <file id>}``."""
        e = self._file_entry(req, user, repo_id)
        if isinstance(e, Response):
            return e
        return drf({"id": e["id"]})

    def v21_file_obj(self, repo_id: str, path: str) -> dict[str, Any]:
        """The v2.1 file object of the file at ``path``.

        :raises EntryNotFound: nothing is at ``path``.
        """
        e = self.ops.lookup(repo_id, path)
        if e is None:
            raise EntryNotFound(path)
        parent, name = parent_and_name(path)
        return {"type": "file", "repo_id": repo_id, "parent_dir": parent, "obj_name": name,
                "obj_id": e["id"], "size": e["size"], "mtime": iso_time(e["mtime"]), "is_locked": False,
                "can_preview": True, "can_edit": True}

    def v21_file_get(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api/v2.1/repos/{id}/file/?p=``: the v2.1 file object."""
        e = self._file_entry(req, user, repo_id)
        if isinstance(e, Response):
            return e
        return drf(self.v21_file_obj(repo_id, norm_path(req.args["p"])))

    # ------------------------------------------------------------ api2 file ops
    def file_post(self, req: Request, user: str, repo_id: str) -> Response:
        """``POST /api2/repos/{id}/file/?p=`` form ``operation=rename|move|copy|create``.

        rename/move answer 301 (success, not a redirect), copy 200, create 201.
        """
        if self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        p = req.args.get("p")
        if not p:
            return api_error(400, "Path is missing.")
        path = norm_path(p)
        parent, name = parent_and_name(path)
        op = req.form.get("operation")
        base = self.base(req)
        if op == "rename":
            newname = req.form.get("newname")
            if not newname:
                return api_error(400, "New name is mandatory.")
            if seahub_name_invalid(newname):
                return api_error(400, "File name invalid.")
            if len(newname) > 255 or name_too_long(newname):
                return api_error(400, "New name is too long")
            if nfc(newname) == name:
                return api_error(409, "The new name is the same to the old")
            try:
                final = self.ops.rename(repo_id, path, newname, user)
            except (EntryNotFound, FolderNotFound, NotAFolder):
                return api_error(520, "Failed to rename file: file does not exist")
            if getattr(self.app, "seahub_version", 13) == 12:
                # seahub 12 builds the path as quote(parent_dir) + quote(new name)
                new_path = (parent if parent != "/" else "/") + final
            else:
                new_path = parent + "/" + final
            loc = f"{base}/api2/repos/{repo_id}/file/?p={location_quote(new_path)}"
            return drf("success", 301, headers={"Location": loc})
        if op in ("move", "copy"):
            dst_repo = req.form.get("dst_repo")
            dst_dir = req.form.get("dst_dir")
            if not dst_repo or not dst_dir:
                return api_error(400, "Missing arguments.")
            if self.repo(dst_repo, user) is None:
                return api_error(404, f"Library {dst_repo} not found.")
            dst_dir = dir_slash(nfc(dst_dir))
            if dst_repo != repo_id and self.ops.lookup(repo_id, path) is None:
                return api_error(500, "SearpcError:Failed to move")
            if dst_repo == repo_id and dir_slash(parent) == dst_dir and parent == "/":
                return drf("success")
            if not is_dir(self.ops.lookup(dst_repo, dst_dir)):
                return api_error(404, f"Folder {norm_path(dst_dir)} not found.")
            final = self.ops.move_copy(repo_id, path, dst_repo, dst_dir, user, copy=op == "copy") or name
            body = {"repo_id": dst_repo, "parent_dir": dst_dir, "obj_name": final}
            loc = f"{base}/api2/repos/{dst_repo}/file/?p={location_quote(dst_dir + final)}"
            return drf(body, 301 if op == "move" else 200, headers={"Location": loc})
        if op == "create":
            if seahub_name_invalid(name):
                return api_error(400, "File name invalid.")
            if not is_dir(self.ops.lookup(repo_id, parent)):
                return api_error(404, f"Folder {parent} not found.")
            from .names import seahub_unique_name
            finals = self.ops.put_files(repo_id, parent, [(name, ids.EMPTY_ID, 0)], user, replace=False,
                                        unique=lambda n, ex: seahub_unique_name(n, ex), keep_desc=True)
            loc = f"{base}/api2/repos/{repo_id}/file/?p={location_quote(parent + '/' + finals[0])}"
            return drf("success", 201, headers={"Location": loc})
        return api_error(400, "Operation can only be rename, create or move.")

    def file_delete(self, req: Request, user: str, repo_id: str, v21: bool = False) -> Response:
        """``DELETE /api2/repos/{id}/file/?p=``: idempotent ``"success"`` (also deletes a folder).

        v2.1: ``{"success": true, "commit_id": <head before>}`` or ``{"success": true}`` when missing.
        """
        if self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        p = req.args.get("p")
        if not p:
            return api_error(400, "Path is missing." if not v21 else "p invalid.")
        path = norm_path(p)
        if path == "/":
            return api_error(400, "Path is invalid." if not v21 else "p invalid.")
        parent, name = parent_and_name(path)
        with self.store.lock:
            old_head = self.store.repos[repo_id].head
            try:
                removed = self.ops.delete(repo_id, parent, [name], user)
            except (FolderNotFound, NotAFolder):
                removed = []
        if not v21:
            return drf("success")
        return drf({"success": True, "commit_id": old_head} if removed else {"success": True})

    def v21_file_delete(self, req: Request, user: str, repo_id: str) -> Response:
        """``DELETE /api/v2.1/repos/{id}/file/?p=``."""
        return self.file_delete(req, user, repo_id, v21=True)

    def v21_file_post(self, req: Request, user: str, repo_id: str) -> Response:
        """``POST /api/v2.1/repos/{id}/file/?p=`` ``operation=create|rename|move|copy`` (JSON or form)."""
        if self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        p = req.args.get("p")
        if not p:
            return api_error(400, "p invalid.")
        path = norm_path(p)
        parent, name = parent_and_name(path)
        data = form_or_json(req)
        op = data.get("operation")
        e = self.ops.lookup(repo_id, path)
        if op == "create":
            if seahub_name_invalid(name):
                return api_error(400, "p invalid.")
            if not is_dir(self.ops.lookup(repo_id, parent)):
                return api_error(404, f"Folder {parent} not found.")
            from .names import seahub_unique_name
            finals = self.ops.put_files(repo_id, parent, [(name, ids.EMPTY_ID, 0)], user, replace=False,
                                        unique=lambda n, ex: seahub_unique_name(n, ex), keep_desc=True)
            return drf(self.v21_file_obj(repo_id, join_path(split_path(parent) + finals)))
        if e is None or is_dir(e):
            return api_error(404, f"File {path} not found.")
        if op == "rename":
            newname = str(data.get("newname") or "")
            if not newname or seahub_name_invalid(newname):
                return api_error(400, "newname invalid.")
            if name_too_long(newname):
                return api_error(400, "newname invalid.")
            if nfc(newname) == name:
                return api_error(400, "The new name is the same to the old")
            final = self.ops.rename(repo_id, path, newname, user)
            return drf(self.v21_file_obj(repo_id, join_path(split_path(parent) + [final])))
        if op in ("move", "copy"):
            dst_repo = str(data.get("dst_repo") or "")
            dst_dir = data.get("dst_dir")
            if not dst_repo or dst_dir is None:
                return api_error(400, "dst_repo invalid." if not dst_repo else "dst_dir invalid.")
            if self.repo(dst_repo, user) is None:
                return api_error(404, f"Library {dst_repo} not found.")
            dst = norm_path(nfc(str(dst_dir)))
            if not is_dir(self.ops.lookup(dst_repo, dst)):
                return api_error(404, f"Folder {dst} not found.")
            if op == "move" and dst_repo == repo_id and parent == "/" and dst == "/":
                return drf(self.v21_file_obj(repo_id, path))
            moved = self.ops.move_copy(repo_id, path, dst_repo, dst, user, copy=op == "copy")
            if moved is None:  # deleted since the lookup above
                return api_error(404, f"File {path} not found.")
            return drf(self.v21_file_obj(dst_repo, join_path(split_path(dst) + [moved])))
        return api_error(400, "operation invalid.")

    # ------------------------------------------------------------ batch
    def _batch_move_copy(self, req: Request, user: str, copy: bool) -> Response:
        data = form_or_json(req)
        src_repo, dst_repo = data.get("src_repo_id"), data.get("dst_repo_id")
        src_parent, dst_parent = data.get("src_parent_dir"), data.get("dst_parent_dir")
        dirents = data.get("src_dirents") or []
        if not src_repo or self.repo(src_repo, user) is None:
            return api_error(404, f"Library {src_repo} not found.")
        if not dst_repo or self.repo(dst_repo, user) is None:
            return api_error(404, f"Library {dst_repo} not found.")
        if not src_parent or not is_dir(self.ops.lookup(src_repo, src_parent)):
            return api_error(404, f"Folder {src_parent} not found.")
        if not dst_parent or not is_dir(self.ops.lookup(dst_repo, dst_parent)):
            return api_error(404, f"Folder {dst_parent} not found.")
        if not isinstance(dirents, list) or not dirents:
            return api_error(400, "src_dirents invalid.")
        for name in dirents:
            src = join_path(split_path(src_parent) + [str(name)])
            self.ops.move_copy(src_repo, src, dst_repo, norm_path(dst_parent), user, copy=copy)
        return drf({"success": True})

    def sync_batch_move(self, req: Request, user: str) -> Response:
        """``POST /api/v2.1/repos/sync-batch-move-item/`` (JSON): ``{"success": true}``."""
        return self._batch_move_copy(req, user, copy=False)

    def sync_batch_copy(self, req: Request, user: str) -> Response:
        """``POST /api/v2.1/repos/sync-batch-copy-item/`` (JSON): ``{"success": true}``."""
        return self._batch_move_copy(req, user, copy=True)

    def batch_delete(self, req: Request, user: str) -> Response:
        """``DELETE /api/v2.1/repos/batch-delete-item/`` JSON ``repo_id``, ``parent_dir``, ``dirents``."""
        data = form_or_json(req)
        repo_id = data.get("repo_id")
        if not repo_id or self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        parent = data.get("parent_dir")
        dirents = data.get("dirents")
        if not parent:
            return api_error(400, "parent_dir invalid.")
        if not isinstance(dirents, list) or not dirents:
            return api_error(400, "dirents invalid.")
        with self.store.lock:
            if not is_dir(self.ops.lookup(repo_id, parent)):
                return api_error(404, f"Folder {parent} not found.")
            old_head = self.store.repos[repo_id].head
            self.ops.delete(repo_id, norm_path(parent), [str(d) for d in dirents], user)
        return drf({"success": True, "commit_id": old_head})

    # ------------------------------------------------------------ resumable upload, zip
    def uploaded_bytes(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api/v2.1/repos/{id}/file-uploaded-bytes/?parent_dir=&file_name=``."""
        parent = req.args.get("parent_dir")
        if not parent:
            return api_error(400, "parent_dir invalid.")
        fname = req.args.get("file_name")
        if not fname:
            return api_error(400, "file_name invalid.")
        if self.store.repos.get(repo_id) is None:
            return api_error(404, f"Library {repo_id} not found.")
        n = self.app.fileserver.pending_bytes(repo_id, norm_path(parent), fname)
        return drf({"uploadedBytes": n})

    def zip_task(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET|POST /api/v2.1/repos/{id}/zip-task/?parent_dir=&dirents=``: ``{"zip_token"}``."""
        if self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        src = req.form if req.method == "POST" else req.args
        parent = src.get("parent_dir")
        dirents = src.getlist("dirents")
        if not parent or not is_dir(self.ops.lookup(repo_id, parent)):
            return api_error(400, "parent_dir invalid.")
        if not dirents:
            return api_error(400, "dirents invalid.")
        for d in dirents:
            if self.ops.lookup(repo_id, join_path(split_path(parent) + [d])) is None:
                return api_error(404, f"Item {d} not found.")
        root = self.store.root_id(repo_id)
        obj = "\n".join([norm_path(parent), root] + dirents)
        tok = self.store.new_web_token("zip", repo_id, user, obj=obj, reuse=False)
        return drf({"zip_token": tok})

    def zip_progress(self, req: Request, user=None) -> Response:
        """``GET /api/v2.1/query-zip-progress/?token=``: always ready (Go-style, no preparation)."""
        tok = self.store.web_tokens.get(req.args.get("token", ""))
        if tok is None:
            return api_error(400, "token invalid.")
        return drf({"zipped": 1, "total": 1, "failed": 0, "failed_reason": "", "canceled": 0})
