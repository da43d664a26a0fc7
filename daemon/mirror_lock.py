"""One daemon per mirror folder: a lock file inside the folder.

The state-dir lock (``daemon/app.py``) keeps two daemons off one state
database, but two daemons with different state dirs (or configs) could
still sync the same folder and report each other's writes as conflicts.
This lock is keyed by the folder's real path and lives in the user's own
``<tmp>/ohsync-<uid>/`` folder (mode 0700, checked like the socket's
fallback folder), which no config moves, so any second daemon of the same
user meets it; nothing is written into the mirror, and a daemon that stops
removes its lock file (none piles up there).
"""
from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import tempfile
from pathlib import Path

from .socket.dir import prepare_socket_dir
from .worker import FatalError

__all__ = ["MirrorInUse", "MirrorLock", "lock_dir"]

#: Attempts to take a lock file that a releasing daemon removes at that very moment.
_TRIES = 5


def lock_dir() -> Path:
    """``<tmp>/ohsync-<uid>``: the user's private folder for folder locks."""
    return Path(tempfile.gettempdir()) / f"ohsync-{os.getuid()}"


class MirrorInUse(FatalError):
    """Another ohsync daemon holds the mirror folder's lock."""

    title = "Folder already synced"


def _names_fd(path: Path, fd: int) -> bool:
    """True when ``path`` is still the file open as ``fd`` (not removed nor replaced)."""
    try:
        return os.path.samestat(os.stat(path, follow_symlinks=False), os.fstat(fd))
    except FileNotFoundError:
        return False


class MirrorLock:
    """The lock of one mirror folder, held for the daemon's lifetime.

    An exclusive ``flock`` on ``mirror-<hash>.lock``; the file is removed when
    the lock is let go, so the folder holds a lock file only for each daemon
    that runs (one killed leaves its file, which the next daemon of that folder
    takes over).  A file removed by a releasing daemon between our ``open`` and
    our ``flock`` is noticed (the path no longer names what we locked) and the
    new file is taken instead, so two daemons never both hold the folder.

    :param root: the mirror folder (must exist when :meth:`acquire` runs).
    :param directory: where lock files live (default :func:`lock_dir`).
    """

    def __init__(self, root: Path, directory: Path | None = None) -> None:
        self.root = root
        self.directory = directory or lock_dir()
        key = hashlib.sha1(os.path.realpath(root).encode("utf-8", "surrogateescape")).hexdigest()[:20]
        self.path = self.directory / f"mirror-{key}.lock"
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or fail at once.

        :raises MirrorInUse: another process holds it (names the folder and
            what to do).
        :raises UnsafeSocketDir: the lock folder is not ours alone.
        :raises OSError: the lock file cannot be created; the caller decides
            whether to go on without it.
        """
        if self._fd is not None:
            return
        prepare_socket_dir(self.directory)
        for _ in range(_TRIES):
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                raise MirrorInUse(
                    f"Another ohsync daemon already syncs the folder {self.root}. Two daemons on one "
                    "folder would report each other's writes as conflicts: stop the other one "
                    "(`ohsync stop`, with its config) or give this mirror another `local` folder.") from None
            if _names_fd(self.path, fd):
                self._fd = fd
                return
            os.close(fd)  # the daemon that held it removed it on its way out: lock the file there now
        raise OSError(errno.EAGAIN, f"the lock file {self.path} kept being replaced; try again")

    def release(self) -> None:
        """Let go of the lock and remove its file (only while the file is still ours)."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            if _names_fd(self.path, fd):
                self.path.unlink()  # removed while still locked: a newcomer re-checks what it locked
        except OSError:
            pass  # a lock file left behind is taken over by the next daemon of this folder
        finally:
            os.close(fd)

    @property
    def held(self) -> bool:
        """True while this process holds the lock."""
        return self._fd is not None and _names_fd(self.path, self._fd)
