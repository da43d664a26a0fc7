"""Is a file still open for writing by some process? (Linux: ``/proc``.)

A process concern, so it lives in the daemon: the engine never walks
``/proc``.  :mod:`ohsync.daemon.stability` uses :func:`open_for_writing` to
hold a dropped file that is still being written in place (a copy paused for
longer than the quiet period).  :class:`WriterCheck` is what the engine is
given (``EngineOptions.being_written``) so that it never replaces or removes
a local file a person's program is still writing: a descriptor open on the
old file would write the rest of the save into a file nobody can reach.
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

__all__ = ["open_for_writing", "WriterCheck", "RECENT_SAVE", "SCAN_REUSE"]

_FLAGS = re.compile(r"^flags:\s*([0-7]+)", re.MULTILINE)

#: Seconds since a file's last modification during which, where open files
#: cannot be seen, it counts as a save in progress.
RECENT_SAVE = 2.0

#: Seconds one walk of ``/proc`` answers for (files modified since it started
#: are looked up again): a burst of replaced files costs one walk, not one each.
SCAN_REUSE = 1.0

#: a file's name (the last part of what ``/proc/<pid>/fd/<fd>`` points to) → the ``(pid, fd)`` holding it open.
_Holders = dict[str, list[tuple[str, str]]]


def _can_see() -> bool:
    return sys.platform.startswith("linux") and os.path.isdir("/proc/self/fd")


def _holders() -> _Holders | None:
    """Every file some process we may inspect holds open, by name (None: ``/proc`` unreadable).

    The names are read with ``readlink``, which never touches the files
    themselves: a descriptor on a stalled network or FUSE mount would hang a
    ``stat`` of it.  Only descriptors of the file's name are ``stat``-ed
    (:func:`_writes`).
    """
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    found: _Holders = {}
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue  # another user's process, or gone
        for fd in fds:
            try:
                link = os.readlink(f"{fd_dir}/{fd}")
            except OSError:
                continue  # closed meanwhile
            found.setdefault(link.rsplit("/", 1)[-1], []).append((pid, fd))
    return found


def _writes(pid: str, fd: str, target: tuple[int, int]) -> bool:
    """True when descriptor ``fd`` of ``pid`` still is ``target``, opened for writing."""
    try:
        fst = os.stat(f"/proc/{pid}/fd/{fd}")
        with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii") as fh:
            info = fh.read()
    except OSError:
        return False  # closed since the walk
    if (fst.st_dev, fst.st_ino) != target:
        return False  # the number was reused for another file
    m = _FLAGS.search(info)
    return bool(m and int(m.group(1), 8) & (os.O_WRONLY | os.O_RDWR))


def open_for_writing(path: Path) -> bool | None:
    """Tell whether some process of ours has ``path`` open for writing.

    Linux only: walks ``/proc/<pid>/fd`` of the processes we may inspect and
    reads the open flags from ``/proc/<pid>/fdinfo``.  Other systems have
    no cheap, reliable way to tell, and the caller relies on size and mtime
    staying unchanged instead.

    :returns: True (open for writing), False (not, as far as we can see),
        None (cannot tell on this system).
    """
    if not _can_see():
        return None
    try:
        st = os.stat(path)
    except OSError:
        return False
    holders = _holders()
    if holders is None:
        return None
    target = (st.st_dev, st.st_ino)
    return any(_writes(pid, fd, target) for pid, fd in holders.get(path.name, ()))


def _program(pid: str) -> str:
    """``"<command name> (process <pid>)"``, as the person finds it in a task manager."""
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as fh:
            name = fh.read().strip()
    except OSError:
        name = ""
    return f"{name or 'a program'} (process {pid})"


class WriterCheck:
    """``check(path)`` → True while ``path`` looks like a save in progress.

    On Linux: some process holds it open for writing.  One walk of
    ``/proc`` answers for :data:`SCAN_REUSE` seconds, except for a file
    modified since that walk began (its writer may have opened it after the
    walk), which is looked up in a fresh one.  Where open files cannot be
    seen (other systems, or ``/proc`` unreadable): it was modified less than
    :data:`RECENT_SAVE` seconds ago.

    Called by the engine just before it replaces or removes an existing
    local file (``EngineOptions.being_written``), never for a file it
    creates: a cold mirror walks ``/proc`` not at all.

    :param reuse: seconds a walk is reused.
    :param recent: seconds of the fallback's "modified a moment ago".
    :param clock: the current Unix time (``time.time``).
    :param can_see: whether this system's open files can be seen (tests).
    """

    def __init__(self, *, reuse: float = SCAN_REUSE, recent: float = RECENT_SAVE,
                 clock: Callable[[], float] = time.time, can_see: Callable[[], bool] = _can_see) -> None:
        self._reuse, self._recent, self._clock, self._can_see = reuse, recent, clock, can_see
        self._walked_at = 0.0
        self._walk: _Holders | None = None
        #: walks of ``/proc`` made so far (tests count them)
        self.walks = 0

    def __call__(self, path: Path) -> bool | str:
        """Whether ``path`` is being written (see the class docstring).

        :param path: an existing local file (a missing one is not being written;
            a symbolic link is looked at itself, never followed).
        :returns: the program holding it open for writing (``"soffice.bin
            (process 4242)"``), True for a save of a moment ago where open
            files cannot be seen, else False.
        """
        try:
            st = os.lstat(path)  # a symbolic link is never followed (nor written through)
        except OSError:
            return False
        now = self._clock()
        holders = self._holders(now, st.st_mtime) if self._can_see() else None
        if holders is None:
            return now - st.st_mtime < self._recent
        target = (st.st_dev, st.st_ino)
        pid = next((pid for pid, fd in holders.get(Path(path).name, ()) if _writes(pid, fd, target)), None)
        return False if pid is None else _program(pid)

    def _holders(self, now: float, mtime: float) -> _Holders | None:
        # the margin: a file's mtime comes from a coarser clock than ours
        fresh = self._walk is not None and now - self._walked_at < self._reuse and mtime < self._walked_at - 0.1
        if not fresh:
            self._walked_at, self._walk = now, _holders()
            self.walks += 1
        return self._walk
