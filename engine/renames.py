"""Two renames POSIX ``rename`` cannot do: exchange two names, and rename
without replacing.

* :func:`exchange` swaps two names in one step (Linux
  ``renameat2(RENAME_EXCHANGE)``, macOS ``renameatx_np(RENAME_SWAP)``): what
  was at the target is afterwards under the other name, exactly as it was at
  that instant, so it can be checked *after* the rename instead of before it
  (``engine/local_replace.py``).
* :func:`rename_new` fails when the target exists (``RENAME_NOREPLACE`` /
  ``RENAME_EXCL``, else a hard link and an unlink, else a check and a rename).

Both take optional folder descriptors (``*at`` style, as ``engine/nofollow.py``
walks the mirror).  On a system or filesystem without the call, ``exchange``
returns False and moves nothing.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from collections.abc import Callable

__all__ = ["exchange", "rename_new"]

_AT_FDCWD = -100
_RENAME_NOREPLACE, _RENAME_EXCHANGE = 1, 2          # linux/fs.h
_RENAME_SWAP, _RENAME_EXCL = 0x2, 0x4               # macOS sys/stdio.h
#: errno values meaning "this system or filesystem cannot do that rename"
_UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP})

PathArg = str | os.PathLike[str]


def _libc_rename() -> Callable[..., int] | None:
    """``renameat2`` (Linux, glibc 2.28+) or ``renameatx_np`` (macOS 10.12+), or None."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    fn: Callable[..., int] | None = getattr(libc, "renameatx_np" if sys.platform == "darwin" else "renameat2", None)
    if fn is not None:
        fn.restype = ctypes.c_int  # type: ignore[attr-defined]
    return fn


_RENAME = _libc_rename()


def _rename_flags(src: PathArg, dst: PathArg, flag: int, src_dir_fd: int | None, dst_dir_fd: int | None) -> bool:
    """One ``renameat2``-style call; False when the system or filesystem cannot do it.

    :raises OSError: any other failure (the source gone, the target taken, …).
    """
    fn = _RENAME
    if fn is None:
        return False
    sfd = _AT_FDCWD if src_dir_fd is None else src_dir_fd
    dfd = _AT_FDCWD if dst_dir_fd is None else dst_dir_fd
    rc = fn(ctypes.c_int(sfd), os.fsencode(src), ctypes.c_int(dfd), os.fsencode(dst), ctypes.c_uint(flag))
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in _UNSUPPORTED:
        return False
    raise OSError(err, os.strerror(err), os.fspath(src), None, os.fspath(dst))


def exchange(a: PathArg, b: PathArg, *, dir_fd: int | None = None) -> bool:
    """Swap the names ``a`` and ``b`` atomically (both must exist, on one filesystem).

    :param dir_fd: the folder both names are relative to (None: the working folder).
    :returns: False when the system or filesystem cannot (nothing moved).
    :raises OSError: e.g. ``FileNotFoundError`` when one of them is gone.
    """
    return _rename_flags(a, b, _RENAME_SWAP if sys.platform == "darwin" else _RENAME_EXCHANGE, dir_fd, dir_fd)


def rename_new(src: PathArg, dst: PathArg, *, dir_fd: int | None = None, src_dir_fd: int | None = None) -> None:
    """Rename ``src`` to ``dst`` only if nothing is at ``dst`` (never replacing).

    :param dir_fd: the folder both names are relative to (None: the working folder).
    :param src_dir_fd: the folder ``src`` is relative to, where it is another one
        (default: ``dir_fd``).
    :raises FileExistsError: ``dst`` is taken.
    :raises OSError: other failures (``EXDEV``: two filesystems).
    """
    sfd = dir_fd if src_dir_fd is None else src_dir_fd
    if _rename_flags(src, dst, _RENAME_EXCL if sys.platform == "darwin" else _RENAME_NOREPLACE, sfd, dir_fd):
        return
    try:
        os.link(src, dst, src_dir_fd=sfd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in _UNSUPPORTED | {errno.EPERM, errno.EMLINK, errno.EXDEV}:
            raise
        try:  # a filesystem without hard links: the check and the rename are two steps
            os.stat(dst, dir_fd=dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            os.rename(src, dst, src_dir_fd=sfd, dst_dir_fd=dir_fd)
            return
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), os.fspath(dst)) from None
    os.unlink(src, dir_fd=sfd)
