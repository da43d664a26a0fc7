"""Fault injection, request counters and after-request hooks.

A *fault* matches requests by method (None = any) and a regex searched in
the request path (and, failing that, in ``path?query``).  The next ``count``
matching requests get the fault:

* ``latency`` seconds of delay first (then the request proceeds, unless a
  status or drop is also set);
* ``status``: answered with that status instead of being processed (429 gets
  DRF's throttle body and ``Retry-After``; fileserver paths get a Go-style
  error body; other paths ``{"error_msg": "Injected fault"}``);
* ``drop``: the connection is closed without any answer;
* ``drop_after_bytes``: the connection is closed *mid-body*: a request that
  carries a body (an upload) has that many bytes of it read, then the
  connection is closed without an answer (nothing is committed); any other
  request is handled and its answer (status line, headers with the full
  ``Content-Length``) is sent with only that many bytes of its body (a
  download cut short);
* ``after_processing``: the request is handled first (an upload is committed)
  and only its answer is replaced by the status / the dropped connection,
  so the client cannot know whether it succeeded;
* ``omit_name``: the request is handled, then every entry with that name is
  left out of its JSON list answer (a folder listing that forgets a file
  while its ``oid`` header is still the folder's true id);
* ``listing_of``: a folder listing is answered for this other folder (its
  entries and its ``oid`` header), as a confused cache or proxy would;
* ``trailing_cr``: an upload or update is handled, but its file part of that
  name is stored with one extra trailing ``\r`` (and answered with the id of
  what was stored), as the C fileserver of seafile-server 12 does to about
  1 in 3,800 files of a multi-file upload.

Counters are kept per endpoint, keyed by the route template such as
``"GET /api2/repos/{id}/dir/"``.
"""
from __future__ import annotations

import builtins
import contextlib
import itertools
import json
import re
import socket
import struct
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable
from urllib.parse import parse_qsl, urlencode

from werkzeug.wrappers import Request, Response


@dataclass
class Fault:
    """One fault rule (see the module docstring); ``remaining`` counts down."""

    method: str | None
    path_regex: str
    status: int | None = None
    remaining: int = 1
    retry_after: int | None = None
    latency: float = 0.0
    drop: bool = False
    after_processing: bool = False
    id: int = 0
    drop_after_bytes: int | None = None
    omit_name: str | None = None
    listing_of: str | None = None
    trailing_cr: str | None = None
    _rx: re.Pattern[str] | None = field(default=None, repr=False)

    def matches(self, method: str, path: str, full: str) -> bool:
        """True when this rule applies to the request."""
        if self.remaining <= 0:
            return False
        if self.method and self.method.upper() != method.upper():
            return False
        rx = self._rx or re.compile(self.path_regex)
        return bool(rx.search(path) or rx.search(full))

    def as_dict(self) -> dict[str, Any]:
        """JSON view of the rule (for the control endpoint)."""
        return {"id": self.id, "method": self.method, "path_regex": self.path_regex, "status": self.status,
                "count": self.remaining, "retry_after": self.retry_after, "latency": self.latency,
                "drop": self.drop, "after_processing": self.after_processing,
                "drop_after_bytes": self.drop_after_bytes, "omit_name": self.omit_name,
                "listing_of": self.listing_of, "trailing_cr": self.trailing_cr}


@dataclass
class Hook:
    """An after-request callback ``callback(server)`` for the next ``remaining`` matches."""

    method: str | None
    path_regex: str
    callback: Callable[..., Any]
    remaining: int = 1

    def matches(self, method: str, path: str, full: str) -> bool:
        """True when this hook applies to the request."""
        if self.remaining <= 0:
            return False
        if self.method and self.method.upper() != method.upper():
            return False
        return bool(re.search(self.path_regex, path) or re.search(self.path_regex, full))


class FaultInjector:
    """Thread-safe registry of faults, hooks and counters."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._hooks: list[Hook] = []
        self._ids = itertools.count(1)
        self.counters: Counter[str] = Counter()
        self.lines: list[str] = []

    # ------------------------------------------------------------ faults
    def add(self, method: str | None, path_regex: str, *, status: int | None = None, count: int = 1,
            retry_after: int | None = None, latency: float = 0.0, drop: bool = False,
            after_processing: bool = False, drop_after_bytes: int | None = None,
            omit_name: str | None = None, listing_of: str | None = None,
            trailing_cr: str | None = None) -> int:
        """Register a fault for the next ``count`` matching requests; returns its id."""
        f = Fault(method or None, path_regex, status, int(count), retry_after, float(latency), bool(drop),
                  bool(after_processing), next(self._ids),
                  None if drop_after_bytes is None else max(0, int(drop_after_bytes)),
                  omit_name or None, listing_of or None, trailing_cr or None)
        f._rx = re.compile(path_regex)
        with self._lock:
            self._faults.append(f)
        return f.id

    def take(self, method: str, path: str, full: str) -> Fault | None:
        """The first live fault matching this request (consuming one of its uses)."""
        with self._lock:
            for f in self._faults:
                if f.matches(method, path, full):
                    f.remaining -= 1
                    if f.remaining <= 0:
                        self._faults.remove(f)
                    return f
        return None

    def list(self) -> list[dict[str, Any]]:
        """The live fault rules."""
        with self._lock:
            return [f.as_dict() for f in self._faults]

    def clear(self) -> None:
        """Remove every fault and hook."""
        with self._lock:
            self._faults.clear()
            self._hooks.clear()

    # ------------------------------------------------------------ hooks
    def add_hook(self, method: str | None, path_regex: str, callback: Callable[..., Any], count: int = 1) -> None:
        """Run ``callback`` after the next ``count`` matching requests were handled."""
        with self._lock:
            self._hooks.append(Hook(method, path_regex, callback, int(count)))

    def take_hooks(self, method: str, path: str, full: str) -> builtins.list[Callable[..., Any]]:
        """Callbacks due for this request (each use consumed)."""
        out = []
        with self._lock:
            for h in list(self._hooks):
                if h.matches(method, path, full):
                    h.remaining -= 1
                    out.append(h.callback)
                    if h.remaining <= 0:
                        self._hooks.remove(h)
        return out

    # ------------------------------------------------------------ counters
    def count(self, key: str, line: str) -> None:
        """Record one request under endpoint ``key`` (``line`` = ``"METHOD /path"``)."""
        with self._lock:
            self.counters[key] += 1
            self.lines.append(line)

    def request_count(self, pattern: str | None = None) -> int:
        """Requests seen since the last reset; ``pattern`` is an endpoint key or a
        regex searched in ``"METHOD /path?query"``."""
        with self._lock:
            if pattern is None:
                return len(self.lines)
            if pattern in self.counters:
                return self.counters[pattern]
            rx = re.compile(pattern)
            return sum(1 for line in self.lines if rx.search(line))

    def reset_counters(self) -> None:
        """Zero every counter."""
        with self._lock:
            self.counters.clear()
            self.lines.clear()


# ---------------------------------------------------------------- connection-level faults
def close_socket(environ, reset: bool = False) -> None:
    """Shut down and close the client connection of a WSGI request; ``reset``
    aborts it with a TCP RST (what a proxy does when it stops reading an
    upload), so a client still sending the body fails at once."""
    sock = environ.get("werkzeug.socket")
    if sock is None:
        return
    if reset:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    for step in (lambda: sock.shutdown(socket.SHUT_RDWR), sock.close):
        with contextlib.suppress(OSError):
            step()


def has_body(req: Request) -> bool:
    """True when the request carries a body (``Content-Length`` > 0 or chunked)."""
    if "chunked" in req.headers.get("Transfer-Encoding", "").lower():
        return True
    return (req.content_length or 0) > 0


def read_some(req: Request, n: int) -> None:
    """Read up to ``n`` bytes of the request body (then the connection is dropped)."""
    stream = req.environ["wsgi.input"]
    left = n
    while left > 0:
        try:
            chunk = stream.read(min(left, 65536))
        except OSError:
            return
        if not chunk:
            return
        left -= len(chunk)


class CutShort:
    """A WSGI answer sent with only the first ``limit`` bytes of its body, after
    which the connection is closed (headers keep the full ``Content-Length``)."""

    def __init__(self, resp: Response, limit: int) -> None:
        self.resp, self.limit = resp, limit

    def __call__(self, environ, start_response):
        body = self.resp(environ, start_response)
        left = self.limit
        try:
            yield b""  # makes the server send the status line and headers first
            for chunk in body:
                if left <= 0:
                    break
                piece = chunk[:left]
                left -= len(piece)
                if piece:
                    yield piece
        finally:
            close = getattr(body, "close", None)
            if close is not None:
                close()
            close_socket(environ)


# ---------------------------------------------------------------- answer rewrites
def omit_entries(resp: Response, name: str) -> Response:
    """The same answer with every entry called ``name`` left out of its JSON
    list body; headers (the ``oid`` among them) stay as they were."""
    try:
        body = json.loads(resp.get_data())
    except ValueError:
        return resp
    if isinstance(body, dict) and isinstance(body.get("dirent_list"), list):
        body["dirent_list"] = [e for e in body["dirent_list"] if not (isinstance(e, dict) and e.get("name") == name)]
    elif isinstance(body, list):
        body = [e for e in body if not (isinstance(e, dict) and e.get("name") == name)]
    else:
        return resp
    resp.set_data(json.dumps(body).encode())
    return resp


def with_query(environ: dict[str, Any], key: str, value: str) -> dict[str, Any]:
    """A copy of a WSGI environ whose query parameter ``key`` is ``value``."""
    args = [(k, v) for k, v in parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True) if k != key]
    args.append((key, value))
    out = dict(environ)
    out["QUERY_STRING"] = urlencode(args)
    return out
