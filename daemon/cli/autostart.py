"""``ohsync autostart enable|disable|status``: start ohsync at login (see
:mod:`ohsync.daemon.autostart` for what goes where)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .common import Subparsers, add_command

__all__ = ["register"]


def _config_arg(args: argparse.Namespace) -> Path | None:
    """``--config`` for the autostart command line: only when another file than the default is used
    (``--config`` or ``OHSYNC_CONFIG``; a login session does not have the variable)."""
    from ..config import config_path

    if args.config or os.environ.get("OHSYNC_CONFIG"):
        return config_path(args.config).resolve()
    return None


def cmd_autostart(args: argparse.Namespace) -> int:
    from .. import autostart

    if args.action == "enable":
        from ..config import config_path, load_config

        cfg = load_config(config_path(args.config))
        try:
            lines = autostart.enable(config=_config_arg(args), now=args.now, log_dir=cfg.log_dir,
                                     socket=cfg.socket)
        except autostart.AutostartError as exc:
            for line in exc.done:  # what was done all the same (started now), before why autostart was not
                print(line)
            raise
        for line in lines:
            print(line)
        return 0
    if args.action == "disable":
        from ..autostart_reach import stop_started_daemon
        from ..config import config_path, load_config
        from ..tray_stop import stop_tray

        socket = load_config(config_path(args.config)).socket
        for line in autostart.disable():
            print(line)
        # what `enable --now` started stops with it; a daemon started by hand is only named
        for said in (stop_started_daemon(socket), stop_tray(socket)):
            if said:
                print(said)
        return 0
    st = autostart.status()
    state = "on" if st.will_run else "installed, but will not start" if st.enabled else "off"
    print(f"autostart: {state} (this machine uses {st.kind})")
    for path, command in st.files:
        print(f"  {path}\n    starts: {command}")
    for problem in st.problems:
        print(f"  problem: {problem}")
    return 1 if st.problems else 0


def register(subparsers: Subparsers) -> None:
    """Add ``autostart``."""
    sp = add_command(subparsers, "autostart", cmd_autostart,
                     "start ohsync at login (systemd user unit, XDG autostart or LaunchAgent)")
    sp.add_argument("action", choices=("enable", "disable", "status"),
                    help="enable: start ohsync at every login; disable: stop doing so; status: what will run")
    sp.add_argument("--now", action="store_true",
                    help="with enable: also start the daemon now (and wait until it answers)")
