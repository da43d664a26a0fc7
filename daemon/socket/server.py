"""The server side of the daemon's JSON-RPC socket (docs/architecture.md §7).

Owns the Unix socket: a ``0700`` folder that must be ours alone
(``daemon/socket/dir.py``), a ``0600`` socket, a refusal for peers running
as another user (``SO_PEERCRED``), one JSON object per line each way.

One selector thread reads and writes every connection, so idle connections
and subscribers cost a file descriptor and a few bytes each, never a thread.
Requests run on a small bounded pool of handler threads (a
``concurrent.futures`` executor; a handler may block, e.g. ``wait``, each
up to its own timeout), one request at a time per connection, answers in
order; the quick methods (``status``, ``ping``: see ``add_handlers``) are
answered on the selector thread itself, so that an answer costs one thread
wake-up, not three, while a sync thread keeps the GIL busy.

No request can knock the socket out: every line gets a JSON-RPC answer and
the connection is served on — -32700 for a line that is not JSON or not
UTF-8, -32600 for one that is not a request (an array, a number, a method
that is not a string, an id of the wrong type), nested deeper than
:data:`~ohsync.daemon.protocol.MAX_DEPTH` (the parser never sees it) or over
:data:`~ohsync.daemon.protocol.MAX_REQUEST` bytes (skipped unread up to its
newline), -32602 for params that are not an object.  A failure of the
selector thread itself (accepting, one connection's step) is logged and
costs at most that connection; the socket is served again.

It knows no method itself: the daemon passes a table ``name →
handler(params) → result``, answered by ``daemon/socket/methods.py``
(:class:`InvalidParams` -32602, :class:`CannotNow` -32000, an ohsync error
with the sentence of its one classification).  ``subscribe`` is
built in: the connection stays open and every :meth:`SocketServer.publish`\\
ed event is pushed as a notification ``{"jsonrpc": "2.0", "method": "event",
"params": {...}}``; a subscriber that does not read is dropped once
:data:`MAX_BACKLOG` bytes wait for it.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import queue
import selectors
import socket
import threading
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from pathlib import Path
from typing import Any

from ..protocol import (
    EVENT,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    MAX_REQUEST,
    PARSE_ERROR,
    Method,
    NotAnObject,
    TooDeep,
    decode,
    encode,
    peer_uid,
)
from ..service_thread import ServiceThread
from .conn import Conn as _Conn
from .dir import UnsafeSocketDir, prepare_socket_dir
from .methods import CannotNow, Handler, InvalidParams, MethodTable, error_answer, request_problem

__all__ = ["Handler", "InvalidParams", "CannotNow", "SocketInUse", "SocketServer", "UnsafeSocketDir",
           "peer_uid", "HANDLER_THREADS", "MAX_BACKLOG"]

log = logging.getLogger(__name__)

#: Threads running request handlers (the selector thread is one more).
HANDLER_THREADS = 8
#: Bytes of unsent events after which a subscriber that does not read is dropped.
MAX_BACKLOG = 4 * 1024 * 1024
_READ_CHUNK = 65536
_STOP_GRACE = 3.0  # seconds stop() lets answers in flight reach their clients
_RESTART_PAUSE = 0.2  # seconds between a failure of the selector thread and serving again


class SocketInUse(Exception):
    """Another live process already answers on the socket path."""


class SocketServer:
    """Listen on a Unix socket and dispatch JSON-RPC requests to handlers.

    :param path: the socket path.
    :param handlers: method name → handler; the handler gets the params
        object (``{}`` when absent) and returns a JSON-serialisable result.
    :param own_dir: kept for callers of the earlier interface; the folder
        is checked the same way either way (ours, ``0700``).
    :param allowed_uid: peers must run as this uid (default: ours).
    :param handler_threads: size of the handler pool.
    """

    def __init__(
        self,
        path: Path,
        handlers: Mapping[str, Handler],
        *,
        own_dir: bool = False,
        allowed_uid: int | None = None,
        handler_threads: int = HANDLER_THREADS,
    ) -> None:
        self.path = path
        self._methods = MethodTable(handlers)
        self._uid = os.getuid() if allowed_uid is None else allowed_uid
        self._handler_threads = handler_threads
        self._sock: socket.socket | None = None
        self._thread: ServiceThread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._running: set[Future[None]] = set()  # requests in the pool, until they finished
        self._running_lock = threading.Lock()
        self._selector: selectors.BaseSelector | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._stopping = threading.Event()
        self._inbox: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()  # to the selector thread
        self._conns: dict[int, _Conn] = {}  # fd → connection; selector thread only
        self._subs_lock = threading.Lock()
        self._subscribers = 0
        self._accept_paused_until = 0.0

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Bind and start serving.

        :raises UnsafeSocketDir: the socket's folder is not ours alone.
        :raises SocketInUse: a live daemon already answers at ``path``.
        :raises OSError: the socket cannot be created.
        """
        prepare_socket_dir(self.path.parent)
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
        sock.listen(128)
        sock.setblocking(False)
        self._sock = sock
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector = selectors.DefaultSelector()
        self._selector.register(sock, selectors.EVENT_READ, "listen")
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        self._pool = ThreadPoolExecutor(max_workers=self._handler_threads, thread_name_prefix="ohsync-rpc")
        # not a daemon thread: it waits only in select() with a wake-up socket, so stop() joins it
        self._thread = ServiceThread("ohsync-socket", target=self._loop)
        self._thread.start_thread()

    def stop(self) -> None:
        """Stop accepting, let answers in flight out (up to 3 s), end
        subscriptions, close every connection, remove the socket file."""
        self._stopping.set()
        self._wake()
        if self._thread is not None:
            self._thread.stop(timeout=_STOP_GRACE + 2)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            with self._running_lock:
                running = set(self._running)
            # a handler still running ends by its own timeout (the workers answered their waits)
            _done, late = wait_futures(running, timeout=_STOP_GRACE)
            if late:
                log.warning("%d socket request(s) still running at stop; they end by their own timeouts",
                            len(late))
            else:
                self._pool.shutdown(wait=True)  # nothing runs: joins the idle pool threads at once
        if self._sock is not None:
            try:
                if self.path.exists():
                    self.path.unlink()
            except OSError:
                pass

    def add_handlers(self, handlers: Mapping[str, Handler], *, quick: Iterable[str] = ()) -> None:
        """Answer more methods (services register theirs; call before :meth:`start`).

        :param quick: names among ``handlers`` run on the selector thread:
            only handlers that read facts in memory and never block.
        """
        self._methods.add(handlers, quick=quick)

    def stamp_answers(self, **members: Any) -> None:
        """Add ``members`` (JSON values) to every answer, beside ``result``/``error``
        (:meth:`~ohsync.daemon.socket.methods.MethodTable.stamp`)."""
        self._methods.stamp(**members)

    def publish(self, params: dict[str, Any]) -> None:
        """Push ``params`` as an ``event`` notification to every subscriber (any thread)."""
        if self.subscriber_count:
            self._inbox.put(("event", encode({"jsonrpc": "2.0", "method": EVENT, "params": params})))
            self._wake()

    @property
    def subscriber_count(self) -> int:
        with self._subs_lock:
            return self._subscribers

    @property
    def connection_count(self) -> int:
        """Open client connections (any thread; approximate while it changes)."""
        return len(self._conns)

    # ----------------------------------------------------------------- the selector thread

    def _wake(self) -> None:
        if self._wake_w is not None:
            with contextlib.suppress(BlockingIOError, OSError):  # a wake-up is already pending, or we are closed
                self._wake_w.send(b"\0")

    def _loop(self) -> None:
        """The selector thread: serve until :meth:`stop`; whatever fails
        unexpectedly is logged and the socket is served again (a live daemon
        whose socket died would look "not running" to every client)."""
        try:
            while not self._serve():
                time.sleep(_RESTART_PAUSE)
                if not self._rebuild_selector():
                    return
        finally:
            self._close_all()

    def _serve(self) -> bool:
        """Serve events; True once stopped, False after an unexpected failure (logged)."""
        assert self._selector is not None and self._sock is not None
        stop_deadline: float | None = None
        try:
            while True:
                if self._stopping.is_set() and stop_deadline is None:
                    stop_deadline = time.monotonic() + _STOP_GRACE
                    self._stop_accepting()
                if stop_deadline is not None and (time.monotonic() >= stop_deadline or self._drained()):
                    return True
                self._resume_accepting()
                for key, events in self._selector.select(timeout=0.5):
                    self._event(key.data, events)
        except Exception:  # never die: clients would see no daemon
            log.exception("the socket server failed; serving again")
            return False

    def _event(self, what: Any, events: int) -> None:
        """Handle one ready file object; a failure costs at most its own connection."""
        try:
            if what == "listen":
                self._accept()
            elif what == "wake":
                self._take_inbox()
            else:
                conn = what
                if events & selectors.EVENT_READ and not conn.dead:
                    self._read(conn)
                if events & selectors.EVENT_WRITE and not conn.dead:
                    self._write(conn)
        except Exception:  # log, drop what failed, serve the rest
            if isinstance(what, _Conn):
                log.exception("a socket connection failed; it was closed, the others are served on")
                try:
                    self._close(what)
                except Exception:  # closing is best effort here
                    log.exception("closing the failed socket connection failed")
            else:
                log.exception("the socket server's %s step failed; serving on", what)

    def _rebuild_selector(self) -> bool:
        """A fresh selector over the listener, the wake-up socket and the live
        connections, after a failure that may have left the old one broken.

        :returns: False when there is nothing left to serve (stopping, closed).
        """
        if self._wake_r is None or self._sock is None:
            return False
        try:
            if self._selector is not None:
                self._selector.close()
        except Exception:  # noqa: BLE001, S110 - the old one is dropped either way
            pass
        selector = selectors.DefaultSelector()
        self._selector = selector
        try:
            selector.register(self._wake_r, selectors.EVENT_READ, "wake")
            if self._sock.fileno() >= 0 and not self._accept_paused_until and not self._stopping.is_set():
                selector.register(self._sock, selectors.EVENT_READ, "listen")
        except (OSError, ValueError):
            log.exception("the socket server cannot listen again")
            return False
        for fd, conn in list(self._conns.items()):
            try:
                selector.register(conn.sock, selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.outbuf else 0),
                                  conn)
            except (OSError, ValueError, KeyError):
                conn.dead = True
                self._conns.pop(fd, None)
                if conn.subscriber:
                    with self._subs_lock:
                        self._subscribers -= 1
        return True

    def _drained(self) -> bool:
        """True once no answer is pending (stop may finish)."""
        self._take_inbox()
        return not any(c.busy or (c.outbuf and not c.subscriber) for c in self._conns.values())

    def _stop_accepting(self) -> None:
        assert self._selector is not None and self._sock is not None
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(self._sock)
        self._sock.close()
        for conn in list(self._conns.values()):
            if conn.subscriber or not (conn.busy or conn.outbuf):
                self._close(conn)  # idle ones and subscriptions end now
            else:
                conn.inbuf.clear()  # no further requests; the one in flight is answered

    def _resume_accepting(self) -> None:
        if self._accept_paused_until and time.monotonic() >= self._accept_paused_until and not self._stopping.is_set():
            assert self._selector is not None and self._sock is not None
            self._accept_paused_until = 0.0
            self._selector.register(self._sock, selectors.EVENT_READ, "listen")

    def _accept(self) -> None:
        assert self._sock is not None and self._selector is not None
        for _ in range(64):  # take a burst, then serve the others
            try:
                sock, _ = self._sock.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    # out of descriptors: stop looking at the listener for a moment instead of spinning
                    log.warning("socket connections refused for a moment: %s", exc.strerror)
                    self._selector.unregister(self._sock)
                    self._accept_paused_until = time.monotonic() + 0.5
                    return
                log.warning("socket accept failed: %s", exc)
                return
            try:
                self._admit(sock)
            except Exception:  # one connection lost, the listener serves on
                log.exception("taking a socket connection failed; it was closed")
                sock.close()

    def _admit(self, sock: socket.socket) -> None:
        """Serve an accepted connection, unless its peer runs as another user."""
        assert self._selector is not None
        try:
            uid = peer_uid(sock)
        except OSError:
            uid = None
        if uid is not None and uid != self._uid:
            log.warning("refused a socket connection from uid %s", uid)
            sock.close()
            return
        sock.setblocking(False)
        conn = _Conn(sock)
        self._selector.register(sock, selectors.EVENT_READ, conn)
        self._conns[sock.fileno()] = conn

    def _take_inbox(self) -> None:
        assert self._wake_r is not None
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, OSError):
            pass
        while True:
            try:
                kind, arg = self._inbox.get_nowait()
            except queue.Empty:
                return
            if kind == "reply":
                conn, data = arg
                conn.busy = False
                if conn.dead:
                    continue
                if data:
                    self._send(conn, data)
                self._next_request(conn)
            elif kind == "event":
                for conn in list(self._conns.values()):
                    if conn.subscriber and not conn.dead:
                        if len(conn.outbuf) > MAX_BACKLOG:
                            log.warning("dropped a socket subscriber that stopped reading")
                            self._close(conn)
                        else:
                            self._send(conn, arg)

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(_READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            self._close(conn)
            return
        if not data:
            if conn.busy or conn.outbuf:
                conn.closing = True  # answer what was asked, then close
                conn.inbuf.clear()
                self._watch(conn)
            else:
                self._close(conn)
            return
        if conn.subscriber or conn.closing:
            return  # a subscriber only listens
        conn.inbuf += data
        if len(conn.inbuf) > MAX_REQUEST * 4 and conn.busy:
            self._refuse(conn, f"request too large (more than {MAX_REQUEST} bytes)")
            return
        self._next_request(conn)

    def _next_request(self, conn: _Conn) -> None:
        """Start the next complete request line of ``conn``, if it is not busy.

        Every line gets an answer and the connection is served on: a line
        over :data:`MAX_REQUEST` bytes is answered -32600 and skipped up to
        its newline, unread.
        """
        while not conn.busy and not conn.dead and not conn.closing:
            end = conn.inbuf.find(b"\n")
            if conn.skipping:
                if end < 0:
                    conn.inbuf.clear()
                    return
                del conn.inbuf[:end + 1]
                conn.skipping = False
                continue
            if end < 0:
                if len(conn.inbuf) > MAX_REQUEST:
                    self._too_large(conn)
                    conn.inbuf.clear()
                return
            if end > MAX_REQUEST:
                self._too_large(conn)
                continue
            line = bytes(conn.inbuf[:end + 1])
            del conn.inbuf[:end + 1]
            if not line.strip():
                continue
            if self._stopping.is_set():
                return
            try:
                msg = decode(line)
            except (TooDeep, NotAnObject) as exc:
                self._send(conn, encode(error_answer(None, INVALID_REQUEST, f"invalid request: {exc}")))
                continue
            except ValueError as exc:  # not JSON, not UTF-8
                self._send(conn, encode(error_answer(None, PARSE_ERROR, f"parse error: {exc}")))
                continue
            invalid = request_problem(msg) is not None
            if not invalid and msg.get("method") == Method.SUBSCRIBE:
                conn.subscriber = True
                conn.inbuf.clear()
                with self._subs_lock:
                    self._subscribers += 1
                self._send(conn, encode({"jsonrpc": "2.0", "id": msg.get("id"), "result": {"subscribed": True}}))
                return
            if invalid or self._methods.is_quick(msg.get("method")):
                reply = self._methods.answer(msg)  # answers its own errors
                if reply is not None:
                    self._send(conn, encode(reply))
                continue
            assert self._pool is not None
            conn.busy = True
            try:
                future = self._pool.submit(self._run_request, conn, msg)
            except RuntimeError:  # the pool is shut down: we are stopping
                conn.busy = False
                return
            with self._running_lock:
                self._running.add(future)
            future.add_done_callback(self._ran)

    def _too_large(self, conn: _Conn) -> None:
        """Answer -32600 to a line over the limit; the rest of it is skipped unread."""
        log.warning("socket request refused: over %d bytes", MAX_REQUEST)
        conn.skipping = True
        self._send(conn, encode(error_answer(None, INVALID_REQUEST,
                                             f"request too large (more than {MAX_REQUEST} bytes)")))

    def _ran(self, future: Future[None]) -> None:
        with self._running_lock:
            self._running.discard(future)

    def _run_request(self, conn: _Conn, msg: dict[str, Any]) -> None:
        """In a handler thread: dispatch, hand the answer to the selector thread."""
        try:
            reply = self._methods.answer(msg)
            data = encode(reply) if reply is not None else b""
        except BaseException:  # the connection must never stay busy
            log.exception("answering a socket request failed")
            data = encode(error_answer(msg.get("id"), INTERNAL_ERROR, "internal error"))
        self._inbox.put(("reply", (conn, data)))
        self._wake()

    def _refuse(self, conn: _Conn, message: str) -> None:
        """Answer -32600 and close: the rest of the stream cannot be trusted."""
        log.warning("socket request refused: %s", message)
        conn.inbuf.clear()
        conn.closing = True
        self._send(conn, encode(error_answer(None, INVALID_REQUEST, message)))

    def _send(self, conn: _Conn, data: bytes) -> None:
        conn.outbuf += data
        self._write(conn)

    def _write(self, conn: _Conn) -> None:
        if conn.outbuf:
            try:
                sent = conn.sock.send(conn.outbuf)
            except BlockingIOError:
                sent = 0
            except OSError:
                self._close(conn)
                return
            del conn.outbuf[:sent]
        if not conn.outbuf and conn.closing and not conn.busy:
            self._close(conn)
            return
        self._watch(conn)

    def _watch(self, conn: _Conn) -> None:
        assert self._selector is not None
        if conn.dead:
            return
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if conn.outbuf else 0)
        try:
            if self._selector.get_key(conn.sock).events != events:
                self._selector.modify(conn.sock, events, conn)
        except (KeyError, ValueError):
            pass

    def _close(self, conn: _Conn) -> None:
        if conn.dead:
            return
        conn.dead = True
        assert self._selector is not None
        try:
            fd = conn.sock.fileno()
            self._selector.unregister(conn.sock)
        except (KeyError, ValueError):
            fd = -1
        self._conns.pop(fd, None)
        if conn.subscriber:
            with self._subs_lock:
                self._subscribers -= 1
        with contextlib.suppress(OSError):
            conn.sock.close()

    def _close_all(self) -> None:
        for conn in list(self._conns.values()):
            self._close(conn)
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        for s in (self._wake_r, self._wake_w):
            if s is not None:
                s.close()
        self._wake_w = None
        if self._selector is not None:
            self._selector.close()
