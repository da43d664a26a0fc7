"""What the sync sends is read from the mirror's own regular file, never through a link.

A link (or a FIFO) renamed over a file between the moment it was checked
(planned, written by a memory tool) and the moment it is read for the
upload is the local file having changed: the push stops with
``LocalChanged`` and the link's target is never read nor sent; a FIFO never
hangs the read.  The same for the large, streamed push, the hashing of the
planner and the copy a conflict's settling keeps in ``/.trash/``.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from breaker_helpers import synced_small
from engine_helpers import USER, make_mirror
from ohsync.engine.local_replace import LocalChanged
from ohsync.engine.localfs import hash_file
from ohsync.engine.merge import settle
from ohsync.engine.nofollow import OutsideMirrorError
from ohsync.engine.transfer import push
from ohsync.engine.transfer_large import LARGE_FILE, push_large

REL = "notes/entity.md"
SECRET = b"OUTSIDE-SECRET\n"


@pytest.fixture
def mirror(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/" + REL: b"first line\n"})
    yield m
    m.state.close()
    m.client.close()


@pytest.fixture
def outside(tmp_path) -> Path:
    path = tmp_path / "outside" / "secret.md"
    path.parent.mkdir()
    path.write_bytes(SECRET)
    return path


def _swap_in_link(path: Path, target: Path) -> None:
    """Rename a link to ``target`` over ``path`` (one atomic step, as racer.py does)."""
    tmp = path.with_name(".linktmp")
    os.symlink(target, tmp)
    os.rename(tmp, path)


def _swap_in_fifo(path: Path) -> None:
    tmp = path.with_name(".fifotmp")
    os.mkfifo(tmp)
    os.rename(tmp, path)


def _within(seconds: float, call, fifo: Path):
    """``call()`` run on a thread; fails (after unblocking a read of ``fifo``) when it hangs."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # lets a reader waiting on it go on
        os.close(fd)
        worker.join(5)
        pytest.fail("reading the local file waited on a FIFO")
    return outcome[0]


def test_a_link_swapped_in_before_the_push_reads_is_never_sent(mirror, devserver, outside) -> None:
    mirror.write(REL, b"first line\nappended\n")
    _swap_in_link(mirror.root / REL, outside)
    with pytest.raises(LocalChanged, match="not read"):
        push(mirror.engine.ctx, REL, mirror.state.get_base(REL))
    assert devserver.read_file(mirror.repo_id, "/" + REL) == b"first line\n"
    assert outside.read_bytes() == SECRET


def test_a_link_in_a_folder_on_the_way_is_never_followed(mirror, devserver, outside) -> None:
    notes = mirror.root / "notes"
    moved = notes.with_name("notes-real")
    os.rename(notes, moved)
    os.symlink(outside.parent, notes)
    (outside.parent / "entity.md").write_bytes(SECRET)
    with pytest.raises(LocalChanged):
        push(mirror.engine.ctx, REL, mirror.state.get_base(REL))
    assert devserver.read_file(mirror.repo_id, "/" + REL) == b"first line\n"


def test_a_fifo_swapped_in_never_hangs_the_push(mirror, devserver) -> None:
    _swap_in_fifo(mirror.root / REL)
    result = _within(5, lambda: push(mirror.engine.ctx, REL, mirror.state.get_base(REL)), mirror.root / REL)
    assert isinstance(result, LocalChanged)
    assert devserver.read_file(mirror.repo_id, "/" + REL) == b"first line\n"


def test_hashing_refuses_links_and_fifos(mirror, outside) -> None:
    _swap_in_link(mirror.root / REL, outside)
    with pytest.raises(OutsideMirrorError):
        hash_file(mirror.root / REL, root=mirror.root)
    with pytest.raises(OutsideMirrorError):
        hash_file(mirror.root / REL)
    os.unlink(mirror.root / REL)
    _swap_in_fifo(mirror.root / REL)
    result = _within(5, lambda: hash_file(mirror.root / REL, root=mirror.root), mirror.root / REL)
    assert isinstance(result, OutsideMirrorError)


def test_a_large_file_replaced_by_a_link_is_never_streamed_up(devserver, tmp_path, outside) -> None:
    rel = "Files/video.bin"
    repo = devserver.create_library(USER, "big")
    original = os.urandom(LARGE_FILE + 1024)
    devserver.put_file(repo, "/" + rel, original)
    m = make_mirror(devserver, repo, tmp_path)
    try:
        assert not m.sync().errors
        outside.write_bytes(SECRET * (LARGE_FILE // len(SECRET) + 10))
        _swap_in_link(m.root / rel, outside)
        with pytest.raises(LocalChanged):
            push_large(m.engine.ctx, rel, m.state.get_base(rel))
        assert devserver.read_file(repo, "/" + rel) == original
    finally:
        m.state.close()
        m.client.close()


def test_the_replaced_live_version_kept_in_the_trash_is_never_a_links_target(devserver, tmp_path, outside,
                                                                               monkeypatch) -> None:
    repo = devserver.create_library(USER, "lib")
    devserver.put_file(repo, "/" + REL, b"a\nb\nc\n")
    m = make_mirror(devserver, repo, tmp_path)
    try:
        assert not m.sync().errors
        m.write(REL, b"a\nmine\nc\n")
        devserver.put_file(repo, "/" + REL, b"a\ntheirs\nc\n")
        assert not m.sync().errors
        record = m.engine.conflicts()[0]
        real, swapped = settle.read_version, []

        def then_swap(ctx, rel, limit=None):
            found = real(ctx, rel, limit)
            if rel == REL and not swapped:
                swapped.append(rel)
                _swap_in_link(m.root / REL, outside)  # right after the live file was looked at
            return found

        monkeypatch.setattr(settle, "read_version", then_swap)
        before = devserver.tree(repo)
        with pytest.raises(settle.ResolveRefused):
            settle.resolve_conflict(m.engine.ctx, record, "other")
        assert devserver.tree(repo) == before and m.engine.conflicts() == [record]
    finally:
        m.state.close()
        m.client.close()


def test_a_socket_or_device_is_refused_as_not_a_file(mirror, tmp_path) -> None:
    import socket

    from ohsync.engine.nofollow import open_regular

    path = mirror.root / REL
    path.unlink()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(os.fspath(path))
    sock.close()
    with pytest.raises(OutsideMirrorError, match="socket, not a regular file"):
        open_regular(mirror.root, REL)
    with pytest.raises(LocalChanged, match="socket"):
        push(mirror.engine.ctx, REL, mirror.state.get_base(REL))


def test_the_plain_local_read_never_waits_on_a_fifo_nor_follows_a_link(tmp_path):
    """What the memory check after a push and the conflict lookups read (``read_bytes_or_none``)."""
    from ohsync.engine.local_lookups import read_bytes_or_none

    (tmp_path / "note.md").write_bytes(b"mine\n")
    (tmp_path / "outside.md").write_bytes(b"OUTSIDE\n")
    (tmp_path / "link.md").symlink_to(tmp_path / "outside.md")
    os.mkfifo(tmp_path / "pipe.md")
    got: dict[str, bytes | None] = {}
    reader = threading.Thread(target=lambda: got.update(pipe=read_bytes_or_none(tmp_path / "pipe.md")), daemon=True)
    reader.start()
    reader.join(5)
    if reader.is_alive():  # unblock the reader so the failure is reported, not a hang
        with open(tmp_path / "pipe.md", "wb"):
            pass
        reader.join(5)
        raise AssertionError("reading a FIFO waited for a writer")
    assert got == {"pipe": None}
    assert read_bytes_or_none(tmp_path / "link.md") is None
    assert read_bytes_or_none(tmp_path / "note.md") == b"mine\n"
    assert read_bytes_or_none(tmp_path / "note.md", limit=2) == b"mi"
    assert read_bytes_or_none(tmp_path / "missing.md") is None
