"""The watcher runs from the first second: changes made while the first pass
downloads are carried out, not reverted or split.

The first pass is slowed by devserver latency on every file download (eight
files: the per-file path with its parallel downloads is cheaper than a zip,
engine/sync/bulk.py) so that the test can act in the middle of it.  Without a watcher during that pass a local move is seen only by the
periodic full scan (a minute later) and a renamed folder is written again
under its old name (split in two on both sides).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import read_tree, mirrored, wait_for  # noqa: E402

FOLDER = {f"A/f{i:02}.md": f"file {i} in A\n".encode() * 3 for i in range(6)}
OTHER = {f"z/other{i}.txt": f"other {i}\n".encode() for i in range(2)}


@pytest.fixture
def slow_first_pass(seed_daemon, devserver):
    s = seed_daemon(files={**FOLDER, **OTHER}, poll_interval=1.0)
    devserver.inject_fault("GET", r"^/seafhttp/files/", latency=0.4, count=len(FOLDER) + len(OTHER))
    return devserver, s.repo_id, s.mirror, s.start()


def _converged(srv, repo: str, mirror: Path) -> bool:
    return read_tree(mirror) == mirrored(srv.tree(repo))


def test_folder_renamed_during_its_download_moves_as_one_folder(slow_first_pass) -> None:
    srv, repo, mirror, daemon = slow_first_pass
    wait_for(lambda: len(list((mirror / "A").glob("*.md"))) >= 3 if (mirror / "A").is_dir() else False,
             timeout=60, interval=0.02, what="the first files of A/")
    os.rename(mirror / "A", mirror / "B")
    wait_for(lambda: _converged(srv, repo, mirror) and "/B/f05.md" in srv.tree(repo), timeout=60,
             what="convergence after the rename")
    tree = srv.tree(repo)
    assert {k for k in tree if k.startswith("/B/")} == {"/B/" + k[2:] for k in FOLDER}
    assert not [k for k in tree if k.startswith("/A/")]            # not split in two
    assert not [k for k in tree if k.startswith("/.conflict/")]    # nothing conflicted
    for rel, data in FOLDER.items():
        assert tree["/B/" + rel[2:]] == data
    assert not (mirror / "A").exists()


def test_local_move_during_the_first_pass_reaches_the_server(slow_first_pass) -> None:
    srv, repo, mirror, daemon = slow_first_pass
    first = mirror / "A" / "f00.md"
    wait_for(first.is_file, timeout=60, interval=0.02, what="the first downloaded file")
    (mirror / "moved").mkdir()
    os.rename(first, mirror / "moved" / "f00.md")
    # long before the periodic full scan (a minute): the watcher saw the move
    wait_for(lambda: "/moved/f00.md" in srv.tree(repo) and "/A/f00.md" not in srv.tree(repo),
             timeout=20, what="the move on the server")
    wait_for(lambda: _converged(srv, repo, mirror), timeout=30, what="convergence")
    tree = srv.tree(repo)
    assert tree["/moved/f00.md"] == FOLDER["A/f00.md"]
    assert not [k for k in tree if k.startswith(("/.trash/", "/.conflict/"))]   # a move, not delete + new
