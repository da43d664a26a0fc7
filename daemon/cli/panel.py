"""``ohsync panel`` (open the local page) and ``ohsync resolve PATH --keep live|other``.

Both ask the running daemon over its socket.  ``panel`` gets the page's
address with its secret (method ``panel``) and opens it in the default
browser (:mod:`webbrowser`); ``--url`` prints it instead, for scripts and
for a browser on another display.  ``resolve`` settles one conflict through
the daemon's one implementation (method ``resolve``, the same as the page's
buttons) and returns once the server holds the result.
"""

from __future__ import annotations

import argparse
import json
import os
import webbrowser
from pathlib import Path

from ..protocol import Method
from .common import (
    EXIT_FAILED,
    EXIT_OK,
    Subparsers,
    add_command,
    add_mirror_option,
    daemon_client,
    read_config,
    say_error,
)

__all__ = ["register", "cmd_panel", "cmd_resolve"]


def cmd_panel(args: argparse.Namespace) -> int:
    """``ohsync panel [--url]``: open the local page (or print its address)."""
    found = daemon_client(args).call(Method.PANEL)
    url = str(found["url"])
    if args.url:
        print(url)
        return EXIT_OK
    if not webbrowser.open(url, new=2):
        say_error("no browser could be started here; open this address in one "
                  f"(it is yours alone, do not share it): {url}")
        return EXIT_FAILED
    print(f"Opened the ohsync page ({found['address']}) in your browser.")
    return EXIT_OK


def cmd_resolve(args: argparse.Namespace) -> int:
    """``ohsync resolve PATH --keep live|other``: settle one conflict; exit 0 once the server holds it."""
    path = library_path(args.path, [m.local for m in read_config(args).mirrors])
    client = daemon_client(args, timeout=args.timeout + 30)
    result = client.call(Method.RESOLVE, {"path": path, "keep": args.keep, "timeout": args.timeout},
                         timeout=args.timeout + 30)
    if args.json:
        print(json.dumps(result, ensure_ascii=False))
    else:
        print(result.get("message") or f"Resolved {result.get('path')}.")
    return EXIT_OK


def library_path(given: str, folders: list[Path]) -> str:
    """``given`` as the library names it: a path inside one of the mirror
    ``folders`` (absolute, or relative to the current folder when it exists
    there) becomes relative to that folder; anything else is taken as is."""
    candidate = Path(given).expanduser()
    if candidate.is_absolute() or os.path.lexists(candidate):
        full = Path(os.path.abspath(candidate))
        for folder in folders:
            try:
                return full.relative_to(Path(os.path.abspath(folder))).as_posix()
            except ValueError:
                continue
    return given


def register(subparsers: Subparsers) -> None:
    """Add ``panel`` and ``resolve`` (which acts on one mirror)."""
    sp = add_command(subparsers, "panel", cmd_panel,
                     "open ohsync's local page in the browser (conflicts side by side, status, activity)")
    sp.add_argument("--url", action="store_true", help="print the page's address (with its secret) instead")
    sp = add_command(subparsers, "resolve", cmd_resolve,
                     "settle a conflict: keep the live version, or take the other one")
    sp.add_argument("path", metavar="PATH",
                    help="the conflicted file or its archived copy (in .conflict/), as the library names it "
                         "or as a path in the mirror")
    sp.add_argument("--keep", required=True, choices=("live", "other"),
                    help="live: delete the archived copy on both sides; other: make it the live file "
                         "(the version it replaces goes to .trash/)")
    sp.add_argument("--timeout", type=float, default=60.0, metavar="S",
                    help="seconds to wait for the server (default: %(default)s)")
    sp.add_argument("--json", action="store_true", help="print the result as JSON")
    add_mirror_option(sp)
