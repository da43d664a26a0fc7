"""Start ohsync at login: install and remove the per-user autostart files.

Three mechanisms, one per kind of desktop, each from a template in
``packaging/`` (installed as ``ohsync/packaging/``):

* ``systemd`` (Linux with a systemd user manager): the daemon as the user
  unit ``$XDG_CONFIG_HOME/systemd/user/ohsync.service`` (``Type=notify``,
  ``Restart=on-failure``), enabled with ``systemctl --user enable``; the tray,
  when the ``[tray]`` extra is installed, as the XDG autostart entry
  ``$XDG_CONFIG_HOME/autostart/ohsync-tray.desktop`` running ``ohsync tray``;
* ``xdg`` (Linux without one): ``$XDG_CONFIG_HOME/autostart/ohsync.desktop``
  running ``ohsync run``, which shows the tray itself when it can;
* ``launchd`` (macOS): the LaunchAgent
  ``~/Library/LaunchAgents/org.ohsync.daemon.plist`` running ``ohsync run``.

Every file names the absolute path of the installed ``ohsync`` executable
(:func:`ohsync_executable`), so autostart works although login sessions
rarely have ``~/.local/bin`` on their ``PATH``.  Nothing here starts a
second daemon unless asked (``now=True``).
"""

from __future__ import annotations

import importlib.util
import os
import plistlib
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from ..engine.errors import OhsyncError
from .autostart_reach import HEADLESS_ADVICE, desktop_session_possible, lingering, start_daemon_now

__all__ = ["AutostartError", "AutostartStatus", "choose_kind", "disable", "enable", "ohsync_executable",
           "render_desktop_entry", "render_launch_agent", "render_unit", "status", "systemd_user_available"]

UNIT_NAME = "ohsync.service"
DESKTOP_DAEMON = "ohsync.desktop"
DESKTOP_TRAY = "ohsync-tray.desktop"
AGENT_LABEL = "org.ohsync.daemon"


class AutostartError(OhsyncError):
    """Autostart could not be set up or removed; the message says what to do.

    :ivar done: sentences saying what was done all the same (the daemon started now).
    """

    title = "Autostart"

    def __init__(self, message: str, *, title: str | None = None, done: list[str] | None = None) -> None:
        super().__init__(message, title=title)
        self.done = list(done or [])


# --------------------------------------------------------------------------- where things go


def _home() -> Path:
    return Path(os.path.expanduser("~"))


def config_home() -> Path:
    """``$XDG_CONFIG_HOME`` or ``~/.config`` (the XDG base of autostart and systemd user files)."""
    value = os.environ.get("XDG_CONFIG_HOME", "")
    return Path(value) if os.path.isabs(value) else _home() / ".config"


def unit_path() -> Path:
    """The systemd user unit: ``$XDG_CONFIG_HOME/systemd/user/ohsync.service``."""
    return config_home() / "systemd" / "user" / UNIT_NAME


def desktop_path(name: str) -> Path:
    """An XDG autostart entry: ``$XDG_CONFIG_HOME/autostart/<name>``."""
    return config_home() / "autostart" / name


def agent_path() -> Path:
    """The macOS LaunchAgent: ``~/Library/LaunchAgents/org.ohsync.daemon.plist``."""
    return _home() / "Library" / "LaunchAgents" / f"{AGENT_LABEL}.plist"


# --------------------------------------------------------------------------- what runs


def ohsync_executable() -> Path:
    """The absolute path of the installed ``ohsync`` console script.

    Looked for as the program now running (``sys.argv[0]`` named ``ohsync``),
    beside the Python running it (a venv or pipx's venv), then on ``PATH``.

    :raises AutostartError: no installed ``ohsync`` was found.
    """
    candidates = []
    argv0 = Path(sys.argv[0]) if sys.argv and sys.argv[0] else None
    if argv0 is not None and argv0.name == "ohsync":
        candidates.append(argv0)
    candidates.append(Path(sys.executable).parent / "ohsync")
    found = shutil.which("ohsync")
    if found:
        candidates.append(Path(found))
    for candidate in candidates:
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return Path(os.path.abspath(candidate))
    raise AutostartError("Cannot find the installed `ohsync` command to start at login. Install ohsync "
                         "with `pipx install .` (or `pip install --user .`) from the source folder, then run "
                         "`ohsync autostart enable` again.")


def has_tray() -> bool:
    """True when the ``[tray]`` extra (pystray) is installed for this Python."""
    return importlib.util.find_spec("pystray") is not None


def systemd_user_available() -> bool:
    """True when ``systemctl --user`` reaches a running systemd user manager."""
    if not sys.platform.startswith("linux") or shutil.which("systemctl") is None:
        return False
    try:
        done = subprocess.run(["systemctl", "--user", "show-environment"], capture_output=True, timeout=10,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def choose_kind() -> str:
    """``"launchd"`` on macOS, ``"systemd"`` with a user manager, else ``"xdg"``.

    :raises AutostartError: on other systems (Windows), with what to do instead.
    """
    if sys.platform == "darwin":
        return "launchd"
    if sys.platform.startswith(("linux", "freebsd", "openbsd", "netbsd")):
        return "systemd" if systemd_user_available() else "xdg"
    raise AutostartError(f"Autostart is not supported on {sys.platform}; start `ohsync run` from your "
                         "system's own login items.")


# --------------------------------------------------------------------------- rendering

_PLAIN = re.compile(r"^[A-Za-z0-9_@+=:,./-]+$")


def _quote_systemd(arg: str) -> str:
    """One ExecStart word: double-quoted when needed; ``%`` and ``$`` doubled (specifiers, variables)."""
    word = arg if _PLAIN.match(arg) else '"' + re.sub(r'(["\\])', r"\\\1", arg) + '"'
    return word.replace("%", "%%").replace("$", "$$")


def _quote_desktop(arg: str) -> str:
    """One Exec word of a desktop entry (quoting rules of the Desktop Entry spec)."""
    word = arg if _PLAIN.match(arg) else '"' + re.sub(r'(["`$\\])', r"\\\1", arg) + '"'
    return word.replace("\\", "\\\\").replace("%", "%%")  # the value itself is an escaped string


def _template(name: str) -> str:
    """A file of ``packaging/``: beside ``daemon/`` in the source tree, and installed the same way
    (``ohsync/packaging/``, package data of ``pyproject.toml``).  Not importable on purpose:
    a ``packaging/__init__.py`` would shadow PyPA's ``packaging`` module when run from the source folder."""
    return (Path(__file__).resolve().parent.parent / "packaging" / name).read_text(encoding="utf-8")


def render_unit(argv: list[str]) -> str:
    """The systemd user unit (``packaging/ohsync.service``) running ``argv``."""
    return _template("ohsync.service").replace("@EXEC@", " ".join(_quote_systemd(a) for a in argv))


def render_desktop_entry(argv: list[str], comment: str) -> str:
    """An XDG autostart entry (``packaging/ohsync-tray.desktop``) running ``argv``."""
    return (_template("ohsync-tray.desktop").replace("@EXEC@", " ".join(_quote_desktop(a) for a in argv))
            .replace("@COMMENT@", comment))


def render_launch_agent(argv: list[str], log_file: Path) -> bytes:
    """The LaunchAgent (``packaging/org.ohsync.daemon.plist``) running ``argv``.

    :param log_file: where launchd writes what the process prints to stderr
        before its own log is open.
    """
    agent = plistlib.loads(_template("org.ohsync.daemon.plist").encode("utf-8"))
    agent["ProgramArguments"] = list(argv)
    agent["StandardErrorPath"] = str(log_file)
    return plistlib.dumps(agent)


# --------------------------------------------------------------------------- enable / disable / status


@dataclass
class AutostartStatus:
    """What is installed for this user.

    :ivar kind: the mechanism this machine would use (:func:`choose_kind`).
    :ivar files: installed autostart files, each with what it starts.
    :ivar enabled: an entry that starts the daemon is installed.
    :ivar problems: sentences (a missing program, a unit that is not enabled, an entry that
        nothing on this machine reads).
    """

    kind: str
    files: list[tuple[Path, str]] = field(default_factory=list)
    enabled: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def will_run(self) -> bool:
        """True when the daemon will start at the next login (installed, and nothing in the way)."""
        return self.enabled and not self.problems


def _write(path: Path, data: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    if isinstance(data, str):
        tmp.write_text(data, encoding="utf-8")
    else:
        tmp.write_bytes(data)
    os.replace(tmp, path)


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return subprocess.CompletedProcess(argv, 127, "", str(exc))


def _must(argv: list[str], what: str) -> None:
    done = _run(argv)
    if done.returncode != 0:
        detail = (done.stderr or done.stdout).strip().splitlines()
        raise AutostartError(f"`{' '.join(argv)}` failed while {what}"
                             f"{': ' + detail[-1] if detail else ''}.")


def _command(config: Path | None, *args: str) -> list[str]:
    argv = [str(ohsync_executable())]
    if config is not None:
        argv += ["--config", str(config)]
    return argv + list(args)


def enable(*, config: Path | None = None, now: bool = False, log_dir: Path | None = None,
           kind: str | None = None, socket: Path | None = None) -> list[str]:
    """Install the autostart files for this user (replacing older ones).

    :param config: a config file to pass as ``--config`` (None: the default).
    :param now: also start the daemon now (systemd and launchd by their own means; with an XDG
        entry, which only a desktop session reads, by starting ``ohsync run`` detached and
        waiting until it answers on ``socket``).
    :param socket: the config's socket (needed for ``now`` with an XDG entry).
    :param log_dir: the daemon's log folder (launchd's stderr file goes there).
    :param kind: force a mechanism (default :func:`choose_kind`).
    :returns: sentences saying what was installed.
    :raises AutostartError: no ``ohsync`` to start, systemctl/launchctl failed, or nothing on
        this machine would start an entry (no systemd user manager, no desktop session): then
        nothing is installed, and its ``done`` says whether the daemon was started now.
    """
    kind = kind or choose_kind()
    said: list[str] = []
    if kind == "systemd":
        path = unit_path()
        _write(path, render_unit(_command(config, "run", "--no-tray")))
        _must(["systemctl", "--user", "daemon-reload"], "reloading the systemd user units")
        _must(["systemctl", "--user", "enable", *(["--now"] if now else []), UNIT_NAME],
              "enabling ohsync.service")
        said.append(f"Installed and enabled the systemd user unit {path}: the daemon starts at login"
                    + (" and runs now." if now else "; start it now with `systemctl --user start ohsync`."))
        stale = desktop_path(DESKTOP_DAEMON)
        if stale.exists():  # an earlier enable without systemd: do not start a second daemon
            stale.unlink()
        if has_tray():
            tray = desktop_path(DESKTOP_TRAY)
            _write(tray, render_desktop_entry(_command(config, "tray"), "Tray icon of the ohsync daemon"))
            said.append(f"Installed {tray}: the tray icon starts with the desktop session.")
        else:
            said.append("No tray icon at login: the [tray] extra is not installed (see the README).")
        if not lingering():
            said.append("systemd starts it when you log in and stops it when your last session ends; "
                        "`loginctl enable-linger` keeps it running without a login (and starts it at boot).")
    elif kind == "xdg" and not desktop_session_possible():
        # an entry that nothing reads would look like autostart and never start anything
        done = [_start_now(config, socket)] if now else []
        line = " ".join(shlex.quote(a) for a in _command(config, "run", "--no-tray"))
        raise AutostartError("Nothing on this machine would start ohsync at login: an XDG autostart entry is "
                             "read only by a desktop session, there is none here, and no systemd user manager "
                             "answers from this shell (no user bus); so nothing was installed. "
                             f"{HEADLESS_ADVICE} The command to start there: {line} (for cron, the line "
                             f"`@reboot {line}` in `crontab -e`).", title="Autostart not set up", done=done)
    elif kind == "xdg":
        path = desktop_path(DESKTOP_DAEMON)
        _write(path, render_desktop_entry(_command(config, "run"),
                                          "ohsync daemon and its tray icon (Seafile library ↔ local folder)"))
        tray = desktop_path(DESKTOP_TRAY)
        if tray.exists():
            tray.unlink()
        said.append(f"Installed {path}: the daemon (with its tray icon) starts with your desktop session."
                    + ("" if now else " Start it now with `ohsync run`."))
        if now:
            said.append(_start_now(config, socket))
    elif kind == "launchd":
        path = agent_path()
        logs = log_dir if log_dir is not None else _home() / "Library" / "Logs" / "ohsync"
        logs.mkdir(parents=True, exist_ok=True)
        _write(path, render_launch_agent(_command(config, "run"), logs / "launchd.log"))
        said.append(f"Installed the LaunchAgent {path}: the daemon (with its tray icon) starts at login.")
        if now:
            domain = f"gui/{os.getuid()}"
            _run(["launchctl", "bootout", f"{domain}/{AGENT_LABEL}"])  # an older copy; may not be loaded
            _must(["launchctl", "bootstrap", domain, str(path)], "loading the LaunchAgent")
            said.append("It runs now.")
    else:
        raise ValueError(f"unknown autostart kind {kind!r}")
    return said


def _start_now(config: Path | None, socket: Path | None) -> str:
    """Start ``ohsync run`` detached where no autostart mechanism starts it now (an XDG entry), unless
    a daemon already answers on ``socket``; returns the sentence saying which."""
    if socket is None:
        raise ValueError("enable(now=True) of an XDG entry needs the config's socket")
    from .running import running_daemon

    if running_daemon(socket, config or Path("-")) is not None:
        return f"An ohsync daemon already answers on {socket}; none was started."
    return start_daemon_now(_command(config, "run", *([] if desktop_session_possible() else ["--no-tray"])),
                            socket)


def disable(*, kind: str | None = None) -> list[str]:
    """Remove every autostart file of this user, stopping the unit or agent.

    :returns: sentences saying what was removed (or that nothing was there).
    """
    kind = kind or choose_kind()
    said: list[str] = []
    unit = unit_path()
    if kind == "systemd" and (unit.exists() or _run(["systemctl", "--user", "is-enabled", UNIT_NAME]).returncode == 0):
        _run(["systemctl", "--user", "disable", "--now", UNIT_NAME])
    if unit.exists():
        unit.unlink()
        if kind == "systemd":
            _run(["systemctl", "--user", "daemon-reload"])
        said.append(f"Removed the systemd user unit {unit} (the daemon it started was stopped).")
    agent = agent_path()
    if agent.exists():
        if kind == "launchd":
            _run(["launchctl", "bootout", f"gui/{os.getuid()}/{AGENT_LABEL}"])
        agent.unlink()
        said.append(f"Removed the LaunchAgent {agent}.")
    for name in (DESKTOP_DAEMON, DESKTOP_TRAY):
        entry = desktop_path(name)
        if entry.exists():
            entry.unlink()
            said.append(f"Removed {entry}.")
    return said or ["Autostart was not set up; nothing to remove."]


_EXEC = re.compile(r"^(?:ExecStart|Exec)=(.*)$", re.M)


def _first_word(command: str) -> str:
    """The program of an Exec/ExecStart line (unquoted)."""
    command = command.strip()
    if command.startswith('"'):
        end = command.find('"', 1)
        return command[1:end if end > 0 else None].replace("\\\\", "\\")
    return command.split(" ", 1)[0]


def _described(path: Path) -> tuple[str, str]:
    """What an installed file starts: ``(command line, program)``."""
    if path.suffix == ".plist":
        try:
            argv = [str(a) for a in plistlib.loads(path.read_bytes()).get("ProgramArguments", [])]
        except (OSError, plistlib.InvalidFileException, ValueError):
            return "(unreadable)", ""
        return " ".join(argv), argv[0] if argv else ""
    match = _EXEC.search(path.read_text(encoding="utf-8", errors="replace"))
    if not match:
        return "(no command)", ""
    command = match.group(1).replace("%%", "%").replace("$$", "$")
    return command, _first_word(command)


def status(*, kind: str | None = None) -> AutostartStatus:
    """What is installed, and whether it would work.

    :returns: :class:`AutostartStatus`; ``problems`` names a missing program
        (ohsync was reinstalled elsewhere or removed) and a unit file that is
        not enabled.
    """
    st = AutostartStatus(kind=kind or choose_kind())
    for path in (unit_path(), agent_path(), desktop_path(DESKTOP_DAEMON), desktop_path(DESKTOP_TRAY)):
        if not path.exists():
            continue
        command, program = _described(path)
        st.files.append((path, command))
        if program and not os.access(program, os.X_OK):
            st.problems.append(f"{path} starts {program}, which does not exist any more: run "
                               "`ohsync autostart enable` again from the ohsync you use now.")
        if path.name != DESKTOP_TRAY:
            st.enabled = True
    daemon_entry = desktop_path(DESKTOP_DAEMON)
    if daemon_entry.exists() and not unit_path().exists() and not desktop_session_possible():
        st.problems.append(f"{daemon_entry} is installed, but only a desktop session starts it and this "
                           f"machine has none, so the daemon will not start at the next login. {HEADLESS_ADVICE}")
    if unit_path().exists() and st.kind == "systemd":
        state = _run(["systemctl", "--user", "is-enabled", UNIT_NAME]).stdout.strip()
        if state != "enabled":
            st.enabled = False
            st.problems.append(f"{unit_path()} is installed but systemd reports it as "
                               f"'{state or 'unknown'}': run `ohsync autostart enable` again.")
    return st
