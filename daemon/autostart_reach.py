"""Whether an installed autostart entry will start anything on this machine, and
starting the daemon now where the mechanism itself cannot.

An XDG autostart entry is read only by a desktop session (GNOME, KDE, XFCE…):
on a headless box, over SSH or in a container nothing ever starts it.  A
systemd user unit runs while the user's manager runs: from the first login to
the end of the last session, or always with lingering
(``loginctl enable-linger``).  These checks let ``ohsync autostart`` and
``ohsync doctor`` say what will really run at the next login.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import subprocess
import time
from pathlib import Path

from ..engine.errors import OhsyncError

__all__ = ["desktop_session_possible", "lingering", "start_daemon_now", "autostart_pid_file", "stop_started_daemon",
           "HEADLESS_ADVICE", "LINGER_DIR"]

#: where systemd-logind marks the users whose manager runs without a login
LINGER_DIR = Path("/var/lib/systemd/linger")

#: what starts the daemon where neither a desktop session nor a systemd user manager will
HEADLESS_ADVICE = (
    "To start it at boot without a desktop: log in through a session that has a systemd user manager "
    "(an SSH login on a systemd machine has one; `su`/`sudo` shells and containers do not), run "
    "`loginctl enable-linger` once so the manager runs without a login, then `ohsync autostart enable` "
    "again installs the systemd unit; or start `ohsync run --no-tray` from your own init (a system "
    "service, or cron's @reboot)."
)


def _data_dirs() -> list[Path]:
    """``$XDG_DATA_DIRS`` (default ``/usr/local/share:/usr/share``)."""
    value = os.environ.get("XDG_DATA_DIRS") or "/usr/local/share:/usr/share"
    return [Path(p) for p in value.split(os.pathsep) if p]


def desktop_session_possible() -> bool:
    """True when an XDG autostart entry can take effect here: this process runs in a
    desktop session (``DISPLAY``, ``WAYLAND_DISPLAY`` or ``XDG_CURRENT_DESKTOP``), or a
    desktop session is installed (a display manager offers one from ``xsessions/`` or
    ``wayland-sessions/`` of ``$XDG_DATA_DIRS``)."""
    if any(os.environ.get(k) for k in ("DISPLAY", "WAYLAND_DISPLAY", "XDG_CURRENT_DESKTOP")):
        return True
    for base in _data_dirs():
        for kind in ("xsessions", "wayland-sessions"):
            try:
                if any(p.suffix == ".desktop" for p in (base / kind).iterdir()):
                    return True
            except OSError:  # no such folder: no session of that kind
                continue
    return False


def lingering(user: str | None = None) -> bool:
    """True when systemd keeps ``user``'s manager (default: this user) running without a login."""
    try:
        return (LINGER_DIR / (user or getpass.getuser())).exists()
    except (OSError, KeyError):  # no name for this uid: it cannot have been enabled by name
        return False


def start_daemon_now(argv: list[str], socket: Path, *, timeout: float = 20.0) -> str:
    """Start ``argv`` (an ``ohsync … run`` command line) detached, and wait until it answers
    ``ping`` on ``socket``.

    :param argv: the command line, as the autostart entry runs it.
    :param socket: the socket of its config (``Config.socket``).
    :param timeout: seconds to wait for the answer.
    :returns: a sentence naming the process.
    :raises OhsyncError: it exited before answering (with its exit code and last output line), or
        did not answer within ``timeout`` seconds.
    """
    from .protocol import Method, RpcClient

    # detached, in a session of its own: it outlives this command; it logs to its log file
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            raise OhsyncError(f"`{' '.join(argv)}` exited at once (code {code}). Run it in a terminal to "
                              "see why.", title="Autostart")
        try:
            answer = RpcClient(socket, timeout=2).call(Method.PING)
        except Exception:  # noqa: BLE001 - not answering yet
            time.sleep(0.2)
            continue
        pid = answer.get("pid") if isinstance(answer, dict) and isinstance(answer.get("pid"), int) else proc.pid
        with contextlib.suppress(OSError):  # so that `ohsync autostart disable` stops this one, and only this one
            autostart_pid_file(socket).write_text(f"{pid}\n", encoding="ascii")
        return f"Started the daemon now (process {proc.pid}); `ohsync status` shows what it does."
    raise OhsyncError(f"`{' '.join(argv)}` (process {proc.pid}) did not answer on {socket} within "
                      f"{timeout:.0f} s; see `ohsync log` for why.", title="Autostart")


def autostart_pid_file(socket: Path) -> Path:
    """Where ``ohsync autostart enable --now`` notes the pid of the daemon it started: beside
    the config's socket, in the user's private socket folder."""
    return socket.parent / "ohsync-autostarted.pid"


def stop_started_daemon(socket: Path, *, timeout: float = 60.0) -> str | None:
    """Stop the daemon that ``enable --now`` started on ``socket``, if it still runs.

    A daemon started otherwise (by hand in a terminal, or by the desktop session
    from the XDG entry at login) is left running, as turning off "start at login"
    in Dropbox or Maestral leaves the running app alone; the sentence says so and
    names ``ohsync stop``.

    :param socket: the config's socket (``Config.socket``).
    :param timeout: seconds to wait for the daemon to finish its pass and exit.
    :returns: a sentence saying what was stopped or left running; None when no daemon answers.
    """
    from .protocol import Method, RpcClient

    noted = autostart_pid_file(socket)
    try:
        started: int | None = int(noted.read_text(encoding="ascii").strip())
    except (OSError, ValueError):  # none noted, or not a pid
        started = None
    client = RpcClient(socket, timeout=5)
    try:
        answer = client.call(Method.PING)
    except Exception:  # noqa: BLE001 - nothing answers: nothing to stop
        noted.unlink(missing_ok=True)
        return None
    pid = answer.get("pid") if isinstance(answer, dict) else None
    if started is None or pid != started:
        noted.unlink(missing_ok=True)  # that daemon is gone; this one was started otherwise
        which = f" (process {pid})" if isinstance(pid, int) else ""
        return (f"An ohsync daemon{which} still runs: autostart did not start it (you started it, or your "
                "desktop session did at login), so it was left running; `ohsync stop` ends it.")
    try:
        client.call(Method.SHUTDOWN)
    except Exception:  # noqa: BLE001 - it went away meanwhile
        noted.unlink(missing_ok=True)
        return f"Stopped the daemon that `ohsync autostart enable --now` started (process {pid})."
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            client.call(Method.PING, timeout=2)
        except Exception:  # noqa: BLE001 - gone
            noted.unlink(missing_ok=True)
            return f"Stopped the daemon that `ohsync autostart enable --now` started (process {pid})."
        time.sleep(0.2)
    return (f"The daemon that `ohsync autostart enable --now` started (process {pid}) is still finishing; it "
            "exits when its current transfer ends.")
