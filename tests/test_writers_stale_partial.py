"""A stale writer (it read the file before our push and uploads its edit of
that old read without ``head``: a plain overwrite through the Web API) that
makes one of the same changes our push made — the same finished task
deleted, the same box ticked, a bumped ``modified:`` — still lacks the rest
of our change (``engine/merge/stale.py`` ``push_evidence``): our lines are
merged back, or kept in /.conflict/, never left only in a backup or the
server's history.  The same holds when the phone deletes or renames the file
after its stale overwrite, before our next pass.
"""
from __future__ import annotations

import pytest

from breaker_helpers import everywhere, synced_small

TODO = b"# Todo\n\n- [ ] call mom\n- [ ] read chapter 3\n- [ ] water the plants\n"

CASES = {
    # both deleted the task that was done; each added a task of its own
    "both_removed_a_line": (
        "lists/todo.md",
        TODO,
        b"# Todo\n\n- [ ] read chapter 3\n- [ ] water the plants\n- [ ] OUR NEW TASK buy milk\n",
        b"# Todo\n\n- [ ] read chapter 3\n- [ ] water the plants\n- [ ] THEIR NEW TASK pay rent\n",
    ),
    # both ticked the same box (the same line rewritten, identically); we also added a line
    "both_ticked_the_same_box": (
        "lists/todo.md",
        TODO,
        b"# Todo\n\n- [x] call mom\n- [ ] read chapter 3\n- [ ] water the plants\n- [ ] OUR NEW TASK buy milk\n",
        b"# Todo\n\n- [x] call mom\n- [ ] read chapter 3\n- [ ] water the plants\n",
    ),
    # both rewrote the same line, differently: a real conflict, never a silent pull
    "same_line_rewritten_differently": (
        "lists/plan.txt",
        b"meeting: tuesday 10:00\nroom: 101\nagenda: budget\n",
        b"meeting: OUR TIME wednesday 14:00\nroom: 101\nagenda: budget\n",
        b"meeting: THEIR TIME thursday 9:00\nroom: 101\nagenda: budget\n",
    ),
    # memory entity: both writers stamp `modified` (ohsync does for every saved edit, stamp_edits),
    # so the old `modified:` line is gone from both; each adds an observation
    "memory_both_stamp_modified": (
        "notes/journal.md",
        b"---\ntitle: Journal\ntype: note\nmodified: 2026-12-01T10:00:00+08:00\norigin: desktop\n---\n"
        b"# Journal\n\n## Observations\n- [note] first line #seed\n",
        b"---\ntitle: Journal\ntype: note\nmodified: 2026-12-03T09:00:00+08:00\norigin: desktop\n---\n"
        b"# Journal\n\n## Observations\n- [note] first line #seed\n- [note] OUR OBSERVATION #desk\n",
        b"---\ntitle: Journal\ntype: note\nmodified: 2026-12-02T18:00:00+08:00\norigin: phone\n---\n"
        b"# Journal\n\n## Observations\n- [note] first line #seed\n- [note] THEIR OBSERVATION #phone\n",
    ),
    # memory entity: an observation removed on both, one added by each
    "memory_observation_removed_on_both": (
        "notes/journal.md",
        b"---\ntitle: Journal\ntype: note\n---\n# Journal\n\n## Observations\n"
        b"- [todo] call mom #family\n- [note] first line #seed\n",
        b"---\ntitle: Journal\ntype: note\n---\n# Journal\n\n## Observations\n"
        b"- [note] first line #seed\n- [note] OUR OBSERVATION #desk\n",
        b"---\ntitle: Journal\ntype: note\n---\n# Journal\n\n## Observations\n"
        b"- [note] first line #seed\n- [note] THEIR OBSERVATION #phone\n",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_stale_overwrite_sharing_one_change_with_our_push_keeps_our_lines(devserver, tmp_path, case):
    rel, old, ours, theirs = CASES[case]
    m = synced_small(devserver, tmp_path, {"/" + rel: old})
    m.sync()
    m.write(rel, ours)                                     # the person saves
    assert m.sync().errors == []
    assert devserver.read_file(m.repo_id, "/" + rel) == ours  # pushed and verified
    devserver.put_file(m.repo_id, "/" + rel, theirs)       # stale client: its edit of the OLD read, no head
    for _ in range(3):
        m.sync()
    our_line = next(ln for ln in ours.splitlines() if b"OUR" in ln)
    live_local, live_remote = m.read(rel), devserver.read_file(m.repo_id, "/" + rel)
    tree = devserver.tree(m.repo_id)
    conflict = b"".join(v for k, v in tree.items() if k.startswith("/.conflict/"))
    backups = [b for b in everywhere(m, tmp_path)["backups"] if our_line in b]
    assert our_line in live_remote + conflict and our_line in live_local + conflict, (
        f"our saved line {our_line!r} is neither live nor in /.conflict/\nlive local={live_local!r}\n"
        f"live remote={live_remote!r}\nconflict copies={conflict!r}\nbackups holding it={len(backups)}")


def test_an_undo_pushed_then_a_stale_overwrite_from_before_the_undo_keeps_the_restored_line(devserver, tmp_path):
    # the person deletes a line by mistake (synced), puts it back (synced); a bot that read in
    # between overwrites with its edit of that read (no head)
    rel = "docs/list.txt"
    v0 = b"alpha\nRESTORED LINE kept by the person\nomega\n"
    m = synced_small(devserver, tmp_path, {"/" + rel: v0})
    m.sync()
    m.write(rel, b"alpha\nomega\n")
    assert m.sync().errors == []
    bot_read = devserver.read_file(m.repo_id, "/" + rel)
    m.write(rel, v0)                                           # undo: the line is back
    assert m.sync().errors == [] and devserver.read_file(m.repo_id, "/" + rel) == v0
    devserver.put_file(m.repo_id, "/" + rel, bot_read + b"BOT LINE\n")
    for _ in range(3):
        m.sync()
    live_local, live_remote = m.read(rel), devserver.read_file(m.repo_id, "/" + rel)
    conflict = b"".join(v for k, v in devserver.tree(m.repo_id).items() if k.startswith("/.conflict/"))
    line = b"RESTORED LINE"
    assert line in live_remote + conflict and line in live_local + conflict, (live_local, live_remote, conflict)


OLD = (b"---\ntitle: Journal\ntype: note\nmodified: 2026-12-01T10:00:00+08:00\norigin: desktop\n---\n"
       b"# Journal\n\n## Observations\n- [note] first line #seed\n")
OURS = OLD.replace(b"2026-12-01T10:00:00", b"2026-12-03T09:00:00") + b"- [note] OUR OBSERVATION #desk\n"
THEIRS = OLD.replace(b"2026-12-01T10:00:00", b"2026-12-02T18:00:00") + b"- [note] THEIR OBSERVATION #phone\n"


def _pushed_then_overwritten(devserver, tmp_path, rel):
    """A mirror that pushed OURS over OLD, then a stale writer that saved THEIRS (made from OLD)."""
    m = synced_small(devserver, tmp_path, {"/" + rel: OLD})
    m.sync()
    m.write(rel, OURS)
    assert m.sync().errors == [] and devserver.read_file(m.repo_id, "/" + rel) == OURS
    devserver.put_file(m.repo_id, "/" + rel, THEIRS)
    return m


def test_stale_overwrite_then_delete_keeps_our_observation(devserver, tmp_path):
    rel = "notes/journal.md"
    m = _pushed_then_overwritten(devserver, tmp_path, rel)
    devserver.delete_path(m.repo_id, "/" + rel)
    for _ in range(3):
        m.sync()
    where = everywhere(m, tmp_path)
    found = {k: sum(b"OUR OBSERVATION" in b for b in v) for k, v in where.items()}
    assert found["mirror"] and found["server"], found


def test_stale_overwrite_then_rename_keeps_our_observation(devserver, tmp_path):
    rel = "notes/journal.md"
    m = _pushed_then_overwritten(devserver, tmp_path, rel)
    devserver.rename_path(m.repo_id, "/" + rel, "journal-2026.md")
    for _ in range(3):
        m.sync()
    tree = devserver.tree(m.repo_id)
    live = {k: v for k, v in tree.items() if not k.startswith("/.trash")}
    found_server = [k for k, v in live.items() if b"OUR OBSERVATION" in v]
    found_local = [k for k, v in everywhere(m, tmp_path).items() if any(b"OUR OBSERVATION" in b for b in v)]
    assert found_server and "mirror" in found_local, (found_server, found_local, sorted(live))
