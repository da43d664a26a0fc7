"""One bad path never blocks the rest: files named like the archive folders,
a file in the way of a folder."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from engine_helpers import USER, make_mirror

DOC = "Files/notes/plan.txt"
ORIGINAL = b"line one\nline two\nline three\n"


def _mirror(devserver, tmp_path, extra: dict[str, bytes] | None = None):
    repo = devserver.create_library(USER, "OH-Memory")
    for path, data in {f"/{DOC}": ORIGINAL, "/Files/old.txt": b"old\n", **(extra or {})}.items():
        devserver.put_file(repo, path, data)
    m = make_mirror(devserver, repo, tmp_path)
    assert m.sync().errors == []
    return m


def _conflict(devserver, m) -> None:
    devserver.put_file(m.repo_id, "/" + DOC, ORIGINAL.replace(b"line one", b"line one theirs"))
    m.write(DOC, ORIGINAL.replace(b"line one", b"line one ours"))


def test_a_local_file_named_conflict_does_not_block_conflicts_or_other_paths(devserver, tmp_path) -> None:
    m = _mirror(devserver, tmp_path)
    m.write(".conflict", b"I am a file, not a folder\n")
    assert m.sync().errors == []
    assert devserver.tree(m.repo_id)["/.conflict"] == b"I am a file, not a folder\n"
    _conflict(devserver, m)
    (m.root / "Files" / "old.txt").unlink()  # an unrelated local delete in the same pass
    m.engine.valve.max_files = m.engine.valve.max_percent = 100
    rep = m.sync()
    assert rep.errors == [], rep.errors
    m.sync()  # local deletes are carried by the full scan
    (record,) = m.engine.conflicts()
    assert record.archived.startswith(".conflict_ohsync/Files/notes/plan__")
    tree = devserver.tree(m.repo_id)
    assert tree["/" + record.archived] == ORIGINAL.replace(b"line one", b"line one theirs")
    assert (m.root / record.archived).read_bytes() == tree["/" + record.archived]
    assert "/Files/old.txt" not in tree
    assert tree["/.conflict"] == b"I am a file, not a folder\n"  # the occupying file is left alone
    reasons = dict(m.engine.skipped())
    assert ".conflict_ohsync/" in reasons[".conflict"] and "Rename or move the file .conflict" in reasons[".conflict"]
    (m.root / ".conflict").rename(m.root / "conflict-note.txt")  # the person does as the notice says
    assert m.sync().errors == [] and m.sync().errors == []
    assert "/.conflict" not in devserver.tree(m.repo_id)
    assert ".conflict" not in dict(m.engine.skipped())  # the notice goes with its cause


def test_a_file_named_trash_does_not_block_deletes(devserver, tmp_path) -> None:
    m = _mirror(devserver, tmp_path, {"/.trash": b"not a folder\n"})
    (m.root / "Files" / "old.txt").unlink()
    m.engine.valve.max_files = m.engine.valve.max_percent = 100
    rep = m.sync()
    assert rep.errors == [], rep.errors
    tree = devserver.tree(m.repo_id)
    assert "/Files/old.txt" not in tree
    assert tree["/.trash_ohsync/Files/old.txt"] == b"old\n"
    assert tree["/.trash"] == b"not a folder\n"
    assert ".trash_ohsync/" in dict(m.engine.skipped())[".trash"]
    # both stay on the server: the file in the way and the working trash are not mirrored
    assert m.sync().errors == []
    assert not (m.root / ".trash").exists() and not (m.root / ".trash_ohsync").exists()
    assert devserver.tree(m.repo_id)["/.trash_ohsync/Files/old.txt"] == b"old\n"
