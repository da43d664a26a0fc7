"""The socket under attack: another user's folder, a planted server, hostile
requests, thousands of idle connections.

Tests that need a second user run a child as ``nobody`` (uid 65534), which
needs root; elsewhere they are skipped with that reason.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import contextlib

from daemon_helpers import isolated_env, wait_for  # noqa: F401
from ohsync.daemon.protocol import (
    INVALID_REQUEST,
    MAX_REQUEST,
    DaemonNotRunning,
    RpcClient,
    default_socket_path,
)
from ohsync.daemon.socket.server import HANDLER_THREADS, SocketServer, UnsafeSocketDir

NOBODY = 65534
needs_root = pytest.mark.skipif(os.getuid() != 0, reason="switching to another uid needs root")


def _handlers():
    return {"status": lambda p: {"state": "idle", "real": True},
            # why: a handler that takes the time the caller asks for (the slow request under test)
            "slow": lambda p: time.sleep(float(p.get("s", 1))) or {"slept": True}}


def _as_nobody(fn) -> int:
    """Run ``fn()`` in a forked child as uid/gid 65534; returns its exit code (fn's int)."""
    pid = os.fork()
    if pid == 0:  # child
        code = 99
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            code = int(fn())
        except BaseException:  # noqa: BLE001
            code = 98
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.fixture
def fallback_tmp(isolated_env, monkeypatch):
    """No XDG_RUNTIME_DIR; the temp dir is a world-writable sticky folder like /tmp."""
    base = Path(tempfile.mkdtemp(prefix="ohs-tmp-", dir="/tmp"))
    os.chmod(base, 0o1777)
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    yield base
    subprocess.run(["rm", "-rf", str(base)], check=False)


@needs_root
def test_fallback_dir_made_first_by_another_user_is_refused(fallback_tmp) -> None:
    path = default_socket_path()
    assert path.parent == fallback_tmp / f"ohsync-{os.getuid()}"

    def plant() -> int:
        os.mkdir(path.parent, 0o777)
        os.chmod(path.parent, 0o777)
        return 0

    assert _as_nobody(plant) == 0
    assert path.parent.stat().st_uid == NOBODY
    srv = SocketServer(path, _handlers(), own_dir=True)
    with pytest.raises(UnsafeSocketDir) as e:
        srv.start()
    message = str(e.value)
    assert f"belongs to uid {NOBODY}" in message and str(path.parent) in message
    assert f"rm -r {path.parent}" in message  # the fix
    assert not path.exists()  # nothing was bound in the other user's folder


def test_open_mode_is_refused_with_the_fix(fallback_tmp) -> None:
    path = default_socket_path()
    path.parent.mkdir(mode=0o755)
    os.chmod(path.parent, 0o755)
    with pytest.raises(UnsafeSocketDir) as e:
        SocketServer(path, _handlers()).start()
    assert "mode 0755" in str(e.value) and f"chmod 700 {path.parent}" in str(e.value)
    assert not path.exists()


def test_fallback_dir_is_created_private(fallback_tmp) -> None:
    path = default_socket_path()
    srv = SocketServer(path, _handlers())
    srv.start()
    try:
        st = path.parent.stat()
        assert st.st_uid == os.getuid() and (st.st_mode & 0o777) == 0o700
        assert RpcClient(path, timeout=5).call("status")["real"] is True
    finally:
        srv.stop()


@needs_root
def test_other_user_cannot_replace_or_reach_the_socket(fallback_tmp) -> None:
    path = default_socket_path()
    srv = SocketServer(path, _handlers())
    srv.start()
    try:
        def attack() -> int:
            results = 0
            try:
                os.unlink(path)
            except PermissionError:
                results |= 1
            try:
                fake = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                fake.bind(str(path.parent / "evil.sock"))
            except PermissionError:
                results |= 2
            try:
                s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                s.connect(str(path))
            except PermissionError:
                results |= 4
            return results

        assert _as_nobody(attack) == 7
        assert RpcClient(path, timeout=5).call("status")["real"] is True
    finally:
        srv.stop()


_FAKE_DAEMON = r"""
import json, os, socket, sys
path = sys.argv[1]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(path)
os.chmod(path, 0o777)
s.listen(4)
print("ready", flush=True)
s.settimeout(20)
conn, _ = s.accept()
line = conn.makefile("rb").readline()
req = json.loads(line)
answer = {"jsonrpc": "2.0", "id": req["id"], "result": {"state": "idle", "fake": True}}
conn.sendall((json.dumps(answer) + "\n").encode())
"""


@needs_root
def test_client_never_believes_a_socket_served_by_another_user(fallback_tmp) -> None:
    folder = fallback_tmp / "planted"
    folder.mkdir()
    os.chown(folder, NOBODY, NOBODY)
    path = folder / "ohsync.sock"
    proc = subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                             sys.executable, "-c", _FAKE_DAEMON, str(path)],
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        with pytest.raises(DaemonNotRunning) as e:
            RpcClient(path, timeout=5).call("status")
        assert f"another user (uid {NOBODY})" in str(e.value)
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture
def server(isolated_env):
    srv = SocketServer(isolated_env.socket, _handlers())
    srv.start()
    yield srv
    srv.stop()


def _raw(path: Path, payload: bytes, timeout: float = 10, count: int = 0) -> list[dict]:
    """Send ``payload`` and read answer lines until the daemon closes or goes
    quiet (or ``count`` lines arrived)."""
    answers = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(path))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(payload)
        f = s.makefile("rb")
        try:
            while (not count or len(answers) < count) and (line := f.readline()):
                answers.append(json.loads(line))
        except (TimeoutError, ConnectionResetError):
            pass
    return answers


def test_deep_nesting_gets_an_error_answer_and_no_traceback(server, isolated_env, caplog) -> None:
    caplog.set_level(logging.DEBUG)
    depth = 100_000
    payload = b'{"jsonrpc":"2.0","id":1,"method":"status","params":{"x":' + b"[" * depth + b"]" * depth + b"}}\n"
    answers = _raw(isolated_env.socket, payload + b'{"jsonrpc":"2.0","id":2,"method":"status"}\n', count=2)
    assert len(answers) == 2 and answers[1]["result"]["real"] is True  # the connection is served on
    assert answers[0]["error"]["code"] == INVALID_REQUEST
    assert "deeper than" in answers[0]["error"]["message"]
    assert "RecursionError" not in caplog.text and "Traceback" not in caplog.text
    # brackets inside strings are not nesting
    ok = _raw(isolated_env.socket, b'{"jsonrpc":"2.0","id":2,"method":"status","params":{"s":"' +
              b"[" * 5000 + b'"}}\n', count=1)
    assert ok[0]["result"]["real"] is True
    assert RpcClient(isolated_env.socket, timeout=5).call("status")["real"] is True


def test_oversized_request_gets_an_error_answer(server, isolated_env) -> None:
    payload = b'{"jsonrpc":"2.0","id":1,"method":"status","params":{"x":"' + b"a" * (MAX_REQUEST + 10)
    answers = _raw(isolated_env.socket, payload, count=1)
    assert len(answers) == 1 and answers[0]["error"]["code"] == INVALID_REQUEST
    assert "too large" in answers[0]["error"]["message"]
    assert RpcClient(isolated_env.socket, timeout=5).call("status")["real"] is True


def test_thousands_of_idle_connections_cost_no_threads(server, isolated_env) -> None:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 4500:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 8192), hard))
    before = threading.active_count()
    idle = []
    try:
        for _ in range(2000):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(str(isolated_env.socket))
            idle.append(s)
        wait_for(lambda: server.connection_count >= 2000, timeout=30, what="all connections accepted")
        # a few slow handlers at once use pool threads, never one per connection
        slow = [threading.Thread(target=RpcClient(isolated_env.socket, timeout=30).call, args=("slow", {"s": 0.5}))
                for _ in range(3)]
        for t in slow:
            t.start()
        started = time.monotonic()
        assert RpcClient(isolated_env.socket, timeout=10).call("status")["real"] is True
        assert time.monotonic() - started < 2.0
        assert threading.active_count() <= before + HANDLER_THREADS + len(slow)
        for t in slow:
            t.join(10)
    finally:
        for s in idle:
            s.close()
    wait_for(lambda: server.connection_count == 0, timeout=30, what="idle connections closed")


def test_pipelined_requests_are_answered_in_order(server, isolated_env) -> None:
    lines = b"".join(json.dumps({"jsonrpc": "2.0", "id": i, "method": "status"}).encode() + b"\n"
                     for i in range(50))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(isolated_env.socket))
        s.sendall(lines)
        f = s.makefile("rb")
        ids = [json.loads(f.readline())["id"] for _ in range(50)]
    assert ids == list(range(50))


def test_the_daemon_refuses_an_open_socket_folder_with_the_fix(isolated_env, seed_daemon) -> None:
    s = seed_daemon()
    folder = isolated_env.socket.parent
    folder.mkdir(mode=0o755)
    os.chmod(folder, 0o755)
    p = s.start()
    assert p.wait_exit(60) == 1
    out = p.output()
    assert "mode 0755" in out and f"chmod 700 {folder}" in out and "Traceback" not in out
    assert not isolated_env.socket.exists()
