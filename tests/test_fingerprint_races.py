"""A person's save landing right after ohsync put a file in place is never taken for ohsync's own.

The base records the stat fingerprint ``(size, mtime_ns, inode)`` of what
ohsync wrote; later scans and the watcher's echo filter trust a file whose
fingerprint equals its base and never read it.  So that fingerprint must be
the one of the bytes ohsync wrote (taken from the file it wrote, before it
was renamed into place), never a ``stat`` of the path afterwards: a save
between the rename and that ``stat`` would be recorded as ohsync's own and
then never uploaded (the two sides would differ for good).
"""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import pytest

from breaker_helpers import synced_small
from engine_helpers import mirrored, read_tree

from ohsync.engine import local_replace
from ohsync.engine.sync import moves, new_files


def _save_right_after_rename(monkeypatch: pytest.MonkeyPatch, target: str, save) -> list[str]:  # noqa: ANN001
    """Run ``save()`` right after the first rename onto a path ending in ``target``
    (``os.replace``/``os.rename``, or ``engine/local_replace.py``'s exchange and
    no-replace rename, a cold mirror's batch of new files): the person's editor saving in the instant after ohsync's rename."""
    done: list[str] = []
    reals = [(os, "replace", os.replace), (os, "rename", os.rename),
             (local_replace, "exchange", local_replace.exchange), (local_replace, "rename_new", local_replace.rename_new),
             (moves, "rename_new", moves.rename_new), (new_files, "rename_new", new_files.rename_new)]

    def hooked(real):  # noqa: ANN001, ANN202
        def call(src, dst, *args, **kwargs):  # noqa: ANN001, ANN202
            result = real(src, dst, *args, **kwargs)
            if not done and os.fspath(dst).endswith(target):
                done.append(os.fspath(dst))
                for module, name, original in reals:
                    monkeypatch.setattr(module, name, original)
                save()
            return result
        return call

    for module, name, original in reals:
        monkeypatch.setattr(module, name, hooked(original))
    return done


def _append(path, line: bytes) -> None:  # noqa: ANN001
    """An in-place append, as `echo >> file` (same inode, new size and mtime)."""
    with open(path, "ab") as fh:
        fh.write(line)


def _atomic_save(path, data: bytes) -> None:  # noqa: ANN001
    """An editor's atomic save: temp file, rename over (new inode)."""
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _converged(m) -> bool:  # noqa: ANN001
    return read_tree(m.root) == mirrored(m.server.tree(m.repo_id))


@pytest.mark.parametrize("save", ["append", "atomic"])
def test_save_right_after_a_pulled_file_is_renamed_into_place_is_uploaded(devserver, tmp_path, monkeypatch,
                                                                          save: str) -> None:
    m = synced_small(devserver, tmp_path, {"/docs/a.txt": b"base\n"})
    devserver.put_file(m.repo_id, "/docs/a.txt", b"base\nremote line\n")
    path = m.root / "docs" / "a.txt"
    person = (lambda: _append(path, b"local line\n")) if save == "append" else \
        (lambda: _atomic_save(path, b"base\nremote line\nlocal line\n"))
    done = _save_right_after_rename(monkeypatch, "docs/a.txt", person)
    m.sync()
    assert done, "the pull never renamed the downloaded file into place"
    assert path.read_bytes() == b"base\nremote line\nlocal line\n"
    for _ in range(3):          # full scans: the person's save must be seen and uploaded
        m.sync()
    assert devserver.read_file(m.repo_id, "/docs/a.txt") == b"base\nremote line\nlocal line\n"
    assert _converged(m)


@pytest.mark.parametrize("way", ["zip", "parallel"])
def test_save_right_after_a_new_remote_file_lands_is_uploaded(devserver, tmp_path, monkeypatch, way: str) -> None:
    m = synced_small(devserver, tmp_path, {"/docs/d0.txt": b"document\n"})
    pool = ThreadPoolExecutor(4) if way == "parallel" else None
    m.engine.executor = m.engine.ctx.executor = pool
    for i in range(3):   # new files on the server: fetched together (one zip, or several at once)
        devserver.put_file(m.repo_id, f"/docs/r{i}.txt", f"remote new {i}\n".encode())
    path = m.root / "docs" / "r1.txt"
    done = _save_right_after_rename(monkeypatch, "docs/r1.txt", lambda: _append(path, b"local line\n"))
    zips = devserver.request_count("zip-task")
    try:
        m.sync()
    finally:
        if pool is not None:
            pool.shutdown()
    assert done, "the new file was not renamed into place"
    assert (devserver.request_count("zip-task") > zips) == (way == "zip")
    m.engine.executor = m.engine.ctx.executor = None
    for _ in range(3):
        m.sync()
    assert devserver.read_file(m.repo_id, "/docs/r1.txt") == b"remote new 1\nlocal line\n"
    assert _converged(m)


def test_save_right_after_a_remote_move_is_carried_out_locally_is_uploaded(devserver, tmp_path,
                                                                           monkeypatch) -> None:
    m = synced_small(devserver, tmp_path, {"/docs/a.txt": b"base\n"})
    devserver.mkdir(m.repo_id, "/moved")
    devserver.move_path(m.repo_id, "/docs/a.txt", "/moved")
    path = m.root / "moved" / "a.txt"
    done = _save_right_after_rename(monkeypatch, "moved/a.txt", lambda: _append(path, b"local line\n"))
    m.sync()
    assert done, "the remote move was not carried out as a local rename"
    for _ in range(3):
        m.sync()
    assert devserver.read_file(m.repo_id, "/moved/a.txt") == b"base\nlocal line\n"
    assert _converged(m)


def test_save_right_after_a_remote_folder_move_is_carried_out_locally_is_uploaded(devserver, tmp_path,
                                                                                  monkeypatch) -> None:
    m = synced_small(devserver, tmp_path, {"/docs/a.txt": b"base\n", "/docs/b.txt": b"other\n"})
    devserver.mkdir(m.repo_id, "/moved")
    devserver.move_path(m.repo_id, "/docs", "/moved")
    path = m.root / "moved" / "docs" / "a.txt"
    done = _save_right_after_rename(monkeypatch, "moved/docs", lambda: _append(path, b"local line\n"))
    m.sync()
    assert done, "the remote folder move was not carried out as a local rename"
    for _ in range(3):
        m.sync()
    assert devserver.read_file(m.repo_id, "/moved/docs/a.txt") == b"base\nlocal line\n"
    assert _converged(m)


def test_save_while_a_local_folder_move_is_carried_to_the_server_is_uploaded(devserver, tmp_path) -> None:
    m = synced_small(devserver, tmp_path, {"/docs/a.txt": b"base\n", "/docs/b.txt": b"other\n"})
    (m.root / "moved").mkdir()
    os.rename(m.root / "docs", m.root / "moved" / "docs")
    path = m.root / "moved" / "docs" / "a.txt"
    # the person saves while ohsync moves the folder on the server (after it hashed the files)
    devserver.after_request("POST", r"batch-move-item", lambda srv: _append(path, b"local line\n"), count=1)
    m.sync()
    assert path.read_bytes() == b"base\nlocal line\n"
    assert devserver.file_id(m.repo_id, "/docs") is None, "the folder move was not carried to the server"
    for _ in range(3):
        m.sync()
    assert devserver.read_file(m.repo_id, "/moved/docs/a.txt") == b"base\nlocal line\n"
    assert _converged(m)
