"""A cold mirror learns the whole tree from one recursive listing
(``engine/remote_scan.py``), and falls back to one listing per folder where
that listing cannot be trusted: a commit landed while seahub walked it (the
tree may mix two commits), or the walk failed with seahub's HTML 500.

devserver walks the recursive listing as seahub does (every folder below
the listed one resolved by path from the head at that moment, see
``DevServer.walk_hook``), so the tests land a commit in the middle of it.
"""
from __future__ import annotations

import pytest

from devserver_fixtures import c, rid  # noqa: F401 - fixtures
from engine_helpers import USER, make_mirror, mirrored, read_tree
from ohsync.engine import remote_scan

RECURSIVE = r"^GET /api2/repos/[-0-9a-f]+/dir/\?.*recursive=1"
PER_FOLDER = r"^GET /api2/repos/[-0-9a-f]+/dir/\?p=[^&]*$"


def _tree(devserver, folders: int = 12, per_folder: int = 3) -> tuple[str, dict[str, bytes]]:
    """A library of ``folders`` folders three levels deep, each with ``per_folder`` small files."""
    repo = devserver.create_library(USER, "Cold")
    files = {}
    for i in range(folders):
        folder = f"/t{i % 3}/m{i % 6}/d{i}"
        for j in range(per_folder):
            files[f"{folder}/n{j}.md"] = f"note {i}.{j}\n".encode() * (j + 2)
    files["/top.md"] = b"top\n"
    for path, data in files.items():
        devserver.put_file(repo, path, data)
    return repo, files


def test_a_cold_mirror_lists_the_tree_once_not_folder_by_folder(devserver, tmp_path):
    repo, files = _tree(devserver)
    mirror = make_mirror(devserver, repo, tmp_path)
    devserver.reset_counters()
    report = mirror.sync()
    assert report.errors == []
    assert devserver.request_count(RECURSIVE) == 1
    assert devserver.request_count(PER_FOLDER) == 0
    assert devserver.request_count(r"^GET /api2/repos/[-0-9a-f]+/$") == 2  # the head, and the head again after
    assert read_tree(mirror.root) == mirrored(devserver.tree(repo)) == files
    for path, data in files.items():
        assert mirror.state.get_base(path[1:]) is not None
    devserver.reset_counters()
    again = mirror.sync()
    assert again.downloaded == [] and again.uploaded == [] and again.errors == []
    assert devserver.request_count() == 1  # the snapshot it kept is the tree: nothing listed again


def test_a_commit_during_the_walk_falls_back_to_the_per_folder_walk(devserver, tmp_path):
    repo, files = _tree(devserver)
    landed = []

    def commit_once(path: str) -> None:
        if not landed and path.count("/") == 2:  # inside the walk, after the first folders were listed
            devserver.put_file(repo, "/t2/late.md", b"landed during the walk\n")
            landed.append(path)

    devserver.walk_hook = commit_once
    mirror = make_mirror(devserver, repo, tmp_path)
    devserver.reset_counters()
    report = mirror.sync()
    devserver.walk_hook = None
    assert landed and report.errors == []
    assert devserver.request_count(RECURSIVE) == 1
    assert devserver.request_count(PER_FOLDER) > 0  # the mixed answer was not used
    files["/t2/late.md"] = b"landed during the walk\n"
    assert read_tree(mirror.root) == mirrored(devserver.tree(repo)) == files


def test_a_moved_folder_during_the_walk_never_splits_or_loses_it(devserver, tmp_path):
    """The move lands between the listing of ``/t0`` (which still holds ``m0``) and
    the walk into ``/t1``: the mixed answer lists ``m0`` twice.  It is not used."""
    repo, files = _tree(devserver)
    moved = []

    def move_once(path: str) -> None:
        if not moved and path == "/t1":
            devserver.move_path(repo, "/t0/m0", "/t1")
            moved.append(path)

    devserver.walk_hook = move_once
    mirror = make_mirror(devserver, repo, tmp_path)
    report = mirror.sync()
    devserver.walk_hook = None
    assert moved and report.errors == []
    tree = devserver.tree(repo)
    assert any(p.startswith("/t1/m0/") for p in tree) and not any(p.startswith("/t0/m0/") for p in tree)
    assert read_tree(mirror.root) == mirrored(tree)


def test_a_folder_removed_during_the_walk_answers_500_and_the_walk_goes_per_folder(devserver, tmp_path):
    repo, files = _tree(devserver)
    removed = []

    def remove_once(path: str) -> None:
        if not removed and path == "/t1/m1":
            devserver.delete_path(repo, "/t1/m1")
            removed.append(path)

    devserver.walk_hook = remove_once
    mirror = make_mirror(devserver, repo, tmp_path)
    devserver.reset_counters()
    report = mirror.sync()
    devserver.walk_hook = None
    assert removed and report.errors == []
    assert devserver.request_count(PER_FOLDER) > 0
    expected = {p: d for p, d in files.items() if not p.startswith("/t1/m1/")}
    assert read_tree(mirror.root) == mirrored(devserver.tree(repo)) == expected


def test_the_recursive_listing_answers_seahubs_500_when_a_folder_vanishes_mid_walk(devserver, c, rid):
    c.post(f"/api2/repos/{rid}/dir/", params={"p": "/a/b"}, data={"operation": "mkdir", "create_parents": "true"})
    devserver.walk_hook = lambda path: devserver.delete_path(rid, "/a/b") if path == "/a/b" else None
    try:
        resp = c.get(f"/api2/repos/{rid}/dir/", params={"p": "/", "recursive": "1"})
    finally:
        devserver.walk_hook = None
    assert resp.status_code == 500 and resp.headers["content-type"].startswith("text/html")
    again = c.get(f"/api2/repos/{rid}/dir/", params={"p": "/", "recursive": "1"})
    assert again.status_code == 200 and [e["name"] for e in again.json()] == ["a"]


def test_a_library_above_the_bound_is_walked_folder_by_folder(devserver, tmp_path, monkeypatch):
    repo, files = _tree(devserver)
    monkeypatch.setattr(remote_scan, "RECURSIVE_MAX_FILES", len(files) - 1)
    mirror = make_mirror(devserver, repo, tmp_path)
    devserver.reset_counters()
    assert mirror.sync().errors == []
    assert devserver.request_count(RECURSIVE) == 0
    assert devserver.request_count(PER_FOLDER) == 1 + len(devserver.dirs(repo))  # the root and every folder
    assert read_tree(mirror.root) == mirrored(devserver.tree(repo)) == files


@pytest.mark.parametrize("count", [0, 10**9])
def test_an_unknown_or_huge_file_count_never_asks_for_the_whole_tree(devserver, tmp_path, monkeypatch, count):
    repo, files = _tree(devserver, folders=3)
    original = devserver.store.repo_stats
    monkeypatch.setattr(devserver.store, "repo_stats", lambda rid: (original(rid)[0], count))
    mirror = make_mirror(devserver, repo, tmp_path)
    devserver.reset_counters()
    assert mirror.sync().errors == []
    assert devserver.request_count(RECURSIVE) == 0
    assert read_tree(mirror.root) == files


def test_a_stale_low_file_count_only_picks_the_listing_never_misses_files(devserver, tmp_path, monkeypatch):
    """``file_count`` is computed lazily and may lag far behind the tree: it
    only picks one recursive listing over the walk; what that listing holds
    (checked against the head's root, not against the count) is the tree."""
    repo, files = _tree(devserver)
    monkeypatch.setattr(remote_scan, "RECURSIVE_MAX_FILES", len(files) - 1)  # the real size is above the bound
    original = devserver.store.repo_stats
    monkeypatch.setattr(devserver.store, "repo_stats", lambda rid: (original(rid)[0], 1))  # counted at 1 file
    mirror = make_mirror(devserver, repo, tmp_path)
    devserver.reset_counters()
    assert mirror.sync().errors == []
    assert devserver.request_count(RECURSIVE) == 1 and devserver.request_count(PER_FOLDER) == 0
    assert read_tree(mirror.root) == mirrored(devserver.tree(repo)) == files
    assert {p[1:] for p in files} <= set(mirror.state.remote_snapshot())  # what later passes compare with


@pytest.mark.parametrize("fault", [{"status": 500}, {"drop": True}], ids=["500", "dropped"])
def test_a_recursive_listing_that_keeps_failing_falls_back_to_the_walk(devserver, tmp_path, fault):
    """A 5xx, or a connection closed without an answer (as when the walk outlasts the read
    timeout): the walk per folder gets the tree instead, at once."""
    repo, files = _tree(devserver)
    devserver.inject_fault("GET", r"recursive=1", count=10, **fault)
    mirror = make_mirror(devserver, repo, tmp_path)
    devserver.reset_counters()
    report = mirror.sync()
    assert report.errors == []
    assert devserver.request_count(RECURSIVE) == 1  # not sent again: a slow walk would only repeat itself
    assert devserver.request_count(PER_FOLDER) == 1 + len(devserver.dirs(repo))
    assert read_tree(mirror.root) == mirrored(devserver.tree(repo)) == files
