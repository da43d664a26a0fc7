"""Marks that tell a later start which temp file may hold a person's only copy.

A temp file (``.ohsync-tmp-*``) normally holds only our version: a killed
process's leftover is removed (:func:`~.localfs.clean_temp_files`).  From an
exchange with a live file, or a rename of a live file onto it, until the
check that follows, it holds what was live instead, perhaps a save that is
nowhere else.  :func:`mark_ours` is called before that step and
:func:`unmark` once the version taken is settled.
"""

from __future__ import annotations

import os
from contextlib import suppress

__all__ = ["OURS_SUFFIX", "mark_ours", "unmark"]

#: the name of a temp file plus this suffix: a hard link to our own version,
#: made before the temp name takes a live version away (see :func:`mark_ours`)
OURS_SUFFIX = "-ours"


def mark_ours(tmp: str | os.PathLike[str], *, dir_fd: int | None = None) -> None:
    """Mark the temp file ``tmp`` before an exchange or a rename over it takes
    a live version away under its name.

    The mark is a hard link to ``tmp`` named ``tmp`` + :data:`OURS_SUFFIX`:
    while both are one inode, ``tmp`` holds only our version; once they
    differ, ``tmp`` holds what was live, perhaps a person's only copy, and a
    later start keeps it (:func:`~.localfs.clean_temp_files`).  Where hard links cannot
    be made, the mark is an empty file (a leftover is then always looked at).
    Remove the mark with :func:`unmark` once the version taken is settled.

    :param dir_fd: the folder's descriptor ``tmp`` is relative to (None: a path).
    :raises OSError: the mark could not be made (nothing is to be taken then).
    """
    mark = os.fspath(tmp) + OURS_SUFFIX
    try:
        os.link(tmp, mark, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError:
        os.close(os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd))


def unmark(tmp: str | os.PathLike[str], *, dir_fd: int | None = None) -> None:
    """Remove :func:`mark_ours`'s mark of ``tmp`` (gone already: nothing to do)."""
    with suppress(FileNotFoundError):
        os.unlink(os.fspath(tmp) + OURS_SUFFIX, dir_fd=dir_fd)
