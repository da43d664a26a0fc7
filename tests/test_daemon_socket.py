"""The socket server: permissions, peer check, dispatch, errors, subscribe."""

from __future__ import annotations

import json
import os
import socket
import stat
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import isolated_env, wait_for  # noqa: F401
from ohsync.daemon.protocol import INVALID_PARAMS, METHOD_NOT_FOUND, RpcClient, RpcError
from ohsync.daemon.socket.server import CannotNow, InvalidParams, SocketServer


def _handlers():
    def echo(params):
        if "x" not in params:
            raise InvalidParams("`x` is required")
        return {"x": params["x"]}

    def busy(params):
        raise CannotNow("not now")

    def boom(params):
        raise RuntimeError("secret internals")

    return {"echo": echo, "busy": busy, "boom": boom, "status": lambda p: {"state": "idle"}}


@pytest.fixture
def server(isolated_env):
    srv = SocketServer(isolated_env.socket, _handlers(), own_dir=True)
    srv.start()
    yield srv
    srv.stop()


def test_permissions(server, isolated_env) -> None:
    path = isolated_env.socket
    assert stat.S_ISSOCK(path.stat().st_mode)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700


def test_methods_and_errors(server, isolated_env) -> None:
    client = RpcClient(isolated_env.socket, timeout=10)
    assert client.call("status") == {"state": "idle"}
    assert client.call("echo", {"x": [1, "二"]}) == {"x": [1, "二"]}
    with pytest.raises(RpcError) as e:
        client.call("nope")
    assert e.value.code == METHOD_NOT_FOUND == -32601
    with pytest.raises(RpcError) as e:
        client.call("echo", {})
    assert e.value.code == INVALID_PARAMS == -32602
    with pytest.raises(RpcError) as e:
        client.call("busy")
    assert e.value.code == -32000 and e.value.message == "not now"
    with pytest.raises(RpcError) as e:
        client.call("boom")
    assert e.value.code == -32603 and "secret" not in e.value.message


def test_params_must_be_an_object_and_garbage_is_answered(server, isolated_env) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(isolated_env.socket))
        f = s.makefile("rwb")
        f.write(b'{"jsonrpc":"2.0","id":1,"method":"echo","params":[1]}\n')
        f.write(b"not json\n")
        f.write(b'{"jsonrpc":"2.0","id":2,"method":"status"}\n')
        f.flush()
        replies = [json.loads(f.readline()) for _ in range(3)]
    assert replies[0]["error"]["code"] == -32602
    assert replies[1]["error"]["code"] == -32700
    assert replies[2]["result"] == {"state": "idle"}


def test_refuses_other_uid(isolated_env) -> None:
    srv = SocketServer(isolated_env.socket, _handlers(), allowed_uid=os.getuid() + 12345)
    srv.start()
    try:
        with pytest.raises((ConnectionError, OSError)):
            RpcClient(isolated_env.socket, timeout=5).call("status")
    finally:
        srv.stop()


def test_subscribe_pushes_events(server, isolated_env) -> None:
    client = RpcClient(isolated_env.socket, timeout=10)
    events = client.subscribe()
    assert next(events) == {"type": "subscribed"}
    wait_for(lambda: server.subscriber_count == 1, what="subscriber registered")
    server.publish({"type": "status", "status": {"state": "syncing"}})
    assert next(events) == {"type": "status", "status": {"state": "syncing"}}
    events.close()
    wait_for(lambda: server.subscriber_count == 0, timeout=10, what="subscriber gone")


def test_stale_socket_is_replaced_and_live_one_refused(isolated_env) -> None:
    path = isolated_env.socket
    path.parent.mkdir(mode=0o700, exist_ok=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens
    srv = SocketServer(path, _handlers())
    srv.start()
    try:
        assert RpcClient(path).call("status") == {"state": "idle"}
        from ohsync.daemon.socket.server import SocketInUse

        with pytest.raises(SocketInUse):
            SocketServer(path, _handlers()).start()
    finally:
        srv.stop()
    assert not path.exists()


def test_many_clients_at_once(server, isolated_env) -> None:
    errors = []

    def hit():
        try:
            for i in range(20):
                assert RpcClient(isolated_env.socket).call("echo", {"x": i}) == {"x": i}
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=hit) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors
