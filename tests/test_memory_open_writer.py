"""A memory tool's write waits for a program that is saving the file in place."""
from __future__ import annotations

import sys
import threading

import pytest

from breaker_helpers import synced_small
from engine_helpers import mirrored, read_tree
from ohsync.daemon.open_files import WriterCheck
from ohsync.engine.memory.tools import WritePlan
from ohsync.engine.memory.writes import apply_write

BASE = b"# note\n\n## Observations\n- [t] seed\n"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="open files are seen in /proc")
def test_a_memory_append_waits_while_a_program_writes_the_file_in_place(devserver, tmp_path) -> None:
    m = synced_small(devserver, tmp_path, {"/knowledge/a.md": BASE})
    check, seen = WriterCheck(), threading.Event()

    def being_written(p) -> bool:
        busy = check(p)
        if busy:
            seen.set()  # ohsync saw the save in progress
        return busy

    m.engine.options.being_written = being_written
    path = m.root / "knowledge" / "a.md"
    whole = BASE + b"- [p] PERSON-LINE-1 typed in the editor\n- [p] PERSON-LINE-2 typed in the editor\n"
    opened = threading.Event()

    def person() -> None:
        with open(path, "wb") as fh:             # an in-place save: truncate, write half, pause, the rest
            fh.write(whole[:len(BASE) + 20])
            fh.flush()
            opened.set()
            seen.wait(10)  # the rest once ohsync looked at the open file (without the check: 10 s later)
            fh.write(whole[len(BASE) + 20:])

    writer = threading.Thread(target=person)
    writer.start()
    assert opened.wait(5)
    result = apply_write(m.engine, "knowledge/a.md",
                         lambda data: WritePlan("knowledge/a.md", (data or b"") + b"- [a] AGENT-LINE\n", {}))
    writer.join()
    assert result["verified"]
    for _ in range(3):
        m.sync()
    tree = read_tree(m.root)
    assert tree == mirrored(m.server.tree(m.repo_id))
    kept = tree["/knowledge/a.md"] + b"".join(v for k, v in tree.items() if k.startswith("/.conflict/"))
    assert [ln for ln in (b"PERSON-LINE-1", b"PERSON-LINE-2", b"AGENT-LINE") if ln not in kept] == [], tree
