"""Tests for ohsync.engine.memory.merge: the memory-aware three-way merge (issue 6)."""
from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine_helpers import sample, samples_dir
from ohsync.engine.memory.format import parse_memory
from ohsync.engine.memory.merge import is_journal_file, is_memory_file, merge_memory

FAST = settings(max_examples=200, deadline=None)
BOM = b"\xef\xbb\xbf"


def insert_after_last(data: bytes, prefix: str, new: str) -> bytes:
    """Insert line *new* after the last line starting with *prefix*, in the file's own line ending."""
    eol = "\r\n" if b"\r\n" in data else "\n"
    lines = data.decode("utf-8").split(eol)
    idx = max(i for i, line in enumerate(lines) if line.lstrip("\ufeff").startswith(prefix))
    lines.insert(idx + 1, new)
    return eol.join(lines).encode("utf-8")


# ------------------------------------------------------------------ paths

@pytest.mark.parametrize(("path", "expected"), [
    ("index.md", True),
    ("courses/2026-2027-1/离散数学（2026 秋）.md", True),
    (".trash/旧课表 2026／09（作废）.md", True),
    ("journal/2026-11.md", True),
    ("Files/learn/作业1.docx.md", False),
    (".conflict/index__remote__20261130T120000.md", False),
    ("notes/readme.txt", False),
    ("sub/Files/x.md", True),
])
def test_is_memory_file(path: str, expected: bool) -> None:
    assert is_memory_file(path) is expected


def test_is_journal_file() -> None:
    assert is_journal_file("journal/2026-11.md")
    assert not is_journal_file("journal/notes.md")
    assert not is_journal_file("archive/journal/2026-11.md")


# ---------------------------------------------------------------- samples

@pytest.mark.parametrize("rel", ["preferences/作息与提醒偏好.md", "knowledge/校园服务入口速查.md",
                                 "journal/2026-11.md", "preferences/沟通风格偏好.md"])
def test_concurrent_observation_appends_on_samples_merge_without_conflict(rel: str) -> None:
    base = sample(rel)
    ours = insert_after_last(base, "- [", "- [ours] 桌面端新增 #a")
    theirs = insert_after_last(base, "- [", "- [theirs] 手机端新增 #b (Android)")
    r = merge_memory(base, ours, theirs, rel_path=rel)
    assert r.clean, r.conflicts
    expected = insert_after_last(ours, "- [ours]", "- [theirs] 手机端新增 #b (Android)")
    assert r.content == expected  # every other byte (CRLF, BOM, frontmatter) untouched


def test_crlf_sample_merged_with_lf_theirs_stays_crlf() -> None:
    base = sample("preferences/作息与提醒偏好.md")
    ours = insert_after_last(base, "- [", "- [ours] x")
    theirs = insert_after_last(base.replace(b"\r\n", b"\n"), '- "is used by"', "- relates_to [[index]]")
    r = merge_memory(base, ours, theirs)
    assert r.content == insert_after_last(ours, '- "is used by"', "- relates_to [[index]]")
    assert b"\n" not in r.content.replace(b"\r\n", b"")


def test_bom_sample_keeps_bom_and_merges_relations() -> None:
    base = sample("knowledge/校园服务入口速查.md")
    ours = insert_after_last(base, "- ", "- uses [[我的课表 2026 秋]]")
    theirs = insert_after_last(base, "- ", '- "is read by" [[index]] (bot)')
    r = merge_memory(base, ours, theirs)
    assert r.clean and r.content is not None and r.content.startswith(BOM + b"---\n")
    assert [x.target for x in parse_memory(r.content).relations] == [
        "index", "作息与提醒偏好", "我的课表 2026 秋", "index"]


def test_journal_appends_at_the_end_merge_in_ours_then_theirs_order() -> None:
    base = sample("journal/2026-11.md")
    ours = base + "- [late] 2026-11-30 23:58 桌面端追加 #日志\n".encode()
    theirs = base + "- [late] 2026-11-30 23:59 手机端追加 #日志\n".encode()
    r = merge_memory(base, ours, theirs, rel_path="journal/2026-11.md")
    assert r.content == ours + "- [late] 2026-11-30 23:59 手机端追加 #日志\n".encode()
    assert len(parse_memory(r.content).observations) == 299


def test_journal_overlapping_free_text_appends_merge_only_for_journal_paths() -> None:
    base = sample("journal/2026-11.md")
    ours = insert_after_last(base, "# 2026-11", "desktop note")
    theirs = insert_after_last(base, "# 2026-11", "android note")
    assert not merge_memory(base, ours, theirs, rel_path="notes/2026-11.md").clean
    r = merge_memory(base, ours, theirs, rel_path="journal/2026-11.md")
    assert r.content == insert_after_last(ours, "desktop note", "android note")


def test_malformed_frontmatter_sample_is_damaged_and_never_rewritten() -> None:
    base = sample("knowledge/哈希表冲突处理.md")
    ours = insert_after_last(base, "- [", "- [ours] x")
    theirs = insert_after_last(base, "- [", "- [theirs] y")
    r = merge_memory(base, ours, theirs)
    assert r.content is None and not r.clean and r.conflicts == []
    assert r.damaged == ("ours: frontmatter opened on line 1 is never closed; "
                         "theirs: frontmatter opened on line 1 is never closed")
    # only one side changed: the identity applies, the file syncs as-is
    assert merge_memory(base, ours, base).content == ours
    assert merge_memory(base, base, theirs).content == theirs


def test_generated_library_with_quirks_merges_concurrent_appends(tmp_path: Path) -> None:
    generator = samples_dir().parent / "make_scale_library.py"
    subprocess.run([sys.executable, str(generator), str(tmp_path / "lib"), "--files", "300", "--seed", "5",
                    "--quirks", "--no-mtime"], check=True, capture_output=True)
    merged = 0
    for path in sorted((tmp_path / "lib" / "OH-Memory").rglob("*.md")):
        base = path.read_bytes()
        if b"- [" not in base:
            continue
        rel = path.relative_to(tmp_path / "lib" / "OH-Memory").as_posix()
        ours = insert_after_last(base, "- [", "- [ours] 桌面端 #a")
        theirs = insert_after_last(base, "- [", "- [theirs] 手机端 #b")
        r = merge_memory(base, ours, theirs, rel_path=rel)
        if r.damaged:  # the unclosed-frontmatter quirk
            assert r.damaged.startswith("ours: frontmatter opened on line 1 is never closed")
            continue
        assert r.content == insert_after_last(ours, "- [ours]", "- [theirs] 手机端 #b"), rel
        merged += 1
    assert merged > 250


def test_empty_sample_file_merges_as_sections() -> None:
    base = sample("tasks/待办速记.md")
    assert base == b""
    r = merge_memory(base, b"## Observations\n- [a] ours\n", b"## Observations\n- [b] theirs\n")
    assert r.content == b"## Observations\n- [a] ours\n- [b] theirs\n"


def test_task_items_merge_as_body_lines() -> None:
    base = sample("tasks/数据结构大作业 1 - 哈希表.md")
    ours = base.replace("- [ ] 写 benchmark 脚本".encode(), "- [x] 写 benchmark 脚本".encode())
    theirs = insert_after_last(base, "- [", "- [risk] 时间不够 #风险")
    r = merge_memory(base, ours, theirs)
    assert r.clean and "- [x] 写 benchmark 脚本".encode() in r.content
    assert "- [risk] 时间不够 #风险".encode() in r.content


# ------------------------------------------------------------ frontmatter

FM = """---
title: Note
type: note
tags: [a, b]
modified: 2026-11-20T21:48:00+08:00
origin: desktop
sensitivity: normal
---

# Note

## Observations
- [fact] one

## Relations
- relates_to [[index]]
"""


def edit(text: str, old: str, new: str) -> bytes:
    assert old in text
    return text.replace(old, new, 1).encode()


def test_sensitivity_changed_to_different_values_is_a_conflict_naming_the_field() -> None:
    r = merge_memory(FM.encode(), edit(FM, "sensitivity: normal", "sensitivity: sensitive"),
                     edit(FM, "sensitivity: normal", "sensitivity: secret"))
    assert not r.clean and r.content is None
    assert r.conflicts == ["frontmatter field 'sensitivity'"]


def test_one_sided_field_changes_win_on_each_side() -> None:
    ours = edit(FM, "origin: desktop", "origin: android")
    theirs = edit(FM, "sensitivity: normal", "sensitivity: sensitive")
    r = merge_memory(FM.encode(), ours, theirs)
    assert r.content == edit(FM.replace("origin: desktop", "origin: android"),
                             "sensitivity: normal", "sensitivity: sensitive")


@pytest.mark.parametrize("later", ["ours", "theirs"])
def test_modified_takes_the_later_timestamp(later: str) -> None:
    early = "modified: 2026-11-21T08:00:00+08:00"
    late = "modified: 2026-11-21T01:00:00Z"  # 09:00 +08:00, later although it reads earlier
    ours_m, theirs_m = (late, early) if later == "ours" else (early, late)
    ours = edit(FM, "modified: 2026-11-20T21:48:00+08:00", ours_m).decode() + "- [o] x\n"
    theirs = edit(FM, "modified: 2026-11-20T21:48:00+08:00", theirs_m)
    r = merge_memory(FM.encode(), ours.encode(), theirs)
    assert r.clean and late.encode() in r.content and early.encode() not in r.content


def test_tags_merge_as_a_three_way_set() -> None:
    ours = edit(FM, "tags: [a, b]", "tags: [a, b, c]")
    theirs = edit(FM, "tags: [a, b]", "tags: [b, 'd e']")
    r = merge_memory(FM.encode(), ours, theirs)
    assert r.content == edit(FM, "tags: [a, b]", "tags: [b, c, 'd e']")


def test_block_style_tags_keep_block_style() -> None:
    fm = FM.replace("tags: [a, b]", "tags:\n  - a\n  - b")
    ours = edit(fm, "  - b\n", "  - b\n  - c\n")
    theirs = edit(fm, "  - a\n", "")
    r = merge_memory(fm.encode(), ours, theirs)
    assert r.content == edit(fm, "  - a\n  - b\n", "  - b\n  - c\n")


def test_field_added_by_theirs_lands_after_its_predecessor() -> None:
    theirs = edit(FM, "origin: desktop\n", "origin: desktop\nstatus: trashed\n")
    ours = edit(FM, "type: note", "type: fact")
    r = merge_memory(FM.encode(), ours, theirs)
    assert r.content == edit(FM.replace("type: note", "type: fact"), "origin: desktop\n",
                             "origin: desktop\nstatus: trashed\n")


def test_field_removed_on_one_side() -> None:
    ours = edit(FM, "origin: desktop\n", "")
    assert merge_memory(FM.encode(), ours, edit(FM, "type: note", "type: fact")).content \
        == edit(FM.replace("origin: desktop\n", ""), "type: note", "type: fact")
    r = merge_memory(FM.encode(), ours, edit(FM, "origin: desktop", "origin: bot"))
    assert r.conflicts == ["frontmatter field 'origin'"]


def test_quoting_only_change_is_not_a_value_change() -> None:
    ours = edit(FM, "title: Note", 'title: "Note"')
    theirs = edit(FM, "title: Note", "title: Renamed")
    assert merge_memory(FM.encode(), ours, theirs).content == edit(FM, "title: Note", "title: Renamed")


def test_file_created_on_both_sides_from_empty_base() -> None:
    # same body, only `modified` differs: merges field by field, the later timestamp wins
    theirs = edit(FM, "modified: 2026-11-20T21:48:00+08:00", "modified: 2026-11-22T10:00:00+08:00")
    assert merge_memory(b"", FM.encode(), theirs).content == theirs
    # different bodies created independently cannot be aligned: a conflict, not a guess
    r = merge_memory(b"", FM.encode(), edit(FM, "# Note\n", "# Other\n"))
    assert r.content is None and r.conflicts == ["lines 9-16"]  # the whole body of ours


# ------------------------------------------------------------ body / union

def test_removed_observation_stays_removed_and_additions_are_kept() -> None:
    base = FM.replace("- [fact] one\n", "- [fact] one\n- [fact] two\n")
    ours = edit(base, "- [fact] one\n", "")
    theirs = edit(base, "- [fact] two\n", "- [fact] two\n- [fact] three\n")
    r = merge_memory(base.encode(), ours, theirs)
    assert r.content == edit(base, "- [fact] one\n- [fact] two\n", "- [fact] two\n- [fact] three\n")


def test_same_line_added_on_both_sides_is_kept_once() -> None:
    ours = edit(FM, "- [fact] one\n", "- [fact] one\n- [new] same\n- [o] only ours\n")
    theirs = edit(FM, "- [fact] one\n", "- [fact] one\n- [t] only theirs\n- [new] same\n")
    r = merge_memory(FM.encode(), ours, theirs)
    assert r.content == edit(FM, "- [fact] one\n",
                             "- [fact] one\n- [new] same\n- [o] only ours\n- [t] only theirs\n")


def test_union_order_is_base_then_ours_then_theirs() -> None:
    ours = edit(FM, "- [fact] one\n", "- [o1] x\n- [fact] one\n")  # ours inserted above the base line
    theirs = edit(FM, "- [fact] one\n", "- [fact] one\n- [t1] y\n")
    r = merge_memory(FM.encode(), ours, theirs)
    assert r.content == edit(FM, "- [fact] one\n", "- [fact] one\n- [o1] x\n- [t1] y\n")


def test_edited_observation_against_deleted_one_keeps_the_edit() -> None:
    ours = edit(FM, "- [fact] one\n", "- [fact] one (edited)\n")
    theirs = edit(FM, "- [fact] one\n", "")
    assert merge_memory(FM.encode(), ours, theirs).content == ours


def test_overlapping_free_text_edits_conflict_with_line_numbers() -> None:
    ours = edit(FM, "# Note\n", "# Note\nours text\n")
    theirs = edit(FM, "# Note\n", "# Note\ntheirs text\n")
    r = merge_memory(FM.encode(), ours, theirs)
    assert r.content is None and r.conflicts == ["line 11"]


def test_free_text_and_union_edits_combine() -> None:
    ours = edit(FM, "# Note\n\n", "# Note\n\nIntro by ours.\n\n")
    theirs = edit(FM, "- relates_to [[index]]\n", "- relates_to [[index]]\n- uses [[X]]\n")
    r = merge_memory(FM.encode(), ours, theirs)
    assert r.content == edit(ours.decode(), "- relates_to [[index]]\n", "- relates_to [[index]]\n- uses [[X]]\n")


def test_union_section_removed_on_one_side_and_changed_on_the_other_conflicts() -> None:
    ours = edit(FM, "## Relations\n- relates_to [[index]]\n", "")
    theirs = edit(FM, "- relates_to [[index]]\n", "- relates_to [[index]]\n- uses [[X]]\n")
    r = merge_memory(FM.encode(), ours, theirs)
    assert r.conflicts == ["section 'Relations' removed on one side and changed on the other"]


def test_damaged_base_falls_back_to_plain_text_merge() -> None:
    base = "---\ntitle: x\n\n# x\n- [a] 1\n"
    ours = "---\ntitle: x\n---\n\n# x\n- [a] 1\n"
    theirs = "---\ntitle: x\n\n# x\n- [a] 1\n- [b] 2\n"
    r = merge_memory(base.encode(), ours.encode(), theirs.encode())
    assert r.damaged == "theirs: frontmatter opened on line 1 is never closed"
    r = merge_memory(base.encode(), ours.encode(), b"---\ntitle: x\n---\n\n# x\n- [a] 1\n- [b] 2\n")
    assert r.content == b"---\ntitle: x\n---\n\n# x\n- [a] 1\n- [b] 2\n"


# ------------------------------------------------------------- properties

FIELDS = ["title", "type", "tags", "modified", "origin", "sensitivity"]
CHOICES = {"type": ["note", "fact", "task"], "origin": ["desktop", "android", "bot"],
           "sensitivity": ["normal", "sensitive"]}


def obs_line(i: int) -> str:
    return f"- [c{i % 3}] 观察 {i} text #t{i % 4}" + (f" (ctx {i})" if i % 2 else "")


def rel_line(i: int) -> str:
    return f'- "rel {i}" [[目标 {i}]]' if i % 2 else f"- rel_{i} [[Target {i}]] (c)"


@dataclass
class Doc:
    fields: dict[str, object] | None
    prose: list[str]
    obs: list[str]
    rels: list[str]
    eol: str = "\n"
    bom: bool = False
    final_nl: bool = True
    extra: dict[str, object] = field(default_factory=dict)

    def render(self) -> bytes:
        out = []
        if self.fields is not None:
            out.append("---")
            for k, v in self.fields.items():
                out.append(f"{k}: [{', '.join(v)}]" if isinstance(v, list) else f"{k}: {v}")
            out.append("---")
            out.append("")
        out += ["# Title", "", *self.prose, "", "## Observations", *self.obs, "",
                "## Relations", *self.rels]
        text = self.eol.join(out) + (self.eol if self.final_nl else "")
        return (BOM if self.bom else b"") + text.encode("utf-8")


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[Doc, Doc, Doc, Doc]:
    """(base, ours, theirs, expected merge) with non-conflicting random edits."""
    base_obs = draw(st.lists(st.integers(0, 40), unique=True, max_size=8))
    base_rel = draw(st.lists(st.integers(0, 40), unique=True, max_size=5))
    prose = [f"段落 {i} prose" for i in range(draw(st.integers(0, 6)))]
    has_fm = draw(st.booleans())
    fields: dict[str, object] | None = None
    if has_fm:
        fields = {"title": "Title", "type": "note", "tags": draw(st.lists(st.sampled_from("abcdef"), unique=True)),
                  "modified": "2026-11-20T10:00:00+08:00", "origin": "desktop", "sensitivity": "normal"}
    base = Doc(fields, prose, [obs_line(i) for i in base_obs], [rel_line(i) for i in base_rel],
               eol=draw(st.sampled_from(["\n", "\r\n"])), bom=draw(st.booleans()), final_nl=draw(st.booleans()))

    def side_list(items: list[str], make, pool: range) -> tuple[list[str], list[str]]:
        kept = [x for x in items if draw(st.booleans())]
        new = [make(i) for i in draw(st.lists(st.sampled_from(pool), unique=True, max_size=4))]
        return kept, new

    o_obs, o_new = side_list(base.obs, obs_line, range(100, 112))
    t_obs, t_new = side_list(base.obs, obs_line, range(106, 118))
    o_rel, o_rnew = side_list(base.rels, rel_line, range(100, 108))
    t_rel, t_rnew = side_list(base.rels, rel_line, range(104, 112))
    exp_obs = [x for x in base.obs if x in o_obs and x in t_obs] + o_new + [x for x in t_new if x not in o_new]
    exp_rel = [x for x in base.rels if x in o_rel and x in t_rel] + o_rnew + [x for x in t_rnew if x not in o_rnew]

    o_prose, t_prose, e_prose = prose.copy(), prose.copy(), prose.copy()
    if len(prose) >= 3 and draw(st.booleans()):
        i = draw(st.integers(0, len(prose) - 3))
        j = draw(st.integers(i + 2, len(prose) - 1))
        o_prose[i] = e_prose[i] = "ours edited"
        t_prose[j] = e_prose[j] = "theirs edited"

    o_f = t_f = e_f = None
    if fields is not None:
        o_f, t_f, e_f = dict(fields), dict(fields), dict(fields)
        for key, values in CHOICES.items():
            who = draw(st.sampled_from(["none", "ours", "theirs", "both"]))
            new = draw(st.sampled_from([v for v in values if v != fields[key]]))
            if who in ("ours", "both"):
                o_f[key] = e_f[key] = new
            if who in ("theirs", "both"):
                t_f[key] = e_f[key] = new
        om, tm = (draw(st.sampled_from([None, 11, 12, 13])) for _ in range(2))
        if om:
            o_f["modified"] = f"2026-11-{om}T10:00:00+08:00"
        if tm:
            t_f["modified"] = f"2026-11-{tm}T10:00:00+08:00"
        e_f["modified"] = max(o_f["modified"], t_f["modified"]) if om and tm else \
            o_f["modified"] if om else t_f["modified"]
        btags = list(fields["tags"])  # type: ignore[arg-type]
        o_tags = [x for x in btags if draw(st.booleans())] + draw(st.lists(st.sampled_from("uvwxyz"), unique=True))
        t_tags = [x for x in btags if draw(st.booleans())] + draw(st.lists(st.sampled_from("uvwxyz"), unique=True))
        o_f["tags"], t_f["tags"] = o_tags, t_tags
        e_f["tags"] = [x for x in o_tags if x in t_tags or x not in btags] + \
            [x for x in t_tags if x not in btags and x not in o_tags]
        if o_tags == btags:
            e_f["tags"] = t_tags
        elif t_tags == btags:
            e_f["tags"] = o_tags

    def side(f: dict[str, object] | None, pr: list[str], ob: list[str], rels: list[str]) -> Doc:
        # a side may also have switched line endings, BOM or final newline
        return Doc(f, pr, ob, rels, eol=draw(st.sampled_from([base.eol, "\r\n", "\n"])),
                   bom=draw(st.sampled_from([base.bom, base.bom, not base.bom])),
                   final_nl=draw(st.sampled_from([base.final_nl, base.final_nl, not base.final_nl])))

    ours = side(o_f, o_prose, o_obs + o_new, o_rel + o_rnew)
    theirs = side(t_f, t_prose, t_obs + t_new, t_rel + t_rnew)
    final_nl = ours.final_nl if ours.final_nl != base.final_nl else theirs.final_nl
    expected = Doc(e_f, e_prose, exp_obs, exp_rel, eol=ours.eol, bom=ours.bom, final_nl=final_nl)
    return base, ours, theirs, expected


def expected_bytes(b: bytes, o: bytes, t: bytes, expected: Doc) -> bytes:
    if o == t or t == b:
        return o
    if o == b:
        return t
    return expected.render()


@FAST
@given(scenarios())
def test_property_merge_is_exactly_the_union_with_untouched_bytes(sc: tuple[Doc, Doc, Doc, Doc]) -> None:
    base, ours, theirs, expected = sc
    b, o, t = base.render(), ours.render(), theirs.render()
    r = merge_memory(b, o, t)
    assert r.clean, r.conflicts
    assert r.content == expected_bytes(b, o, t, expected)


@FAST
@given(scenarios())
def test_property_added_lines_kept_exactly_once_removed_lines_gone(sc: tuple[Doc, Doc, Doc, Doc]) -> None:
    base, ours, theirs, _ = sc
    r = merge_memory(base.render(), ours.render(), theirs.render())
    assert r.content is not None
    doc = parse_memory(r.content)
    merged = [o.line for o in doc.observations] + [x.line for x in doc.relations]
    for line in set(ours.obs + theirs.obs + ours.rels + theirs.rels) - set(base.obs + base.rels):
        assert merged.count(line) == 1, line
    for line in base.obs + base.rels:
        if (line not in ours.obs + ours.rels) != (line not in theirs.obs + theirs.rels) \
                and ours.render() != base.render() and theirs.render() != base.render():
            assert line not in merged  # removed on one side, untouched on the other


@FAST
@given(scenarios())
def test_property_merge_is_stable_on_its_own_output(sc: tuple[Doc, Doc, Doc, Doc]) -> None:
    base, ours, theirs, _ = sc
    b, o, t = base.render(), ours.render(), theirs.render()
    m = merge_memory(b, o, t).content
    assert m is not None
    assert merge_memory(b, m, m).content == m
    assert merge_memory(m, m, m).content == m
    assert merge_memory(b, m, t).content == m
    assert merge_memory(b, o, m).content == m
    assert merge_memory(m, o, m).content == o
    assert merge_memory(m, m, t).content == t


@FAST
@given(st.binary(max_size=60) | scenarios().map(lambda sc: sc[0].render()),
       st.binary(max_size=60) | scenarios().map(lambda sc: sc[1].render()),
       st.sampled_from(["", "journal/2026-11.md"]))
def test_property_trivial_identities_hold_for_any_input(b: bytes, x: bytes, rel_path: str) -> None:
    assert merge_memory(b, x, x, rel_path=rel_path).content == x
    assert merge_memory(b, b, x, rel_path=rel_path).content == x
    assert merge_memory(b, x, b, rel_path=rel_path).content == x


@FAST
@given(scenarios(), st.integers(300, 340))
def test_property_journal_concurrent_appends_always_merge(sc: tuple[Doc, Doc, Doc, Doc], n: int) -> None:
    base = replace(sc[0], final_nl=True)
    ours = replace(base, obs=base.obs + [obs_line(n)], prose=base.prose + ["ours prose"])
    theirs = replace(base, obs=base.obs + [obs_line(n + 50)], prose=base.prose + ["theirs prose"])
    r = merge_memory(base.render(), ours.render(), theirs.render(), rel_path="journal/2026-11.md")
    assert r.content == replace(base, obs=base.obs + [obs_line(n), obs_line(n + 50)],
                                prose=base.prose + ["ours prose", "theirs prose"]).render()


def test_sub_bullets_make_a_section_merge_with_diff3_so_they_stay_attached() -> None:
    ours = edit(FM, "- [fact] one\n", "- [fact] one\n  - detail from ours\n")
    theirs = edit(FM, "- [fact] one\n", "- [fact] one\n- [fact] two\n")
    r = merge_memory(FM.encode(), ours, theirs)
    assert r.content == edit(FM, "- [fact] one\n", "- [fact] one\n  - detail from ours\n- [fact] two\n")
    both = edit(FM, "- [fact] one\n", "- [fact] one\n  - detail from theirs\n")
    r = merge_memory(FM.encode(), ours, both)
    assert r.content == edit(FM, "- [fact] one\n", "- [fact] one\n  - detail from ours\n  - detail from theirs\n")
    base = edit(FM, "- [fact] one\n", "- [fact] one\n  - detail\n").decode()
    r = merge_memory(base.encode(), edit(base, "  - detail", "  - detail A"), edit(base, "  - detail", "  - detail B"))
    assert r.content is None and r.conflicts == ["section 'Observations' line 14"]


def test_journal_tags_keep_the_integer_item_when_merged_as_a_set() -> None:
    base = sample("journal/2026-11.md")
    ours = base.replace("tags: [日志, 2026]".encode(), "tags: [日志, 2026, 期中]".encode())
    theirs = base.replace("tags: [日志, 2026]".encode(), "tags: ['2026', 日志, 睡眠]".encode())
    r = merge_memory(base, ours, theirs, rel_path="journal/2026-11.md")
    assert r.content == base.replace("tags: [日志, 2026]".encode(), "tags: [日志, 2026, 期中, 睡眠]".encode())


def test_result_that_would_read_back_differently_is_refused() -> None:
    # ours dropped the empty frontmatter, theirs added two body lines "---": joined
    # naively they would turn into a frontmatter block, so the merge refuses
    r = merge_memory(b"---\n---\n", b"", b"---\n---\n---\n---\n")
    assert r.content is None
    assert r.conflicts == ["merged result would not read back with the merged structure"]


fragments = st.sampled_from([
    "---\n", "title: x\n", "tags: [a, b]\n", "tags:\n  - a\n", "modified: 2026-11-01\n", "\ufeff",
    "modified: 2026-11-02T00:00:00Z\n", "# T\n", "## Observations\n", "## Relations\n", "- [a] x\n",
    "- [b] y #t (c)\n", "- r [[X]]\n", "\n", "\r\n", "text\n", "```\n", "  cont\n", "- [ ] task\n",
    "a: &x 1\n", "b: *x\n", "tags: c\n", "sensitivity: s\n", "...\n",
])
odd_docs = st.lists(fragments, max_size=12).map(lambda parts: "".join(parts).encode())


@FAST
@given(odd_docs, odd_docs, odd_docs, st.sampled_from(["", "journal/2026-01.md"]))
def test_property_merge_never_raises_and_never_writes_a_damaged_file(b: bytes, o: bytes, t: bytes,
                                                                     rel_path: str) -> None:
    r = merge_memory(b, o, t, rel_path=rel_path)
    assert (r.content is None) == (bool(r.conflicts) or r.damaged is not None)
    if r.content is not None and r.content not in (o, t):
        parse_memory(r.content)  # raises if damaged
        assert merge_memory(b, r.content, r.content, rel_path=rel_path).content == r.content


def test_observation_outside_the_sections_reworded_on_both_sides_keeps_both_live() -> None:
    # an entry under a prose heading sits in the diff3 skeleton: both rewordings
    # conflict, and theirs must stay live beside ours, not only in the conflict copy
    base = (b"---\ntitle: t\n---\n# T\n\n## Observations\n- [a] one\n\n## Check\n\nSome prose.\n\n"
            b"- [verify] only for checking\n\n## Relations\n- relates_to [[x]]\n")
    ours = base.replace(b"- [verify] only for checking", b"- [verify] only for checking (ours)")
    theirs = base.replace(b"- [verify] only for checking", b"- [verify] only for checking (theirs)")
    result = merge_memory(base, ours, theirs, rel_path="t.md")
    assert not result.clean and result.conflicts
    lines = {o.line for o in parse_memory(result.partial).observations}
    assert {"- [verify] only for checking (ours)", "- [verify] only for checking (theirs)"} <= lines
    assert b"Some prose." in result.partial and result.partial.count(b"- [a] one") == 1
