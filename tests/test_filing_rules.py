"""Filing rules: parsing, matching, templates, {term}, clash-free names, partial downloads."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date, datetime, timedelta, timezone

import pytest

from ohsync.daemon.open_files import open_for_writing
from ohsync.engine.filing.rules import (
    FilingRule,
    RuleError,
    choose_rule,
    fit_name,
    has_partial_sibling,
    is_ignored_name,
    is_partial_name,
    parse_dest,
    parse_rules,
    render_dest,
    split_name,
    tsinghua_term,
    unique_name,
)

CST = timezone(timedelta(hours=8))
WHEN = datetime(2026, 11, 30, 9, 12, tzinfo=CST)


# -- parsing -----------------------------------------------------------------------

def test_parse_rules_kinds_and_order():
    rules = parse_rules([
        {"match": "*.pdf", "dest": "/Files/downloads/{yyyy}-{mm}/"},
        {"match": "re:^HW\\d+", "dest": "Files/hw/"},
        {"match": "dir:数据结构/", "dest": "/Files/learn/{term}/数据结构/"},
    ])
    assert [r.kind for r in rules] == ["glob", "re", "dir"]
    assert rules[1].pattern == "^HW\\d+" and rules[1].dest == "/Files/hw/"  # leading slash added
    assert rules[2].pattern == "数据结构"


@pytest.mark.parametrize("raw, needle", [
    ([{"dest": "/Files/x/"}], "match"),
    ([{"match": "*.pdf"}], "dest"),
    (["*.pdf"], "table"),
    ([{"match": "re:([", "dest": "/Files/x/"}], "regular expression"),
    ([{"match": "dir:", "dest": "/Files/x/"}], "subfolder"),
    ([{"match": "dir:../up", "dest": "/Files/x/"}], "subfolder"),
    ([{"match": "*.pdf", "dest": "/Files/{year}/"}], "unknown placeholder {year}"),
    ([{"match": "*.pdf", "dest": "/Files/../etc/"}], "'..'"),
    ([{"match": "*.pdf", "dest": "/Files/{yyyy/"}], "dest"),
])
def test_parse_rules_rejects_bad_rules_with_the_index(raw, needle):
    with pytest.raises(RuleError) as info:
        parse_rules(raw)
    assert "rules[0]" in str(info.value) and needle in str(info.value)


def test_parse_dest_default():
    assert parse_dest("/Files/_inbox/") == "/Files/_inbox/"
    with pytest.raises(RuleError):
        parse_dest("")


# -- matching -----------------------------------------------------------------------

def test_glob_is_case_insensitive_and_matches_the_name():
    rule = FilingRule("glob", "*.pdf", "/Files/pdf/")
    assert rule.matches("Lecture.PDF", "Lecture.PDF")
    assert rule.matches("x.pdf", "sub/x.pdf")
    assert not rule.matches("x.pdf.part", "x.pdf.part")


def test_glob_with_slash_matches_the_drop_path():
    rule = parse_rules([{"match": "scans/*.jpg", "dest": "/Files/scans/"}])[0]
    assert rule.matches("a.jpg", "scans/a.jpg")
    assert not rule.matches("a.jpg", "a.jpg")
    assert not rule.matches("a.jpg", None)


def test_regex_searches_the_name():
    rule = parse_rules([{"match": "re:^第\\d+讲", "dest": "/Files/x/"}])[0]
    assert rule.matches("第07讲-散列表.pdf", None)
    assert not rule.matches("作业1.docx", None)


def test_dir_rule_matches_the_subfolder_and_below_only():
    rule = parse_rules([{"match": "dir:数据结构", "dest": "/Files/x/"}])[0]
    assert rule.matches("x.pdf", "数据结构/x.pdf")
    assert rule.matches("x.pdf", "数据结构/week7/x.pdf")
    assert not rule.matches("x.pdf", "x.pdf")
    assert not rule.matches("x.pdf", "数据结构2/x.pdf")
    assert not rule.matches("x.pdf", None)  # `ohsync file` of a file outside the drop folder


def test_first_match_wins_and_none_means_default():
    rules = parse_rules([
        {"match": "dir:数据结构", "dest": "/Files/learn/"},
        {"match": "*.pdf", "dest": "/Files/pdf/"},
    ])
    assert choose_rule(rules, "x.pdf", "数据结构/x.pdf").dest == "/Files/learn/"
    assert choose_rule(rules, "x.pdf", "x.pdf").dest == "/Files/pdf/"
    assert choose_rule(rules, "x.txt", "x.txt") is None


def test_nfd_names_match_nfc_patterns():
    rule = parse_rules([{"match": "re:Résumé", "dest": "/Files/cv/"}])[0]
    import unicodedata
    assert rule.matches(unicodedata.normalize("NFD", "Résumé.pdf"), None)


# -- templates ------------------------------------------------------------------------

@pytest.mark.parametrize("day, term", [
    (date(2026, 9, 1), "2026-2027-1"),
    (date(2026, 12, 31), "2026-2027-1"),
    (date(2027, 1, 15), "2026-2027-1"),
    (date(2027, 2, 20), "2026-2027-2"),
    (date(2027, 6, 30), "2026-2027-2"),
    (date(2027, 7, 1), "2026-2027-3"),
    (date(2027, 8, 31), "2026-2027-3"),
])
def test_tsinghua_term(day, term):
    assert tsinghua_term(day) == term


def test_render_folder_template_keeps_the_name():
    folder, name = render_dest("/Files/learn/{term}/{dir}/", name="x.pdf", when=WHEN, drop_rel="数据结构/x.pdf")
    assert (folder, name) == ("/Files/learn/2026-2027-1/数据结构", "x.pdf")
    folder, name = render_dest("/Files/downloads/{yyyy}-{mm}/", name="x.pdf", when=WHEN)
    assert (folder, name) == ("/Files/downloads/2026-11", "x.pdf")


def test_render_file_template_renames():
    folder, name = render_dest("/Files/{ext}/{yyyy}{mm}{dd}-{stem}.{ext}", name="scan 1.JPG", when=WHEN)
    assert (folder, name) == ("/Files/JPG", "20261130-scan 1.JPG")
    # no extension: the dangling dot goes
    assert render_dest("/Files/x/{stem}.{ext}", name="README", when=WHEN) == ("/Files/x", "README")


def test_render_dir_at_top_level_collapses():
    assert render_dest("/Files/{dir}/", name="a.txt", when=WHEN, drop_rel="a.txt") == ("/Files", "a.txt")


def test_split_name():
    assert split_name("a.pdf") == ("a", ".pdf")
    assert split_name("a.tar.gz") == ("a", ".tar.gz")
    assert split_name(".bashrc") == (".bashrc", "")
    assert split_name("noext") == ("noext", "")
    assert split_name("hash_benchmark_chart (1).png") == ("hash_benchmark_chart (1)", ".png")


# -- names ----------------------------------------------------------------------------

def test_unique_name_counts_up():
    taken = {"x.pdf", "x (1).pdf"}
    assert unique_name("x.pdf", taken.__contains__) == "x (2).pdf"
    assert unique_name("y.pdf", taken.__contains__) == "y.pdf"
    assert unique_name("a.tar.gz", {"a.tar.gz"}.__contains__) == "a (1).tar.gz"


def test_unique_name_stays_within_255_bytes_with_room_for_the_sidecar():
    long = "长" * 90 + ".pdf"  # 274 bytes
    name = unique_name(long, lambda n: False, reserve=3)
    assert len(name.encode()) <= 252 and name.endswith(".pdf")
    taken = {name}
    second = unique_name(long, taken.__contains__, reserve=3)
    assert second.endswith(" (1).pdf") and len(second.encode()) <= 252
    assert fit_name("é" * 200, ".md").endswith(".md")


# -- partial downloads -------------------------------------------------------------------

@pytest.mark.parametrize("name", [
    "x.pdf.part", "x.pdf.crdownload", "Unconfirmed 12345.crdownload", "x.zip.download", "x.tmp",
    "~$作业1.docx", ".~lock.x.odt#", ".ohsync-tmp-abc", "x.PART", "x.opdownload", "notes.txt~",
])
def test_partial_names(name):
    assert is_partial_name(name)
    assert is_ignored_name(name)


@pytest.mark.parametrize("name", ["x.pdf", "第07讲-散列表.pdf", "hash_benchmark_chart (1).png", "partial.pdf"])
def test_complete_names(name):
    assert not is_partial_name(name)
    assert not is_ignored_name(name)


def test_hidden_and_plumbing_names_are_ignored():
    for name in (".DS_Store", "Thumbs.db", "desktop.ini", ".hidden.pdf"):
        assert is_ignored_name(name)


def test_partial_sibling(tmp_path):
    target = tmp_path / "x.pdf"
    target.write_bytes(b"")
    assert not has_partial_sibling(target)
    (tmp_path / "x.pdf.part").write_bytes(b"%PDF")
    assert has_partial_sibling(target)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc is Linux-only")
def test_open_for_writing_sees_a_writer_in_another_process(tmp_path):
    path = tmp_path / "big.bin"
    path.write_bytes(b"x")
    assert open_for_writing(path) is False
    with open(path, "rb"):
        assert open_for_writing(path) is False  # readers do not count
    script = "import sys,time\nf=open(sys.argv[1],'ab')\nprint('ok',flush=True)\ntime.sleep(30)"
    proc = subprocess.Popen([sys.executable, "-c", script, str(path)], stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline().strip() == b"ok"
        assert open_for_writing(path) is True
    finally:
        proc.kill()
        proc.wait()
    assert open_for_writing(path) is False
    assert open_for_writing(tmp_path / "missing") is False
    assert os.path.exists(path)
