"""``ohsync stop``: ask the daemon to exit, wait until it has, and stop an ``ohsync tray`` of its socket."""

from __future__ import annotations

import argparse
import time

from ..protocol import DaemonNotRunning, Method, RpcError
from ..tray_stop import stop_tray
from .common import EXIT_FAILED, EXIT_OK, Subparsers, add_command, daemon_client, read_config, say_error

__all__ = ["register", "cmd_stop"]


def cmd_stop(args: argparse.Namespace) -> int:
    """``ohsync stop``: ask the daemon to exit and wait until it has (exit 1 after ``--timeout``);
    an ``ohsync tray`` of this socket is stopped too (daemon/tray_stop.py)."""
    client = daemon_client(args)
    try:
        client.call(Method.SHUTDOWN)
    except DaemonNotRunning:
        said = stop_tray(read_config(args).socket)
        if said:
            print(said)
        raise
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        try:
            client.call(Method.PING, timeout=2)
        except (DaemonNotRunning, ConnectionError, OSError):
            print("ohsync stopped.")
            said = stop_tray(read_config(args).socket)
            if said:
                print(said)
            return EXIT_OK
        except RpcError:
            pass
        time.sleep(0.2)
    say_error(f"the daemon is still finishing after {args.timeout:g} s; it will exit when its current "
         "transfer ends")
    return EXIT_FAILED


def register(subparsers: Subparsers) -> None:
    """Add ``stop``."""
    sp = add_command(subparsers, "stop", cmd_stop, "stop the daemon")
    sp.add_argument("--timeout", type=float, default=130.0, metavar="S",
                    help="seconds to wait for the daemon to finish its pass and exit (default: %(default)s)")
