"""A memory file whose edits partly conflict: everything that merges stays
live, only the conflicting part's other version goes to the conflict copy,
and the conflict record names that part (issue 12, "one unmergeable hunk")."""

from __future__ import annotations

import pytest
import yaml

from engine_helpers import USER, make_mirror, sample_library
from ohsync.engine.memory.format import parse_memory
from ohsync.engine.memory.merge import merge_memory

TASK = "tasks/数据结构大作业 1 - 哈希表.md"
OBS_ANCHOR = "- [risk] 开放定址删除要用墓碑标记 (tombstone)，不能直接置空 #坑\n"
REL_ANCHOR = "- relates_to [[2026-11]]\n"


def _edit(text: str, side: str, status: str, modified: str) -> str:
    """One writer's edit: a new observation, a new relation, the status field changed."""
    text = text.replace("modified: 2026-11-21T00:37:00+08:00\n", f"modified: {modified}\nstatus: {status}\n")
    text = text.replace(OBS_ANCHOR, OBS_ANCHOR + f"- [note] {side} 的新观察 #{side}\n")
    return text.replace(REL_ANCHOR, REL_ANCHOR + f"- refined_by [[{side} 笔记]]\n")


@pytest.fixture
def task_versions():
    from engine_helpers import SAMPLES
    base = (SAMPLES / "OH-Memory" / TASK).read_text("utf-8")
    base = base.replace("modified: 2026-11-21T00:37:00+08:00\n",
                        "modified: 2026-11-21T00:37:00+08:00\nstatus: in_progress\n")
    strip = "status: in_progress\n"
    ours = _edit(base.replace(strip, ""), "ours", "done", "2026-11-30T10:00:00+08:00")
    theirs = _edit(base.replace(strip, ""), "theirs", "blocked", "2026-11-30T11:00:00+08:00")
    return base, ours, theirs


def test_conflicting_field_leaves_every_other_part_merged(task_versions):
    base, ours, theirs = task_versions
    r = merge_memory(base.encode(), ours.encode(), theirs.encode(), rel_path=TASK)
    assert r.content is None and r.conflicts == ["frontmatter field 'status'"]
    live = r.partial.decode()
    for added in ("ours 的新观察", "theirs 的新观察", "[[ours 笔记]]", "[[theirs 笔记]]"):
        assert added in live
    doc = parse_memory(r.partial)
    assert doc.frontmatter.data["status"] == "done"  # ours wins the conflicting field
    assert str(doc.frontmatter.data["modified"]).startswith("2026-11-30 11:00")  # later modified wins
    assert r.details == ["frontmatter field 'status': kept 'done'; the other side's 'blocked' is in the "
                         "conflict copy"]


def test_conflicting_body_line_keeps_ours_there_and_merges_the_rest(task_versions):
    base, ours, theirs = task_versions
    ours = ours.replace("- [ ] 写 benchmark 脚本", "- [x] 写 benchmark 脚本（python）")
    theirs = theirs.replace("- [ ] 写 benchmark 脚本", "- [ ] 写 benchmark 脚本（C++）").replace(
        "status: blocked", "status: done")
    r = merge_memory(base.encode(), ours.encode(), theirs.encode(), rel_path=TASK)
    assert r.content is None and len(r.conflicts) == 1 and r.conflicts[0].startswith("line")
    live = r.partial.decode()
    assert "写 benchmark 脚本（python）" in live and "（C++）" not in live
    assert "theirs 的新观察" in live and "[[theirs 笔记]]" in live
    assert "kept this side's text" in r.details[0]


def test_both_writers_edit_one_task_file_through_the_engine(devserver, tmp_path, task_versions):
    base, ours, theirs = task_versions
    tree = sample_library(tmp_path / "seed")
    (tree / TASK).write_text(base, "utf-8")
    repo = devserver.create_library(USER, "OH-Memory", from_tree=tree)
    mirror = make_mirror(devserver, repo, tmp_path)
    mirror.sync()
    devserver.put_file(repo, "/" + TASK, theirs.encode())  # the phone app's edit
    mirror.write(TASK, ours.encode())                        # the desktop's edit
    report = mirror.sync()

    live = mirror.read(TASK)
    assert devserver.read_file(repo, "/" + TASK) == live
    text = live.decode()
    for added in ("ours 的新观察", "theirs 的新观察", "[[ours 笔记]]", "[[theirs 笔记]]"):
        assert added in text, added
    assert yaml.safe_load(text.split("---\n")[1])["status"] == "done"
    assert "<<<<<<<" not in text and ">>>>>>>" not in text

    [record] = report.conflicts
    assert record.fields == ("frontmatter field 'status'",)
    assert "'blocked' is in the conflict copy" in record.reason
    copy = mirror.read(record.archived)
    assert copy == theirs.encode() == devserver.read_file(repo, "/" + record.archived)
    assert mirror.sync().transferred == 0
