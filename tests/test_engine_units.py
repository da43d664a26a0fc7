"""Unit tests of the engine's pure pieces: ids, names, ignore rules,
the reconciliation table, the state store and remote change detection."""

from __future__ import annotations

import io
from datetime import datetime, timezone

import pytest

from ohsync.engine.merge.conflict_names import conflict_copy_path, origin_of
from ohsync.engine.ids import BLOCK_SIZE, file_hashes, seafile_file_id, sha1_bytes
from ohsync.engine.ignore import IgnoreRules
from ohsync.engine.models import DirListing, RemoteEntry, RepoInfo
from ohsync.engine.paths import from_remote, name_problem, to_remote
from ohsync.engine.sync.reconcile import Action, Side, action_for
from ohsync.engine.remote_scan import scan_remote
from ohsync.engine.state import Base, StateStore
from ohsync.engine.events import ConflictRecord

WHEN = datetime(2026, 11, 30, 1, 2, 3, tzinfo=timezone.utc)


def test_file_id_matches_the_real_servers_worked_example():
    assert seafile_file_id(b"") == "0" * 40
    assert seafile_file_id(b"hello\n") == "4226e5b3d7da1a4575241f9501f9882aee9b5ea9"


def test_streamed_hashes_agree_with_whole_buffer_hashes_across_blocks():
    data = bytes(range(256)) * ((BLOCK_SIZE + 12345) // 256)
    sha1, fid, size = file_hashes(io.BytesIO(data))
    assert (sha1, fid, size) == (sha1_bytes(data), seafile_file_id(data), len(data))


def test_conflict_copy_name_follows_the_contract():
    free = lambda p: False  # noqa: E731
    assert conflict_copy_path("journal/2026-11.md", "android", free, WHEN) == \
        ".conflict/journal/2026-11__android__20261130T010203Z.md"
    assert conflict_copy_path("README", "remote", free, WHEN) == ".conflict/README__remote__20261130T010203Z"


def test_conflict_copy_name_numbers_taken_names_and_never_stacks_suffixes():
    taken = {".conflict/a__remote__20261130T010203Z.md", ".conflict/a__remote__20261130T010203Z-2.md"}
    assert conflict_copy_path("a.md", "remote", taken.__contains__, WHEN) == \
        ".conflict/a__remote__20261130T010203Z-3.md"
    again = conflict_copy_path(".conflict/a__remote__20261130T010203Z.md", "remote", taken.__contains__, WHEN)
    assert again == ".conflict/a__remote__20261130T010203Z-3.md"


def test_conflict_copy_name_stays_within_255_bytes_on_a_character_boundary():
    name = conflict_copy_path("k/" + "长" * 84 + ".md", "remote", lambda p: False, WHEN)
    leaf = name.rsplit("/", 1)[1]
    assert len(leaf.encode()) <= 255
    assert leaf.endswith("__remote__20261130T010203Z.md")  # the stem was cut, not the suffix
    assert leaf.startswith("长" * 10)


def test_origin_comes_from_frontmatter_or_defaults_to_remote():
    assert origin_of(b"---\ntitle: t\norigin: bot\n---\n") == "bot"
    assert origin_of(b"\xef\xbb\xbf---\r\norigin: android\r\n---\r\n") == "android"
    assert origin_of(b"no frontmatter") == "remote"


def test_ignore_defaults_config_patterns_and_ignore_file(tmp_path):
    (tmp_path / ".ohsyncignore").write_text("drafts/\n*.log\n")
    rules = IgnoreRules(["build/"], tmp_path)
    for ignored in (".ohsync-tmp-abc", "a/.DS_Store", "x.md.swp", ".obsidian/workspace.json",
                    "build/out.bin", "drafts/x.md", "debug.log", "~$作业1.docx"):
        assert rules.match(ignored), ignored
    for kept in ("journal/2026-11.md", ".obsidian/app.json", ".conflict/a.md", "docs/.trash/a.md"):
        assert not rules.match(kept), kept
    # the library's trash stays on the server, whatever the patterns say
    rules = IgnoreRules(["!.trash/"], tmp_path)
    for server_only in (".trash", ".trash/旧课表.md", ".trash_ohsync/a.md", ".trash_ohsync-2/b/c.md"):
        assert rules.match(server_only), server_only


@pytest.mark.parametrize("name,ok", [
    ("a/b.md", True), ("a/../b", False), ("a/./b", False), ("x\\y.md", False),
    ("长" * 85 + ".md", False), ("长" * 84 + ".md", True), ("tab\there", False),
])
def test_name_problems(name, ok):
    assert (name_problem(name) is None) == ok


def test_remote_root_mapping():
    assert to_remote("/", "a/b.md") == "/a/b.md"
    assert to_remote("/sub/", "a.md") == "/sub/a.md"
    assert from_remote("/sub", "/sub/a.md") == "a.md"
    assert from_remote("/sub", "/other/a.md") is None


@pytest.mark.parametrize("local,remote,action", [
    (Side.SAME, Side.SAME, Action.NOTHING),
    (Side.SAME, Side.CHANGED, Action.PULL),
    (Side.CHANGED, Side.SAME, Action.PUSH),
    (Side.CHANGED, Side.CHANGED, Action.MERGE),
    (Side.CHANGED, Side.GONE, Action.PUSH),            # modification beats deletion
    (Side.GONE, Side.CHANGED, Action.PULL),            # modification beats deletion
    (Side.SAME, Side.GONE, Action.DELETE_LOCAL),
    (Side.GONE, Side.SAME, Action.DELETE_REMOTE),
    (Side.GONE, Side.GONE, Action.FORGET),
    (Side.CHANGED, Side.ABSENT, Action.PUSH),          # new local file
    (Side.ABSENT, Side.CHANGED, Action.PULL),          # new remote file
])
def test_reconciliation_table(local, remote, action):
    assert action_for(local, remote) is action


def test_state_store_keeps_bases_blobs_conflicts_across_reopen(tmp_path):
    db, blobs = tmp_path / "s.db", tmp_path / "blobs"
    store = StateStore(db, blobs)
    content = "基础内容\n".encode()
    store.set_base(Base("a.md", False, sha1_bytes(content), "f" * 40, 9, 10, 11), content)
    store.add_conflict(ConflictRecord("a.md", ".conflict/a__remote__x.md", "2026-11-30T00:00:00+00:00",
                                      "r", ("frontmatter field 'sensitivity'",)))
    store.set_meta("head", "c" * 40)
    store.close()
    store = StateStore(db, blobs)
    base = store.get_base("a.md")
    assert base is not None and base.fingerprint() == (9, 10, 11) and base.remote_id == "f" * 40
    assert store.base_content(base) == content
    assert store.conflicts()[0].fields == ("frontmatter field 'sensitivity'",)
    assert store.get_meta("head") == "c" * 40
    store.delete_base("a.md")
    assert store.prune_blobs() == 1


class _FakeLister:
    """A library of folders; counts listings."""

    def __init__(self, tree: dict[str, list[RemoteEntry]], head: str) -> None:
        self.tree, self.head, self.listed = tree, head, []

    def repo_info(self, repo_id):
        return RepoInfo(repo_id, "L", self.head)

    def list_dir(self, repo_id, path, *, oid=None, recursive=False):
        self.listed.append(path)
        # a folder's listing carries the id its parent's listing gave it
        ids = {e.path: e.id for entries in self.tree.values() for e in entries if e.is_dir}
        return DirListing(path, ids.get(path, "oid-" + path), False, tuple(self.tree[path]))


def test_remote_scan_costs_one_request_when_head_is_unchanged():
    lister = _FakeLister({"/": []}, "h1")
    scan = scan_remote(lister, "r", "/", prev_head="h1", prev_root_oid="x", prev_snapshot={})
    assert not scan.changed and scan.requests == 1 and lister.listed == []


def test_remote_scan_lists_only_folders_whose_id_changed():
    tree = {
        "/": [RemoteEntry("/a", True, "A2"), RemoteEntry("/b", True, "B1"), RemoteEntry("/f.md", False, "F1", 3)],
        "/a": [RemoteEntry("/a/x.md", False, "X2", 5)],
    }
    prev = {"a": RemoteEntry("a", True, "A1"), "a/x.md": RemoteEntry("a/x.md", False, "X1"),
            "b": RemoteEntry("b", True, "B1"), "b/y.md": RemoteEntry("b/y.md", False, "Y1"),
            "f.md": RemoteEntry("f.md", False, "F1")}
    lister = _FakeLister(tree, "h2")
    scan = scan_remote(lister, "r", "/", prev_head="h1", prev_root_oid="old", prev_snapshot=prev)
    assert lister.listed == ["/", "/a"]
    assert scan.changed and scan.snapshot["a/x.md"].id == "X2"
    assert scan.snapshot["b/y.md"].id == "Y1"  # unchanged subtree carried over


def test_files_written_by_ohsync_get_the_usual_mode(tmp_path):
    import os
    import stat as _stat

    from ohsync.engine.localfs import atomic_write

    old = os.umask(0o022)
    try:
        atomic_write(tmp_path / "new.md", b"x")
        assert _stat.S_IMODE(os.stat(tmp_path / "new.md").st_mode) == 0o644
        os.chmod(tmp_path / "new.md", 0o600)  # a private file stays private when rewritten
        atomic_write(tmp_path / "new.md", b"y")
        assert _stat.S_IMODE(os.stat(tmp_path / "new.md").st_mode) == 0o600
    finally:
        os.umask(old)
