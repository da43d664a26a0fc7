"""Quick socket methods (``status``, ``ping``) are answered on the selector
thread: they never wait for a handler thread, even when every one of them
is blocked (e.g. by ``wait`` calls), and a quick handler's failure is
answered like any other."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import isolated_env  # noqa: F401
from ohsync.daemon.protocol import INTERNAL_ERROR, QUICK_METHODS, Method, RpcClient, RpcError
from ohsync.daemon.socket.server import HANDLER_THREADS, SocketServer


def test_status_is_answered_while_every_handler_thread_is_blocked(isolated_env) -> None:
    release = threading.Event()
    entered = threading.Semaphore(0)

    def slow(params):
        entered.release()
        release.wait(30)
        return {"waited": True}

    srv = SocketServer(isolated_env.socket, {}, own_dir=True)
    srv.add_handlers({"slow": slow, Method.STATUS: lambda p: {"state": "idle"},
                      Method.PING: lambda p: 1 / 0}, quick=QUICK_METHODS)
    srv.start()
    callers = [threading.Thread(target=lambda: RpcClient(isolated_env.socket, timeout=40).call("slow"))
               for _ in range(HANDLER_THREADS)]
    try:
        for t in callers:
            t.start()
        for _ in range(HANDLER_THREADS):  # every handler thread is now inside `slow`
            assert entered.acquire(timeout=10)
        client = RpcClient(isolated_env.socket, timeout=5)
        t0 = time.monotonic()
        assert client.call(Method.STATUS) == {"state": "idle"}
        assert time.monotonic() - t0 < 2.0
        with pytest.raises(RpcError) as info:  # a failing quick handler is an answer, not a dead thread
            client.call(Method.PING)
        assert info.value.code == INTERNAL_ERROR
        assert client.call(Method.STATUS) == {"state": "idle"}
    finally:
        release.set()
        for t in callers:
            t.join(10)
        srv.stop()
