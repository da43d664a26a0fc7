"""The socket server's per-connection record.

:class:`Conn` is one client connection as the server's selector thread
sees it (buffers, whether a request is in the handler pool, whether it
subscribed).  Used by ``daemon/socket/server.py`` only.
"""

from __future__ import annotations

import socket

__all__ = ["Conn"]


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
