"""The daemon's socket protocol in one module: framing, method names, status shape, client.

JSON-RPC 2.0 over a Unix socket, one JSON object per line (UTF-8,
``\\n``-terminated), docs/architecture.md §7.  Everything both ends must agree
on lives here, and nothing else of ohsync is imported, so the tray (a client
of the socket and nothing more) imports only this module of the daemon:

* framing: :func:`encode`, :func:`decode` (with the :data:`MAX_DEPTH` guard),
  :func:`peer_uid`, :func:`default_socket_path`, the limits and error codes;
* method names: :class:`Method` (``Method.STATUS`` is ``"status"``…), the
  served names :data:`DAEMON_METHODS` and :data:`MEMORY_METHODS`, the
  notification method :data:`EVENT` and its ``type`` values :class:`Event`;
* the status object's shape (§7.2): :data:`STATUS_KEYS` (the contract keys,
  in order), :data:`MIRROR_KEYS` (one item of ``mirrors`` per configured
  mirror), :data:`STATES` and :class:`State`, :func:`combine_status` (the
  daemon's answer from each mirror's own status object), :func:`worst_state`
  (the tray's icon over several mirrors), the ``mirror`` selector param
  :data:`MIRROR_PARAM`;
* the client: :class:`RpcClient`, :class:`DaemonNotRunning`, :class:`RpcError`.

The server side lives in ``daemon/socket/server.py``.  Error codes: -32700
not JSON (or not UTF-8), -32600 not a request (not an object, a method that
is not a string, an id that is not a string, number or null), a request too
large (over :data:`MAX_REQUEST` bytes) or nested too deep (over
:data:`MAX_DEPTH`), -32601 unknown method, -32602 bad params, -32000 "cannot
do that now".  The client talks only to a daemon
running as its own user (``SO_PEERCRED``), so a socket planted by someone
else is never believed.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import socket
import struct
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "PROTOCOL",
    "Method",
    "DAEMON_METHODS",
    "MEMORY_METHODS",
    "EVENT",
    "Event",
    "State",
    "STATES",
    "STATUS_KEYS",
    "MIRROR_KEYS",
    "MIRROR_PARAM",
    "SEVERITY",
    "combine_status",
    "worst_state",
    "METHOD_NOT_FOUND",
    "INVALID_PARAMS",
    "CANNOT_NOW",
    "INVALID_REQUEST",
    "MAX_REQUEST",
    "MAX_DEPTH",
    "DaemonNotRunning",
    "TooDeep",
    "NotAnObject",
    "RequestTooLarge",
    "RpcError",
    "RpcClient",
    "default_socket_path",
    "nesting_depth",
    "peer_uid",
    "encode",
    "decode",
]

PROTOCOL = 1
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
CANNOT_NOW = -32000


class Method:
    """The names of the socket methods (docs/architecture.md §7.1); plain strings."""

    STATUS = "status"
    PING = "ping"
    REFRESH = "refresh"
    PAUSE = "pause"
    RESUME = "resume"
    CONFLICTS = "conflicts"
    DAMAGED = "damaged"
    ACTIVITY = "activity"
    WAIT = "wait"
    FILE = "file"
    HELD_DELETES = "held_deletes"
    SKIPPED = "skipped"
    CONFIRM_DELETES = "confirm_deletes"
    RESTORE_DELETES = "restore_deletes"
    RESYNC = "resync"
    RESOLVE = "resolve"
    PANEL = "panel"
    #: the library's trash on the server: ``{"action": "list"|"restore"|"purge", …}``
    TRASH = "trash"
    SHUTDOWN = "shutdown"
    #: Built into the server: the connection stays open for :data:`EVENT` notifications.
    SUBSCRIBE = "subscribe"
    MEMORY_SEARCH = "memory.search"
    MEMORY_READ = "memory.read"
    MEMORY_LIST = "memory.list"
    MEMORY_WRITE = "memory.write"
    MEMORY_APPEND = "memory.append"
    MEMORY_EDIT = "memory.edit"
    MEMORY_DELETE = "memory.delete"
    MEMORY_REFRESH = "memory.refresh"


#: Methods of the daemon's own table (``Methods.table`` in daemon/daemon_methods.py).
DAEMON_METHODS = (Method.STATUS, Method.REFRESH, Method.PAUSE, Method.RESUME, Method.CONFLICTS, Method.DAMAGED,
                  Method.ACTIVITY, Method.WAIT, Method.SHUTDOWN, Method.PING, Method.FILE, Method.CONFIRM_DELETES,
                  Method.HELD_DELETES, Method.SKIPPED, Method.RESYNC, Method.RESOLVE, Method.PANEL,
                  Method.RESTORE_DELETES, Method.TRASH)
#: Methods answered at once from facts in memory (they never block nor touch
#: the state database): the socket serves them on its own thread, with no
#: hand-off to a handler thread that would queue once more for the GIL behind
#: a busy sync thread.
QUICK_METHODS = (Method.STATUS, Method.PING)
#: Methods of the memory tools (daemon/memory_service.py).
MEMORY_METHODS = (Method.MEMORY_SEARCH, Method.MEMORY_READ, Method.MEMORY_LIST, Method.MEMORY_WRITE,
                  Method.MEMORY_APPEND, Method.MEMORY_EDIT, Method.MEMORY_DELETE, Method.MEMORY_REFRESH)

#: The method of the notifications pushed to subscribers (``params`` has a ``type``).
EVENT = "event"


class Event:
    """The ``type`` values of :data:`EVENT` notifications."""

    STATUS = "status"  # {"status": <status object>}
    SYNCED = "synced"
    CONFLICT = "conflict"
    ERROR = "error"
    FILED = "filed"


class State:
    """The values of the status object's ``state`` (docs/architecture.md §7.2)."""

    STARTING = "starting"
    IDLE = "idle"
    SYNCING = "syncing"
    ATTENTION = "attention"  # syncs, but something needs the person
    PAUSED = "paused"
    OFFLINE = "offline"
    AUTH_REQUIRED = "auth_required"
    STOPPED = "stopped"  # a safety valve stopped the mirror
    ERROR = "error"


STATES = (State.STARTING, State.IDLE, State.SYNCING, State.ATTENTION, State.PAUSED, State.OFFLINE,
          State.AUTH_REQUIRED, State.STOPPED, State.ERROR)
#: The first keys of the status object, in order: the contract, never renamed or retyped.
STATUS_KEYS = ("protocol", "state", "message", "last_sync", "pending_up", "pending_down", "conflicts", "damaged",
               "skipped", "held_deletes", "transfer", "mirrors")
#: The keys of each item of the status object's ``mirrors``, one item per
#: ``[[mirror]]`` in config order: ``name`` (what ``--mirror`` accepts, with
#: the library and the folder), ``library``, ``local`` (the folder),
#: ``state``/``message`` as the top level has them for that mirror, its
#: counts, and ``attention`` (``{"kind", "path", "reason"}`` items).
MIRROR_KEYS = ("name", "library", "local", "state", "message", "last_sync", "pending_up", "pending_down",
               "conflicts", "damaged", "skipped", "held_deletes", "transfer", "attention")
#: The optional param of methods that act on one mirror: a mirror's ``name``,
#: its library's name or id, or its folder.  Without it, with several
#: mirrors, ``refresh``/``pause``/``resume``/``wait`` act on all, lists
#: (``conflicts``, ``activity``…) cover all with each item's ``mirror``, and
#: the rest answer -32602 naming the choices.
MIRROR_PARAM = "mirror"
#: States from the best to the worst, for one picture over several mirrors.
SEVERITY = (State.IDLE, State.SYNCING, State.STARTING, State.PAUSED, State.ATTENTION, State.OFFLINE,
            State.AUTH_REQUIRED, State.STOPPED, State.ERROR)


def worst_state(states: list[Any]) -> str:
    """The worst of ``states`` by :data:`SEVERITY` (an unknown state counts as ``error``)."""
    rank = {state: i for i, state in enumerate(SEVERITY)}
    worst = State.IDLE
    for state in states:
        if rank.get(state, len(SEVERITY) - 1) > rank[worst]:
            worst = state if state in rank else State.ERROR
    return worst


def combine_status(statuses: list[dict[str, Any]]) -> dict[str, Any]:
    """The status object of a daemon with several mirrors, from each mirror's own.

    The top level is the first mirror's object, unchanged (clients that know
    one mirror keep working); ``mirrors`` lists every mirror's item; the
    drop folder's fields come from the mirror that files.

    :param statuses: one status object per mirror, in config order (at least one).
    """
    combined = dict(statuses[0])
    combined["mirrors"] = [item for st in statuses for item in st.get("mirrors", [])]
    for st in statuses:
        if st.get("drop_dir"):
            combined["drop_dir"], combined["filing"] = st.get("drop_dir"), st.get("filing")
            break
    return combined

#: Longest request line the daemon reads (bytes); every request is far smaller.
MAX_REQUEST = 1024 * 1024
#: Deepest nesting of arrays/objects accepted in one message.
MAX_DEPTH = 64

_MAX_LINE = 16 * 1024 * 1024  # bytes; a status object is far smaller
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")


class DaemonNotRunning(Exception):
    """No daemon answers on the socket (missing file, refused, stale)."""


class RpcError(Exception):
    """The daemon answered a request with a JSON-RPC error.

    :ivar code: the JSON-RPC error code.
    """

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def default_socket_path() -> Path:
    """Where the socket lives when neither config nor ``OHSYNC_SOCKET`` say.

    ``$XDG_RUNTIME_DIR/ohsync/ohsync.sock`` where the runtime dir exists,
    else ``<tempdir>/ohsync-<uid>/ohsync.sock`` (root without a session).
    """
    env = os.environ.get("OHSYNC_SOCKET")
    if env:
        return Path(env).expanduser()
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime):
        return Path(runtime) / "ohsync" / "ohsync.sock"
    return Path(tempfile.gettempdir()) / f"ohsync-{os.getuid()}" / "ohsync.sock"


def tray_pid_file(socket_path: str | os.PathLike[str] | None) -> Path:
    """Where ``ohsync tray`` (a tray of its own process) writes its pid: beside the
    socket it follows, in the user's private socket folder, so ``ohsync stop`` and
    ``ohsync autostart disable`` can stop it too."""
    sock = Path(socket_path) if socket_path is not None else default_socket_path()
    return sock.parent / "ohsync-tray.pid"


def json_type(value: Any) -> str:
    """The JSON name of a decoded value's type (``an array``, ``a number``…), for error messages."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "null" if value is None else "an object"


def encode(obj: dict[str, Any]) -> bytes:
    """One protocol line: compact JSON, UTF-8, newline-terminated.

    A string that UTF-8 cannot carry (a lone surrogate a peer sent as
    ``"\\ud800"`` and an answer echoes) is written ``\\u``-escaped instead,
    so every line is valid UTF-8.
    """
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return json.dumps(obj, ensure_ascii=True, separators=(",", ":")).encode("ascii") + b"\n"


class TooDeep(ValueError):
    """A message nests arrays/objects deeper than :data:`MAX_DEPTH`."""


class NotAnObject(ValueError):
    """A line is valid JSON but not an object (an array, a number…): not a request."""


class RequestTooLarge(RpcError):
    """A request would be over :data:`MAX_REQUEST` bytes, the daemon's line limit
    (code -32600, as the daemon would answer it)."""

    def __init__(self, size: int) -> None:
        super().__init__(INVALID_REQUEST, f"the request is too large: {size:,} bytes, over the daemon's limit "
                                          f"of {MAX_REQUEST:,} bytes; send less at once (split a long text "
                                          "over several writes)")
        self.size = size


def nesting_depth(line: bytes) -> int:
    """How deep arrays and objects nest in the JSON text ``line``.

    Brackets inside strings do not count.  Linear in the length, without
    recursion, so it is safe on hostile input.
    """
    if line.count(b"[") + line.count(b"{") <= 1:
        return line.count(b"[") + line.count(b"{")
    brackets = _STRING.sub(b"", line).translate(None, _NOT_BRACKETS)
    depth = deepest = 0
    for byte in brackets:
        if byte in b"[{":
            depth += 1
            deepest = max(deepest, depth)
        else:
            depth -= 1
    return deepest


def decode(line: bytes, *, max_depth: int = MAX_DEPTH) -> dict[str, Any]:
    """Parse one protocol line.

    :param max_depth: deepest array/object nesting accepted.
    :raises TooDeep: nested deeper than ``max_depth`` (checked before parsing,
        so a hostile line never reaches the recursive parser).
    :raises NotAnObject: valid JSON, but not an object.
    :raises ValueError: not JSON (or not UTF-8).
    """
    if line.count(b"[") + line.count(b"{") > max_depth and nesting_depth(line) > max_depth:
        raise TooDeep(f"the message nests deeper than {max_depth} levels")
    try:
        obj = json.loads(line.decode("utf-8"))
    except RecursionError:
        raise TooDeep("the message nests too deeply to parse") from None
    if not isinstance(obj, dict):
        raise NotAnObject(f"a JSON-RPC message must be an object, not {type(obj).__name__}")
    return obj


def peer_uid(sock: socket.socket) -> int | None:
    """The uid at the other end of a Unix socket, or None where the OS cannot say."""
    if hasattr(socket, "SO_PEERCRED"):
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return int(struct.unpack("3i", creds)[1])
    getpeereid = getattr(os, "getpeereid", None)
    if getpeereid is not None:
        return int(getpeereid(sock.fileno())[0])
    return None


class RpcClient:
    """A blocking client of the daemon's socket.

    :param path: socket path (default :func:`default_socket_path`).
    :param timeout: seconds to wait for an answer (``None`` = forever).
    :raises DaemonNotRunning: from :meth:`call` when nobody listens.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None, timeout: float | None = 10.0) -> None:
        self.path = Path(path) if path is not None else default_socket_path()
        self.timeout = timeout
        self._ids = itertools.count(1)
        #: the config file of the daemon that answered the last call (None: not said, or no answer yet)
        self.answered_config: str | None = None

    def _connect(self) -> socket.socket:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self.path))
        except (FileNotFoundError, ConnectionRefusedError, NotADirectoryError) as exc:
            sock.close()
            raise DaemonNotRunning(f"ohsync is not running (no daemon at {self.path})") from exc
        except OSError as exc:
            sock.close()
            raise DaemonNotRunning(f"cannot reach the ohsync daemon at {self.path}: {exc.strerror}") from exc
        uid = peer_uid(sock)
        if uid is not None and uid != os.getuid():
            sock.close()  # someone else answers there: never believe what it says
            raise DaemonNotRunning(
                f"the socket {self.path} is served by another user (uid {uid}), not by your ohsync; "
                f"remove {self.path.parent} and start ohsync again")
        return sock

    def call(self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None) -> Any:
        """Send one request and return its ``result``.

        :param timeout: seconds for this call, overriding the client's.
        :raises DaemonNotRunning: nobody listens on the socket.
        :raises RequestTooLarge: the request is over :data:`MAX_REQUEST` bytes
            (nothing is sent; the daemon would refuse it).
        :raises RpcError: the daemon answered with an error.
        :raises ConnectionError: the daemon closed the connection early.

        The config file the answering daemon runs with (the answer's ``config``
        member, None when it names none) is kept in :attr:`answered_config`.
        """
        req_id = next(self._ids)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": req_id, "method": method}
        if params is not None:
            msg["params"] = params
        line = encode(msg)
        if len(line) > MAX_REQUEST:
            raise RequestTooLarge(len(line))
        with self._connect() as sock:
            if timeout is not None:
                sock.settimeout(timeout)
            sock.sendall(line)
            reader = sock.makefile("rb")
            while line := reader.readline(_MAX_LINE):
                reply = decode(line)
                if reply.get("id") != req_id:
                    continue  # a notification; not ours
                config = reply.get("config")
                self.answered_config = config if isinstance(config, str) and config else None
                if "error" in reply:
                    err = reply["error"] or {}
                    raise RpcError(int(err.get("code", INTERNAL_ERROR)), str(err.get("message", "error")))
                return reply.get("result")
        raise ConnectionError("the daemon closed the connection without answering")

    def subscribe(self) -> Iterator[dict[str, Any]]:
        """Yield the ``params`` of every ``event`` notification, forever.

        The first item is the answer to ``subscribe`` itself (``{"type":
        "subscribed"}``) so callers know the stream is live.  The iterator
        ends when the daemon goes away.

        :raises DaemonNotRunning: nobody listens on the socket.
        """
        sock = self._connect()
        sock.settimeout(None)
        try:
            sock.sendall(encode({"jsonrpc": "2.0", "id": 0, "method": Method.SUBSCRIBE}))
            for line in sock.makefile("rb"):
                try:
                    msg = decode(line)
                except ValueError:
                    continue
                if msg.get("id") == 0:
                    yield {"type": "subscribed"}
                elif msg.get("method") == EVENT:
                    yield msg.get("params") or {}
        except OSError:
            return
        finally:
            sock.close()
