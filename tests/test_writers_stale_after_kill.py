"""A kill between our upload and its record, then a stale overwrite.

The daemon is killed after the server took our upload but before the push
was read back and put on record (``engine/merge/stale.py``'s record of our
pushes); another client then overwrites the file from a version older than
that upload.  On the next start the last push on record is older than the
file's newest version of ours: the lines of the unrecorded upload, still in
the local file, must stay live, not be merged away as the other client's
removal.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from engine_helpers import USER, make_mirror
from test_breaker_stale_moves import V0, _killed_at, _push
from test_writers_stale import settle

TODO = "notes/todo.txt"
JOURNAL = "journal/2026-11.md"
HEADER = b"---\ntitle: 2026-11\ntype: journal\n---\n\n# 2026-11\n\n## Observations\n- [seed] first #s\n"


def _list_twice(monkeypatch) -> None:
    """File histories list every revision twice in a row (Seafile lists a
    rename or move of a file again, with the same file id)."""
    from ohsync.engine import capabilities, transfer
    from ohsync.engine.merge import stale

    def doubled(ctx, rel_path, *, limit):
        revisions = capabilities.file_history(ctx, rel_path, limit=limit)
        return [r for r in revisions for _ in (0, 1)][:limit] if revisions else revisions
    monkeypatch.setattr(transfer, "file_history", doubled)
    monkeypatch.setattr(stale, "file_history", doubled)


@pytest.fixture
def rid(devserver):
    return devserver.create_library(USER, "OH-Memory")


@pytest.mark.parametrize("point", ["push.uploaded", "push.verified"])
@pytest.mark.parametrize("rel, v0", [(TODO, V0), (JOURNAL, HEADER)], ids=["text", "memory"])
def test_a_kill_after_an_upload_then_a_stale_overwrite_keeps_the_unrecorded_lines(devserver, rid, tmp_path,
                                                                                  point, rel, v0):
    devserver.put_file(rid, "/" + rel, v0)
    mirror = make_mirror(devserver, rid, tmp_path)
    assert mirror.sync().errors == []
    _push(mirror, rel, ["- [n] LINE-A #a", "- [n] LINE-B #b"])  # on record
    mirror.write(rel, mirror.read(rel) + b"- [n] LINE-C #c\n")
    _killed_at(mirror, point)  # the server has LINE-C; its push is not on record
    assert b"LINE-C" in devserver.read_file(rid, "/" + rel)
    assert devserver.stale_burst(rid, "/" + rel, 1, old=v0, line="- [r] LINE-R #r\n").errors == []
    again = make_mirror(devserver, rid, tmp_path)
    again.write(rel, again.read(rel) + b"- [n] LINE-D #d\n")  # the person goes on editing
    settle(again)
    live = devserver.read_file(rid, "/" + rel)
    assert live == again.read(rel)
    for line in (b"LINE-A", b"LINE-B", b"LINE-C", b"LINE-D"):  # the person's lines: live
        assert line in live, (line, live)
    # the other client's line: merged (memory files) or in a conflict copy with a notice (text)
    copies = [v for k, v in devserver.tree(rid).items() if k.startswith("/.conflict/")]
    assert b"LINE-R" in live or (any(b"LINE-R" in c for c in copies) and again.engine.conflicts())


@pytest.mark.parametrize("listed_twice", [False, True], ids=["listed-once", "listed-twice"])
@pytest.mark.parametrize("rel, v0", [(TODO, V0), (JOURNAL, HEADER)], ids=["text", "memory"])
def test_a_stale_writers_own_earlier_lines_do_not_make_its_overwrite_look_made_from_ours(devserver, rid, tmp_path,
                                                                                        rel, v0, listed_twice,
                                                                                        monkeypatch):
    """A bot rewrites the file again and again from one old read, each time
    with all its lines so far; we merged its earlier lines into our uploads,
    the last of which was never put on record (killed after the upload).
    Its next overwrite carries its own earlier lines, which our unrecorded
    upload also holds: that is no sign it was made from ours, and our lines
    stay live.  ``listed_twice``: the history lists each revision twice in a
    row (as Seafile lists a rename with the same file id)."""
    if listed_twice:
        _list_twice(monkeypatch)
    devserver.put_file(rid, "/" + rel, v0)
    mirror = make_mirror(devserver, rid, tmp_path)
    assert mirror.sync().errors == []
    _push(mirror, rel, ["- [n] LINE-A #a"])
    stale = [b"- [r] BOT-1 #r\n", b"- [r] BOT-2 #r\n", b"- [r] BOT-3 #r\n"]
    devserver.put_file(rid, "/" + rel, v0 + stale[0])  # the bot's first overwrite, from its old read
    _push(mirror, rel, ["- [n] LINE-B #b"])  # merged with it, on record
    devserver.put_file(rid, "/" + rel, v0 + b"".join(stale[:2]))
    mirror.write(rel, mirror.read(rel) + b"- [n] LINE-C #c\n")
    _killed_at(mirror, "push.uploaded")  # merged with BOT-2 and uploaded; not on record
    assert b"LINE-C" in devserver.read_file(rid, "/" + rel)
    devserver.put_file(rid, "/" + rel, v0 + b"".join(stale))
    again = make_mirror(devserver, rid, tmp_path)
    settle(again)
    live = devserver.read_file(rid, "/" + rel)
    assert live == again.read(rel)
    for line in (b"LINE-A", b"LINE-B", b"LINE-C"):
        assert line in live, (line, live)


@pytest.mark.parametrize("listed_twice", [False, True], ids=["listed-once", "listed-twice"])
@pytest.mark.parametrize("rel, v0", [(TODO, V0), (JOURNAL, HEADER)], ids=["text", "memory"])
def test_an_upload_whose_answer_was_lost_then_a_stale_overwrite_keeps_our_line(devserver, rid, tmp_path, rel, v0,
                                                                               listed_twice, monkeypatch):
    """Another client wrote X (a line of its own); we merged the person's
    line with X and uploaded, and the server stored it but its answer was
    lost.  The next pass finds our bytes there and puts that upload on
    record as replacing X (read from the file history), not our older base:
    the client's next overwrite, made from X and lacking only our line,
    holds X's line, which is no sign it was made from ours, so it is merged
    and the person's line stays live.  ``listed_twice``: the history lists
    our upload twice in a row (Seafile lists a rename or move of the file
    with the same file id): the version replaced is the next one."""
    if listed_twice:
        _list_twice(monkeypatch)
    devserver.put_file(rid, "/" + rel, v0)
    mirror = make_mirror(devserver, rid, tmp_path)
    assert mirror.sync().errors == []
    x = v0 + b"- [r] BOT-1 #r\n"
    devserver.put_file(rid, "/" + rel, x)  # the other client's first write
    mirror.write(rel, b"- [n] LINE-L #l\n" + mirror.read(rel) if rel == TODO else
                 mirror.read(rel) + b"- [n] LINE-L #l\n")
    devserver.inject_fault("POST", r"/seafhttp/", status=500, after_processing=True, count=1)
    mirror.sync()  # the merge is stored; its answer lost
    assert b"LINE-L" in devserver.read_file(rid, "/" + rel)
    settle(mirror)
    devserver.put_file(rid, "/" + rel, x + b"- [r] BOT-2 #r\n")  # its next write, from X
    settle(mirror)
    live = devserver.read_file(rid, "/" + rel)
    assert live == mirror.read(rel)
    for line in (b"LINE-L", b"BOT-1", b"BOT-2"):
        assert line in live, (line, live)
