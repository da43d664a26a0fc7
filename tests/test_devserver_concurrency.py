"""Concurrent writers: commits are serialised, every upload succeeds, the
later one wins and ids stay consistent with the content."""
from __future__ import annotations

import threading

import httpx

from ohsync.devserver import file_id

USER = "user@example.edu.cn"


def test_parallel_uploads_to_the_same_path(devserver, devserver_token):
    rid = devserver.create_library(USER, "race")
    headers = {"Authorization": f"Token {devserver_token}"}
    link = httpx.get(f"{devserver.url}/api2/repos/{rid}/upload-link/", headers=headers).json()
    results: list[tuple[int, str, bytes]] = []
    lock = threading.Lock()

    def writer(n: int) -> None:
        with httpx.Client(timeout=60) as c:
            for i in range(10):
                data = f"writer {n} round {i}\n".encode()
                r = c.post(link, params={"ret-json": "1"}, data={"parent_dir": "/", "replace": "1"},
                           files={"file": ("same.md", data)})
                with lock:
                    results.append((r.status_code, r.json()[0]["id"], data))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 40 and all(s == 200 for s, _, _ in results)
    assert all(fid == file_id(data) for _, fid, data in results)
    final = devserver.read_file(rid, "/same.md")
    assert final in {data for _, _, data in results}
    listing = httpx.get(f"{devserver.url}/api2/repos/{rid}/dir/", headers=headers).json()
    assert [(e["name"], e["id"]) for e in listing] == [("same.md", file_id(final))]
    # one commit per upload, chained without loss
    history = devserver.history(rid)
    assert len(history) == 41
    assert all(history[i]["parent_id"] == history[i + 1]["commit_id"] for i in range(40))


def test_parallel_uploads_of_different_files_all_land(devserver, devserver_token):
    rid = devserver.create_library(USER, "many")
    headers = {"Authorization": f"Token {devserver_token}"}
    link = httpx.get(f"{devserver.url}/api2/repos/{rid}/upload-link/", headers=headers).json()

    def writer(n: int) -> None:
        with httpx.Client(timeout=60) as c:
            for i in range(5):
                r = c.post(link, data={"parent_dir": "/", "relative_path": f"w{n}"},
                           files={"file": (f"f{i}.md", f"{n}-{i}".encode())})
                assert r.status_code == 200

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    tree = devserver.tree(rid)
    assert tree == {f"/w{n}/f{i}.md": f"{n}-{i}".encode() for n in range(5) for i in range(5)}
