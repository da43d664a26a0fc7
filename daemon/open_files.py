"""Is a file still open for writing by some process? (Linux: ``/proc``.)

A process concern, so it lives in the daemon: the engine never walks
``/proc``.  :mod:`ohsync.daemon.stability` uses it to hold a dropped file
that is still being written in place (a copy paused for longer than the
quiet period).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

__all__ = ["open_for_writing"]

_FLAGS = re.compile(r"^flags:\s*([0-7]+)", re.MULTILINE)


def open_for_writing(path: Path) -> bool | None:
    """Tell whether some process of ours has ``path`` open for writing.

    Linux only: walks ``/proc/<pid>/fd`` of the processes we may inspect and
    reads the open flags from ``/proc/<pid>/fdinfo``.  Other systems have
    no cheap, reliable way to tell, and the caller relies on size and mtime
    staying unchanged instead.

    :returns: True (open for writing), False (not, as far as we can see),
        None (cannot tell on this system).
    """
    if not sys.platform.startswith("linux") or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return False
    target = (st.st_dev, st.st_ino)
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    for pid in pids:
        fd_dir = f"/proc/{pid}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue  # another user's process, or gone
        for fd in fds:
            try:
                fst = os.stat(f"{fd_dir}/{fd}")
            except OSError:
                continue
            if (fst.st_dev, fst.st_ino) != target:
                continue
            try:
                with open(f"/proc/{pid}/fdinfo/{fd}", encoding="ascii") as fh:
                    info = fh.read()
            except OSError:
                continue
            m = _FLAGS.search(info)
            if m and int(m.group(1), 8) & (os.O_WRONLY | os.O_RDWR):
                return True
    return False
