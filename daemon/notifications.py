"""Push notifications: Seafile's notification server tells us when the library changed.

Where the server runs the optional notification service
(``docs/seafile-api.md`` §8), :class:`PushChannel`
keeps one WebSocket subscribed to our library in its own thread and turns
every ``repo-update`` for it into "poll now" (``on_update``; the worker
coalesces a burst into one pass).  The channel is an optimisation on top of
polling, never a replacement: events are best effort and never replayed, so

* after every (re)connect the worker compares the head once (``on_mode(True)``
  asks for a poll), and a slow safety poll keeps running while push works;
* whenever the channel is down (no service, service stopped, network gone,
  a half-dead socket) ``on_mode(False)`` puts the worker back on its normal
  poll interval, and the channel retries with a backoff of 1, 2, 4 … 60 s.

Discovery follows the desktop client: ``GET /notification/ping`` must
answer ``{"ret": "pong"}``.  A server that showed no service at start is
probed again only every :data:`ABSENT_RETRY` seconds (one request).  The
token comes from seahub (``repo-notification-jwt-token``, 72 h); it is
renewed on the open connection when it has less than :data:`RENEW_BEFORE`
seconds left, or at once after ``jwt-expired``.  The server pings every
second; :data:`PING_DEADLINE` seconds without one means the server stopped
serving this connection (it then keeps the socket open but sends nothing):
the channel reconnects.  Our own pings (``websockets`` keepalive) catch a
dead peer on servers that do not ping.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import random
import threading
import time
from collections.abc import Callable
from typing import Any

from websockets.exceptions import WebSocketException
from websockets.frames import Frame, Opcode
from websockets.sync.client import ClientConnection, connect

from ..engine.errors import OhsyncError
from .service_thread import ServiceThread

__all__ = ["PushChannel", "ABSENT_RETRY", "PING_DEADLINE", "RENEW_BEFORE", "RETRY_CAP"]

log = logging.getLogger(__name__)

#: Seconds between probes of a server that had no notification service at start.
ABSENT_RETRY = 600.0
#: Longest wait between two reconnect attempts, seconds.
RETRY_CAP = 60.0
#: Seconds without a ping from a server that pings before the connection counts as dead.
PING_DEADLINE = 5.0
#: Renew the token (and re-subscribe) when it expires within this many seconds.
RENEW_BEFORE = 3 * 3600.0
#: A connection that lived this long resets the reconnect backoff.
STABLE_AFTER = 30.0


class _ChannelDown(Exception):
    """The connection is no longer useful (no pings, token refused)."""


class _Watched(ClientConnection):
    """A client connection that notes when the server last pinged us."""

    last_ping: float | None = None

    def process_event(self, event: Any) -> None:  # websockets' hook, extended
        if isinstance(event, Frame) and event.opcode is Opcode.PING:
            self.last_ping = time.monotonic()
        super().process_event(event)


def _expiry(token: str) -> float:
    """The token's ``exp`` (Unix seconds); unreadable → a day from now.

    Only the claim is read, not verified (the notification server does
    that): the payload is the JWT's middle part, base64url without padding
    (RFC 7519 §7.2).  Decoded here rather than with PyJWT, whose import pulls
    in ``cryptography`` (about 11 MiB of a daemon that runs all day).
    """
    try:
        payload = token.split(".")[1]
        claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        return float(claims["exp"])
    except (IndexError, KeyError, TypeError, ValueError, binascii.Error):
        return time.time() + 86_400


class PushChannel:
    """One notification subscription for one library, kept alive in a thread.

    :param client: a :class:`~ohsync.engine.client.SeafileClient` (its
        ``notification_ping``, ``notification_token``, ``notification_url``;
        used from this channel's thread only for those calls).
    :param repo_id: the library to subscribe to.
    :param on_update: called with the new head commit id (40 hex, or "")
        for every ``repo-update`` of the library (channel thread).
    :param on_mode: called with True once subscribed, False when the channel
        went down (only on changes; channel thread).
    :param ping_deadline, retry_cap, absent_retry: see the module constants.
    """

    def __init__(self, client: Any, repo_id: str, *, on_update: Callable[[str], None],
                 on_mode: Callable[[bool], None], ping_deadline: float = PING_DEADLINE,
                 retry_cap: float = RETRY_CAP, absent_retry: float = ABSENT_RETRY) -> None:
        self._client = client
        self._repo_id = repo_id
        self._on_update = on_update
        self._on_mode = on_mode
        self._ping_deadline = ping_deadline
        self._retry_cap = retry_cap
        self._absent_retry = absent_retry
        self._stop = threading.Event()
        self._active = False
        self._seen = False  # the service answered at least once in this run
        self._attempt = 0
        self._said_absent = False
        # a daemon thread: stop() joins it, but a request to the server's notification service
        # (the probe, a token, the WebSocket's opening: 10 s and more) cannot be cut short
        self._thread = ServiceThread("ohsync-push", target=self._run, daemon=True)

    @property
    def active(self) -> bool:
        """True while subscribed (push mode)."""
        return self._active

    def start(self) -> None:
        """Start the channel's thread."""
        self._thread.start_thread()

    def stop(self, timeout: float = 5.0) -> None:
        """Close the connection and end the thread (waits at most ``timeout`` s)."""
        self._stop.set()
        self._thread.stop(timeout)

    # ----------------------------------------------------------------- the thread
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._round()
            except Exception:  # the channel must never take the daemon down
                log.exception("push notifications failed; polling instead")
                self._set_mode(False)
                self._stop.wait(self._retry_delay())

    def _round(self) -> None:
        """Probe, connect and serve one connection; then wait before the next round."""
        if not self._client.notification_ping():
            self._set_mode(False)
            if not self._seen and not self._said_absent:
                log.info("the server runs no notification service; changes are found by polling")
                self._said_absent = True
            self._stop.wait(self._retry_delay() if self._seen else self._absent_retry)
            return
        self._seen = True
        started = time.monotonic()
        try:
            self._session()
        except (WebSocketException, OSError, TimeoutError, OhsyncError, _ChannelDown, ValueError) as exc:
            if not self._stop.is_set():
                log.info("push notifications interrupted (%s: %s); polling until they are back",
                         type(exc).__name__, exc)
        self._set_mode(False)
        if time.monotonic() - started >= STABLE_AFTER:
            self._attempt = 0
        if not self._stop.is_set():
            self._stop.wait(self._retry_delay())

    def _retry_delay(self) -> float:
        self._attempt += 1
        return min(self._retry_cap, 2.0 ** (self._attempt - 1)) * random.uniform(0.8, 1.2)

    def _set_mode(self, active: bool) -> None:
        if active == self._active:
            return
        self._active = active
        log.info("notifications: %s", "push" if active else "polling")
        try:
            self._on_mode(active)
        except Exception:
            log.exception("reporting the notification mode failed")

    def _token(self) -> tuple[str, float]:
        token = self._client.notification_token(self._repo_id)
        return token, _expiry(token)

    def _subscribe(self, ws: ClientConnection, token: str) -> None:
        ws.send(json.dumps({"type": "subscribe",
                            "content": {"repos": [{"id": self._repo_id, "jwt_token": token}]}}))

    def _session(self) -> None:
        """One connection: subscribe, then relay events until it ends."""
        token, exp = self._token()
        with connect(self._client.notification_url(), proxy=None, compression=None, open_timeout=10,
                     ping_interval=2.0, ping_timeout=4.0, close_timeout=1.0,
                     create_connection=_Watched, user_agent_header="ohsync") as ws:
            self._subscribe(ws, token)
            self._set_mode(True)  # no acknowledgement exists: a refused token comes as jwt-expired
            refused_at = renewed_at = 0.0
            while not self._stop.is_set():
                try:
                    raw = ws.recv(timeout=0.5)
                except TimeoutError:
                    raw = None
                if raw is not None:
                    kind, content = _parse(raw)
                    if content.get("repo_id") == self._repo_id:
                        if kind == "repo-update":
                            commit = content.get("commit_id")
                            self._on_update(commit if isinstance(commit, str) else "")
                        elif kind == "jwt-expired":
                            if time.monotonic() - refused_at < 10:
                                raise _ChannelDown("the notification server refused a fresh token")
                            refused_at = time.monotonic()
                            token, exp = self._token()
                            self._subscribe(ws, token)
                last = getattr(ws, "last_ping", None)
                if last is not None and time.monotonic() - last > self._ping_deadline:
                    raise _ChannelDown(f"no ping from the server for {self._ping_deadline:g} s")
                if exp - time.time() < RENEW_BEFORE and time.monotonic() - renewed_at > 600:
                    renewed_at = time.monotonic()
                    token, exp = self._token()
                    self._subscribe(ws, token)


def _parse(raw: str | bytes) -> tuple[str, dict[str, Any]]:
    """``(type, content)`` of a server frame; unknown shapes give ``("", {})``."""
    try:
        msg = json.loads(raw)
    except ValueError:
        return "", {}
    if not isinstance(msg, dict) or not isinstance(msg.get("content"), dict):
        return "", {}
    return str(msg.get("type", "")), msg["content"]
