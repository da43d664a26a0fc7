"""``ohsync demo``: the whole product on one machine, touching nothing of the person's.

Starts devserver in this process (127.0.0.1, random port) with a small
OH-Memory library from ``devserver/demo_library/``, writes an isolated
config, state dir and plaintext file keyring (:mod:`ohsync.daemon.file_keyring`)
into a demo folder, and runs the real daemon mirroring the library into
``<demo>/OH-Memory``.  It prints what to try, runs until Ctrl-C (or
``--seconds N``), and removes the temporary folder afterwards unless
``--dir`` chose one.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import tomli_w

__all__ = ["DEMO_USER", "DEMO_PASSWORD", "demo_library_path", "run_demo"]

DEMO_USER = "demo@example.edu.cn"
DEMO_PASSWORD = "demo-password"


def demo_library_path() -> Path:
    """The demo library's tree shipped with devserver."""
    from .. import devserver

    return Path(devserver.__file__).resolve().parent / "demo_library"


def _start_devserver(data_dir: Path) -> Any:
    from ..devserver import DevServer

    srv = DevServer(data_dir, users={DEMO_USER: DEMO_PASSWORD})
    started = srv.start()
    return started if started is not None else srv


def _command_name() -> str:
    """How the person can call ohsync from another terminal."""
    if shutil.which("ohsync"):
        return "ohsync"
    script = Path(sys.argv[0])
    if script.name == "ohsync":
        return shlex.quote(str(script.resolve()))
    return f"{shlex.quote(sys.executable)} -m ohsync.daemon.cli"


def run_demo(*, seconds: float | None = None, directory: str | None = None, tray: bool = True,
             poll_interval: float = 2.0, verbose: bool = False) -> int:
    """Run the demo; returns the exit code."""
    from .app import Daemon, display_available
    from .config import load_config
    from .credentials import save_token
    from .logs import setup_logging

    keep = directory is not None
    base = Path(directory).expanduser().resolve() if directory else Path(tempfile.mkdtemp(prefix="ohsync-demo-"))
    base.mkdir(parents=True, exist_ok=True)
    mirror = base / "OH-Memory"
    drop = base / "OH-Drop"
    config_file = base / "config.toml"
    socket_path = base / "run" / "ohsync.sock"  # a folder of its own: the socket folder must be 0700
    if len(os.fsencode(socket_path)) > 100:  # AF_UNIX paths are short
        socket_path = Path(tempfile.mkdtemp(prefix="ohsync-demo-sock-")) / "ohsync.sock"

    # isolation: this process never sees the person's config, socket or keyring
    os.environ["PYTHON_KEYRING_BACKEND"] = "ohsync.daemon.file_keyring.FileKeyring"
    os.environ["OHSYNC_KEYRING_FILE"] = str(base / "keyring.json")
    os.environ["OHSYNC_CONFIG"] = str(config_file)
    os.environ["OHSYNC_SOCKET"] = str(socket_path)

    srv = _start_devserver(base / "server")
    try:
        srv.create_library(DEMO_USER, "OH-Memory", from_tree=demo_library_path())
        save_token(srv.url, DEMO_USER, srv.token_for(DEMO_USER))
        config_file.write_text(tomli_w.dumps({
            "server": srv.url, "username": DEMO_USER, "poll_interval": poll_interval,
            "state_dir": str(base / "state"), "socket": str(socket_path),
            "mirror": [{"library": "OH-Memory", "remote": "/", "local": str(mirror)}],
            "filing": {"drop_dir": str(drop), "default": "/Files/_inbox/",
                       "rules": [{"match": "*.pdf", "dest": "/Files/downloads/{yyyy}-{mm}/"}]},
        }), encoding="utf-8")
        cfg = load_config(config_file)
        setup_logging(cfg.log_dir, verbose=verbose, stderr=verbose)
        # the demo's own config names its socket: commands given it reach this daemon, and the
        # "daemon runs another config" note stays quiet (it would speak for OHSYNC_SOCKET alone)
        env = f"{_command_name()} --config {shlex.quote(str(config_file))}"
        print(f"""ohsync demo
  server:  {srv.url}  (a local test server; user {DEMO_USER}, password {DEMO_PASSWORD})
  library: OH-Memory
  mirror:  {mirror}
  logs:    {cfg.log_dir / 'ohsync.log'}

Try:
  • edit a file there, e.g.
      echo '- [demo] 2026-10-31 21:00 在本地加了一行 #演示' >> {shlex.quote(str(mirror / 'journal' / '2026-10.md'))}
    and watch it reach the server: {env} activity
  • drop a document into {shlex.quote(str(drop))}: it is filed into /Files/ with a summary sidecar
    and a journal line (PDFs go to /Files/downloads/<year>-<month>/)
  • {env} status
  • {env} pause / resume / conflicts / stop
Press Ctrl-C to stop{'' if seconds is None else f' (stops by itself after {seconds:g} s)'}.
""", flush=True)
        code = Daemon(cfg, tray=tray and display_available(), stop_after=seconds).run()
        files = sum(1 for p in mirror.rglob("*") if p.is_file()) if mirror.exists() else 0
        print(f"ohsync demo stopped; the mirror held {files} files.")
        return code
    finally:
        stop = getattr(srv, "stop", None) or getattr(srv, "close", None)
        if stop is not None:
            stop()
        if keep:
            print(f"Demo files kept in {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
            if socket_path.parent != base:
                shutil.rmtree(socket_path.parent, ignore_errors=True)
        sys.stdout.flush()
