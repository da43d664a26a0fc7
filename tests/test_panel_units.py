"""The local page's parts without a daemon: side-by-side rows and the merge
editor's text (difflib), the event hub, the Host/Origin/session rules, and
the server's lifecycle (the secret written 0600 and removed, a port in use)."""

from __future__ import annotations

import socket
import stat
import threading
from pathlib import Path

import httpx
import pytest

from ohsync.daemon.panel.auth import PanelAuth, secret_path
from ohsync.daemon.panel.diff import merge_prefill, side_by_side
from ohsync.daemon.panel.events import CLOSED, EventHub
from ohsync.daemon.panel.server import PanelServer


def test_side_by_side_marks_changes_and_folds_equal_runs() -> None:
    live = "".join(f"line {i}\n" for i in range(1, 21)).replace("line 10\n", "line ten\n")
    other = live.replace("line ten\n", "line 10\n") + "extra\n"
    shown = side_by_side(live, other, context=2)
    kinds = [r["kind"] for r in shown["rows"]]
    assert shown["changes"] == 2 and not shown["truncated"]
    change = next(r for r in shown["rows"] if r["kind"] == "change")
    assert (change["left_no"], change["left"], change["right_no"], change["right"]) == (10, "line ten", 10, "line 10")
    insert = next(r for r in shown["rows"] if r["kind"] == "insert")
    assert insert["left"] is None and insert["right"] == "extra" and insert["right_no"] == 21
    assert kinds[0] == "skip" and shown["rows"][0]["count"] == 7  # lines 1-7 folded, 8-9 kept as context
    assert "skip" in kinds[kinds.index("change"):]


def test_merge_prefill_keeps_shared_lines_once_and_both_sides_of_each_difference() -> None:
    text = merge_prefill("a\nmine\nc", "a\ntheirs\nc\nd\n", "x.txt", ".conflict/x__remote__1.txt")
    assert text == ("a\n<<<<<<< live (x.txt)\nmine\n=======\ntheirs\n>>>>>>> other (.conflict/x__remote__1.txt)\n"
                    "c\n<<<<<<< live (x.txt)\n=======\nd\n>>>>>>> other (.conflict/x__remote__1.txt)\n")


def test_event_hub_fans_out_drops_the_oldest_and_closes() -> None:
    hub = EventHub()
    a, b = hub.open(), hub.open()
    hub.publish({"type": "status"})
    assert a.get_nowait() == {"type": "status"} and b.get_nowait() == {"type": "status"}
    for i in range(300):  # a stream that does not keep up keeps the newest
        hub.publish({"type": "synced", "n": i})
    assert a.get_nowait()["n"] == 300 - a.maxsize
    hub.close_stream(b)
    assert hub.streams == 1
    hub.close()
    assert hub.open().get_nowait() is CLOSED


def test_auth_rules() -> None:
    auth = PanelAuth("s3cret")
    auth.port = 4242
    assert auth.host_ok("127.0.0.1:4242") and auth.host_ok("LOCALHOST:4242")
    assert not auth.host_ok("127.0.0.1") and not auth.host_ok("evil:4242") and not auth.host_ok(None)
    assert auth.origin_ok("http://localhost:4242") and not auth.origin_ok("https://127.0.0.1:4242")
    assert auth.exchange("wrong") is None
    session = auth.exchange("s3cret")
    assert session is not None
    cookie, token = session
    assert "s3cret" not in session and cookie != token
    assert auth.session_ok(cookie, token) and auth.session_ok(cookie, cookie_only=True)
    assert not auth.session_ok(cookie) and not auth.session_ok(cookie, "") and not auth.session_ok("s3cret", token)
    other = auth.exchange("s3cret")
    assert other is not None and not auth.session_ok(cookie, other[1])  # one session's halves only


def _server(path: Path, port: int = 0) -> PanelServer:
    return PanelServer(path, port, lambda m, p: {"result": {}}, lambda path, mirror: {},
                       lambda path, side, mirror: None, lambda: {"ok": True, "checks": []})


def test_server_writes_the_secret_0600_and_removes_it_when_it_stops(tmp_path: Path) -> None:
    secret = secret_path(tmp_path / "ohsync.sock")
    assert secret.name == "ohsync-panel.secret"
    panel = _server(secret)
    panel.start()
    try:
        assert panel.running and stat.S_IMODE(secret.stat().st_mode) == 0o600
        assert panel.login_url() == f"{panel.address}auth#{secret.read_text().strip()}"
        r = httpx.get(panel.address, timeout=10)
        assert r.status_code == 403 and r.json()["error"].startswith("Open this page with `ohsync panel`")
        assert [t for t in threading.enumerate() if t.name == "ohsync-panel"]
    finally:
        panel.stop()
    assert not panel.running and not secret.exists()


def test_a_port_in_use_is_an_oserror_for_the_daemon_to_report(tmp_path: Path) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    try:
        panel = _server(tmp_path / "a-panel.secret", holder.getsockname()[1])
        with pytest.raises(OSError):
            panel.start()
        assert not panel.running and not (tmp_path / "a-panel.secret").exists()
        panel.stop()
    finally:
        holder.close()


def test_a_person_without_the_cookie_gets_a_page_saying_how_to_open_it(tmp_path: Path) -> None:
    panel = _server(tmp_path / "ohsync-panel.secret")
    panel.start()
    try:
        r = httpx.get(panel.address, headers={"Accept": "text/html"}, timeout=10)
        assert r.status_code == 403 and r.headers["content-type"].startswith("text/html")
        assert "Open this page with `ohsync panel`" in r.text
        api = httpx.get(panel.address + "api/state", headers={"Accept": "text/html"}, timeout=10)
        assert api.status_code == 403 and api.json()["error"].startswith("Open this page")
        assert httpx.get(panel.address + "favicon.ico", timeout=10).status_code == 204
    finally:
        panel.stop()
