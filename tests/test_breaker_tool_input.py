"""Breaker: the memory tools' input that is not refused before it is written.

Each of these reached the files (or the daemon's log as a traceback) through
`ohsync mcp` / `ohsync memory` against a running daemon; here they are called
on the tools directly (pure, no server).
"""

from __future__ import annotations

import shutil
from datetime import datetime
from pathlib import Path

import pytest

from ohsync.engine.memory.edit import MemoryToolError
from ohsync.engine.memory.index import MemoryIndex, parse_offset
from ohsync.engine.memory.tools import MemoryTools

SAMPLES = Path(__file__).resolve().parent / "data" / "samples" / "OH-Memory"
TZ = parse_offset("+08:00")
NOW = datetime(2026, 12, 1, 18, 30, 5, tzinfo=TZ)
OBS = [{"category": "k", "text": "v"}]


@pytest.fixture
def tools(tmp_path: Path) -> MemoryTools:
    root = tmp_path / "OH-Memory"
    shutil.copytree(SAMPLES, root)
    index = MemoryIndex(root, TZ)
    index.rebuild()
    return MemoryTools(index, TZ, now=lambda: NOW)


@pytest.mark.xfail(strict=True, reason="bug: memory_append writes a NUL byte into the memory file "
                                       "(the file then counts as binary: two writers' edits no longer merge)")
@pytest.mark.parametrize("field", ["category", "text", "context"])
def test_append_refuses_a_nul_byte(tools: MemoryTools, field: str) -> None:
    entity = tools.entity("comm-style-pref-0e96")
    data = (tools.index.root / entity.path).read_bytes()
    args = {"category": "tone", "text": "short", "context": "asked"}
    args[field] = args[field] + "\x00x"
    try:
        plan = tools.plan_append(entity, data, args["category"], args["text"], args["context"])
    except MemoryToolError:
        return
    assert b"\x00" not in plan.data, "a NUL byte would be written into the memory file"


@pytest.mark.xfail(strict=True, reason="bug: memory_write puts a NUL byte of an observation into the new file")
def test_write_refuses_a_nul_byte_in_an_observation(tools: MemoryTools) -> None:
    try:
        plan = tools.plan_write("nul obs", [{"category": "k", "text": "v\x00w"}])
    except MemoryToolError:
        return
    assert b"\x00" not in plan.data, "a NUL byte would be written into the memory file"


@pytest.mark.xfail(strict=True, reason="bug: a NUL in a title or folder is a bare ValueError "
                                       "('internal error: ValueError' over MCP), not a sentence")
@pytest.mark.parametrize("kw", [{"title": "a\x00b"}, {"title": "ok", "folder": "notes/\x00"}])
def test_write_with_a_nul_byte_is_a_sentence(tools: MemoryTools, kw: dict) -> None:
    with pytest.raises(MemoryToolError):
        tools.plan_write(kw["title"], OBS, folder=kw.get("folder"))


@pytest.mark.xfail(strict=True, reason="bug: a title with a control character is written into the mirror, "
                                       "then cannot be uploaded (the name stays in 'cannot sync')")
def test_write_refuses_a_title_the_server_cannot_hold(tools: MemoryTools) -> None:
    with pytest.raises(MemoryToolError):
        tools.plan_write("nul\x01ctl", OBS)


@pytest.mark.xfail(strict=True, reason="bug: an absolute folder ('/etc') is taken as 'etc' inside the mirror "
                                       "instead of refused like '../x'")
def test_write_refuses_an_absolute_folder(tools: MemoryTools) -> None:
    with pytest.raises(MemoryToolError, match="folder"):
        tools.plan_write("abs", OBS, folder="/etc")


@pytest.mark.xfail(strict=True, reason="bug: a lone surrogate (valid in JSON) is a bare UnicodeEncodeError")
def test_append_with_a_lone_surrogate_is_a_sentence(tools: MemoryTools) -> None:
    entity = tools.entity("comm-style-pref-0e96")
    data = (tools.index.root / entity.path).read_bytes()
    with pytest.raises(MemoryToolError):
        tools.plan_append(entity, data, "tone", "x\udc80y")
