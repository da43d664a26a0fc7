"""The daemon's Unix socket: JSON-RPC 2.0 over newline-delimited JSON.

``server.py`` is the transport (:class:`~.server.SocketServer`: the
listener, one selector thread, the handler pool); ``conn.py`` one
connection's buffers and the pool; ``methods.py`` turns a request into its
answer (:class:`~.methods.MethodTable`); ``dir.py`` makes the socket's
private folder.  The wire format and the client are ``daemon/protocol.py``,
which the tray and the CLI import without this package.
"""
