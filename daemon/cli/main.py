"""The ``ohsync`` command: argument parsing and exit codes, nothing else.

Every command is a thin function in a module of its own kind: the daemon
commands are clients of the socket (``daemon/cli/requests.py``,
``daemon/cli/status.py``), ``login``/``logout`` talk to the server and the
keyring (``daemon/cli/login.py``), ``run`` and ``demo`` start the daemon
(``daemon/cli/run.py``); what they share is ``daemon/cli/common.py``.  This
module registers them (:func:`build_parser`) and turns errors into exit
codes (:func:`main`).  Heavy imports happen inside the commands.  Exit codes
(docs/architecture.md §10): 0 ok, 1 failed (the message says why and what to
do), 2 usage error, 3 daemon not running.  Expected errors print ``title:
message``, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from . import autostart as cli_autostart, log as cli_log, panel as cli_panel, trash as cli_trash
from ..about import version
from .common import (
    EXIT_FAILED,
    EXIT_NOT_RUNNING,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    daemon_client as _client,
    say_error as _err,
)
from .login import cmd_login, cmd_logout
from .requests import (
    cmd_activity,
    cmd_confirm_deletes,
    cmd_conflicts,
    cmd_damaged,
    cmd_file,
    cmd_stop,
    cmd_wait,
    pause_resume_command as _pause_resume,
    simple_command as _simple,
)
from .resync import add_resync
from .run import TRAY_EXTRA_HINT, cmd_demo, cmd_run, cmd_tray
from .setup import add_keyring_option
from .status import EXIT_CODES_HELP, cmd_status
from ..protocol import DaemonNotRunning, Method, RpcError
from ...engine.errors import OhsyncError, classify, local_error

__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_NOT_RUNNING", "UsageError",
           "TRAY_EXTRA_HINT", "cmd_login", "cmd_logout", "cmd_run", "cmd_tray", "cmd_demo", "cmd_status", "cmd_wait",
           "cmd_conflicts", "cmd_damaged", "cmd_activity", "cmd_file", "cmd_confirm_deletes", "cmd_stop", "_client"]


#: Commands that act on one mirror take ``--mirror NAME`` (daemon/daemon_methods.py says what
#: each does without it when there are several).
MIRROR_COMMANDS = ("login", "status", "refresh", "pause", "resume", "wait", "conflicts", "damaged", "activity",
                   "confirm-deletes", "resync", "mcp", "resolve", "trash")


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ohsync", description="Two-way sync of a Seafile library with a local folder.")
    p.add_argument("--config", metavar="PATH", help="config file (default: $OHSYNC_CONFIG or the user config dir)")
    p.add_argument("--version", action="version", version=f"ohsync {version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, fn: Callable[[argparse.Namespace], int], help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.set_defaults(func=fn)
        return sp

    sp = add("login", cmd_login, "sign in and store the token in the keyring")
    sp.add_argument("--server", metavar="URL", help="the Seafile server's address (default: the config's)")
    sp.add_argument("--username", metavar="EMAIL", help="your Seafile login (default: the config's)")
    g = sp.add_mutually_exclusive_group()
    g.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    g.add_argument("--token-stdin", action="store_true", help="read an API token from standard input")
    add_keyring_option(sp)
    sp = add("logout", cmd_logout, "remove the stored token")
    sp.add_argument("--server", metavar="URL", help="the server of the login to remove (default: the config's)")
    sp.add_argument("--username", metavar="EMAIL", help="the login to remove (default: the config's)")
    sp = add("run", cmd_run, "run the daemon in the foreground")
    sp.add_argument("--no-tray", action="store_true", help="no tray icon, even with a display")
    sp.add_argument("-v", "--verbose", action="store_true", help="also log debug lines (idle polls, timings)")
    add("tray", cmd_tray, "show the tray icon for a running daemon")
    sp = add("status", cmd_status, "show what the daemon is doing")
    sp.epilog = EXIT_CODES_HELP
    sp.add_argument("--json", action="store_true", help="print the status object")
    add("refresh", _simple(Method.REFRESH, "Checking the server and the local folder now."),
        "check the server and the local folder now")
    add("pause", _pause_resume(Method.PAUSE, "paused"), "pause syncing")
    add("resume", _pause_resume(Method.RESUME, "resumed"), "resume syncing")
    sp = add("wait", cmd_wait, "wait until everything on disk now is synced")
    sp.add_argument("--timeout", type=float, default=60.0, metavar="S",
                    help="give up after S seconds (exit 1; default: %(default)s)")
    sp = add("conflicts", cmd_conflicts, "list conflicts and where the other versions are")
    sp.add_argument("--json", action="store_true", help="print the list as JSON")
    sp = add("damaged", cmd_damaged, "list memory files that do not parse")
    sp.add_argument("--json", action="store_true", help="print the list as JSON")
    sp = add("activity", cmd_activity, "show recent sync activity")
    sp.add_argument("--limit", type=int, default=50, metavar="N", help="the last N events (default: %(default)s)")
    sp.add_argument("--json", action="store_true", help="print the events as JSON")
    sp = add("file", cmd_file, "file documents into /Files/ (as if dropped into the drop folder)")
    sp.add_argument("paths", nargs="+", metavar="PATH", help="the documents to file, one or more")
    sp.add_argument("--timeout", type=float, default=600.0, metavar="S",
                    help="seconds to wait until they are filed and uploaded (default: %(default)s)")
    sp = add("confirm-deletes", cmd_confirm_deletes, "carry out deletions held by the safety valve")
    sp.add_argument("--list", action="store_true", help="only list the held deletions")
    add_resync(sub)
    sp = add("stop", cmd_stop, "stop the daemon")
    sp.add_argument("--timeout", type=float, default=130.0, metavar="S",
                    help="seconds to wait for the daemon to finish its pass and exit (default: %(default)s)")
    sp = add("demo", cmd_demo, "try ohsync against a local test server with a sample library")
    sp.add_argument("--seconds", type=float, default=None, metavar="N", help="stop after N seconds")
    sp.add_argument("--dir", metavar="DIR", help="put the demo here and keep it (default: a temp dir, removed)")
    sp.add_argument("--poll-interval", type=float, default=2.0, metavar="S",
                    help="seconds between remote checks (default: %(default)s)")
    sp.add_argument("--no-tray", action="store_true", help="no tray icon, even with a display")
    sp.add_argument("-v", "--verbose", action="store_true", help="also log debug lines")
    from . import doctor as cli_doctor, setup as cli_setup
    from .memory import register as register_memory

    register_memory(add)
    cli_setup.register(sub)
    cli_doctor.register(sub)
    cli_autostart.register(add)
    cli_log.register(add)
    cli_panel.register(add)
    cli_trash.register(add)
    _global_options_after_commands(p)
    for name in MIRROR_COMMANDS:
        sub.choices[name].add_argument(
            "--mirror", metavar="NAME", help="the mirror to act on (its name, library or folder), "
                                             "when the config has several [[mirror]]")
    return p


def _subparsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """Every parser below ``parser`` (commands and their own subcommands), depth first."""
    found: list[argparse.ArgumentParser] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):  # aliases map to one parser
                found.append(child)
                found.extend(_subparsers(child))
    return found


def _global_options_after_commands(top: argparse.ArgumentParser) -> None:
    """``ohsync status --config X`` as well as ``ohsync --config X status``: the command's
    copy of ``--config`` sets the value only when it is given (SUPPRESS keeps the top one)."""
    for sp in _subparsers(top):
        sp.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS,
                        help="config file (as before the command; default: $OHSYNC_CONFIG or the user "
                             "config dir)")


def main(argv: Sequence[str] | None = None) -> int:
    """The console script. Returns (and exits with) the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    args.own_process = argv is None  # the console script or `python -m`: the process is this command's
    try:
        code: int = args.func(args)  # every command's handler returns its exit code
    except UsageError as exc:
        parser.print_usage(sys.stderr)
        _err(str(exc))
        code = EXIT_USAGE
    except DaemonNotRunning as exc:
        _err(f"{exc}. Start it with `ohsync run`.")
        code = EXIT_NOT_RUNNING
    except RpcError as exc:
        _err(f"the daemon refused: {exc.message.removeprefix('refused: ')}")
        code = EXIT_FAILED
    except OhsyncError as exc:
        failure = classify(exc)
        _err(f"{failure.title}: {failure.message}")
        code = EXIT_FAILED
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:  # `ohsync status | head -1`: the reader went away, not the daemon
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = EXIT_OK
    except (ConnectionError, TimeoutError) as exc:
        _err(f"lost the connection to the daemon ({exc}); check `ohsync status`")
        code = EXIT_FAILED
    except OSError as exc:  # a local file the command reads or writes (config, log, a path given)
        failure = classify(local_error(exc, exc.filename if isinstance(exc.filename, str) else None))
        _err(f"{failure.title}: {failure.message}")
        code = EXIT_FAILED
    if __name__ == "__main__" or argv is None:
        sys.exit(code)
    return code


if __name__ == "__main__":  # pragma: no cover
    main()
