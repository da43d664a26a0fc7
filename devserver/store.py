"""Persistent, content-addressed storage of devserver: objects, commits, state.

Layout under the data directory::

    blocks/ab/cdef...        raw block bytes, named by sha1
    fs/ab/cdef...            file and directory objects as Seafile JSON text
    commits/<repo_id>/<id>   commit objects (JSON)
    state.json               users (password, API token, quota) and libraries
                             (name, desc, owner, head commit); rewritten
                             atomically on every change
    webtokens.jsonl          upload/update/reusable download link tokens
                             (append-only; one-time download tokens are kept
                             in memory only)

All public methods are thread-safe; ``Store.lock`` serialises commits.
"""
from __future__ import annotations

import json
import os
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import ids

WEB_TOKEN_TTL = 3600.0


@dataclass
class WebToken:
    """A fileserver access token (the 36-char part of a link).

    ``op`` is ``upload``, ``upload-aj``, ``update`` or ``download``; ``obj`` is the
    bound folder (upload) or file id (download); ``reuse`` False means one use.
    """

    token: str
    op: str
    repo_id: str
    user: str
    obj: str = ""
    name: str = ""
    reuse: bool = True
    expires: float = 0.0


@dataclass
class Repo:
    """A library: id, name, description, owner e-mail, head commit id."""

    id: str
    name: str
    desc: str
    owner: str
    head: str
    created: int = field(default_factory=lambda: int(time.time()))


class Store:
    """Objects, commits, users, libraries and web tokens under ``data_dir``."""

    def __init__(self, data_dir: Path) -> None:
        self.root = Path(data_dir)
        for sub in ("blocks", "fs", "commits"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.lock = threading.RLock()
        self.users: dict[str, dict[str, Any]] = {}
        self.repos: dict[str, Repo] = {}
        self.web_tokens: dict[str, WebToken] = {}
        self._dir_cache: dict[str, list[dict[str, Any]]] = {}
        self._file_cache: dict[str, dict[str, Any]] = {}
        self._stats_cache: dict[str, tuple[int, int]] = {}
        self._load()

    # ----------------------------------------------------------------- state
    def _load(self) -> None:
        state_file = self.root / "state.json"
        if state_file.exists():
            st = json.loads(state_file.read_text("utf-8"))
            self.users = st.get("users", {})
            self.repos = {r["id"]: Repo(**r) for r in st.get("repos", [])}
        wt = self.root / "webtokens.jsonl"
        if wt.exists():
            now = time.time()
            for line in wt.read_text("utf-8").splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if "used" in rec:
                    self.web_tokens.pop(rec["used"], None)
                elif rec.get("expires", 0) > now:
                    self.web_tokens[rec["token"]] = WebToken(**rec)

    def save(self) -> None:
        """Write ``state.json`` atomically (call with ``lock`` held)."""
        st = {"users": self.users, "repos": [vars(r) for r in self.repos.values()]}
        tmp = self.root / "state.json.tmp"
        tmp.write_text(json.dumps(st, indent=1, ensure_ascii=False), "utf-8")
        os.replace(tmp, self.root / "state.json")

    # ----------------------------------------------------------------- users
    def ensure_user(self, email: str, password: str) -> None:
        """Create the account or reset its password; keeps an existing token."""
        with self.lock:
            u = self.users.setdefault(email, {"password": password, "token": None, "quota": -2})
            u["password"] = password
            self.save()

    def token_for(self, email: str) -> str:
        """The user's single API token (created on first use, 40 hex)."""
        with self.lock:
            u = self.users[email]
            if not u.get("token"):
                u["token"] = secrets.token_hex(20)
                self.save()
            token: str = u["token"]
            return token

    def user_for_token(self, token: str) -> str | None:
        """E-mail of the user owning API ``token``, or None."""
        for email, u in list(self.users.items()):
            if u.get("token") and secrets.compare_digest(u["token"], token):
                return email
        return None

    def revoke_token(self, token: str) -> None:
        """Forget an API token (later requests with it get 401)."""
        with self.lock:
            for u in self.users.values():
                if u.get("token") == token:
                    u["token"] = None
            self.save()

    def set_quota(self, email: str, total: int) -> None:
        """Set a user's quota in bytes (negative = unlimited, reported as -2)."""
        with self.lock:
            self.users[email]["quota"] = int(total)
            self.save()

    def usage(self, email: str) -> int:
        """Bytes used by the libraries ``email`` owns."""
        return sum(self.repo_stats(r.id)[0] for r in list(self.repos.values()) if r.owner == email)

    # ----------------------------------------------------------------- objects
    def _obj_path(self, kind: str, oid: str) -> Path:
        return self.root / kind / oid[:2] / oid[2:]

    def _write_obj(self, kind: str, oid: str, data: bytes) -> None:
        path = self._obj_path(kind, oid)
        if path.exists():
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + f".{threading.get_ident()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, path)

    def write_blob(self, data: bytes, explicit_empty: bool = False) -> tuple[str, int]:
        """Store ``data`` as blocks + file object; return ``(file_id, size)``."""
        blocks = ids.split_blocks(data)
        block_ids = []
        for b in blocks:
            bid = ids.sha1_hex(b)
            self._write_obj("blocks", bid, b)
            block_ids.append(bid)
        fid = ids.file_id_for_blocks(block_ids, len(data), explicit_empty)
        if fid != ids.EMPTY_ID:
            self._write_obj("fs", fid, ids.file_object_json(block_ids, len(data)).encode())
            self._file_cache[fid] = {"block_ids": block_ids, "size": len(data)}
        return fid, len(data)

    def file_object(self, fid: str) -> dict[str, Any]:
        """``{"block_ids": [...], "size": N}`` of a file id (zero id = empty)."""
        if fid == ids.EMPTY_ID:
            return {"block_ids": [], "size": 0}
        obj = self._file_cache.get(fid)
        if obj is None:
            obj = json.loads(self._obj_path("fs", fid).read_text("utf-8"))
            self._file_cache[fid] = obj
        return obj

    def read_blob(self, fid: str) -> bytes:
        """The content of file ``fid``."""
        obj = self.file_object(fid)
        return b"".join(self._obj_path("blocks", b).read_bytes() for b in obj["block_ids"])

    def read_range(self, fid: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)`` of file ``fid`` (reads only the blocks needed)."""
        out = []
        pos = 0
        for b in self.file_object(fid)["block_ids"]:
            path = self._obj_path("blocks", b)
            blen = path.stat().st_size
            if pos + blen > start and pos < end:
                data = path.read_bytes()
                out.append(data[max(0, start - pos):min(blen, end - pos)])
            pos += blen
            if pos >= end:
                break
        return b"".join(out)

    def iter_range(self, fid: str, start: int, end: int):
        """Yield the bytes ``[start, end)`` of file ``fid`` block by block."""
        pos = 0
        for b in self.file_object(fid)["block_ids"]:
            path = self._obj_path("blocks", b)
            blen = path.stat().st_size
            if pos + blen > start and pos < end:
                data = path.read_bytes()
                yield data[max(0, start - pos):min(blen, end - pos)]
            pos += blen
            if pos >= end:
                break

    def write_dir(self, entries: list[dict[str, Any]]) -> str:
        """Store a directory object; return its id (zero id when empty)."""
        did = ids.dir_id(entries)
        if did != ids.EMPTY_ID and did not in self._dir_cache:
            self._write_obj("fs", did, ids.dir_object_json(entries).encode("utf-8"))
            self._dir_cache[did] = [dict(e) for e in entries]
        return did

    def read_dir(self, did: str) -> list[dict[str, Any]]:
        """Entries of directory ``did`` (copies; dicts id/mode/mtime/name[/modifier/size])."""
        if did == ids.EMPTY_ID:
            return []
        entries = self._dir_cache.get(did)
        if entries is None:
            obj = json.loads(self._obj_path("fs", did).read_text("utf-8"))
            entries = obj["dirents"]
            self._dir_cache[did] = entries
        return [dict(e) for e in entries]

    # ----------------------------------------------------------------- commits
    def write_commit(self, repo_id: str, root_id: str, parent_id: str | None, creator_name: str,
                     desc: str, repo_name: str, repo_desc: str, ctime: int | None = None,
                     second_parent_id: str | None = None, conflict: bool = False) -> dict[str, Any]:
        """Create and store a commit; return the commit dict (a merge commit
        when ``second_parent_id`` is given; ``conflict``: it added SFConflict files)."""
        ctime = int(time.time()) if ctime is None else ctime
        cid = ids.commit_id(root_id, parent_id, creator_name, desc, ctime)
        commit = {"commit_id": cid, "root_id": root_id, "repo_id": repo_id,
                  "creator_name": creator_name, "creator": ids.EMPTY_ID, "description": desc,
                  "ctime": ctime, "parent_id": parent_id, "second_parent_id": second_parent_id,
                  "repo_name": repo_name, "repo_desc": repo_desc, "version": 1}
        if conflict:
            commit["conflict"] = True
        path = self.root / "commits" / repo_id / cid
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(commit, ensure_ascii=False), "utf-8")
        return commit

    def read_commit(self, repo_id: str, cid: str) -> dict[str, Any]:
        """A stored commit of ``repo_id``."""
        commit: dict[str, Any] = json.loads((self.root / "commits" / repo_id / cid).read_text("utf-8"))
        return commit

    def history(self, repo_id: str) -> list[dict[str, Any]]:
        """Commits of a library, newest first (following ``parent_id``)."""
        out = []
        cid: str | None = self.repos[repo_id].head
        seen = set()
        while cid and cid not in seen:
            seen.add(cid)
            c = self.read_commit(repo_id, cid)
            out.append(c)
            cid = c["parent_id"]
        return out

    # ----------------------------------------------------------------- repos
    def create_repo(self, owner: str, name: str, desc: str = "") -> Repo:
        """Create a library with its first commit ("Created library")."""
        with self.lock:
            rid = str(uuid.uuid4())
            c = self.write_commit(rid, ids.EMPTY_ID, None, owner, "Created library", name, desc)
            repo = Repo(id=rid, name=name, desc=desc, owner=owner, head=c["commit_id"])
            self.repos[rid] = repo
            self.save()
            return repo

    def head_commit(self, repo_id: str) -> dict[str, Any]:
        """The head commit dict of a library."""
        return self.read_commit(repo_id, self.repos[repo_id].head)

    def root_id(self, repo_id: str) -> str:
        """Root directory id of a library's head."""
        root: str = self.head_commit(repo_id)["root_id"]
        return root

    def repo_stats(self, repo_id: str) -> tuple[int, int]:
        """``(total bytes, file count)`` of a library's head tree (cached per root)."""
        root = self.root_id(repo_id)
        cached = self._stats_cache.get(root)
        if cached is None:
            size = count = 0
            stack = [root]
            while stack:
                for e in self.read_dir(stack.pop()):
                    if e["mode"] == ids.DIR_MODE:
                        stack.append(e["id"])
                    else:
                        size += e["size"]
                        count += 1
            cached = self._stats_cache[root] = (size, count)
        return cached

    # ----------------------------------------------------------------- web tokens
    def new_web_token(self, op: str, repo_id: str, user: str, obj: str = "", name: str = "",
                      reuse: bool = True) -> str:
        """Mint a 36-char fileserver access token valid for one hour."""
        tok = WebToken(token=str(uuid.uuid4()), op=op, repo_id=repo_id, user=user, obj=obj,
                       name=name, reuse=reuse, expires=time.time() + WEB_TOKEN_TTL)
        with self.lock:
            self.web_tokens[tok.token] = tok
            if reuse:
                with open(self.root / "webtokens.jsonl", "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(vars(tok), ensure_ascii=False) + "\n")
        return tok.token

    def use_web_token(self, token: str) -> WebToken | None:
        """Look up a token; a one-time token is consumed by this call."""
        with self.lock:
            tok = self.web_tokens.get(token)
            if tok is None:
                return None
            if tok.expires < time.time():
                self.web_tokens.pop(token, None)
                return None
            if not tok.reuse:
                self.web_tokens.pop(token, None)
            return tok
