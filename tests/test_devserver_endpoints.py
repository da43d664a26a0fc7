"""Contract tests of devserver endpoints beyond what the transcripts pin down
(shapes per docs/seafile-api.md)."""
from __future__ import annotations

import io
import unicodedata
import zipfile

import httpx

from devserver_fixtures import c, rid  # noqa: F401 - fixtures used as parameters
from ohsync.devserver import file_id

USER = "user@example.edu.cn"



def upload(c, rid, name, data, parent="/", **fields):
    link = c.get(f"/api2/repos/{rid}/upload-link/", params={"p": parent}).json()
    r = c.post(link, params={"ret-json": "1"}, data={"parent_dir": parent, **fields}, files={"file": (name, data)})
    assert r.status_code == 200, r.text
    return r.json()[0]


def test_auth_header_variants(c, devserver_token):
    base = str(c.base_url)
    r = httpx.get(base + "/api2/auth/ping/", headers={"Authorization": f"bearer {devserver_token}"})
    assert r.status_code == 200
    r = httpx.get(base + "/api2/auth/ping/", headers={"Authorization": "Token"})
    assert r.status_code == 401 and r.json() == {"detail": "Invalid token header. No credentials provided."}
    r = httpx.get(base + "/api2/auth/ping/", headers={"Authorization": "Token a b"})
    assert r.status_code == 401 and "should not contain spaces" in r.json()["detail"]
    r = httpx.get(base + "/api2/auth/ping/", headers={"Authorization": f"Basic {devserver_token}"})
    assert r.status_code == 403


def test_wrong_method_unknown_url_and_missing_slash(c):
    r = c.put("/api2/repos/")
    assert r.status_code == 405 and r.json() == {"detail": 'Method "PUT" not allowed.'}
    r = c.get("/api2/nope/")
    assert r.status_code == 404 and r.headers["content-type"].startswith("text/html")
    r = c.get("/api2/repos", params={"nameContains": "x"})
    assert r.status_code == 301 and r.headers["location"].endswith("/api2/repos/?nameContains=x")


def test_listing_order_and_recursive_parent_dirs(c, devserver, rid):
    for p in ("/order/Bdir", "/order/adir", "/order/_dir", "/order/adir/inner"):
        devserver.mkdir(rid, p)
    for n in ("Zeta.txt", "alpha.txt", "Beta.txt", "_u.txt", "10.txt", "9.txt", "a.TXT", "Café.txt"):
        devserver.put_file(rid, f"/order/{n}", n.encode())
    r = c.get(f"/api2/repos/{rid}/dir/", params={"p": "/order"})
    assert [e["name"] for e in r.json()] == ["_dir", "adir", "Bdir", "10.txt", "9.txt", "_u.txt", "a.TXT",
                                             "alpha.txt", "Beta.txt", "Café.txt", "Zeta.txt"]
    r = c.get(f"/api2/repos/{rid}/dir/", params={"p": "/", "recursive": "1"})
    got = [(e["parent_dir"], e["name"]) for e in r.json()]
    assert got[:4] == [("/", "order"), ("/order", "_dir"), ("/order", "adir"), ("/order/adir", "inner")]
    r = c.get(f"/api2/repos/{rid}/dir/", params={"p": "/order", "recursive": "1", "t": "d"})
    assert [(e["parent_dir"], e["name"]) for e in r.json()] == [
        ("/order/", "_dir"), ("/order/", "adir"), ("/order/adir", "inner"), ("/order/", "Bdir")]
    assert c.get(f"/api2/repos/{rid}/dir/", params={"p": "/", "t": "x"}).status_code == 400


def test_oid_walk_skips_unchanged_subtrees(c, devserver, rid):
    devserver.put_file(rid, "/a/x.md", b"1")
    devserver.put_file(rid, "/b/y.md", b"2")
    oids = {p: c.get(f"/api2/repos/{rid}/dir/", params={"p": p}).headers["oid"] for p in ("/", "/a", "/b")}
    devserver.put_file(rid, "/a/x.md", b"changed")
    for p, changed in (("/", True), ("/a", True), ("/b", False)):
        r = c.get(f"/api2/repos/{rid}/dir/", params={"p": p, "oid": oids[p]})
        assert (r.json() != "uptodate") == changed
        assert ("dir_perm" in r.headers) == changed


def test_nfd_upload_stored_as_nfc_lookups_exact(c, rid):
    nfd = unicodedata.normalize("NFD", "Café.md")
    e = upload(c, rid, nfd, b"x")
    assert e["name"] == "Café.md"
    assert c.get(f"/api2/repos/{rid}/file/detail/", params={"p": "/Café.md"}).status_code == 200
    assert c.get(f"/api2/repos/{rid}/file/detail/", params={"p": "/" + nfd}).status_code == 404


def test_fileserver_auto_rename_rules(c, rid):
    for name in (".env", "report.tar.gz", "README"):
        upload(c, rid, name, b"1")
    names = [upload(c, rid, n, b"2")["name"] for n in (".env", "report.tar.gz", "README")]
    assert names == [" (1).env", "report.tar (1).gz", "README (1)"]


def test_chunked_upload_resume(c, rid):
    data = bytes(range(256)) * 4000  # 1,024,000 bytes
    link = c.get(f"/api2/repos/{rid}/upload-link/", params={"p": "/"}).json()
    q = {"parent_dir": "/", "file_name": "big.bin"}
    assert c.get(f"/api/v2.1/repos/{rid}/file-uploaded-bytes/", params=q).json() == {"uploadedBytes": 0}
    step = 300000
    for start in range(0, len(data), step):
        end = min(start + step, len(data)) - 1
        r = c.post(link, params={"ret-json": "1"}, data={"parent_dir": "/"},
                   files={"file": ("big.bin", data[start:end + 1])},
                   headers={"Content-Range": f"bytes {start}-{end}/{len(data)}",
                            "Content-Disposition": 'attachment; filename="big.bin"'})
        assert r.status_code == 200
        if end < len(data) - 1:
            assert r.json() == {"success": True}
            assert c.get(f"/api/v2.1/repos/{rid}/file-uploaded-bytes/", params=q).json() == {"uploadedBytes": end + 1}
        else:
            assert r.json() == [{"id": file_id(data), "name": "big.bin", "size": len(data)}]
    assert c.get(f"/api/v2.1/repos/{rid}/file-uploaded-bytes/", params=q).json() == {"uploadedBytes": 0}


def test_update_link_and_identical_content(c, devserver, rid):
    upload(c, rid, "doc.md", b"v1\n")
    link = c.get(f"/api2/repos/{rid}/update-link/", params={"p": "/"}).json()
    r = c.post(link, data={"target_file": "/doc.md"}, files={"file": ("whatever", b"v2\n")})
    assert r.status_code == 200 and r.text == file_id(b"v2\n")
    assert r.headers["content-type"] == "text/plain; charset=utf-8"
    head = devserver.head_commit(rid)
    r = c.post(link, data={"target_file": "/doc.md"}, files={"file": ("doc.md", b"v2\n")})
    assert r.text == file_id(b"v2\n") and devserver.head_commit(rid) == head
    assert devserver.history(rid)[0]["description"] == 'Modified "doc.md"'


def test_download_link_pinned_to_version_and_one_time(c, devserver, rid):
    upload(c, rid, "a.txt", b"first\n")
    r = c.get(f"/api2/repos/{rid}/file/", params={"p": "/a.txt", "reuse": "1"})
    link, oid = r.json(), r.headers["oid"]
    assert oid == file_id(b"first\n")
    devserver.put_file(rid, "/a.txt", b"second\n")
    d = httpx.get(link)
    assert d.content == b"first\n" and d.headers["etag"] == oid
    assert httpx.get(link).status_code == 200  # reuse=1
    one = c.get(f"/api2/repos/{rid}/file/", params={"p": "/a.txt"}).json()
    assert httpx.head(one).status_code == 200
    r = httpx.get(one)
    assert r.status_code == 403 and r.text == "Access token not found\n"
    assert c.get(f"/api2/repos/{rid}/file/", params={"p": "/a.txt", "reuse": "2"}).status_code == 400


def test_range_requests(c, rid):
    data = bytes(range(256))
    upload(c, rid, "r.bin", data)
    link = c.get(f"/api2/repos/{rid}/file/", params={"p": "/r.bin", "reuse": "1"}).json()
    r = httpx.get(link, headers={"Range": "bytes=10-19"})
    assert r.status_code == 206 and r.content == data[10:20]
    assert r.headers["content-range"] == "bytes 10-19/256" and r.headers["accept-ranges"] == "bytes"
    r = httpx.get(link, headers={"Range": "bytes=250-999"})
    assert r.content == data[250:] and r.headers["content-range"] == "bytes 250-255/256"
    r = httpx.get(link, headers={"Range": "bytes=-3"})
    assert r.content == data[-3:]
    r = httpx.get(link, headers={"Range": "bytes=256-"})
    assert r.status_code == 416 and r.headers["content-range"] == "bytes */256"
    r = httpx.get(link)
    assert r.status_code == 200 and "accept-ranges" not in r.headers


def test_api2_file_ops(c, devserver, rid):
    upload(c, rid, "a.md", b"a")
    devserver.mkdir(rid, "/dst")
    r = c.post(f"/api2/repos/{rid}/file/", params={"p": "/a.md"}, data={"operation": "rename", "newname": "b.md"})
    assert r.status_code == 301 and r.json() == "success"
    r = c.post(f"/api2/repos/{rid}/file/", params={"p": "/b.md"},
               data={"operation": "copy", "dst_repo": rid, "dst_dir": "/dst"})
    assert r.status_code == 200 and r.json() == {"repo_id": rid, "parent_dir": "/dst/", "obj_name": "b.md"}
    r = c.post(f"/api2/repos/{rid}/file/", params={"p": "/b.md"},
               data={"operation": "move", "dst_repo": rid, "dst_dir": "/dst"})
    assert r.status_code == 301 and r.json()["obj_name"] == "b (1).md"
    r = c.post(f"/api2/repos/{rid}/file/", params={"p": "/dst/new.md"}, data={"operation": "create"})
    assert r.status_code == 201 and r.headers["location"].endswith("?p=/dst/new.md")
    assert devserver.tree(rid) == {"/dst/b.md": b"a", "/dst/b (1).md": b"a", "/dst/new.md": b""}
    r = c.post(f"/api2/repos/{rid}/file/", params={"p": "/dst/b.md"}, json={"operation": "rename", "newname": "z"})
    assert r.status_code == 400  # api2 reads form fields only


def test_v21_file_and_dir_ops(c, devserver, rid):
    upload(c, rid, "a.md", b"a")
    r = c.get(f"/api/v2.1/repos/{rid}/file/", params={"p": "/a.md"})
    assert r.json()["obj_id"] == file_id(b"a") and r.json()["parent_dir"] == "/"
    r = c.post(f"/api/v2.1/repos/{rid}/dir/", params={"p": "/d"}, json={"operation": "mkdir"})
    assert r.json()["obj_name"] == "d" and r.json()["obj_id"] == "0" * 40
    r = c.post(f"/api/v2.1/repos/{rid}/dir/", params={"p": "/d"}, json={"operation": "mkdir"})
    assert r.json()["obj_name"] == "d (1)"
    r = c.post(f"/api/v2.1/repos/{rid}/file/", params={"p": "/a.md"},
               json={"operation": "move", "dst_repo": rid, "dst_dir": "/d"})
    assert r.json()["parent_dir"] == "/d" and r.json()["obj_name"] == "a.md"
    r = c.post(f"/api/v2.1/repos/{rid}/dir/", params={"p": "/d"}, json={"operation": "rename", "newname": "e"})
    assert r.json()["obj_name"] == "e" and r.json()["obj_id"] != "0" * 40
    r = c.get(f"/api/v2.1/repos/{rid}/dir/", params={"p": "/e", "with_parents": "true"})
    assert [(e["parent_dir"], e["name"]) for e in r.json()["dirent_list"]] == [("/", "d (1)"), ("/", "e"),
                                                                               ("/e/", "a.md")]
    r = c.delete(f"/api/v2.1/repos/{rid}/dir/", params={"p": "/e"})
    assert r.json()["success"] is True
    assert devserver.tree(rid) == {}


def test_batch_move_delete_and_history(c, devserver, rid):
    devserver.put_file(rid, "/src/a.md", b"a")
    devserver.put_file(rid, "/src/b.md", b"b")
    devserver.mkdir(rid, "/dst")
    devserver.put_file(rid, "/dst/a.md", b"existing")
    r = c.post("/api/v2.1/repos/sync-batch-move-item/",
               json={"src_repo_id": rid, "src_parent_dir": "/src", "src_dirents": ["a.md", "b.md"],
                     "dst_repo_id": rid, "dst_parent_dir": "/dst"})
    assert r.json() == {"success": True}
    assert sorted(devserver.tree(rid)) == ["/dst/a (1).md", "/dst/a.md", "/dst/b.md"]
    head = devserver.head_commit(rid)
    r = c.request("DELETE", "/api/v2.1/repos/batch-delete-item/",
                  json={"repo_id": rid, "parent_dir": "/dst", "dirents": ["a.md", "b.md"]})
    assert r.json() == {"success": True, "commit_id": head}
    assert sorted(devserver.tree(rid)) == ["/dst/a (1).md"]
    hist = c.get(f"/api2/repos/{rid}/history/", params={"per_page": 2}).json()
    assert len(hist["commits"]) == 2 and hist["page_next"] is True
    assert hist["commits"][0]["parent_id"] == hist["commits"][1]["id"]
    v21 = c.get(f"/api/v2.1/repos/{rid}/history/").json()
    assert v21["data"][-1]["description"] == "Created library"


def test_zip_task(c, devserver, rid):
    devserver.put_file(rid, "/Files/a.md", b"A")
    devserver.put_file(rid, "/Files/sub/b.md", b"B")
    devserver.mkdir(rid, "/Files/empty")
    tok = c.get(f"/api/v2.1/repos/{rid}/zip-task/", params={"parent_dir": "/", "dirents": "Files"}).json()
    assert set(tok) == {"zip_token"}
    assert c.get("/api/v2.1/query-zip-progress/", params={"token": tok["zip_token"]}).status_code == 200
    r = httpx.get(f"{devserver.url}/seafhttp/zip/{tok['zip_token']}")
    assert r.status_code == 200 and "Files.zip" in r.headers["content-disposition"]
    zf = zipfile.ZipFile(io.BytesIO(r.content))
    assert sorted(zf.namelist()) == ["Files/a.md", "Files/empty/", "Files/sub/b.md"]
    assert zf.read("Files/sub/b.md") == b"B"
    assert httpx.get(f"{devserver.url}/seafhttp/zip/{tok['zip_token']}").status_code == 403  # one-time


def test_repo_list_rename_and_delete(c, devserver):
    r = c.post("/api2/repos/", json={"name": "json-made", "desc": "d"})
    assert r.status_code == 200
    rid = r.json()["repo_id"]
    r = c.post(f"/api2/repos/{rid}/", params={"op": "rename"}, data={"repo_name": "renamed"})
    assert r.json() == "success"
    assert [x["name"] for x in c.get("/api2/repos/", params={"nameContains": "RENAMED"}).json()] == ["renamed"]
    assert c.get("/api2/repos/", params={"type": "group"}).json() == []
    assert c.delete(f"/api/v2.1/repos/{rid}/").json() == {"success": True}
    assert c.get(f"/api2/repos/{rid}/").status_code == 404


def test_v21_dir_delete_missing_and_file_delete(c, devserver, rid):
    devserver.put_file(rid, "/f.md", b"f")
    head = devserver.head_commit(rid)
    assert c.delete(f"/api/v2.1/repos/{rid}/file/", params={"p": "/f.md"}).json() == {"success": True,
                                                                                      "commit_id": head}
    assert c.delete(f"/api/v2.1/repos/{rid}/file/", params={"p": "/f.md"}).json() == {"success": True}
    r = c.delete(f"/api/v2.1/repos/{rid}/dir/", params={"p": "/nope"})
    assert r.status_code == 404


def test_v21_commit_diff(c, devserver, rid):
    devserver.put_file(rid, "/Files/a.md", b"a")
    devserver.put_file(rid, "/Files/c.md", b"c")
    c.post(f"/api2/repos/{rid}/file/", params={"p": "/Files/a.md"}, data={"operation": "rename", "newname": "b.md"})
    head = devserver.head_commit(rid)
    r = c.get(f"/api/v2.1/repos/{rid}/commits/{head}/")
    assert r.status_code == 200
    assert r.json()["commit_diffs"] == [{"op_type": "renamed", "path": "/Files/a.md", "new_path": "/Files/b.md"}]
    assert r.json()["commit_info"]["description"] == 'Renamed "a.md"'
    devserver.put_file(rid, "/Files/c.md", b"c2")
    devserver.mkdir(rid, "/New")
    diffs = c.get(f"/api/v2.1/repos/{rid}/commits/{devserver.head_commit(rid)}/").json()["commit_diffs"]
    assert diffs == [{"op_type": "newdir", "path": "/New", "new_path": ""}]
    prev = devserver.history(rid)[1]["commit_id"]
    diffs = c.get(f"/api/v2.1/repos/{rid}/commits/{prev}/").json()["commit_diffs"]
    assert diffs == [{"op_type": "modified", "path": "/Files/c.md", "new_path": ""}]
    assert c.get(f"/api/v2.1/repos/{rid}/commits/{'f' * 40}/").status_code == 404
