"""The local page's HTTP server, one thread owned by the daemon.

:class:`PanelServer` serves :class:`~ohsync.daemon.panel.routes.PanelApp`
with werkzeug's threaded WSGI server bound to ``127.0.0.1`` only, on the
port of the config's ``panel_port`` (0: a free port picked at each start).
Its thread runs ``serve_forever``; each request gets a short-lived thread
of its own (an open event stream keeps its thread until the page closes or
the server stops).  :meth:`PanelServer.start` writes the secret
(``daemon/panel/auth.py``) beside the socket; :meth:`PanelServer.stop` ends
the event streams, the server and removes the secret.

Request lines are never logged (werkzeug's access log is off): only
failures, without the request's query.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from ..service_thread import ServiceThread
from .auth import PanelAuth, write_secret
from .events import EventHub
from .routes import Call, PanelApp

__all__ = ["PanelServer", "HOST"]

log = logging.getLogger(__name__)

#: The only address the page listens on.
HOST = "127.0.0.1"


class _QuietHandler(WSGIRequestHandler):
    """No access log (a request line could name a path); errors without the request."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return

    def log_error(self, format: str, *args: Any) -> None:
        log.debug("local page: a request failed (%s)", type(self).__name__)

    def log_message(self, format: str, *args: Any) -> None:
        return


class PanelServer:
    """The local page of one daemon.

    :param secret_file: where the secret goes (beside the socket, in its ``0700`` folder:
        :func:`~ohsync.daemon.panel.auth.secret_path`).
    :param port: the TCP port (0: any free one).
    :param call: runs a method of the daemon's table (``MethodTable.answer`` shape).
    :param versions: a conflict's two versions (``versions(path, mirror)``).
    :param read: one version's bytes (``read(path, side, mirror)``).
    :param health: the doctor's checks (``{"ok", "checks"}``).
    """

    def __init__(self, secret_file: Path, port: int, call: Call,
                 versions: Callable[[str, str | None], dict[str, Any]],
                 read: Callable[[str, str, str | None], bytes | None],
                 health: Callable[[], dict[str, Any]]) -> None:
        self.secret_file = secret_file
        self._port = port
        self._call = call
        self._versions = versions
        self._read = read
        self._health = health
        self.hub = EventHub()
        self._stopping = threading.Event()
        self._server: BaseWSGIServer | None = None
        self._thread: ServiceThread | None = None
        self._secret: str | None = None
        self._wrote = False
        self.auth: PanelAuth | None = None

    @property
    def running(self) -> bool:
        """True while the server thread serves."""
        return self._thread is not None and self._thread.thread_alive()

    @property
    def port(self) -> int:
        """The port it listens on (0 before :meth:`start`)."""
        return int(self._server.server_address[1]) if self._server is not None else 0

    @property
    def address(self) -> str:
        """``http://127.0.0.1:<port>/`` (without the secret)."""
        return f"http://{HOST}:{self.port}/"

    def login_url(self) -> str:
        """The address to open once: the secret rides in the fragment, which the
        browser never sends (the page posts it for a session cookie)."""
        return f"http://{HOST}:{self.port}/auth#{self._secret}"

    def publish(self, event: dict[str, Any]) -> None:
        """A daemon event for the open event streams (any thread)."""
        self.hub.publish(event)

    def start(self) -> None:
        """Write the secret, bind ``127.0.0.1:<port>`` and serve on the server's thread.

        :raises OSError: the port is taken or the secret cannot be written.
        """
        self._secret = write_secret(self.secret_file)
        self._wrote = True
        self.auth = PanelAuth(self._secret)
        app = PanelApp(self.auth, self._call, self.hub, self._versions, self._read, self._health,
                       self._stopping.is_set)
        # bound here, not by werkzeug, which ends the process on a port in use
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind((HOST, self._port))
            listener.listen(64)
            self._server = make_server(HOST, self._port, app, threaded=True, request_handler=_QuietHandler,
                                       fd=listener.fileno())
        except BaseException:
            self._remove_secret()
            raise
        finally:
            listener.close()  # the server holds its own duplicate
        # a request's thread is werkzeug's (socketserver.ThreadingMixIn); daemon threads, since
        # a browser that keeps an event stream or a slow upload open would hold the exit
        self._server.daemon_threads = True  # type: ignore[attr-defined]
        self.auth.port = self.port
        server = self._server
        # not a daemon thread: serve_forever polls every 0.2 s and returns on shutdown(), which stop() calls
        self._thread = ServiceThread("ohsync-panel", target=lambda: server.serve_forever(poll_interval=0.2))
        self._thread.start_thread()
        log.info("local page at %s (open it with `ohsync panel`)", self.address)

    def stop(self) -> None:
        """End the event streams, stop serving, remove the secret."""
        self._stopping.set()
        self.hub.close()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.stop(5)
        self._remove_secret()

    def _remove_secret(self) -> None:
        if self._wrote:
            self._wrote = False
            self.secret_file.unlink(missing_ok=True)
