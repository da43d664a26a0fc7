"""``python -m ohsync.tray``: the tray icon alone, as a client of a running daemon.

Same as ``ohsync tray``: Quit closes only the tray.  Exit codes: 0 closed,
1 the tray cannot be shown here (the message says what to install).
"""

from __future__ import annotations

import argparse
import logging
import sys

from .app import default_start_command, run_tray
from .desktop import TrayUnavailable

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m ohsync.tray", description=__doc__.splitlines()[0])
    parser.add_argument("--socket", help="the daemon's socket (default: OHSYNC_SOCKET or the runtime dir)")
    parser.add_argument("--config", help="the config file the Start item passes to `ohsync run` "
                                         "(default: the daemon's own lookup)")
    parser.add_argument("--backend", help="force a pystray backend: appindicator, gtk, …")
    parser.add_argument("-v", "--verbose", action="store_true", help="log to stderr")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(threadName)s %(name)s: %(message)s")
    try:
        start = default_start_command(args.config) if args.config else None
        run_tray(args.socket, owns_daemon=False, backend=args.backend, start_command=start)
    except TrayUnavailable as exc:
        print(f"ohsync tray: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
