"""``ohsync resync``: reconcile both sides again, deleting nothing.

When the library's history went backwards on the server (a restore from
history or a snapshot rollback: the daemon holds remote deletes and
overwrites and says so in ``ohsync status``), a resync keeps the newer
version from either side on both; ``--afresh`` forgets the sync history
instead, and ``--keep-newer`` asks for the first explicitly.
"""

from __future__ import annotations

import argparse

from ..protocol import Method
from .common import EXIT_OK, Subparsers, add_command, add_mirror_option, daemon_client

__all__ = ["register", "cmd_resync"]


def cmd_resync(args: argparse.Namespace) -> int:
    """Send ``resync`` (``{"keep": "newer"|"afresh"}``) and say what it does."""
    keep = "newer" if args.keep_newer else "afresh" if args.afresh else None
    result = daemon_client(args).call(Method.RESYNC, {"keep": keep} if keep else {})
    if (result or {}).get("keep") == "newer":
        print("Resyncing: keeping the newer version from either side on both. Newer local files are "
              "uploaded, server edits made after the rollback are merged in, nothing is deleted; the "
              "server's older versions stay in .conflict/.")
    else:
        print("Resyncing: both sides are compared afresh; nothing is deleted.")
    return EXIT_OK


def register(subparsers: Subparsers) -> None:
    """Add ``resync``."""
    sp = add_command(subparsers, "resync", cmd_resync, "reconcile both sides again, deleting nothing (after a server "
                     "rollback: keep the newer of either side)")
    g = sp.add_mutually_exclusive_group()
    g.add_argument("--keep-newer", action="store_true",
                   help="keep the newer version from either side (the default after a server rollback)")
    g.add_argument("--afresh", action="store_true",
                   help="forget the sync history and compare both sides afresh")
    add_mirror_option(sp)
