"""Seafile's notification server (push), as a reverse proxy shows it under
``/notification`` (``seafile-server notification-server/*.go``, API doc
"Notification server"):

* ``GET /notification/ping`` → 200 ``{"ret": "pong"}`` + newline
  (``text/plain``) while the service runs; 502 while it is down (the proxy's
  route exists); the proxy's HTML 404 when no service is deployed;
* ``GET /api/v2.1/repos/{id}/repo-notification-jwt-token/`` (seahub) →
  ``{"token": <HS256 JWT>}`` with claims ``repo_id``, ``username``, ``exp``
  (72 h); answered whether or not a service exists, as seahub does;
* ``GET /notification`` with a WebSocket upgrade: the connection.  Client
  frames ``subscribe`` / ``unsubscribe``; anything else (or text that is not
  JSON) drops the connection without a close frame.  A bad or expired
  token in a subscribe gets ``jwt-expired`` for that library; expiries are
  checked every :attr:`NotificationServer.expiry_check` seconds (hourly on
  the real server).  Every commit of a subscribed library is announced as
  ``repo-update`` with the new head (before the request that made it is
  answered, as the Go file server publishes).  Server frames end with a
  newline.  The server pings every second; a client that leaves a ping
  unanswered for 5 s gets no more pings and no more events, but its socket
  stays open (the "half-dead" connection of the real server).

The service's state is ``absent`` (the default: most servers run none),
``up`` or ``down``; :meth:`NotificationServer.set_state` switches it and
``down`` closes every connection abruptly, like a restart of the process.
The WebSocket protocol itself is the ``websockets`` library's sans-I/O
implementation, run on the request's socket in its handler thread.
"""
from __future__ import annotations

import contextlib
import json
import queue
import secrets
import select
import socket
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import jwt
from websockets.frames import Frame, Opcode
from websockets.http11 import Request as WSRequest
from websockets.server import ServerProtocol
from werkzeug.wrappers import Request, Response

from .faults import close_socket
from .http_util import api_error, drf, text

__all__ = ["NotificationServer", "TOKEN_LIFETIME"]

#: Seconds a notification token is valid (seahub and the file server issue 72 h).
TOKEN_LIFETIME = 259_200
_PROXY_404 = ("<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found"
              "</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")
_PROXY_502 = ("<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad "
              "Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n")


@dataclass(eq=False)
class _Client:
    """One WebSocket connection and what it subscribed to."""

    sock: socket.socket
    repos: dict[str, float] = field(default_factory=dict)  # repo id -> token exp
    user: str = ""
    outbox: queue.Queue[dict[str, Any]] = field(default_factory=queue.Queue)
    serving: bool = True   # False after a missed pong deadline (no pings, no events)
    killed: bool = False
    wake: tuple[socket.socket, socket.socket] = field(default_factory=socket.socketpair)

    def poke(self) -> None:
        """Wake the connection's thread (an event is queued, or it must end)."""
        with contextlib.suppress(OSError):
            self.wake[1].send(b"x")


class NotificationServer:
    """The emulated service; ``app`` is the ``DevServer``.

    :ivar ping_interval: seconds between the server's pings (1 s).
    :ivar pong_timeout: seconds without a pong before a client is no longer served (5 s).
    :ivar expiry_check: seconds between checks of subscribed tokens' ``exp``.
    :ivar publishing: False emulates a service whose publishers are not
        configured (subscriptions work, no ``repo-update`` ever).
    """

    def __init__(self, app, state: str = "absent") -> None:
        self.app = app
        self.secret = secrets.token_hex(32)
        self.state = state
        self.publishing = True
        self.ping_interval = 1.0
        self.pong_timeout = 5.0
        self.expiry_check = 3600.0
        self._clients: set[_Client] = set()
        self._lock = threading.Lock()
        app.ops.on_commit.append(self._on_commit)

    # ------------------------------------------------------------ control
    def set_state(self, state: str) -> None:
        """``up``, ``down`` (connections dropped, ping 502) or ``absent`` (no service: 404)."""
        if state not in ("up", "down", "absent"):
            raise ValueError(f"unknown notification service state {state!r}")
        self.state = state
        if state != "up":
            self.drop_all()

    def drop_all(self) -> int:
        """Close every connection without a close frame (the process died); returns how many."""
        with self._lock:
            clients = list(self._clients)
        for client in clients:
            client.killed = True
            _kill(client.sock)
            client.poke()
        return len(clients)

    def info(self) -> dict[str, Any]:
        """``{"state", "publishing", "connections", "subscriptions": {repo: n}}``."""
        with self._lock:
            subs: dict[str, int] = {}
            for client in self._clients:
                for repo in client.repos:
                    subs[repo] = subs.get(repo, 0) + 1
            return {"state": self.state, "publishing": self.publishing, "connections": len(self._clients),
                    "subscriptions": subs}

    def token(self, repo_id: str, user: str, lifetime: float = TOKEN_LIFETIME) -> str:
        """A notification JWT for ``repo_id`` as seahub issues it."""
        claims = {"exp": int(time.time() + lifetime), "repo_id": repo_id, "username": user}
        return jwt.encode(claims, self.secret, algorithm="HS256")

    def publish(self, repo_id: str, commit_id: str) -> None:
        """Announce ``repo-update`` to every connection subscribed to ``repo_id``."""
        message = {"type": "repo-update", "content": {"repo_id": repo_id, "commit_id": commit_id}}
        with self._lock:
            targets = [c for c in self._clients if repo_id in c.repos and c.serving]
        for client in targets:
            client.outbox.put(message)
            client.poke()

    def _on_commit(self, repo_id: str, commit: dict[str, Any]) -> None:
        if self.state == "up" and self.publishing:
            self.publish(repo_id, commit["commit_id"])

    # ------------------------------------------------------------ HTTP
    def jwt_token(self, req: Request, user: str, repo_id: str) -> Response:
        """``GET /api/v2.1/repos/{id}/repo-notification-jwt-token/``."""
        if repo_id not in self.app.store.repos or self.app.dirs_api.repo(repo_id, user) is None:
            return api_error(404, f"Library {repo_id} not found.")
        return drf({"token": self.token(repo_id, user)})

    def ping(self, req: Request, user: str | None = None) -> Response:
        """``GET /notification/ping``."""
        if self.state == "up":
            return text('{"ret": "pong"}\n')
        return self._unavailable()

    def websocket(self, req: Request, user: str | None = None) -> Response:
        """``GET /notification``: upgrade and serve the connection until it ends."""
        if self.state != "up":
            return self._unavailable()
        if "websocket" not in req.headers.get("Upgrade", "").lower():
            return text("Bad Request\n", 400)
        sock = req.environ.get("werkzeug.socket")
        if sock is None:
            return text("Internal Server Error\n", 500)
        # The protocol object parses the handshake itself: hand it the request
        # werkzeug already read, as the bytes that came over the wire.
        head = f"GET {req.full_path.rstrip('?')} HTTP/1.1\r\n" + "".join(
            f"{key}: {value}\r\n" for key, value in req.headers.items()) + "\r\n"
        proto = ServerProtocol()
        proto.receive_data(head.encode("latin-1"))
        handshake = next((e for e in proto.events_received() if isinstance(e, WSRequest)), None)
        if handshake is None:
            return text("Bad Request\n", 400)
        response = proto.accept(handshake)
        proto.send_response(response)
        try:
            sock.sendall(b"".join(proto.data_to_send()))
        except OSError:
            return text("", 500)
        if response.status_code == 101:
            client = _Client(sock)
            with self._lock:
                self._clients.add(client)
            try:
                self._serve(client, proto)
            finally:
                with self._lock:
                    self._clients.discard(client)
                for end in client.wake:
                    end.close()
        close_socket(req.environ)
        return Response(b"", status=500)  # never delivered: the socket is closed

    def _unavailable(self) -> Response:
        if self.state == "down":
            return Response(_PROXY_502, status=502, content_type="text/html")
        return Response(_PROXY_404, status=404, content_type="text/html")

    # ------------------------------------------------------------ one connection
    def _serve(self, client: _Client, proto: ServerProtocol) -> None:
        sock = client.sock
        sock.settimeout(None)
        now = time.monotonic()
        last_ping, last_pong, last_check = 0.0, now, now
        while not client.killed and self.state == "up":
            now = time.monotonic()
            if client.serving and now - last_ping >= self.ping_interval:
                proto.send_ping(b"")
                last_ping = now
            if client.serving and now - last_pong > self.pong_timeout:
                client.serving = False  # stops pinging and delivering; the socket stays open
            if now - last_check >= self.expiry_check:
                last_check = now
                self._expire(client, proto)
            while client.serving:
                try:
                    message = client.outbox.get_nowait()
                except queue.Empty:
                    break
                proto.send_text((json.dumps(message) + "\n").encode())
            if not _flush(sock, proto):
                return
            wait = max(0.0, min(self.ping_interval - (time.monotonic() - last_ping), 0.5))
            try:
                ready, _, _ = select.select([sock, client.wake[0]], [], [], wait)
                if client.wake[0] in ready:
                    client.wake[0].recv(4096)
                if sock not in ready:
                    continue
                data = sock.recv(65536)
            except (OSError, ValueError):
                return
            if not data:
                proto.receive_eof()
                _flush(sock, proto)
                return
            proto.receive_data(data)
            for event in proto.events_received():
                if not isinstance(event, Frame):
                    continue  # after the handshake a server protocol yields frames only
                if event.opcode is Opcode.PONG:
                    last_pong = time.monotonic()
                elif event.opcode is Opcode.TEXT:
                    if not self._message(client, proto, bytes(event.data)):
                        return  # dropped without a close frame
                elif event.opcode is Opcode.CLOSE:
                    _flush(sock, proto)
                    return
            if proto.close_expected():
                _flush(sock, proto)
                return

    def _message(self, client: _Client, proto: ServerProtocol, data: bytes) -> bool:
        """Handle a client frame; False = drop the connection."""
        try:
            msg = json.loads(data)
        except ValueError:
            return False
        if not isinstance(msg, dict) or not isinstance(msg.get("content"), dict):
            return False
        repos = msg["content"].get("repos")
        repos = repos if isinstance(repos, list) else []
        if msg.get("type") == "subscribe":
            for entry in repos:
                if not isinstance(entry, dict):
                    continue
                repo_id = str(entry.get("id", ""))
                claims = self._claims(entry.get("jwt_token"))
                with self._lock:
                    if claims is None or claims.get("repo_id") != repo_id:
                        client.repos.pop(repo_id, None)
                        expired = True
                    else:
                        client.repos[repo_id] = float(claims["exp"])
                        client.user = str(claims.get("username", ""))
                        expired = False
                if expired:
                    proto.send_text(_frame("jwt-expired", {"repo_id": repo_id}))
            return True
        if msg.get("type") == "unsubscribe":
            with self._lock:
                for entry in repos:
                    if isinstance(entry, dict):
                        client.repos.pop(str(entry.get("id", "")), None)
            return True
        return False

    def _claims(self, token: object) -> dict[str, Any] | None:
        if not isinstance(token, str) or not token:
            return None
        try:
            claims = jwt.decode(token, self.secret, algorithms=["HS256"])
        except jwt.PyJWTError:
            return None
        return claims if isinstance(claims, dict) and "exp" in claims else None

    def _expire(self, client: _Client, proto: ServerProtocol) -> None:
        now = time.time()
        with self._lock:
            gone = [repo for repo, exp in client.repos.items() if exp <= now]
            for repo in gone:
                client.repos.pop(repo, None)
        for repo in gone:
            proto.send_text(_frame("jwt-expired", {"repo_id": repo}))


def _frame(kind: str, content: dict[str, Any]) -> bytes:
    return (json.dumps({"type": kind, "content": content}) + "\n").encode()


def _flush(sock: socket.socket, proto: ServerProtocol) -> bool:
    """Send what the protocol queued; False when the socket is gone."""
    try:
        for chunk in proto.data_to_send():
            if chunk:
                sock.sendall(chunk)
    except OSError:
        return False
    return True


def _kill(sock: socket.socket) -> None:
    for step in (lambda: sock.shutdown(socket.SHUT_RDWR), sock.close):
        with contextlib.suppress(OSError):
            step()
