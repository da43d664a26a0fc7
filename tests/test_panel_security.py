"""The local page's security rules, over plain HTTP against a running daemon:
the secret (a ``0600`` file beside the socket, unreadable by another user)
exchanged for an HttpOnly SameSite=Strict cookie; 403 without it; 403 for a
``Host`` other than 127.0.0.1/localhost on its port (DNS rebinding); 403
for a change without the page's own ``Origin``; no CORS headers; a strict
CSP; the secret in no log line; ``/api/health`` with the doctor's checks."""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from daemon_helpers import isolated_env, seed_daemon  # noqa: F401
from panel_helpers import REL, make_conflict


@pytest.fixture
def page(seed_daemon):
    c = make_conflict(seed_daemon)
    r = c.daemon.cli("panel", "--url")
    assert r.returncode == 0, r.stderr
    url = r.stdout.strip()
    origin, secret = url.split("/auth#")
    return c, origin, secret


@contextlib.contextmanager
def _login(origin: str, secret: str) -> Iterator[httpx.Client]:
    """A client holding a session cookie, as the page's login step leaves it."""
    with httpx.Client(base_url=origin, timeout=30) as client:
        r = client.post("/api/session", json={"secret": secret}, headers={"Origin": origin})
        assert r.status_code == 200, r.text
        client.headers["X-Ohsync-Session"] = r.json()["token"]  # as the page sends it from its storage
        yield client


def test_the_secret_is_the_users_alone_and_buys_a_strict_cookie(page, isolated_env) -> None:
    c, origin, secret = page
    secret_file = isolated_env.socket.parent / "ohsync-panel.secret"
    assert secret_file.read_text().strip() == secret
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(secret_file.parent.stat().st_mode) == 0o700
    with httpx.Client(base_url=origin, timeout=30) as anon:
        for path in ("/", "/api/state", "/api/health", "/api/events", f"/api/conflict?path={c.archived}",
                     "/api/activity"):
            assert anon.get(path).status_code == 403, path
        assert anon.get("/auth").status_code == 200  # the login page holds nothing
        wrong = anon.post("/api/session", json={"secret": secret[:-1] + "x"}, headers={"Origin": origin})
        assert wrong.status_code == 403 and "set-cookie" not in wrong.headers
    with httpx.Client(base_url=origin, timeout=30) as client:
        r = client.post("/api/session", json={"secret": secret}, headers={"Origin": origin})
        assert r.status_code == 200
        cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
        assert secret not in cookie  # the session is a value of its own, not the secret
        token = r.json()["token"]
        assert token and token not in cookie and secret != token
        # the cookie alone, as a page on another port of 127.0.0.1 could collect it, opens nothing
        for path in ("/api/state", "/api/events", f"/api/conflict?path={c.archived}"):
            assert client.get(path).status_code == 403, path
        assert client.get("/api/state", headers={"X-Ohsync-Session": token[:-1] + "x"}).status_code == 403
        assert client.get("/").status_code == 200  # the page itself holds no data
        state = client.get("/api/state", headers={"X-Ohsync-Session": token})
        assert state.status_code == 200 and [x["path"] for x in state.json()["conflicts"]] == [REL]
        with client.stream("GET", "/api/events", params={"session": token}) as events:
            assert events.status_code == 200  # the stream, which a browser opens without headers


def test_wrong_host_is_refused_even_with_the_cookie(page) -> None:
    c, origin, secret = page
    port = origin.rsplit(":", 1)[1]
    with _login(origin, secret) as client:
        assert client.get("/api/state", headers={"Host": f"localhost:{port}"}).status_code == 200
        for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1:{int(port) + 1}", f"127.0.0.2:{port}"):
            r = client.get("/api/state", headers={"Host": host})
            assert r.status_code == 403, host


def test_a_change_needs_the_pages_own_origin(page) -> None:
    c, origin, secret = page
    with _login(origin, secret) as client:
        body = {"path": c.archived, "keep": "live"}
        for headers in ({"Origin": "http://evil.example"}, {"Origin": "null"}, {}):
            r = client.post("/api/resolve", json=body, headers=headers)
            assert r.status_code == 403, headers
        assert c.status()["conflicts"] == 1 and (c.setup.mirror / c.archived).exists()  # nothing happened
        r = client.options("/api/resolve", headers={"Origin": "http://evil.example",
                                                    "Access-Control-Request-Method": "POST"})
        assert r.status_code in (403, 405)
        r = client.post("/api/resolve", json=body, headers={"Origin": origin})
        assert r.status_code == 200 and r.json()["verified"] is True
        assert c.status()["conflicts"] == 0


def test_headers_no_cors_and_a_strict_policy(page) -> None:
    c, origin, secret = page
    with _login(origin, secret) as client:
        for path in ("/", "/static/app.js", "/api/state", "/auth"):
            r = client.get(path, headers={"Origin": "http://evil.example"})
            assert not any(h.lower().startswith("access-control-") for h in r.headers), path
            csp = r.headers["content-security-policy"]
            assert "default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
            assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
            assert r.headers["x-frame-options"] == "DENY"
            assert r.headers["referrer-policy"] == "no-referrer"


def test_health_lists_the_doctors_checks(page) -> None:
    c, origin, secret = page
    with _login(origin, secret) as client:
        r = client.get("/api/health")
        assert r.status_code == 200
        health = r.json()
        checks = {x["check"]: x for x in health["checks"]}
        assert {"config", "login", "library"} <= set(checks)
        assert checks["login"]["level"] == "ok" and isinstance(health["ok"], bool)


def test_nothing_of_the_secret_or_a_file_reaches_the_log(page, isolated_env) -> None:
    c, origin, secret = page
    with _login(origin, secret) as client:
        shown = client.get(f"/api/conflict?path={c.archived}").json()
        assert "bread and butter" in shown["live"]["text"]
        client.post("/api/resolve", json={"path": c.archived, "keep": "merged", "content": "milk\nSECRET-LINE\n"},
                    headers={"Origin": origin})
    c.daemon.stop()
    logs = "".join(p.read_text(errors="replace") for p in (isolated_env.root / "state").rglob("*.log*"))
    logs += (isolated_env.root / "daemon-output.log").read_text(errors="replace")
    assert "local page at http://127.0.0.1:" in logs  # the page's address is logged, its secret never
    assert secret not in logs and "SECRET-LINE" not in logs and "bread and butter" not in logs


def test_another_users_process_cannot_read_the_secret(page, isolated_env) -> None:
    c, origin, secret = page
    if os.getuid() != 0:
        pytest.skip("needs root to run a process as another user (the file's mode is checked above)")
    secret_file = isolated_env.socket.parent / "ohsync-panel.secret"
    probe = ("import sys, socket\n"
             "try:\n    open(sys.argv[1]).read(); print('read')\nexcept PermissionError: print('denied')\n"
             "s = socket.socket(socket.AF_UNIX)\n"
             "try:\n    s.connect(sys.argv[2]); print('connected')\nexcept PermissionError: print('denied')\n")
    python = shutil.which("python3", path="/usr/bin:/bin") or sys.executable  # one "nobody" may run
    r = subprocess.run([python, "-c", probe, str(secret_file), str(isolated_env.socket)],
                       capture_output=True, text=True, timeout=30, cwd="/", user=65534, group=65534,
                       env={"PATH": os.environ.get("PATH", "")})
    assert r.stdout.split() == ["denied", "denied"], r.stdout + r.stderr
    assert Path(secret_file).exists()
