"""``ohsync demo``: the daemon against a local test server (devserver) with a sample library
(:mod:`ohsync.daemon.demo`)."""

from __future__ import annotations

import argparse

from .common import Subparsers, add_command

__all__ = ["register", "cmd_demo"]


def cmd_demo(args: argparse.Namespace) -> int:
    """``ohsync demo``: the daemon against a local devserver with a sample library; its exit code."""
    from ..demo import run_demo

    return run_demo(seconds=args.seconds, directory=args.dir, tray=not args.no_tray,
                    poll_interval=args.poll_interval, verbose=args.verbose)


def register(subparsers: Subparsers) -> None:
    """Add ``demo``."""
    sp = add_command(subparsers, "demo", cmd_demo, "try ohsync against a local test server with a sample library")
    sp.add_argument("--seconds", type=float, default=None, metavar="N", help="stop after N seconds")
    sp.add_argument("--dir", metavar="DIR", help="put the demo here and keep it (default: a temp dir, removed)")
    sp.add_argument("--poll-interval", type=float, default=2.0, metavar="S",
                    help="seconds between remote checks (default: %(default)s)")
    sp.add_argument("--no-tray", action="store_true", help="no tray icon, even with a display")
    sp.add_argument("-v", "--verbose", action="store_true", help="also log debug lines")
