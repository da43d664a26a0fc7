"""Stale writers after a local move: the record of our verified pushes goes
with the file (``engine/merge/stale.py``), so a stale overwrite of a file
whose folder (or the file itself) the person moved is still merged with the
version our lacked pushes replaced, and our lines stay live or archived in
``/.conflict/``; never only in a local backup.

The chaos profile found it: the person moved a folder, ohsync carried the
move to the server, and a stale device's overwrite of a file in it (made
from a version before our pushes) was merged against the moved base as if
it had removed our lines on purpose.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from engine_helpers import USER, make_mirror  # noqa: E402
from test_writers_stale import assert_kept, settle  # noqa: E402

V0 = b"line1\nline2\nline3\n"
OLD, NEW = "notes/todo.txt", "moved/notes/todo.txt"


@pytest.fixture
def rid(devserver):
    return devserver.create_library(USER, "OH-Memory")


def _append(mirror, rel: str, line: str) -> None:
    mirror.write(rel, mirror.read(rel) + (line + "\n").encode())


def _two_pushes(devserver, rid, tmp_path):
    """Sync V0 (and a second file in the folder); save LINE-A, synced; LINE-B, synced."""
    devserver.put_file(rid, "/" + OLD, V0)
    devserver.put_file(rid, "/notes/other.txt", b"other\n")
    mirror = make_mirror(devserver, rid, tmp_path)
    assert mirror.sync().errors == []
    for line in ("LINE-A", "LINE-B"):
        _append(mirror, OLD, line)
        assert mirror.sync([OLD]).errors == []
        assert devserver.read_file(rid, "/" + OLD).endswith((line + "\n").encode())
    return mirror


def _prepend(mirror, rel: str, line: str) -> None:
    """A save away from the lines the stale writer changed (a clean three-way merge)."""
    mirror.write(rel, (line + "\n").encode() + mirror.read(rel))


def _move_folder(mirror) -> None:
    (mirror.root / "moved").mkdir()
    os.rename(mirror.root / "notes", mirror.root / "moved" / "notes")


def _move_file(mirror) -> None:
    (mirror.root / "moved" / "notes").mkdir(parents=True)
    os.rename(mirror.root / OLD, mirror.root / NEW)


@pytest.mark.parametrize("then_save", [False, True], ids=["pulled", "merged-with-a-save"])
@pytest.mark.parametrize("move", [_move_folder, _move_file], ids=["folder", "file"])
def test_a_stale_overwrite_after_a_local_move_keeps_our_pushed_lines(devserver, rid, tmp_path, move,
                                                                     then_save):
    mirror = _two_pushes(devserver, rid, tmp_path)
    move(mirror)
    assert mirror.sync().errors == []
    assert devserver.read_file(rid, "/" + NEW) == V0 + b"LINE-A\nLINE-B\n", "the move was not carried"
    # a client that read the file before our pushes overwrites it where it is now
    burst = devserver.stale_burst(rid, "/" + NEW, 1, old=V0, line="LINE-R\n")
    assert burst.errors == [] and len(burst.ids) == 1
    lines = ["LINE-A", "LINE-B", "LINE-R", "line1"]
    if then_save:
        _prepend(mirror, NEW, "LINE-C")
        lines.append("LINE-C")
    settle(mirror)
    assert_kept(mirror, NEW, lines, live_only=[ln for ln in lines if ln != "LINE-R"])


@pytest.mark.parametrize("then_save", [False, True], ids=["pulled", "merged-with-a-save"])
def test_a_stale_overwrite_landing_just_before_the_folder_move_keeps_our_pushed_lines(devserver, rid, tmp_path,
                                                                                     monkeypatch, then_save):
    # the chaos run's interleaving: the pass lists the folder unchanged, the stale device's
    # overwrite of the old path lands, then ohsync moves the folder on the server (with it)
    mirror = _two_pushes(devserver, rid, tmp_path)
    _move_folder(mirror)
    move = mirror.client.move

    def stale_then_move(*args, **kwargs):  # noqa: ANN202
        if not devserver.bursts:
            burst = devserver.stale_burst(rid, "/" + OLD, 1, old=V0, line="LINE-R\n")
            assert burst.errors == [] and len(burst.ids) == 1
        return move(*args, **kwargs)

    monkeypatch.setattr(mirror.client, "move", stale_then_move)
    assert mirror.sync().errors == []
    assert devserver.file_id(rid, "/notes") is None, "the folder move was not carried to the server"
    assert b"LINE-R" in devserver.read_file(rid, "/" + NEW), "the stale overwrite did not go with the folder"
    lines = ["LINE-A", "LINE-B", "LINE-R", "line1"]
    if then_save:
        _prepend(mirror, NEW, "LINE-C")
        lines.append("LINE-C")
    settle(mirror)
    assert_kept(mirror, NEW, lines, live_only=[ln for ln in lines if ln != "LINE-R"])
