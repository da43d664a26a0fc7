"""Runtime control API under ``/_devserver/`` (a prefix real Seafile does not
use), so a devserver running in another process can be steered.  JSON in,
JSON out, no authentication (bind devserver to 127.0.0.1).

| method and path | body / query | answer |
|---|---|---|
| ``GET /_devserver/`` | | ``{"ok": true, "url", "fileserver"}`` |
| ``GET /_devserver/counters`` | | ``{"total": N, "endpoints": {"GET /api2/repos/": 3, ...}}`` |
| ``GET /_devserver/count?pattern=RX`` | | ``{"count": N}`` |
| ``POST /_devserver/reset`` | ``{"faults": true}`` optional | zero counters (and clear faults) |
| ``GET /_devserver/faults`` | | the live fault rules |
| ``POST /_devserver/faults`` | ``{"method", "path_regex", "status", "count", "retry_after", "latency", "drop", "after_processing", "drop_after_bytes", "omit_name", "listing_of", "trailing_cr"}`` | ``{"id": N}`` |
| ``POST /_devserver/expire-links`` | | ``{"expired": N}``: every fileserver link expires |
| ``DELETE /_devserver/faults`` | | clears faults and hooks |
| ``GET /_devserver/token?email=E`` | | ``{"token"}`` |
| ``POST /_devserver/revoke-token`` | ``{"token"}`` | ``{"ok": true}`` |
| ``POST /_devserver/quota`` | ``{"email", "total"}`` | ``{"ok": true}`` |
| ``POST /_devserver/libraries`` | ``{"email", "name"}`` | ``{"repo_id"}`` |
| ``GET /_devserver/libraries`` | | ``[{"id", "name", "owner", "head"}]`` |
| ``GET /_devserver/libraries/<id>/tree`` | | ``{"head", "files": {path: {"id", "size"}}, "dirs": [...]}`` |
| ``GET /_devserver/libraries/<id>/file?path=P`` | | raw bytes (404 when missing) |
| ``PUT /_devserver/libraries/<id>/file?path=P`` | raw bytes | ``{"id"}`` (write as another client) |
| ``DELETE /_devserver/libraries/<id>/file?path=P`` | | ``{"ok": true}`` / 404 |
| ``POST /_devserver/libraries/<id>/plant`` | ``{"parent", "name", "text"}`` or ``{"parent", "name", "dir": true}`` | ``{"id"}``: an entry with exactly that (hostile) name |
| ``POST /_devserver/libraries/<id>/stale-burst`` | ``{"path", "count", "spacing_ms", "text" or "from_commit" (the old version; default the file now), "line", "email", "wait"}`` | ``{"burst": N, "done", "ids", "errors"}``: ``count`` update-link overwrites (no ``head``) from one old version (``DevServer.stale_burst``); ``wait`` false sends them in the background |
| ``GET /_devserver/libraries/<id>/stale-burst?burst=N`` | | ``{"burst": N, "done", "ids", "errors"}`` |
| ``POST /_devserver/libraries/<id>/restore`` | ``{"commit_id"}`` | ``{"head"}``: the head moves back to that commit (a snapshot rollback; 404 for an unknown commit) |
| ``GET /_devserver/notifications`` | | ``{"state", "publishing", "connections", "subscriptions"}`` |
| ``POST /_devserver/notifications`` | ``{"state": "up"/"down"/"absent", "publishing": bool}`` (both optional) | the same |
| ``POST /_devserver/after-request`` | ``{"method", "path_regex", "count", "action": {"put_file": {"repo_id", "path", "text"}} or {"delete_path": {"repo_id", "path"}}}`` | ``{"ok": true}`` |
"""  # noqa: E501 - a Markdown table: one endpoint a row
from __future__ import annotations

import contextlib
import json
import re
from typing import Any

from werkzeug.wrappers import Request, Response

from .stale_burst import DEFAULT_LINE


def _json(obj, status: int = 200) -> Response:
    return Response(json.dumps(obj), status=status, content_type="application/json")


class Control:
    """Handler of ``/_devserver/...``; ``app`` is the ``DevServer``."""

    def __init__(self, app) -> None:
        self.app = app

    def handle(self, req: Request) -> Response:
        """Dispatch one control request."""
        app = self.app
        path = req.path[len("/_devserver"):].rstrip("/") or "/"
        body = req.get_json(silent=True) if req.mimetype == "application/json" else None
        body = body if isinstance(body, dict) else {}
        m = re.match(r"^/libraries/([-0-9a-f]{36})/(tree|file|plant|restore|stale-burst)$", path)
        try:
            if path == "/":
                return _json({"ok": True, "url": app.url, "fileserver": app.fileserver_url})
            if path == "/counters":
                return _json({"total": app.request_count(), "endpoints": app.requests})
            if path == "/count":
                return _json({"count": app.request_count(req.args.get("pattern") or None)})
            if path == "/reset" and req.method == "POST":
                app.reset_counters()
                if body.get("faults"):
                    app.clear_faults()
                return _json({"ok": True})
            if path == "/faults":
                if req.method == "GET":
                    return _json(app.faults.list())
                if req.method == "DELETE":
                    app.clear_faults()
                    return _json({"ok": True})
                fid = app.inject_fault(body.get("method"), body.get("path_regex", ""),
                                       status=body.get("status"), count=int(body.get("count", 1)),
                                       retry_after=body.get("retry_after"),
                                       latency=float(body.get("latency", 0.0)), drop=bool(body.get("drop")),
                                       after_processing=bool(body.get("after_processing")),
                                       drop_after_bytes=body.get("drop_after_bytes"),
                                       omit_name=body.get("omit_name"), listing_of=body.get("listing_of"),
                                       trailing_cr=body.get("trailing_cr"))
                return _json({"id": fid})
            if path == "/expire-links" and req.method == "POST":
                return _json({"expired": app.expire_links()})
            if path == "/token":
                return _json({"token": app.token_for(req.args["email"])})
            if path == "/revoke-token":
                app.revoke_token(body["token"])
                return _json({"ok": True})
            if path == "/quota":
                app.set_quota(body["email"], int(body["total"]))
                return _json({"ok": True})
            if path == "/libraries":
                if req.method == "POST":
                    return _json({"repo_id": app.create_library(body["email"], body["name"])})
                return _json([{"id": r.id, "name": r.name, "owner": r.owner, "head": r.head}
                              for r in app.store.repos.values()])
            if path == "/notifications":
                service = app.notifications
                if req.method == "POST":
                    if "publishing" in body:
                        service.publishing = bool(body["publishing"])
                    if "state" in body:
                        try:
                            service.set_state(str(body["state"]))
                        except ValueError as exc:
                            return _json({"error": str(exc)}, 400)
                return _json(service.info())
            if path == "/after-request":
                return self._after_request(body)
            if m:
                return self._library(req, m.group(1), m.group(2))
        except KeyError as exc:
            return _json({"error": f"missing or unknown: {exc}"}, 400)
        return _json({"error": "unknown control endpoint"}, 404)

    def _library(self, req: Request, repo_id: str, what: str) -> Response:
        app = self.app
        if repo_id not in app.store.repos:
            return _json({"error": "no such library"}, 404)
        if what == "restore":
            if req.method != "POST":
                return _json({"error": "method not allowed"}, 405)
            body = req.get_json(silent=True)
            body = body if isinstance(body, dict) else {}
            try:
                app.restore_to_commit(repo_id, str(body.get("commit_id", "")))
            except FileNotFoundError as exc:
                return _json({"error": str(exc)}, 404)
            return _json({"head": app.head_commit(repo_id)})
        if what == "stale-burst":
            return self._stale_burst(req, repo_id)
        if what == "plant":
            if req.method != "POST":
                return _json({"error": "method not allowed"}, 405)
            body = req.get_json(silent=True)
            body = body if isinstance(body, dict) else {}
            data = None if body.get("dir") else str(body.get("text", "")).encode("utf-8")
            return _json({"id": app.plant_entry(repo_id, body.get("parent", "/"), body["name"], data)})
        if what == "tree":
            files, dirs = app.ops.walk(repo_id)
            return _json({"head": app.head_commit(repo_id),
                          "files": {p: {"id": e["id"], "size": e["size"]} for p, e in files.items()},
                          "dirs": sorted(dirs)})
        path = req.args.get("path", "")
        if req.method == "GET":
            try:
                return Response(app.read_file(repo_id, path), content_type="application/octet-stream")
            except FileNotFoundError:
                return _json({"error": "not found"}, 404)
        if req.method == "PUT":
            return _json({"id": app.put_file(repo_id, path, req.get_data())})
        if req.method == "DELETE":
            try:
                app.delete_path(repo_id, path)
            except FileNotFoundError:
                return _json({"error": "not found"}, 404)
            return _json({"ok": True})
        return _json({"error": "method not allowed"}, 405)

    def _stale_burst(self, req: Request, repo_id: str) -> Response:
        app = self.app
        if req.method == "GET":
            try:
                burst = app.bursts[int(req.args.get("burst", ""))]
            except (ValueError, IndexError):
                return _json({"error": "no such burst"}, 404)
        elif req.method == "POST":
            body = req.get_json(silent=True)
            body = body if isinstance(body, dict) else {}
            text = body.get("text")
            try:
                burst = app.stale_burst(repo_id, str(body["path"]), int(body.get("count", 1)),
                                        spacing_ms=float(body.get("spacing_ms", 50)),
                                        old=None if text is None else str(text).encode("utf-8"),
                                        from_commit=body.get("from_commit"),
                                        line=str(body.get("line") or DEFAULT_LINE), email=body.get("email"),
                                        wait=bool(body.get("wait", True)))
            except FileNotFoundError as exc:
                return _json({"error": f"old version not found: {exc}"}, 404)
            except ValueError as exc:
                return _json({"error": str(exc)}, 400)
        else:
            return _json({"error": "method not allowed"}, 405)
        return _json({"burst": app.bursts.index(burst), "done": burst.done.is_set(), "ids": list(burst.ids),
                      "errors": list(burst.errors)})

    def _after_request(self, body: dict[str, Any]) -> Response:
        action = body.get("action") or {}

        def cb(srv) -> None:
            if "put_file" in action:
                a = action["put_file"]
                srv.put_file(a["repo_id"], a["path"], a.get("text", "").encode("utf-8"))
            if "delete_path" in action:
                a = action["delete_path"]
                with contextlib.suppress(FileNotFoundError):
                    srv.delete_path(a["repo_id"], a["path"])
        self.app.after_request(body.get("method"), body["path_regex"], cb, int(body.get("count", 1)))
        return _json({"ok": True})
