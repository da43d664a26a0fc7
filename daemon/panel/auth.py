"""Who may use the local page: the secret, the session cookie, Host and Origin.

The page is locked to the user who runs the daemon:

* **The secret** is 32 random bytes (URL-safe text) in a ``0600`` file
  beside the socket (``ohsync-panel.secret`` beside ``ohsync.sock``: the
  socket's name without its extension, then ``-panel.secret``; the folder
  ``0700`` and ours alone, ``daemon/socket/dir.py``), written anew at every
  start.  Only
  the user's own processes can read it (the file, or the socket's ``panel``
  method, which answers only peers of the same uid).
* **The address** ``http://127.0.0.1:<port>/auth#<secret>`` carries it in the
  fragment, which a browser never sends: the page at ``/auth`` posts it to
  ``/api/session`` and gets a session cookie (``HttpOnly``,
  ``SameSite=Strict``, ``Path=/``, a fresh random value per session), then
  drops the fragment from the address.  The secret never appears in a
  request line, a ``Referer`` or a log line.
* **The session has two halves**: the cookie, and a token that
  ``/api/session`` answers and the page keeps in its origin's
  ``localStorage``, sending it with every ``/api/`` request
  (:data:`HEADER`; the event stream and an image, which the browser
  fetches without our headers, as their ``session`` query parameter).  A browser sends cookies to every port of
  127.0.0.1, so a page served by another local program (another user's, on
  a shared machine) could collect the cookie; ``localStorage`` belongs to
  this port's origin alone, so the token stays here.
* **Every request** but the login page and its script needs the cookie
  (``/api/`` also the token; else 403); a ``Host`` other than ``127.0.0.1:<port>`` or
  ``localhost:<port>`` gets 403 (DNS rebinding); a request that changes
  something (any method but GET/HEAD) also needs an ``Origin`` of the page
  itself.  No CORS header is ever sent.
"""

from __future__ import annotations

import hmac
import os
import secrets
import threading
from pathlib import Path

__all__ = ["COOKIE", "HEADER", "PanelAuth", "secret_path", "write_secret"]

#: The session cookie's name.
COOKIE = "ohsync_panel"
#: The header carrying the session's token (the half no other port's page can read).
HEADER = "X-Ohsync-Session"
#: Most sessions kept at once (the oldest is forgotten first).
MAX_SESSIONS = 64


def secret_path(socket_path: Path) -> Path:
    """Where the page's secret lives for the daemon of ``socket_path``:
    ``<dir>/<socket name without extension>-panel.secret``, so two daemons
    with sockets in one folder keep their own."""
    return socket_path.with_name(f"{socket_path.stem}-panel.secret")


def write_secret(path: Path) -> str:
    """Write a fresh secret into ``path`` (mode ``0600``, created exclusively
    after removing any old file, so no one else's file is reused).

    :returns: the secret.
    :raises OSError: the file cannot be written.
    """
    secret = secrets.token_urlsafe(32)
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        os.write(fd, (secret + "\n").encode("ascii"))
    finally:
        os.close(fd)
    return secret


class PanelAuth:
    """The secret, the live sessions and the Host/Origin rules of one page.

    :param secret: the secret of :func:`write_secret`.
    """

    def __init__(self, secret: str) -> None:
        self._secret = secret
        self._sessions: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self.port = 0

    def hosts(self) -> tuple[str, ...]:
        """The ``Host`` values the page answers."""
        return (f"127.0.0.1:{self.port}", f"localhost:{self.port}")

    def origins(self) -> tuple[str, ...]:
        """The ``Origin`` values of the page itself."""
        return tuple(f"http://{h}" for h in self.hosts())

    def host_ok(self, host: str | None) -> bool:
        """True for ``127.0.0.1:<port>`` and ``localhost:<port>`` (any case)."""
        return bool(host) and (host or "").lower() in self.hosts()

    def origin_ok(self, origin: str | None) -> bool:
        """True when ``origin`` is the page's own."""
        return bool(origin) and (origin or "").lower() in self.origins()

    def exchange(self, offered: str) -> tuple[str, str] | None:
        """A new session for the right secret (compared in constant time), else None.

        :returns: ``(cookie, token)``: the cookie's value and the token the page
            sends in :data:`HEADER`.
        """
        if not isinstance(offered, str) or not hmac.compare_digest(offered.encode(), self._secret.encode()):
            return None
        session = (secrets.token_urlsafe(32), secrets.token_urlsafe(32))
        with self._lock:
            self._sessions.append(session)
            del self._sessions[:-MAX_SESSIONS]
        return session

    def session_ok(self, cookie: str | None, token: str | None = None, *, cookie_only: bool = False) -> bool:
        """True for the cookie of a live session and, unless ``cookie_only``
        (the page itself, which holds no data), that session's token."""
        if not cookie or (not cookie_only and not token):
            return False
        with self._lock:
            sessions = list(self._sessions)
        return any(hmac.compare_digest(cookie.encode(), c.encode())
                   and (cookie_only or hmac.compare_digest((token or "").encode(), t.encode()))
                   for c, t in sessions)
