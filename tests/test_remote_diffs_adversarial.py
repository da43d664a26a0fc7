"""Trying to make the diff path (engine/remote_diffs.py) lose or miss a remote
change: mixed commits, renames, names, our own echoes next to another
writer's commits, merges, rollbacks, trimmed or lying histories, local edits
in flight, and a long random run.  The oracle is a second mirror synced from
scratch by the full walk: both local folders must hold the same files."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from engine_helpers import USER, make_mirror, mirrored, read_tree, settled_mirror
from ohsync.engine.errors import OhsyncError
from ohsync.engine.remote_scan import scan_remote

LISTING = "GET /api2/repos/{id}/dir/"
DIFF = "GET /api/v2.1/repos/{id}/commits/{commit}/"


def _seed(root: Path) -> Path:
    for folder in ("", "a", "a/b", "x", "x/y", "Files", "Files/docs"):
        for i in range(4):
            path = root / folder / f"n{i}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"note {folder} {i}\n", encoding="utf-8")
    return root


@pytest.fixture
def mirror(devserver, tmp_path):
    yield from settled_mirror(devserver, "Adversarial", _seed(tmp_path / "seed"), tmp_path)


def _poll(m):
    report = m.engine.sync([], check_remote=True)
    assert not report.errors, report.errors
    return report


def _files(root: Path) -> dict[str, bytes]:
    return {p: b for p, b in read_tree(root).items() if not p.startswith("/.ohsync")}


def _walked(m) -> dict[str, str]:
    scan = scan_remote(m.client, m.repo_id, "/", prev_head=None, prev_root_oid=None, prev_snapshot={}, force=True)
    return {rel: e.id for rel, e in scan.snapshot.items() if not e.is_dir}


def _snapshot(m) -> dict[str, str]:
    return {rel: e.id for rel, e in m.state.remote_snapshot().items() if not e.is_dir}


def _assert_like_the_walk(m, devserver, tmp_path: Path, name: str = "ref") -> None:
    """The mirror's files equal those of a fresh mirror synced by the walk,
    and its snapshot equals a full walk of the server."""
    assert _snapshot(m) == _walked(m)
    ref = make_mirror(devserver, m.repo_id, tmp_path, name)
    ref.engine.ctx.commit_diffs = False
    try:
        assert not ref.sync().errors
        assert _files(m.root) == _files(ref.root)
    finally:
        ref.state.close()
        ref.client.close()


def _diff_path_used(devserver) -> bool:
    return devserver.request_count(DIFF) > 0 and devserver.request_count(LISTING) < 3


SCENARIOS = {
    # file changes only: the diff path decides
    "edit twice, delete, recreate": lambda d, r: (
        d.put_file(r, "/a/n0.md", b"one\n"), d.put_file(r, "/a/n0.md", b"two\n"),
        d.delete_path(r, "/a/n1.md"), d.put_file(r, "/a/n1.md", b"back, other bytes\n"),
        d.delete_path(r, "/x/n2.md")),
    "deleted and recreated with the same bytes": lambda d, r: (
        d.delete_path(r, "/a/b/n2.md"), d.put_file(r, "/a/b/n2.md", b"note a/b 2\n")),
    "created then deleted": lambda d, r: (
        d.put_file(r, "/x/tmp.md", b"short lived\n"), d.delete_path(r, "/x/tmp.md"),
        d.put_file(r, "/x/n0.md", b"kept\n")),
    "unicode and spaces": lambda d, r: (
        d.put_file(r, "/a/Ünïcødé nötes 日本.md", b"unicode\n"), d.put_file(r, "/x/with  two spaces .md", b"sp\n"),
        d.put_file(r, "/a/Ünïcødé nötes 日本.md", b"unicode 2\n")),
    "engine folders": lambda d, r: (
        d.put_file(r, "/a/n3.md", b"make the folders first\n")),
    # renames and folders: the walk decides, nothing missed on the way
    "folder renamed with files": lambda d, r: (
        d.put_file(r, "/x/y/n0.md", b"edited before the rename\n"), d.rename_path(r, "/x/y", "yy"),
        d.put_file(r, "/a/n2.md", b"after\n")),
    "file renamed then edited": lambda d, r: (
        d.rename_path(r, "/a/n2.md", "n2-renamed.md"), d.put_file(r, "/a/n2-renamed.md", b"edited\n")),
    "case-only rename": lambda d, r: (
        d.rename_path(r, "/a/b/n1.md", "N1.md"), d.put_file(r, "/a/b/n0.md", b"x\n")),
    "newdir and deldir": lambda d, r: (
        d.put_file(r, "/Files/new/deep/f.md", b"new folder\n"), d.delete_path(r, "/Files/docs"),
        d.mkdir(r, "/x/empty"), d.put_file(r, "/x/n1.md", b"edit\n")),
    "file replaced by a folder": lambda d, r: (
        d.delete_path(r, "/a/n3.md"), d.put_file(r, "/a/n3.md/inside.md", b"now a folder\n")),
}


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
def test_mixed_commits_end_like_the_walk(mirror, devserver, tmp_path, scenario):
    repo = mirror.repo_id
    if scenario == "engine folders":
        devserver.put_file(repo, "/.conflict/old (conflict).md", b"c\n")
        devserver.put_file(repo, "/.trash/gone.md", b"t\n")
        devserver.put_file(repo, "/.git/config", b"ignored\n")
        _poll(mirror)
        devserver.put_file(repo, "/.conflict/old (conflict).md", b"c2\n")
        devserver.put_file(repo, "/.trash/gone.md", b"t2\n")
        devserver.put_file(repo, "/.trash/gone2.md", b"t3\n")
        devserver.put_file(repo, "/.git/config", b"ignored 2\n")
    # a twin synced before the change that finds it by the walk
    twin = make_mirror(devserver, repo, tmp_path, "twin")
    twin.engine.ctx.commit_diffs = False
    try:
        assert not twin.sync().errors
        SCENARIOS[scenario](devserver, repo)
        devserver.reset_counters()
        report = mirror.engine.sync([], check_remote=True)
        if scenario in ("edit twice, delete, recreate", "deleted and recreated with the same bytes",
                        "created then deleted", "unicode and spaces", "engine folders"):
            assert _diff_path_used(devserver), devserver.requests
        twin_report = twin.engine.sync([], check_remote=True)
        assert sorted(report.errors) == sorted(twin_report.errors)
        for m in (mirror, twin):
            m.engine.sync([], check_remote=True)
        assert _files(mirror.root) == _files(twin.root)
        assert _snapshot(mirror) == _snapshot(twin) == _walked(mirror)
    finally:
        twin.state.close()
        twin.client.close()
    if scenario == "file replaced by a folder":
        # the folder takes the name here too (the file, unchanged here, went to the backups)
        assert mirror.read("a/n3.md/inside.md") == b"now a folder\n"
    _assert_like_the_walk(mirror, devserver, tmp_path)
    assert mirror.engine.sync([], check_remote=True).transferred == 0


# -- a commit diff endpoint that lies, fails or answers garbage ---------------

GARBAGE = {
    "an empty list for a commit that changed a file": b'{"commit_info": {}, "commit_diffs": []}',
    "not json": b"<html>502 Bad Gateway</html>",
    "a list without paths": b'{"commit_diffs": [{"op_type": "modified"}]}',
    "a string": b'{"commit_diffs": "modified /a/n0.md"}',
    "an unknown op": b'{"commit_diffs": [{"op_type": "touched", "path": "/a/n0.md", "new_path": ""}]}',
}


@pytest.mark.parametrize("answer", sorted(GARBAGE))
def test_a_garbage_commit_diff_never_hides_a_change(mirror, devserver, tmp_path, monkeypatch, answer):
    repo = mirror.repo_id
    devserver.put_file(repo, "/a/n0.md", b"changed on the server\n")
    real = mirror.client.http.get_json

    def lying(api_path, **kw):
        if "/commits/" in api_path:
            from ohsync.engine.client.errors import parse_json
            return parse_json(GARBAGE[answer], what=kw.get("what", ""), path=kw.get("path"))
        return real(api_path, **kw)

    monkeypatch.setattr(mirror.client.http, "get_json", lying)
    report = mirror.engine.sync([], check_remote=True)
    assert mirror.read("a/n0.md") == b"changed on the server\n", report
    monkeypatch.undo()
    _assert_like_the_walk(mirror, devserver, tmp_path)


@pytest.mark.parametrize("status", [404, 500, 502])
def test_a_failing_commit_diff_on_the_second_commit(mirror, devserver, tmp_path, status):
    repo = mirror.repo_id
    devserver.put_file(repo, "/a/n0.md", b"first\n")
    devserver.put_file(repo, "/x/n0.md", b"second\n")
    second = devserver.head_commit(repo)
    devserver.inject_fault("GET", rf"/commits/{second}/", status=status, count=5)
    _poll(mirror)
    assert mirror.read("a/n0.md") == b"first\n" and mirror.read("x/n0.md") == b"second\n"
    _assert_like_the_walk(mirror, devserver, tmp_path)


# -- history going backwards, trimmed, or ending early ------------------------

def test_a_server_restored_from_history_holds_newer_local_files(mirror, devserver, tmp_path):
    repo = mirror.repo_id
    old = devserver.head_commit(repo)
    devserver.put_file(repo, "/a/n0.md", b"newer on the server\n")
    devserver.put_file(repo, "/a/made-later.md", b"made after the snapshot\n")
    _poll(mirror)
    assert mirror.read("a/made-later.md") == b"made after the snapshot\n"
    devserver.restore_to_commit(repo, old)
    devserver.put_file(repo, "/x/n1.md", b"an edit after the restore\n")  # a plain commit on the restored head
    report = _poll(mirror)
    assert mirror.engine.regression() is not None
    # nothing newer deleted or overwritten here
    assert mirror.read("a/made-later.md") == b"made after the snapshot\n"
    assert mirror.read("a/n0.md") == b"newer on the server\n"
    assert not report.deleted_local


def test_a_history_page_ending_before_the_old_head(mirror, devserver, tmp_path, monkeypatch):
    repo = mirror.repo_id
    for i in range(4):
        devserver.put_file(repo, f"/a/b/n{i}.md", f"edit {i}\n".encode())
    real = mirror.client.commit_history

    def short(repo_id, *, page=1, per_page=100):
        commits, _ = real(repo_id, page=page, per_page=per_page)
        return commits[:2], False  # the page ends after two of the four new commits

    monkeypatch.setattr(mirror.client, "commit_history", short)
    _poll(mirror)
    assert mirror.engine.regression() is None
    assert all(mirror.read(f"a/b/n{i}.md") == f"edit {i}\n".encode() for i in range(4))
    monkeypatch.undo()
    _assert_like_the_walk(mirror, devserver, tmp_path)


def test_a_merge_then_plain_commits(mirror, devserver, tmp_path):
    repo = mirror.repo_id
    stale = devserver.head_commit(repo)
    devserver.put_file(repo, "/a/n1.md", b"first writer\n")
    other = make_mirror(devserver, repo, tmp_path, "other").client
    try:
        other.update(repo, "/a/n1.md", b"based on an older head\n", head=stale)
    finally:
        other.close()
    devserver.put_file(repo, "/x/n3.md", b"after the merge\n")
    _poll(mirror)
    local = {p.read_bytes() for p in mirror.root.rglob("*.md")}
    assert {b"first writer\n", b"based on an older head\n", b"after the merge\n"} <= local
    _assert_like_the_walk(mirror, devserver, tmp_path)


# -- our own uploads next to another writer's commits -------------------------

def test_another_writer_between_our_upload_and_its_read_back(mirror, devserver, tmp_path):
    repo = mirror.repo_id
    mirror.write("a/n2.md", b"ours\n")
    devserver.after_request("POST", r"/update-api/|/upload-api/",
                            lambda srv: srv.put_file(repo, "/a/n2.md", b"theirs, right after ours\n"))
    mirror.engine.sync(["a/n2.md"], check_remote=False)
    for _ in range(3):
        _poll(mirror)
        mirror.engine.sync(["a/n2.md"], check_remote=False)
    versions = {p.read_bytes() for p in mirror.root.rglob("*.md")}
    live = mirror.read("a/n2.md")
    assert (b"ours\n" in live or b"ours\n" in versions or _backed_up(mirror, b"ours\n"))
    assert b"theirs, right after ours\n" in live or b"theirs, right after ours\n" in versions
    _assert_like_the_walk(mirror, devserver, tmp_path)


def _backed_up(m, data: bytes) -> bool:
    backups = m.engine.options.backup_dir
    return backups is not None and any(p.is_file() and p.read_bytes() == data for p in Path(backups).rglob("*"))


def test_another_writer_puts_back_the_old_bytes_after_our_upload(mirror, devserver, tmp_path):
    repo = mirror.repo_id
    before = mirror.read("x/n2.md")
    mirror.write("x/n2.md", b"ours\n")
    assert mirror.engine.sync(["x/n2.md"], check_remote=False).uploaded == ["x/n2.md"]
    devserver.put_file(repo, "/x/n2.md", before)  # an undo by another writer, right after ours
    _poll(mirror)
    # the old bytes again read as a stale writer's: ours is kept live (never only in a backup)
    assert mirror.read("x/n2.md") == b"ours\n" == devserver.read_file(repo, "/x/n2.md")
    assert _poll(mirror).transferred == 0
    _assert_like_the_walk(mirror, devserver, tmp_path)


def test_our_upload_then_theirs_then_ours_again_in_one_poll(mirror, devserver, tmp_path):
    repo = mirror.repo_id
    mirror.write("a/b/n3.md", b"ours 1\n")
    assert mirror.engine.sync(["a/b/n3.md"], check_remote=False).uploaded == ["a/b/n3.md"]
    devserver.put_file(repo, "/a/b/n3.md", b"theirs\n")
    devserver.put_file(repo, "/a/b/n0.md", b"theirs elsewhere\n")
    mirror.write("a/b/n3.md", b"ours 1\nours 2\n")
    mirror.engine.sync(["a/b/n3.md"], check_remote=False)
    _poll(mirror)
    mirror.engine.sync(["a/b/n3.md"], check_remote=True)
    assert mirror.read("a/b/n0.md") == b"theirs elsewhere\n"
    found = {p.read_bytes() for p in mirror.root.rglob("*.md")}
    assert any(b"theirs" in v for v in found) and any(b"ours 2" in v for v in found)
    _assert_like_the_walk(mirror, devserver, tmp_path)


# -- local edits in flight while remote diffs arrive ---------------------------

def test_local_edits_in_flight_are_merged_not_overwritten(mirror, devserver, tmp_path):
    repo = mirror.repo_id
    base = mirror.read("a/n1.md")
    devserver.put_file(repo, "/a/n1.md", base + b"server line\n")
    devserver.delete_path(repo, "/x/n3.md")
    devserver.put_file(repo, "/x/y/n1.md", b"server rewrite\n")
    mirror.write("a/n1.md", b"local line\n" + base)       # merges cleanly with the server's
    mirror.write("x/n3.md", b"edited here, deleted there\n")
    mirror.write("x/y/n1.md", b"local rewrite\n")          # a true conflict
    devserver.reset_counters()
    report = mirror.engine.sync(None, check_remote=True)
    assert devserver.request_count(DIFF) == 3
    assert mirror.read("a/n1.md") == b"local line\n" + base + b"server line\n"
    assert mirror.read("x/n3.md") == b"edited here, deleted there\n"
    found = {p.read_bytes() for p in mirror.root.rglob("*") if p.is_file()}
    assert {b"server rewrite\n", b"local rewrite\n"} <= found, report
    mirror.engine.sync(None, check_remote=True)
    _assert_like_the_walk(mirror, devserver, tmp_path)


# -- a long random run -----------------------------------------------------------

class _Run:
    """Random remote operations (another client) and local edits, interleaved
    with passes; every write adds one unique marker line."""

    def __init__(self, m, devserver, seed: int) -> None:
        self.m, self.d, self.rng = m, devserver, random.Random(seed)
        self.markers: set[str] = set()
        self.exempt: set[str] = set()
        self.n = 0
        self.log: list[str] = []

    def _marker(self, who: str) -> bytes:
        self.n += 1
        mark = f"{who}-{self.n}"
        self.markers.add(mark)
        return f"{mark}\n".encode()

    @staticmethod
    def _marks(data: bytes) -> set[str]:
        return {line for line in data.decode("utf-8", "replace").splitlines() if "-" in line and line[0] in "rl"}

    def remote(self) -> None:
        d, repo, rng = self.d, self.m.repo_id, self.rng
        tree = {p: b for p, b in d.tree(repo).items() if not p.startswith(("/.conflict/", "/.trash/"))}
        files = sorted(tree)
        op = rng.choice(["edit", "edit", "edit", "new", "new", "delete", "rename", "move", "newdir", "deldir"])
        if op == "edit" and files:
            p = rng.choice(files)
            d.put_file(repo, p, tree[p] + self._marker("r"))
        elif op == "new" or not files:
            folder = rng.choice(["", "/a", "/a/b", "/x", "/x/y", "/Files"])
            d.put_file(repo, f"{folder}/r{self.n} é.md", self._marker("r"))
        elif op == "delete":
            p = rng.choice(files)
            self.exempt |= self._marks(tree[p])
            d.delete_path(repo, p)
        elif op == "rename":
            p = rng.choice(files)
            d.rename_path(repo, p, f"ren{self.n}.md")
            self.n += 1
        elif op == "move":
            p = rng.choice(files)
            dest = rng.choice(sorted(d.dirs(repo) - {p.rpartition('/')[0]} | {"/"}))
            try:
                d.move_path(repo, p, dest)
            except Exception:  # noqa: BLE001 - a move into itself: no change
                return
        elif op == "newdir":
            d.put_file(repo, f"/x/d{self.n}/f.md", self._marker("r"))
        else:
            dirs = sorted(p for p in d.dirs(repo) if not p.startswith(("/.conflict", "/.trash")))
            if dirs:
                gone = rng.choice(dirs)
                self.exempt |= {m for p, b in tree.items() if p.startswith(gone + "/") for m in self._marks(b)}
                d.delete_path(repo, gone)
        self.log.append(f"remote {op}")

    def local(self) -> list[str]:
        root, rng = self.m.root, self.rng
        files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*.md")
                       if p.is_file() and not p.relative_to(root).as_posix().startswith((".conflict", ".trash")))
        op = rng.choice(["edit", "edit", "new", "delete", "rename"])
        if op == "rename" and files:
            rel = rng.choice(files)
            new_rel = f"{rel.rpartition('/')[0] or 'x'}/moved{self.n}.md"
            self.n += 1
            (root / new_rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).rename(root / new_rel)
            self.log.append(f"local rename {rel} {new_rel}")
            return [rel, new_rel]
        if op == "edit" and files:
            rel = rng.choice(files)
            path = root / rel
            path.write_bytes(path.read_bytes() + self._marker("l"))
        elif op == "delete" and files:
            rel = rng.choice(files)
            self.exempt |= self._marks((root / rel).read_bytes())
            (root / rel).unlink()
        else:
            rel = f"a/l{self.n}.md"
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(self._marker("l"))
        self.log.append(f"local {op} {rel}")
        return [rel]

    def found(self) -> set[str]:
        texts = list(read_tree(self.m.root).values()) + list(self.d.tree(self.m.repo_id).values())
        backups = self.m.engine.options.backup_dir
        if backups is not None:
            texts += [p.read_bytes() for p in Path(backups).rglob("*") if p.is_file()]
        return {mark for data in texts for mark in self._marks(data)}


@pytest.mark.parametrize("seed", [int(s) for s in os.environ.get("OHSYNC_DIFF_SEEDS", "3,11").split(",")])
def test_a_long_random_run_loses_nothing_and_ends_like_the_walk(mirror, devserver, tmp_path, seed):
    run = _Run(mirror, devserver, seed)
    # a folder deleted in a 30-file library is a mass delete: the valve (not under test here) would hold it
    mirror.engine.valve.max_files, mirror.engine.valve.max_percent = 10**6, 1e9
    dirty: list[str] = []
    diff_reads = 0
    for _ in range(int(os.environ.get("OHSYNC_DIFF_STEPS", "120"))):
        roll = run.rng.random()
        if roll < 0.45:
            for _ in range(run.rng.randint(1, 3)):
                run.remote()
        elif roll < 0.7:
            dirty += run.local()
        elif roll < 0.76:
            # another writer's commit right after one of our reads, or one failed request
            where = run.rng.choice([r"/history/", r"/commits/", r"/file/detail/", r"/dir/", r"/update-api/"])
            if run.rng.random() < 0.5:
                devserver.after_request(None, where, lambda srv: run.remote())
            else:
                devserver.inject_fault("GET" if where != r"/update-api/" else None, where,
                                       status=run.rng.choice([500, 502, 503]), count=1)
        else:
            devserver.reset_counters()
            try:
                mirror.engine.sync(dirty if run.rng.random() < 0.8 else None, check_remote=True)
            except OhsyncError:
                continue  # the server failed the whole pass: the daemon retries it, with the same paths
            diff_reads += devserver.request_count(DIFF)
            dirty = []
    devserver.clear_faults()
    # a path whose request failed waits out its backoff; the end is the person's `ohsync refresh`
    mirror.engine.release_failures()
    for _ in range(3):
        mirror.engine.sync(None, check_remote=True)
    assert diff_reads > 10  # the diff path really ran
    lost = run.markers - run.exempt - run.found()
    assert not lost, (sorted(lost), run.log[-30:])
    _assert_like_the_walk(mirror, devserver, tmp_path)
    assert _files(mirror.root) == mirrored(devserver.tree(mirror.repo_id))  # the trash stays on the server


# -- devserver's commit diffs as seafile computes them ---------------------------

def _diffs(devserver, repo: str) -> list[dict]:
    import httpx
    head = devserver.head_commit(repo)
    r = httpx.get(f"{devserver.url}/api/v2.1/repos/{repo}/commits/{head}/",
                  headers={"Authorization": f"Token {devserver.token_for(USER)}"})
    assert r.status_code == 200
    return r.json()["commit_diffs"]


def test_devserver_folds_folders_and_names_folder_renames_like_seafile(devserver, tmp_path):
    """seafile's diff_commits with fold_dir_diff (seahub's call): a new or
    removed folder is one entry, not its files; a renamed folder is one
    entry whose status seahub has no name for (op_type ""); a lone empty
    file renamed is paired like any other."""
    repo = devserver.create_library(USER, "Diffs-shape", from_tree=_seed(tmp_path / "seed"))
    devserver.put_file(repo, "/Files/new/deep/f.md", b"new folder\n")
    assert _diffs(devserver, repo) == [{"op_type": "newdir", "path": "/Files/new", "new_path": ""}]
    devserver.delete_path(repo, "/x/y")
    assert _diffs(devserver, repo) == [{"op_type": "deldir", "path": "/x/y", "new_path": ""}]
    devserver.rename_path(repo, "/a/b", "bb")
    assert _diffs(devserver, repo) == [{"op_type": "", "path": "/a/b", "new_path": "/a/bb"}]
    devserver.put_file(repo, "/a/empty.md", b"")
    devserver.rename_path(repo, "/a/empty.md", "still-empty.md")
    assert _diffs(devserver, repo) == [{"op_type": "renamed", "path": "/a/empty.md", "new_path": "/a/still-empty.md"}]
    devserver.rename_path(repo, "/a/n0.md", "n0-renamed.md")
    assert _diffs(devserver, repo) == [{"op_type": "renamed", "path": "/a/n0.md", "new_path": "/a/n0-renamed.md"}]


def test_a_name_in_nfd_is_not_dropped_silently(mirror, devserver, tmp_path):
    """A file whose server name is decomposed (NFD, as macOS spells it): its
    rel path is NFC, so asking for it by that path answers 404; the diff path
    must not take that for "gone" and say nothing (the walk names it)."""
    import unicodedata
    repo = mirror.repo_id
    devserver.plant_entry(repo, "/a", unicodedata.normalize("NFD", "café.md"), b"mac name\n")
    report = mirror.engine.sync([], check_remote=True)
    nfc = unicodedata.normalize("NFC", "a/café.md")
    assert (mirror.root / nfc).exists() or any(rel == nfc for rel, _ in report.errors + report.skipped), report


def test_a_client_clock_ahead_is_not_a_rollback(mirror, devserver, tmp_path, monkeypatch):
    """A desktop client's commits carry its own clock: the head we saw may be
    newer (by ctime) than the server's later commits.  A merge after it sends
    the rollback check to the history; its descendants are not a rollback."""
    import time as real_time

    from ohsync.devserver import store as store_mod

    class Ahead:
        @staticmethod
        def time() -> float:
            return real_time.time() + 600  # ten minutes ahead

    repo = mirror.repo_id
    monkeypatch.setattr(store_mod, "time", Ahead)
    devserver.put_file(repo, "/a/n0.md", b"from a laptop whose clock runs ahead\n")
    monkeypatch.undo()
    _poll(mirror)
    assert mirror.read("a/n0.md") == b"from a laptop whose clock runs ahead\n"
    stale = devserver.head_commit(repo)
    devserver.put_file(repo, "/a/n1.md", b"first writer\n")
    other = make_mirror(devserver, repo, tmp_path, "other").client
    try:
        other.update(repo, "/a/n1.md", b"based on the laptop's head\n", head=stale)
    finally:
        other.close()
    assert devserver.history(repo)[0]["second_parent_id"]
    report = _poll(mirror)
    assert mirror.engine.regression() is None, report
    local = {p.read_bytes() for p in mirror.root.rglob("*.md")}
    assert {b"first writer\n", b"based on the laptop's head\n"} <= local
    _assert_like_the_walk(mirror, devserver, tmp_path)


@pytest.mark.parametrize("name", ["..", ".", "", "back\\slash.md", "x/y.md", "new\nline.md", "n" * 300 + ".md"])
def test_a_hostile_name_in_a_commit_ends_like_the_walk(mirror, devserver, tmp_path, name):
    repo = mirror.repo_id
    twin = make_mirror(devserver, repo, tmp_path, "twin")
    twin.engine.ctx.commit_diffs = False
    try:
        assert not twin.sync().errors
        devserver.plant_entry(repo, "/a", name, b"hostile\n")
        devserver.put_file(repo, "/a/n0.md", b"an ordinary edit next to it\n")
        report = mirror.engine.sync([], check_remote=True)
        twin_report = twin.engine.sync([], check_remote=True)
        assert mirror.read("a/n0.md") == b"an ordinary edit next to it\n"
        assert _files(mirror.root) == _files(twin.root)
        assert sorted(report.errors) == sorted(twin_report.errors)
        assert sorted(mirror.engine.sync().skipped) == sorted(twin.engine.sync().skipped)
    finally:
        twin.state.close()
        twin.client.close()


def test_two_files_swapped_while_one_is_edited_here(mirror, devserver, tmp_path):
    repo = mirror.repo_id
    a, b = mirror.read("x/n0.md"), mirror.read("x/n1.md")
    devserver.rename_path(repo, "/x/n0.md", "tmp.md")
    devserver.rename_path(repo, "/x/n1.md", "n0.md")
    devserver.rename_path(repo, "/x/tmp.md", "n1.md")
    mirror.write("x/n0.md", a + b"edited here during the swap\n")
    devserver.reset_counters()
    mirror.engine.sync(None, check_remote=True)
    mirror.engine.sync(None, check_remote=True)
    found = {p.read_bytes() for p in mirror.root.rglob("*") if p.is_file()} | set(devserver.tree(repo).values())
    assert any(b"edited here during the swap" in v for v in found)
    assert a in found and b in found
    _assert_like_the_walk(mirror, devserver, tmp_path)


def test_devserver_history_lists_a_merged_branch_like_seafile(devserver, tmp_path):
    """api2 history walks both parents, newest first (seafile's commit-tree
    traversal): the side commit an update based on an older head made is
    listed; v2.1 history skips merges without a conflict and keeps this one."""
    import httpx
    repo = devserver.create_library(USER, "History-shape", from_tree=_seed(tmp_path / "seed"))
    stale = devserver.head_commit(repo)
    devserver.put_file(repo, "/a/n1.md", b"first writer\n")
    client = make_mirror(devserver, repo, tmp_path, "other").client
    try:
        client.update(repo, "/a/n1.md", b"based on an older head\n", head=stale)
        commits, _ = client.commit_history(repo, per_page=50)
    finally:
        client.close()
    merge = commits[0]
    assert merge.second_parent_id and merge.parent_id
    ids = [c.id for c in commits]
    assert merge.second_parent_id in ids and merge.parent_id in ids and stale in ids
    assert ids.index(stale) > ids.index(merge.second_parent_id)
    r = httpx.get(f"{devserver.url}/api/v2.1/repos/{repo}/history/",
                  headers={"Authorization": f"Token {devserver.token_for(USER)}"})
    assert r.json()["data"][0]["commit_id"] == merge.id  # a merge with a conflict is listed


def test_a_conflict_file_another_client_made_in_a_plain_commit(mirror, devserver, tmp_path):
    """A desktop client uploads its own SFConflict copy in an ordinary commit
    (no merge): the diff path finds it and it is folded as the walk folds it."""
    repo = mirror.repo_id
    twin = make_mirror(devserver, repo, tmp_path, "twin")
    twin.engine.ctx.commit_diffs = False
    try:
        assert not twin.sync().errors
        devserver.put_file(repo, "/a/n1 (SFConflict other@example.org 2026-12-01-10-00-00).md",
                           b"note a 1\nthe other client's version\n")
        devserver.reset_counters()
        mirror.engine.sync([], check_remote=True)
        assert devserver.request_count(DIFF) == 1
        twin.engine.sync([], check_remote=True)
        for m in (mirror, twin):
            m.engine.sync(None, check_remote=True)
        assert _files(mirror.root) == _files(twin.root)
        assert any(b"the other client's version" in data for data in _files(mirror.root).values())
    finally:
        twin.state.close()
        twin.client.close()


@pytest.mark.parametrize("moment", [r"/file/detail/", r"/seafhttp/files/"])
def test_a_local_save_while_the_remote_change_is_fetched(mirror, devserver, tmp_path, moment):
    """The person saves the very file whose remote change the diff path is
    fetching (right after its detail, or while its bytes come down): both
    versions survive (merged, a conflict copy or a backup)."""
    repo = mirror.repo_id
    base = mirror.read("a/b/n1.md")
    devserver.put_file(repo, "/a/b/n1.md", base + b"the server's line\n")

    fired: list[str] = []

    def save(srv):
        fired.append(moment)
        mirror.write("a/b/n1.md", b"the person's line\n" + base)

    devserver.after_request("GET", moment, save)
    for paths in ([], ["a/b/n1.md"], None):
        mirror.engine.sync(paths, check_remote=True)
    assert fired == [moment]
    found = [p.read_bytes() for p in mirror.root.rglob("*") if p.is_file()]
    found += list(devserver.tree(repo).values())
    if mirror.engine.options.backup_dir is not None:
        found += [p.read_bytes() for p in Path(mirror.engine.options.backup_dir).rglob("*") if p.is_file()]
    assert any(b"the person's line" in data for data in found)
    assert any(b"the server's line" in data for data in found)
    live = mirror.read("a/b/n1.md")
    assert live == devserver.read_file(repo, "/a/b/n1.md")
    _assert_like_the_walk(mirror, devserver, tmp_path)


def test_moves_across_a_subtree_mirror_border(devserver, tmp_path):
    """A mirror of /Files only: a file moved in from outside, one moved out,
    a folder inside renamed, and a change outside: like the walk."""
    repo = devserver.create_library(USER, "Subtree", from_tree=_seed(tmp_path / "seed"))
    mirrors = []
    for name in ("sub", "twin"):
        m = make_mirror(devserver, repo, tmp_path, name)
        m.engine = type(m.engine)(m.client, repo, m.root, m.state, remote_root="/Files", options=m.engine.options)
        assert not m.engine.sync().errors
        mirrors.append(m)
    sub, twin = mirrors
    twin.engine.ctx.commit_diffs = False
    try:
        moved_in = devserver.move_path(repo, "/a/n0.md", "/Files")  # auto-renamed beside /Files/n0.md
        devserver.move_path(repo, "/Files/n1.md", "/x")
        devserver.put_file(repo, "/x/n3.md", b"outside\n")
        devserver.reset_counters()
        sub.engine.sync([], check_remote=True)
        assert devserver.request_count(DIFF) == 3 and devserver.request_count(LISTING) == 0
        assert moved_in and sub.read(moved_in) == b"note a 0\n" and not (sub.root / "n1.md").exists()
        devserver.rename_path(repo, "/Files/docs", "papers")
        sub.engine.sync([], check_remote=True)
        for m in mirrors:
            m.engine.sync(None, check_remote=True)
        assert _files(sub.root) == _files(twin.root)
        assert sub.read("papers/n0.md") == b"note Files/docs 0\n" and not (sub.root / "docs").exists()
    finally:
        for m in mirrors:
            m.state.close()
            m.client.close()
