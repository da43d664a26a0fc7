"""Breaker: the memory tools' input that is not refused before it is written.

Each of these reached the files (or the daemon's log as a traceback) through
`ohsync mcp` / `ohsync memory` against a running daemon; here they are called
on the tools directly (pure, no server).
"""

from __future__ import annotations

import re
import shutil
import unicodedata
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


def test_write_refuses_a_nul_byte_in_an_observation(tools: MemoryTools) -> None:
    try:
        plan = tools.plan_write("nul obs", [{"category": "k", "text": "v\x00w"}])
    except MemoryToolError:
        return
    assert b"\x00" not in plan.data, "a NUL byte would be written into the memory file"


@pytest.mark.parametrize("kw", [{"title": "a\x00b"}, {"title": "ok", "folder": "notes/\x00"}])
def test_write_with_a_nul_byte_is_a_sentence(tools: MemoryTools, kw: dict) -> None:
    with pytest.raises(MemoryToolError):
        tools.plan_write(kw["title"], OBS, folder=kw.get("folder"))


def test_write_refuses_a_title_the_server_cannot_hold(tools: MemoryTools) -> None:
    with pytest.raises(MemoryToolError):
        tools.plan_write("nul\x01ctl", OBS)


def test_write_refuses_an_absolute_folder(tools: MemoryTools) -> None:
    with pytest.raises(MemoryToolError, match="folder"):
        tools.plan_write("abs", OBS, folder="/etc")


def test_append_with_a_lone_surrogate_is_a_sentence(tools: MemoryTools) -> None:
    entity = tools.entity("comm-style-pref-0e96")
    data = (tools.index.root / entity.path).read_bytes()
    with pytest.raises(MemoryToolError):
        tools.plan_append(entity, data, "tone", "x\udc80y")


def test_write_refuses_a_backslash_folder_saying_why(tools: MemoryTools) -> None:
    with pytest.raises(MemoryToolError, match=r"`folder` holds '\\'") as caught:
        tools.plan_write("bs", OBS, folder="notes\\2026")
    assert "outside the mirror" not in str(caught.value)


def test_write_composes_a_decomposed_title(tools: MemoryTools) -> None:
    """A title in NFD (as macOS input sends it) is written under the composed name the mirror
    and Seafile use, so sync does not rename the file under the write."""
    nfd = unicodedata.normalize("NFD", "Café notes")
    assert nfd != "Café notes"
    plan = tools.plan_write(nfd, OBS)
    assert plan.path == "knowledge/Café notes.md"
    assert plan.result["title"] == "Café notes"
    assert "title: Café notes\n".encode() in plan.data


@pytest.mark.parametrize("field", ["observations[0].context", "observations[0].tags", "relations[0].target",
                                   "tags", "type"])
def test_write_names_the_field_that_holds_a_nul(tools: MemoryTools, field: str) -> None:
    obs = {"category": "k", "text": "v", "context": "c", "tags": ["t"]}
    rel = {"rel": "relates_to", "target": "x"}
    kw: dict = {"tags": ["a"], "type": "note"}
    if field.startswith("observations"):
        key = field.split(".")[1]
        obs[key] = ["t\x00"] if key == "tags" else "c\x00"
    elif field.startswith("relations"):
        rel["target"] = "x\x00"
    else:
        kw[field] = ["a\x00"] if field == "tags" else "no\x00te"
    with pytest.raises(MemoryToolError, match=re.escape(f"`{field}` holds a NUL")):
        tools.plan_write("fields", [obs], relations=[rel], **kw)


def test_append_refuses_a_control_character_but_keeps_tabs(tools: MemoryTools) -> None:
    entity = tools.entity("comm-style-pref-0e96")
    data = (tools.index.root / entity.path).read_bytes()
    with pytest.raises(MemoryToolError, match="`text` holds the control character U\\+0007"):
        tools.plan_append(entity, data, "tone", "bell\x07")
    assert b"a\tb" in tools.plan_append(entity, data, "tone", "a\tb").data


def test_edit_and_trash_refuse_a_nul_or_surrogate(tools: MemoryTools) -> None:
    entity = tools.entity("comm-style-pref-0e96")
    data = (tools.index.root / entity.path).read_bytes()
    with pytest.raises(MemoryToolError, match="`replace` holds a NUL"):
        tools.plan_edit(entity, data, entity.title, "x\x00")
    with pytest.raises(MemoryToolError, match="`find` holds a lone UTF-16 surrogate"):
        tools.plan_edit(entity, data, "\ud800", "x")
    with pytest.raises(MemoryToolError, match="`reason` holds a NUL"):
        tools.plan_trash(entity, data, "old\x00")


def test_reads_with_a_lone_surrogate_are_a_sentence(tools: MemoryTools) -> None:
    with pytest.raises(MemoryToolError, match="`query` holds a lone"):
        tools.search("x\udc80")
    with pytest.raises(MemoryToolError, match="`permalink` holds a lone"):
        tools.entity("x\udc80")
