"""engine/local_lookups.py: a missing or unreadable path is None (or nothing done),
a present one its value, and what is not an OSError is raised."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from ohsync.engine import local_lookups
from ohsync.engine.local_lookups import fsync_dir_best_effort, read_bytes_or_none, scandir_or_none, stat_or_none


def _refusing(err: int):
    def refuse(*_a, **_kw):
        raise OSError(err, os.strerror(err))
    return refuse


# -- stat_or_none ------------------------------------------------------------------------

def test_stat_of_a_present_file_is_its_stat(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_bytes(b"12345")
    for follow in (True, False):
        st = stat_or_none(f, follow=follow)
        assert st is not None and stat.S_ISREG(st.st_mode)
        assert (st.st_size, st.st_ino) == (5, os.stat(f).st_ino)


def test_stat_of_a_missing_path_is_none(tmp_path: Path) -> None:
    assert stat_or_none(tmp_path / "gone", follow=True) is None
    assert stat_or_none(tmp_path / "gone", follow=False) is None


def test_stat_under_a_file_is_none(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    assert stat_or_none(tmp_path / "f" / "child", follow=False) is None  # ENOTDIR


def test_a_dangling_link_is_none_followed_and_the_link_not_followed(tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    assert stat_or_none(link, follow=True) is None
    st = stat_or_none(link, follow=False)
    assert st is not None and stat.S_ISLNK(st.st_mode)


def test_a_link_to_a_file_followed_is_the_file(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.write_bytes(b"abc")
    (tmp_path / "link").symlink_to(target)
    st = stat_or_none(tmp_path / "link", follow=True)
    assert st is not None and stat.S_ISREG(st.st_mode) and st.st_ino == os.stat(target).st_ino


def test_a_link_loop_is_none_followed(tmp_path: Path) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert stat_or_none(tmp_path / "a", follow=True) is None  # ELOOP
    assert stat_or_none(tmp_path / "a", follow=False) is not None


def test_stat_relative_to_a_folder_descriptor(tmp_path: Path) -> None:
    (tmp_path / "here").write_bytes(b"1")
    (tmp_path / "link").symlink_to("here")
    dfd = os.open(tmp_path, os.O_RDONLY)
    try:
        st = stat_or_none("here", follow=False, dir_fd=dfd)
        assert st is not None and stat.S_ISREG(st.st_mode)
        link = stat_or_none("link", follow=False, dir_fd=dfd)
        assert link is not None and stat.S_ISLNK(link.st_mode)
        assert stat_or_none("gone", follow=False, dir_fd=dfd) is None
    finally:
        os.close(dfd)


def test_stat_refused_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "f").write_bytes(b"x")
    monkeypatch.setattr(local_lookups.os, "stat", _refusing(errno.EACCES))  # the tests run as root
    assert stat_or_none(tmp_path / "f", follow=False) is None


def test_stat_of_a_name_with_a_nul_byte_is_raised(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        stat_or_none(f"{tmp_path}/a\0b", follow=False)


# -- read_bytes_or_none ------------------------------------------------------------------

def test_read_of_a_present_file_is_its_bytes(tmp_path: Path) -> None:
    f = tmp_path / "a.bin"
    f.write_bytes(b"hello world")
    assert read_bytes_or_none(f) == b"hello world"
    assert read_bytes_or_none(str(f)) == b"hello world"


def test_read_with_a_limit_is_the_head(tmp_path: Path) -> None:
    f = tmp_path / "a.bin"
    f.write_bytes(b"hello world")
    assert read_bytes_or_none(f, limit=5) == b"hello"
    assert read_bytes_or_none(f, limit=100) == b"hello world"
    assert read_bytes_or_none(f, limit=0) == b""


def test_read_of_an_empty_file_is_empty_not_none(tmp_path: Path) -> None:
    (tmp_path / "empty").write_bytes(b"")
    assert read_bytes_or_none(tmp_path / "empty") == b""


def test_read_of_a_missing_file_a_folder_or_a_dangling_link_is_none(tmp_path: Path) -> None:
    (tmp_path / "dir").mkdir()
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert read_bytes_or_none(tmp_path / "gone") is None
    assert read_bytes_or_none(tmp_path / "dir") is None  # EISDIR
    assert read_bytes_or_none(tmp_path / "dangling") is None


def test_read_does_not_follow_a_link(tmp_path: Path) -> None:
    (tmp_path / "target").write_bytes(b"through the link")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    assert read_bytes_or_none(tmp_path / "link") is None
    assert read_bytes_or_none(tmp_path / "target") == b"through the link"


def test_read_refused_or_failing_midway_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"x")

    real_fdopen = os.fdopen

    class Failing:
        def __init__(self, fd: int, *_a: object) -> None:
            self.fh = real_fdopen(fd, "rb")
        def __enter__(self) -> Failing: return self
        def __exit__(self, *_a: object) -> None: self.fh.close()
        def read(self, *_a: object) -> bytes: raise OSError(errno.EIO, "I/O error")

    with monkeypatch.context() as patch:
        patch.setattr(local_lookups.os, "open", _refusing(errno.EACCES))
        assert read_bytes_or_none(f) is None
    with monkeypatch.context() as patch:
        patch.setattr(local_lookups.os, "fdopen", Failing)
        assert read_bytes_or_none(f) is None
    assert read_bytes_or_none(f) == b"x"


def test_read_of_a_name_with_a_nul_byte_is_raised(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        read_bytes_or_none(f"{tmp_path}/a\0b")


# -- scandir_or_none ---------------------------------------------------------------------

def test_scandir_of_a_folder_lists_its_entries(tmp_path: Path) -> None:
    (tmp_path / "a").write_bytes(b"1")
    (tmp_path / "sub").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    entries = scandir_or_none(tmp_path)
    assert entries is not None
    assert sorted(e.name for e in entries) == ["a", "link", "sub"]
    assert {e.name: e.is_dir(follow_symlinks=False) for e in entries} == {"a": False, "link": False, "sub": True}


def test_scandir_of_an_empty_folder_is_empty_not_none(tmp_path: Path) -> None:
    assert scandir_or_none(tmp_path) == []


def test_scandir_of_a_missing_path_or_a_file_is_none(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    assert scandir_or_none(tmp_path / "gone") is None
    assert scandir_or_none(tmp_path / "f") is None  # ENOTDIR


def test_scandir_refused_is_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_lookups.os, "scandir", _refusing(errno.EACCES))
    assert scandir_or_none(tmp_path) is None


# -- fsync_dir_best_effort ---------------------------------------------------------------

def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_fsync_dir_syncs_the_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_ino)
        real_fsync(fd)

    monkeypatch.setattr(local_lookups.os, "fsync", fsync)
    before = _open_fds()
    fsync_dir_best_effort(tmp_path)
    assert synced == [os.stat(tmp_path).st_ino]
    assert _open_fds() == before


def test_fsync_dir_of_a_missing_folder_does_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    monkeypatch.setattr(local_lookups.os, "fsync", synced.append)
    assert fsync_dir_best_effort(tmp_path / "gone") is None
    assert synced == []


def test_a_failing_fsync_is_swallowed_and_the_folder_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_lookups.os, "fsync", _refusing(errno.EINVAL))  # some network file systems
    before = _open_fds()
    fsync_dir_best_effort(tmp_path)
    assert _open_fds() == before


def test_a_failing_close_is_raised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real_close = os.close

    def close(fd: int) -> None:
        real_close(fd)
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(local_lookups.os, "close", close)
    with pytest.raises(OSError) as raised:
        fsync_dir_best_effort(tmp_path)
    assert raised.value.errno == errno.EIO
