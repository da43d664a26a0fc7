"""Backups: the last-resort copy of a local file ohsync replaces or removes.

A backup goes to ``backup_root/<YYYY-MM-DD>/<library>/<rel path>``; a second
one of the same path on the same day gets ``__HHMMSSffffff`` (then ``-2``,
``-3``…) before the extension, never over an earlier one.

* The file is read through one descriptor opened without following links
  (:func:`~ohsync.engine.nofollow.open_regular`, checked with ``fstat``): a
  link swapped in for it is refused, its target never copied.
* The backup is written folder by folder relative to descriptors opened
  with ``O_NOFOLLOW`` (:func:`~ohsync.engine.nofollow.open_folder`) and
  created with ``O_CREAT | O_EXCL | O_NOFOLLOW``: a link (or a file) planted
  in the backup tree, as a folder or as the name itself, is stepped around
  (the backup takes a time-tagged name beside it), never written through.
  The backup root itself is opened as configured.
* A name longer than the backup disk holds (``NAME_MAX``, usually 255
  bytes; an 85-character Chinese name is 255 bytes with its time tag
  still to come) keeps the start of its stem, cut on a character boundary,
  then ``~`` and 8 hex digits of the whole name's sha1 (two long names
  never meet), the time tag and the extension.  A path that would pass
  ``PATH_MAX`` keeps its last folders only, below ``__deep_<8 hex digits of
  the folder path's sha1>``.
* A backup that cannot be written (its disk full, no permission) is a
  :class:`~ohsync.engine.errors.BackupError` naming the backup folder; no
  half copy is left.  The caller then leaves the file as it is: a local
  file is replaced or removed only after its backup.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
from collections.abc import Callable
from contextlib import suppress
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import BinaryIO, TypeVar

from .errors import BackupError
from .local_limits import limits
from .names import fit_name, split_name
from .nofollow import OutsideMirrorError, open_folder, open_regular

__all__ = ["backup_file", "prune_backups"]

_T = TypeVar("_T")
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
_CHUNK = 1 << 20
#: names tried for one backup (or one folder of it) before giving up
_TRIES = 100
#: a name limit shrunk below this (a file system that refuses every name) is given up on
_MIN_NAME = 48
#: room kept for the time tag when a path is measured against PATH_MAX
_TAG_ROOM = len("__HHMMSSffffff-99")


def backup_file(local_root: Path, rel_path: str, backup_root: Path, library: str, *,
                data: bytes | None = None, source: Path | None = None) -> Path | None:
    """Copy a local file to ``backup_root/<YYYY-MM-DD>/<library>/<rel path>``
    (the module docstring says how names are chosen and links refused).

    Called before the daemon overwrites or deletes a local file.

    :param data: the file's bytes as the caller already read them (without
        following links); then the file is not opened again.
    :param source: where the file's version is now, when not at its path
        (below ``local_root``).
    :returns: the backup path, or None when the file does not exist (or is a folder).
    :raises OutsideMirrorError: the file (or a folder on its way) is a
        symbolic link, or it is not a regular file (a FIFO, a device).
    :raises BackupError: the backup could not be written (nothing is left of it).
    :raises OSError: reading the file failed.
    """
    now = datetime.now(timezone.utc)
    if data is not None:
        return _stored(backup_root, library, rel_path, now, partial(_write_all, data=data), None)
    try:
        if source is None:
            src = open_regular(local_root, rel_path)
        elif source.is_relative_to(local_root):
            src = open_regular(local_root, source.relative_to(local_root).as_posix())
        else:
            src = open_regular(source.parent, source.name)
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    with src:
        return _stored(backup_root, library, rel_path, now, partial(_copy, src), os.fstat(src.fileno()))


class _ReadFailed(Exception):
    """Reading the file to back up failed (its own error, not the backup's)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


def _copy(src: BinaryIO, fd: int) -> None:
    while True:
        try:
            chunk = src.read(_CHUNK)
        except OSError as exc:
            raise _ReadFailed(exc) from exc
        if not chunk:
            return
        _write_all(fd, chunk)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _stored(backup_root: Path, library: str, rel_path: str, now: datetime, fill: Callable[[int], None],
            st: os.stat_result | None) -> Path:
    """Write one backup (``fill`` writes the bytes into the new file's descriptor;
    ``st``: the source's stat, whose mode and times the backup takes)."""
    try:
        return _write_backup(backup_root, library, rel_path, now, fill, st)
    except _ReadFailed as exc:
        raise exc.error from None
    except OSError as exc:
        raise _failed(exc, rel_path, backup_root) from exc


_ADVICE = {
    errno.ENOSPC: "free some space on its disk",
    errno.EDQUOT: "free some of your disk quota there",
    errno.EROFS: "it is on a read-only file system: make it writable",
    errno.EACCES: "make that folder writable for you",
    errno.EPERM: "make that folder writable for you",
    errno.EEXIST: "move away the file that stands where that folder goes",
    errno.ENOTDIR: "move away the file that stands where that folder goes",
}


def _failed(exc: OSError, rel_path: str, backup_root: Path) -> BackupError:
    reason = exc.strerror or str(exc)
    advice = _ADVICE.get(exc.errno or 0, "check that folder")
    return BackupError(
        f"{rel_path}: its backup could not be written in {backup_root} ({reason}); ohsync replaces or removes a "
        f"local file only after backing it up, so {rel_path} is left as it is. To go on, {advice}; ohsync tries "
        "again by itself (`ohsync refresh`: at once)", path=rel_path)


def _write_backup(backup_root: Path, library: str, rel_path: str, now: datetime, fill: Callable[[int], None],
                  st: os.stat_result | None) -> Path:
    backup_root.mkdir(parents=True, exist_ok=True)
    name_max, path_max = limits(backup_root)
    folders, name = _layout(backup_root, library, rel_path, now, name_max, path_max)
    used: list[str] = []
    fd = os.open(backup_root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)  # as configured (a link the person chose)
    try:
        for part in folders:
            # a file or a link standing where a folder goes: a folder beside it
            new, taken = _free_name(part, now, name_max, partial(_enter, fd))
            os.close(fd)
            fd = new
            used.append(taken)
        out, taken = _free_name(name, now, name_max, partial(_create, fd, st))
        try:
            try:
                fill(out)
                if st is not None:
                    os.utime(out, ns=(st.st_atime_ns, st.st_mtime_ns))
                os.fsync(out)
            finally:
                os.close(out)
        except BaseException:
            with suppress(OSError):
                os.unlink(taken, dir_fd=fd)  # no half backup passes for a whole one
            raise
    finally:
        os.close(fd)
    return backup_root.joinpath(*used, taken)


def _enter(dir_fd: int, name: str) -> int | None:
    """The descriptor of the backup folder ``name`` in ``dir_fd`` (made when
    missing), or None when something else stands there."""
    try:
        return open_folder(dir_fd, name, name, create=True)
    except (OutsideMirrorError, NotADirectoryError):
        return None


def _create(dir_fd: int, st: os.stat_result | None, name: str) -> int | None:
    """A new file ``name`` in ``dir_fd`` open for writing (the source's mode),
    or None when the name is taken (a file, a folder, a link)."""
    try:
        fd = os.open(name, _NEW_FILE, 0o666 if st is None else 0o600, dir_fd=dir_fd)
    except FileExistsError:
        return None
    if st is not None:
        try:
            os.fchmod(fd, stat.S_IMODE(st.st_mode))
        except OSError:
            os.close(fd)
            raise
    return fd


def _free_name(name: str, now: datetime, name_max: int, attempt: Callable[[str], _T | None]) -> tuple[_T, str]:
    """The first of ``name``, ``name`` with the time tag, with the tag and
    ``-2``… that ``attempt`` takes (it answers None for a taken name); every
    candidate fits the file system's name limit (:func:`_fit`), which
    shrinks when the disk refuses a name as too long all the same.

    :returns: ``(what attempt returned, the name taken)``.
    """
    limit = name_max
    n = 0
    for _ in range(_TRIES):
        tag = "" if n == 0 else f"__{now:%H%M%S%f}" + (f"-{n}" if n > 1 else "")
        candidate = _fit(name, tag, limit)
        try:
            got = attempt(candidate)
        except OSError as exc:
            if exc.errno != errno.ENAMETOOLONG or limit <= _MIN_NAME:
                raise
            limit = max(_MIN_NAME, min(limit, _size(candidate)) * 3 // 4)  # a disk with a smaller NAME_MAX
            continue
        if got is not None:
            return got, candidate
        n += 1
    raise FileExistsError(errno.EEXIST, f"no free backup name for {name}")


def _size(name: str) -> int:
    return len(name.encode("utf-8", "surrogateescape"))


def _hash8(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogateescape")).hexdigest()[:8]


def _fit(name: str, tag: str, limit: int) -> str:
    """``name`` with ``tag`` before its extension, within ``limit`` UTF-8 bytes:
    too long, the stem is cut on a character boundary and ``~`` and 8 hex
    digits of the whole name's sha1 follow it."""
    stem, ext = split_name(name)
    if _size(ext) > limit // 4:  # an "extension" as long as a name is part of the stem
        stem, ext = name, ""
    whole = stem + tag + ext
    if _size(whole) <= limit:
        return whole
    return fit_name(stem, f"~{_hash8(name)}{tag}{ext}", limit=limit)


def _layout(backup_root: Path, library: str, rel_path: str, now: datetime, name_max: int,
            path_max: int) -> tuple[list[str], str]:
    """``(folders below backup_root, file name)`` of a backup: the path's last
    folders only when the whole would pass ``PATH_MAX``."""
    parts = [p for p in rel_path.split("/") if p not in ("", ".")]
    if not parts or ".." in parts:
        raise OutsideMirrorError(f"{rel_path} points outside the mirror folder; it is not backed up", path=rel_path)
    *dirs, name = parts
    head = [now.strftime("%Y-%m-%d"), *(p for p in library.split("/") if p not in ("", ".", ".."))]
    root_size = len(os.fsencode(os.path.abspath(backup_root)))
    tail = min(name_max, _size(name) + _TAG_ROOM)

    def size(folders: list[str]) -> int:
        return root_size + sum(min(name_max, _size(p)) + 1 for p in folders) + 1 + tail

    if size(head + dirs) < path_max:
        return head + dirs, name
    marker = f"__deep_{_hash8('/'.join(dirs))}"
    while dirs and size([*head, marker, *dirs]) >= path_max:
        dirs.pop(0)
    return [*head, marker, *dirs], name


def prune_backups(backup_root: Path, keep_days: int, today: datetime | None = None) -> int:
    """Delete dated backup folders older than ``keep_days`` days.

    :returns: how many day folders were removed.
    """
    if not backup_root.is_dir():
        return 0
    today = today or datetime.now(timezone.utc)
    keep_days = max(1, keep_days)  # today's backups are never pruned
    removed = 0
    for day in backup_root.iterdir():
        if len(day.name) != 10 and day.name[10:12] != "__":
            continue  # not ours (``<day>__<time>``: the day's folder where a file stood)
        try:
            stamp = datetime.strptime(day.name[:10], "%Y-%m-%d").replace(tzinfo=timezone.utc)
        except ValueError:
            continue  # not ours
        if (today - stamp).days > keep_days:
            shutil.rmtree(day, ignore_errors=True)
            removed += 1
    return removed
