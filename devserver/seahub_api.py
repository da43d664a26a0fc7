"""Seahub routes (``/api2/...``, ``/api/v2.1/...``) for libraries, folders
and accounts.  File-level seahub routes live in ``seahub_files.py``.

Every handler is ``handler(req, user, **url_params) -> Response`` and names
the Seafile view it mirrors.  Shapes, statuses and messages follow
``tests/data/seafile-transcripts/`` (authoritative) and
``docs/seafile-api.md``.
"""
from __future__ import annotations

import secrets
import time
from typing import Any

from werkzeug.wrappers import Request, Response

from . import ids
from .http_util import api_error, django_json, drf, html_500, iso_time, location_quote, size_formatted
from .names import (
    join_path,
    listing_key,
    name_too_long,
    nfc,
    norm_path,
    parent_and_name,
    seahub_name_invalid,
    split_path,
)
from .repo_ops import FolderNotFound, NotAFolder, RepoOps, is_dir
from .store import Store

SERVER_VERSION = "13.0.15"


def user_name(email: str) -> str:
    """Default display name of an account: the e-mail's local part."""
    return email.split("@", 1)[0]


def dir_slash(p: str | None) -> str:
    """Seahub's ``normalize_dir_path``: ``/a/b/`` (root ``/``)."""
    parts = split_path(p)
    return "/" + "/".join(parts) + ("/" if parts else "")


def form_or_json(req: Request) -> dict[str, Any]:
    """``request.data`` of DRF: JSON body or form fields."""
    if req.mimetype == "application/json":
        data = req.get_json(silent=True)
        return data if isinstance(data, dict) else {}
    return req.form.to_dict()


class SeahubBase:
    """Shared helpers of the seahub handler classes; ``app`` is the ``DevServer``."""

    def __init__(self, app) -> None:
        self.app = app
        self.store: Store = app.store
        self.ops: RepoOps = app.ops

    # ------------------------------------------------------------ helpers
    def base(self, req: Request) -> str:
        """``http://host:port`` as the client addressed us."""
        return req.host_url.rstrip("/")

    def fs_root(self, req: Request) -> str:
        """FILE_SERVER_ROOT: ``<base>/seafhttp``."""
        return self.base(req) + "/seafhttp"

    def repo(self, repo_id: str, user: str):
        """The library if it exists and ``user`` owns it, else None."""
        r = self.store.repos.get(repo_id)
        return r if r is not None and r.owner == user else None

    def api2_entry(self, e: dict[str, Any]) -> dict[str, Any]:
        """A non-recursive api2 listing entry."""
        if is_dir(e):
            return {"type": "dir", "name": e["name"], "id": e["id"], "mtime": e["mtime"], "permission": "rw"}
        return {"type": "file", "name": e["name"], "id": e["id"], "mtime": e["mtime"], "permission": "rw",
                "size": e["size"], "modifier_email": e["modifier"], "modifier_name": user_name(e["modifier"]),
                "modifier_contact_email": "", "starred": False}

    def recursive_entry(self, e: dict[str, Any], parent_dir: str) -> dict[str, Any]:
        """An entry of a recursive listing (api2 and v2.1 alike)."""
        if is_dir(e):
            return {"type": "dir", "parent_dir": parent_dir, "id": e["id"], "name": e["name"],
                    "mtime": e["mtime"], "permission": "rw"}
        return {"type": "file", "modifier_email": e["modifier"], "size": e["size"], "parent_dir": parent_dir,
                "id": e["id"], "name": e["name"], "mtime": e["mtime"], "permission": "rw",
                "modifier_contact_email": "", "modifier_name": user_name(e["modifier"])}

    def v21_entry(self, e: dict[str, Any], parent_dir: str) -> dict[str, Any]:
        """A non-recursive v2.1 listing entry."""
        d = {"type": "dir" if is_dir(e) else "file", "id": e["id"], "name": e["name"], "mtime": e["mtime"],
             "permission": "rw", "parent_dir": parent_dir}
        if not is_dir(e):
            d.update(size=e["size"], modifier_email=e["modifier"], modifier_name=user_name(e["modifier"]),
                     modifier_contact_email="")
        d["starred"] = False
        return d

    def sorted_entries(self, did: str) -> list[dict[str, Any]]:
        """Entries of a folder: folders first, then files, each by ASCII-case-folded bytes."""
        es = self.store.read_dir(did)
        dirs = sorted((e for e in es if is_dir(e)), key=lambda e: listing_key(e["name"]))
        files = sorted((e for e in es if not is_dir(e)), key=lambda e: listing_key(e["name"]))
        return dirs + files

    def recursive(self, repo_id: str, did: str, p: str, t: str | None) -> list[dict[str, Any]] | None:
        """Pre-order flat listing with the ``parent_dir`` trailing-slash quirk.

        Walked as seahub's ``get_dir_file_recursively`` walks it: the listed
        folder by its id ``did`` (resolved once, as the ``oid`` header), every
        folder below it resolved by path from the library's head *at that
        moment*, so a commit that lands during the walk shows in the part
        walked after it (two trees mixed).  ``app.walk_hook(path)``, when set,
        runs before each folder below the top is resolved (tests land a
        commit there).  None when such a folder vanished meanwhile: seahub
        then fails with ``SearpcError: Invalid dir id`` (an HTML 500).
        """
        out: list[dict[str, Any]] = []
        hook = getattr(self.app, "walk_hook", None)

        def walk(d: str, path: str, top: bool) -> bool:
            pd = dir_slash(path) if top else norm_path(path)
            for e in self.sorted_entries(d):
                if is_dir(e):
                    if t != "f":
                        out.append(self.recursive_entry(e, pd))
                    sub = join_path(split_path(path) + [e["name"]])
                    if hook is not None:
                        hook(sub)
                    # a planted name no path can address (``plant_entry``) is walked by its id
                    now = e if "/" in e["name"] else self.ops.lookup(repo_id, sub)
                    if not is_dir(now) or not walk(now["id"], sub, False):
                        return False
                elif t != "d":
                    out.append(self.recursive_entry(e, pd))
            return True
        return out if walk(did, p, True) else None

    def download_info(self, req: Request, repo) -> dict[str, Any]:
        """The "download info" object of ``POST /api2/repos/`` and ``download-info/``."""
        head = self.store.head_commit(repo.id)
        size, _ = self.store.repo_stats(repo.id)
        return {"relay_id": ids.sha1_hex(b"devserver"), "relay_addr": req.host.split(":")[0],
                "relay_port": "80", "email": repo.owner, "token": secrets.token_hex(20),
                "repo_id": repo.id, "repo_name": repo.name, "repo_desc": repo.desc, "repo_size": size,
                "repo_size_formatted": size_formatted(size), "mtime": head["ctime"],
                "last_modified": iso_time(head["ctime"]), "mtime_relative": "",
                "encrypted": "", "enc_version": 0, "salt": "", "magic": "", "random_key": "",
                "repo_version": 1, "head_commit_id": repo.head, "permission": "rw", "pwd_hash": "",
                "pwd_hash_algo": "", "pwd_hash_params": ""}


class SeahubAccount(SeahubBase):
    """Authentication, ping, account and server info, libraries."""

    def auth_token(self, req: Request, user=None) -> Response:
        """``POST /api2/auth-token/`` (form or JSON): 200 ``{"token"}`` / 400 errors."""
        data = form_or_json(req)
        missing = {k: ["This field is required."] for k in ("username", "password") if not data.get(k)}
        if missing:
            return drf(missing, 400)
        email, pw = str(data["username"]), str(data["password"])
        u = self.store.users.get(email)
        if u is None or not secrets.compare_digest(u["password"], pw):
            return drf({"non_field_errors": ["Unable to login with provided credentials."]}, 400)
        return drf({"token": self.store.token_for(email)})

    def ping(self, req: Request, user=None) -> Response:
        """``GET /api2/ping/`` and ``/api2/auth/ping/``: ``"pong"``."""
        return drf("pong")

    def account_info(self, req: Request, user: str) -> Response:
        """``GET /api2/account/info/``: quota ``total`` (-2 = unlimited) and ``usage``."""
        quota = self.store.users[user].get("quota", -2)
        total = quota if quota > 0 else -2
        usage = self.store.usage(user)
        space = f"{usage * 100.0 / total:.2f}%" if total > 0 else "0%"
        return drf({"email": user, "name": user_name(user), "login_id": "", "contact_email": "",
                    "institution": "", "department": "",
                    "avatar_url": self.base(req) + "/media/avatars/default.png", "is_staff": False,
                    "total": total, "usage": usage, "space_usage": space, "enable_subscription": False,
                    "file_updates_email_interval": 0, "collaborate_email_interval": 0})

    def server_info(self, req: Request, user=None) -> Response:
        """``GET /api2/server-info/`` (no auth)."""
        return django_json({"version": SERVER_VERSION, "encrypted_library_version": 2,
                            "features": ["seafile-basic"]})

    def list_repos(self, req: Request, user: str) -> Response:
        """``GET /api2/repos/`` (``nameContains``, ``type``): owned libraries with ``head_commit_id``."""
        types = req.args.get("type")
        if types and "mine" not in types.split(","):
            return django_json([])
        needle = (req.args.get("nameContains") or "").lower()
        out = []
        for r in list(self.store.repos.values()):
            if r.owner != user or needle not in r.name.lower():
                continue
            head = self.store.head_commit(r.id)
            size, _ = self.store.repo_stats(r.id)
            out.append({"type": "repo", "id": r.id, "owner": r.owner, "owner_name": user_name(r.owner),
                        "owner_contact_email": "", "name": r.name, "mtime": head["ctime"],
                        "modifier_email": r.owner, "modifier_contact_email": "",
                        "modifier_name": user_name(r.owner), "mtime_relative": "", "size": size,
                        "size_formatted": size_formatted(size), "encrypted": False, "permission": "rw",
                        "virtual": False, "root": "", "head_commit_id": r.head, "version": 1, "salt": ""})
        out.sort(key=lambda d: -d["mtime"])
        return django_json(out, headers={"enable_encrypted_library": "True"})

    def create_repo(self, req: Request, user: str) -> Response:
        """``POST /api2/repos/`` ``name``, ``desc`` (form or JSON): 200 download-info."""
        data = form_or_json(req)
        name = nfc(str(data.get("name") or ""))
        if not name:
            return api_error(400, "Library name is required.")
        if seahub_name_invalid(name) or name_too_long(name):
            return api_error(400, "name invalid.")
        repo = self.store.create_repo(user, name, str(data.get("desc") or ""))
        return drf(self.download_info(req, repo))

    def repo_info(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api2/repos/{id}/``: ``root`` and ``head_commit_id``."""
        repo = self.repo(repo_id, user)
        if repo is None:
            return api_error(404, "Library not found.")
        head = self.store.head_commit(repo_id)
        size, count = self.store.repo_stats(repo_id)
        return drf({"type": "repo", "id": repo.id, "owner": "self", "name": repo.name, "mtime": head["ctime"],
                    "size": size, "encrypted": False, "root": head["root_id"], "permission": "rw",
                    "modifier_email": repo.owner, "modifier_contact_email": "",
                    "modifier_name": user_name(repo.owner), "file_count": count, "head_commit_id": repo.head})

    def repo_post(self, req: Request, user: str, repo_id: str) -> Response:
        """``POST /api2/repos/{id}/?op=rename`` (form ``repo_name``, ``repo_desc``)."""
        repo = self.repo(repo_id, user)
        if repo is None:
            return api_error(404, "Library not found.")
        op = req.args.get("op", "setpassword")
        if op != "rename":
            if op in ("setpassword", "checkpassword"):
                return api_error(409, "Repo is not encrypted")
            return api_error(400, "op invalid.")
        name = nfc(req.form.get("repo_name", repo.name))
        if seahub_name_invalid(name) or name_too_long(name):
            return api_error(400, "name invalid.")
        with self.store.lock:
            repo.name = name
            repo.desc = req.form.get("repo_desc", repo.desc)
            self.ops.commit(repo_id, self.store.root_id(repo_id), "Changed library name or description",
                            user, force=True)
        return drf("success")

    def repo_delete(self, req: Request, user: str, repo_id: str) -> Response:
        """``DELETE /api2/repos/{id}/``: ``"success"``; 404 ``Library <id> not found.``"""
        with self.store.lock:
            if self.repo(repo_id, user) is None:
                return api_error(404, f"Library {repo_id} not found.")
            del self.store.repos[repo_id]
            self.store.save()
        return drf("success")

    def v21_repo_delete(self, req: Request, user: str, repo_id: str) -> Response:
        """``DELETE /api/v2.1/repos/{id}/``: ``{"success": true}``."""
        resp = self.repo_delete(req, user, repo_id)
        return drf({"success": True}) if resp.status_code == 200 else resp

    def download_info_view(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api2/repos/{id}/download-info/``."""
        repo = self.repo(repo_id, user)
        if repo is None:
            return api_error(404, f"Library {repo_id} not found.")
        return drf(self.download_info(req, repo))


class SeahubDirs(SeahubBase):
    """Folder listing, mkdir, rename and delete (api2 and v2.1)."""

    def list_dir(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api2/repos/{id}/dir/?p=&oid=&t=&recursive=``: listing + ``oid``/``dir_perm`` headers."""
        if self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        p = req.args.get("p", "/") or "/"
        t = req.args.get("t")
        if t not in (None, "", "f", "d"):
            return api_error(400, "t invalid.")
        rec = req.args.get("recursive", "0")
        if rec not in ("0", "1"):
            return api_error(400, "recursive invalid.")
        e = self.ops.lookup(repo_id, p)
        if not is_dir(e):
            return api_error(404, f"Folder {dir_slash(p)} not found.")
        did = e["id"]
        if req.args.get("oid") == did:
            return django_json("uptodate", headers={"oid": did})
        headers = {"oid": did, "dir_perm": "rw"}
        if rec == "1":
            listed = self.recursive(repo_id, did, p, t)
            if listed is None:
                return html_500()
            return django_json(listed, headers=headers)
        entries = [self.api2_entry(x) for x in self.sorted_entries(did)
                   if not t or (t == "d") == is_dir(x)]
        return django_json(entries, headers=headers)

    def v21_list_dir(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api/v2.1/repos/{id}/dir/?p=&t=&recursive=&with_parents=``."""
        if self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        p = req.args.get("p", "/") or "/"
        t = req.args.get("t")
        if t not in (None, "", "f", "d"):
            return api_error(400, "t invalid.")
        e = self.ops.lookup(repo_id, p)
        if not is_dir(e):
            return api_error(404, f"Folder {dir_slash(p)} not found.")
        if req.args.get("recursive") in ("1", "true"):
            listed = self.recursive(repo_id, e["id"], p, t)
            if listed is None:  # v2.1 catches the walk's failure
                return api_error(500, "Internal Server Error")
            return drf({"dirent_list": listed})
        entries = []
        if req.args.get("with_parents") in ("true", "1") and t != "f":
            parts = split_path(p)
            for i in range(len(parts)):
                anc = join_path(parts[:i])
                ae = self.ops.lookup(repo_id, anc)
                if ae is None:  # removed since the folder's lookup (no lock is held here)
                    continue
                entries += [self.v21_entry(x, dir_slash(anc)) for x in self.sorted_entries(ae["id"]) if is_dir(x)]
        entries += [self.v21_entry(x, dir_slash(p)) for x in self.sorted_entries(e["id"])
                    if not t or (t == "d") == is_dir(x)]
        return drf({"user_perm": "rw", "dir_id": e["id"], "dirent_list": entries})

    def dir_post(self, req: Request, user: str, repo_id: str) -> Response:
        """``POST /api2/repos/{id}/dir/?p=`` form ``operation=mkdir|rename`` (JSON bodies ignored)."""
        if self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        op = req.form.get("operation")
        p = req.args.get("p", "")
        if op == "mkdir":
            path = norm_path(p)
            if path == "/":
                return api_error(400, "Path is invalid.")
            parent, name = parent_and_name(path)
            if seahub_name_invalid(name):
                return api_error(400, "Folder name invalid.")
            if name_too_long(name):
                return api_error(520, "Failed to make directory.")
            create = req.form.get("create_parents", "").lower() in ("true", "1")
            if not create and not is_dir(self.ops.lookup(repo_id, parent)):
                return api_error(404, f"Folder {parent} not found.")
            try:
                final = self.ops.mkdir(repo_id, path, user, create_parents=create)
            except (FolderNotFound, NotAFolder):
                return api_error(520, "Failed to make directory.")
            if not create:
                fparent, fname = parent_and_name(final)
                final = f"{fparent}/{fname}"
            loc = f"{self.base(req)}/api2/repos/{repo_id}/dir/?p={location_quote(final)}"
            return drf("success", 201, headers={"Location": loc})
        if op == "rename":
            path = norm_path(p)
            if path == "/":
                return api_error(400, "Path is invalid.")
            newname = req.form.get("newname")
            if not newname:
                return api_error(400, "New name is mandatory.")
            if seahub_name_invalid(newname):
                return api_error(400, "Folder name invalid.")
            if name_too_long(newname):
                return api_error(400, "New name is too long")
            if not is_dir(self.ops.lookup(repo_id, path)):
                return api_error(404, f"Folder {path} not found.")
            if parent_and_name(path)[1] != nfc(newname):
                self.ops.rename(repo_id, path, newname, user)
            return drf("success")
        return api_error(400, "Operation not supported.")

    def v21_dir_post(self, req: Request, user: str, repo_id: str) -> Response:
        """``POST /api/v2.1/repos/{id}/dir/?p=`` ``operation=mkdir|rename`` (JSON or form)."""
        if self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        data = form_or_json(req)
        op = data.get("operation")
        path = norm_path(req.args.get("p", ""))
        if path == "/":
            return api_error(400, "p invalid.")
        parent, name = parent_and_name(path)
        if op == "mkdir":
            if seahub_name_invalid(name):
                return api_error(400, "name invalid.")
            if name_too_long(name):
                return api_error(500, "Internal Server Error")
            if not is_dir(self.ops.lookup(repo_id, parent)):
                return api_error(404, f"Folder {parent} not found.")
            final = self.ops.mkdir(repo_id, path, user)
        elif op == "rename":
            newname = str(data.get("newname") or "")
            if not newname or seahub_name_invalid(newname):
                return api_error(400, "newname invalid.")
            if name_too_long(newname):
                return api_error(500, "Internal Server Error")
            if not is_dir(self.ops.lookup(repo_id, path)):
                return api_error(404, f"Folder {path} not found.")
            fname = name if nfc(newname) == name else self.ops.rename(repo_id, path, newname, user)
            final = join_path(split_path(parent) + [fname])
        else:
            return api_error(400, "operation invalid.")
        fparent, fname = parent_and_name(final)
        e = self.ops.lookup(repo_id, final) or {"id": ids.EMPTY_ID, "mtime": int(time.time())}
        return drf({"type": "dir", "repo_id": repo_id, "parent_dir": fparent, "obj_name": fname,
                    "obj_id": e["id"], "mtime": iso_time(e["mtime"])})

    def dir_delete(self, req: Request, user: str, repo_id: str, v21: bool = False) -> Response:
        """``DELETE /api2/repos/{id}/dir/?p=`` (``"success"``) and the v2.1 variant
        (``{"success": true, "commit_id": <head before>}``)."""
        if self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        path = norm_path(req.args.get("p", ""))
        if path == "/":
            return api_error(400, "Path is invalid." if not v21 else "p invalid.")
        with self.store.lock:
            if not is_dir(self.ops.lookup(repo_id, path)):
                return api_error(404, f"Folder {path} not found.")
            old_head = self.store.repos[repo_id].head
            parent, name = parent_and_name(path)
            self.ops.delete(repo_id, parent, [name], user)
        return drf({"success": True, "commit_id": old_head}) if v21 else drf("success")

    def v21_dir_delete(self, req: Request, user: str, repo_id: str) -> Response:
        """``DELETE /api/v2.1/repos/{id}/dir/?p=``."""
        return self.dir_delete(req, user, repo_id, v21=True)

    def dir_metadata(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api2/repos/{id}/dir/metadata/?p=``: ``{"id": <dir id>}``."""
        if self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        p = req.args.get("p", "/")
        e = self.ops.lookup(repo_id, p)
        if not is_dir(e):
            return api_error(404, f"Folder {norm_path(p)} not found.")
        return drf({"id": e["id"]})

    def v21_dir_detail(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api/v2.1/repos/{id}/dir/detail/?path=``."""
        if self.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        path = norm_path(req.args.get("path", ""))
        if path == "/":
            return api_error(400, "path invalid.")
        e = self.ops.lookup(repo_id, path)
        if not is_dir(e):
            return api_error(404, f"Folder {path} not found.")
        return drf({"repo_id": repo_id, "path": dir_slash(path), "name": e["name"],
                    "mtime": iso_time(e["mtime"]), "permission": "rw"})
