"""Stale writers, then a remote move: another client overwrites a file we
pushed to from a version older than our pushes and then moves or renames
it, all before a pass of ours finishes.  The new path's id is the stale
writer's, not ours, so pairing the move by id misses it; taken apart it would
be a delete here (our lines only in a local backup) and a plain download of
the stale content there.  ``engine/sync/moves.py`` pairs it by name or folder
when the new content was made from our versions on record, and the stale
overwrite is merged with our pushes at the new path.

The long chaos run found it (five appended lines only in state_dir/backups).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from engine_helpers import USER, make_mirror
from test_writers_stale import HEADER, JOURNAL, assert_kept, settle

V0 = b"line1\nline2\nline3\n"
OLD = "notes/todo.txt"


@pytest.fixture
def rid(devserver):
    return devserver.create_library(USER, "OH-Memory")


def _pushed(devserver, rid, tmp_path):
    """Sync V0 (beside another file); save LINE-A, synced; LINE-B, synced."""
    devserver.put_file(rid, "/" + OLD, V0)
    devserver.put_file(rid, "/notes/other.txt", b"other\n")
    mirror = make_mirror(devserver, rid, tmp_path)
    assert mirror.sync().errors == []
    for line in ("LINE-A", "LINE-B"):
        mirror.write(OLD, mirror.read(OLD) + (line + "\n").encode())
        assert mirror.sync([OLD]).errors == []
        assert devserver.read_file(rid, "/" + OLD).endswith((line + "\n").encode())
    return mirror


def _move(devserver, rid) -> str:
    devserver.mkdir(rid, "/docs")
    devserver.move_path(rid, "/" + OLD, "/docs")
    return "docs/todo.txt"


def _rename(devserver, rid) -> str:
    devserver.rename_path(rid, "/" + OLD, "renamed.txt")
    return "notes/renamed.txt"


@pytest.mark.parametrize("move", [_move, _rename], ids=["moved", "renamed"])
def test_a_stale_overwrite_then_a_remote_move_keeps_our_pushed_lines_at_the_new_path(devserver, rid, tmp_path,
                                                                                     move):
    mirror = _pushed(devserver, rid, tmp_path)
    burst = devserver.stale_burst(rid, "/" + OLD, 1, old=V0, line="LINE-R\n")
    assert burst.errors == [] and len(burst.ids) == 1
    new = move(devserver, rid)
    report = mirror.sync()
    assert report.errors == []
    assert (OLD, new) in report.moved, report.moved
    assert not (mirror.root / OLD).exists()
    settle(mirror)
    # both appended at the end: ours stays live, the stale writer's line is archived with a notice
    lines = ["LINE-A", "LINE-B", "LINE-R", "line1"]
    assert_kept(mirror, new, lines, live_only=["LINE-A", "LINE-B", "line1"])


@pytest.mark.parametrize("move", [_move, _rename], ids=["moved", "renamed"])
def test_a_remote_move_without_a_stale_overwrite_is_a_local_rename(devserver, rid, tmp_path, move):
    mirror = _pushed(devserver, rid, tmp_path)
    new = move(devserver, rid)
    requests = mirror.client.request_count
    report = mirror.sync()
    assert report.errors == [] and (OLD, new) in report.moved
    assert report.downloaded == [] and report.uploaded == []
    assert mirror.read(new) == V0 + b"LINE-A\nLINE-B\n"
    assert mirror.client.request_count - requests < 12, "a move paired by id needs no download"


def test_an_unrelated_file_of_the_same_name_is_not_taken_for_the_moved_one(devserver, rid, tmp_path):
    # the other client deletes our file and creates another one of that name elsewhere:
    # the delete stays a delete (not mixed into the new file), the new file arrives as it is
    mirror = _pushed(devserver, rid, tmp_path)
    devserver.delete_path(rid, "/" + OLD)
    devserver.put_file(rid, "/docs/todo.txt", b"groceries\nmilk\neggs\n")
    report = mirror.sync()
    assert report.errors == []
    assert report.moved == []
    assert mirror.read("docs/todo.txt") == b"groceries\nmilk\neggs\n"
    assert devserver.read_file(rid, "/docs/todo.txt") == b"groceries\nmilk\neggs\n"
    assert not (mirror.root / OLD).exists()


def test_a_failed_check_deletes_nothing_until_a_later_pass_can_tell(devserver, rid, tmp_path, monkeypatch):
    mirror = _pushed(devserver, rid, tmp_path)
    burst = devserver.stale_burst(rid, "/" + OLD, 1, old=V0, line="LINE-R\n")
    assert burst.errors == []
    new = _move(devserver, rid)
    download = mirror.client.download_bytes

    def failing(repo_id, path):
        from ohsync.engine.errors import ServerError
        raise ServerError("502 from a test")

    monkeypatch.setattr(mirror.client, "download_bytes", failing)
    mirror.sync()
    assert (mirror.root / OLD).exists(), "deleted here before the move could be checked"
    monkeypatch.setattr(mirror.client, "download_bytes", download)
    settle(mirror)
    # both appended at the end: ours stays live, the stale writer's line is archived with a notice
    lines = ["LINE-A", "LINE-B", "LINE-R", "line1"]
    assert_kept(mirror, new, lines, live_only=["LINE-A", "LINE-B", "line1"])


@pytest.mark.parametrize("away", ["deleted", "moved"])
def test_a_stale_overwrite_of_a_file_made_anew_still_lacks_our_earlier_pushes(devserver, rid, tmp_path, away):
    # the chaos seed: a stale device reads V1 of a memory file, we push LINE-B, the file
    # goes away on the server while the person adds LINE-C, we make it anew, then the
    # stale device overwrites the new file from V1: LINE-B must not read as its deletion
    # (observations merge as a union, so nothing here conflicts to save it)
    devserver.put_file(rid, "/" + JOURNAL, HEADER)
    mirror = make_mirror(devserver, rid, tmp_path)
    assert mirror.sync().errors == []
    mirror.write(JOURNAL, mirror.read(JOURNAL) + b"- [note] LINE-A #t\n")
    assert mirror.sync([JOURNAL]).errors == []
    v1 = devserver.read_file(rid, "/" + JOURNAL)
    mirror.write(JOURNAL, mirror.read(JOURNAL) + b"- [note] LINE-B #t\n")
    assert mirror.sync([JOURNAL]).errors == []
    if away == "deleted":
        devserver.delete_path(rid, "/" + JOURNAL)
    else:
        devserver.mkdir(rid, "/docs")
        devserver.move_path(rid, "/" + JOURNAL, "/docs")
    mirror.write(JOURNAL, mirror.read(JOURNAL) + b"- [note] LINE-C #t\n")
    assert mirror.sync().errors == []
    assert b"LINE-C" in devserver.read_file(rid, "/" + JOURNAL), "not made anew"
    burst = devserver.stale_burst(rid, "/" + JOURNAL, 2, old=v1, line="- [note] LINE-R{i} #t\n")
    assert burst.errors == [] and len(burst.ids) == 2
    settle(mirror)
    lines = ["LINE-A", "LINE-B", "LINE-C", "LINE-R1", "start"]
    assert_kept(mirror, JOURNAL, lines, live_only=lines)


def test_a_pass_that_left_a_move_unchecked_is_not_taken_for_settled(devserver, rid, tmp_path, monkeypatch):
    # the paths a failed check left out must come back without any new change on either side
    mirror = _pushed(devserver, rid, tmp_path)
    assert devserver.stale_burst(rid, "/" + OLD, 1, old=V0, line="LINE-R\n").errors == []
    new = _move(devserver, rid)
    download = mirror.client.download_bytes

    def failing(repo_id, path):
        from ohsync.engine.errors import ServerError
        raise ServerError("502 from a test")

    monkeypatch.setattr(mirror.client, "download_bytes", failing)
    report = mirror.sync()
    assert report.errors, "the left-out move would wait for the next change"
    monkeypatch.setattr(mirror.client, "download_bytes", download)
    again = mirror.engine.sync([], check_remote=True)  # an idle-shaped poll, as the worker's next one
    assert again.moved == [(OLD, new)]


def test_a_file_deleted_here_and_moved_there_beside_a_new_one_is_pulled_not_moved(devserver, rid, tmp_path):
    """Deleted here while on the server it was renamed to ``name (1)`` and
    another, unrelated file took its name: there is no local file to move,
    so both come down as they are (a modification beats a deletion), in one
    pass, instead of a move tried in every pass."""
    mirror = _pushed(devserver, rid, tmp_path)
    pushed = mirror.read(OLD)
    (mirror.root / OLD).unlink()
    copy = "notes/todo (1).txt"
    devserver.rename_path(rid, "/" + OLD, "todo (1).txt")
    devserver.put_file(rid, "/" + OLD, b"a new list, nothing to do with the old one\n")
    report = mirror.sync()
    assert report.errors == [], report.errors
    assert mirror.read(OLD) == b"a new list, nothing to do with the old one\n"
    assert mirror.read(copy) == pushed
    again = mirror.sync()
    assert again.errors == [] and again.transferred == 0
