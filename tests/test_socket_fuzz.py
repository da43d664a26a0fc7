"""No request shape knocks the socket out (daemon/socket/server.py).

Every line a peer sends gets a JSON-RPC answer and the connection is served
on; a failure inside the socket thread is logged and the socket is served
again.  The last test fuzzes request shapes with hypothesis against a real
socket server (bounded examples, so it runs in ``make test``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import isolated_env  # noqa: F401
from ohsync.daemon.protocol import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    MAX_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RpcClient,
)
from ohsync.daemon.socket import server as socket_server_module
from ohsync.daemon.socket.server import SocketServer

PROBE = b'{"jsonrpc":"2.0","id":"probe","method":"status"}\n'


def _handlers() -> dict[str, Any]:
    def boom(params: dict[str, Any]) -> Any:
        raise RuntimeError("a handler bug")

    return {"status": lambda p: {"state": "idle", "real": True},
            "echo": lambda p: {"params": p},
            "boom": boom,
            "not_json": lambda p: {"x": object()}}


@pytest.fixture
def server(isolated_env):
    srv = SocketServer(isolated_env.socket, _handlers())
    srv.add_handlers({"status": _handlers()["status"]}, quick=["status"])
    srv.start()
    yield srv
    srv.stop()


def _exchange(path: Path, payload: bytes, timeout: float = 10.0) -> list[dict[str, Any]]:
    """Send ``payload`` then the probe on one connection; the answers up to the probe's.

    Fails when the connection closes (or goes quiet) before the probe is answered.
    """
    answers: list[dict[str, Any]] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(path))
        s.sendall(payload + PROBE)
        reader = s.makefile("rb")
        while True:
            line = reader.readline()
            assert line, f"the connection closed before the probe was answered; got {answers}"
            answer = json.loads(line)
            assert isinstance(answer, dict) and answer.get("jsonrpc") == "2.0", answer
            assert ("result" in answer) != ("error" in answer), answer
            if answer.get("id") == "probe":
                assert answer["result"]["real"] is True
                return answers
            answers.append(answer)


def _closed_unanswered(path: Path) -> None:
    """Send the probe on a new connection; the daemon must close it without an answer (and never hang)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(path))
        try:
            s.sendall(PROBE)
            assert s.makefile("rb").readline() == b""
        except (BrokenPipeError, ConnectionResetError):
            pass


@pytest.mark.parametrize(("line", "code"), [
    (b'{"jsonrpc":"2.0","id":null,"method":["status"]}', INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":1,"method":{"a":1}}', INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":1,"method":7}', INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":1}', INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":[1],"method":"status"}', INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":{"a":1},"method":"status"}', INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":true,"method":"status"}', INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":1,"method":"status","params":"x"}', INVALID_PARAMS),
    (b'{"jsonrpc":"2.0","id":1,"method":"echo","params":[1,2]}', INVALID_PARAMS),
    (b'{"jsonrpc":"2.0","id":1,"method":"nope"}', METHOD_NOT_FOUND),
    (b'{"jsonrpc":"2.0","id":1,"method":"boom"}', INTERNAL_ERROR),
    (b'{"jsonrpc":"2.0","id":1,"method":"not_json"}', INTERNAL_ERROR),
    (b'{"jsonrpc":"2.0","id":1,"method":"\xff\xfe"}', PARSE_ERROR),
    (b'\xc3\x28{"id":1}', PARSE_ERROR),
    (b'{not json', PARSE_ERROR),
    (b'[]', INVALID_REQUEST),
    (b'[{"jsonrpc":"2.0","id":1,"method":"status"}]', INVALID_REQUEST),
    (b'123', INVALID_REQUEST),
    (b'"status"', INVALID_REQUEST),
    (b'null', INVALID_REQUEST),
    (b'{"jsonrpc":"2.0","id":1,"method":"echo","params":{"x":' + b"[" * 100 + b"]" * 100 + b"}}", INVALID_REQUEST),
])
def test_a_malformed_request_is_answered_and_the_connection_served_on(server, isolated_env, line: bytes,
                                                                      code: int) -> None:
    answers = _exchange(isolated_env.socket, line + b"\n")
    assert [a["error"]["code"] for a in answers] == [code]
    if code == INVALID_REQUEST and b'"id":1' not in line:
        assert answers[0]["id"] is None
    assert RpcClient(isolated_env.socket, timeout=5).call("status")["real"] is True


def test_a_lone_surrogate_is_echoed_as_valid_utf8(server, isolated_env) -> None:
    answers = _exchange(isolated_env.socket, b'{"jsonrpc":"2.0","id":"\\ud800","method":"\\udfff"}\n')
    assert answers[0]["id"] == "\ud800" and answers[0]["error"]["code"] == METHOD_NOT_FOUND


def test_a_line_over_the_limit_is_answered_skipped_and_the_connection_served_on(server, isolated_env) -> None:
    big = b'{"jsonrpc":"2.0","id":1,"method":"echo","params":{"x":"' + b"a" * (MAX_REQUEST + 10) + b'"}}\n'
    answers = _exchange(isolated_env.socket, big + b'{"jsonrpc":"2.0","id":2,"method":"echo"}\n', timeout=30)
    assert answers[0]["error"]["code"] == INVALID_REQUEST and "too large" in answers[0]["error"]["message"]
    assert answers[1] == {"jsonrpc": "2.0", "id": 2, "result": {"params": {}}}
    assert len(answers) == 2


def test_the_client_says_too_large_before_sending(server, isolated_env) -> None:
    from ohsync.daemon.protocol import RequestTooLarge

    with pytest.raises(RequestTooLarge) as err:
        RpcClient(isolated_env.socket, timeout=5).call("echo", {"x": "a" * (MAX_REQUEST + 1)})
    assert err.value.code == INVALID_REQUEST and "too large" in err.value.message


def test_a_failure_in_the_accept_step_is_logged_and_the_socket_served_again(server, isolated_env, monkeypatch,
                                                                           caplog) -> None:
    caplog.set_level(logging.ERROR)
    real = socket_server_module.peer_uid
    calls = {"n": 0}

    def flaky(sock: socket.socket) -> int | None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a bug while accepting")
        return real(sock)

    monkeypatch.setattr(socket_server_module, "peer_uid", flaky)
    _closed_unanswered(isolated_env.socket)  # that one connection is closed, nothing hangs
    assert "taking a socket connection failed" in caplog.text
    assert RpcClient(isolated_env.socket, timeout=5).call("status")["real"] is True


def test_a_failure_in_a_connection_step_costs_only_that_connection(server, isolated_env, monkeypatch,
                                                                   caplog) -> None:
    caplog.set_level(logging.ERROR)
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    other.settimeout(10)
    other.connect(str(isolated_env.socket))
    real = server._methods.is_quick
    calls = {"n": 0}

    def flaky(method: Any) -> bool:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a bug while reading a request")
        return real(method)

    monkeypatch.setattr(server._methods, "is_quick", flaky)
    _closed_unanswered(isolated_env.socket)
    assert "a socket connection failed" in caplog.text
    other.sendall(PROBE)  # a connection open before the failure is served on
    assert json.loads(other.makefile("rb").readline())["result"]["real"] is True
    other.close()
    assert RpcClient(isolated_env.socket, timeout=5).call("status")["real"] is True


def test_a_failure_of_the_selector_loop_itself_serves_the_socket_again(server, isolated_env, monkeypatch,
                                                                       caplog) -> None:
    caplog.set_level(logging.ERROR)
    calls = {"n": 0}
    real = server._event

    def flaky(what: Any, events: int) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("a bug in the loop")
        real(what, events)

    monkeypatch.setattr(server, "_event", flaky)
    client = RpcClient(isolated_env.socket, timeout=10)
    with contextlib.suppress(ConnectionError):  # the event that failed was this connection's: it may be lost
        client.call("status")
    assert "the socket server failed; serving again" in caplog.text
    assert client.call("status")["real"] is True
    assert RpcClient(isolated_env.socket, timeout=5).call("echo", {"a": 1}) == {"params": {"a": 1}}


# --------------------------------------------------------------------------- the fuzz test

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
_json = st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=8)
_methods = st.sampled_from(["status", "echo", "boom", "not_json", "nope", ""]) | _json.filter(
    lambda m: m != "subscribe")


@st.composite
def _request_objects(draw: st.DrawFn) -> bytes:
    obj: dict[str, Any] = {}
    for key, values in (("jsonrpc", st.just("2.0") | _json), ("id", _json), ("method", _methods),
                        ("params", st.dictionaries(st.text(max_size=4), _json, max_size=3) | _json)):
        if draw(st.booleans()):
            obj[key] = draw(values)
    if draw(st.booleans()):
        obj.update(draw(st.dictionaries(st.text(max_size=6), _json, max_size=2)))
    return json.dumps(obj, ensure_ascii=draw(st.booleans())).encode("utf-8", "surrogatepass")


_lines = (_request_objects()
          | _json.map(lambda v: json.dumps(v).encode())
          | st.binary(max_size=40)
          | st.text(max_size=40).map(lambda t: t.encode("utf-8", "surrogatepass")))


def test_fuzzed_request_shapes_never_knock_the_socket_out(isolated_env) -> None:
    srv = SocketServer(isolated_env.socket, _handlers())
    srv.add_handlers({"status": _handlers()["status"]}, quick=["status"])
    srv.start()
    try:
        @settings(max_examples=150, deadline=None, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
        @given(st.lists(_lines, min_size=1, max_size=4))
        def one_connection(lines: list[bytes]) -> None:
            payload = b"".join(line.replace(b"\n", b" ") + b"\n" for line in lines)
            _exchange(isolated_env.socket, payload)

        one_connection()
        assert RpcClient(isolated_env.socket, timeout=5).call("status")["real"] is True
    finally:
        srv.stop()


def test_the_daemons_own_methods_answer_wrong_params_and_serve_on(isolated_env, seed_daemon) -> None:
    """The real daemon: the request that killed its socket, then every method with params of the
    wrong type or missing: each gets a JSON-RPC error other than "internal error", and the same
    connection, the CLI and status go on."""
    import subprocess

    from daemon_helpers import DEMO_LIBRARY, ohsync_cmd
    from ohsync.daemon.protocol import DAEMON_METHODS, MEMORY_METHODS

    s = seed_daemon(tree=DEMO_LIBRARY, poll_interval=0.5)
    proc = s.start(wait=("idle", "attention"))
    methods = [m for m in DAEMON_METHODS + MEMORY_METHODS if m not in ("shutdown", "wait")]
    keys = ["timeout", "mirror", "permalink", "title", "observations", "folder", "query", "path", "limit", "text",
            "find", "keep", "list"]
    internal = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(60)
        sock.connect(str(isolated_env.socket))
        reader = sock.makefile("rb")
        sock.sendall(b'{"jsonrpc":"2.0","id":null,"method":["status"]}\n{"jsonrpc":"2.0","id":0,"method":{"a":1}}\n')
        assert [json.loads(reader.readline())["error"]["code"] for _ in range(2)] == [INVALID_REQUEST] * 2
        n = 0
        for method in methods:
            for key in keys:
                for value in (None, "x", 5, [], {"a": 1}):
                    n += 1
                    sock.sendall(json.dumps({"jsonrpc": "2.0", "id": n, "method": method,
                                             "params": {key: value}}).encode() + b"\n")
                    answer = json.loads(reader.readline())
                    assert answer["id"] == n
                    if "error" in answer and answer["error"]["code"] == INTERNAL_ERROR:
                        internal.append((method, key, value, answer["error"]["message"]))
    assert internal == []
    assert proc.status()["state"] in ("idle", "attention", "syncing", "paused", "starting")
    out = subprocess.run([*ohsync_cmd(), "status"], capture_output=True, text=True, env=isolated_env.vars(),
                         timeout=60)
    assert out.returncode == 0 and "not running" not in out.stdout + out.stderr
