"""Breaker: a person's save that lands while ohsync replaces the same local file.

ohsync replaces a local file in three places: the stamp of a person's edit
of a memory entity (``modified``/``origin``), a download over a local file,
and the merged result written back after a push.  A check of the file's
fingerprint followed, some milliseconds later (a backup copy, a temp file
and its fsync), by a rename over it would lose a save landing in between
(an editor that writes in place, as Obsidian and VS Code do): neither live
nor in ``/.conflict/`` nor even in the backups.  Seen in a run of two
daemons and a Web API writer editing one memory file (the stamp path).
ohsync therefore exchanges the two names and checks the file it took away
(``engine/local_replace.py``).

The save is injected right before that exchange (or a plain rename) onto the
person's file: the last moment any fix can still see it.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from breaker_helpers import missing_lines, synced_small
from ohsync.engine import local_replace

REL = "notes/mem.md"
MEM = (b"---\ntitle: Mem\ntype: note\n---\n\n# Mem\n\n## Observations\n- [seed] seed line\n")


class SaveBeforeReplace:
    """Wraps ``os.replace`` and the exchange of ``engine/local_replace.py``: the first
    rename or exchange onto ``target`` is preceded by an in-place save."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, target: str, line: bytes) -> None:
        self.target, self.line, self.fired = target, line, False
        for module, name in ((os, "replace"), (local_replace, "exchange")):
            monkeypatch.setattr(module, name, self._wrap(getattr(module, name)))

    def _wrap(self, real):
        def call(src, dst, *a, **kw):
            if not self.fired and self.target in (os.fspath(src), os.fspath(dst)):
                self.fired = True
                with open(self.target, "ab") as fh:  # the person's editor saves in place
                    fh.write(self.line)
            return real(src, dst, *a, **kw)
        return call


def _stamping(m) -> None:
    m.engine.options = replace(m.engine.options, stamp_edits=True, stamp_quiet=0.0)
    m.engine.ctx.options = m.engine.options


def test_save_during_the_stamp_of_a_memory_edit_is_kept(devserver, tmp_path, monkeypatch) -> None:
    m = synced_small(devserver, tmp_path, {"/" + REL: MEM})
    _stamping(m)
    m.write(REL, MEM + b"- [a] first edit\n")
    second = b"- [a] saved while ohsync stamped\n"
    hook = SaveBeforeReplace(monkeypatch, str(m.root / REL), second)
    m.sync([REL])
    monkeypatch.undo()
    if not hook.fired:
        raise RuntimeError("no rename onto the memory file was seen: adapt the injection to the new code")
    for _ in range(3):  # let any later pass pick the save up
        m.sync()
    assert missing_lines(m, tmp_path, [b"- [a] first edit", second.strip()]) == [], "a saved line is nowhere"
    assert second.strip() in m.read(REL) and second.strip() in devserver.read_file(m.repo_id, "/" + REL), \
        "the save is only in a backup (or nowhere): lost"


def test_save_during_a_download_over_the_file_is_kept(devserver, tmp_path, monkeypatch) -> None:
    m = synced_small(devserver, tmp_path, {"/notes/plain.txt": b"one\ntwo\n"})
    devserver.put_file(m.repo_id, "/notes/plain.txt", b"one\ntwo\nfrom the phone\n")
    line = b"saved while ohsync downloaded\n"
    hook = SaveBeforeReplace(monkeypatch, str(m.root / "notes/plain.txt"), line)
    m.sync()
    monkeypatch.undo()
    if not hook.fired:
        raise RuntimeError("no rename onto the file was seen: adapt the injection to the new code")
    for _ in range(3):
        m.sync()
    assert missing_lines(m, tmp_path, [line.strip(), b"from the phone"]) == [], "a line is nowhere"
    # both added a line at the end: one version stays live, the other is a conflict copy
    on_server = devserver.read_file(m.repo_id, "/notes/plain.txt")
    assert m.read("notes/plain.txt") == on_server
    conflicts = [v for k, v in devserver.tree(m.repo_id).items() if k.startswith("/.conflict/")]
    for kept in (line.strip(), b"from the phone"):
        assert kept in on_server or any(kept in c for c in conflicts), \
            f"{kept!r} is only in a backup (or nowhere): lost"
