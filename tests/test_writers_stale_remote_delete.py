"""Stale writers, then a remote delete: another client overwrites a file we
pushed to from a version older than our pushes and then deletes it, both
before a pass of ours sees the overwrite.  The pass sees only the delete of
a file unchanged here; the deleting client never saw our lines, so our
version goes to ``/.conflict/`` with a notice before the delete is mirrored
(``engine/merge/stale_delete.py``).  A delete of our own version is
mirrored as before.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from engine_helpers import USER, make_mirror
from test_writers_stale import settle
from test_writers_stale_remote_moves import OLD, V0, _pushed


@pytest.fixture
def rid(devserver):
    return devserver.create_library(USER, "OH-Memory")


def _copies(devserver, rid) -> dict[str, bytes]:
    return {k: v for k, v in devserver.tree(rid).items() if k.startswith("/.conflict/")}


@pytest.mark.parametrize("overwrites", [1, 6])
def test_a_stale_overwrite_then_a_remote_delete_keeps_our_lines_in_a_conflict_copy(devserver, rid, tmp_path,
                                                                                   overwrites):
    mirror = _pushed(devserver, rid, tmp_path)
    burst = devserver.stale_burst(rid, "/" + OLD, overwrites, old=V0, line="LINE-R\n")
    assert burst.errors == []
    devserver.delete_path(rid, "/" + OLD)
    report = mirror.sync()
    assert report.errors == []
    assert not (mirror.root / OLD).exists() and devserver.file_id(rid, "/" + OLD) is None  # the delete stands
    copies = _copies(devserver, rid)
    assert len(copies) == 1, copies
    (path, content), = copies.items()
    assert content == V0 + b"LINE-A\nLINE-B\n"
    assert mirror.read(path.lstrip("/")) == content  # on both sides
    assert [c.path for c in mirror.engine.conflicts()] == [OLD]  # with a notice
    settle(mirror)


def test_a_remote_delete_of_our_own_version_is_mirrored_without_a_copy(devserver, rid, tmp_path):
    mirror = _pushed(devserver, rid, tmp_path)
    devserver.delete_path(rid, "/" + OLD)
    requests = mirror.client.request_count
    report = mirror.sync()
    assert report.errors == [] and OLD in report.deleted_local
    assert not (mirror.root / OLD).exists()
    assert _copies(devserver, rid) == {} and mirror.engine.conflicts() == []
    assert mirror.client.request_count - requests < 14, "the check reads a history page and a few revisions"


def test_a_stale_overwrite_that_kept_our_lines_then_a_delete_is_mirrored(devserver, rid, tmp_path):
    # the other client read our newest version, edited it and deleted it: it saw our lines
    mirror = _pushed(devserver, rid, tmp_path)
    devserver.put_file(rid, "/" + OLD, V0 + b"LINE-A\nLINE-B\nTHEIRS\n")
    devserver.delete_path(rid, "/" + OLD)
    report = mirror.sync()
    assert report.errors == [] and OLD in report.deleted_local
    assert _copies(devserver, rid) == {} and mirror.engine.conflicts() == []


def test_a_check_that_failed_is_tried_again_from_the_same_listing(devserver, rid, tmp_path):
    mirror = _pushed(devserver, rid, tmp_path)
    assert devserver.stale_burst(rid, "/" + OLD, 1, old=V0, line="LINE-R\n").errors == []
    devserver.delete_path(rid, "/" + OLD)
    devserver.inject_fault("GET", r"/file/revision/", status=500, count=100)
    report = mirror.sync()
    assert report.errors and (mirror.root / OLD).exists()  # nothing deleted while it cannot tell
    devserver.put_file(rid, "/notes/other.txt", b"other, edited\n")  # the head moves on meanwhile
    devserver.clear_faults()
    assert mirror.sync().errors == []  # the failed path waits out its backoff ...
    assert (mirror.root / OLD).exists()
    mirror.engine.release_failures()   # ... or the person's `ohsync refresh`
    settle(mirror)
    assert not (mirror.root / OLD).exists()
    assert list(_copies(devserver, rid).values()) == [V0 + b"LINE-A\nLINE-B\n"]


def _busy(devserver, rid, commits: int) -> None:
    """Other files changed in ``commits`` commits (another client at work)."""
    for i in range(commits):
        devserver.put_file(rid, f"/busy/b{i % 5}.txt", f"busy {i}\n".encode())


def test_a_stale_overwrite_then_many_commits_then_a_delete_is_still_checked(devserver, rid, tmp_path):
    """More commits since the last listing than one history page holds: the
    check reads more pages and keeps our lines as before."""
    from ohsync.engine.merge import stale_delete

    mirror = _pushed(devserver, rid, tmp_path)
    assert devserver.stale_burst(rid, "/" + OLD, 1, old=V0, line="LINE-R\n").errors == []
    _busy(devserver, rid, stale_delete.HISTORY_PAGE + 20)
    devserver.delete_path(rid, "/" + OLD)
    assert mirror.sync().errors == []
    copies = _copies(devserver, rid)
    assert list(copies.values()) == [V0 + b"LINE-A\nLINE-B\n"], copies
    (conflict,) = mirror.engine.conflicts()
    assert conflict.path == OLD and "had not seen these lines" in conflict.reason  # told, not guessed


def test_a_delete_past_what_the_check_reads_keeps_ours_rather_than_guess(devserver, rid, tmp_path, monkeypatch):
    """Beyond the pages the check reads (a long outage), whether the deleter
    saw our lines cannot be told: ours is kept as a conflict copy with a notice."""
    from ohsync.engine.merge import stale_delete

    monkeypatch.setattr(stale_delete, "HISTORY_PAGE", 5)
    monkeypatch.setattr(stale_delete, "HISTORY_PAGES", 2)
    mirror = _pushed(devserver, rid, tmp_path)
    _busy(devserver, rid, 12)
    devserver.delete_path(rid, "/" + OLD)
    report = mirror.sync()
    assert report.errors == [] and not (mirror.root / OLD).exists()  # the delete stands
    assert list(_copies(devserver, rid).values()) == [V0 + b"LINE-A\nLINE-B\n"]
    (conflict,) = mirror.engine.conflicts()
    assert conflict.path == OLD and "cannot be told" in conflict.reason


def test_a_failed_check_of_a_delete_undone_meanwhile_is_forgotten(devserver, rid, tmp_path, monkeypatch):
    """A delete whose check failed, then undone on the server (the file put
    back): its check's starting point is dropped, so a later delete of our own
    version is checked from the listing before it, not from one long past
    (which would keep a needless conflict copy, "cannot be told")."""
    from ohsync.engine.merge import stale_delete

    monkeypatch.setattr(stale_delete, "HISTORY_PAGE", 5)
    monkeypatch.setattr(stale_delete, "HISTORY_PAGES", 2)
    mirror = _pushed(devserver, rid, tmp_path)
    ours = devserver.read_file(rid, "/" + OLD)
    devserver.delete_path(rid, "/" + OLD)
    devserver.inject_fault("GET", r"/file/revision/", status=500, count=100)
    assert mirror.sync().errors and (mirror.root / OLD).exists()  # nothing deleted while it cannot tell
    devserver.clear_faults()
    devserver.put_file(rid, "/" + OLD, ours)  # the delete undone
    mirror.engine.release_failures()
    settle(mirror)
    _busy(devserver, rid, 12)  # more commits than the check reads
    settle(mirror)
    devserver.delete_path(rid, "/" + OLD)
    report = mirror.sync()
    assert report.errors == [] and OLD in report.deleted_local
    assert _copies(devserver, rid) == {} and mirror.engine.conflicts() == []


def _moved_then_deleted(devserver, rid) -> None:
    devserver.mkdir(rid, "/docs")
    devserver.move_path(rid, "/" + OLD, "/docs")
    devserver.delete_path(rid, "/docs/todo.txt")


def _deleted(devserver, rid) -> None:
    devserver.delete_path(rid, "/" + OLD)


def _deleted_then_busy(devserver, rid) -> None:
    devserver.delete_path(rid, "/" + OLD)
    for i in range(11):  # the version removed lies a dozen commits before the listing's head
        devserver.put_file(rid, "/notes/other.txt", f"other, edit {i}\n".encode())


def _deleted_long_before(devserver, rid) -> None:
    from ohsync.engine.merge import stale_delete

    devserver.delete_path(rid, "/" + OLD)
    for i in range(stale_delete.LOOK_BACK + 5):  # more commits after the delete than the check looks back
        devserver.put_file(rid, "/notes/other.txt", f"other, edit {i}\n".encode())


UNSEEN, UNTOLD = "had not seen these lines", "cannot be told"


@pytest.mark.parametrize("remove, reason", [(_deleted, UNSEEN), (_moved_then_deleted, UNSEEN),
                                            (_deleted_then_busy, UNSEEN), (_deleted_long_before, UNTOLD)],
                         ids=["deleted", "moved-then-deleted", "deleted-then-busy", "deleted-long-before"])
def test_a_kill_after_the_listing_that_saw_the_delete_still_keeps_our_lines(devserver, rid, tmp_path, remove,
                                                                            reason):
    """The pass that listed the delete dies before it mirrors it: the head it
    recorded no longer holds the file, so the next start looks further back
    for the version the server removed (a stale overwrite, lacking our lines).
    When none of the commits it looks back through held the file, which
    version was deleted cannot be told: ours is kept as a conflict copy with
    a notice all the same, not left in a backup."""
    from test_breaker_stale_moves import _killed_at

    mirror = _pushed(devserver, rid, tmp_path)
    assert devserver.stale_burst(rid, "/" + OLD, 1, old=V0, line="LINE-R\n").errors == []
    remove(devserver, rid)
    devserver.put_file(rid, "/a/first.txt", b"pulled before the delete is looked at\n")
    _killed_at(mirror, "pull.downloaded")
    again = make_mirror(devserver, rid, tmp_path)
    assert (again.root / OLD).exists()  # the killed pass mirrored no delete
    report = again.sync()
    assert report.errors == [] and not (again.root / OLD).exists()  # the delete stands
    assert list(_copies(devserver, rid).values()) == [V0 + b"LINE-A\nLINE-B\n"]
    (conflict,) = again.engine.conflicts()
    assert conflict.path == OLD and reason in conflict.reason
    settle(again)


def test_the_checks_of_one_pass_read_each_history_page_once(devserver, rid, tmp_path, monkeypatch):
    """Two files deleted on the server, each after a stale overwrite, and a
    kill after the listing that saw the deletes: both checks look back from
    the same head and share the history pages they read (pages of 7 commits
    here, told apart from the remote diff's own reads by that size)."""
    from ohsync.engine.merge import stale_delete
    from test_breaker_stale_moves import _killed_at

    monkeypatch.setattr(stale_delete, "HISTORY_PAGE", 7)
    other = "notes/other.txt"
    for i in range(10):  # two deletes among a dozen files: no mass delete for the safety valve to hold
        devserver.put_file(rid, f"/keep/k{i}.txt", b"kept\n")
    mirror = _pushed(devserver, rid, tmp_path)
    mirror.write(other, b"other\nLINE-O\n")
    assert mirror.sync([other]).errors == []
    for rel, old in ((OLD, V0), (other, b"other\n")):
        assert devserver.stale_burst(rid, "/" + rel, 1, old=old, line="LINE-R\n").errors == []
    for rel in (OLD, other):
        devserver.delete_path(rid, "/" + rel)
    for i in range(11):  # the versions removed lie a dozen commits before the listing's head
        devserver.put_file(rid, "/keep/k0.txt", f"kept, edit {i}\n".encode())
    devserver.put_file(rid, "/a/first.txt", b"pulled before the deletes are looked at\n")
    _killed_at(mirror, "pull.downloaded")
    again = make_mirror(devserver, rid, tmp_path)
    commits = len(again.client.commit_history(rid, page=1, per_page=1000)[0])
    assert again.sync().errors == []
    pages = devserver.request_count(r"GET /api2/repos/[^/]+/history/\?.*per_page=7\b")
    assert 0 < pages <= -(-commits // 7)  # the whole history at most, once
    assert sorted(c.path for c in again.engine.conflicts()) == sorted([OLD, other])


@pytest.mark.parametrize("how", ["created", "moved-here"])
def test_a_file_of_ours_from_after_the_listing_deleted_on_the_server_is_mirrored_without_a_copy(
        devserver, rid, tmp_path, how):
    """A file that came after the last listing (ours: created or moved here,
    uploaded by the pass that listed) is not in that listing's head; deleted
    on the server, the version removed is found in the commits since, ours,
    and the delete is mirrored with no copy."""
    mirror = _pushed(devserver, rid, tmp_path)
    new = "notes/new.txt"
    if how == "created":
        mirror.write(new, b"a new note\n")
    else:
        (mirror.root / OLD).rename(mirror.root / new)
    assert mirror.sync().errors == []
    assert devserver.file_id(rid, "/" + new) is not None
    devserver.delete_path(rid, "/" + new)
    report = mirror.sync()
    assert report.errors == [] and new in report.deleted_local
    assert _copies(devserver, rid) == {} and mirror.engine.conflicts() == []
