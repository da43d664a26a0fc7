"""A connection that cannot be made names the address and the cause in one sentence; "Offline"
only when there is no route at all (engine/client/reach.py)."""

from __future__ import annotations

import errno
import os
import socket
import sys
import threading

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import isolated_env  # noqa: F401
from ohsync.engine.client import SeafileClient
from ohsync.engine.errors import NetworkError, UnreachableError, classify
from tls_helpers import tls_server  # noqa: F401


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _fail(url: str, **kw) -> NetworkError:
    client = SeafileClient(url, None, retries=1, sleep=lambda s: None, **kw)
    try:
        with pytest.raises(NetworkError) as e:
            client.server_info()
    finally:
        client.close()
    return e.value


def test_a_refused_port_is_named() -> None:
    port = _free_port()
    exc = _fail(f"http://127.0.0.1:{port}")
    failure = classify(exc)
    assert isinstance(exc, UnreachableError) and failure.title == "Server unreachable"
    assert f"http://127.0.0.1:{port} refused the connection" in failure.message
    assert "wrong port" in failure.message and "Offline" not in failure.title


def test_an_unknown_host_is_named(monkeypatch) -> None:
    def no_such_host(host, *args, **kwargs):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_such_host)  # no DNS query leaves this machine
    failure = classify(_fail("https://seafile.exmaple.edu"))
    assert failure.title == "Unknown host"
    assert "There is no host named seafile.exmaple.edu" in failure.message and "typo" in failure.message


def test_no_route_is_the_only_offline(monkeypatch) -> None:
    real = socket.socket.connect

    def unreachable(self, address):
        if address[0] == "127.0.0.1":
            raise OSError(errno.ENETUNREACH, os.strerror(errno.ENETUNREACH))
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", unreachable)
    port = _free_port()
    failure = classify(_fail(f"http://127.0.0.1:{port}"))
    assert failure.title == "Offline" and f"No route to http://127.0.0.1:{port}" in failure.message


def test_a_server_that_does_not_answer_is_named() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)
    port = listener.getsockname()[1]
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:  # accepts, reads nothing, answers nothing
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except OSError:
                continue

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    try:
        failure = classify(_fail(f"http://127.0.0.1:{port}", timeout=0.5))
    finally:
        stop.set()
        t.join(5)
        for s in accepted:
            s.close()
        listener.close()
    assert failure.title == "Server not answering"
    assert f"http://127.0.0.1:{port} did not answer in time" in failure.message


def test_an_untrusted_certificate_is_named(tls_server) -> None:
    failure = classify(_fail(tls_server))
    assert failure.title == "TLS error"
    assert f"The TLS certificate of {tls_server.rstrip('/')}" in failure.message and "SSL_CERT_FILE" in failure.message


def test_login_with_a_typo_in_the_port_names_it(isolated_env, monkeypatch, capsys) -> None:
    import io

    from ohsync.daemon.cli.main import main

    port = _free_port()
    monkeypatch.setattr(sys, "stdin", io.StringIO("secret\n"))
    assert main(["login", "--server", f"http://127.0.0.1:{port}", "--username", "u@x", "--password-stdin"]) == 1
    err = capsys.readouterr().err
    assert f"http://127.0.0.1:{port} refused the connection" in err and "Offline" not in err


def test_a_port_over_65535_is_said_to_be_invalid_not_refused() -> None:
    """A typo such as :99999 is a port that cannot exist: the sentence says so, never "refused"."""
    failure = classify(_fail("http://127.0.0.1:99999"))
    assert failure.title == "Invalid server address"
    assert "http://127.0.0.1:99999 has an invalid port, 99999" in failure.message
    assert "1 to 65535" in failure.message and "refused" not in failure.message


@pytest.mark.parametrize("url, written", [("http://127.0.0.1:99999", "99999"), ("https://cloud.example.edu:0", "0"),
                                          ("https://cloud.example.edu:84a3", "84a3")])
def test_a_server_address_with_an_invalid_port_is_refused_at_once(url: str, written: str) -> None:
    from ohsync.daemon.config import ConfigError, normalize_server_url

    with pytest.raises(ConfigError) as e:
        normalize_server_url(url)
    assert f"has an invalid port ({written})" in e.value.message and "1 to 65535" in e.value.message
    assert normalize_server_url("https://cloud.example.edu:8443/") == "https://cloud.example.edu:8443"
