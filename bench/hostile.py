"""Figures for the README's Reliability section (a script, not a test).

1. Requests spent on one permanently failing upload (HTTP 413 from a proxy)
   over 10 minutes of passes, one pass per second, with the failure book's
   clock advanced instead of waiting; and the same for a failure that is
   retried with backoff (a 400 on one file).
2. Threads of the daemon's socket server with 5,000 idle connections, and
   how long ``status`` takes meanwhile.

Run: ``.venv/bin/python bench/hostile.py`` (about 20 s).
"""

from __future__ import annotations

import os
import resource
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from engine_helpers import USER, make_mirror
from ohsync.daemon.protocol import Method, RpcClient, State
from ohsync.daemon.socket.server import SocketServer
from ohsync.devserver import DevServer

TEN_MINUTES = 600


def _requests_for_failing_upload(status: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        server = DevServer(Path(tmp) / "devserver", users={USER: "password"})
        server.start()
        try:
            repo = server.create_library(USER, "OH-Memory")
            m = make_mirror(server, repo, Path(tmp))
            m.sync()
            m.write("Files/scan.pdf", os.urandom(1_000_000))
            now = [time.time()]
            m.engine.failure_book._clock = lambda: now[0]
            server.inject_fault("POST", r"/seafhttp/upload-api/", status=status, count=10**6)
            server.reset_counters()
            for _ in range(TEN_MINUTES):
                m.sync(["Files/scan.pdf"])
                now[0] += 1.0
            return server.request_count(r"upload")
        finally:
            server.stop()


def _threads_with_idle_connections(n: int) -> tuple[int, int, float]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 2 * n + 200)), hard))
    folder = Path(tempfile.mkdtemp(prefix="ohs-bench-"))
    path = folder / "run" / "ohsync.sock"
    srv = SocketServer(path, {Method.STATUS: lambda p: {"state": State.IDLE}})
    before = threading.active_count()
    srv.start()
    conns = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(path))
            conns.append(s)
        while srv.connection_count < n:
            time.sleep(0.05)
        started = time.monotonic()
        RpcClient(path, timeout=10).call(Method.STATUS)
        took = time.monotonic() - started
        return before, threading.active_count(), took
    finally:
        for s in conns:
            s.close()
        srv.stop()


def main() -> None:
    print(f"413 upload, 10 min of passes (1/s): {_requests_for_failing_upload(413)} upload requests")
    print(f"400 upload (retried with backoff), 10 min: {_requests_for_failing_upload(400)} upload requests")
    before, after, took = _threads_with_idle_connections(5000)
    print(f"5,000 idle socket connections: {after} threads in the process ({before} before the server), "
          f"status answered in {took * 1000:.0f} ms")


if __name__ == "__main__":
    main()
