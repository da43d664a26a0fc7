"""A synced file replaced here by a symbolic link, a FIFO or a socket is skipped, never deleted.

Such an entry is not the person deleting the file: the server keeps its copy
(nothing goes to ``/.trash/``), nothing is downloaded over the entry, the
path is listed as skipped with what it is, and once a regular file is back
the path syncs as usual.  The same for a file in ``/.conflict/`` (replacing
the copy by a link does not settle the conflict).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from engine_helpers import USER, make_mirror

REL = "knowledge/z3.md"


@pytest.fixture
def mirror(devserver, tmp_path):
    repo = devserver.create_library(USER, "lib")
    devserver.put_file(repo, "/" + REL, b"z3 facts\n")
    devserver.put_file(repo, "/knowledge/other.md", b"other\n")
    m = make_mirror(devserver, repo, tmp_path)
    assert not m.sync().errors
    yield m
    m.state.close()
    m.client.close()


def _link(path: Path, tmp_path: Path) -> str:
    outside = tmp_path / "outside" / path.name
    outside.parent.mkdir(exist_ok=True)
    outside.write_bytes(path.read_bytes())
    path.unlink()
    os.symlink(outside, path)
    return "symbolic link (not followed)"


def _fifo(path: Path, tmp_path: Path) -> str:
    path.unlink()
    os.mkfifo(path)
    return "named pipe (FIFO), not a regular file"


def _socket(path: Path, tmp_path: Path) -> str:
    path.unlink()
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(os.fspath(path))
    sock.close()
    return "socket, not a regular file"


def _trash(devserver, repo: str) -> list[str]:
    return [p for p in devserver.tree(repo) if p.startswith("/.trash")]


@pytest.mark.parametrize("replace", [_link, _fifo, _socket], ids=["link", "fifo", "socket"])
@pytest.mark.parametrize("scan", ["full", "watched"])
def test_a_file_replaced_by_a_special_entry_is_skipped_not_deleted(mirror, devserver, tmp_path, replace, scan):
    repo = mirror.repo_id
    reason = replace(mirror.root / REL, tmp_path)
    report = mirror.sync() if scan == "full" else mirror.sync([REL])
    assert report.deleted_remote == [] and report.errors == []
    assert devserver.read_file(repo, "/" + REL) == b"z3 facts\n" and _trash(devserver, repo) == []
    assert dict(mirror.engine.skipped())[REL] == reason
    assert mirror.state.get_base(REL) is not None
    # a change on the server meanwhile is not downloaded over it either
    devserver.put_file(repo, "/" + REL, b"z3 facts\nfrom the server\n")
    mirror.engine.sync(None if scan == "full" else [], check_remote=True)
    assert not os.path.isfile(mirror.root / REL) or os.path.islink(mirror.root / REL)
    # a regular file again: it syncs as any edit (merged with the server's line)
    os.unlink(mirror.root / REL)
    mirror.write(REL, b"z3 facts\nmine\n")
    report = mirror.sync() if scan == "full" else mirror.sync([REL])
    assert report.errors == [] and REL not in dict(mirror.engine.skipped())
    assert devserver.read_file(repo, "/" + REL) == mirror.read(REL) and b"mine" in mirror.read(REL)
    kept = [devserver.read_file(repo, "/" + c.archived) for c in mirror.engine.conflicts()]
    assert any(b"from the server" in data for data in [mirror.read(REL), *kept])
    assert _trash(devserver, repo) == []


def test_a_conflict_copy_replaced_by_a_link_keeps_the_conflict(mirror, devserver, tmp_path):
    repo = mirror.repo_id
    mirror.write(REL, b"z3 facts\nmine\n")
    devserver.put_file(repo, "/" + REL, b"z3 theirs\n")
    assert not mirror.sync().errors
    [record] = mirror.engine.conflicts()
    kept = devserver.read_file(repo, "/" + record.archived)
    _link(mirror.root / record.archived, tmp_path)
    report = mirror.sync()
    assert report.deleted_remote == [] and report.errors == []
    assert devserver.read_file(repo, "/" + record.archived) == kept and _trash(devserver, repo) == []
    assert mirror.engine.conflicts() == [record]
    assert dict(mirror.engine.skipped())[record.archived] == "symbolic link (not followed)"


def test_a_new_fifo_is_listed_as_skipped(mirror, devserver):
    os.mkfifo(mirror.root / "knowledge" / "pipe.md")
    report = mirror.sync()
    assert report.errors == []
    assert dict(mirror.engine.skipped())["knowledge/pipe.md"] == "named pipe (FIFO), not a regular file"
    assert "/knowledge/pipe.md" not in devserver.tree(mirror.repo_id)
