"""The socket server's two small parts: its handler thread pool and its per-connection record.

:class:`Pool` runs request handlers on a few daemon threads (a handler may
block, e.g. ``wait``, and must never hold up the process's exit);
:class:`Conn` is one client connection as the server's selector thread
sees it (buffers, whether a request is in the pool, whether it subscribed).
Both are used by ``daemon/socket/server.py`` only.
"""

from __future__ import annotations

import logging
import queue
import socket
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["Conn", "Pool"]

log = logging.getLogger("ohsync.daemon.socket.server")


class Pool:
    """A fixed number of daemon threads running submitted calls in order.

    Daemon threads, unlike ``concurrent.futures``' workers, never hold up the
    process's exit behind a handler that still blocks (e.g. ``wait``).
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._jobs: queue.SimpleQueue[tuple[Callable[..., None], tuple[Any, ...]] | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        self._pending = 0  # calls queued or running
        self._lock = threading.Lock()
        self._closed = False

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        """Queue ``fn(*args)``; a thread is added while calls outnumber threads (up to ``size``).

        :raises RuntimeError: the pool is shut down.
        """
        with self._lock:
            if self._closed:
                raise RuntimeError("the pool is shut down")
            self._pending += 1
            if self._pending > len(self._threads) and len(self._threads) < self._size:
                t = threading.Thread(target=self._work, name=f"ohsync-rpc-{len(self._threads)}", daemon=True)
                self._threads.append(t)
                t.start()
        self._jobs.put((fn, args))

    def _work(self) -> None:
        while True:
            job = self._jobs.get()
            if job is None:
                return
            fn, args = job
            try:
                fn(*args)
            except BaseException:  # the callable reports its own failures
                log.exception("a socket handler thread failed")
            with self._lock:
                self._pending -= 1

    def shutdown(self) -> None:
        """Refuse new calls and let the threads end once the queued ones ran."""
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._jobs.put(None)


class Conn:
    """One client connection as the selector thread sees it."""

    __slots__ = ("sock", "inbuf", "outbuf", "busy", "subscriber", "closing", "dead", "skipping")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.inbuf = bytearray()
        self.outbuf = bytearray()
        self.busy = False  # a request of this connection is in the handler pool
        self.subscriber = False
        self.closing = False  # close once the output is written
        self.dead = False
        self.skipping = False  # inside a line over the limit (answered): drop bytes up to its newline
