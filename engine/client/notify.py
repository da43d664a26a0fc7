"""The HTTP side of Seafile's notification server (a call group of
:class:`~ohsync.engine.client.SeafileClient`): discovery and tokens.

The WebSocket itself is the daemon's (``daemon/notifications.py``); these
two requests are Web API calls like any other (``docs/seafile-api.md``
§8):

* discovery: ``GET {server}/notification/ping`` answers 200 ``{"ret":
  "pong"}`` only where the service runs; a 404 (no route), a 502 (service
  down), seahub's HTML page or no answer all mean "no push";
* a token per library: ``GET /api/v2.1/repos/{id}/repo-notification-jwt-token/``
  → ``{"token": <JWT>}`` (HS256, claims ``repo_id``, ``username``, ``exp``;
  72 h).  Seahub answers it whether or not a service exists, so the token
  proves nothing by itself.
"""

from __future__ import annotations

import httpx

from ..errors import NotFoundError, ProtocolError, RemoteError
from .answers import REPO_ID
from .errors import parse_json, translate_errors
from .transport import SeafileHTTP

__all__ = ["NotificationAPI"]


class NotificationAPI:
    """Discovery of the notification server and its per-library tokens."""

    def __init__(self, http: SeafileHTTP) -> None:
        self.http = http

    def notification_url(self) -> str:
        """The WebSocket URL: the server URL with ``ws``/``wss`` and ``/notification``."""
        url = httpx.URL(self.http.server_url)
        scheme = "wss" if url.scheme == "https" else "ws"
        return str(url.copy_with(scheme=scheme)).rstrip("/") + "/notification"

    def notification_ping(self) -> bool:
        """``GET {server}/notification/ping``: True only for 200 ``{"ret": "pong"}``.

        Never raises for the server's answer or the network: anything but a
        pong means push is not available now.  Not retried; no token sent.
        """
        try:
            with translate_errors(what="asking for the notification server"):
                resp = self.http.httpx.get(self.http.server_url + "/notification/ping", timeout=10.0)
        except RemoteError:
            return False
        if resp.status_code != 200:
            return False
        try:
            body = parse_json(resp.content, what="the notification server's ping")
        except ProtocolError:
            return False
        return isinstance(body, dict) and body.get("ret") == "pong"

    def notification_token(self, repo_id: str) -> str:
        """A notification token for one library:
        ``GET /api/v2.1/repos/{id}/repo-notification-jwt-token/`` → ``{"token"}``.

        :returns: the JWT (three base64url parts).
        :raises NotFoundError: no such library (or no access).
        :raises RemoteOperationError: no read permission (403).
        :raises ProtocolError: the answer holds no token.
        """
        repo = repo_id.strip().lower() if isinstance(repo_id, str) else ""
        if not REPO_ID.match(repo):
            raise NotFoundError(f"{repo_id!r} is not a Seafile library id (a UUID).")
        body = self.http.get_json(f"/api/v2.1/repos/{repo}/repo-notification-jwt-token/",
                                  what="getting a notification token")
        token = body.get("token") if isinstance(body, dict) else None
        if not isinstance(token, str) or token.count(".") != 2:
            raise ProtocolError("The notification token answer holds no token.")
        return token
