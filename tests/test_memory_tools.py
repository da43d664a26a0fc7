"""Contract tests of the memory tools (issue 15) on the sample OH-Memory library:
ranking, CJK, filters, relation expansion, permalink after a rename,
truncation, the blocklist, and planned writes (pure, no server)."""

from __future__ import annotations

import re
import shutil
from datetime import datetime
from pathlib import Path

import pytest

from ohsync.engine.memory.edit import MemoryToolError, entity_filename
from ohsync.engine.memory.format import parse_memory
from ohsync.engine.memory.guard import find_secret, looks_sensitive
from ohsync.engine.memory.index import MemoryIndex, parse_offset
from ohsync.engine.memory.tools import READ_LIMIT, MemoryTools

SAMPLES = Path(__file__).resolve().parent / "data" / "samples" / "OH-Memory"
TZ = parse_offset("+08:00")
NOW = datetime(2026, 12, 1, 18, 30, 5, tzinfo=TZ)


@pytest.fixture
def lib(tmp_path: Path) -> Path:
    root = tmp_path / "OH-Memory"
    shutil.copytree(SAMPLES, root)
    return root


@pytest.fixture
def tools(lib: Path) -> MemoryTools:
    index = MemoryIndex(lib, TZ)
    index.rebuild()
    return MemoryTools(index, TZ, now=lambda: NOW)


def note(root: Path, rel: str, title: str, permalink: str, modified: str, body: str, *, tags: str = "[]",
         type_: str = "note", sensitivity: str = "normal") -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\ntitle: {title}\ntype: {type_}\npermalink: {permalink}\ntags: {tags}\n"
                    f"created: 2026-01-01T00:00:00+08:00\nmodified: {modified}\norigin: desktop\n"
                    f"sensitivity: {sensitivity}\n---\n\n# {title}\n\n## Observations\n{body}\n", encoding="utf-8")


def permalinks(result: dict) -> list[str]:
    return [r["permalink"] for r in result["results"]]


# -- index ------------------------------------------------------------------------------

def test_index_reads_every_sample_and_skips_dot_folders(tools: MemoryTools) -> None:
    paths = {e.path for e in tools.index.entities()}
    assert len(paths) == 18  # 17 memory files + index.md; .trash/ is not indexed
    assert not [p for p in paths if p.startswith(".")]
    empty = tools.index.get("tasks/待办速记.md")
    assert empty is not None and empty.title == "待办速记"  # no frontmatter: the file name's title
    damaged = tools.index.get("knowledge/哈希表冲突处理.md")
    assert damaged.damaged and damaged.permalink == "hash-collision-5e39"  # salvaged from the broken frontmatter


def test_journal_integer_tag_is_a_string(tools: MemoryTools) -> None:
    assert tools.index.by_permalink("journal-2026-09-5364").tags == ("日志", "2026")
    assert permalinks(tools.search(tags=["2026"], type="journal"))[:3] == [
        "journal-2026-11-df70", "journal-2026-10-442f", "journal-2026-09-5364"]


# -- search: ranking ----------------------------------------------------------------------

def test_title_beats_permalink_beats_tag_beats_body(lib: Path) -> None:
    note(lib, "knowledge/t.md", "zebra facts", "aaa-1", "2026-01-01T00:00:00+08:00", "- [x1] nothing")
    note(lib, "knowledge/p.md", "other one", "zebra-2", "2026-01-02T00:00:00+08:00", "- [x1] nothing")
    note(lib, "knowledge/g.md", "third one", "ccc-3", "2026-01-03T00:00:00+08:00", "- [x1] nothing",
         tags="[zebra]")
    note(lib, "knowledge/b.md", "fourth one", "ddd-4", "2026-01-04T00:00:00+08:00", "- [x1] a zebra here")
    index = MemoryIndex(lib, TZ)
    index.rebuild()
    result = MemoryTools(index, TZ).search("ZEBRA")
    assert permalinks(result) == ["aaa-1", "zebra-2", "ccc-3", "ddd-4"]
    assert [r["score"] for r in result["results"]] == [4, 3, 2, 1]


def test_scores_add_up_per_word_and_ties_go_to_the_newest(lib: Path) -> None:
    note(lib, "knowledge/a.md", "alpha", "n-a", "2026-01-01T00:00:00+08:00", "- [k] beta")
    note(lib, "knowledge/b.md", "alpha beta", "n-b", "2026-01-02T00:00:00+08:00", "- [k] nothing")
    note(lib, "knowledge/c.md", "gamma", "n-c", "2026-03-01T00:00:00+08:00", "- [k] alpha beta")
    note(lib, "knowledge/d.md", "delta", "n-d", "2026-02-01T00:00:00+08:00", "- [k] alpha beta")
    index = MemoryIndex(lib, TZ)
    index.rebuild()
    result = MemoryTools(index, TZ).search("alpha beta")
    # b: 4+4=8; a: 4+1=5; c and d: 1+1=2, the newer (c) first
    assert permalinks(result)[:4] == ["n-b", "n-a", "n-c", "n-d"]


def test_cjk_query_matches_substrings_without_segmentation(tools: MemoryTools) -> None:
    result = tools.search("哈希表")
    top = permalinks(result)
    # two titles contain 哈希表 (×4 + body ×1); the tie goes to the newer one
    assert top[:2] == ["ds-hw1-hashtable-2f29", "hash-collision-5e39"]
    assert all(r["score"] == 1 for r in result["results"][2:])
    assert "哈希" in tools.search("希表冲")["results"][0]["title"]  # a substring inside a word


def test_default_limit_is_eight(tools: MemoryTools) -> None:
    assert len(tools.search()["results"]) == 8
    assert len(tools.search(limit=3)["results"]) == 3


def test_snippet_is_the_hit_line_with_its_neighbours(tools: MemoryTools) -> None:
    result = tools.search("番茄牛腩")
    snippet = result["results"][0]["snippet"].split("\n")
    assert len(snippet) == 3 and "番茄牛腩" in snippet[1]
    body = (SAMPLES / "journal/2026-11.md").read_text(encoding="utf-8").splitlines()
    i = next(n for n, line in enumerate(body) if "番茄牛腩" in line)
    assert snippet == body[i - 1:i + 2]


# -- search: filters -----------------------------------------------------------------------

def test_tags_must_all_match_and_type_is_exact(tools: MemoryTools) -> None:
    assert set(permalinks(tools.search(tags=["偏好"], limit=50))) == {
        "comm-style-pref-0e96", "schedule-reminder-pref-b81b"}  # the sensitive one is left out
    assert permalinks(tools.search(tags=["偏好", "沟通"])) == ["comm-style-pref-0e96"]
    assert tools.search(tags=["偏好", "不存在"])["results"] == []
    types = {r["type"] for r in tools.search(type="course", limit=50)["results"]}
    assert types == {"course"}
    assert tools.search(type="cours")["results"] == []


def test_since_filters_by_modified(tools: MemoryTools) -> None:
    result = tools.search(since="2026-11-25", limit=50)
    got = {r["permalink"]: r["modified"] for r in result["results"]}
    # a file without `modified` is judged by its mtime (the copy was made just now)
    assert got.pop("tasks/待办速记") == ""
    assert got and all(m >= "2026-11-25" for m in got.values())
    assert "journal-2026-11-df70" in got and "comm-style-pref-0e96" not in got
    with pytest.raises(MemoryToolError, match="ISO date"):
        tools.search(since="last week")


def test_sensitive_entities_only_when_asked(tools: MemoryTools) -> None:
    assert "health-emergency-contact-7b65" not in permalinks(tools.search("过敏", limit=50))
    assert permalinks(tools.search("过敏", include_sensitive=True))[0] == "health-emergency-contact-7b65"


def test_relations_are_expanded_one_hop(tools: MemoryTools) -> None:
    hit = tools.search("沟通风格偏好")["results"][0]
    assert hit["permalink"] == "comm-style-pref-0e96"
    related = {(r["rel"], r["permalink"]) for r in hit["related"]}
    assert ("applies_to", "ds-course-2026f-0be2") in related
    assert ("is refined by", "schedule-reminder-pref-b81b") in related
    srt = tools.search("SRT")["results"][0]
    dangling = [r for r in srt["related"] if r["target"] == "SRT 结题报告"]
    assert dangling and dangling[0]["permalink"] is None  # a forward link that does not resolve yet


def test_links_resolve_by_title_not_file_name(tools: MemoryTools) -> None:
    hit = tools.search("期中复习")["results"]
    journal = next(r for r in tools.search("journal-2026-10", limit=1)["results"])
    assert any(r["permalink"] == "linalg-midterm-review-0e4f" for r in journal["related"])
    assert hit


# -- read and list -------------------------------------------------------------------------

def test_read_finds_the_entity_after_a_rename_and_a_move(lib: Path, tools: MemoryTools) -> None:
    old = "preferences/沟通风格偏好.md"
    new = "knowledge/style/沟通偏好（改名）.md"
    (lib / new).parent.mkdir(parents=True)
    (lib / old).rename(lib / new)
    tools.index.update([new])  # the event names only the new path
    got = tools.read("comm-style-pref-0e96")
    assert got["path"] == new and "默认用中文回复" in got["content"]
    assert tools.index.get(old) is None


def test_read_truncates_past_8kb_with_a_marker(tools: MemoryTools) -> None:
    got = tools.read("journal-2026-11-df70")
    assert got["truncated"] and got["size"] > 20_000
    assert "[truncated: showing" in got["content"]
    shown = got["content"].split("…[truncated")[0].encode("utf-8")
    assert len(shown) <= READ_LIMIT and shown.endswith(b"\n")
    small = tools.read("comm-style-pref-0e96")
    assert not small["truncated"]
    assert small["content"].encode() == (SAMPLES / "preferences/沟通风格偏好.md").read_bytes()


def test_read_unknown_permalink_is_a_sentence(tools: MemoryTools) -> None:
    with pytest.raises(MemoryToolError, match="no memory entity"):
        tools.read("nope-0000")


def test_list_by_folder_and_tag_without_bodies(tools: MemoryTools) -> None:
    courses = tools.list(folder="courses")
    assert courses["total"] == 5
    assert all(set(r) == {"permalink", "title", "type", "modified", "path"} for r in courses["results"])
    mods = [r["modified"] for r in courses["results"]]
    assert mods == sorted(mods, reverse=True)
    assert [r["permalink"] for r in tools.list(folder="courses/2026-2027-1")["results"]] == ["discrete-math-2026f-8b4b"]
    assert {r["permalink"] for r in tools.list(tag="沟通")["results"]} == {"comm-style-pref-0e96"}
    assert {r["permalink"] for r in tools.list(tag=" #沟通 ")["results"]} == {"comm-style-pref-0e96"}
    with pytest.raises(MemoryToolError, match="names one tag .* memory_search"):
        tools.list(tag="沟通, 偏好")  # would list nothing: no tag holds a comma


# -- blocklist ----------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "OpenAI key sk-proj-AbCdEf0123456789XyZ0",
    "key sk-abcdefghijklmnop1234",
    "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.payload.sig",
    "bearer abcdefgh12345678",
    "验证码 482913，5 分钟内有效",
    "你的验证码是：6302",
    "Your verification code is 884213",
    "OTP: 1234",
    "482913 是你的验证码",
    "身份证号 110101199003071234",
    "卡号 6222020200112233445",
    "card 6222 0202 0011 2233",
])
def test_every_blocklist_pattern_refuses(tools: MemoryTools, text: str) -> None:
    assert find_secret(text)
    with pytest.raises(MemoryToolError, match="refused"):
        tools.plan_write("测试", [{"category": "fact", "text": text}])
    entity = tools.entity("comm-style-pref-0e96")
    data = (tools.index.root / entity.path).read_bytes()
    with pytest.raises(MemoryToolError, match="refused"):
        tools.plan_append(entity, data, "fact", text)
    with pytest.raises(MemoryToolError, match="refused"):
        tools.plan_edit(entity, data, "先给结论", text)


@pytest.mark.parametrize("text", [
    "作业 DDL 2026-12-11 23:59，提前两天交", "电话 138-0000-0000 是假的", "desk-lamp 买了",
    "会议 2026-11-20 2026-11-21",
    "skiing in sk-1 area", "Bearer of bad news",
])
def test_ordinary_text_is_not_refused(text: str) -> None:
    assert find_secret(text) is None


def test_sensitive_content_is_marked_not_refused(tools: MemoryTools) -> None:
    assert looks_sensitive("对青霉素过敏")
    plan = tools.plan_write("体检结果", [{"category": "health", "text": "对青霉素过敏"}])
    assert plan.result["sensitivity"] == "sensitive" and plan.result["marked_sensitive"]
    assert b"sensitivity: sensitive" in plan.data
    entity = tools.entity("comm-style-pref-0e96")
    data = (tools.index.root / entity.path).read_bytes()
    appended = tools.plan_append(entity, data, "contact", "紧急联系人 王五 138-0000-0000")
    assert b"sensitivity: sensitive" in appended.data and appended.result["marked_sensitive"]


# -- planned writes -----------------------------------------------------------------------------

def test_write_renders_the_entity_format(tools: MemoryTools) -> None:
    plan = tools.plan_write('线代: 习题 "3/4" <难> *?|', [
        {"category": "tip", "text": "先算行列式", "tags": ["线性代数", "技巧"], "context": "第 3 章"},
        {"category": "fact", "text": "特征值之和等于迹"}],
        relations=[{"rel": "part of", "target": "线性代数: 期中复习要点"}], tags=["复习", 2026], type="course")
    assert plan.create and plan.path == "courses/线代： 习题 ＂3／4＂ ＜难＞ ＊？｜.md"
    assert plan.path.rpartition("/")[2] == entity_filename('线代: 习题 "3/4" <难> *?|')
    doc = parse_memory(plan.data)
    fm = doc.frontmatter.data
    assert fm["title"] == '线代: 习题 "3/4" <难> *?|' and fm["type"] == "course"
    assert fm["tags"] == ["复习", "2026"] and fm["origin"] == "desktop" and fm["sensitivity"] == "normal"
    assert fm["created"] == fm["modified"] == NOW.replace(microsecond=0)
    assert b"created: 2026-12-01T18:30:05+08:00" in plan.data
    assert re.fullmatch(r"3-4-[0-9a-f]{4}", fm["permalink"])  # the ASCII words of the title + sha1[:4]
    lines = [o.line for o in doc.observations]
    assert lines == ["- [tip] 先算行列式 #线性代数 #技巧 (第 3 章)", "- [fact] 特征值之和等于迹"]
    assert [r.line for r in doc.relations] == ['- "part of" [[线性代数: 期中复习要点]]']


def test_write_permalink_is_slug_plus_hash_and_unique(tools: MemoryTools) -> None:
    plan = tools.plan_write("Hash Table Notes", [{"category": "k", "text": "v"}])
    assert plan.result["permalink"].startswith("hash-table-notes-")
    assert re.fullmatch(r"note-[0-9a-f]{4}", tools.plan_write("纯中文标题", [{"category": "k", "text": "v"}])
                        .result["permalink"])
    taken = {plan.result["permalink"]}
    from ohsync.engine.memory.edit import make_permalink
    other = make_permalink("Hash Table Notes", "note", taken.__contains__)
    assert other != plan.result["permalink"] and other.startswith(plan.result["permalink"])


def test_a_comma_separated_tag_is_written_as_separate_tags(tools: MemoryTools) -> None:
    plan = tools.plan_write("Tag Notes", [{"category": "k", "text": "v", "tags": ["x, y", "z"]}],
                            tags=["a, b", "c，d", " e ", ",", "#f"])
    doc = parse_memory(plan.data)
    assert doc.frontmatter.data["tags"] == ["a", "b", "c", "d", "e", "f"]
    assert [o.line for o in doc.observations] == ["- [k] v #x #y #z"]
    assert b"a,_b" not in plan.data
    tools.index.root.joinpath(plan.path).parent.mkdir(parents=True, exist_ok=True)
    tools.index.root.joinpath(plan.path).write_bytes(plan.data)
    tools.index.update([plan.path])
    assert permalinks(tools.search(tags=["a, b"])) == [plan.result["permalink"]]  # a search splits them too


def test_the_tool_schema_says_how_a_comma_in_a_tag_is_read() -> None:
    from ohsync.daemon.mcp_server import TOOLS

    write = TOOLS["memory_write"][2]["properties"]
    assert '"a, b" is split into the tags a and b' in write["tags"]["description"]
    assert '"a, b" is split into a and b' in write["observations"]["items"]["properties"]["tags"]["description"]
    assert '"a, b" is split into a and b' in TOOLS["memory_search"][2]["properties"]["tags"]["description"]


def test_write_refuses_an_existing_title(tools: MemoryTools) -> None:
    with pytest.raises(MemoryToolError, match="already exists"):
        tools.plan_write("沟通风格偏好", [{"category": "k", "text": "v"}])


def test_write_folder_follows_type(tools: MemoryTools) -> None:
    assert tools.plan_write("早睡", [{"category": "k", "text": "v"}], type="preference").path == "preferences/早睡.md"
    assert tools.plan_write("某事", [{"category": "k", "text": "v"}]).path == "knowledge/某事.md"
    with pytest.raises(MemoryToolError, match="folder"):
        tools.plan_write("某事", [{"category": "k", "text": "v"}], folder="../x")


def test_append_adds_one_observation_in_the_section_and_stamps_modified(tools: MemoryTools, lib: Path) -> None:
    entity = tools.entity("comm-style-pref-0e96")
    data = (lib / entity.path).read_bytes()
    plan = tools.plan_append(entity, data, "tone", "称呼用“你”", "用户要求")
    new = plan.data.decode()
    assert new.count("- [tone] 称呼用“你” (用户要求)") == 1
    assert new.index("- [tone] 称呼用“你”") < new.index("## Relations")
    assert "modified: 2026-12-01T18:30:05+08:00" in new
    old_lines, new_lines = data.decode().splitlines(), new.splitlines()
    assert len(new_lines) == len(old_lines) + 1
    again = tools.plan_append(entity, plan.data, "tone", "称呼用“你”", "用户要求")
    assert not again.result["added"] and again.data == plan.data


def test_append_keeps_crlf_and_bom(tools: MemoryTools, lib: Path) -> None:
    crlf = tools.index.get("preferences/作息与提醒偏好.md")
    data = (lib / crlf.path).read_bytes()
    new = tools.plan_append(crlf, data, "nap", "午睡 20 分钟").data
    assert b"\n" not in new.replace(b"\r\n", b"") and b"- [nap] \xe5\x8d\x88" in new
    bom = tools.index.get("knowledge/校园服务入口速查.md")
    new = tools.plan_append(bom, (lib / bom.path).read_bytes(), "tip", "图书馆 8 点开门").data
    assert new.startswith(b"\xef\xbb\xbf---")


def test_append_to_a_journal_month_prefixes_the_time(tools: MemoryTools, lib: Path) -> None:
    journal = tools.entity("journal-2026-11-df70")
    new = tools.plan_append(journal, (lib / journal.path).read_bytes(), "life", "买了新台灯").data
    assert new.decode().rstrip("\n").splitlines()[-1] == "- [life] 2026-12-01 18:30 买了新台灯"


def test_edit_is_a_literal_replace_that_fails_when_absent_or_ambiguous(tools: MemoryTools, lib: Path) -> None:
    entity = tools.entity("comm-style-pref-0e96")
    data = (lib / entity.path).read_bytes()
    plan = tools.plan_edit(entity, data, "一般不超过三段", "一般不超过两段")
    assert b"\xe4\xb8\xa4\xe6\xae\xb5" in plan.data and b"modified: 2026-12-01T18:30:05+08:00" in plan.data
    with pytest.raises(MemoryToolError, match="does not occur"):
        tools.plan_edit(entity, data, "没有这句话", "x")
    with pytest.raises(MemoryToolError, match="occurs 2 times"):
        tools.plan_edit(entity, data, "#沟通", "#x")
    with pytest.raises(MemoryToolError, match="permalink"):
        tools.plan_edit(entity, data, "comm-style-pref-0e96", "other-0000")


def test_trash_marks_the_entity(tools: MemoryTools, lib: Path) -> None:
    entity = tools.entity("srt-application-cf84")
    plan = tools.plan_trash(entity, (lib / entity.path).read_bytes(), reason="项目取消")
    fm = parse_memory(plan.data).frontmatter.data
    assert fm["status"] == "trashed" and fm["original_path"] == "tasks/申请 SRT 项目.md"
    assert fm["trash_reason"] == "项目取消" and plan.result["deleted"] == "申请 SRT 项目"


def test_changes_after_the_index_was_built_are_searched_too(lib: Path, tools: MemoryTools) -> None:
    assert permalinks(tools.search("沟通风格"))[0] == "comm-style-pref-0e96"
    path = lib / "preferences/沟通风格偏好.md"
    path.write_text(path.read_text(encoding="utf-8").replace("先给结论", "先给一个斑马结论")
                    .replace("modified: 2026-10-18T23:05:00+08:00", "modified: 2027-01-01T00:00:00+08:00"),
                    encoding="utf-8")
    note(lib, "knowledge/new.md", "斑马笔记", "zebra-note-1", "2026-01-01T00:00:00+08:00", "- [k] v")
    (lib / "tasks/申请 SRT 项目.md").unlink()
    tools.index.update(["preferences/沟通风格偏好.md", "knowledge/new.md", "tasks/申请 SRT 项目.md"])
    assert permalinks(tools.search("斑马")) == ["zebra-note-1", "comm-style-pref-0e96"]
    assert tools.search("先给结论")["results"] == []
    assert "srt-application-cf84" not in permalinks(tools.search("SRT", limit=50))
    assert permalinks(tools.search(limit=1)) == ["comm-style-pref-0e96"]  # now the newest


def test_the_readme_memory_examples_find_something_in_the_demo_library(tmp_path: Path) -> None:
    """The shell examples of README's "Memory tools and MCP" work on `ohsync demo`'s library."""
    repo = Path(__file__).resolve().parent.parent
    readme = " ".join((repo / "README.md").read_text(encoding="utf-8").split())
    search = re.search(r"`ohsync memory search (\S+) --tag (\S+)`", readme)
    read = re.search(r"`ohsync memory read (\S+)`", readme)
    assert search and read, "README lost its memory examples"
    root = tmp_path / "demo"
    shutil.copytree(repo / "devserver" / "demo_library", root)
    index = MemoryIndex(root, TZ)
    index.rebuild()
    tools = MemoryTools(index, TZ, now=lambda: NOW)
    found = tools.search(query=search.group(1), tags=[search.group(2)])["results"]
    assert found, f"`ohsync memory search {search.group(1)} --tag {search.group(2)}` finds nothing"
    assert tools.read(read.group(1))["permalink"] == read.group(1)


def _entity_file(path: Path, title: str, permalink: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\ntitle: {title}\ntype: note\npermalink: {permalink}\n---\n\n# {title}\n", encoding="utf-8")


def test_index_duplicate_permalink_takes_over_and_updates_stay_cheap(tmp_path):
    lib = tmp_path / "lib"
    _entity_file(lib / "a" / "one.md", "One", "same-link")
    _entity_file(lib / "b" / "two.md", "Two", "same-link")
    index = MemoryIndex(lib, TZ)
    index.rebuild()
    first = index.by_permalink("same-link")
    assert first is not None
    (lib / first.path).unlink()
    index.update([first.path])
    other = index.by_permalink("same-link")
    assert other is not None and other.path != first.path
    (lib / other.path).unlink()
    index.update([other.path])
    assert index.by_permalink("same-link") is None

    # an update touches only the named paths: the others keep their rows
    for i in range(50):
        _entity_file(lib / "many" / f"n{i}.md", f"N{i}", f"n-{i}")
    index.rebuild()
    (lib / "many" / "n3.md").unlink()  # gone without an event: not looked at by an update of other paths
    index.update([f"many/n{i}.md" for i in range(10, 20)])
    assert index.get("many/n3.md") is not None and len(index) == 50
    assert index.by_permalink("n-7") is not None


def test_search_lists_each_related_entity_once(lib: Path) -> None:
    # A links to B by its title and by its permalink, B links back: B is one link out and one in
    note(lib, "knowledge/a.md", "甲笔记", "note-a", "2026-03-01T00:00:00+08:00",
         "- [k] 斑马\n\n## Relations\n- refers_to [[乙笔记]]\n- refers_to [[note-b]]\n- see [[乙笔记]]")
    note(lib, "knowledge/b.md", "乙笔记", "note-b", "2026-02-01T00:00:00+08:00",
         "- [k] 别的\n\n## Relations\n- refers_to [[甲笔记]]\n- refers_to [[note-a]]")
    index = MemoryIndex(lib, TZ)
    index.rebuild()
    hit = MemoryTools(index, TZ).search("斑马")["results"][0]
    assert hit["permalink"] == "note-a"
    assert [(r["direction"], r["rel"], r["permalink"]) for r in hit["related"]] == [
        ("out", "refers_to", "note-b"), ("out", "see", "note-b"), ("in", "refers_to", "note-b")]
    # the CLI's text names each related entity once
    from ohsync.daemon.cli.memory import _search_text
    text = _search_text({"results": [hit]})
    assert text.splitlines()[-1] == "    related: 乙笔记"


def test_write_refuses_a_path_this_disk_cannot_hold_before_writing(tools: MemoryTools, lib: Path) -> None:
    deep = "/".join(["d" * 200] * 22)  # every name fits, the whole path (4,400 bytes) does not
    with pytest.raises(MemoryToolError, match=r"cannot be saved here \(the path is too long for this disk"):
        tools.plan_write("Deep", [{"category": "k", "text": "v"}], folder=deep)
    assert not (lib / ("d" * 200)).exists()


def test_write_into_a_folder_that_is_a_file_is_a_sentence(tools: MemoryTools, lib: Path) -> None:
    (lib / "index.md").write_text("not a folder\n", encoding="utf-8")
    with pytest.raises(MemoryToolError, match=r"index\.md is a file, not a folder"):
        tools.plan_write("Inside", [{"category": "k", "text": "v"}], folder="index.md")
    with pytest.raises(MemoryToolError, match=r"index\.md is a file, not a folder"):
        tools.plan_write("Inside", [{"category": "k", "text": "v"}], folder="index.md/below")


def test_edit_of_a_file_that_is_not_utf8_is_a_sentence(tools: MemoryTools, lib: Path) -> None:
    note(lib, "knowledge/latin1.md", "Latin", "latin-1", "2026-01-02T00:00:00+08:00", "- [k] caf\u00e9")
    path = lib / "knowledge/latin1.md"
    path.write_bytes(path.read_bytes().replace("é".encode(), b"\xe9"))
    tools.index.update(["knowledge/latin1.md"])
    entity = tools.entity("latin-1")
    with pytest.raises(MemoryToolError, match=r"the file is not UTF-8 text .*save it as UTF-8"):
        tools.plan_edit(entity, path.read_bytes(), "caf", "tea")
