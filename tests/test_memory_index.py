"""The memory index in SQLite FTS5: kept across restarts (re-reading only what
changed while the daemon was off), rebuilt only for another schema version or a
damaged file, updated path by path, CJK words of one, two and three characters,
and links followed both ways, also after a rename."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from ohsync.engine.memory import index as memory_index
from ohsync.engine.memory.index import MemoryIndex, parse_offset
from ohsync.engine.memory.tools import MemoryTools

SAMPLES = Path(__file__).resolve().parent / "data" / "samples" / "OH-Memory"
TZ = parse_offset("+08:00")


def entity(root: Path, rel: str, title: str, permalink: str, body: str, *, modified: str = "2026-01-01T00:00:00+08:00",
           tags: str = "[]") -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\ntitle: {title}\ntype: note\npermalink: {permalink}\ntags: {tags}\n"
                    f"modified: {modified}\n---\n\n# {title}\n\n{body}\n", encoding="utf-8")
    return path


def permalinks(tools: MemoryTools, query: str, **kw) -> list[str]:
    return [r["permalink"] for r in tools.search(query, **kw)["results"]]


@pytest.fixture
def lib(tmp_path: Path) -> Path:
    root = tmp_path / "OH-Memory"
    shutil.copytree(SAMPLES, root)
    return root


class NoRebuild:
    """Makes :meth:`MemoryIndex.rebuild` fail: proves an open reused the file."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        def refuse(self: MemoryIndex) -> int:
            raise AssertionError("the index was rebuilt")
        monkeypatch.setattr(MemoryIndex, "rebuild", refuse)


def test_a_reopened_index_is_not_rebuilt_and_catches_up_with_changes_made_while_closed(
        lib: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "state" / "memory-index.sqlite3"
    first = MemoryIndex(lib, TZ, db)
    count, read = first.load()
    assert count == 18 and read == 18
    first.close()
    # while the daemon is off: one edit, one new file, one deletion
    pref = lib / "preferences/沟通风格偏好.md"
    pref.write_text(pref.read_text(encoding="utf-8").replace("先给结论", "先给一个斑马结论"), encoding="utf-8")
    entity(lib, "knowledge/new.md", "离线时写的笔记", "offline-note-1", "- [k] 长颈鹿")
    (lib / "tasks/申请 SRT 项目.md").unlink()
    NoRebuild(monkeypatch)
    again = MemoryIndex(lib, TZ, db)
    count, read = again.load()
    assert (count, read) == (18, 3)  # three files looked at again, not eighteen
    tools = MemoryTools(again, TZ)
    assert permalinks(tools, "斑马") == ["comm-style-pref-0e96"]
    assert permalinks(tools, "长颈鹿") == ["offline-note-1"]
    assert "srt-application-cf84" not in permalinks(tools, "SRT", limit=50)
    again.close()
    assert MemoryIndex(lib, TZ, db).load() == (18, 0)  # nothing changed: nothing read


def test_another_schema_version_or_folder_is_rebuilt(lib: Path, tmp_path: Path) -> None:
    db = tmp_path / "memory-index.sqlite3"
    index = MemoryIndex(lib, TZ, db)
    index.load()
    index.close()
    raw = sqlite3.connect(db)
    raw.execute(f"PRAGMA user_version = {memory_index.INDEX_VERSION + 1}")
    raw.execute("DELETE FROM entities")  # what a rebuild brings back
    raw.commit()
    raw.close()
    assert MemoryIndex(lib, TZ, db).load() == (18, 18)
    other = lib.parent / "Other"
    entity(other, "a.md", "Only here", "only-1", "- [k] v")
    assert MemoryIndex(other, TZ, db).load() == (1, 1)  # an index of another folder is not reused


@pytest.mark.parametrize("damage", [b"this is not a database" * 100, b"SQLite format 3\x00" + b"\xff" * 5000])
def test_a_damaged_index_file_is_rebuilt_from_the_files(lib: Path, tmp_path: Path, damage: bytes) -> None:
    db = tmp_path / "memory-index.sqlite3"
    db.write_bytes(damage)
    index = MemoryIndex(lib, TZ, db)
    assert index.load() == (18, 18)
    assert permalinks(MemoryTools(index, TZ), "沟通风格")[0] == "comm-style-pref-0e96"


def test_an_update_makes_an_edit_searchable_and_drops_a_removed_folder(lib: Path) -> None:
    index = MemoryIndex(lib, TZ)
    index.rebuild()
    tools = MemoryTools(index, TZ)
    entity(lib, "knowledge/zoo/a.md", "动物园", "zoo-a", "- [k] 河马")
    index.update(["knowledge/zoo/a.md"])
    assert permalinks(tools, "河马") == ["zoo-a"]
    entity(lib, "knowledge/zoo/a.md", "动物园", "zoo-a", "- [k] 犀牛")
    index.update(["knowledge/zoo/a.md"])
    assert permalinks(tools, "河马") == [] and permalinks(tools, "犀牛") == ["zoo-a"]
    shutil.rmtree(lib / "knowledge/zoo")
    index.update(["knowledge/zoo"])
    assert index.get("knowledge/zoo/a.md") is None and permalinks(tools, "犀牛") == []


def test_cjk_words_of_one_two_and_three_characters(lib: Path) -> None:
    entity(lib, "knowledge/r.md", "看见斑鸠", "dove-1", "- [k] 早点开始", modified="2026-03-01T00:00:00+08:00")
    entity(lib, "knowledge/s.md", "别的", "other-1", "- [k] 一只斑鸠飞过", modified="2026-02-01T00:00:00+08:00")
    entity(lib, "knowledge/t.md", "末尾是鸠", "end-1", "- [k] 没有")
    index = MemoryIndex(lib, TZ)
    index.rebuild()
    tools = MemoryTools(index, TZ)
    found = tools.search("斑鸠")["results"]
    # the title ends in the word (no character follows it there): still found, as a title hit
    assert [(r["permalink"], r["score"]) for r in found] == [("dove-1", 4), ("other-1", 1)]
    assert permalinks(tools, "鸠") == ["dove-1", "end-1", "other-1"]  # one character, also a title's last
    assert permalinks(tools, "斑鸠飞") == ["other-1"]
    assert permalinks(tools, "希")[:2] == ["ds-hw1-hashtable-2f29", "hash-collision-5e39"]
    assert permalinks(tools, "哈希")[:2] == ["ds-hw1-hashtable-2f29", "hash-collision-5e39"]
    assert permalinks(tools, "x") == permalinks(tools, "X")  # short Latin words too, case-insensitive


def _reference_ranking(index: MemoryIndex, words: list[str], *, tags: tuple[str, ...] = (),
                       type_: str | None = None, since: float | None = None,
                       include_sensitive: bool = False) -> list[tuple[int, str]]:
    """The ranking the module docstring states, by brute force over every entity."""
    ranked = []
    for e in index.entities():
        if e.status == "trashed" or (e.sensitivity == "sensitive" and not include_sensitive):
            continue
        if (type_ is not None and e.type != type_) or not set(tags) <= set(e.tags_l):
            continue
        if since is not None and e.modified_ts < since:
            continue
        tag_text = "\n".join(e.tags).lower()
        score = sum(4 * (w in e.title.lower()) + 3 * (w in e.permalink.lower()) + 2 * (w in tag_text)
                    + (w in e.body.lower()) for w in words)
        if score:
            ranked.append((-score, -e.modified_ts, e.path))
    return [(-score, path) for score, _, path in sorted(ranked)]


@pytest.mark.parametrize("few_body_hits", [500, 20])  # 20: common words are found walking the newest entities
def test_ranking_where_a_word_is_in_most_files_is_the_field_weight_sum(tmp_path: Path, few_body_hits: int,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_index, "_FEW_BODY_HITS", few_body_hits)
    # 400 entities: 复习 in four bodies of five, some titles and tags; 考试 in bodies only;
    # 斑马 in three old bodies; equal modified times among them (then the path decides)
    root = tmp_path / "OH-Memory"
    for i in range(400):
        body = " ".join(w for w, every in (("复习一下", 5), ("考试周", 3), ("notes", 7)) if i % every)
        if i in (3, 4, 5):
            body += " 斑马线"
        title = f"笔记{i}" + (" 复习计划" if i % 23 == 0 else "")
        tag_list = ["复习"] if i % 11 == 0 else ["作业"] if i % 13 == 0 else []
        entity(root, f"k/{i % 7}/n{i:03}.md", title, f"note-{i}", body, tags=str(tag_list).replace("'", ""),
               modified=f"2026-{1 + i % 12:02}-{1 + i % 5:02}T00:00:00+08:00")
    (root / "k/0/n007.md").write_text((root / "k/0/n007.md").read_text(encoding="utf-8").replace(
        "type: note", "type: note\nsensitivity: sensitive"), encoding="utf-8")
    index = MemoryIndex(root, TZ)
    index.rebuild()
    for query in ("复习", "考试", "斑马", "复习 考试", "考试 notes", "复习 考试 notes", "习", "复", "zzz", "note"):
        words = query.split()
        for kw in ({}, {"tags": ("作业",)}, {"tags": ("复习",)}, {"type_": "note"}, {"type_": "task"},
                   {"since": memory_index.to_timestamp("2026-10-01", TZ)}, {"include_sensitive": True}):
            for limit in (1, 8, 50):
                got = [(score, e.path) for score, e in index.search(words, limit=limit, **kw)]
                assert got == _reference_ranking(index, words, **kw)[:limit], (query, kw, limit)


def test_a_short_word_beginning_very_many_terms_is_found_by_scanning(lib: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    index = MemoryIndex(lib, TZ)
    index.rebuild()
    tools = MemoryTools(index, TZ)
    listed = permalinks(tools, "哈", limit=50)
    monkeypatch.setattr(memory_index, "_MAX_PREFIX_TERMS", 1)
    assert permalinks(tools, "哈", limit=50) == listed and listed


def test_related_lists_links_both_ways_with_their_relation_type_and_survives_a_rename(lib: Path) -> None:
    entity(lib, "courses/ds.md", "数据结构课", "ds-course", "## Relations\n- part_of [[2026 秋学期]]")
    entity(lib, "knowledge/hw.md", "作业一", "hw-1",
           "## Relations\n- assignment_of [[数据结构课]]\n\n见 [[数据结构课]]")
    index = MemoryIndex(lib, TZ)
    index.rebuild()
    tools = MemoryTools(index, TZ)

    def related(query: str) -> list[tuple[str, str, str | None]]:
        top = tools.search(query)["results"][0]
        return [(r["direction"], r["rel"], r["permalink"]) for r in top["related"]]
    assert related("数据结构课") == [("out", "part_of", None), ("in", "assignment_of", "hw-1"),
                                    ("in", "links_to", "hw-1")]
    assert related("作业一")[0] == ("out", "assignment_of", "ds-course")
    # the course's file is renamed and moved: its incoming links still find it (they name its title)
    (lib / "courses/archive").mkdir()
    (lib / "courses/ds.md").rename(lib / "courses/archive/数据结构.md")
    index.update(["courses/ds.md", "courses/archive/数据结构.md"])
    assert related("数据结构课")[1:] == [("in", "assignment_of", "hw-1"), ("in", "links_to", "hw-1")]
    assert tools.read("ds-course")["path"] == "courses/archive/数据结构.md"


def test_the_memory_service_reuses_its_index_file_after_a_restart(lib: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from ohsync.daemon.memory_service import MemoryService

    db = tmp_path / "state" / "memory-index.sqlite3"

    def service() -> MemoryService:
        return MemoryService(lib, "+08:00", lambda job: None, {"paused": False}.get, lambda t: (True, ""),
                             lambda paths: None, index_path=lambda: db)
    first = service()
    assert first.handlers()["memory.search"]({"query": "沟通风格"})["results"]
    assert db.is_file()
    entity(lib, "knowledge/new.md", "重启之间", "between-1", "- [k] 袋鼠")
    NoRebuild(monkeypatch)
    second = service()  # a restarted daemon: the same file, nothing rebuilt
    assert [r["permalink"] for r in second.handlers()["memory.search"]({"query": "袋鼠"})["results"]] == ["between-1"]


def test_the_index_never_reads_through_a_symbolic_link(lib: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    entity(outside, "secret.md", "外面的笔记", "outside-1", "- [k] 不该被读到")
    (lib / "knowledge" / "linked").symlink_to(outside, target_is_directory=True)
    (lib / "knowledge" / "one.md").symlink_to(outside / "secret.md")
    index = MemoryIndex(lib, TZ)
    index.rebuild()
    index.update(["knowledge/linked", "knowledge/one.md"])
    assert not [e.path for e in index.entities() if "linked" in e.path or e.path.endswith("one.md")]
    assert MemoryTools(index, TZ).search("不该被读到")["results"] == []


def test_an_index_file_damaged_while_in_use_is_rebuilt_and_searches_answer_again(lib: Path, tmp_path: Path) -> None:
    from daemon_helpers import wait_for
    from ohsync.daemon.memory_service import MemoryService
    from ohsync.daemon.socket.server import CannotNow

    db = tmp_path / "state" / "memory-index.sqlite3"
    service = MemoryService(lib, "+08:00", lambda job: None, {"paused": False}.get, lambda t: (True, ""),
                            lambda paths: None, index_path=lambda: db)
    search = service.handlers()["memory.search"]
    assert search({"query": "沟通风格"})["results"]
    service.index.close()  # a fresh connection: nothing of the file in its cache
    service.index._db = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    size = db.stat().st_size
    with open(db, "r+b") as fh:  # every page after the first is overwritten
        fh.seek(4096)
        fh.write(b"\xa5" * (size - 4096))
    with pytest.raises(CannotNow, match="damaged"):
        search({"query": "沟通风格"})
    # CannotNow ("being rebuilt") until the rebuild is done
    found = wait_for(lambda: search({"query": "沟通风格"})["results"], timeout=30, what="searches answering again")
    assert found[0]["permalink"] == "comm-style-pref-0e96"
    assert MemoryIndex(lib, TZ, db).load()[1] == 0  # the rebuilt file is whole again


def test_neither_files_nor_dot_folders_are_indexed_on_a_rebuild_a_reopen_or_an_update(lib: Path,
                                                                                      tmp_path: Path) -> None:
    db = tmp_path / "state" / "memory-index.sqlite3"
    first = MemoryIndex(lib, TZ, db)
    first.load()
    first.close()
    for rel in ("Files/notes/看板.md", ".obsidian/看板.md", "knowledge/.hidden/看板.md", "knowledge/.看板.md",
                "knowledge/看板.md"):
        entity(lib, rel, "看板", "board-" + str(len(rel)), "- [k] 看板内容")
    index = MemoryIndex(lib, TZ, db)
    index.load()  # the reopened file catches up with the new files
    assert [e.path for _, e in index.search(["看板"], limit=20)] == ["knowledge/看板.md"]
    index.update(["Files", ".obsidian", "knowledge/.hidden", "Files/notes/看板.md"])
    assert [e.path for _, e in index.search(["看板"], limit=20)] == ["knowledge/看板.md"]
    fresh = MemoryIndex(lib, TZ)
    fresh.rebuild()
    assert [e.path for _, e in fresh.search(["看板"], limit=20)] == ["knowledge/看板.md"]
