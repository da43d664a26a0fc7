"""``ohsync setup``: the command line around :mod:`ohsync.daemon.setup_flow`.

Registers the parser (every question has a flag; ``--yes`` asks nothing),
reads the answers at the terminal, and reaches autostart through one seam,
:func:`autostart_enabler`.  A missing answer is a usage error (exit 2)
naming its flag; input that ends at a question exits 1 with a sentence;
everything else follows :mod:`ohsync.daemon.cli.main`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from .common import EXIT_FAILED, EXIT_OK, Subparsers, UsageError, add_command

__all__ = ["register", "cmd_setup", "autostart_enabler", "autostart_unreachable", "add_keyring_option"]


def add_keyring_option(sp: argparse.ArgumentParser) -> None:
    """``--keyring system|file`` of ``setup`` and ``login`` (daemon/token_store.py)."""
    sp.add_argument("--keyring", choices=("system", "file"), default=None,
                    help="where the token is kept: the OS keyring (system), or a file only you can read "
                         "(file: for a machine without a keyring, such as a headless box or a container); "
                         "default: the config's choice, else the OS keyring, offering the file when there is none")


def autostart_enabler() -> Callable[[Path], str] | None:
    """The function that turns on autostart for a config file, or None where there is none.

    It is called with the config path, returns what it installed (lines of
    text), and raises :class:`~ohsync.engine.errors.OhsyncError` when it
    cannot.  It does what ``ohsync autostart enable`` does
    (:func:`ohsync.daemon.autostart.enable`).
    """
    try:
        from .. import autostart
    except ImportError:
        return None

    def enable(path: Path) -> str:
        import platformdirs

        from ..config import APP_NAME, load_config

        default = Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"
        config = None if path.expanduser() == default else path.expanduser().resolve()
        lines = autostart.enable(config=config, log_dir=load_config(path).log_dir)
        return "\n".join(lines)

    return enable


def autostart_unreachable() -> str | None:
    """Why nothing on this machine would start ohsync at login, or None when something will
    (a systemd user manager, launchd, or a desktop session that reads XDG autostart entries)."""
    try:
        from .. import autostart
        from ..autostart_reach import desktop_session_possible

        kind = autostart.choose_kind()
    except ImportError:
        return None
    except Exception as exc:  # noqa: BLE001 - AutostartError: not on this system at all
        return str(getattr(exc, "message", exc))
    if kind == "xdg" and not desktop_session_possible():
        return ("there is no desktop session here to read an autostart entry, and no systemd user manager "
                "answers from this shell (no user bus). Start it with `ohsync run --no-tray`, or see "
                "`ohsync autostart enable` for what would start it at boot.")
    return None


def cmd_setup(args: argparse.Namespace) -> int:
    """Run the setup flow; exit 0 when everything asked for was done."""
    from ..config import config_path, load_config
    from ..running import running_daemon
    from ..setup_flow import SetupAnswers, run_setup
    from ..setup_prompt import InputEnded, MissingAnswer, Prompter

    answers = SetupAnswers(server=args.server, username=args.username, password_stdin=args.password_stdin,
                           token_stdin=args.token_stdin, library=args.library,
                           create_library=args.create_library, local=args.local, drop=args.drop,
                           autostart=args.autostart, merge=args.merge, keyring=args.keyring)
    prompter = Prompter(scripted=args.yes)
    path = config_path(args.config)
    try:
        result = run_setup(answers, prompter, path, enable_autostart=autostart_enabler(),
                           autostart_unreachable=autostart_unreachable)
    except InputEnded as exc:
        print(f"ohsync: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except MissingAnswer as exc:
        raise UsageError(str(exc)) from None
    print(f"\nohsync is set up: '{result.library.name}' at {result.server} (as {result.username})\n"
          f"  mirror folder: {result.local}\n  drop folder:   {result.drop}\n  config:        {path}")
    if result.autostart:
        print(result.autostart, file=sys.stderr if result.autostart_failed else sys.stdout)
    running = running_daemon(load_config(path).socket, path)
    if running and running.same:
        print("ohsync is running with the old settings: restart it (`ohsync stop`, then `ohsync run`).")
    elif running and running.config:
        print(f"The ohsync daemon on this config's socket runs another config ({running.config}); this "
              "config's daemon can start once that one stops.")
    elif running:
        print("An ohsync daemon answers on this config's socket; if it runs this config, restart it "
              "(`ohsync stop`, then `ohsync run`).")
    print("Check everything with `ohsync doctor`.")
    return EXIT_FAILED if result.autostart_failed else EXIT_OK


def register(subparsers: Subparsers) -> None:
    """Add ``setup``."""
    help_ = "first run: sign in, pick the library and the folders, write the config"
    sp = add_command(subparsers, "setup", cmd_setup, help_, description=help_ + ". Every question has a flag; "
                     "--yes asks nothing and takes the defaults.")
    sp.add_argument("--server", metavar="URL", help="Seafile server (default https://cloud.tsinghua.edu.cn)")
    sp.add_argument("--username", metavar="EMAIL", help="your Seafile login (usually an e-mail address)")
    g = sp.add_mutually_exclusive_group()
    g.add_argument("--password-stdin", action="store_true",
                   help="read the password (and a two-factor code as a second line) from standard input")
    g.add_argument("--token-stdin", action="store_true", help="read an API token from standard input")
    sp.add_argument("--library", metavar="NAME|ID", help="library to mirror (default OH-Memory)")
    sp.add_argument("--create-library", action="store_true", help="create the library if it is missing")
    sp.add_argument("--local", metavar="DIR", help="mirror folder (default ~/<library>)")
    sp.add_argument("--drop", metavar="DIR", help="drop folder (default ~/OH-Drop)")
    sp.add_argument("--autostart", action=argparse.BooleanOptionalAction, default=None,
                    help="start ohsync when you log in (with --yes: off unless given)")
    add_keyring_option(sp)
    sp.add_argument("--merge", action="store_true",
                    help="allow a non-empty mirror folder: merge its files with the library")
    sp.add_argument("-y", "--yes", action="store_true",
                    help="ask nothing: take the defaults (autostart stays off), fail naming the flag for anything else")
