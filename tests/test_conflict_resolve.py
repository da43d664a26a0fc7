"""engine/merge/settle.py against devserver, without the daemon: the
refusals that leave everything as it was, an edit that lands on the server
meanwhile (merged by the normal read-merge-write), links never followed,
and the conflict looked up by its live file or its archived copy."""

from __future__ import annotations

import hashlib
import os

import pytest

from engine_helpers import USER, make_mirror
from ohsync.engine.merge.settle import ResolveRefused, find_conflict, read_version, resolve_conflict
from ohsync.engine.events import ConflictRecord

REL = "notes/todo.txt"


@pytest.fixture
def conflicted(devserver, tmp_path):
    repo = devserver.create_library(USER, "lib")
    devserver.put_file(repo, "/" + REL, b"a\nb\nc\n")
    m = make_mirror(devserver, repo, tmp_path)
    assert not m.sync().errors
    m.write(REL, b"a\nmine\nc\n")
    devserver.put_file(repo, "/" + REL, b"a\ntheirs\nc\n")
    report = m.sync()
    assert not report.errors and len(m.engine.conflicts()) == 1
    yield m, m.engine.conflicts()[0]
    m.state.close()
    m.client.close()


def test_find_conflict_by_live_file_or_archived_copy() -> None:
    one = ConflictRecord("a.md", ".conflict/a__remote__1.md", "t", "r")
    two = ConflictRecord("a.md", ".conflict/a__remote__2.md", "t", "r")
    assert find_conflict([one], "/a.md") is one
    assert find_conflict([one, two], ".conflict/a__remote__2.md") is two
    with pytest.raises(ResolveRefused, match="2 open conflicts.*a__remote__1.md"):
        find_conflict([one, two], "a.md")
    with pytest.raises(ResolveRefused, match="no open conflict for b.md"):
        find_conflict([one], "b.md")


def test_one_archived_copy_recorded_several_times_is_listed_once(tmp_path) -> None:
    from ohsync.engine.state import StateStore

    copy = ConflictRecord("a.md", ".conflict/a__remote__1.md", "2026-12-01T10:00:00+00:00", "r")
    other = ConflictRecord("a.md", ".conflict/a__remote__2.md", "2026-12-01T10:00:01+00:00", "r")
    # the lookup: a live file whose only copy was recorded three times names that copy
    assert find_conflict([copy, copy, copy], "a.md") is copy
    with pytest.raises(ResolveRefused) as refused:
        find_conflict([copy, other, copy, other], "a.md")
    assert "2 open conflicts" in refused.value.message
    assert refused.value.message.count("a__remote__1.md") == 1 and refused.value.message.count("a__remote__2.md") == 1
    # the store: the same copy archived again is not recorded again
    store = StateStore(tmp_path / "state.db", tmp_path / "blobs")
    assert store.add_conflict(copy) is True
    assert store.add_conflict(ConflictRecord("a.md", copy.archived, "2026-12-01T10:00:05+00:00", "r")) is False
    assert store.add_conflict(other) is True
    assert [c.archived for c in store.conflicts()] == [copy.archived, other.archived]
    assert store.conflicts_since("a.md", "2026-12-01T00:00:00+00:00") == 2
    # rows a state written by an earlier version holds twice are listed (and counted) once
    store._db.execute("INSERT INTO conflicts(path,archived,time,reason,fields) VALUES (?,?,?,?,?)",
                      (copy.path, copy.archived, copy.time, copy.reason, ""))
    assert [c.archived for c in store.conflicts()] == [copy.archived, other.archived]
    assert store.conflicts_since("a.md", "2026-12-01T00:00:00+00:00") == 2
    store.close()


def test_an_edited_archived_copy_is_refused_and_nothing_changes(conflicted, devserver) -> None:
    m, record = conflicted
    m.write(record.archived, b"I edited the other version\n")
    before = devserver.tree(m.repo_id)
    with pytest.raises(ResolveRefused, match="was edited since it was synced"):
        resolve_conflict(m.engine.ctx, record, "live")
    assert devserver.tree(m.repo_id) == before
    assert m.engine.conflicts() == [record]


def test_a_version_changed_since_it_was_shown_is_refused(conflicted, devserver) -> None:
    m, record = conflicted
    shown = hashlib.sha256(m.read(REL)).hexdigest()
    shown_other = hashlib.sha256(m.read(record.archived)).hexdigest()
    m.write(REL, b"a\nsaved just now\nc\n")  # the person saves the live file after looking
    before = devserver.tree(m.repo_id)
    with pytest.raises(ResolveRefused, match="changed since it was shown"):
        resolve_conflict(m.engine.ctx, record, "other", expected_live=shown, expected_other=shown_other)
    assert m.read(REL) == b"a\nsaved just now\nc\n" and devserver.tree(m.repo_id) == before
    assert m.engine.conflicts() == [record]


def test_a_server_edit_meanwhile_is_merged_into_what_was_chosen(conflicted, devserver) -> None:
    m, record = conflicted
    # someone appends a line on the server after the page showed the versions
    devserver.put_file(m.repo_id, "/" + REL, b"a\nmine\nc\nappended elsewhere\n")
    result = resolve_conflict(m.engine.ctx, record, "other")
    assert result.action == "merge"
    assert devserver.tree(m.repo_id)["/" + REL] == b"a\ntheirs\nc\nappended elsewhere\n"
    assert m.read(REL) == b"a\ntheirs\nc\nappended elsewhere\n"
    assert m.engine.conflicts() == []
    assert "/" + record.archived not in devserver.tree(m.repo_id)


def test_links_are_never_followed(conflicted, tmp_path) -> None:
    m, record = conflicted
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"not yours to read\n")
    os.symlink(outside, m.root / "notes" / "link.txt")
    with pytest.raises(ResolveRefused, match="symbolic link"):
        read_version(m.engine.ctx, "notes/link.txt")
    with pytest.raises(ResolveRefused, match="not a path inside the mirror"):
        read_version(m.engine.ctx, "notes/../../outside.txt")
    linked = ConflictRecord("notes/link.txt", record.archived, record.time, record.reason)
    with pytest.raises(ResolveRefused, match="symbolic link"):
        resolve_conflict(m.engine.ctx, linked, "other")
    assert outside.read_bytes() == b"not yours to read\n"


def test_a_large_file_is_taken_and_kept_streamed(devserver, tmp_path) -> None:
    from ohsync.engine.transfer_large import LARGE_FILE

    rel = "Files/video.bin"
    size = LARGE_FILE + 512 * 1024
    repo = devserver.create_library(USER, "big")
    devserver.put_file(repo, "/" + rel, os.urandom(size))
    m = make_mirror(devserver, repo, tmp_path)
    try:
        assert not m.sync().errors
        ours, theirs = os.urandom(size), os.urandom(size + 1)
        m.write(rel, ours)
        devserver.put_file(repo, "/" + rel, theirs)
        assert not m.sync().errors
        [record] = m.engine.conflicts()
        result = resolve_conflict(m.engine.ctx, record, "other",
                                  expected_other=hashlib.sha256(theirs).hexdigest())
        tree = devserver.tree(repo)
        assert tree["/" + rel] == theirs and m.read(rel) == theirs
        assert tree["/" + result.replaced] == ours  # the replaced live version, streamed into the trash
        assert "/" + record.archived not in tree and m.engine.conflicts() == []
    finally:
        m.state.close()
        m.client.close()
