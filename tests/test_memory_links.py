"""The memory tools stay inside the mirror: a symbolic link as the file, as a
folder, or as a folder further up is never read, written, created through or
indexed, and the refusal names the path (the tool functions, the daemon's
memory service, the write path; the socket and CLI end to end are in
tests/test_memory_daemon.py)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from ohsync.daemon.memory_service import MemoryService
from ohsync.daemon.socket.server import InvalidParams
from ohsync.engine import nofollow
from ohsync.engine.memory.edit import MemoryToolError
from ohsync.engine.memory.index import MemoryIndex, parse_offset
from ohsync.engine.memory.tools import MemoryTools
from ohsync.engine.memory.writes import apply_write

SAMPLES = Path(__file__).resolve().parent / "data" / "samples" / "OH-Memory"
TZ = parse_offset("+08:00")
OUTSIDE_NOTE = ("---\ntitle: Outside secret\ntype: note\npermalink: outside-secret-0001\ntags: []\n"
                "---\n\n## Observations\n- [fact] OUTSIDE-CONTENT lives outside the mirror\n")


@pytest.fixture
def lib(tmp_path: Path) -> Path:
    root = tmp_path / "OH-Memory"
    shutil.copytree(SAMPLES, root)
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "note.md").write_text(OUTSIDE_NOTE, encoding="utf-8")
    return folder


def tools_for(lib: Path) -> MemoryTools:
    index = MemoryIndex(lib, TZ)
    index.rebuild()
    return MemoryTools(index, TZ)


def listing(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def fake_engine(root: Path) -> SimpleNamespace:
    """Just enough of a SyncEngine for the local half of apply_write (a refusal comes before any push)."""
    return SimpleNamespace(ctx=SimpleNamespace(local_root=root,
                                               options=SimpleNamespace(backup_dir=None, library_name="OH-Memory")))


def test_a_file_link_to_etc_passwd_is_not_indexed_read_or_searched(lib: Path) -> None:
    os.symlink("/etc/passwd", lib / "knowledge" / "pw.md")
    tools = tools_for(lib)
    assert tools.index.get("knowledge/pw.md") is None
    with pytest.raises(MemoryToolError, match=r"refused: knowledge/pw\.md is a symbolic link"):
        tools.read("knowledge/pw")
    tools.index.update(["knowledge/pw.md", "knowledge"])  # a watcher event naming it changes nothing
    assert tools.index.get("knowledge/pw.md") is None
    answers = [tools.search("root"), tools.search(None, limit=100), tools.list(folder="knowledge", limit=500)]
    assert "root:x:0" not in json.dumps(answers, ensure_ascii=False)
    assert "knowledge/pw.md" not in json.dumps(answers, ensure_ascii=False)


def test_a_file_swapped_for_a_link_after_indexing_is_refused_by_read_append_edit(lib: Path, tmp_path: Path) -> None:
    tools = tools_for(lib)
    service = MemoryService(lib, "+08:00", lambda job: None, {"paused": False}.get, lambda t: (True, ""),
                            lambda paths: None)
    service.rebuild()
    entity = tools.entity("comm-style-pref-0e96")
    target = lib / entity.path
    (tmp_path / "kept.md").write_bytes(target.read_bytes())
    target.unlink()
    os.symlink(tmp_path / "kept.md", target)  # both indexes still hold the entity from before
    before = (tmp_path / "kept.md").read_bytes()
    with pytest.raises(MemoryToolError, match=rf"refused: {entity.path} is a symbolic link"):
        tools.read("comm-style-pref-0e96")
    handlers = service.handlers()
    with pytest.raises(InvalidParams, match=rf"refused: {entity.path} is a symbolic link"):
        handlers["memory.append"]({"permalink": "comm-style-pref-0e96", "category": "k", "text": "v"})
    planner = lambda data: tools.plan_edit(entity, data or b"", "先给结论", "先说结论")  # noqa: E731
    with pytest.raises(MemoryToolError, match=rf"refused: {entity.path} is a symbolic link"):
        apply_write(fake_engine(lib), entity.path, planner)
    assert (tmp_path / "kept.md").read_bytes() == before and target.is_symlink()


def test_a_folder_link_to_outside_is_not_indexed_and_not_written_into(lib: Path, outside: Path) -> None:
    os.symlink(outside, lib / "ext")
    tools = tools_for(lib)
    tools.index.update(["ext", "ext/note.md"])
    assert tools.index.by_permalink("outside-secret-0001") is None
    assert "OUTSIDE-CONTENT" not in json.dumps(tools.search("OUTSIDE-CONTENT"), ensure_ascii=False)
    with pytest.raises(MemoryToolError, match=r"refused: ext/note\.md|refused: ext is a symbolic link"):
        tools.read("ext/note")
    with pytest.raises(MemoryToolError, match="refused: ext is a symbolic link to a folder"):
        tools.plan_write("Inside?", [{"category": "fact", "text": "x"}], folder="ext")
    before = listing(outside)
    plan = tools.plan_write("Inside?", [{"category": "fact", "text": "x"}], folder="knowledge")
    with pytest.raises(MemoryToolError, match="refused: ext is a symbolic link to a folder"):
        apply_write(fake_engine(lib), "ext/Inside？.md", lambda data: plan, create=True)
    assert listing(outside) == before


def test_an_event_naming_a_folder_link_never_walks_outside(lib: Path, outside: Path, monkeypatch) -> None:
    import ohsync.engine.memory.index as memory_index

    os.symlink(outside, lib / "ext")
    tools = tools_for(lib)
    walked: list[str] = []
    real_walk = os.walk
    monkeypatch.setattr(memory_index.os, "walk",
                        lambda top, *a, **k: walked.append(str(top)) or real_walk(top, *a, **k))
    tools.index.update(["ext", "ext/deeper"])
    assert not [t for t in walked if "ext" in t]
    assert tools.index.by_permalink("outside-secret-0001") is None


def test_a_link_in_a_parent_folder_is_never_created_through(lib: Path, outside: Path) -> None:
    os.symlink(outside, lib / "deep")
    tools = tools_for(lib)
    with pytest.raises(MemoryToolError, match="refused: deep is a symbolic link to a folder"):
        tools.plan_write("Deeper", [{"category": "fact", "text": "x"}], folder="deep/sub/more")
    plan = tools.plan_write("Deeper", [{"category": "fact", "text": "x"}], folder="knowledge")
    with pytest.raises(MemoryToolError, match="refused: deep is a symbolic link to a folder"):
        apply_write(fake_engine(lib), "deep/sub/more/Deeper.md", lambda data: plan, create=True)
    assert sorted(p.name for p in outside.iterdir()) == ["note.md"]  # no sub/ made out there


def test_folders_inside_the_mirror_are_still_created(lib: Path) -> None:
    st = nofollow.write_file(lib, "new/sub/Fresh.md", b"inside\n")
    assert (lib / "new/sub/Fresh.md").read_bytes() == b"inside\n" and st.st_size == 7
    assert nofollow.read_file(lib, "new/sub/Fresh.md")[0] == b"inside\n"
    assert nofollow.remove_file(lib, "new/sub/Fresh.md") and not (lib / "new/sub/Fresh.md").exists()


def test_nofollow_refuses_dot_dot_and_fifos(lib: Path) -> None:
    with pytest.raises(nofollow.OutsideMirrorError, match="outside the mirror"):
        nofollow.read_file(lib, "../OH-Memory/index.md")
    os.mkfifo(lib / "knowledge" / "pipe.md")
    with pytest.raises(nofollow.OutsideMirrorError, match="not a regular file"):
        nofollow.read_file(lib, "knowledge/pipe.md")
    assert nofollow.symlink_on_the_way(lib, "knowledge/x/y.md") is None
    os.symlink(lib / "knowledge", lib / "again")
    assert nofollow.symlink_on_the_way(lib, "again/x/y.md") == "again"


def test_a_permalink_with_dot_dot_never_reads_outside(lib: Path, outside: Path) -> None:
    tools = tools_for(lib)
    with pytest.raises(MemoryToolError, match="no memory entity has the permalink '../outside/note'"):
        tools.read("../outside/note")
    tools.index.update(["knowledge/../../outside/note.md"])
    assert tools.index.by_permalink("outside-secret-0001") is None
