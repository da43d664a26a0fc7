"""Echo suppression for the watcher's paths: which of them a pass would push.

Every file the engine writes (a download, a merge, a cold mirror of 30,000
files) comes back from the file watcher as a changed path.  Those events are
echoes of our own writes: the engine recorded the file's stat fingerprint
``(size, mtime_ns, inode)`` in its base right after writing it.  A path whose
local file still has its base's fingerprint is one a pass would classify as
unchanged without reading it (``SyncPlanner._classify_local``), so the daemon
need not run a pass for it; any later edit moves the fingerprint and is kept.

:func:`sort_watched` makes that test once per path (one ``lstat`` and one
indexed base lookup; nothing is hashed) and answers both questions the daemon
asks: which paths await push (the ``pending_up`` count) and which must still
reach a pass.  It is conservative on the second: only ignored names and
regular files with their base's fingerprint are left out; anything it cannot
tell (a folder, a symbolic link, a stat error, a path that vanished) goes to
the pass.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..localfs import stat_fingerprint
from ..paths import normalize_rel

__all__ = ["WatchedPaths", "sort_watched"]


@dataclass
class WatchedPaths:
    """The watcher's paths, sorted (all rel paths, normalised).

    :ivar awaiting: paths a pass would push (new, changed by fingerprint, or
        gone while a file base says they were synced): ``pending_up``.
    :ivar to_sync: paths a pass must still look at (``awaiting`` and whatever
        cannot be told here: folders, symbolic links, unreadable entries,
        paths with neither a file nor a base).
    :ivar echoes: ignored names and regular files whose fingerprint equals
        their file base's (our own writes, or touches that changed nothing).
    """

    awaiting: set[str] = field(default_factory=set)
    to_sync: set[str] = field(default_factory=set)
    echoes: set[str] = field(default_factory=set)


def sort_watched(rel_paths: Iterable[str], *, is_ignored: Callable[[str], bool],
                 get_base: Callable[[str], Any], local_path: Callable[[str], Path]) -> WatchedPaths:
    """Sort the watcher's paths into awaiting push / still to sync / echoes.

    :param rel_paths: library-relative paths as the watcher reported them
        (duplicates and unnormalised spellings allowed).
    :param is_ignored: True for names never synced (ignore rules, temp files).
    :param get_base: rel path -> its base (``StateStore.get_base``: an object
        with ``is_dir`` and ``fingerprint()``) or None.
    :param local_path: rel path -> the local path.
    :returns: the three sets (``awaiting`` is a subset of ``to_sync``).
    """
    out = WatchedPaths()
    for raw in rel_paths:
        rel = normalize_rel(raw)
        if not rel or rel in out.to_sync or rel in out.echoes:
            continue
        if is_ignored(rel):
            out.echoes.add(rel)
            continue
        base = get_base(rel)
        try:
            st = os.lstat(local_path(rel))
        except FileNotFoundError:
            if base is not None and not base.is_dir:
                out.awaiting.add(rel)  # a delete to carry to the server
            out.to_sync.add(rel)  # the pass decides (e.g. a decomposed spelling of the name)
            continue
        except OSError:
            out.awaiting.add(rel)  # cannot tell here: the pass will
            out.to_sync.add(rel)
            continue
        if not stat.S_ISREG(st.st_mode):
            out.to_sync.add(rel)
            continue
        if base is not None and not base.is_dir and stat_fingerprint(st) == base.fingerprint():
            out.echoes.add(rel)
            continue
        out.awaiting.add(rel)
        out.to_sync.add(rel)
    return out


#: Folders remembered by :class:`OwnFolders` at most (the oldest are forgotten first).
OWN_FOLDERS_MAX = 100_000


class OwnFolders:
    """The local folders this engine created, by rel path and inode.

    The watcher reports each of them as a created folder, which otherwise asks
    for a full scan (a folder moved in from outside the mirror arrives the same
    way and its contents are not watched).  A created folder that is still the
    very folder the engine made (same path, same inode) is an echo: watchdog
    watches a folder made in place and reports the files in it one by one.
    Any folder deleted or moved here ends that (:meth:`forget`): a folder of
    ours moved away and back keeps its inode but is a folder moved in.

    Noted from the engine's thread, asked from the watcher's; the dict
    operations hold a lock.
    """

    def __init__(self, limit: int = OWN_FOLDERS_MAX) -> None:
        import threading

        self._lock = threading.Lock()
        self._limit = limit
        self._inodes: dict[str, int] = {}

    def note(self, rel: str, inode: int) -> None:
        """The engine just created folder ``rel`` (normalised rel path), inode ``inode``."""
        with self._lock:
            self._inodes.pop(rel, None)
            self._inodes[rel] = inode
            while len(self._inodes) > self._limit:
                del self._inodes[next(iter(self._inodes))]

    def is_own(self, rel: str, inode: int) -> bool:
        """True when folder ``rel`` with inode ``inode`` is one the engine created."""
        with self._lock:
            return self._inodes.get(rel) == inode

    def forget(self) -> None:
        """A folder was deleted or moved here: no later 'created' event is an echo."""
        with self._lock:
            self._inodes.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._inodes)


def make_dirs(local_path: Callable[[str], Path], rel: str, own: OwnFolders) -> None:
    """``mkdir -p`` of folder ``rel`` that notes each folder it creates in ``own``.

    :param local_path: rel path -> the local path (``MirrorContext.local_path``).
    :param rel: the folder's normalised rel path.
    :raises OSError: a folder cannot be created (a file is in the way, permissions).
    """
    parts = rel.split("/")
    for i in range(1, len(parts) + 1):
        sub = "/".join(parts[:i])
        path = local_path(sub)
        try:
            os.mkdir(path)
        except FileExistsError:
            if not path.is_dir():
                raise
            continue
        own.note(sub, os.lstat(path).st_ino)
