"""``DevServer``: a Seafile-Web-API-compatible HTTP server for tests and demos.

In-process use::

    srv = DevServer(tmp_path, users={"user@example.edu.cn": "secret"})
    srv.start()                      # background thread, free port
    srv.url                          # "http://127.0.0.1:PORT"
    rid = srv.create_library("user@example.edu.cn", "OH-Memory")
    srv.put_file(rid, "/a/b.md", b"hi\\n")
    srv.stop()

Serves seahub routes (``/api2/...``, ``/api/v2.1/...``) and fileserver
routes (``/seafhttp/...``) on one port, threaded, and a control API under
``/_devserver/`` (see ``control.py``) for a devserver in another process.
State persists under ``data_dir``: a restarted server keeps users, tokens and
libraries.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from . import ids, routes
from .control import Control
from .faults import CutShort, FaultInjector, close_socket, has_body, omit_entries, read_some, with_query
from .fileserver_api import TRAILING_CR, Fileserver
from .http_util import api_error, drf_detail, fs_error
from .names import nfc, norm_path, parent_and_name
from .notification_server import NotificationServer
from .repo_ops import RepoOps, desc_added, is_dir
from .seahub_api import SeahubAccount, SeahubDirs
from .seahub_file_history import SeahubFileHistory
from .seahub_files import SeahubFiles
from .seahub_history import SeahubHistory
from .stale_burst import DEFAULT_LINE, StaleBurst
from .store import Store

DEFAULT_USERS = {"user@example.edu.cn": "secret"}

_FAULT_MESSAGES = {400: "Bad request.", 403: "Permission denied.", 404: "Not found.", 409: "GC Conflict.",
                   441: "File does not exist.", 442: "File size is too large.", 443: "Out of quota.",
                   447: "Too many files in library.", 500: "Internal Server Error", 502: "Bad Gateway",
                   503: "Service Unavailable", 504: "Gateway Timeout", 520: "Internal Server Error"}

_HTML_404 = ("<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>Page not found</title>"
             "</head><body><h1>Page not found</h1><p>Sorry, but the requested page could not be found. "
             "(devserver: unknown URL)</p></body></html>")


class _QuietHandler(WSGIRequestHandler):
    """HTTP/1.1 keep-alive handler that logs only errors."""

    protocol_version = "HTTP/1.1"

    def log_request(self, code="-", size="-") -> None:  # silence access log
        pass

    def log(self, type: str, message: str, *args) -> None:
        if type == "error":
            super().log(type, message, *args)


class DevServer:
    """A Seafile-compatible server (seahub + fileserver) backed by ``data_dir``.

    Args:
        data_dir: where objects, commits and state are stored (created).
        users: ``{email: password}``; accounts are created (or their password reset).
        host, port: where to listen; port 0 picks a free port on ``start()``.
        notifications: the notification service (push): ``absent`` (none, as on
            most servers), ``up`` or ``down``; see ``notifications.set_state``.

    Attributes that emulate other server versions (settable at any time):
        honour_head: the update's ``head`` parameter merges like seafile-server
            12/13 (an edit that landed since ``head`` stays live, the upload
            becomes an SFConflict file); False ignores ``head``.
        seahub_version: 13 (default) or 12; seahub 12 answers a file rename
            with a ``Location`` whose path lacks the slash between the folder
            and the new name (``?p=/subagain.txt`` for ``/sub/again.txt``).
        zip_utf8_flag: True (default) marks zip member names as UTF-8 (general
            purpose bit 11), as the C file server does where the en_US.UTF-8
            locale exists (Seafile's images); False stores the same UTF-8 bytes
            without the flag, as it does on a host without that locale (readers
            that trust the flag take them for cp437).
        walk_hook: None, or ``walk_hook(path)`` called by a recursive listing
            before it resolves each folder below the listed one by path (as
            seahub does, from the head at that moment): a test lands a commit
            there to mix two trees in one answer, or removes the folder to get
            seahub's HTML 500 (``Invalid dir id``).
    """

    def __init__(self, data_dir: Path, users: dict[str, str] | None = None, host: str = "127.0.0.1",
                 port: int = 0, notifications: str = "absent") -> None:
        self.data_dir = Path(data_dir)
        self.host, self.port = host, port
        self.store = Store(self.data_dir)
        self.ops = RepoOps(self.store)
        self.honour_head = True
        self.seahub_version = 13
        self.zip_utf8_flag = True
        self.walk_hook: Callable[[str], None] | None = None
        for email, pw in (DEFAULT_USERS if users is None else users).items():
            self.store.ensure_user(email, pw)
        self.faults = FaultInjector()
        self.account = SeahubAccount(self)
        self.dirs_api = SeahubDirs(self)
        self.files = SeahubFiles(self)
        self.fileserver = Fileserver(self)
        self.control = Control(self)
        self.notifications = NotificationServer(self, notifications)
        self._components = {"account": self.account, "history": SeahubHistory(self), "dirs": self.dirs_api,
                            "files": self.files, "file_history": SeahubFileHistory(self),
                            "fs": self.fileserver, "notify": self.notifications}
        self._httpd: BaseWSGIServer | None = None
        self._thread: threading.Thread | None = None
        self.bursts: list[StaleBurst] = []

    # ------------------------------------------------------------ lifecycle
    def _make_httpd(self) -> BaseWSGIServer:
        return make_server(self.host, self.port, self.wsgi_app, threaded=True, request_handler=_QuietHandler)

    def start(self) -> "DevServer":
        """Start serving in a background thread; returns self (``url`` is then valid)."""
        httpd = self._httpd = self._make_httpd()
        self.port = httpd.server_port
        # a short poll interval makes stop() (and every test teardown) quick
        self._thread = threading.Thread(target=lambda: httpd.serve_forever(poll_interval=0.05),
                                        name="devserver", daemon=True)
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread (used by ``python -m ohsync.devserver``)."""
        httpd = self._httpd
        if httpd is None:
            httpd = self._httpd = self._make_httpd()
            self.port = httpd.server_port
        httpd.serve_forever()

    def bind(self) -> None:
        """Open the listening socket without serving yet (port known afterwards)."""
        httpd = self._httpd = self._make_httpd()
        self.port = httpd.server_port

    def stop(self) -> None:
        """Stop serving and close the socket (state stays on disk); a stale
        burst still running sends nothing more."""
        for burst in self.bursts:
            burst.stop()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "DevServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL, ``http://127.0.0.1:PORT``."""
        return f"http://{self.host}:{self.port}"

    @property
    def fileserver_url(self) -> str:
        """FILE_SERVER_ROOT, ``<url>/seafhttp``."""
        return self.url + "/seafhttp"

    # ------------------------------------------------------------ WSGI
    def wsgi_app(self, environ, start_response):
        """The WSGI entry point."""
        req = Request(environ)
        resp = self.dispatch(req)
        return resp(environ, start_response)

    def dispatch(self, req: Request) -> Response | CutShort:
        """Route one request: control API, faults, auth, handler, after-request hooks.

        :returns: the answer, or a :class:`CutShort` wrapping it for a fault that drops the
            connection part-way through the body.
        """
        path = req.path
        if path.startswith("/_devserver/") or path == "/_devserver":
            return self.control.handle(req)
        full = path + ("?" + req.query_string.decode("latin-1") if req.query_string else "")
        candidates = routes.match(path)
        key_template = candidates[0][1] if candidates else path
        self.faults.count(f"{req.method} {key_template}", f"{req.method} {full}")
        fault = self.faults.take(req.method, path, full)
        if fault is not None:
            if fault.latency:
                time.sleep(fault.latency)
            if fault.after_processing and (fault.drop or fault.status):
                self._route(req, path, full, candidates)  # runs the after-request hooks too
                return self._drop(req) if fault.drop else self._fault_response(fault, path)
            if fault.drop:
                return self._drop(req)
            if fault.drop_after_bytes is not None:
                if has_body(req):
                    read_some(req, fault.drop_after_bytes)
                    close_socket(req.environ, reset=True)
                    return Response(b"", status=500)
                return CutShort(self._route(req, path, full, candidates), fault.drop_after_bytes)
            if fault.status:
                resp = self._fault_response(fault, path)
                return self._after(req, path, full, resp)
            if fault.listing_of is not None:
                req = Request(with_query(req.environ, "p", fault.listing_of))
            if fault.trailing_cr is not None:
                req.environ[TRAILING_CR] = fault.trailing_cr
            if fault.omit_name is not None:
                return omit_entries(self._route(req, path, full, candidates), fault.omit_name)
        return self._route(req, path, full, candidates)

    def _route(self, req: Request, path: str, full: str, candidates: list[routes.Candidate]) -> Response:
        if not candidates:
            if not path.endswith("/") and routes.match(path + "/") and path.startswith("/api"):
                loc = req.host_url.rstrip("/") + path + "/" + (("?" + full.split("?", 1)[1]) if "?" in full else "")
                return Response("", status=301, headers={"Location": loc}, content_type="text/html; charset=utf-8")
            return Response(_HTML_404, status=404, content_type="text/html; charset=utf-8")
        chosen = next((c for c in candidates if req.method in c[0]), None)
        if chosen is None:
            return drf_detail(405, f'Method "{req.method}" not allowed.')
        _methods, _template, handler_name, auth, params = chosen
        user = None
        if auth != "none":
            user, err = self._authenticate(req)
            if err is not None and auth == "token":
                return err
        comp, meth = handler_name.split(".")
        handler = getattr(self._components[comp], meth)
        resp = handler(req, **params) if comp == "fs" else handler(req, user, **params)
        return self._after(req, path, full, resp)

    def _after(self, req: Request, path: str, full: str, resp: Response) -> Response:
        for cb in self.faults.take_hooks(req.method, path, full):
            cb(self)
        return resp

    def _authenticate(self, req: Request) -> tuple[str | None, Response | None]:
        """DRF token authentication: 403 without credentials, 401 for a bad token."""
        header = req.headers.get("Authorization", "")
        parts = header.split()
        if not parts or parts[0].lower() not in ("token", "bearer"):
            return None, drf_detail(403, "Authentication credentials were not provided.")
        if len(parts) == 1:
            return None, drf_detail(401, "Invalid token header. No credentials provided.")
        if len(parts) > 2:
            return None, drf_detail(401, "Invalid token header. Token string should not contain spaces.")
        user = self.store.user_for_token(parts[1])
        if user is None:
            return None, drf_detail(401, "Invalid token")
        return user, None

    def _fault_response(self, fault, path: str) -> Response:
        status = fault.status
        if status == 429:
            if fault.retry_after is None:
                return drf_detail(429, "Request was throttled.")
            n = fault.retry_after
            unit = "second" if n == 1 else "seconds"
            return drf_detail(429, f"Request was throttled. Expected available in {n} {unit}.",
                              headers={"Retry-After": str(n)})
        msg = _FAULT_MESSAGES.get(status, "Injected fault")
        resp = fs_error(status, msg + "\n") if path.startswith("/seafhttp/") else api_error(status, msg)
        if fault.retry_after is not None:
            resp.headers["Retry-After"] = str(fault.retry_after)
        return resp

    @staticmethod
    def _drop(req: Request) -> Response:
        """Close the client connection now (the returned answer is never delivered)."""
        close_socket(req.environ)
        return Response(b"", status=500)

    # ------------------------------------------------------------ Python API
    def token_for(self, email: str) -> str:
        """The user's API token (created on first call)."""
        return self.store.token_for(email)

    def add_user(self, email: str, password: str) -> None:
        """Create an account (or reset its password)."""
        self.store.ensure_user(email, password)

    def revoke_token(self, token: str) -> None:
        """Invalidate an API token: later requests get 401 ``{"detail": "Invalid token"}``."""
        self.store.revoke_token(token)

    def set_quota(self, email: str, total_bytes: int) -> None:
        """Set a quota; uploads that would reach it get 443 (``<= 0`` = unlimited)."""
        self.store.set_quota(email, total_bytes)

    def create_library(self, email: str, name: str, from_tree: Path | None = None, desc: str = "") -> str:
        """Create a library owned by ``email``; seed it from a local folder in one commit.

        Returns the library id.
        """
        repo = self.store.create_repo(email, nfc(name), desc)
        if from_tree is not None:
            names: list[str] = []
            root = self._import_tree(Path(from_tree), email, names)
            if root != ids.EMPTY_ID:
                with self.store.lock:
                    self.ops.commit(repo.id, root, desc_added(names or ["files"]), email)
        return repo.id

    def _import_tree(self, folder: Path, email: str, names: list[str]) -> str:
        entries = []
        for child in sorted(folder.iterdir()):
            if child.is_symlink():
                continue
            st = child.stat()
            name = nfc(child.name)
            if child.is_dir():
                did = self._import_tree(child, email, names)
                entries.append({"id": did, "mode": ids.DIR_MODE, "mtime": int(st.st_mtime), "name": name})
            elif child.is_file():
                fid, size = self.store.write_blob(child.read_bytes())
                names.append(name)
                entries.append({"id": fid, "mode": ids.FILE_MODE, "modifier": email, "mtime": int(st.st_mtime),
                                "name": name, "size": size})
        return self.store.write_dir(entries)

    def library_id(self, name: str) -> str | None:
        """Id of the first library called ``name`` (None if there is none)."""
        for r in self.store.repos.values():
            if r.name == name:
                return r.id
        return None

    def put_file(self, repo_id: str, path: str, data: bytes, mtime: int | None = None,
                 modifier: str | None = None) -> str:
        """Write a file as "another client": parents created, replaces a file, one commit.

        ``mtime`` (Unix seconds) defaults to now, ``modifier`` (an e-mail) to the
        library owner.  Returns the file id.  Identical content makes no commit.
        """
        owner = modifier or self.store.repos[repo_id].owner
        path = norm_path(nfc(path))
        parent, name = parent_and_name(path)
        fid, size = self.store.write_blob(data)
        with self.store.lock:
            e = self.ops.lookup(repo_id, path)
            if e is not None and not is_dir(e):
                self.ops.update_file(repo_id, path, fid, size, owner, mtime=mtime)
            else:
                self.ops.put_files(repo_id, parent, [(name, fid, size)], owner, replace=True, mtime=mtime,
                                   create_parents=True)
        return fid

    def restore_to_commit(self, repo_id: str, commit_id: str) -> None:
        """Roll the library back to an earlier commit, as a snapshot rollback
        or a restore done below Seafile would: the head becomes ``commit_id``
        itself (no new commit), so the new head is *not* a descendant of the
        old one and the history starts at that commit again.

        Raises ``KeyError`` for an unknown library, ``FileNotFoundError`` for
        a commit the library does not have.
        """
        if len(commit_id) != 40 or any(c not in "0123456789abcdef" for c in commit_id):
            raise FileNotFoundError(f"{commit_id!r} is not a commit id")
        with self.store.lock:
            repo = self.store.repos[repo_id]
            try:
                self.store.read_commit(repo_id, commit_id)
            except (OSError, ValueError) as exc:
                raise FileNotFoundError(f"no commit {commit_id} in library {repo_id}") from exc
            repo.head = commit_id
            self.store.save()

    def stale_burst(self, repo_id: str, path: str, count: int, *, spacing_ms: float = 50.0,
                    old: bytes | None = None, from_commit: str | None = None, line: str = DEFAULT_LINE,
                    email: str | None = None, wait: bool = True) -> StaleBurst:
        """Overwrite ``path`` ``count`` times from one old version, as a stale
        read-modify-write client does: each overwrite is an ordinary
        update-link upload without ``head`` (so the file history records
        each), holding the old content plus ``line.format(i=i)``, the next
        one ``spacing_ms`` milliseconds later.

        The old version is ``old`` (bytes), else the file as of commit
        ``from_commit``, else the file as it is now.  ``email`` is the writer
        (default the owner).  ``wait``: return when all were sent; else they
        are sent in the background (:meth:`StaleBurst.wait`).

        Raises ``FileNotFoundError`` when the old version cannot be read.
        """
        path = norm_path(nfc(path))
        if old is None:
            root = None
            if from_commit is not None:
                try:
                    root = self.store.read_commit(repo_id, from_commit)["root_id"]
                except (OSError, ValueError) as exc:
                    raise FileNotFoundError(f"no commit {from_commit} in library {repo_id}") from exc
            e = self.ops.lookup(repo_id, path, root=root)
            if e is None or is_dir(e):
                raise FileNotFoundError(path)
            old = self.store.read_blob(e["id"])
        burst = StaleBurst(self, repo_id, path, old, count, spacing_ms / 1000.0, line=line, email=email)
        self.bursts.append(burst)
        if wait:
            burst.run()
        else:
            burst.start()
        return burst

    def mkdir(self, repo_id: str, path: str) -> None:
        """Create a folder and its parents (no-op when it exists)."""
        self.ops.mkdir(repo_id, norm_path(path), self.store.repos[repo_id].owner, create_parents=True)

    def read_file(self, repo_id: str, path: str) -> bytes:
        """Content of a file; raises FileNotFoundError."""
        e = self.ops.lookup(repo_id, path)
        if e is None or is_dir(e):
            raise FileNotFoundError(path)
        return self.store.read_blob(e["id"])

    def file_id(self, repo_id: str, path: str) -> str | None:
        """Current id of the file at ``path`` (None when missing)."""
        e = self.ops.lookup(repo_id, path)
        return None if e is None or is_dir(e) else e["id"]

    def delete_path(self, repo_id: str, path: str) -> None:
        """Delete a file or folder (one commit); raises FileNotFoundError."""
        path = norm_path(path)
        parent, name = parent_and_name(path)
        with self.store.lock:
            if self.ops.lookup(repo_id, path) is None:
                raise FileNotFoundError(path)
            self.ops.delete(repo_id, parent, [name], self.store.repos[repo_id].owner)

    def move_path(self, repo_id: str, src: str, dst_dir: str) -> str | None:
        """Move an entry into folder ``dst_dir`` (auto-renamed on a clash); returns the final name."""
        return self.ops.move_copy(repo_id, norm_path(src), repo_id, norm_path(dst_dir),
                                  self.store.repos[repo_id].owner, copy=False)

    def rename_path(self, repo_id: str, path: str, newname: str) -> str:
        """Rename an entry in place (auto-renamed on a clash); returns the final name."""
        return self.ops.rename(repo_id, norm_path(path), newname, self.store.repos[repo_id].owner)

    def plant_entry(self, repo_id: str, parent: str, raw_name: str, data: bytes | None = b"") -> str:
        """Put an entry called exactly ``raw_name`` into folder ``parent``, bypassing
        every name check (one commit), to test a client's defences against hostile
        listings: ``".."``, ``"/etc/passwd"``, ``"a/b"``, a 300-byte name...

        ``data`` is the file's content; ``None`` plants an empty folder.  The entry
        shows up in folder listings as is; paths through it cannot be resolved.
        Returns the entry's id.
        """
        owner = self.store.repos[repo_id].owner
        with self.store.lock:
            if data is None:
                eid, entry = ids.EMPTY_ID, {"id": ids.EMPTY_ID, "mode": ids.DIR_MODE, "name": raw_name}
            else:
                eid, size = self.store.write_blob(data)
                entry = {"id": eid, "mode": ids.FILE_MODE, "modifier": owner, "name": raw_name, "size": size}

            def fn(entries):
                entries[raw_name] = dict(entry, mtime=int(time.time()))
                return None, True
            new_root, _ = self.ops.rewrite(self.store.root_id(repo_id), norm_path(nfc(parent)), fn)
            self.ops.commit(repo_id, new_root, desc_added([raw_name]), owner)
        return eid

    def tree(self, repo_id: str) -> dict[str, bytes]:
        """Every file of the head tree: ``{"/a/b.md": content}``."""
        files, _ = self.ops.walk(repo_id)
        return {p: self.store.read_blob(e["id"]) for p, e in files.items()}

    def tree_ids(self, repo_id: str) -> dict[str, str]:
        """Every file of the head tree with its id: ``{"/a/b.md": file_id}``."""
        files, _ = self.ops.walk(repo_id)
        return {p: e["id"] for p, e in files.items()}

    def dirs(self, repo_id: str) -> set[str]:
        """Every folder path of the head tree (``/a``, ``/a/b``; not ``/``)."""
        return self.ops.walk(repo_id)[1]

    def head_commit(self, repo_id: str) -> str:
        """The library's head commit id."""
        return self.store.repos[repo_id].head

    def history(self, repo_id: str) -> list[dict[str, Any]]:
        """Commit dicts newest first (``commit_id``, ``root_id``, ``description``, ``ctime``...)."""
        return self.store.history(repo_id)

    # counters and faults
    @property
    def requests(self) -> dict[str, int]:
        """Per-endpoint request counters, keyed like ``"GET /api2/repos/{id}/dir/"``."""
        return dict(self.faults.counters)

    def request_count(self, pattern: str | None = None) -> int:
        """Requests since the last reset: all, one endpoint key, or those whose
        ``"METHOD /path?query"`` matches the regex ``pattern``."""
        return self.faults.request_count(pattern)

    def reset_counters(self) -> None:
        """Zero every request counter."""
        self.faults.reset_counters()

    def inject_fault(self, method: str | None, path_regex: str, *, status: int | None = None, count: int = 1,
                     retry_after: int | None = None, latency: float = 0.0, drop: bool = False,
                     after_processing: bool = False, drop_after_bytes: int | None = None,
                     omit_name: str | None = None, listing_of: str | None = None,
                     trailing_cr: str | None = None) -> int:
        """Make the next ``count`` requests matching ``method`` (None = any) and
        ``path_regex`` (searched in the path, else in ``path?query``) fail.

        ``status``: answer with it instead of processing (429 with ``retry_after``:
        DRF throttle body + ``Retry-After``); ``latency``: delay in seconds first;
        ``drop``: close the connection without an answer; ``after_processing``:
        handle the request first, then replace its answer (status or drop);
        ``drop_after_bytes``: close the connection mid-body: an upload after that
        many bytes of its request body were read (nothing committed), any other
        request after that many bytes of its answer's body were sent;
        ``omit_name``: handle it, then leave entries with that name out of the
        JSON list answer (headers unchanged); ``listing_of``: answer a listing
        for this other folder path instead (its entries and ``oid``);
        ``trailing_cr``: handle an upload or update, storing its file part of
        this name with one extra trailing ``\r`` (the C fileserver's stray
        ``\r``; the answer carries the id of what was stored).
        Returns the rule id.
        """
        return self.faults.add(method, path_regex, status=status, count=count, retry_after=retry_after,
                               latency=latency, drop=drop, after_processing=after_processing,
                               drop_after_bytes=drop_after_bytes, omit_name=omit_name, listing_of=listing_of,
                               trailing_cr=trailing_cr)

    def expire_links(self) -> int:
        """Expire every fileserver link (upload/update/download/zip tokens) as if an hour
        had passed; returns how many were live.  Later use gets 403 ``Access token not found``."""
        with self.store.lock:
            n = len(self.store.web_tokens)
            for tok in self.store.web_tokens.values():
                tok.expires = 0.0
            return n

    def clear_faults(self) -> None:
        """Remove all pending faults and after-request hooks."""
        self.faults.clear()

    def after_request(self, method: str | None, path_regex: str, callback: Callable[["DevServer"], None],
                      count: int = 1) -> None:
        """Run ``callback(self)`` after each of the next ``count`` matching requests was
        handled and before its answer is sent (so the client sees the effect of the
        callback on its very next request)."""
        self.faults.add_hook(method, path_regex, callback, count)
