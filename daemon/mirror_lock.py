"""One daemon per mirror folder: a lock file inside the folder.

The state-dir lock (``daemon/app.py``) keeps two daemons off one state
database, but two daemons with different state dirs (or configs) could
still sync the same folder and report each other's writes as conflicts.
This lock is keyed by the folder's real path and lives in the user's own
``<tmp>/ohsync-<uid>/`` folder (mode 0700, checked like the socket's
fallback folder), which no config moves, so any second daemon of the same
user meets it; nothing is written into the mirror.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path

from filelock import FileLock, Timeout

from .socket.dir import prepare_socket_dir
from .worker import FatalError

__all__ = ["MirrorInUse", "MirrorLock", "lock_dir"]


def lock_dir() -> Path:
    """``<tmp>/ohsync-<uid>``: the user's private folder for folder locks."""
    return Path(tempfile.gettempdir()) / f"ohsync-{os.getuid()}"


class MirrorInUse(FatalError):
    """Another ohsync daemon holds the mirror folder's lock."""

    title = "Folder already synced"


class MirrorLock:
    """The lock of one mirror folder, held for the daemon's lifetime.

    :param root: the mirror folder (must exist when :meth:`acquire` runs).
    :param directory: where lock files live (default :func:`lock_dir`).
    """

    def __init__(self, root: Path, directory: Path | None = None) -> None:
        self.root = root
        self.directory = directory or lock_dir()
        key = hashlib.sha1(os.path.realpath(root).encode("utf-8", "surrogateescape")).hexdigest()[:20]
        self.path = self.directory / f"mirror-{key}.lock"
        self._lock = FileLock(str(self.path), timeout=0)

    def acquire(self) -> None:
        """Take the lock or fail at once.

        :raises MirrorInUse: another process holds it (names the folder and
            what to do).
        :raises UnsafeSocketDir: the lock folder is not ours alone.
        :raises OSError: the lock file cannot be created; the caller decides
            whether to go on without it.
        """
        prepare_socket_dir(self.directory)
        try:
            self._lock.acquire()
        except Timeout:
            raise MirrorInUse(
                f"Another ohsync daemon already syncs the folder {self.root}. Two daemons on one "
                "folder would report each other's writes as conflicts: stop the other one "
                "(`ohsync stop`, with its config) or give this mirror another `local` folder.") from None

    def release(self) -> None:
        """Let go of the lock (the empty file stays; a lock file is not a lock)."""
        if self._lock.is_locked:
            self._lock.release(force=True)

    @property
    def held(self) -> bool:
        """True while this process holds the lock."""
        return bool(self._lock.is_locked) and os.path.exists(self.path)
