"""Tests for ohsync.engine.merge.text: line diff3 on bytes with line-ending and BOM preservation."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from ohsync.engine.merge.text import (
    MergeResult,
    diff3_lines,
    join_lines,
    merge_text,
    split_lines,
)

FAST = settings(max_examples=200, deadline=None)


def lines(*items: str, eol: str = "\n") -> bytes:
    return "".join(i + eol for i in items).encode()


# --------------------------------------------------------------------- basics

def test_merge_result_clean_requires_content_and_no_conflict() -> None:
    assert MergeResult(b"x", []).clean
    assert not MergeResult(None, ["lines 1-2"]).clean
    assert not MergeResult(None, [], damaged="ours: broken").clean


def test_split_lines_only_splits_on_newline() -> None:
    assert split_lines("") == []
    assert split_lines("a\r\nb\rc\x0cd\u2028e") == ["a\r\n", "b\rc\x0cd\u2028e"]
    assert split_lines("a\n\n") == ["a\n", "\n"]


def test_join_lines_adds_missing_ending_between_lines_and_honours_final_newline() -> None:
    assert join_lines(["a", "b\n"], "\r\n", True) == "a\r\nb\n"
    assert join_lines(["a\n", "b\n"], "\n", False) == "a\nb"
    assert join_lines([], "\n", False) == ""


def test_non_overlapping_edits_merge() -> None:
    base = lines("a", "b", "c", "d", "e")
    ours = lines("A", "b", "c", "d", "e")
    theirs = lines("a", "b", "c", "d", "E")
    r = merge_text(base, ours, theirs)
    assert r.clean and r.content == lines("A", "b", "c", "d", "E")


def test_overlapping_edits_conflict_with_ours_line_numbers() -> None:
    base = lines("a", "b", "c", "d", "e")
    ours = lines("a", "B1", "B2", "c", "d", "e")
    theirs = lines("a", "X", "c", "d", "e")
    r = merge_text(base, ours, theirs)
    assert not r.clean and r.content is None
    assert r.conflicts == ["lines 2-3"]


def test_both_sides_making_the_same_change_is_clean() -> None:
    base = lines("a", "b", "c")
    ours = lines("a", "B", "c", "d")
    theirs = lines("a", "B", "c")
    r = merge_text(base, ours, theirs)
    assert r.clean and r.content == lines("a", "B", "c", "d")


# ------------------------------------------------------------- identities

@FAST
@given(st.binary(max_size=40), st.binary(max_size=40))
def test_trivial_identities_hold_for_any_bytes(b: bytes, x: bytes) -> None:
    assert merge_text(b, x, x).content == x
    assert merge_text(b, b, x).content == x
    assert merge_text(b, x, b).content == x


def test_invalid_utf8_is_not_clean() -> None:
    r = merge_text(b"a\n", b"a\n\xff\n", b"b\na\n")
    assert not r.clean and r.content is None
    assert r.conflicts == ["ours is not valid UTF-8 text"]


# ------------------------------------------------------- line endings, BOM

def test_crlf_is_preserved_and_theirs_lines_get_ours_line_ending() -> None:
    base = lines("a", "b", "c", eol="\r\n")
    ours = lines("a", "b", "c", "ours", eol="\r\n")
    theirs = lines("first", "a", "b", "c", eol="\n")  # theirs was saved with LF
    r = merge_text(base, ours, theirs)
    assert r.clean
    assert r.content == lines("first", "a", "b", "c", "ours", eol="\r\n")


def test_eol_only_change_on_one_side_does_not_conflict_with_edit() -> None:
    base = lines("a", "b", "c")
    ours = lines("a", "b", "c", eol="\r\n")
    theirs = lines("a", "B", "c")
    r = merge_text(base, ours, theirs)
    assert r.clean and r.content == lines("a", "B", "c", eol="\r\n")


def test_mixed_line_endings_in_ours_are_kept_byte_for_byte() -> None:
    base = b"a\r\nb\nc\r\n"
    ours = b"a\r\nb\nc\r\nd\r\n"
    theirs = b"z\na\r\nb\nc\r\n"
    r = merge_text(base, ours, theirs)
    assert r.content == b"z\r\na\r\nb\nc\r\nd\r\n"


def test_bom_follows_ours() -> None:
    bom = b"\xef\xbb\xbf"
    base = lines("a", "b", "c")
    ours = bom + lines("a", "b", "c", "d")
    theirs = lines("z", "b", "c")
    assert merge_text(base, ours, theirs).content == bom + lines("z", "b", "c", "d")
    assert merge_text(bom + base, lines("a", "b", "c", "d"), bom + lines("z", "b", "c")).content \
        == lines("z", "b", "c", "d")


def test_final_newline_is_merged_three_way() -> None:
    base = b"a\nb\nc\n"
    # theirs removed the final newline, ours edited the first line
    r = merge_text(base, b"A\nb\nc\n", b"a\nb\nc")
    assert r.content == b"A\nb\nc"
    # ours' last line had no newline and theirs appended after it: a newline is inserted
    r = merge_text(b"a\nb", b"A\nb", b"a\nb\nc\n")
    assert r.content == b"A\nb\nc\n"


def test_new_file_on_both_sides_with_empty_base() -> None:
    assert merge_text(b"", b"same\n", b"same\n").content == b"same\n"
    r = merge_text(b"", b"ours\n", b"theirs\n")
    assert not r.clean and r.conflicts == ["line 1"]


def test_many_repeated_lines_do_not_create_false_conflicts() -> None:
    # difflib's autojunk would ignore the popular blank line in files of 200+ lines
    body = [x for i in range(150) for x in (f"line {i}", "")]
    base = lines(*body)
    ours = lines(*(["top"] + body))
    theirs = lines(*(body + ["bottom"]))
    r = merge_text(base, ours, theirs)
    assert r.clean and r.content == lines(*(["top"] + body + ["bottom"]))


# ------------------------------------------------------------- properties

line_text = st.text(alphabet="ab xy中文", min_size=0, max_size=4)


@FAST
@given(
    st.lists(line_text, min_size=4, max_size=12, unique=True),
    st.data(),
    st.sampled_from(["\n", "\r\n"]),
)
def test_edits_in_separate_regions_merge_cleanly(base_lines: list[str], data: st.DataObject,
                                                 eol: str) -> None:
    n = len(base_lines)
    i = data.draw(st.integers(0, n - 3))
    j = data.draw(st.integers(i + 2, n - 1))
    ours_lines = base_lines.copy()
    theirs_lines = base_lines.copy()
    ours_lines[i] = "OURS"
    theirs_lines[j] = "THEIRS"
    r = merge_text(lines(*base_lines, eol=eol), lines(*ours_lines, eol=eol), lines(*theirs_lines, eol=eol))
    expected = base_lines.copy()
    expected[i], expected[j] = "OURS", "THEIRS"
    assert r.clean and r.content == lines(*expected, eol=eol)
    # stable on its own output
    assert merge_text(lines(*base_lines, eol=eol), r.content, lines(*theirs_lines, eol=eol)).content == r.content


def test_diff3_lines_reports_conflicts_as_ours_ranges_and_uses_resolver() -> None:
    out = diff3_lines(["a\n"], ["a\n", "o\n"], ["a\n", "t\n"])
    assert out.conflicts == [(1, 2)]
    out = diff3_lines(["a\n"], ["a\n", "o\n"], ["a\n", "t\n"], resolve=lambda b, o, t: [*o, *t])
    assert out.conflicts == [] and out.lines == ["a\n", "o\n", "t\n"]
