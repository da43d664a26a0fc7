"""Two writers fighting over one file: after FIGHT_LIMIT conflicts within
FIGHT_WINDOW the path is left alone on both sides (no more conflict copies).

While it is, and nothing changes on either side, a pass leaves it alone
without a request, so the mirror settles and idle polls cost one request;
status still lists the path.  A change on either side looks again; the
person's ``refresh`` (after settling the file) lifts the pause, also across a
restart of the daemon: the next
meeting is decided as any other (merged, or one conflict copy).
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from engine_helpers import USER, make_mirror
from ohsync.engine.merge.resolve import FIGHT_LIMIT

NOTES = "notes.txt"


@pytest.fixture
def rid(devserver):
    return devserver.create_library(USER, "OH-Memory")


def _meet(devserver, rid, mirror, i: int):
    """Both sides add a line at the end (no clean merge), then a full pass."""
    mirror.write(NOTES, mirror.read(NOTES) + f"local {i}\n".encode())
    devserver.put_file(rid, "/" + NOTES, devserver.read_file(rid, "/" + NOTES) + f"remote {i}\n".encode())
    return mirror.sync()


def _paused(devserver, rid, tmp_path):
    devserver.put_file(rid, "/" + NOTES, b"one\n")
    mirror = make_mirror(devserver, rid, tmp_path)
    assert mirror.sync().errors == []
    for i in range(FIGHT_LIMIT):
        assert len(_meet(devserver, rid, mirror, i).conflicts) == 1
    report = _meet(devserver, rid, mirror, FIGHT_LIMIT)
    assert report.conflicts == [] and [r for r, _ in report.skipped] == [NOTES]
    return mirror


def test_a_paused_path_is_left_alone_without_a_request_and_the_mirror_settles(devserver, rid, tmp_path):
    mirror = _paused(devserver, rid, tmp_path)
    live = devserver.read_file(rid, "/" + NOTES)
    devserver.reset_counters()
    poll = mirror.sync([])  # a poll: the paused path, unchanged on both sides, is left alone
    assert [r for r, _ in poll.skipped] == [NOTES]
    assert devserver.request_count(r"/file/") == 0  # nothing of it read or written
    idle = mirror.sync([])  # settled: the idle poll reads the head only
    assert idle.idle and idle.requests == 1
    full = mirror.sync()  # a full scan too leaves it alone and settles
    assert [r for r, _ in full.skipped] == [NOTES] and devserver.request_count(r"/file/") == 0
    assert mirror.sync([]).requests == 1
    assert [p for p, _ in mirror.engine.skipped()] == [NOTES]  # still listed for the person
    assert devserver.read_file(rid, "/" + NOTES) == live and b"local 3" in mirror.read(NOTES)


def test_a_change_on_either_side_looks_again(devserver, rid, tmp_path):
    mirror = _paused(devserver, rid, tmp_path)
    mirror.write(NOTES, mirror.read(NOTES) + b"local again\n")
    report = mirror.sync()
    assert [r for r, _ in report.skipped] == [NOTES]  # still fighting: still left alone, read again
    assert report.requests > 1 and report.conflicts == []


@pytest.mark.parametrize("restart", [False, True], ids=["running", "restarted after the refresh"])
def test_refresh_lifts_the_pause_and_the_next_meeting_keeps_one_copy(devserver, rid, tmp_path, restart):
    mirror = _paused(devserver, rid, tmp_path)
    mirror.engine.release_failures()  # the person's `ohsync refresh`
    if restart:  # the daemon restarted minutes later: the conflicts before the refresh still do not count
        mirror.state.close()
        mirror.client.close()
        mirror = make_mirror(devserver, rid, tmp_path)
        assert mirror.sync().skipped == []  # the pause itself is not kept, nor taken up again
        mirror.write(NOTES, mirror.read(NOTES) + b"local after restart\n")
        devserver.put_file(rid, "/" + NOTES, devserver.read_file(rid, "/" + NOTES) + b"remote after restart\n")
    report = mirror.sync()
    assert report.skipped == [] and len(report.conflicts) == 1
    assert mirror.read(NOTES) == devserver.read_file(rid, "/" + NOTES)
    copies = b"".join(v for k, v in devserver.tree(rid).items() if k.startswith("/.conflict/"))
    live = devserver.read_file(rid, "/" + NOTES)
    for i in range(FIGHT_LIMIT + 1):  # every line of both writers: live or in a copy
        assert f"local {i}".encode() in live + copies and f"remote {i}".encode() in live + copies
    assert mirror.engine.skipped() == []


def test_a_fight_at_a_path_synced_since_its_pause_is_announced_again(devserver, rid, tmp_path):
    mirror = _paused(devserver, rid, tmp_path)
    events = []
    mirror.engine.ctx.on_event = events.append
    (mirror.root / NOTES).unlink()  # the person settles it here: the server's version comes back
    settled = mirror.sync()
    assert settled.downloaded == [NOTES] and settled.skipped == [] and settled.errors == []
    assert devserver.read_file(rid, "/" + NOTES) == mirror.read(NOTES)
    report = _meet(devserver, rid, mirror, FIGHT_LIMIT + 1)  # they meet again within the window
    assert [r for r, _ in report.skipped] == [NOTES]  # still fighting: left alone ...
    told = [e for e in events if e.kind == "error" and e.path == NOTES]
    assert len(told) == 1 and "keep changing it" in told[0].message  # ... and the person is told again
