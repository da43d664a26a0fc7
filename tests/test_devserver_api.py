"""The in-process Python API of DevServer, fault injection, counters, hooks,
the ``/_devserver/`` control endpoint and persistence across restarts."""
from __future__ import annotations

import threading
import time

import httpx
import pytest

from ohsync.devserver import DevServer, file_id

USER = "user@example.edu.cn"


def _client(srv, token):
    return httpx.Client(base_url=srv.url, headers={"Authorization": f"Token {token}"}, timeout=30)


def test_library_api_roundtrip(devserver, tmp_path):
    seed = tmp_path / "seed"
    (seed / "sub" / "deep").mkdir(parents=True)
    (seed / "a.md").write_bytes(b"hello\n")
    (seed / "sub" / "b.txt").write_bytes(b"")
    (seed / "empty").mkdir()
    rid = devserver.create_library(USER, "OH-Memory", from_tree=seed)
    assert devserver.library_id("OH-Memory") == rid
    assert devserver.tree(rid) == {"/a.md": b"hello\n", "/sub/b.txt": b""}
    assert devserver.dirs(rid) == {"/sub", "/sub/deep", "/empty"}
    assert [c["description"] for c in devserver.history(rid)][-1] == "Created library"
    assert len(devserver.history(rid)) == 2  # seeding is one commit

    head = devserver.head_commit(rid)
    fid = devserver.put_file(rid, "/x/y/new.md", b"new\n")
    assert fid == file_id(b"new\n")
    assert devserver.head_commit(rid) != head
    assert devserver.read_file(rid, "/x/y/new.md") == b"new\n"
    assert "/x/y" in devserver.dirs(rid)
    head = devserver.head_commit(rid)
    assert devserver.put_file(rid, "/x/y/new.md", b"new\n") == fid
    assert devserver.head_commit(rid) == head  # identical content: no commit
    devserver.put_file(rid, "/x/y/new.md", b"changed\n")
    assert devserver.file_id(rid, "/x/y/new.md") == file_id(b"changed\n")
    devserver.delete_path(rid, "/x")
    assert "/x/y/new.md" not in devserver.tree(rid)
    with pytest.raises(FileNotFoundError):
        devserver.read_file(rid, "/x/y/new.md")
    with pytest.raises(FileNotFoundError):
        devserver.delete_path(rid, "/nope")


def test_put_file_is_visible_over_http(devserver, devserver_token):
    rid = devserver.create_library(USER, "lib")
    devserver.put_file(rid, "/n.md", b"hello\n")
    with _client(devserver, devserver_token) as c:
        r = c.get(f"/api2/repos/{rid}/dir/", params={"p": "/"})
        assert r.json()[0]["id"] == "4226e5b3d7da1a4575241f9501f9882aee9b5ea9"
        assert r.headers["oid"] == c.get(f"/api2/repos/{rid}/").json()["root"]
        r = c.get("/api2/repos/")
        assert r.json()[0]["head_commit_id"] == devserver.head_commit(rid)


def test_persistence_across_restart(tmp_path):
    data = tmp_path / "data"
    srv = DevServer(data, users={USER: "secret"}).start()
    try:
        token = srv.token_for(USER)
        rid = srv.create_library(USER, "keep")
        srv.put_file(rid, "/a/b.txt", b"persist\n")
        head = srv.head_commit(rid)
        with _client(srv, token) as c:
            link = c.get(f"/api2/repos/{rid}/upload-link/", params={"p": "/"}).json()
    finally:
        srv.stop()
    srv2 = DevServer(data, users={USER: "secret"}).start()
    try:
        assert srv2.token_for(USER) == token
        assert srv2.head_commit(rid) == head
        assert srv2.read_file(rid, "/a/b.txt") == b"persist\n"
        with _client(srv2, token) as c:
            assert c.get("/api2/auth/ping/").json() == "pong"
            assert [r["id"] for r in c.get("/api2/repos/").json()] == [rid]
            # the upload link minted before the restart still works (path is host-independent)
            path = "/seafhttp/" + link.split("/seafhttp/", 1)[1]
            r = c.post(path, data={"parent_dir": "/"}, files={"file": ("late.txt", b"late\n")})
            assert r.status_code == 200 and r.text == file_id(b"late\n")
    finally:
        srv2.stop()


def test_revoke_token_gives_401(devserver, devserver_token):
    with _client(devserver, devserver_token) as c:
        assert c.get("/api2/auth/ping/").status_code == 200
        devserver.revoke_token(devserver_token)
        r = c.get("/api2/auth/ping/")
        assert r.status_code == 401 and r.json() == {"detail": "Invalid token"}
    assert devserver.token_for(USER) != devserver_token


def test_quota_443(devserver, devserver_token):
    rid = devserver.create_library(USER, "q")
    with _client(devserver, devserver_token) as c:
        assert c.get("/api2/account/info/").json()["total"] == -2
        devserver.set_quota(USER, 10)
        info = c.get("/api2/account/info/").json()
        assert info["total"] == 10 and info["usage"] == 0
        link = c.get(f"/api2/repos/{rid}/upload-link/").json()
        r = c.post(link, data={"parent_dir": "/"}, files={"file": ("big.bin", b"x" * 20)})
        assert r.status_code == 443
        assert r.content == b'{"error": "Out of quota.\n"}\n'
        r = c.post(link, data={"parent_dir": "/"}, files={"file": ("small.bin", b"x" * 5)})
        assert r.status_code == 200
        assert c.get("/api2/account/info/").json()["usage"] == 5
        devserver.set_quota(USER, 5)
        r = c.get(f"/api2/repos/{rid}/upload-link/")
        assert r.status_code == 443 and r.json() == {"error_msg": "Out of quota."}


def test_fault_status_count_and_retry_after(devserver, devserver_token):
    with _client(devserver, devserver_token) as c:
        devserver.inject_fault("GET", r"^/api2/repos/$", status=429, retry_after=3, count=2)
        for _ in range(2):
            r = c.get("/api2/repos/")
            assert r.status_code == 429 and r.headers["Retry-After"] == "3"
            assert r.json() == {"detail": "Request was throttled. Expected available in 3 seconds."}
        assert c.get("/api2/repos/").status_code == 200
        devserver.inject_fault(None, r"/api2/auth/ping/", status=500)
        r = c.get("/api2/auth/ping/")
        assert r.status_code == 500 and r.json() == {"error_msg": "Internal Server Error"}
        assert c.get("/api2/auth/ping/").status_code == 200
        # method filter: a POST fault does not hit GETs
        devserver.inject_fault("POST", r"/api2/auth/ping/", status=500)
        assert c.get("/api2/auth/ping/").status_code == 200


def test_fault_on_fileserver_upload_and_latency(devserver, devserver_token):
    rid = devserver.create_library(USER, "f")
    with _client(devserver, devserver_token) as c:
        link = c.get(f"/api2/repos/{rid}/upload-link/").json()
        devserver.inject_fault("POST", r"/seafhttp/upload-api/", status=500)
        r = c.post(link, data={"parent_dir": "/"}, files={"file": ("a.txt", b"a")})
        assert r.status_code == 500 and r.headers["content-type"] == "text/plain; charset=utf-8"
        assert devserver.tree(rid) == {}
        devserver.inject_fault("GET", r"/api2/ping/", latency=0.4)
        t0 = time.monotonic()
        assert c.get("/api2/ping/").json() == "pong"
        assert time.monotonic() - t0 >= 0.35


def test_fault_drop_closes_connection(devserver):
    devserver.inject_fault("GET", r"/api2/ping/", drop=True)
    with httpx.Client(base_url=devserver.url, timeout=10) as c:
        with pytest.raises(httpx.TransportError):
            c.get("/api2/ping/")
        assert c.get("/api2/ping/").json() == "pong"


def test_counters(devserver, devserver_token):
    rid = devserver.create_library(USER, "c")
    devserver.reset_counters()
    with _client(devserver, devserver_token) as c:
        for _ in range(3):
            c.get(f"/api2/repos/{rid}/dir/", params={"p": "/"})
        c.get("/api2/repos/")
    assert devserver.request_count() == 4
    assert devserver.requests["GET /api2/repos/{id}/dir/"] == 3
    assert devserver.request_count("GET /api2/repos/{id}/dir/") == 3
    assert devserver.request_count(r"^GET /api2/repos/$") == 1
    assert devserver.request_count(r"p=%2F|p=/") == 3
    devserver.reset_counters()
    assert devserver.request_count() == 0 and devserver.requests == {}


def test_after_request_runs_before_the_client_reads_back(devserver, devserver_token):
    rid = devserver.create_library(USER, "race")
    seen = []

    def second_writer(srv):
        seen.append(threading.current_thread().name)
        srv.put_file(rid, "/doc.md", b"theirs\n")

    devserver.after_request("POST", r"/seafhttp/upload-api/", second_writer)
    with _client(devserver, devserver_token) as c:
        link = c.get(f"/api2/repos/{rid}/upload-link/").json()
        r = c.post(link, params={"ret-json": "1"},
                   data={"parent_dir": "/", "replace": "1"}, files={"file": ("doc.md", b"ours\n")})
        assert r.json()[0]["id"] == file_id(b"ours\n")
        # the read-back sees the other writer's version
        meta = c.get(f"/api2/repos/{rid}/file/metadata/", params={"p": "/doc.md"}).json()
        assert meta["id"] == file_id(b"theirs\n")
        # the hook ran once only
        c.post(link, data={"parent_dir": "/", "replace": "1"}, files={"file": ("doc.md", b"ours\n")})
    assert len(seen) == 1
    assert devserver.read_file(rid, "/doc.md") == b"ours\n"


def test_control_endpoint(devserver):
    rid = devserver.create_library(USER, "ctl")
    with httpx.Client(base_url=devserver.url, timeout=10) as c:
        assert c.get("/_devserver/").json()["url"] == devserver.url
        fid = c.post("/_devserver/faults", json={"method": "GET", "path_regex": "/api2/ping/", "status": 503,
                                                 "count": 1}).json()["id"]
        assert [f["id"] for f in c.get("/_devserver/faults").json()] == [fid]
        assert c.get("/api2/ping/").status_code == 503
        assert c.get("/api2/ping/").status_code == 200
        counters = c.get("/_devserver/counters").json()
        assert counters["endpoints"]["GET /api2/ping/"] == 2 and counters["total"] == 2
        assert c.get("/_devserver/count", params={"pattern": "ping"}).json() == {"count": 2}
        c.post("/_devserver/reset", json={})
        assert c.get("/_devserver/counters").json()["total"] == 0
        r = c.put(f"/_devserver/libraries/{rid}/file", params={"path": "/d/x.md"}, content=b"hello\n")
        assert r.json() == {"id": file_id(b"hello\n")}
        tree = c.get(f"/_devserver/libraries/{rid}/tree").json()
        assert tree["files"] == {"/d/x.md": {"id": file_id(b"hello\n"), "size": 6}} and tree["dirs"] == ["/d"]
        assert c.get(f"/_devserver/libraries/{rid}/file", params={"path": "/d/x.md"}).content == b"hello\n"
        token = c.get("/_devserver/token", params={"email": USER}).json()["token"]
        c.post("/_devserver/revoke-token", json={"token": token})
        r = c.get("/api2/auth/ping/", headers={"Authorization": f"Token {token}"})
        assert r.status_code == 401
        c.post("/_devserver/after-request", json={"method": "GET", "path_regex": "/api2/ping/",
                                                  "action": {"put_file": {"repo_id": rid, "path": "/h.md",
                                                                          "text": "hooked"}}})
        c.get("/api2/ping/")
        assert devserver.read_file(rid, "/h.md") == b"hooked"
        assert c.delete(f"/_devserver/libraries/{rid}/file", params={"path": "/h.md"}).json() == {"ok": True}
        # control requests are not counted
        assert c.get("/_devserver/counters").json()["endpoints"] == {"GET /api2/auth/ping/": 1,
                                                                      "GET /api2/ping/": 1}


def test_fault_after_processing_applies_the_upload(devserver, devserver_token):
    rid = devserver.create_library(USER, "ambiguous")
    with _client(devserver, devserver_token) as c:
        link = c.get(f"/api2/repos/{rid}/upload-link/").json()
        devserver.inject_fault("POST", "/seafhttp/upload-api/", drop=True, after_processing=True)
        with pytest.raises(httpx.TransportError):
            c.post(link, data={"parent_dir": "/"}, files={"file": ("lost-answer.md", b"x")})
        assert devserver.tree(rid) == {"/lost-answer.md": b"x"}
        devserver.inject_fault("POST", "/seafhttp/upload-api/", status=502, after_processing=True)
        r = c.post(link, data={"parent_dir": "/"}, files={"file": ("second.md", b"y")})
        assert r.status_code == 502 and devserver.read_file(rid, "/second.md") == b"y"


def test_expire_links(devserver, devserver_token):
    rid = devserver.create_library(USER, "exp")
    devserver.put_file(rid, "/a.md", b"a")
    with _client(devserver, devserver_token) as c:
        link = c.get(f"/api2/repos/{rid}/upload-link/").json()
        dl = c.get(f"/api2/repos/{rid}/file/", params={"p": "/a.md", "reuse": "1"}).json()
        assert devserver.expire_links() == 2
        r = c.post(link, data={"parent_dir": "/"}, files={"file": ("b.md", b"b")})
        assert r.status_code == 403 and r.json() == {"error": "Access token not found"}
        assert httpx.get(dl).status_code == 403
    devserver.put_file(rid, "/p.md", b"p", modifier="phone@example.edu.cn", mtime=1600000000)
    with _client(devserver, devserver_token) as c:
        e = [x for x in c.get(f"/api2/repos/{rid}/dir/").json() if x["name"] == "p.md"][0]
        assert e["modifier_email"] == "phone@example.edu.cn" and e["mtime"] == 1600000000
