"""Blind overwrites by other clients are merged back (issue "Two writers at
once"): another client reads the journal, we push our append, then it uploads
its own edit of what it read (no ``head``).  Its revision follows ours in the
file history but is based on the one before ours: the engine merges with that
one as base, so every line either side wrote stays live."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from engine_helpers import USER, make_mirror  # noqa: E402

JOURNAL = "notes/journal.md"
HEADER = "---\ntitle: Journal\ntype: note\n---\n# Journal\n\n## Observations\n- [note] start #seed\n"


@pytest.fixture
def rid(devserver):
    return devserver.create_library(USER, "OH-Memory")


def test_ten_rounds_of_blind_overwrites_lose_nothing(devserver, rid, tmp_path):
    devserver.put_file(rid, "/" + JOURNAL, HEADER.encode())
    mirror = make_mirror(devserver, rid, tmp_path)
    events = []
    mirror.engine.ctx.on_event = events.append
    mirror.sync()
    local_lines, remote_lines = [], []
    for i in range(10):
        read_by_other = devserver.read_file(rid, "/" + JOURNAL).decode()  # the other client reads
        local_lines.append(f"- [note] local line {i} #desk")
        mirror.write(JOURNAL, (mirror.read(JOURNAL).decode() + local_lines[-1] + "\n").encode())
        assert mirror.sync([JOURNAL]).errors == []  # ours is pushed and verified
        remote_lines.append(f"- [note] remote line {i} #bot")
        devserver.put_file(rid, "/" + JOURNAL, (read_by_other + remote_lines[-1] + "\n").encode())  # blind
        report = mirror.sync()
        assert report.errors == []
        assert JOURNAL in report.merged, f"round {i}: the overwrite was pulled instead of merged back"
    live = devserver.read_file(rid, "/" + JOURNAL).decode()
    copies = "".join(v.decode("utf-8", "replace") for k, v in devserver.tree(rid).items()
                     if k.startswith("/.conflict/"))
    lost = [line for line in local_lines + remote_lines if line not in live and line not in copies]
    assert lost == [], f"{len(lost)} lines lost: {lost}"
    assert all(line in live for line in local_lines + remote_lines)  # memory lines merge as a union
    assert mirror.read(JOURNAL).decode() == live
    merged_back = [e for e in events if e.kind == "synced" and "wrote over our last upload" in (e.message or "")]
    assert len(merged_back) == 10


def test_edit_based_on_our_revision_is_pulled_as_usual(devserver, rid, tmp_path):
    devserver.put_file(rid, "/" + JOURNAL, HEADER.encode())
    mirror = make_mirror(devserver, rid, tmp_path)
    mirror.sync()
    mirror.write(JOURNAL, (HEADER + "- [note] ours #desk\n").encode())
    mirror.sync([JOURNAL])
    # the other client read ours and removed the seed line: a deliberate edit of our revision
    edited = (HEADER + "- [note] ours #desk\n").replace("- [note] start #seed\n", "") + "- [note] theirs #bot\n"
    devserver.put_file(rid, "/" + JOURNAL, edited.encode())
    report = mirror.sync()
    assert report.errors == [] and JOURNAL in report.downloaded and JOURNAL not in report.merged
    assert mirror.read(JOURNAL).decode() == edited


def test_blind_overwrite_while_the_local_file_changed_again(devserver, rid, tmp_path):
    devserver.put_file(rid, "/" + JOURNAL, HEADER.encode())
    mirror = make_mirror(devserver, rid, tmp_path)
    mirror.sync()
    read_by_other = devserver.read_file(rid, "/" + JOURNAL).decode()
    mirror.write(JOURNAL, (HEADER + "- [note] first local #desk\n").encode())
    mirror.sync([JOURNAL])
    devserver.put_file(rid, "/" + JOURNAL, (read_by_other + "- [note] remote #bot\n").encode())
    mirror.write(JOURNAL, (HEADER + "- [note] first local #desk\n- [note] second local #desk\n").encode())
    report = mirror.sync()  # both sides changed since the base: one merge, against the older revision
    assert report.errors == []
    live = devserver.read_file(rid, "/" + JOURNAL).decode()
    for line in ("first local", "second local", "remote", "start"):
        assert line in live, line
    assert mirror.read(JOURNAL).decode() == live


def test_push_evidence_tells_an_edit_of_the_older_revision_from_an_edit_of_ours():
    from ohsync.engine.merge.stale import push_evidence

    older = b"a\nb\n"
    ours = b"a\nb\nours\n"
    assert push_evidence(older, ours, b"a\nb\ntheirs\n") is False            # made from older: stale
    assert push_evidence(older, ours, b"a\nb\nours\ntheirs\n") is True      # made from ours
    assert push_evidence(older, ours, older) is False                       # older written back: ours is kept
    assert push_evidence(b"a\nb\nc\n", b"a\nc\n", b"a\nc\nx\n") is True  # our removal kept: made from ours
    # b came after the oldest version on record: a version older than ours may never have had it
    assert push_evidence(b"a\nb\nc\n", b"a\nc\n", b"a\nc\nx\n", first=frozenset([b"a", b"c"])) is None
    # a line we never had (theirs, archived in a conflict copy) that ours dropped is no removal of ours
    assert push_evidence(b"a\nt\n", b"a\nours\n", b"a\nx\n", had=frozenset([b"a"])) is False
    # a line an earlier version had, put back by a merge, is no evidence
    assert push_evidence(b"a\n", b"a\nold\n", b"a\nold\nx\n", earlier=frozenset([b"old"])) is None
    assert push_evidence(b"a\nb\nc\n", b"a\nc\n", b"a\nb\nc\nx\n") is False  # our removal undone by an older edit
    assert push_evidence(older, b"a\nb\n\n", b"a\nb\nx\n") is None      # only a blank line: no evidence


@pytest.mark.parametrize("theirs_based_on_ours", [False, True])
def test_plain_text_file_keeps_both_sides(devserver, rid, tmp_path, theirs_based_on_ours):
    path = "Files/notes/todo.txt"
    devserver.put_file(rid, "/" + path, b"one\ntwo\n")
    mirror = make_mirror(devserver, rid, tmp_path)
    mirror.sync()
    mirror.write(path, b"one\ntwo\nours\n")
    mirror.sync([path])
    read = devserver.read_file(rid, "/" + path)
    other = (read if theirs_based_on_ours else b"one\ntwo\n") + b"theirs\n"
    devserver.put_file(rid, "/" + path, other)
    report = mirror.sync()
    assert report.errors == []
    tree = devserver.tree(rid)
    everything = b"".join(v for k, v in tree.items() if k == "/" + path or k.startswith("/.conflict/"))
    assert b"ours\n" in everything and b"theirs\n" in everything
    if theirs_based_on_ours:  # an ordinary edit of our revision: pulled, no conflict copy
        assert tree["/" + path] == other and path in report.downloaded and report.conflicts == []
    assert mirror.read(path) == tree["/" + path]


def test_pruning_blobs_keeps_what_the_push_record_needs(devserver, rid, tmp_path):
    devserver.put_file(rid, "/" + JOURNAL, HEADER.encode())
    mirror = make_mirror(devserver, rid, tmp_path)
    mirror.sync()
    mirror.write(JOURNAL, (HEADER + "- [note] ours #desk\n").encode())
    mirror.sync([JOURNAL])
    mirror.state.delete_base(JOURNAL)  # no base refers to either version now
    mirror.state.prune_blobs()
    kept = {p.name for p in mirror.state.blob_dir.iterdir()}
    from ohsync.engine.ids import sha1_bytes

    assert {sha1_bytes(HEADER.encode()), sha1_bytes((HEADER + "- [note] ours #desk\n").encode())} <= kept
