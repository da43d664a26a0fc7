"""Remote changes found from the commits' own changes (engine/remote_diffs.py):
a change deep in the tree costs depth + 3 requests or fewer, the commit of our
own upload costs no listing, and everything unusual (a rename, a folder
removed, a merge, a trimmed history, a server without the endpoint, another
writer after our upload) still ends with every version where it belongs."""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from engine_helpers import USER, make_mirror, settled_mirror
from ohsync.engine import remote_diffs
from ohsync.engine.client.commits import CommitInfo
from ohsync.engine.remote_scan import scan_remote

LISTING = "GET /api2/repos/{id}/dir/"
DIFF = "GET /api/v2.1/repos/{id}/commits/{commit}/"
HISTORY = "GET /api2/repos/{id}/history/"
DETAIL = "GET /api2/repos/{id}/file/detail/"
DEEP = "a/b/c/deep.md"


def _tree(root: Path) -> Path:
    """Three folders deep, siblings at every level, 60 files."""
    for i in range(15):
        for folder in ("", "a", "a/b", "a/b/c", "x", "x/y"):
            if folder.count("/") < 3 and i < 10:
                path = root / folder / f"n{i}.md"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(f"note {folder} {i}\n", encoding="utf-8")
    (root / DEEP).write_text("deep\n", encoding="utf-8")
    return root


@pytest.fixture
def mirror(devserver, tmp_path):
    yield from settled_mirror(devserver, "Diffs", _tree(tmp_path / "seed"), tmp_path)


def _poll(m, devserver):
    devserver.reset_counters()
    report = m.engine.sync([], check_remote=True)
    assert not report.errors, report.errors
    return report


def _walked_files(m) -> dict[str, str]:
    """rel path → id of every file on the server now, by a fresh full walk."""
    scan = scan_remote(m.client, m.repo_id, "/", prev_head=None, prev_root_oid=None, prev_snapshot={}, force=True)
    return {rel: e.id for rel, e in scan.snapshot.items() if not e.is_dir}


def _snapshot_files(m) -> dict[str, str]:
    return {rel: e.id for rel, e in m.state.remote_snapshot().items() if not e.is_dir}


def test_remote_change_three_deep_costs_depth_plus_three(mirror, devserver):
    devserver.put_file(mirror.repo_id, "/" + DEEP, b"deep, changed on the server\n")
    report = _poll(mirror, devserver)
    assert report.downloaded == [DEEP] and mirror.read(DEEP) == b"deep, changed on the server\n"
    # head, history, one commit's changes, the file's detail, download link, download
    assert devserver.request_count() == 6 <= DEEP.count("/") + 3
    assert devserver.request_count(LISTING) == 0 and devserver.request_count(DIFF) == 1
    assert devserver.request_count(DETAIL) == 1
    assert devserver.request_count(HISTORY) == 1  # shared with the rollback check
    assert _snapshot_files(mirror) == _walked_files(mirror)
    # the folders above the change are to be listed again by a later walk
    snap = mirror.state.remote_snapshot()
    assert snap["a"].id == snap["a/b"].id == snap["a/b/c"].id == "" and snap["x"].id
    assert mirror.engine.sync([], check_remote=True).transferred == 0


@pytest.fixture
def executor():
    pool = ThreadPoolExecutor(4)
    yield pool
    pool.shutdown(wait=True)


@pytest.mark.parametrize("pool", [False, True])
def test_several_commits_and_a_removed_file(mirror, devserver, pool, executor):
    repo = mirror.repo_id
    if pool:  # the commits are read at once on the transfer pool
        mirror.engine.ctx.executor = executor
    devserver.put_file(repo, "/a/n1.md", b"one\n")
    devserver.put_file(repo, "/a/b/c/new.md", b"new file\n")
    devserver.delete_path(repo, "/x/n2.md")
    devserver.put_file(repo, "/a/n1.md", b"one, twice\n")
    devserver.put_file(repo, "/a/n3.md", b"three\n")
    report = _poll(mirror, devserver)
    assert sorted(report.downloaded) == ["a/b/c/new.md", "a/n1.md", "a/n3.md"]
    assert report.deleted_local == ["x/n2.md"] and not (mirror.root / "x/n2.md").exists()
    assert mirror.read("a/n1.md") == b"one, twice\n"
    # five commits read; a (two paths) listed once, a/b/c/new.md asked directly,
    # x/n2.md's removal confirmed by its 404 before the local delete (confirm.py)
    assert devserver.request_count(DIFF) == 5 and devserver.request_count(LISTING) == 1
    assert devserver.request_count(DETAIL) == 2
    assert _snapshot_files(mirror) == _walked_files(mirror)


def test_a_folder_back_to_its_old_id_is_still_seen(mirror, devserver):
    """The diff path leaves the folders above a change without an id, so a
    later walk lists them even when the server's id is the one listed last."""
    repo = mirror.repo_id
    old = devserver.read_file(repo, "/" + DEEP)
    devserver.put_file(repo, "/" + DEEP, b"changed\n")
    assert _poll(mirror, devserver).downloaded == [DEEP]
    # back to the old bytes, plus a new folder elsewhere: the walk decides this time
    devserver.put_file(repo, "/" + DEEP, old)
    devserver.put_file(repo, "/x/new/f.md", b"in a new folder\n")
    report = _poll(mirror, devserver)
    assert devserver.request_count(LISTING) >= 4  # the walk from the root
    assert mirror.read(DEEP) == old and DEEP in report.downloaded
    assert mirror.read("x/new/f.md") == b"in a new folder\n"
    assert _snapshot_files(mirror) == _walked_files(mirror)


def test_a_file_renamed_and_moved_is_moved_here(mirror, devserver):
    repo = mirror.repo_id
    devserver.rename_path(repo, "/a/b/n4.md", "n4-renamed.md")
    devserver.rename_path(repo, "/x/n1.md", "moved.md")
    devserver.move_path(repo, "/x/moved.md", "/a/b/c")
    report = _poll(mirror, devserver)
    assert sorted(report.moved) == [("a/b/n4.md", "a/b/n4-renamed.md"), ("x/n1.md", "a/b/c/moved.md")]
    assert mirror.read("a/b/n4-renamed.md") == b"note a/b 4\n" and not (mirror.root / "a/b/n4.md").exists()
    assert mirror.read("a/b/c/moved.md") == b"note x 1\n" and not (mirror.root / "x/n1.md").exists()
    assert report.deleted_local == [] and report.downloaded == []
    assert devserver.request_count(LISTING) == 0 and devserver.request_count(DIFF) == 3
    assert _snapshot_files(mirror) == _walked_files(mirror)


@pytest.mark.parametrize("change", ["folder rename", "folder delete", "new folder"])
def test_folder_changes_take_the_walk(mirror, devserver, change):
    repo = mirror.repo_id
    devserver.put_file(repo, "/a/n3.md", b"edited before\n")
    if change == "folder rename":
        devserver.rename_path(repo, "/a/b", "b-renamed")
    elif change == "folder delete":
        devserver.delete_path(repo, "/x/y")
    else:
        devserver.put_file(repo, "/a/b/c/d/e.md", b"in a new folder\n")
    devserver.put_file(repo, "/x/n5.md", b"edited after\n")
    report = _poll(mirror, devserver)
    assert devserver.request_count(LISTING) >= 3  # root, a, x ...: the walk
    assert mirror.read("a/n3.md") == b"edited before\n" and mirror.read("x/n5.md") == b"edited after\n"
    if change == "folder rename":
        assert mirror.read("a/b-renamed/c/deep.md") == b"deep\n" and not (mirror.root / "a/b").exists()
    elif change == "folder delete":
        assert not any((mirror.root / "x/y").glob("*.md"))
        assert sorted(report.deleted_local) == [f"x/y/n{i}.md" for i in range(10)]
    else:
        assert mirror.read("a/b/c/d/e.md") == b"in a new folder\n"
    assert _snapshot_files(mirror) == _walked_files(mirror)


def test_own_upload_is_an_echo_without_listing(mirror, devserver):
    mirror.write(DEEP, b"edited here\n")
    assert mirror.engine.sync([DEEP]).uploaded == [DEEP]
    report = _poll(mirror, devserver)
    assert report.transferred == 0
    # head, history: the read-back named the commit, which says it modified that one file
    assert devserver.request_count() == 2 and devserver.request_count(LISTING) == 0
    assert devserver.request_count(DIFF) == 0
    assert mirror.engine.sync([], check_remote=True).requests == 1  # the head: nothing moved since
    assert mirror.engine.sync([], check_remote=True).idle
    # two saves of the same file, one poll: still no listing, and no commit asked about
    for text in (b"edit 1\n", b"edit 2\n"):
        mirror.write(DEEP, text)
        assert mirror.engine.sync([DEEP], check_remote=False).uploaded == [DEEP]
    _poll(mirror, devserver)
    assert devserver.request_count(LISTING) == 0 and devserver.request_count(DIFF) == 0
    assert _snapshot_files(mirror) == _walked_files(mirror)


def test_own_commits_beside_another_writers_are_told_apart(mirror, devserver):
    """Our two saves and another writer's edit of the same folder between
    them: only the other writer's commit is asked about, and its change is
    pulled; ours are known from the read-back."""
    mirror.write(DEEP, b"edit 1\n")
    assert mirror.engine.sync([DEEP], check_remote=False).uploaded == [DEEP]
    devserver.put_file(mirror.repo_id, "/a/b/c/n1.md", b"the phone, between our saves\n")
    mirror.write(DEEP, b"edit 2\n")
    assert mirror.engine.sync([DEEP], check_remote=False).uploaded == [DEEP]
    report = _poll(mirror, devserver)
    assert report.downloaded == ["a/b/c/n1.md"] and mirror.read("a/b/c/n1.md") == b"the phone, between our saves\n"
    assert devserver.request_count(DIFF) == 1 and devserver.request_count(LISTING) == 0
    assert mirror.read(DEEP) == b"edit 2\n" == devserver.read_file(mirror.repo_id, "/" + DEEP)
    assert _snapshot_files(mirror) == _walked_files(mirror)


def test_a_commit_of_ours_that_says_it_changed_more_is_asked_about(mirror, devserver, monkeypatch):
    """A commit the read-back named whose description is not the change of
    that one file is asked about like any other."""
    real = mirror.client.commit_history

    def history(*args, **kwargs):  # the commit describes itself otherwise
        commits, more = real(*args, **kwargs)
        return [dataclasses.replace(c, desc='Added "x" and 2 more files.') for c in commits], more

    monkeypatch.setattr(mirror.client, "commit_history", history)
    mirror.write(DEEP, b"edit 1\n")
    assert mirror.engine.sync([DEEP], check_remote=False).uploaded == [DEEP]
    _poll(mirror, devserver)
    assert devserver.request_count(DIFF) == 1
    assert _snapshot_files(mirror) == _walked_files(mirror)


@pytest.mark.parametrize("same_file", [True, False])
def test_another_writer_after_our_upload_is_not_an_echo(mirror, devserver, same_file):
    mirror.write(DEEP, b"edited here\n")
    assert mirror.engine.sync([DEEP]).uploaded == [DEEP]
    theirs = DEEP if same_file else "a/b/c/n1.md"
    # on the same file, an edit of our upload (one that shares none of its lines could be a stale overwrite)
    data = (b"edited here\n" if same_file else b"") + b"another writer, right after\n"
    devserver.put_file(mirror.repo_id, "/" + theirs, data)
    report = _poll(mirror, devserver)
    assert report.downloaded == [theirs] and mirror.read(theirs) == data
    assert devserver.request_count(DETAIL) == 1 and devserver.request_count(LISTING) == 0
    if not same_file:
        assert mirror.read(DEEP) == b"edited here\n"
    assert _snapshot_files(mirror) == _walked_files(mirror)


def test_another_writer_with_our_exact_bytes_then_more(mirror, devserver):
    """Another writer stores our very bytes just before our upload (so ours
    makes no commit), then changes another file: its commits are counted,
    not taken for ours, and its other change is pulled."""
    repo = mirror.repo_id
    data = b"the same merge on two computers\n"
    mirror.write(DEEP, data)

    def race(srv):
        srv.put_file(repo, "/" + DEEP, data)
        srv.put_file(repo, "/a/b/c/n2.md", b"theirs too\n")

    devserver.after_request("GET", r"/update-link/", race)
    commits = len(devserver.history(repo))
    assert mirror.engine.sync([DEEP], check_remote=False).uploaded == [DEEP]
    assert len(devserver.history(repo)) == commits + 2  # theirs only: ours changed nothing
    report = _poll(mirror, devserver)
    assert report.downloaded == ["a/b/c/n2.md"] and mirror.read("a/b/c/n2.md") == b"theirs too\n"
    # the read-back named their commit of our bytes (one file, modified): only the other is asked about
    assert mirror.read(DEEP) == data and devserver.request_count(DIFF) == 1
    assert _snapshot_files(mirror) == _walked_files(mirror)


def test_a_merge_commit_takes_the_walk(mirror, devserver):
    """An update based on an older head that crossed another edit: the
    server keeps both (an SFConflict file) in a merge commit."""
    repo = mirror.repo_id
    stale_head = devserver.head_commit(repo)
    devserver.put_file(repo, "/a/n2.md", b"first writer\n")
    other = make_mirror(devserver, repo, mirror.root.parent, "other").client
    try:
        other.update(repo, "/a/n2.md", b"based on an older head\n", head=stale_head)
    finally:
        other.close()
    assert devserver.history(repo)[0]["second_parent_id"]
    _poll(mirror, devserver)
    assert devserver.request_count(DIFF) == 0 and devserver.request_count(LISTING) >= 2
    local = {p.read_bytes() for p in mirror.root.rglob("*.md")}
    assert {b"first writer\n", b"based on an older head\n"} <= local  # both versions kept here
    assert _snapshot_files(mirror) == _walked_files(mirror)


def test_a_trimmed_history_takes_the_walk(mirror, devserver, monkeypatch):
    repo = mirror.repo_id
    devserver.put_file(repo, "/" + DEEP, b"changed\n")
    real = mirror.client.commit_history

    def trimmed(repo_id, *, page=1, per_page=100):
        commits, _ = real(repo_id, page=page, per_page=per_page)
        return commits[:0], False  # the history limit dropped everything before the head

    monkeypatch.setattr(mirror.client, "commit_history", trimmed)
    report = _poll(mirror, devserver)
    assert report.downloaded == [DEEP] and mirror.engine.regression() is None
    assert devserver.request_count(DIFF) == 0 and devserver.request_count(LISTING) == 4


def test_too_many_commits_take_the_walk(mirror, devserver):
    repo = mirror.repo_id
    for i in range(remote_diffs.MAX_COMMITS + 1):
        devserver.put_file(repo, f"/x/y/n{i % 10}.md", f"edit {i}\n".encode())
    report = _poll(mirror, devserver)
    assert len(report.downloaded) == 10 and devserver.request_count(DIFF) == 0
    assert _snapshot_files(mirror) == _walked_files(mirror)


@pytest.mark.parametrize("status", [404, 403])
def test_a_server_without_commit_diffs_takes_the_walk_from_then_on(mirror, devserver, status):
    repo = mirror.repo_id
    devserver.inject_fault("GET", r"/api/v2\.1/repos/[^/]+/commits/", status=status, count=100)
    for n in range(2):
        devserver.put_file(repo, "/" + DEEP, f"changed {n}\n".encode())
        report = _poll(mirror, devserver)
        assert report.downloaded == [DEEP] and mirror.read(DEEP) == f"changed {n}\n".encode()
        assert devserver.request_count(DIFF) == (1 if n == 0 else 0)


def test_a_failing_commit_read_takes_the_walk(mirror, devserver):
    devserver.inject_fault("GET", r"/api/v2\.1/repos/[^/]+/commits/", status=500, count=10)
    devserver.put_file(mirror.repo_id, "/" + DEEP, b"changed\n")
    report = _poll(mirror, devserver)
    assert report.downloaded == [DEEP] and devserver.request_count(LISTING) == 4


def test_a_subtree_mirror_ignores_changes_outside_it(devserver, tmp_path):
    repo = devserver.create_library(USER, "Diffs-sub", from_tree=_tree(tmp_path / "seed"))
    m = make_mirror(devserver, repo, tmp_path)
    m.engine = type(m.engine)(m.client, repo, m.root, m.state, remote_root="/a", options=m.engine.options)
    try:
        assert not m.engine.sync().errors
        devserver.put_file(repo, "/x/n1.md", b"outside\n")
        devserver.rename_path(repo, "/x/n2.md", "moved.md")  # a rename outside: not ours to walk for
        devserver.put_file(repo, "/a/b/n1.md", b"inside\n")
        report = _poll(m, devserver)
        assert report.downloaded == ["b/n1.md"] and m.read("b/n1.md") == b"inside\n"
        assert devserver.request_count(LISTING) == 0 and devserver.request_count(DETAIL) == 1
    finally:
        m.state.close()
        m.client.close()


def _commit(cid: str, parent: str | None, second: str | None = None) -> CommitInfo:
    return CommitInfo(cid * 40, parent * 40 if parent else None, second * 40 if second else None, "", 0, "")


def test_chain_since_follows_first_parents_and_refuses_the_unusual():
    a, b, c, d = (_commit("a", None), _commit("b", "a"), _commit("c", "b"), _commit("d", "c"))
    page = [d, c, b, a]  # newest first
    assert [x.id[0] for x in remote_diffs.chain_since(page, "a" * 40, "d" * 40)] == ["b", "c", "d"]
    assert remote_diffs.chain_since(page, "d" * 40, "d" * 40) == []
    assert remote_diffs.chain_since([d, c], "a" * 40, "d" * 40) is None  # the page ends before the old head
    assert remote_diffs.chain_since(page, "e" * 40, "d" * 40) is None  # not an ancestor: reaches the first commit
    merge = _commit("m", "c", "x")
    assert remote_diffs.chain_since([merge, c, b, a], "a" * 40, "m" * 40) is None
    long = [_commit(f"{i:x}", f"{i - 1:x}" if i else None) for i in range(remote_diffs.MAX_COMMITS + 2)]
    tip = long[-1].id
    assert remote_diffs.chain_since(long[::-1], long[0].id, tip) is None
    assert len(remote_diffs.chain_since(long[::-1], long[1].id, tip) or []) == remote_diffs.MAX_COMMITS
