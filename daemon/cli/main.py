"""The ``ohsync`` command: the ordered list of commands, argument parsing and exit codes.

Every command (or family of commands) is a module of this package with one
``register(subparsers) -> None`` that adds its parsers and sets each one's
handler (``set_defaults(func=...)``, through
:func:`~ohsync.daemon.cli.common.add_command`); :data:`COMMANDS` lists those
modules in the order ``ohsync --help`` shows them, and nothing else adds a
command.  What the modules share is ``daemon/cli/common.py``.  This module
builds the parser from the list (:func:`build_parser`) and turns errors into
exit codes (:func:`main`).  Heavy imports happen inside the commands.  Exit
codes (docs/architecture.md §10): 0 ok, 1 failed (the message says why and
what to do), 2 usage error, 3 daemon not running.  Expected errors print
``title: message``, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from ...engine.errors import OhsyncError, classify, local_error
from ..about import version
from ..protocol import DaemonNotRunning, RpcError
from . import (
    autostart,
    demo,
    doctor,
    log,
    login,
    memory,
    panel,
    requests,
    resync,
    run,
    setup,
    status,
    stop,
    trash,
)
from .common import (
    EXIT_FAILED,
    EXIT_NOT_RUNNING,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    add_config_option,
)
from .common import (
    say_error as _err,
)

__all__ = ["main", "build_parser", "COMMANDS", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_NOT_RUNNING",
           "UsageError"]

#: The command modules, in the order ``ohsync --help`` lists their commands: each one's
#: ``register(subparsers)`` adds its commands (a new command: a new module and one line here).
COMMANDS: tuple[ModuleType, ...] = (
    login,  # login, logout
    run,  # run, tray
    status,
    requests,  # refresh, pause, resume, wait, conflicts, damaged, activity, file, confirm-deletes
    resync,
    stop,
    demo,
    memory,  # memory …, mcp
    setup,
    doctor,
    autostart,
    log,
    panel,  # panel, resolve
    trash,
)


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    """The ``ohsync`` parser: the global options, then every module of :data:`COMMANDS` registered
    in order; each parser below it also takes ``--config`` after the command."""
    p = argparse.ArgumentParser(prog="ohsync", description="Two-way sync of a Seafile library with a local folder.")
    p.add_argument("--config", metavar="PATH", help="config file (default: $OHSYNC_CONFIG or the user config dir)")
    p.add_argument("--version", action="version", version=f"ohsync {version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMANDS:
        module.register(sub)
    for sp in _subparsers(p):
        add_config_option(sp)
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
