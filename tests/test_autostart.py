"""``ohsync autostart``, the packaging templates and systemd readiness (sd_notify).

HOME and XDG_CONFIG_HOME point into tmp_path, and ``systemctl`` /
``launchctl`` are stand-in scripts first on PATH that record their
arguments, so no test can touch the person's real login setup.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import isolated_env  # noqa: F401
from ohsync.daemon import autostart, autostart_reach, sd_notify
from ohsync.daemon.cli.main import main

OHSYNC = Path(sys.executable).parent / "ohsync"


def _stub(bin_dir: Path, name: str, body: str) -> Path:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)
    return path


@pytest.fixture
def home(isolated_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh HOME and XDG_CONFIG_HOME; stand-ins for systemctl/launchctl first on PATH."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("OHSYNC_CONFIG", raising=False)
    # no desktop session installed unless a test says so (desktop()), no lingering
    monkeypatch.setenv("XDG_DATA_DIRS", str(tmp_path / "xdg-data-dirs"))
    monkeypatch.setattr(autostart_reach, "LINGER_DIR", tmp_path / "linger")
    return home


def desktop(tmp_path: Path) -> None:
    """A machine with a desktop session installed (a display manager offers it)."""
    sessions = tmp_path / "xdg-data-dirs" / "xsessions"
    sessions.mkdir(parents=True, exist_ok=True)
    (sessions / "xfce.desktop").write_text("[Desktop Entry]\nName=Xfce Session\nExec=startxfce4\n")


def no_systemd(tmp_path: Path) -> None:
    """A systemctl that finds no user manager (as in a container or a non-systemd desktop)."""
    _stub(tmp_path / "bin", "systemctl", 'echo "Failed to connect to bus: No medium found" >&2\nexit 1\n')


def fake_systemd(tmp_path: Path) -> Path:
    """A systemctl with a user manager: it records each call and reports the unit enabled."""
    calls = tmp_path / "systemctl.calls"
    _stub(tmp_path / "bin", "systemctl",
          f'echo "$*" >> "{calls}"\ncase "$*" in *is-enabled*) echo enabled;; esac\nexit 0\n')
    return calls


def calls_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


# --------------------------------------------------------------------------- XDG autostart (no systemd)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG autostart is the Linux fallback")
def test_without_systemd_an_xdg_entry_runs_the_installed_ohsync(home, tmp_path, capsys) -> None:
    no_systemd(tmp_path)
    desktop(tmp_path)
    assert OHSYNC.is_file(), "the test venv has no ohsync console script"
    assert main(["autostart", "enable"]) == 0
    entry = tmp_path / "xdg-config" / "autostart" / "ohsync.desktop"
    text = entry.read_text(encoding="utf-8")
    assert f"Exec={OHSYNC} run\n" in text and "Type=Application" in text
    assert "X-GNOME-Autostart-enabled=true" in text
    assert not (tmp_path / "xdg-config" / "systemd").exists()
    out = capsys.readouterr().out
    assert str(entry) in out and "ohsync run" in out

    assert main(["autostart", "status"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("autostart: on (this machine uses xdg)") and f"starts: {OHSYNC} run" in out

    assert main(["autostart", "disable"]) == 0
    assert not entry.exists()
    assert f"Removed {entry}" in capsys.readouterr().out
    assert main(["autostart", "status"]) == 0
    assert capsys.readouterr().out.startswith("autostart: off")
    assert main(["autostart", "disable"]) == 0
    assert "nothing to remove" in capsys.readouterr().out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG autostart is the Linux fallback")
def test_headless_xdg_entry_is_said_to_start_nothing(home, tmp_path, capsys) -> None:
    """No user bus, no desktop session: enable says the entry will never run and what would;
    status and doctor agree that nothing starts at the next login."""
    from ohsync.daemon.doctor_local import _start_advice

    no_systemd(tmp_path)
    assert main(["autostart", "enable"]) == 1  # nothing that would work was set up
    out, err = capsys.readouterr()
    assert "Autostart not set up: Nothing on this machine would start ohsync at login" in err
    assert "nothing was installed" in err and "loginctl enable-linger" in err and "no user bus" in err
    assert f"`@reboot {OHSYNC} run --no-tray` in `crontab -e`" in err and "Traceback" not in err
    entry = tmp_path / "xdg-config" / "autostart" / "ohsync.desktop"
    assert not entry.exists()
    # an entry installed anyway (by an older ohsync, or by hand): status and doctor say it starts nothing
    entry.parent.mkdir(parents=True)
    entry.write_text(autostart.render_desktop_entry([str(OHSYNC), "run"], "x"), encoding="utf-8")
    assert main(["autostart", "status"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("autostart: installed, but will not start (this machine uses xdg)")
    assert "will not start at the next login" in out
    advice = _start_advice()
    assert "will not start it" in advice and "autostart enable" not in advice.split(":")[0]
    desktop(tmp_path)  # the same entry on a machine with a desktop: it will run
    assert main(["autostart", "status"]) == 0
    assert capsys.readouterr().out.startswith("autostart: on")
    assert "also starts at your next login" in _start_advice()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG autostart is the Linux fallback")
def test_enable_now_without_systemd_starts_the_daemon(home, tmp_path, isolated_env, monkeypatch,
                                                     capsys) -> None:
    from ohsync.daemon import credentials
    from ohsync.daemon.protocol import DaemonNotRunning, Method, RpcClient

    no_systemd(tmp_path)
    monkeypatch.setenv("OHSYNC_CONFIG", str(isolated_env.config))
    isolated_env.config.write_text(f'server = "http://127.0.0.1:9"\nusername = "u@x"\n'
                                   f'[[mirror]]\nlocal = "{tmp_path / "Mirror"}"\n')
    credentials.save_token("http://127.0.0.1:9", "u@x", "tok-0123456789")  # a login: `run` starts
    # no desktop session either: started now, but nothing starts it at the next login, which is said
    assert main(["autostart", "enable", "--now"]) == 1
    out, err = capsys.readouterr()
    assert "Started the daemon now (process" in out and "Autostart not set up" in err
    pid = int(out.split("(process ", 1)[1].split(")", 1)[0])
    try:
        assert RpcClient(isolated_env.socket, timeout=5).call(Method.PING)["pid"] == pid
        # disable stops what enable --now started, and says so
        assert main(["autostart", "disable"]) == 0
        out = capsys.readouterr().out
        assert f"Stopped the daemon that `ohsync autostart enable --now` started (process {pid})." in out
        with pytest.raises(DaemonNotRunning):
            RpcClient(isolated_env.socket, timeout=5).call(Method.PING)
        assert not autostart_reach.autostart_pid_file(isolated_env.socket).exists()
    finally:
        main(["stop"])  # only if the test failed before disable stopped it
        os.waitpid(pid, 0)  # our child: reap it


def test_disable_leaves_a_daemon_started_by_hand_running_and_says_so(home, tmp_path, isolated_env, monkeypatch,
                                                                     capsys) -> None:
    from ohsync.daemon.socket.server import SocketServer

    no_systemd(tmp_path)
    monkeypatch.setenv("OHSYNC_CONFIG", str(isolated_env.config))
    isolated_env.config.write_text('server = "http://127.0.0.1:9"\nusername = "u@x"\n')
    asked: list[str] = []
    server = SocketServer(isolated_env.socket, {"ping": lambda p: {"pid": 4242},
                                               "shutdown": lambda p: asked.append("shutdown") or {"stopping": True}})
    server.start()
    try:
        # a pid noted by an earlier `enable --now` whose daemon is gone: not this one
        autostart_reach.autostart_pid_file(isolated_env.socket).write_text("99999\n")
        assert main(["autostart", "disable"]) == 0
        out = capsys.readouterr().out
        assert "An ohsync daemon (process 4242) still runs" in out and "`ohsync stop` ends it" in out
        assert asked == []  # never asked to stop
        assert not autostart_reach.autostart_pid_file(isolated_env.socket).exists()
    finally:
        server.stop()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG autostart is the Linux fallback")
def test_enable_now_says_why_the_daemon_did_not_start(home, tmp_path, isolated_env, monkeypatch,
                                                     capsys) -> None:
    no_systemd(tmp_path)
    monkeypatch.setenv("OHSYNC_CONFIG", str(isolated_env.config))
    # no login saved: `ohsync run` refuses to start
    isolated_env.config.write_text('server = "http://127.0.0.1:9"\nusername = "u@x"\n')
    assert main(["autostart", "enable", "--now"]) == 1
    err = capsys.readouterr().err
    assert "exited at once (code 1)" in err and "Traceback" not in err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="systemd is Linux only")
def test_systemd_unit_without_lingering_says_when_it_runs(home, tmp_path, capsys) -> None:
    fake_systemd(tmp_path)
    assert main(["autostart", "enable"]) == 0
    assert "loginctl enable-linger" in capsys.readouterr().out
    linger = tmp_path / "linger"
    linger.mkdir()
    (linger / autostart_reach.getpass.getuser()).touch()
    assert main(["autostart", "enable"]) == 0
    assert "enable-linger" not in capsys.readouterr().out


def test_a_custom_config_is_passed_along(home, tmp_path, isolated_env, monkeypatch) -> None:
    no_systemd(tmp_path)
    desktop(tmp_path)
    monkeypatch.setenv("OHSYNC_CONFIG", str(isolated_env.config))
    lines = autostart.enable(config=isolated_env.config, kind="xdg")
    assert lines
    text = (tmp_path / "xdg-config" / "autostart" / "ohsync.desktop").read_text(encoding="utf-8")
    assert f"Exec={OHSYNC} --config {isolated_env.config} run\n" in text


def test_status_names_a_program_that_is_gone(home, tmp_path, capsys) -> None:
    no_systemd(tmp_path)
    gone = tmp_path / "old-venv" / "bin" / "ohsync"
    entry = autostart.desktop_path("ohsync.desktop")
    entry.parent.mkdir(parents=True)
    entry.write_text(autostart.render_desktop_entry([str(gone), "run"], "x"), encoding="utf-8")
    assert main(["autostart", "status"]) == 1
    out = capsys.readouterr().out
    assert f"starts {gone}, which does not exist any more" in out and "ohsync autostart enable" in out


# --------------------------------------------------------------------------- systemd user unit


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="systemd is Linux only")
def test_with_systemd_the_unit_is_installed_and_enabled(home, tmp_path, capsys) -> None:
    calls = fake_systemd(tmp_path)
    (tmp_path / "xdg-config" / "autostart").mkdir(parents=True)
    stale = tmp_path / "xdg-config" / "autostart" / "ohsync.desktop"
    stale.write_text("[Desktop Entry]\nExec=ohsync run\n")  # from an enable without systemd
    assert main(["autostart", "enable"]) == 0
    unit = tmp_path / "xdg-config" / "systemd" / "user" / "ohsync.service"
    text = unit.read_text(encoding="utf-8")
    assert f"ExecStart={OHSYNC} run --no-tray\n" in text
    for line in ("Type=notify", "Restart=on-failure", "WantedBy=default.target"):
        assert line + "\n" in text
    assert "@EXEC@" not in text
    assert calls_of(calls) == ["--user show-environment", "--user daemon-reload", "--user enable ohsync.service"]
    assert not stale.exists()  # never two daemons at login
    tray = tmp_path / "xdg-config" / "autostart" / "ohsync-tray.desktop"
    assert tray.exists() == autostart.has_tray()
    if tray.exists():
        assert f"Exec={OHSYNC} tray\n" in tray.read_text(encoding="utf-8")
    out = capsys.readouterr().out
    assert str(unit) in out and "systemctl --user start ohsync" in out

    assert main(["autostart", "status"]) == 0
    assert capsys.readouterr().out.startswith("autostart: on (this machine uses systemd)")

    calls.unlink()
    assert main(["autostart", "enable", "--now"]) == 0
    assert "--user enable --now ohsync.service" in calls_of(calls)

    calls.unlink()
    assert main(["autostart", "disable"]) == 0
    assert not unit.exists() and not tray.exists()
    assert "--user disable --now ohsync.service" in calls_of(calls)
    assert calls_of(calls)[-1] == "--user daemon-reload"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="systemd is Linux only")
def test_a_failing_systemctl_is_a_sentence(home, tmp_path, capsys) -> None:
    _stub(tmp_path / "bin", "systemctl",
          'case "$*" in *enable*) echo "Failed to enable unit: Access denied" >&2; exit 1;; esac\nexit 0\n')
    assert main(["autostart", "enable"]) == 1
    err = capsys.readouterr().err
    assert "Autostart:" in err and "Access denied" in err and "Traceback" not in err


def _verify_env(tmp_path: Path) -> dict[str, str]:
    runtime = Path(tempfile.mkdtemp(prefix="ohs-rt-", dir="/tmp"))  # systemd-analyze --user needs one
    runtime.chmod(0o700)
    return {**os.environ, "XDG_RUNTIME_DIR": str(runtime), "HOME": str(tmp_path / "home"),
            "XDG_CONFIG_HOME": str(tmp_path / "verify-config")}


def _analyze(unit_text: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    folder = tmp_path / "verify"
    folder.mkdir(exist_ok=True)
    unit = folder / "ohsync.service"
    unit.write_text(unit_text, encoding="utf-8")
    env = _verify_env(tmp_path)
    try:
        return subprocess.run(["systemd-analyze", "--user", "verify", str(unit)], capture_output=True,
                              text=True, timeout=60, env=env)
    finally:
        shutil.rmtree(env["XDG_RUNTIME_DIR"], ignore_errors=True)


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed (it comes with the systemd package)")
def test_systemd_analyze_accepts_the_generated_unit(tmp_path: Path) -> None:
    assert OHSYNC.is_file()
    done = _analyze(autostart.render_unit([str(OHSYNC), "run", "--no-tray"]), tmp_path)
    assert done.returncode == 0, done.stderr
    assert "ohsync.service" not in done.stderr, done.stderr  # no warning about our unit either
    # the checker does look: a unit naming a missing program is refused
    bad = _analyze(autostart.render_unit([str(tmp_path / "nowhere" / "ohsync"), "run"]), tmp_path)
    assert bad.returncode != 0 and "nowhere" in bad.stderr


@pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                    reason="systemd-analyze is not installed (it comes with the systemd package)")
def test_exec_start_quoting_survives_spaces_and_percent(tmp_path: Path) -> None:
    odd = tmp_path / "my tools" / "100%" / "ohsync"
    odd.parent.mkdir(parents=True)
    odd.write_text("#!/bin/sh\nexit 0\n")
    odd.chmod(0o755)
    text = autostart.render_unit([str(odd), "run", "--no-tray"])
    assert "%%" in text and '"' in text
    done = _analyze(text, tmp_path)
    assert done.returncode == 0, done.stderr  # systemd found the program at its real path


# --------------------------------------------------------------------------- macOS LaunchAgent


def test_launch_agent_runs_ohsync_and_restarts_only_after_a_failure(home, tmp_path) -> None:
    calls = tmp_path / "launchctl.calls"
    _stub(tmp_path / "bin", "launchctl", f'echo "$*" >> "{calls}"\nexit 0\n')
    said = autostart.enable(kind="launchd", now=True, log_dir=tmp_path / "logs")
    agent = home / "Library" / "LaunchAgents" / "org.ohsync.daemon.plist"
    assert str(agent) in said[0]
    data = plistlib.loads(agent.read_bytes())
    assert data["Label"] == "org.ohsync.daemon"
    assert data["ProgramArguments"] == [str(OHSYNC), "run"]
    assert data["RunAtLoad"] is True and data["KeepAlive"] == {"SuccessfulExit": False}
    assert data["StandardErrorPath"] == str(tmp_path / "logs" / "launchd.log")
    uid = os.getuid()
    assert calls_of(calls) == [f"bootout gui/{uid}/org.ohsync.daemon", f"bootstrap gui/{uid} {agent}"]
    st = autostart.status(kind="launchd")
    assert st.enabled and st.files == [(agent, f"{OHSYNC} run")] and st.problems == []
    assert autostart.disable(kind="launchd") == [f"Removed the LaunchAgent {agent}."]
    assert not agent.exists() and calls_of(calls)[-1] == f"bootout gui/{uid}/org.ohsync.daemon"


# --------------------------------------------------------------------------- sd_notify


def _notify_socket(monkeypatch: pytest.MonkeyPatch, abstract: bool = False) -> tuple[socket.socket, str]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    if abstract:
        name = f"ohsync-test-{os.getpid()}-{id(sock)}"
        sock.bind("\0" + name)
        address = "@" + name
    else:
        folder = tempfile.mkdtemp(prefix="ohs-n-", dir="/tmp")
        address = os.path.join(folder, "notify")
        sock.bind(address)
    sock.settimeout(10)
    monkeypatch.setenv("NOTIFY_SOCKET", address)
    return sock, address


def test_sd_notify_sends_datagrams_and_is_silent_outside_systemd(monkeypatch) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert sd_notify.ready() is False
    sock, address = _notify_socket(monkeypatch)
    try:
        assert sd_notify.ready("OH-Memory ↔ /x") is True
        assert sock.recv(4096).decode() == "READY=1\nSTATUS=OH-Memory ↔ /x"
        assert sd_notify.stopping() is True
        assert sock.recv(4096) == b"STOPPING=1"
    finally:
        sock.close()
        shutil.rmtree(os.path.dirname(address), ignore_errors=True)
    if sys.platform.startswith("linux"):
        sock, _ = _notify_socket(monkeypatch, abstract=True)
        try:
            assert sd_notify.notify("READY=1") is True
            assert sock.recv(4096) == b"READY=1"
        finally:
            sock.close()
    monkeypatch.setenv("NOTIFY_SOCKET", "/nonexistent/notify")
    assert sd_notify.ready() is False  # a lost notification never stops the daemon


def test_packaged_templates_are_the_repository_files() -> None:
    repo = Path(__file__).resolve().parent.parent / "packaging"
    for name in ("ohsync.service", "ohsync-tray.desktop", "org.ohsync.daemon.plist"):
        assert autostart._template(name) == (repo / name).read_text(encoding="utf-8")
