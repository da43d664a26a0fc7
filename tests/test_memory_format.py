"""Tests for ohsync.engine.memory.format: lossless parsing of memory entity files."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine_helpers import sample, samples_dir
from ohsync.engine.memory.format import (
    MemoryParseError,
    parse_memory,
    parse_observation,
    parse_relation,
)

FAST = settings(max_examples=200, deadline=None)


DOC = """---
title: 数据结构（2026 秋）
type: course
tags: [课程, 大二上]
modified: 2026-11-20T21:48:00+08:00
sensitivity: normal   # normal | sensitive
---

# 数据结构（2026 秋）

Intro with an implicit link to [[线性代数: 期中复习要点]] and `[[not a link]]`.

## Observations
- [teacher] 讲课很快 #重要 (坐前排)
- [x] a done task
- [ ] an open task
- [link](https://example.edu.cn) is a markdown link

```python
A[[0, 1]] = A[[1, 0]]
- [code] not an observation
```

## Relations
- belongs_to [[我的课表 2026 秋]]
- "has lecture notes" [[哈希表冲突处理]] (第 7 讲)
"""


# -------------------------------------------------------------- round trip

def test_every_sample_that_parses_round_trips_byte_for_byte() -> None:
    files = sorted(samples_dir().rglob("*.md"))
    assert len(files) >= 17
    for path in files:
        data = path.read_bytes()
        if path.name == "哈希表冲突处理.md":
            continue
        assert parse_memory(data).to_bytes() == data, path


@FAST
@given(st.text(alphabet=st.sampled_from(list("-#[]()ab: \n\r\t\"'`~x中\ufeff")), max_size=120))
def test_arbitrary_text_round_trips_or_raises_parse_error(text: str) -> None:
    data = text.encode("utf-8")
    try:
        doc = parse_memory(data)
    except MemoryParseError as exc:
        assert exc.reason
        return
    assert doc.to_bytes() == data


# ---------------------------------------------------------------- samples

def test_crlf_sample_keeps_crlf_everywhere() -> None:
    data = sample("preferences/作息与提醒偏好.md")
    doc = parse_memory(data)
    assert doc.eol == "\r\n"
    assert doc.frontmatter is not None
    assert doc.frontmatter.open_line == "---\r\n" and doc.frontmatter.close_line == "---\r\n"
    assert all(line.endswith("\r\n") for line in doc.lines)
    assert doc.frontmatter.data["origin"] == "android"
    assert [r.relation_type for r in doc.relations] == ["relates_to", "is used by"]


def test_bom_sample_parses_frontmatter_after_the_bom() -> None:
    data = sample("knowledge/校园服务入口速查.md")
    assert data.startswith(b"\xef\xbb\xbf---")
    doc = parse_memory(data)
    assert doc.bom
    assert doc.frontmatter is not None and doc.frontmatter.data["type"] == "fact"
    assert doc.to_bytes() == data


def test_unclosed_frontmatter_sample_is_a_parse_error_with_reason() -> None:
    with pytest.raises(MemoryParseError) as info:
        parse_memory(sample("knowledge/哈希表冲突处理.md"))
    assert info.value.reason == "frontmatter opened on line 1 is never closed"
    assert info.value.line == 1


def test_empty_sample_is_an_empty_document_without_frontmatter() -> None:
    doc = parse_memory(sample("tasks/待办速记.md"))
    assert doc.frontmatter is None and doc.sections == () and doc.to_bytes() == b""


def test_task_list_items_are_not_observations() -> None:
    doc = parse_memory(sample("tasks/数据结构大作业 1 - 哈希表.md"))
    cats = [o.category for o in doc.observations]
    assert cats == ["status", "due", "spec", "spec", "attachment", "risk"]
    assert "x" not in cats and " " not in cats


def test_journal_sample_has_297_observations_and_integer_tag() -> None:
    doc = parse_memory(sample("journal/2026-11.md"))
    assert len(doc.observations) == 297
    assert doc.frontmatter is not None and doc.frontmatter.data["tags"] == ["日志", 2026]


def test_code_fence_links_and_outside_observation_in_linear_algebra_sample() -> None:
    doc = parse_memory(sample("courses/线性代数： 期中复习要点.md"))
    assert doc.frontmatter is not None and doc.frontmatter.data["title"] == "线性代数: 期中复习要点"
    assert "0, 1" not in doc.wikilinks
    assert "verify" in [o.category for o in doc.observations]  # observation outside its section
    assert [s.title for s in doc.sections if s.union_name] == ["Observations", "Relations"]


# ------------------------------------------------------------- structure

def test_frontmatter_fields_keep_their_exact_lines_and_values() -> None:
    doc = parse_memory(DOC.encode())
    fm = doc.frontmatter
    assert fm is not None and fm.splittable
    assert [f.key for f in fm.fields] == ["title", "type", "tags", "modified", "sensitivity"]
    sens = fm.fields[-1]
    assert sens.lines == ("sensitivity: normal   # normal | sensitive\n",) and sens.value == "normal"
    assert fm.fields[3].value == datetime(2026, 11, 20, 21, 48, tzinfo=timezone(timedelta(hours=8)))


def test_block_list_and_comment_lines_belong_to_their_field() -> None:
    data = b"---\n# leading comment\ntitle: t\ntags:\n  - a\n  - b\n\nx: 1\n---\nbody\n"
    fm = parse_memory(data).frontmatter
    assert fm is not None and fm.splittable
    assert fm.preamble == ("# leading comment\n",)
    assert fm.fields[1].lines == ("tags:\n", "  - a\n", "  - b\n", "\n")
    assert fm.fields[1].value == ["a", "b"]


def test_duplicate_keys_make_frontmatter_unsplittable_but_not_damaged() -> None:
    fm = parse_memory(b"---\na: 1\na: 2\n---\n").frontmatter
    assert fm is not None and not fm.splittable and fm.fields == ()


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"---\n- a\n- b\n---\n", "frontmatter is not a mapping (it is a list)"),
        (b"---\ntitle: [unclosed\n---\n", "frontmatter is not valid YAML"),
        (b"---\ntitle: x\n", "frontmatter opened on line 1 is never closed"),
        (b"\xff\xfe", "not valid UTF-8"),
    ],
)
def test_unparsable_inputs_raise_with_reason(data: bytes, reason: str) -> None:
    with pytest.raises(MemoryParseError) as info:
        parse_memory(data)
    assert info.value.reason.startswith(reason)


def test_file_without_frontmatter_is_all_body() -> None:
    doc = parse_memory(b"# Title\n\n## Observations\n- [a] b\n")
    assert doc.frontmatter is None
    assert [o.category for o in doc.observations] == ["a"]


def test_sections_ignore_headings_inside_code_fences() -> None:
    doc = parse_memory(b"# T\n```\n## Observations\n```\n## Relations\n- r [[X]]\n")
    assert [s.title for s in doc.sections] == ["T", "Relations"]


def test_document_observations_relations_and_wikilinks() -> None:
    doc = parse_memory(DOC.encode())
    assert [o.category for o in doc.observations] == ["teacher"]
    assert [(r.relation_type, r.target, r.context) for r in doc.relations] == [
        ("belongs_to", "我的课表 2026 秋", None),
        ("has lecture notes", "哈希表冲突处理", "第 7 讲"),
    ]
    assert doc.wikilinks == ["线性代数: 期中复习要点"]


# ------------------------------------------------------------ line parsers

def test_parse_observation_parts() -> None:
    o = parse_observation("- [tip] 用 $O(n)$ 的方法 #算法 #重要 (见 [[哈希表 (2)]] 笔记)")
    assert o is not None
    assert o.category == "tip"
    assert o.text == "用 $O(n)$ 的方法 #算法 #重要"
    assert o.tags == ("算法", "重要")
    assert o.context == "见 [[哈希表 (2)]] 笔记"


def test_parse_observation_parenthesis_inside_text_is_not_context() -> None:
    o = parse_observation("- [problem] 线性探测会产生一次聚集 (primary clustering) #易错")
    assert o is not None and o.context is None and o.tags == ("易错",)


@pytest.mark.parametrize("line", ["- [x] done", "- [X] done", "- [ ] open", "- [t](u) link",
                                  "  - [a] indented", "- [[Link]]", "- [a]", "text [a] b"])
def test_parse_observation_rejects_non_observations(line: str) -> None:
    assert parse_observation(line) is None


def test_parse_relation_quoted_type_and_context() -> None:
    r = parse_relation('- "is refined by" [[沟通风格偏好]] (2026 秋)')
    assert r is not None and (r.relation_type, r.target, r.context) == ("is refined by", "沟通风格偏好", "2026 秋")
    assert parse_relation("- [note] text [[X]]") is None
    assert parse_relation("- [[X]]") is None
