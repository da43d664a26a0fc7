"""Stop the tray icon of the user's own ``ohsync tray`` process.

``ohsync tray`` writes its pid beside the socket it follows
(:func:`ohsync.daemon.protocol.tray_pid_file`).  ``ohsync stop`` and
``ohsync autostart disable`` end it too, so that after an uninstall no icon
is left offering to start a program that is gone.  A pid file whose process
is not an ``ohsync tray`` any more (the tray was killed, the pid reused) is
removed without signalling anything.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .protocol import tray_pid_file

__all__ = ["stop_tray"]


def _command_line(pid: int) -> str:
    """The command line of ``pid`` ("" when there is no such process)."""
    if sys.platform.startswith("linux"):
        try:
            return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # no such process
            return ""
    try:
        done = subprocess.run(["ps", "-p", str(pid), "-o", "command="], capture_output=True, text=True,
                              timeout=5, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip()


def _is_tray(pid: int) -> bool:
    words = _command_line(pid).split()
    return "tray" in words and any("ohsync" in w for w in words)


def stop_tray(socket_path: Path, *, timeout: float = 5.0) -> str | None:
    """End the ``ohsync tray`` process that follows ``socket_path``, if one runs.

    :param socket_path: the config's socket (``Config.socket``).
    :param timeout: seconds to wait for it to exit after SIGTERM.
    :returns: a sentence saying what was stopped, or None when no tray ran.
    """
    path = tray_pid_file(socket_path)
    try:
        pid = int(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):  # no tray file, or not a pid: nothing to stop
        return None
    if pid == os.getpid() or not _is_tray(pid):
        path.unlink(missing_ok=True)  # a tray that ended without removing it
        return None
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        path.unlink(missing_ok=True)
        return None
    except PermissionError:
        return f"The ohsync tray (process {pid}) belongs to another user; it was left running."
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _is_tray(pid):
        time.sleep(0.1)
    path.unlink(missing_ok=True)
    if _is_tray(pid):
        return f"The ohsync tray (process {pid}) did not exit within {timeout:g} s; end it from your desktop."
    return f"Stopped the ohsync tray icon (process {pid})."
