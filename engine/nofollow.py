"""Mirror paths opened without following symbolic links, checked at open time.

Nothing outside the mirror is read or written through a symbolic link: the
sync skips links (``localfs.scan_tree``, :func:`symlink_on_the_way` for the
planner), and the memory tools open every path through the functions here.
Each folder of a library-relative path is opened relative to the folder
before it (an ``openat``-style walk) with ``O_NOFOLLOW | O_DIRECTORY``, the
file itself with ``O_NOFOLLOW``, folders are created with ``mkdir`` relative
to their parent's descriptor and files are renamed into place the same way.
A link anywhere on the way, or as the file itself, is refused when it is
opened, so swapping a folder for a link between a check and the access
cannot redirect the access out of the mirror.  The mirror root itself is
opened as configured (it may be a link the person chose, e.g. to another
disk).

Refusals are :class:`OutsideMirrorError` naming the library path.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, BinaryIO

from .errors import LocalError
from .ignore import TEMP_PREFIX
from .local_lookups import stat_or_none
from .renames import exchange, rename_new
from .temp_marks import OURS_SUFFIX, mark_ours, unmark

__all__ = ["OutsideMirrorError", "FileChanged", "symlink_on_the_way", "open_regular", "read_file", "entry_stat",
           "write_file", "remove_file", "special_kind", "parent_folder", "open_folder"]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
# O_NONBLOCK: a FIFO planted in the mirror does not hang the open (it is then refused as not a file)
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC


class OutsideMirrorError(LocalError):
    """A path that would leave the mirror: a symbolic link (the file or a
    folder on the way), ``..``, or something that is not a regular file.

    :ivar path: the library-relative path of the offending entry.
    """

    title = "Not followed"
    behaviour = "needs_person"
    needs = "name"


def _parts(rel: str) -> list[str]:
    """The names of a rel path; ``..`` and absolute paths are refused."""
    parts = [p for p in rel.replace("\\", "/").split("/") if p not in ("", ".")]
    if rel.startswith("/") or ".." in parts:
        raise OutsideMirrorError(f"{rel} points outside the mirror folder; ohsync only works inside it",
                                 path=rel)
    if not parts:
        raise OutsideMirrorError("the mirror folder itself is not a file", path=rel)
    return parts


def _link_refusal(rel: str, *, folder: bool) -> OutsideMirrorError:
    kind = "a symbolic link to a folder" if folder else "a symbolic link"
    return OutsideMirrorError(
        f"{rel} is {kind}; ohsync does not follow links out of the mirror (the sync skips it too). "
        "Put the real file or folder there instead of the link to use it", path=rel)


def _is_link(dir_fd: int, name: str) -> bool:
    st = stat_or_none(name, follow=False, dir_fd=dir_fd)
    return st is not None and stat.S_ISLNK(st.st_mode)


def _open_root(root: Path) -> int:
    return os.open(root, os.O_RDONLY | os.O_DIRECTORY | _CLOEXEC)


def _open_folders(root_fd: int, parts: list[str], *, create: bool) -> int:
    """The descriptor of the folder ``parts`` below ``root_fd`` (the caller closes it).

    :raises OutsideMirrorError: a part is a symbolic link.
    :raises FileNotFoundError, NotADirectoryError: a part is missing (and not
        ``create``) or is a file.
    """
    fd = os.dup(root_fd)
    try:
        for i, name in enumerate(parts):
            new = open_folder(fd, name, "/".join(parts[:i + 1]), create=create)
            os.close(fd)
            fd = new
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_folder(dir_fd: int, name: str, rel: str, *, create: bool) -> int:
    """Open (or, with ``create``, make and open) the folder ``name`` in the
    folder ``dir_fd``, never through a link; the caller closes the descriptor.

    :param rel: the path named in a refusal.
    :raises OutsideMirrorError: ``name`` is a symbolic link.
    :raises FileNotFoundError: it is missing (and not ``create``).
    :raises NotADirectoryError: a file (or another non-folder) stands there.
    :raises OSError: as ``open`` and ``mkdir`` (``ENAMETOOLONG``, ``ENOSPC``…).
    """
    try:
        try:
            return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
        except FileNotFoundError:
            if not create:
                raise
            with suppress(FileExistsError):  # made meanwhile (by the sync or another writer): opened below
                os.mkdir(name, 0o777, dir_fd=dir_fd)
            return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK) and _is_link(dir_fd, name):
            raise _link_refusal(rel, folder=True) from None
        raise


@contextmanager
def _parent(root: Path, rel: str, *, create: bool = False) -> Iterator[tuple[int, str]]:
    """``(descriptor of rel's folder, rel's name)``, closed when the block ends."""
    parts = _parts(rel)
    root_fd = _open_root(root)
    try:
        fd = _open_folders(root_fd, parts[:-1], create=create)
    finally:
        os.close(root_fd)
    try:
        yield fd, parts[-1]
    finally:
        os.close(fd)


def symlink_on_the_way(root: Path, rel: str) -> str | None:
    """The rel path of a folder on the way to ``rel`` that is a symbolic link, or None.

    Only the folders are looked at (the entry itself is the scan's); a
    missing folder or one that cannot be opened answers None (nothing is
    there to follow).
    """
    if not rel.strip("/"):
        return None  # the root itself
    try:
        parts = _parts(rel)[:-1]
    except OutsideMirrorError:
        return rel  # ``..``: outside, treated as a link would be
    if not parts:
        return None
    try:
        root_fd = _open_root(root)
    except OSError:
        return None
    try:
        os.close(_open_folders(root_fd, parts, create=False))
    except OutsideMirrorError as exc:
        return exc.path
    except OSError:
        return None
    finally:
        os.close(root_fd)
    return None


def special_kind(mode: int) -> str | None:
    """What an entry of ``mode`` (an ``st_mode``) is when the sync cannot carry it, or None
    for a regular file or a folder: ``symbolic link (not followed)``, ``named pipe (FIFO)``…,
    said as the reason the path is skipped."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISLNK(mode):
        return "symbolic link (not followed)"
    if stat.S_ISFIFO(mode):
        return "named pipe (FIFO), not a regular file"
    if stat.S_ISSOCK(mode):
        return "socket, not a regular file"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device, not a regular file"
    return "not a regular file"


def _not_regular(rel: str, mode: int) -> OutsideMirrorError:
    return OutsideMirrorError(f"{rel}: {special_kind(mode)}; ohsync only reads regular files", path=rel)


def open_regular(root: Path, rel: str) -> BinaryIO:
    """Open the regular file ``rel`` of the mirror at ``root`` for reading, never through a link.

    Every folder below ``root`` and the file itself are opened without
    following links; the open does not block (a FIFO swapped in is refused,
    never waited on) and what was opened is checked with ``fstat``: what the
    caller reads is that very file, whatever is renamed over its name later.

    :returns: the open file (binary, blocking reads; the caller closes it).
    :raises OutsideMirrorError: ``rel`` or a folder on its way is a symbolic
        link, or ``rel`` is not a regular file (a FIFO, a socket, a device).
    :raises IsADirectoryError: ``rel`` is a folder.
    :raises FileNotFoundError, NotADirectoryError: it (or a folder on its way) is missing.
    :raises OSError: as ``open``.
    """
    with _parent(root, rel) as (dfd, name):
        before = stat_or_none(name, follow=False, dir_fd=dfd)
        if before is not None and not stat.S_ISLNK(before.st_mode) and special_kind(before.st_mode) is not None:
            raise _not_regular(rel, before.st_mode)  # a device or socket is not even opened
        try:
            fd = os.open(name, _READ_FLAGS, dir_fd=dfd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK) or _is_link(dfd, name):
                raise _link_refusal(rel, folder=False) from None
            now = stat_or_none(name, follow=False, dir_fd=dfd)
            if now is not None and special_kind(now.st_mode) is not None:  # a socket swapped in (ENXIO)
                raise _not_regular(rel, now.st_mode) from None
            raise
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder", rel)
        if not stat.S_ISREG(mode):
            raise _not_regular(rel, mode)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_file(root: Path, rel: str) -> tuple[bytes, os.stat_result]:
    """The bytes and stat of the regular file ``rel`` in the mirror at ``root``
    (:func:`open_regular`).

    :raises OutsideMirrorError: ``rel`` or a folder on its way is a symbolic
        link, or ``rel`` is not a regular file (a FIFO, a device).
    :raises FileNotFoundError: it does not exist; other ``OSError`` as ``open``.
    """
    with open_regular(root, rel) as fh:
        return fh.read(), os.fstat(fh.fileno())


def entry_stat(root: Path, rel: str) -> os.stat_result | None:
    """The stat of ``rel`` itself (links not followed), or None when it does not exist.

    :raises OutsideMirrorError: ``rel`` or a folder on its way is a symbolic link.
    """
    try:
        with _parent(root, rel) as (dfd, name):
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    if stat.S_ISLNK(st.st_mode):
        raise _link_refusal(rel, folder=False)
    return st


class FileChanged(LocalError):
    """:func:`write_file` with ``expected``: the file was not the version
    expected when it was to be replaced (saved meanwhile); it is left as it is.

    :ivar crossed: the library path of a temp file holding a second save that
        landed over ours in the instant it was live (the caller archives it),
        or None.
    """

    title = "File changed meanwhile"

    def __init__(self, message: str, *, path: str | None = None, crossed: str | None = None) -> None:
        super().__init__(message, path=path)
        self.crossed = crossed


_ANY: Any = object()


def _fingerprint(dfd: int, name: str) -> tuple[int, int, int] | None:
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino) if stat.S_ISREG(st.st_mode) else None


def write_file(root: Path, rel: str, data: bytes, *, make_parents: bool = True,
               expected: tuple[int, int, int] | None = _ANY) -> os.stat_result:
    """Write ``data`` to ``rel`` atomically, creating missing folders without following links.

    A temp file (a name the watcher ignores) in the same folder, fsynced,
    renamed over ``rel`` relative to the folder's descriptor, then the folder
    fsynced.  A rewritten file keeps its mode.

    :param expected: the stat fingerprint ``(size, mtime_ns, inode)`` the
        file must still have (None: no file there) at the instant it is
        replaced: the temp file is *exchanged* with it (:mod:`.renames`) and
        what came away is checked; another version is exchanged back.
        Without it, whatever is there is replaced.
    :returns: the stat of the new file.
    :raises FileChanged: ``expected`` was given and the file is another version.
    :raises OutsideMirrorError: ``rel`` or a folder on its way is a symbolic link.
    :raises OSError: as the file system reports (disk full, read-only…).
    """
    with _parent(root, rel, create=make_parents) as (dfd, name):
        try:
            old = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            old = None
        if old is not None and stat.S_ISLNK(old.st_mode):
            raise _link_refusal(rel, folder=False)
        if expected is not _ANY and _fingerprint(dfd, name) != expected:
            raise FileChanged(f"{rel} was saved meanwhile", path=rel)
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
        for _ in range(100):
            tmp = f"{TEMP_PREFIX}{secrets.token_hex(6)}"
            try:
                fd = os.open(tmp, flags, 0o666, dir_fd=dfd)
                break
            except FileExistsError:
                continue
        else:
            raise FileExistsError(f"no free temp file name beside {rel}")
        try:
            with os.fdopen(fd, "wb") as fh:
                if old is not None:
                    os.fchmod(fh.fileno(), stat.S_IMODE(old.st_mode))
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
                st = os.fstat(fh.fileno())
                ours = (st.st_size, st.st_mtime_ns, st.st_ino)
            if expected is _ANY:
                os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
            else:
                _put_checked(dfd, tmp, name, rel, expected, ours)
        except BaseException as exc:
            # a save kept there, or a version the exchange took away (not ours), is never removed
            if not (isinstance(exc, FileChanged) and exc.crossed) and _still_ours(dfd, tmp):
                with suppress(OSError):
                    os.unlink(tmp, dir_fd=dfd)
                unmark(tmp, dir_fd=dfd)
            raise
        with suppress(OSError):
            os.fsync(dfd)
        return os.stat(name, dir_fd=dfd, follow_symlinks=False)


def _still_ours(dfd: int, tmp: str) -> bool:
    """Whether the temp file ``tmp`` holds only our version: no
    :func:`~.temp_marks.mark_ours` mark, or the mark is still the same file."""
    try:
        mark = os.stat(tmp + OURS_SUFFIX, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return True
    try:
        return os.stat(tmp, dir_fd=dfd, follow_symlinks=False).st_ino == mark.st_ino
    except FileNotFoundError:
        return True


def _put_checked(dfd: int, tmp: str, name: str, rel: str, expected: tuple[int, int, int] | None,
                 ours: tuple[int, int, int]) -> None:
    """Put ``tmp`` at ``name`` if ``name`` is ``expected`` at that instant (see :func:`write_file`)."""
    if expected is None:
        try:
            rename_new(tmp, name, dir_fd=dfd)
        except FileExistsError:
            raise FileChanged(f"{rel} was created meanwhile", path=rel) from None
        return
    mark_ours(tmp, dir_fd=dfd)   # from the exchange on, ``tmp`` may hold a person's only copy: kept after a kill
    try:
        swapped = exchange(tmp, name, dir_fd=dfd)
    except FileNotFoundError:
        raise FileChanged(f"{rel} was removed meanwhile", path=rel) from None
    if not swapped:  # a filesystem that cannot exchange names: the check just before
        if _fingerprint(dfd, name) != expected:
            raise FileChanged(f"{rel} was saved meanwhile", path=rel)
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        unmark(tmp, dir_fd=dfd)
        return
    if _fingerprint(dfd, tmp) == expected:
        os.unlink(tmp, dir_fd=dfd)
        unmark(tmp, dir_fd=dfd)
        return
    folder = rel.rpartition("/")[0]
    kept = f"{folder}/{tmp}" if folder else tmp
    try:
        exchange(tmp, name, dir_fd=dfd)   # the save that landed meanwhile goes live again
    except OSError:
        try:
            rename_new(tmp, name, dir_fd=dfd)   # the name went meanwhile: the save takes it again
        except OSError:
            raise FileChanged(f"{rel} was saved and replaced meanwhile", path=rel, crossed=kept) from None
        raise FileChanged(f"{rel} was saved meanwhile", path=rel) from None
    if _fingerprint(dfd, tmp) == ours:
        raise FileChanged(f"{rel} was saved meanwhile", path=rel)   # ours again: removed by the caller
    raise FileChanged(f"{rel} was saved twice meanwhile", path=rel, crossed=kept)  # mark removed once archived


def remove_file(root: Path, rel: str, *, expected: tuple[int, int, int] | None = _ANY) -> bool:
    """Remove the file ``rel`` (a link there is refused, never removed through).

    :param expected: the stat fingerprint the file must still have: it is
        renamed away to a temp name first and what was taken is checked; another
        version (a save meanwhile) is renamed back.  Without it, whatever is
        there is removed.
    :returns: False when it did not exist.
    :raises FileChanged: ``expected`` was given and the file is another version (it stays).
    :raises OutsideMirrorError: a folder on the way is a symbolic link, or
        ``rel`` itself is one.
    """
    try:
        with _parent(root, rel) as (dfd, name):
            if _is_link(dfd, name):
                raise _link_refusal(rel, folder=False)
            if expected is _ANY:
                os.unlink(name, dir_fd=dfd)
                return True
            if _fingerprint(dfd, name) != expected:
                raise FileChanged(f"{rel} was saved meanwhile; kept", path=rel)
            hold = _empty_temp(dfd, rel)
            mark_ours(hold, dir_fd=dfd)   # from the rename on, ``hold`` may hold a person's only copy
            try:
                os.rename(name, hold, src_dir_fd=dfd, dst_dir_fd=dfd)
            except OSError:
                os.unlink(hold, dir_fd=dfd)
                unmark(hold, dir_fd=dfd)
                raise
            if _fingerprint(dfd, hold) == expected:
                os.unlink(hold, dir_fd=dfd)
                unmark(hold, dir_fd=dfd)
                return True
            folder = rel.rpartition("/")[0]
            try:
                rename_new(hold, name, dir_fd=dfd)
            except FileExistsError:
                raise FileChanged(f"{rel} was saved twice meanwhile", path=rel,
                                  crossed=f"{folder}/{hold}" if folder else hold) from None
            unmark(hold, dir_fd=dfd)
            raise FileChanged(f"{rel} was saved meanwhile; kept", path=rel)
    except (FileNotFoundError, NotADirectoryError):
        return False


def _empty_temp(dfd: int, rel: str) -> str:
    """Create an empty temp file (a name the watcher ignores) in the folder ``dfd``; returns its name."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
    for _ in range(100):
        tmp = f"{TEMP_PREFIX}{secrets.token_hex(6)}"
        try:
            os.close(os.open(tmp, flags, 0o600, dir_fd=dfd))
            return tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temp file name beside {rel}")


@contextmanager
def parent_folder(root: Path, rel: str, *, create: bool = False) -> Iterator[tuple[int, str]]:
    """``(descriptor of rel's folder, rel's name)`` below ``root``, the folders
    opened without following links (made when missing with ``create``); the
    descriptor is closed when the block ends.  For renames and writes relative
    to that folder (``dir_fd=``).

    :raises OutsideMirrorError: a folder on the way is a symbolic link, or ``rel`` has ``..``.
    :raises FileNotFoundError, NotADirectoryError: a folder is missing (without ``create``) or a file.
    """
    with _parent(root, rel, create=create) as (dfd, name):
        yield dfd, name
