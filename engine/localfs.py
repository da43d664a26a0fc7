"""The local side: scanning the mirror, atomic writes (backups: :mod:`.backups`).

A scan compares each file's stat fingerprint ``(size, mtime_ns, inode)``
with its base; only files whose fingerprint moved are hashed.  Writes go to
a temp file in the same folder (a name the watcher and the scan ignore),
are fsynced and renamed over the target, so a crash never leaves a half
file under a real name.
"""

from __future__ import annotations

import os
import secrets
import stat
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from .errors import LocalError, MirrorMissingError, local_error
from .ids import file_hashes
from .ignore import TEMP_PREFIX, IgnoreRules
from .local_lookups import fsync_dir_best_effort, scandir_or_none, stat_or_none
from .nofollow import open_regular, special_kind
from .paths import name_problem, normalize_rel, to_local
from .temp_marks import OURS_SUFFIX

__all__ = ["LocalFile", "Fingerprint", "stat_fingerprint", "scan_tree", "hash_file",
           "atomic_write", "fill_temp", "temp_beside", "new_temp", 
           "TakenTemp", "clean_temp_files",
           "check_root", "local_errors",
           "find_decomposed"]

Fingerprint = tuple[int, int, int]


@dataclass(frozen=True)
class LocalFile:
    """A file or folder found by a scan.

    :ivar path: rel path. ``fingerprint``: ``(size, mtime_ns, inode)``.
    """

    path: str
    is_dir: bool
    fingerprint: Fingerprint = (0, 0, 0)


def stat_fingerprint(st: os.stat_result) -> Fingerprint:
    """``(size_bytes, mtime_ns, inode)`` of a stat result."""
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def check_root(local_root: Path, marker_expected: bool) -> None:
    """Refuse to sync a mirror root that is missing or not ours.

    Once a mirror has been synced its root must still exist and be a
    folder: an unmounted disk shows up as a missing mount point, and
    propagating that as "everything deleted" would empty the library.  A
    mirror never synced before gets its root created.

    :param marker_expected: the mirror was synced before (state has bases).
    :raises MirrorMissingError: the root is missing or not a folder.
    """
    if not local_root.is_dir():
        if marker_expected:
            raise MirrorMissingError(
                f"The mirror folder {local_root} is missing. Syncing is stopped so nothing is "
                "deleted on the server; reconnect the drive or restore the folder, then run "
                "`ohsync refresh` (an empty folder made again: `ohsync resync` downloads the files).")
        try:
            local_root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise MirrorMissingError(f"Cannot create the mirror folder {local_root}: "
                                     f"{local_error(exc, what='creating it').message}") from exc


def scan_tree(local_root: Path, ignore: IgnoreRules) -> tuple[dict[str, LocalFile], list[tuple[str, str]]]:
    """Walk the mirror without following symlinks.

    :returns: ``(entries by rel path, skipped (rel path, reason))``; ignored
        paths appear in neither.  Links, FIFOs, sockets and devices are
        skipped (:func:`~ohsync.engine.nofollow.special_kind` says why).
    """
    found: dict[str, LocalFile] = {}
    skipped: list[tuple[str, str]] = []
    stack = [("", local_root)]
    while stack:
        rel_dir, abs_dir = stack.pop()
        try:
            it = list(os.scandir(abs_dir))
        except OSError as exc:
            skipped.append((rel_dir or ".", f"cannot read folder: {exc.strerror}"))
            continue
        names = {entry.name for entry in it}
        for entry in it:
            rel = normalize_rel(f"{rel_dir}/{entry.name}" if rel_dir else entry.name)
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if ignore.match(rel, is_dir):
                continue
            if is_link:
                skipped.append((rel, "symbolic link (not followed)"))
                continue
            problem = name_problem(rel)
            path = entry.path
            if problem is None and unicodedata.normalize("NFC", entry.name) != entry.name:
                path, problem = _compose_name(abs_dir, entry.name, names)
            if problem:
                skipped.append((rel, problem))
                continue
            if is_dir:
                found[rel] = LocalFile(rel, True)
                stack.append((rel, Path(path)))
            else:
                st = stat_or_none(path, follow=False)
                if st is None:
                    continue  # gone since the listing
                kind = special_kind(st.st_mode)
                if kind is not None:  # a FIFO, a socket, a device: nothing to read (and never waited on)
                    skipped.append((rel, kind))
                elif stat.S_ISREG(st.st_mode):
                    found[rel] = LocalFile(rel, False, stat_fingerprint(st))
    return found, skipped


_NFD_TWIN = ("the name is in decomposed Unicode (NFD, as macOS writes it) and a file with the composed "
             "name (NFC, as Seafile stores names) is beside it; rename one of them to sync it")


def _compose_name(folder: str | os.PathLike[str], name: str, siblings: set[str]) -> tuple[str, str | None]:
    """Give a decomposed (NFD) name its composed (NFC) form on disk.

    Seafile stores names composed; the same name in two forms would become a
    twin.  The rename keeps the content and the name as it reads; it is not
    done when the composed name is taken (then the NFD one is skipped).

    :returns: ``(path now, problem or None)``.
    """
    composed = unicodedata.normalize("NFC", name)
    old = os.path.join(folder, name)
    if composed in siblings:
        return old, _NFD_TWIN
    new = os.path.join(folder, composed)
    try:
        os.rename(old, new)
    except OSError as exc:
        return old, f"the name is in decomposed Unicode (NFD) and renaming it to the composed form failed: " \
                    f"{exc.strerror}"
    siblings.add(composed)
    return new, None


def find_decomposed(local_root: Path, rel_path: str) -> bool:
    """For a rel path (NFC) that does not exist here: rename a same-named
    decomposed (NFD) file or folder beside it to it.  Returns True when renamed."""
    if rel_path.isascii():
        return False
    target = to_local(local_root, rel_path)
    entries = scandir_or_none(target.parent)
    if entries is None:
        return False
    siblings = {entry.name for entry in entries}
    for name in siblings:
        if name != target.name and unicodedata.normalize("NFC", name) == target.name:
            _, problem = _compose_name(target.parent, name, siblings)
            return problem is None
    return False


def hash_file(path: Path, *, root: Path | None = None) -> tuple[str, str, int, Fingerprint]:
    """``(sha1, seafile_file_id, size, fingerprint)`` of a local file.

    The file is opened without following links
    (:func:`~ohsync.engine.nofollow.open_regular`) and without waiting on a
    FIFO: with ``root`` (the mirror root), in every folder below ``root``;
    without it, the file itself.  The fingerprint is of the very file read,
    taken before and after hashing; if they differ the file is being written
    and :class:`LocalError` is raised so the caller retries later.

    :raises OutsideMirrorError: it is a symbolic link (or a folder on the
        way below ``root`` is), or not a regular file.
    :raises LocalError: it changed while it was read.
    :raises OSError: it is missing or cannot be read.
    """
    if root is None:
        root, rel = path.parent, path.name
    else:
        rel = path.relative_to(root).as_posix()
    with open_regular(root, rel) as fh:
        before = stat_fingerprint(os.fstat(fh.fileno()))
        sha1, fid, size = file_hashes(fh)
        after = stat_fingerprint(os.fstat(fh.fileno()))
    if before != after:
        raise LocalError(f"{path.name} changed while it was read; will retry", title="File busy")
    return sha1, fid, size, after


def new_temp(folder: Path) -> Path:
    """Create an empty temp file in ``folder`` (a name the watcher and the
    scan ignore) and return its path; a rename onto it replaces it."""
    fd, path = _new_temp(folder)
    os.close(fd)
    return path


def _new_temp(folder: Path) -> tuple[int, Path]:
    """Create a new temp file in ``folder`` (a name the watcher ignores) with
    the mode a new file gets there: 0666 under the person's umask (and the
    folder's default ACL), applied by the kernel, so the umask is never read
    or changed here.

    :returns: ``(open read-write file descriptor, path)``.
    """
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    for _ in range(100):
        path = folder / f"{TEMP_PREFIX}{secrets.token_hex(6)}"
        try:
            return os.open(path, flags, 0o666), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temp file name in {folder}")


@contextmanager
def temp_beside(target: Path, *, make_parents: bool = True) -> Iterator[tuple[BinaryIO, Path]]:
    """A temp file in ``target``'s folder, named so the watcher ignores it.

    Yields ``(open binary file, temp path)``.  The file is fsynced and
    closed when the block ends; if the block raises, the temp file is
    removed.  The caller renames it over ``target`` (``os.replace``) inside
    the block or after it.

    :param make_parents: create missing folders; False raises
        ``FileNotFoundError`` instead (a folder renamed away meanwhile is not
        created again under its old name).
    """
    if make_parents:
        target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _new_temp(target.parent)
    try:
        # a rewritten file keeps its mode (a private file stays private); a
        # new one keeps the usual mode it was created with
        with suppress(OSError):
            os.fchmod(fd, stat.S_IMODE(os.stat(target).st_mode))
        with os.fdopen(fd, "w+b") as fh:
            yield fh, tmp
            if not fh.closed:
                fh.flush()
                os.fsync(fh.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def fill_temp(target: Path, data: bytes, mtime: float | None = None) -> tuple[Path, Fingerprint]:
    """Write ``data`` into a new temp file beside ``target``, ready to be renamed over it.

    The temp file (see :func:`temp_beside`: folders created, the target's
    mode kept) is written, fsynced, given ``mtime`` (seconds; None or 0:
    now) and closed.  The caller renames it into place and removes it when
    that fails.

    :returns: ``(temp path, the temp file's fingerprint)``; the fingerprint is
        the written file's own, taken before any rename (which keeps size,
        mtime and inode): a ``stat`` of ``target`` after the rename could be of
        a save that landed in between, which would then pass for this write.
    :raises OSError: creating or writing the temp file failed (it is removed).
    """
    with temp_beside(target) as (fh, tmp):
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
        if mtime is not None and mtime > 0:
            os.utime(tmp, (mtime, mtime))
        fp = stat_fingerprint(os.fstat(fh.fileno()))
        fh.close()
    return tmp, fp


def atomic_write(target: Path, data: bytes, mtime: float | None = None) -> Fingerprint:
    """Write ``data`` to ``target`` atomically; returns the new fingerprint.

    :func:`fill_temp` (temp file in the same folder, ignored by the watcher,
    fsync, optional mtime in seconds), ``os.replace``, fsync of the folder.
    The fingerprint is the written file's own (see :func:`fill_temp`).

    :raises OSError: writing or renaming failed (no temp file is left).
    """
    tmp, fp = fill_temp(target, data, mtime)
    try:
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir_best_effort(target.parent)
    return fp


@dataclass(frozen=True)
class TakenTemp:
    """A temp file a killed process left holding a version it took away from
    a live name (an exchange or a rename made, the check not yet).

    :ivar path: the temp file (the version taken).
    :ivar mark: its :func:`~.temp_marks.mark_ours` mark (to remove once the version is settled).
    :ivar ours_inode: the inode of our version (now live under the real name,
        unless it changed since), or None when the mark is no link.
    """

    path: Path
    mark: Path
    ours_inode: int | None


def clean_temp_files(local_root: Path, older_than: float) -> list[TakenTemp]:
    """Remove our temp files that a killed process left in the mirror, keeping
    those that may hold a person's only copy.

    Only regular files named with the temp prefix and last modified or
    renamed before ``older_than`` (Unix seconds: this run's start) are looked
    at, so temp files of the running process are never touched.  A temp file
    without a :func:`~.temp_marks.mark_ours` mark, or one with its mark still the same
    inode, holds only our version and is removed (with the mark).  One whose
    mark is another file holds what was live when the process was killed:
    it stays, and is returned for the caller to compare and keep.

    :returns: the temp files holding a version taken away.
    """
    taken: list[TakenTemp] = []
    for folder, _dirs, files in os.walk(local_root):
        names = set(files)
        for name in files:
            if not name.startswith(TEMP_PREFIX):
                continue
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
                if not stat.S_ISREG(st.st_mode) or max(st.st_mtime, st.st_ctime) >= older_than:
                    continue
                if name.endswith(OURS_SUFFIX):
                    if name[:-len(OURS_SUFFIX)] not in names:
                        os.unlink(path)   # a mark left after its temp file was settled
                    continue
                mark = path + OURS_SUFFIX
                if name + OURS_SUFFIX in names:
                    mst = os.lstat(mark)
                    if mst.st_ino != st.st_ino:
                        taken.append(TakenTemp(Path(path), Path(mark), mst.st_ino if mst.st_nlink > 1 else None))
                        continue
                    os.unlink(mark)
                os.unlink(path)
            except OSError:
                continue
    return taken


def local_errors(exc: OSError, rel_path: str) -> LocalError:
    """Turn an OSError on a mirror file into a :class:`LocalError` sentence."""
    reason = exc.strerror or str(exc)
    return LocalError(f"{rel_path}: {reason}", path=rel_path)
