"""A file being written while a pass pairs moves ("changed while it was
read") leaves that pair for later; the pass goes on, nothing fails or is lost."""
from __future__ import annotations

import os

import pytest

from breaker_helpers import synced_small
from ohsync.engine.errors import LocalError
from ohsync.engine.sync import folder_moves, moves


def _busy(real, name: str):
    """``hash_file`` that says ``name`` changed while it was read (as a save in progress does)."""
    def hash_file(path):
        if path.name == name:
            raise LocalError(f"{name} changed while it was read; will retry", title="File busy")
        return real(path)
    return hash_file


def test_a_file_moved_while_being_written_is_pushed_and_the_pass_goes_on(devserver, tmp_path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    m = synced_small(devserver, tmp_path, {"/docs/a.txt": b"alpha\n", "/docs/b.txt": b"beta\n"})
    os.rename(m.root / "docs" / "a.txt", m.root / "docs" / "moved.txt")
    monkeypatch.setattr(moves, "hash_file", _busy(moves.hash_file, "moved.txt"))
    report = m.sync()
    assert report.errors == []
    assert devserver.read_file(m.repo_id, "/docs/moved.txt") == b"alpha\n"  # went up as a new file


def test_a_folder_moved_while_a_file_in_it_is_written_does_not_fail_the_pass(devserver, tmp_path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    m = synced_small(devserver, tmp_path, {"/proj/a.txt": b"alpha\n", "/proj/b.txt": b"beta\n"})
    os.rename(m.root / "proj", m.root / "proj2")
    monkeypatch.setattr(folder_moves, "hash_file", _busy(folder_moves.hash_file, "a.txt"))
    report = m.sync()
    assert report.errors == []
    tree = devserver.tree(m.repo_id)
    assert tree["/proj2/a.txt"] == b"alpha\n" and tree["/proj2/b.txt"] == b"beta\n"
