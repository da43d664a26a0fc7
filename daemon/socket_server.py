"""The server side of the daemon's JSON-RPC socket (DESIGN §7).

Owns the Unix socket: a ``0700`` folder, a ``0600`` socket, a refusal for
peers running as another user (``SO_PEERCRED``), one thread per connection,
one JSON object per line each way.  It knows no method itself: the daemon
passes a table ``name → handler(params) → result``.  Handlers raise
:class:`InvalidParams` (-32602) or :class:`CannotNow` (-32000); unknown names
get -32601.  ``subscribe`` is built in: the connection stays open and every
:meth:`SocketServer.publish`\\ ed event is pushed as a notification
``{"jsonrpc": "2.0", "method": "event", "params": {...}}``.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import select
import socket
import stat
import struct
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ohsync.daemon.rpc import (
    CANNOT_NOW,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    decode,
    encode,
)

__all__ = ["Handler", "InvalidParams", "CannotNow", "SocketInUse", "SocketServer", "peer_uid"]

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], Any]

_MAX_LINE = 1024 * 1024


class InvalidParams(Exception):
    """The request's params are missing or of the wrong type (-32602)."""


class CannotNow(Exception):
    """The daemon cannot do this in its current state (-32000)."""


class SocketInUse(Exception):
    """Another live process already answers on the socket path."""


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end, or None where the OS cannot say."""
    if hasattr(socket, "SO_PEERCRED"):
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, _gid = struct.unpack("3i", creds)
        return uid
    getpeereid = getattr(os, "getpeereid", None)  # not in the stdlib today; BSD/macOS builds may add it
    if getpeereid is not None:
        return int(getpeereid(sock.fileno())[0])
    return None


def _prepare_dir(directory: Path, *, own_dir: bool) -> None:
    """Create the socket's folder ``0700``; tighten it when it is ours."""
    if not directory.exists():
        old = os.umask(0o077)
        try:
            directory.mkdir(parents=True, exist_ok=True)
        finally:
            os.umask(old)
        os.chmod(directory, 0o700)
        return
    st = directory.stat()
    if own_dir and st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(directory, 0o700)


class SocketServer:
    """Listen on a Unix socket and dispatch JSON-RPC requests to handlers.

    :param path: the socket path.
    :param handlers: method name → handler; the handler gets the params
        object (``{}`` when absent) and returns a JSON-serialisable result.
    :param own_dir: the socket's folder is ours alone (the default
        location), so it may be chmod'ed ``0700`` even when it exists.
    :param allowed_uid: peers must run as this uid (default: ours).
    """

    def __init__(
        self,
        path: Path,
        handlers: Mapping[str, Handler],
        *,
        own_dir: bool = False,
        allowed_uid: int | None = None,
    ) -> None:
        self.path = path
        self._handlers = dict(handlers)
        self._own_dir = own_dir
        self._uid = os.getuid() if allowed_uid is None else allowed_uid
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self._subs_lock = threading.Lock()
        self._subscribers: list[queue.Queue[dict[str, Any] | None]] = []
        self._conns: dict[socket.socket, threading.Thread] = {}

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Bind and start accepting.

        :raises SocketInUse: a live daemon already answers at ``path``.
        :raises OSError: the socket cannot be created.
        """
        _prepare_dir(self.path.parent, own_dir=self._own_dir)
        if self.path.exists() or self.path.is_symlink():
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            probe.settimeout(2)
            try:
                probe.connect(str(self.path))
            except OSError:
                self.path.unlink()  # stale: nobody answers
            else:
                raise SocketInUse(f"another ohsync daemon already answers on {self.path}")
            finally:
                probe.close()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(str(self.path))
        finally:
            os.umask(old)
        os.chmod(self.path, 0o600)
        sock.listen(16)
        sock.settimeout(0.5)
        self._sock = sock
        self._thread = threading.Thread(target=self._accept_loop, name="ohsync-socket", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop accepting, end subscriptions, close connections, remove the socket file."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._subs_lock:
            for q in self._subscribers:
                q.put(None)
            conns = dict(self._conns)
        # end reading only: idle connections see EOF, an answer being written
        # (e.g. to `shutdown` itself) still reaches its client
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RD)
            except OSError:
                pass
        deadline = time.monotonic() + 3.0
        for thread in conns.values():
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        for conn, thread in conns.items():
            if thread.is_alive():
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        if self._sock is not None:
            self._sock.close()
            try:
                if self.path.exists():
                    self.path.unlink()
            except OSError:
                pass

    def add_handlers(self, handlers: Mapping[str, Handler]) -> None:
        """Answer more methods (services register theirs; call before :meth:`start`)."""
        self._handlers.update(handlers)

    def publish(self, params: dict[str, Any]) -> None:
        """Push ``params`` as an ``event`` notification to every subscriber."""
        with self._subs_lock:
            for q in self._subscribers:
                q.put(params)

    @property
    def subscriber_count(self) -> int:
        with self._subs_lock:
            return len(self._subscribers)

    # ----------------------------------------------------------------- connections

    def _accept_loop(self) -> None:
        assert self._sock is not None
        while not self._stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                if self._stopping.is_set():
                    return
                log.exception("socket accept failed")
                continue
            try:
                uid = peer_uid(conn)
            except OSError:
                uid = None
            if uid is not None and uid != self._uid:
                log.warning("refused a socket connection from uid %s", uid)
                conn.close()
                continue
            threading.Thread(target=self._serve, args=(conn,), name="ohsync-socket-conn", daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with self._subs_lock:
            self._conns[conn] = threading.current_thread()
        conn.settimeout(None)
        try:
            reader = conn.makefile("rb")
            while not self._stopping.is_set():
                line = reader.readline(_MAX_LINE + 1)
                if not line:
                    return
                if not line.strip():
                    continue
                try:
                    msg = decode(line)
                except ValueError as exc:
                    conn.sendall(encode(_error(None, PARSE_ERROR, f"parse error: {exc}")))
                    continue
                if msg.get("method") == "subscribe":
                    self._subscribe(conn, msg.get("id"))
                    return
                reply = self._dispatch(msg)
                if reply is not None:
                    conn.sendall(encode(reply))
        except OSError:
            return
        finally:
            with self._subs_lock:
                self._conns.pop(conn, None)
            try:
                conn.close()
            except OSError:
                pass

    def _dispatch(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        req_id = msg.get("id")
        method = msg.get("method")
        if not isinstance(method, str):
            return _error(req_id, -32600, "invalid request: no method")
        params = msg.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return _error(req_id, INVALID_PARAMS, "params must be an object")
        handler = self._handlers.get(method)
        if handler is None:
            return _error(req_id, METHOD_NOT_FOUND, f"unknown method: {method}")
        try:
            result = handler(params)
        except InvalidParams as exc:
            return _error(req_id, INVALID_PARAMS, str(exc) or "invalid params")
        except CannotNow as exc:
            return _error(req_id, CANNOT_NOW, str(exc))
        except Exception as exc:  # noqa: BLE001 - answer, log, keep serving
            log.exception("socket method %s failed", method)
            return _error(req_id, INTERNAL_ERROR, f"internal error: {type(exc).__name__}")
        if "id" not in msg:
            return None  # a notification from the client: no answer
        try:
            json.dumps(result)
        except (TypeError, ValueError):
            log.error("socket method %s returned a non-JSON result", method)
            return _error(req_id, INTERNAL_ERROR, "internal error: result not serialisable")
        return {"jsonrpc": "2.0", "id": req_id, "result": result}

    def _subscribe(self, conn: socket.socket, req_id: Any) -> None:
        q: queue.Queue[dict[str, Any] | None] = queue.Queue()
        with self._subs_lock:
            self._subscribers.append(q)
        try:
            conn.sendall(encode({"jsonrpc": "2.0", "id": req_id, "result": {"subscribed": True}}))
            while not self._stopping.is_set():
                try:
                    event = q.get(timeout=1.0)
                except queue.Empty:
                    readable, _, _ = select.select([conn], [], [], 0)
                    if readable and not conn.recv(4096, socket.MSG_PEEK):
                        return  # the client hung up
                    continue
                if event is None:
                    return
                conn.sendall(encode({"jsonrpc": "2.0", "method": "event", "params": event}))
        except OSError:
            return
        finally:
            with self._subs_lock:
                if q in self._subscribers:
                    self._subscribers.remove(q)


def _error(req_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": req_id, "error": {"code": code, "message": message}}
