"""The README's uninstall steps leave nothing running and nothing in the keyring:
``ohsync stop`` ends the user's ``ohsync tray`` too, and the tray reaps a daemon it started."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import isolated_env, seed_daemon, wait_for  # noqa: F401
from ohsync.daemon.protocol import tray_pid_file


def _fake_tray(socket: Path) -> subprocess.Popen[bytes]:
    """A process whose command line is an ``ohsync … tray`` and that wrote the tray's pid file."""
    # why: the fake tray stays up until the test stops it
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "ohsync", "tray"])
    pid_file = tray_pid_file(socket)
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.write_text(f"{proc.pid}\n")
    return proc


def test_uninstall_sequence_leaves_no_process_and_no_keyring_entry(seed_daemon) -> None:
    setup = seed_daemon(files={"a.md": b"hello\n"})
    env = setup.env
    daemon = setup.start(wait="idle")
    tray = _fake_tray(env.socket)
    assert json.loads(env.keyring_file.read_text())["ohsync"]  # the login is there
    try:
        done = daemon.cli("autostart", "disable")
        assert done.returncode == 0, done.stderr
        assert "Stopped the ohsync tray icon" in done.stdout  # disable ends the tray too
        tray.wait(10)
        tray = _fake_tray(env.socket)  # a tray started again (its autostart entry was gone already)
        done = daemon.cli("stop")
        assert done.returncode == 0, done.stderr
        assert "ohsync stopped." in done.stdout and f"Stopped the ohsync tray icon (process {tray.pid})" in done.stdout
        assert daemon.wait_exit(30) == 0
        assert tray.wait(10) is not None
        assert not tray_pid_file(env.socket).exists()
        done = daemon.cli("logout")
        assert done.returncode == 0, done.stderr
        # nothing left of the login: no entry, no empty [ohsync] section, no file
        assert not env.keyring_file.exists()
    finally:
        if tray.poll() is None:
            tray.kill()
            tray.wait()


def test_stop_without_a_daemon_still_ends_the_tray(isolated_env) -> None:
    from ohsync.daemon.cli.main import main

    tray = _fake_tray(isolated_env.socket)
    try:
        assert main(["stop"]) == 3  # the daemon is not running: said so, as before
        assert tray.wait(10) is not None
    finally:
        if tray.poll() is None:
            tray.kill()
            tray.wait()


def test_a_stale_tray_pid_file_signals_nothing(isolated_env) -> None:
    from ohsync.daemon.tray_stop import stop_tray

    # why: the bystander stays up until the test stops it
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        pid_file = tray_pid_file(isolated_env.socket)
        pid_file.parent.mkdir(parents=True, exist_ok=True)
        pid_file.write_text(f"{bystander.pid}\n")  # a reused pid: not an ohsync tray
        assert stop_tray(isolated_env.socket) is None
        assert bystander.poll() is None and not pid_file.exists()
    finally:
        bystander.kill()
        bystander.wait()


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return False


def _children() -> set[int]:
    """Pids of this process's children, zombies included."""
    found: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            found.update(int(p) for p in (task / "children").read_text().split())
        except OSError:
            continue
    return found


def test_the_tray_reaps_the_daemon_it_started(isolated_env) -> None:
    """The Start item's daemon, once it has exited, leaves no zombie behind while the tray runs."""
    from ohsync.daemon.socket.server import SocketServer
    from ohsync.tray.app import TrayController

    server = SocketServer(isolated_env.socket, {"status": lambda p: {"state": "idle", "message": "ok"},
                                                 "conflicts": lambda p: []})
    # why: a started "daemon" that lives a second, then exits
    ctl = TrayController(isolated_env.socket, start_command=[sys.executable, "-c", "import time; time.sleep(1)"])
    before = _children()
    try:
        ctl.start()
        server.start()
        assert ctl.start_daemon()  # the stand-in answers on the socket: "started"
        (pid,) = _children() - before
        server.stop()  # the daemon goes away; its process exits a moment later
        wait_for(lambda: not Path(f"/proc/{pid}").exists(), timeout=20,
                 what="the started process reaped (not left a zombie)")
    finally:
        ctl.stop()
        server.stop()
