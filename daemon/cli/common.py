"""What every ``ohsync`` command shares: exit codes, usage errors, the config, the daemon's socket,
and the helpers a command module's ``register(subparsers)`` builds its parser with.

Exit codes (docs/architecture.md §10): 0 ok, 1 failed (the message says why
and what to do), 2 usage error, 3 daemon not running.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import Any, TypeAlias

from ..protocol import MIRROR_PARAM, RpcClient

__all__ = ["EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_NOT_RUNNING", "UsageError", "say_error", "read_config",
           "daemon_client", "Subparsers", "Handler", "add_command", "add_config_option", "add_mirror_option"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_RUNNING = 0, 1, 2, 3

#: What every command module's ``register`` is given: the ``ohsync`` parser's subcommands.
Subparsers: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"
#: A command's handler: the parsed arguments in, the exit code out.
Handler: TypeAlias = Callable[[argparse.Namespace], int]


def add_command(subparsers: Subparsers, name: str, func: Handler, help_: str, *,
                description: str | None = None) -> argparse.ArgumentParser:
    """Add command ``name`` run by ``func`` and return its parser (for its options).

    :param help_: its line in ``ohsync --help``, and its ``--help`` description
        unless ``description`` is given.
    """
    sp = subparsers.add_parser(name, help=help_, description=description or help_)
    sp.set_defaults(func=func)
    return sp


def add_config_option(sp: argparse.ArgumentParser) -> None:
    """``--config PATH`` on a command too (``ohsync status --config X`` as well as ``ohsync
    --config X status``); it sets the value only when given (SUPPRESS keeps the top one).
    A parser that has it already is left as it is, so this can run over every parser."""
    if "--config" in sp._option_string_actions:
        return
    sp.add_argument("--config", metavar="PATH", default=argparse.SUPPRESS,
                    help="config file (as before the command; default: $OHSYNC_CONFIG or the user "
                         "config dir)")


def add_mirror_option(sp: argparse.ArgumentParser) -> None:
    """``--mirror NAME`` of a command that acts on one mirror (daemon/daemon_methods.py says what
    each does without it when there are several).  Call it after the command's own options: the
    two options every such command shares come last, ``--config`` then ``--mirror``."""
    add_config_option(sp)
    sp.add_argument("--mirror", metavar="NAME", help="the mirror to act on (its name, library or folder), "
                                                     "when the config has several [[mirror]]")


class UsageError(Exception):
    """A usage mistake found after parsing (exit 2)."""


def say_error(text: str) -> None:
    """Print ``ohsync: text`` on standard error."""
    print(f"ohsync: {text}", file=sys.stderr)


def read_config(args: argparse.Namespace) -> Any:
    """The :class:`~ohsync.daemon.config.Config` of ``--config`` (else the default file).

    :raises ConfigError: the file is invalid.
    """
    from ..config import config_path, load_config

    cfg = load_config(config_path(args.config))
    return cfg


class _MirrorClient(RpcClient):
    """An :class:`RpcClient` that adds ``--mirror NAME`` to every request's params."""

    def __init__(self, path: Any, timeout: float | None, mirror: str | None, config: Any = None) -> None:
        super().__init__(path, timeout=timeout)
        self.mirror = mirror
        self.config = config
        self._noted = config is None

    def call(self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None) -> Any:
        if self.mirror:
            params = {**(params or {}), MIRROR_PARAM: self.mirror}
        try:
            return super().call(method, params, timeout=timeout)
        finally:
            if not self._noted and self.answered_config:  # once, before what the command prints
                self._noted = True
                _note_other_config(self.path, self.config, self.answered_config)


def daemon_client(args: argparse.Namespace, timeout: float | None = 10.0) -> RpcClient:
    """A client of the daemon's socket of this config; it names ``--mirror`` in every request
    (``timeout``: seconds per answer, None: no limit).  When the daemon answering there runs
    another config file (two configs can name one socket), a note on standard error says so
    before the command's own output: every answer names the daemon's config, so this costs no
    request of its own."""
    cfg = read_config(args)
    if getattr(args, "config", None) and not cfg.path.exists():
        raise UsageError(f"there is no config file {cfg.path} (--config); give an existing one, or run "
                         f"`ohsync --config {cfg.path} setup` to make it")
    return _MirrorClient(cfg.socket, timeout, getattr(args, "mirror", None), cfg.path)


def _note_other_config(socket: Any, config: Any, theirs: str) -> None:
    """Say on standard error that the daemon on ``socket`` runs the config file ``theirs``
    (from its answer's ``config`` member), when that is not ``config``."""
    from pathlib import Path

    from ..running import same_file

    if not same_file(Path(theirs), Path(config)):
        say_error(f"note: the daemon answering on {socket} runs the config {theirs}, not {config}; "
                  "what follows is that daemon's.")
