"""The local page's HTTP routes (a WSGI application on werkzeug).

Pages and files (``static/``, written for this page; no build step):

* ``GET /auth`` — the login page: its script posts the secret from the
  address's fragment to ``POST /api/session`` and gets the session cookie
  (``daemon/panel/auth.py``); the only routes served without the cookie,
  with the page's script and style sheet;
* ``GET /`` — the page itself (overview, conflicts, activity, memory; the
  views are drawn by ``static/app.js`` from the API below).

The API answers JSON from the socket's own method table
(``daemon/daemon_methods.py``, the same handlers ``ohsync`` and the tray
call): ``GET /api/state`` (the status object with the lists of what needs
the person), ``GET /api/conflict?path=`` (both versions and their
differences), ``GET /api/file?path=&side=`` (an image version, for its
thumbnail), ``GET /api/activity``, ``GET /api/memory/search``,
``GET /api/memory/read``, ``GET /api/health`` (the doctor's checks),
``GET /api/events`` (server-sent events: the daemon's event stream),
``POST /api/resolve``, ``POST /api/confirm-deletes``,
``POST /api/restore-deletes``, ``POST /api/refresh``.
A method's -32602 answer is a 400, its -32000 a 409 (with the sentence),
an unknown one a 404.

Every answer carries a strict Content-Security-Policy (nothing but this
origin; no inline script or style), ``X-Frame-Options: DENY``,
``X-Content-Type-Options: nosniff``, ``Referrer-Policy: no-referrer`` and
``Cache-Control: no-store``; none carries a CORS header.
"""

from __future__ import annotations

import html
import json
import logging
import mimetypes
import queue
import time
from collections.abc import Callable, Iterator
from importlib import resources
from typing import Any

from werkzeug.exceptions import HTTPException, MethodNotAllowed, NotFound
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from ..protocol import CANNOT_NOW, INVALID_PARAMS, METHOD_NOT_FOUND, Method
from ..socket.methods import CannotNow, InvalidParams
from .auth import COOKIE, HEADER, PanelAuth
from .diff import merge_prefill, side_by_side
from .events import CLOSED, EventHub

__all__ = ["PanelApp", "CSP", "Call"]

log = logging.getLogger(__name__)

#: ``call(method, params) -> JSON-RPC answer`` (``MethodTable.answer`` of the daemon's table).
Call = Callable[[str, dict[str, Any]], dict[str, Any]]

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
_STATIC = {"app.js": "text/javascript", "auth.js": "text/javascript", "app.css": "text/css"}
_IMAGES = {"image/png", "image/jpeg", "image/gif", "image/webp"}
#: Seconds between keep-alive comments on an idle event stream.
KEEPALIVE = 15.0
#: Largest image version served for a thumbnail (bytes).
MAX_IMAGE = 8 * 1024 * 1024


def _static(name: str) -> bytes:
    return resources.files("ohsync.daemon.panel").joinpath("static", name).read_bytes()


class PanelApp:
    """The WSGI application of the local page.

    :param auth: the secret, sessions and Host/Origin rules.
    :param call: runs one method of the daemon's table (see :data:`Call`).
    :param hub: the daemon's events for ``/api/events``.
    :param versions: ``versions(path, mirror) -> dict`` of a conflict
        (``ConflictService.versions`` of the mirror named).
    :param read: ``read(path, side, mirror) -> bytes | None``: one version's
        bytes (``ConflictService.read``), for image thumbnails.
    :param health: the doctor's checks as JSON (``{"ok", "checks"}``).
    :param stopping: True once the server stops (ends event streams).
    """

    def __init__(self, auth: PanelAuth, call: Call, hub: EventHub,
                 versions: Callable[[str, str | None], dict[str, Any]],
                 read: Callable[[str, str, str | None], bytes | None],
                 health: Callable[[], dict[str, Any]], stopping: Callable[[], bool]) -> None:
        self.auth = auth
        self._call = call
        self._hub = hub
        self._versions = versions
        self._read = read
        self._doctor = health
        self._stopping = stopping
        self._map = Map([
            Rule("/", endpoint="index", methods=["GET"]),
            Rule("/auth", endpoint="auth_page", methods=["GET"]),
            Rule("/static/<name>", endpoint="static", methods=["GET"]),
            Rule("/favicon.ico", endpoint="favicon", methods=["GET"]),
            Rule("/api/session", endpoint="session", methods=["POST"]),
            Rule("/api/state", endpoint="state", methods=["GET"]),
            Rule("/api/conflict", endpoint="conflict", methods=["GET"]),
            Rule("/api/file", endpoint="file", methods=["GET"]),
            Rule("/api/activity", endpoint="activity", methods=["GET"]),
            Rule("/api/memory/search", endpoint="memory_search", methods=["GET"]),
            Rule("/api/memory/read", endpoint="memory_read", methods=["GET"]),
            Rule("/api/health", endpoint="health", methods=["GET"]),
            Rule("/api/events", endpoint="events", methods=["GET"]),
            Rule("/api/resolve", endpoint="resolve", methods=["POST"]),
            Rule("/api/confirm-deletes", endpoint="confirm_deletes", methods=["POST"]),
            Rule("/api/restore-deletes", endpoint="restore_deletes", methods=["POST"]),
            Rule("/api/refresh", endpoint="refresh", methods=["POST"]),
        ])

    # ----------------------------------------------------------------- WSGI

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        response = self._dispatch(request)
        for name, value in _HEADERS.items():
            response.headers.setdefault(name, value)
        return response(environ, start_response)

    def _dispatch(self, request: Request) -> Response:
        if not self.auth.host_ok(request.headers.get("Host")):
            return _refuse("This page answers only at 127.0.0.1 or localhost on its own port.", request)
        adapter = self._map.bind_to_environ(request.environ)
        try:
            endpoint, args = adapter.match()
        except MethodNotAllowed:
            return _json({"error": "method not allowed"}, 405)
        except NotFound:
            endpoint, args = "", {}
        except HTTPException as exc:  # e.g. a redirect to add a slash
            return _json({"error": exc.description or "bad request"}, exc.code or 400)
        changes = request.method not in ("GET", "HEAD")
        if changes and not self.auth.origin_ok(request.headers.get("Origin")):
            return _refuse("A change must come from this page itself (Origin).", request)
        if endpoint == "favicon":
            return Response(status=204)
        open_routes = ("auth_page", "static", "session")
        # an image and the event stream are fetched by the browser itself, which sends no header
        token = request.headers.get(HEADER) or (request.args.get("session") if endpoint in ("events", "file") else None)
        if endpoint not in open_routes and not self.auth.session_ok(request.cookies.get(COOKIE), token,
                                                                    cookie_only=endpoint == "index"):
            return _refuse("Open this page with `ohsync panel` (or the tray's \u201cOpen ohsync\u2026\u201d).", request)
        if not endpoint:
            return _json({"error": "not found"}, 404)
        try:
            response: Response = getattr(self, "_" + endpoint)(request, **args)
            return response
        except _BadRequest as exc:
            return _json({"error": str(exc)}, 400)
        except Exception:  # answer, log, keep serving
            log.exception("local page: %s failed", endpoint)
            return _json({"error": "internal error; see the log"}, 500)

    # ----------------------------------------------------------------- helpers

    def _method(self, method: str, params: dict[str, Any]) -> Response:
        answer = self._call(method, params)
        if "error" in answer:
            err = answer["error"]
            status = {INVALID_PARAMS: 400, CANNOT_NOW: 409, METHOD_NOT_FOUND: 404}.get(err.get("code"), 500)
            return _json({"error": err.get("message", "failed")}, status)
        return _json(answer.get("result"))

    def _result(self, method: str, params: dict[str, Any] | None = None) -> Any:
        answer = self._call(method, params or {})
        if "error" in answer:
            return None
        return answer.get("result")

    # ----------------------------------------------------------------- pages

    def _index(self, request: Request) -> Response:
        return Response(_static("index.html"), mimetype="text/html")

    def _auth_page(self, request: Request) -> Response:
        return Response(_static("auth.html"), mimetype="text/html")

    def _static(self, request: Request, name: str) -> Response:
        if name not in _STATIC:
            return _json({"error": "not found"}, 404)
        return Response(_static(name), mimetype=_STATIC[name])

    def _session(self, request: Request) -> Response:
        body = _body(request)
        session = self.auth.exchange(body.get("secret", ""))
        if session is None:
            return _refuse("That is not this page's secret; open it again with `ohsync panel`.", request)
        cookie, token = session
        response = _json({"ok": True, "token": token})
        response.set_cookie(COOKIE, cookie, httponly=True, samesite="Strict", path="/")
        return response

    # ----------------------------------------------------------------- reads

    def _state(self, request: Request) -> Response:
        status = self._result(Method.STATUS)
        lists = {name: self._result(method) or [] for name, method in (
            ("conflicts", Method.CONFLICTS), ("damaged", Method.DAMAGED), ("held_deletes", Method.HELD_DELETES),
            ("skipped", Method.SKIPPED))}
        return _json({"status": status, **lists})

    def _conflict(self, request: Request) -> Response:
        path = request.args.get("path", "")
        if not path:
            raise _BadRequest("`path` names the conflict (its archived copy)")
        try:
            shown = self._versions(path, request.args.get("mirror") or None)
        except InvalidParams as exc:
            return _json({"error": str(exc)}, 400)
        except CannotNow as exc:
            return _json({"error": str(exc)}, 409)
        live, other = shown["live"], shown["other"]
        if live.get("text") is not None and other.get("text") is not None:
            shown["diff"] = side_by_side(live["text"], other["text"])
            shown["prefill"] = merge_prefill(live["text"], other["text"], live["path"], other["path"])
        for side in (live, other):
            kind = mimetypes.guess_type(side["path"])[0]
            side["image"] = bool(side.get("exists")) and kind in _IMAGES and side.get("size", 0) < MAX_IMAGE
        return _json(shown)

    def _file(self, request: Request) -> Response:
        path, side = request.args.get("path", ""), request.args.get("side", "")
        if side not in ("live", "other"):
            raise _BadRequest("`side` is live or other")
        try:
            data = self._read(path, side, request.args.get("mirror") or None)
        except InvalidParams as exc:
            return _json({"error": str(exc)}, 400)
        except CannotNow as exc:
            return _json({"error": str(exc)}, 409)
        kind = mimetypes.guess_type(path)[0]
        if data is None:
            return _json({"error": "gone"}, 404)
        if kind not in _IMAGES or len(data) >= MAX_IMAGE:  # (read stops at MAX_IMAGE: larger ones are cut)
            return _json({"error": "only images are shown"}, 415)
        response = Response(data, mimetype=kind)
        response.headers["Content-Security-Policy"] = "default-src 'none'; sandbox"
        return response

    def _activity(self, request: Request) -> Response:
        params: dict[str, Any] = {"limit": _int(request.args.get("limit"), 200)}
        mirror = request.args.get("mirror")
        if mirror:
            params["mirror"] = mirror
        answer = self._call(Method.ACTIVITY, params)
        if "error" in answer:
            return self._method(Method.ACTIVITY, params)
        items = answer.get("result") or []
        kind = request.args.get("kind")
        if kind:
            items = [a for a in items if kind in (a.get("result"), a.get("action"))]
        return _json(list(reversed(items)))

    def _memory_search(self, request: Request) -> Response:
        params: dict[str, Any] = {"query": request.args.get("q", ""), "limit": _int(request.args.get("limit"), 20)}
        return self._method(Method.MEMORY_SEARCH, params)

    def _memory_read(self, request: Request) -> Response:
        return self._method(Method.MEMORY_READ, {"permalink": request.args.get("permalink", "")})

    def _health(self, request: Request) -> Response:
        return _json(self._doctor())

    def _events(self, request: Request) -> Response:
        stream = self._hub.open()

        def generate() -> Iterator[bytes]:
            try:
                yield b"retry: 1000\n\n"
                last = time.monotonic()
                while not self._stopping():
                    try:
                        event = stream.get(timeout=1.0)
                    except queue.Empty:
                        if time.monotonic() - last >= KEEPALIVE:
                            last = time.monotonic()
                            yield b": keep-alive\n\n"
                        continue
                    if event is CLOSED:
                        return
                    last = time.monotonic()
                    # unnamed ("message") events: a daemon event of type "error" must not look like
                    # the EventSource's own "error" (a lost connection)
                    data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
                    yield f"data: {data}\n\n".encode("utf-8")
            finally:
                self._hub.close_stream(stream)

        response = Response(generate(), mimetype="text/event-stream")
        response.headers["X-Accel-Buffering"] = "no"
        return response

    # ----------------------------------------------------------------- actions

    def _resolve(self, request: Request) -> Response:
        body = _body(request)
        keys: tuple[str, ...] = ("path", "keep", "content", "mirror", "expected")
        params: dict[str, Any] = {k: body[k] for k in keys if k in body and body[k] is not None}
        return self._method(Method.RESOLVE, params)

    def _confirm_deletes(self, request: Request) -> Response:
        body = _body(request)
        return self._method(Method.CONFIRM_DELETES, {"mirror": body["mirror"]} if body.get("mirror") else {})

    def _restore_deletes(self, request: Request) -> Response:
        body = _body(request)
        return self._method(Method.RESTORE_DELETES, {"mirror": body["mirror"]} if body.get("mirror") else {})

    def _refresh(self, request: Request) -> Response:
        return self._method(Method.REFRESH, {})


class _BadRequest(Exception):
    """A request the page's own script would never send."""


def _body(request: Request) -> dict[str, Any]:
    if request.mimetype != "application/json":
        raise _BadRequest("send JSON (Content-Type: application/json)")
    if (request.content_length or 0) > 4 * 1024 * 1024:
        raise _BadRequest("the request is too large")
    try:
        body = json.loads(request.get_data(cache=False) or b"{}")
    except ValueError:
        raise _BadRequest("not JSON") from None
    if not isinstance(body, dict):
        raise _BadRequest("send a JSON object")
    return body


def _int(value: str | None, default: int) -> int:
    try:
        return max(1, min(10_000, int(value))) if value else default
    except ValueError:
        return default


def _json(obj: Any, status: int = 200) -> Response:
    return Response(json.dumps(obj, ensure_ascii=False), status=status, mimetype="application/json")


def _refuse(message: str, request: Request) -> Response:
    """403: JSON for the page's script, a short page for a person who typed the address."""
    if request.path.startswith("/api/") or "text/html" not in request.headers.get("Accept", ""):
        return _json({"error": message}, 403)
    page = ("<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>ohsync</title>"
            "<link rel=\"stylesheet\" href=\"/static/app.css\"></head><body><main class=\"page\">"
            f"<h1>ohsync</h1><p>{html.escape(message)}</p></main></body></html>")
    return Response(page, status=403, mimetype="text/html")
