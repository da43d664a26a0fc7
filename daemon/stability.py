"""The one place that decides whether a dropped file is finished.

A file may be filed when it is not a partial download or lock file (by its
name, or by a ``.part``/``.crdownload`` companion beside it: Firefox keeps
an empty final file while it downloads) and no process has it open for
writing (Linux, :mod:`ohsync.daemon.open_files`).  The drop-folder service
asks :meth:`StabilityGate.not_ready` before it hands a file on, and injects
the same method into the engine's :class:`~ohsync.engine.filing.filer.Filer`
(its ``ready`` argument), which asks again while planning: one decision,
made here.  That size and mtime held still for the quiet period is the
service's debouncer's part (:mod:`ohsync.daemon.debounce`).
"""

from __future__ import annotations

import stat
import time
from collections.abc import Callable
from pathlib import Path

from ..engine.filing.api import DOWNLOADING, WRITING
from ..engine.names import has_partial_sibling, is_partial_name
from .open_files import open_for_writing

__all__ = ["StabilityGate"]


class StabilityGate:
    """Tells whether a file is finished (see the module docstring).

    :param writers: ``writers(path)`` → True when some process has the file
        open for writing, False when not, None when this system cannot tell
        (default :func:`~ohsync.daemon.open_files.open_for_writing`).
    """

    def __init__(self, writers: Callable[[Path], bool | None] = open_for_writing) -> None:
        self._writers = writers

    def not_ready(self, path: Path) -> str | None:
        """Why ``path`` must not be filed yet, or None when it may be.

        The engine's :data:`~ohsync.engine.filing.api.ReadyCheck`.

        :returns: :data:`~ohsync.engine.filing.api.DOWNLOADING` (a partial
            download or lock file), :data:`~ohsync.engine.filing.api.WRITING`
            (open for writing), or None.
        """
        path = Path(path)
        if is_partial_name(path.name) or has_partial_sibling(path):
            return DOWNLOADING
        if self._writers(path) is True:
            return WRITING
        return None

    def is_stable(self, path: Path, quiet_seconds: float = 3.0, *, now: float | None = None) -> bool:
        """Tell whether a file looks finished: a regular file (no symlink),
        :meth:`not_ready` has no objection, and its mtime is at least
        ``quiet_seconds`` in the past.

        :param quiet_seconds: seconds since the last modification.
        :param now: the current Unix time (default ``time.time()``).
        :returns: True when the file may be filed now.
        """
        path = Path(path)
        try:
            st = path.lstat()
        except OSError:
            return False
        if not stat.S_ISREG(st.st_mode):  # the lstat's own answer: a link is never followed
            return False
        if (now if now is not None else time.time()) - st.st_mtime < quiet_seconds:
            return False
        return self.not_ready(path) is None
