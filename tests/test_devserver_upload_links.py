"""devserver binds an upload link to its folder as the real file servers do
(docs/seafile-api.md; ``tests/data/seafile-transcripts/upload.jsonl``, recorded
on a real server): a POST naming another ``parent_dir`` is refused, and
``relative_path`` below the link's folder creates the folders it names.
"""
from __future__ import annotations

import httpx
import pytest

import transcript_replay as replay  # tests/ is on the path (pyproject pythonpath)
from engine_helpers import USER

#: The recorded steps of the per-folder rules, with the steps that set them up and clean up.
PER_FOLDER_STEPS = {1, 2, 3, 14, 15, 29}


def test_the_recorded_per_folder_rules_replay_unchanged(devserver):
    steps = [s for s in replay.load_steps(replay.TRANSCRIPTS / "upload.jsonl") if s["step"] in PER_FOLDER_STEPS]
    assert {s["step"] for s in steps} == PER_FOLDER_STEPS
    notes = {s["step"]: s["note"] for s in steps}
    assert "relative_path" in notes[14] and "parent_dir other than the link's folder" in notes[15]
    rp = replay.Replayer(devserver.url, USER, "secret")
    try:
        results = [rp.run_step(s) for s in steps]
    finally:
        rp.client.close()
    assert [m for r in results for m in r.mismatches] == []


@pytest.fixture
def fs(devserver):
    token = devserver.token_for(USER)
    repo = devserver.create_library(USER, "Links")
    with httpx.Client(base_url=devserver.url, headers={"Authorization": f"Token {token}"}, timeout=30) as c:
        def link(folder: str) -> str:
            return c.get(f"/api2/repos/{repo}/upload-link/", params={"p": folder}).json()

        def post(url: str, parent: str, rel: str | None = None, name: str = "f.txt") -> httpx.Response:
            form = {"parent_dir": parent, **({"relative_path": rel} if rel is not None else {})}
            return c.post(url, params={"ret-json": "1"}, data=form, files={"file": (name, b"x\n")})

        yield repo, link, post


def test_a_link_refuses_every_other_parent_dir(devserver, fs):
    repo, link, post = fs
    devserver.put_file(repo, "/a/b/keep.txt", b"k\n")
    root, a = link("/"), link("/a")
    for url, parent, rel in ((root, "/a", None), (root, "/a", "b"), (a, "/", None), (a, "/", "a"),
                             (a, "/a/b", None)):
        resp = post(url, parent, rel)
        assert resp.status_code == 403, (parent, rel, resp.text)
        assert resp.json() == {"error": "Parent dir doesn't match."}
    assert set(devserver.tree(repo)) == {"/a/b/keep.txt"}


def test_relative_path_below_the_links_folder_creates_the_folders(devserver, fs):
    repo, link, post = fs
    devserver.put_file(repo, "/a/keep.txt", b"k\n")
    root, a = link("/"), link("/a")
    assert post(root, "/", "x/y/z").json()[0]["name"] == "f.txt"
    assert post(a, "/a", "b/c").status_code == 200
    assert post(root, "/", "a/b/c", name="g.txt").status_code == 200  # existing folders are reused
    assert set(devserver.tree(repo)) == {"/a/keep.txt", "/x/y/z/f.txt", "/a/b/c/f.txt", "/a/b/c/g.txt"}
    assert post(root, "/", "../up").status_code == 500  # as the real server answers
    devserver.put_file(repo, "/afile", b"f\n")
    assert post(root, "/", "afile/under").status_code == 500  # a file in the way
