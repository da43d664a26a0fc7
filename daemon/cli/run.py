"""``ohsync run`` and ``ohsync tray``: the commands that start the daemon or its tray icon."""

from __future__ import annotations

import argparse
import os

from ...engine.errors import OhsyncError
from .common import EXIT_OK, Subparsers, add_command, read_config

__all__ = ["register", "TRAY_EXTRA_HINT", "cmd_run", "cmd_tray"]

# ohsync is installed from its source folder (it is on no package index), so name commands that work there:
# both ways, for text that does not probe the machine (`ohsync tray` names the one that fits: install_hint)
TRAY_EXTRA_HINT = ("Install the tray from the ohsync source folder: with the distribution's GObject bindings "
                   "`pipx install --force --python /usr/bin/python3 --system-site-packages '.[tray-system]'`, "
                   "or `pipx install --force '.[tray]'` (or `pip install --user '.[tray]'`), which builds "
                   "PyGObject; see the README.")


def cmd_run(args: argparse.Namespace) -> int:
    """``ohsync run``: the daemon in the foreground until it is stopped; returns its exit code.

    :raises OhsyncError: no mirror has a saved login."""
    if getattr(args, "own_process", False):  # started as `ohsync run`, not called by another program
        from ..allocator import use_system_malloc

        use_system_malloc()  # returns only when it keeps this process as it is
    from ..app import Daemon
    from ..crash_at import install_from_env
    from ..credentials import load_token
    from ..logs import setup_logging
    from ..session import no_login_message

    install_from_env()  # crash tests: die at the engine's named point
    cfg = read_config(args)
    # with several mirrors, one without a login stops alone (its status says so); none at all: refuse
    if not any(all(account) and load_token(*account) for account in map(cfg.account, cfg.mirrors)):
        raise OhsyncError(no_login_message(cfg), title="Not logged in")
    # OHSYNC_LOG_STDERR=0: stderr is kept for the last words (the tray's Start item reads them)
    log_file = setup_logging(cfg.log_dir, verbose=args.verbose, stderr=os.environ.get("OHSYNC_LOG_STDERR") != "0")
    if log_file:
        import logging

        logging.getLogger(__name__).info("log file: %s", log_file)
    return Daemon(cfg, tray=not args.no_tray).run()


def cmd_tray(args: argparse.Namespace) -> int:
    """``ohsync tray``: the tray icon of a running daemon (needs the ``[tray]`` extra and a display)."""
    cfg = read_config(args)
    try:
        from ...tray.app import default_start_command, run_tray
    except ImportError as exc:
        from ...tray.install_hint import install_hint  # stdlib only: loads without the extra

        raise OhsyncError(f"The tray is not available ({exc}). {install_hint()}", title="No tray") from exc
    try:
        start = default_start_command(args.config) if args.config else None
        run_tray(cfg.socket, owns_daemon=False, start_command=start)
    except RuntimeError as exc:  # TrayUnavailable: no display, no PyGObject…; its message says what to do
        raise OhsyncError(str(exc), title="No tray") from exc
    return EXIT_OK


def register(subparsers: Subparsers) -> None:
    """Add ``run`` and ``tray``."""
    sp = add_command(subparsers, "run", cmd_run, "run the daemon in the foreground")
    sp.add_argument("--no-tray", action="store_true", help="no tray icon, even with a display")
    sp.add_argument("-v", "--verbose", action="store_true", help="also log debug lines (idle polls, timings)")
    add_command(subparsers, "tray", cmd_tray, "show the tray icon for a running daemon")
