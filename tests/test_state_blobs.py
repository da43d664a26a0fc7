"""Base blobs are written without an fsync (``StateStore._put_blob``): after
a power cut a blob may be empty, cut short or zero-filled while the row that
names it (written, maybe synced, by SQLite) says the base has its content.
Every read checks the blob against its sha1, so such a blob is a missing
base (a conflict copy rather than a merge), never a wrong one, and the next
write of the same content repairs it.  The damage is made here by hand, as
the power cut would leave it.
"""
from __future__ import annotations

import pytest

from devserver_fixtures import rid  # noqa: F401 - fixture
from engine_helpers import make_mirror, mirrored, read_tree
from ohsync.engine.ids import sha1_bytes
from ohsync.engine.state import Base, StateStore

CONTENT = b"line one\nline two\nline three\nline four\nline five\nline six\n"


def _damage(path, how: str) -> None:
    data = path.read_bytes()
    path.write_bytes({"empty": b"", "cut": data[: len(data) // 3], "zeros": b"\0" * len(data)}[how])


@pytest.mark.parametrize("how", ["empty", "cut", "zeros"])
def test_a_damaged_blob_is_no_base_content_and_the_same_content_repairs_it(tmp_path, how):
    store = StateStore(tmp_path / "s.db", tmp_path / "blobs")
    base = Base("a.txt", False, sha1_bytes(CONTENT), "f" * 40, len(CONTENT), 1, 2)
    store.set_base(base, CONTENT)
    _damage(tmp_path / "blobs" / base.sha1, how)
    kept = store.get_base("a.txt")
    assert kept is not None and kept.has_blob  # the row still says the content is kept
    assert store.base_content(kept) is None  # read as missing, not as content
    store.set_base(base, CONTENT)  # the same version recorded again (the next sync of it)
    assert store.base_content(kept) == CONTENT
    assert (tmp_path / "blobs" / base.sha1).read_bytes() == CONTENT


@pytest.mark.parametrize("how", ["empty", "cut", "zeros"])
def test_edits_on_both_sides_over_a_damaged_base_blob_keep_every_line(devserver, rid, tmp_path, how):
    devserver.put_file(rid, "/Files/notes.txt", CONTENT)
    mirror = make_mirror(devserver, rid, tmp_path)
    assert mirror.sync().errors == []
    base = mirror.state.get_base("Files/notes.txt")
    assert base is not None and base.has_blob
    _damage(mirror.state.blob_dir / base.sha1, how)
    ours = CONTENT.replace(b"line one", b"line one, edited here")
    theirs = CONTENT.replace(b"line six", b"line six, edited there")
    devserver.put_file(rid, "/Files/notes.txt", theirs)
    mirror.write("Files/notes.txt", ours)
    report = mirror.sync()
    assert report.errors == []
    server = devserver.tree(rid)
    kept = [data for path, data in server.items() if path == "/Files/notes.txt" or path.startswith("/.conflict/")]
    assert any(b"line one, edited here" in data for data in kept)
    assert any(b"line six, edited there" in data for data in kept)
    assert read_tree(mirror.root) == mirrored(server)


def _fsynced_paths(monkeypatch) -> list[str]:
    """Record the path behind every ``os.fsync`` (through /proc/self/fd)."""
    import os

    seen: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        seen.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return seen


def test_a_push_record_blob_is_synced_to_disk_and_a_base_blob_is_not(tmp_path, monkeypatch):
    store = StateStore(tmp_path / "s.db", tmp_path / "blobs")
    seen = _fsynced_paths(monkeypatch)
    base = Base("a.txt", False, sha1_bytes(CONTENT), "f" * 40, len(CONTENT), 1, 2)
    store.set_base(base, CONTENT)
    assert seen == []  # a base can be read again from the server: no fsync per file
    pushed = CONTENT + b"a line we pushed\n"
    sha1 = store.keep_blob(pushed)
    folder = str(tmp_path / "blobs")
    assert seen[0].startswith(folder + "/.tmp-") and folder in seen  # the file before its rename, then the folder
    assert (tmp_path / "blobs" / sha1).read_bytes() == pushed
    seen.clear()
    store.keep_blob(CONTENT)  # already there as a base blob, maybe not on disk yet
    assert seen == [str(tmp_path / "blobs" / base.sha1), folder]
