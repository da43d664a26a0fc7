"""Messages carry their cause: each wrong server address gets its own sentence,
and the tray's "Could not start ohsync" names the daemon's own error."""

from __future__ import annotations

import io
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import isolated_env  # noqa: F401
from ohsync.daemon import credentials
from ohsync.daemon.cli.main import main
from ohsync.engine.client import SeafileClient
from ohsync.engine.errors import NetworkError, ProtocolError

USER = "user@example.edu.cn"  # the devserver fixture's account (conftest)


def _login(server: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    monkeypatch.setattr(sys, "stdin", io.StringIO("secret\n"))
    code = main(["login", "--server", server, "--username", USER, "--password-stdin"])
    return code, capsys.readouterr().err


def test_a_wrong_url_path_is_named(isolated_env, devserver, monkeypatch, capsys) -> None:
    code, err = _login(devserver.url + "/seafhttp/wrong", monkeypatch, capsys)
    assert code == 1 and "Traceback" not in err
    assert "Wrong server address" in err and "the path '/seafhttp/wrong' in the server address looks wrong" in err
    assert f"e.g. {devserver.url}," in err
    assert credentials.load_token(devserver.url + "/seafhttp/wrong", USER) is None


def test_https_to_a_plain_http_port_is_named(isolated_env, devserver, monkeypatch, capsys) -> None:
    https = devserver.url.replace("http://", "https://")
    code, err = _login(https, monkeypatch, capsys)
    assert code == 1 and "Traceback" not in err
    assert "answered in plain HTTP to an https:// address" in err and "Use http://" in err
    assert "has no scheme" not in err  # the scheme was given: a different sentence


def test_an_address_without_scheme_says_https_was_guessed(isolated_env, devserver, monkeypatch, capsys) -> None:
    bare = devserver.url.removeprefix("http://")
    code, err = _login(bare, monkeypatch, capsys)
    assert code == 1 and "Traceback" not in err
    assert f"The address '{bare}' has no scheme (https:// or http://), so ohsync tried https://{bare}" in err
    assert f"http://{bare} for a plain-HTTP server" in err


def test_the_three_sentences_differ(devserver) -> None:
    """Each case is its own error, not "could not connect" for all."""
    with pytest.raises(ProtocolError) as wrong_path:
        SeafileClient.obtain_token(devserver.url + "/nope", USER, "secret")
    with pytest.raises(NetworkError) as plain:
        SeafileClient.obtain_token(devserver.url.replace("http://", "https://"), USER, "secret")
    client = SeafileClient(devserver.url + "/nope", "0" * 40, retries=1)
    try:
        with pytest.raises(ProtocolError) as info:
            client.server_info()
    finally:
        client.close()
    assert "path '/nope'" in wrong_path.value.message and "path '/nope'" in info.value.message
    assert "plain HTTP" in plain.value.message
    assert len({wrong_path.value.message, plain.value.message}) == 2


def test_a_host_with_no_seafile_at_its_root_is_named(devserver) -> None:
    from ohsync.engine.client.errors import api_missing_error

    err = api_missing_error("https://example.org", "/api2/auth-token/", 404)
    assert "does not look like a Seafile server" in err.message and err.title == "Wrong server address"


@pytest.mark.parametrize("status", [200, 403, 501])
def test_a_web_server_that_is_not_seafile_is_named_at_login(status) -> None:
    """A web page (or "not implemented") for the login request: the address is
    wrong, not the password and not the server's health."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Page(BaseHTTPRequestHandler):
        def do_POST(self):
            body = b"<html><body>Welcome to nginx!</body></html>"
            self.send_response(status)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        with pytest.raises(ProtocolError) as info:
            SeafileClient.obtain_token(f"http://127.0.0.1:{server.server_port}", USER, "secret")
    finally:
        server.shutdown()
        server.server_close()
    assert info.value.title == "Wrong server address"
    assert "does not look like a Seafile server" in info.value.message and f"HTTP {status}" in info.value.message


def test_setup_says_the_scheme_was_missing(isolated_env, devserver, monkeypatch, capsys) -> None:
    bare = devserver.url.removeprefix("http://")
    monkeypatch.setattr(sys, "stdin", io.StringIO("secret\n"))
    code = main(["setup", "--server", bare, "--username", USER, "--password-stdin", "--yes", "--no-autostart"])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    assert f"'{bare}' has no scheme" in err and "plain HTTP" in err


# --------------------------------------------------------------------------- the tray's Start item


def _controller(sock: Path, command: list[str]):
    from ohsync.tray.app import TrayController

    notices: list = []
    return TrayController(sock, notify=notices.extend, start_command=command), notices


def test_could_not_start_names_the_daemons_own_error(isolated_env) -> None:
    """No login yet: the started `ohsync run` says so, and the notice repeats it."""
    from ohsync.tray.app import default_start_command

    controller, notices = _controller(isolated_env.socket, default_start_command(isolated_env.config))
    controller.start()
    try:
        assert controller.start_daemon() is False
    finally:
        controller.stop()
    assert [n.title for n in notices] == ["Could not start ohsync"]
    body = notices[0].body
    assert "exited with code 1" in body and "Not logged in" in body and "ohsync login" in body
    assert "Run `ohsync run` in a terminal" not in body  # the cause is given, not a hint to go find it


def test_could_not_start_quotes_the_last_line_of_stderr(tmp_path: Path) -> None:
    script = "import sys; print('starting', file=sys.stderr); print('ohsync: Configuration error: bad "\
             "[safety] table', file=sys.stderr); raise SystemExit(1)"
    controller, notices = _controller(tmp_path / "s.sock", [sys.executable, "-c", script])
    controller.start()
    try:
        assert controller.start_daemon() is False
    finally:
        controller.stop()
    assert notices[0].body.endswith("exited with code 1: ohsync: Configuration error: bad [safety] table")


def test_a_silent_failure_still_says_where_to_look(tmp_path: Path) -> None:
    controller, notices = _controller(tmp_path / "s.sock", [sys.executable, "-c", "raise SystemExit(3)"])
    controller.start()
    try:
        assert controller.start_daemon() is False
    finally:
        controller.stop()
    assert "exited with code 3. Run `ohsync run` in a terminal to see why." in notices[0].body
