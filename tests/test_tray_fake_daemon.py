"""A stand-in for the daemon's socket server, used by the tray tests.

:class:`FakeDaemon` speaks the daemon's JSON-RPC framing (``daemon/protocol.py``)
on a Unix socket: it serves a status object and a conflict list, records
every method called, pushes ``subscribe`` events, and can go away and come
back on the same path.  Other tray tests load this module by file path
(``load_fake_daemon()``); the tests at the bottom check the stand-in itself
against the real :class:`~ohsync.daemon.protocol.RpcClient`.
"""

from __future__ import annotations

import contextlib
import copy
import importlib.util
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from ohsync.daemon.protocol import METHOD_NOT_FOUND, RpcClient, decode, encode

__all__ = ["FakeDaemon", "STATUS_IDLE", "load_fake_daemon"]

STATUS_IDLE: dict[str, Any] = {
    "protocol": 1, "state": "idle", "message": "Up to date", "last_sync": "2026-11-30T09:12:03+08:00",
    "pending_up": 0, "pending_down": 0, "conflicts": 0, "damaged": 0, "skipped": 0, "held_deletes": 0,
    "transfer": None,
    "mirrors": [{"library": "OH-Memory", "local": "/tmp/OH-Memory", "state": "idle", "message": "Up to date"}],
}


class FakeDaemon:
    """A JSON-RPC server on ``path`` answering like the ohsync daemon."""

    def __init__(self, path: str | Path, status: dict[str, Any] | None = None,
                 conflicts: list[dict[str, Any]] | None = None) -> None:
        self.path = Path(path)
        self.status: dict[str, Any] = copy.deepcopy(status or STATUS_IDLE)
        self.conflicts: list[dict[str, Any]] = list(conflicts or [])
        self.calls: list[str] = []
        self._cond = threading.Condition()
        self._subscribers: list[socket.socket] = []
        self._conns: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []

    # --- lifecycle -------------------------------------------------------------

    def start(self) -> FakeDaemon:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            self.path.unlink()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(self.path))
        listener.listen(16)
        listener.settimeout(0.1)  # close() does not wake accept(): poll instead
        self._listener = listener
        self._spawn(self._accept_loop, listener)
        return self

    def stop(self) -> None:
        """Go away like a daemon that exits: close the listener and every connection."""
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()  # the accept loop sees the change within 0.1 s
        with self._cond:
            conns, self._conns, self._subscribers = self._conns, [], []
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        for thread in self._threads:
            thread.join(timeout=5)
        self._threads = []
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> FakeDaemon:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _spawn(self, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name="ohsync-test-fakedaemon", daemon=True)
        self._threads.append(thread)
        thread.start()

    # --- test controls -----------------------------------------------------------

    def push(self, params: dict[str, Any]) -> None:
        """Send one ``event`` notification to every subscriber."""
        line = encode({"jsonrpc": "2.0", "method": "event", "params": params})
        with self._cond:
            subscribers = list(self._subscribers)
        for conn in subscribers:
            with contextlib.suppress(OSError):
                conn.sendall(line)

    def set_status(self, **changes: Any) -> None:
        """Change the status object and push it as a ``status`` event."""
        with self._cond:
            self.status.update(changes)
            status = copy.deepcopy(self.status)
        self.push({"type": "status", **status})

    def wait_for_call(self, method: str, timeout: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while method not in self.calls:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return True

    def subscriber_count(self) -> int:
        with self._cond:
            return len(self._subscribers)

    def wait_for_subscriber(self, timeout: float = 10.0) -> bool:
        """True once a client subscribed (woken by the accept loop), False after ``timeout`` seconds."""
        with self._cond:
            return self._cond.wait_for(lambda: bool(self._subscribers), timeout)

    # --- server ------------------------------------------------------------------

    def _accept_loop(self, listener: socket.socket) -> None:
        while self._listener is listener:
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            with self._cond:
                self._conns.append(conn)
            self._spawn(self._serve, conn)

    def _serve(self, conn: socket.socket) -> None:
        try:
            for line in conn.makefile("rb"):
                request = decode(line)
                method = str(request.get("method"))
                with self._cond:
                    self.calls.append(method)
                    self._cond.notify_all()
                reply: dict[str, Any] = {"jsonrpc": "2.0", "id": request.get("id")}
                if method == "subscribe":
                    reply["result"] = {"subscribed": True}
                    conn.sendall(encode(reply))
                    with self._cond:
                        self._subscribers.append(conn)
                        self._cond.notify_all()
                    continue
                try:
                    reply["result"] = self._answer(method)
                except KeyError:
                    reply["error"] = {"code": METHOD_NOT_FOUND, "message": f"unknown method {method}"}
                conn.sendall(encode(reply))
        except (OSError, ValueError):
            pass
        finally:
            with self._cond:
                if conn in self._subscribers:
                    self._subscribers.remove(conn)
            conn.close()

    def _answer(self, method: str) -> Any:
        if method == "status":
            with self._cond:
                return copy.deepcopy(self.status)
        if method == "conflicts":
            with self._cond:
                return copy.deepcopy(self.conflicts)
        if method == "pause":
            threading.Timer(0.05, self.set_status, kwargs={"state": "paused", "message": "Paused"}).start()
            return None
        if method == "resume":
            threading.Timer(0.05, self.set_status, kwargs={"state": "idle", "message": "Up to date"}).start()
            return None
        if method in ("refresh", "shutdown"):
            return None
        if method == "panel":
            return {"url": "http://127.0.0.1:8765/auth#the-secret", "address": "http://127.0.0.1:8765/"}
        raise KeyError(method)


def load_fake_daemon() -> Any:
    """This module, loaded by path (tests are not a package under importlib mode)."""
    name = "ohsync_tests_tray_fake_daemon"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__))
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


# --- the stand-in's own tests -----------------------------------------------------

def test_fake_daemon_answers_like_the_protocol(tmp_path: Path) -> None:
    with FakeDaemon(tmp_path / "d.sock", conflicts=[{"path": "a.md", "archived": ".conflict/a.md"}]) as fake:
        client = RpcClient(fake.path, timeout=5)
        assert client.call("status")["state"] == "idle"
        assert client.call("conflicts")[0]["path"] == "a.md"
        assert client.call("refresh") is None
        stream = client.subscribe()
        assert next(stream) == {"type": "subscribed"}
        assert fake.wait_for_subscriber()
        fake.set_status(state="syncing")
        event = next(stream)
        assert event["type"] == "status" and event["state"] == "syncing"
        assert fake.calls[:4] == ["status", "conflicts", "refresh", "subscribe"]
    assert list(stream) == []  # the stream ends when the daemon goes away
