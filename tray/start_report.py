"""Why a daemon the tray started did not come up, in the daemon's own words.

The tray's Start item runs ``ohsync run --no-tray`` (or ``systemctl --user
start ohsync.service``) in its own session.  Its standard error goes to an
unlinked temporary file (:func:`open_capture`); the daemon is told not to
copy its log there (``OHSYNC_LOG_STDERR=0``: the log file has it), so the
file holds only what the daemon prints when it gives up, e.g. ``ohsync: Not
logged in: …`` — small however long the daemon then runs.  :func:`last_line`
reads the last line without moving the shared file offset.  For the systemd
unit the journal's last line of the unit is asked for too
(:func:`journal_last_line`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from typing import IO

__all__ = ["CAPTURE_ENV", "journal_last_line", "last_line", "open_capture"]

#: Environment for the started daemon: no log copy on stderr (``ohsync run`` reads it).
CAPTURE_ENV = {"OHSYNC_LOG_STDERR": "0"}

#: Bytes read from the end of the capture.
_TAIL = 8192


def open_capture() -> IO[bytes]:
    """A temporary file for the child's stderr (already unlinked; closed by the caller)."""
    return tempfile.TemporaryFile(prefix="ohsync-start-")


def last_line(capture: IO[bytes]) -> str:
    """The last non-empty line written to ``capture`` ("" when none).

    Uses ``os.pread``: the child shares the file offset, which must not move.
    """
    fd = capture.fileno()
    size = os.fstat(fd).st_size
    start = max(0, size - _TAIL)
    data = os.pread(fd, size - start, start)
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line]
    return lines[-1] if lines else ""


def journal_last_line(unit: str, timeout: float = 5.0) -> str:
    """The last line the systemd user unit ``unit`` logged ("" when unknown)."""
    if not shutil.which("journalctl"):
        return ""
    try:
        done = subprocess.run(["journalctl", "--user", "-u", unit, "-n", "20", "-o", "cat", "--no-pager"],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = [line.strip() for line in done.stdout.splitlines() if line.strip()]
    return lines[-1] if lines else ""
