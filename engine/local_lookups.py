"""Local lookups where a missing or unreadable path is an answer, not a failure.

A stat, a read or a folder listing that the caller can do without: the
path is gone, was never there, cannot be read or is not what it should be
(a file where a folder was), and the caller then takes it as absent.  Each
helper swallows every ``OSError`` of its one system call (``ENOENT``,
``ENOTDIR``, ``EACCES``, ``ELOOP``, ``ENAMETOOLONG``, ``EIO`` alike) and
nothing else; a failure that must be told apart by errno, reported or
cleaned up after goes through ``engine/errors.py`` ``local_error`` at its
call site instead.
"""

from __future__ import annotations

import os
import stat

__all__ = ["stat_or_none", "read_bytes_or_none", "scandir_or_none", "fsync_dir_best_effort"]


def stat_or_none(path: str | os.PathLike[str], *, follow: bool, dir_fd: int | None = None) -> os.stat_result | None:
    """The stat of ``path``, or None when it cannot be had.

    :param path: the path (a name relative to ``dir_fd`` when that is given).
    :param follow: True: the stat of what a symbolic link points to (a
        dangling link is None); False: of the link itself (``lstat``).
    :param dir_fd: an open folder descriptor ``path`` is relative to.
    :returns: the stat result; None on any ``OSError`` (missing, a file on
        the way, no permission, a link loop, an I/O error).
    :raises ValueError: a path with a NUL byte (as ``os.stat``).
    """
    try:
        return os.stat(path, dir_fd=dir_fd, follow_symlinks=follow)
    except OSError:
        return None


def read_bytes_or_none(path: str | os.PathLike[str], *, limit: int | None = None) -> bytes | None:
    """The bytes of the regular file at ``path``, or None when it cannot be read.

    The file itself is not followed when it is a link, and the open does not
    block (a FIFO swapped in is never waited on): a link, FIFO, socket or
    device there is None, like a missing file.

    :param limit: read at most this many bytes from the start (None: all).
    :returns: the bytes; None on any ``OSError`` opening or reading it
        (missing, a folder, a link, not a regular file, no permission, an I/O error).
    :raises ValueError: a path with a NUL byte (as ``open``).
    """
    fd = -1
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as fh:
            fd = -1  # the file object closes it from here on
            return fh.read() if limit is None else fh.read(limit)
    except OSError:
        return None
    finally:
        if fd >= 0:
            os.close(fd)


def scandir_or_none(folder: str | os.PathLike[str]) -> list[os.DirEntry[str]] | None:
    """The entries of ``folder`` (``os.scandir``, read to the end), or None when it cannot be listed.

    None, not an empty list, so a caller can tell an empty folder from none.

    :returns: the entries in the order the file system gives; None on any
        ``OSError`` opening or reading the folder (missing, a file, no
        permission, an I/O error).
    """
    try:
        with os.scandir(folder) as it:
            return list(it)
    except OSError:
        return None


def fsync_dir_best_effort(folder: str | os.PathLike[str]) -> None:
    """Make a folder's entries (a rename, a new name) durable: fsync of the folder.

    Best effort: a folder that cannot be opened or synced (some network file
    systems) is left as it is, since the file itself is already synced.

    :raises OSError: only from closing the folder's descriptor.
    """
    try:
        dfd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass  # the file itself is synced already: only its name may be lost in a crash
    finally:
        os.close(dfd)
