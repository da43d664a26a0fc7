"""The daemon's log: one place, rotating, one line per sync action, never the token;
``ohsync log [-f] [-n N]``; and the daemon's readiness notice to systemd."""

from __future__ import annotations

import logging
import logging.handlers
import os
import re
import shutil
import socket
import sys
import tempfile
import threading
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import DEMO_LIBRARY, DaemonProc, isolated_env, ohsync_cmd, wait_for, write_config  # noqa: F401
from ohsync.daemon import logs
from ohsync.daemon.cli.log import follow, last_lines
from ohsync.daemon.cli.main import main
from ohsync.daemon.config import load_config

USER = "user@example.edu.cn"
PASSWORD = "secret"


@pytest.fixture
def clean_logging():
    """setup_logging() changes the root logger: undo it after the test."""
    yield
    root = logging.getLogger()
    for h in list(root.handlers):
        if getattr(h, "_ohsync", False):
            root.removeHandler(h)
            h.close()
    root.setLevel(logging.WARNING)


def test_one_place_for_run_and_demo(tmp_path: Path) -> None:
    plain = tmp_path / "plain.toml"
    plain.write_text('server = "https://s.example"\n', encoding="utf-8")
    cfg = load_config(plain)
    assert cfg.log_dir == cfg.state_dir / "logs"  # `ohsync run` with the default state_dir
    moved = tmp_path / "moved.toml"
    moved.write_text(f'state_dir = "{tmp_path}/st"\n', encoding="utf-8")
    assert load_config(moved).log_dir == tmp_path / "st" / "logs"  # the demo sets state_dir
    own = tmp_path / "own.toml"
    own.write_text(f'state_dir = "{tmp_path}/st"\nlog_dir = "{tmp_path}/elsewhere"\n', encoding="utf-8")
    assert load_config(own).log_dir == tmp_path / "elsewhere"


def test_rotating_file_action_lines_and_verbose(tmp_path: Path, clean_logging) -> None:
    log_file = logs.setup_logging(tmp_path / "logs", stderr=False)
    assert log_file == tmp_path / "logs" / "ohsync.log"
    handlers = [h for h in logging.getLogger().handlers if getattr(h, "_ohsync", False)]
    assert [type(h) for h in handlers] == [logging.handlers.RotatingFileHandler]
    assert handlers[0].maxBytes > 0 and handlers[0].backupCount >= 1
    logs.log_action("journal/2026-11.md", "upload", "ok", "up")
    logs.log_action("Files/a.pdf", "download", "ok", "down")
    logs.log_action("bad:name.md", "error", "error", "", "the server refused the name")
    logging.getLogger("ohsync.daemon.worker").debug("an idle poll")
    lines = log_file.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3
    assert re.search(r"INFO .*ohsync\.sync: up +upload +ok +journal/2026-11\.md$", lines[0])
    assert re.search(r"INFO .*ohsync\.sync: down +download +ok +Files/a\.pdf$", lines[1])
    assert re.search(r"WARNING .*: - +error +error +bad:name\.md  \(the server refused the name\)$", lines[2])

    logs.setup_logging(tmp_path / "logs", verbose=True, stderr=False)
    logging.getLogger("ohsync.daemon.worker").debug("an idle poll")
    assert log_file.read_text(encoding="utf-8").splitlines()[-1].endswith("an idle poll")


def test_secrets_are_redacted(tmp_path: Path, clean_logging) -> None:
    log_file = logs.setup_logging(tmp_path, stderr=False)
    token = "f" * 40
    logs.redact(token)
    logging.getLogger("ohsync.x").warning("server said: Token %s is bad", token)
    text = log_file.read_text(encoding="utf-8")
    assert token not in text and "[redacted]" in text


def test_log_command_prints_the_last_lines(isolated_env, tmp_path: Path, capsysbinary) -> None:
    write_config(isolated_env, "https://s.example", USER, tmp_path / "mirror")
    log_dir = isolated_env.root / "state" / "logs"
    assert main(["log"]) == 1  # nothing yet: a sentence, not a traceback
    err = capsysbinary.readouterr().err.decode()
    assert f"There is no log at {log_dir / 'ohsync.log'} yet" in err and "Traceback" not in err
    log_dir.mkdir(parents=True)
    (log_dir / "ohsync.log").write_text("".join(f"line {i}\n" for i in range(100)), encoding="utf-8")
    assert main(["log", "-n", "3"]) == 0
    assert capsysbinary.readouterr().out == b"line 97\nline 98\nline 99\n"
    assert main(["log"]) == 0
    out = capsysbinary.readouterr().out.decode().splitlines()
    assert len(out) == 50 and out[-1] == "line 99"


def test_follow_survives_rotation_and_waits_for_the_file(tmp_path: Path) -> None:
    path = tmp_path / "ohsync.log"
    got: list[bytes] = []
    stop = threading.Event()
    t = threading.Thread(target=lambda: got.extend(follow(path, start_at_end=False, interval=0.02,
                                                          should_stop=stop.is_set)), daemon=True)
    t.start()
    path.write_bytes(b"first\n")  # appears after following began
    wait_for(lambda: b"".join(got) == b"first\n", timeout=10, what="the new file")
    with open(path, "ab") as f:
        f.write(b"second\n")
    wait_for(lambda: b"second" in b"".join(got), timeout=10, what="an appended line")
    with open(path, "ab") as f:
        f.write(b"last of old\n")
    os.replace(path, tmp_path / "ohsync.log.1")  # what RotatingFileHandler does
    path.write_bytes(b"fresh\n")
    wait_for(lambda: b"fresh" in b"".join(got), timeout=10, what="the rotated-in file")
    stop.set()
    t.join(5)
    assert b"".join(got) == b"first\nsecond\nlast of old\nfresh\n"
    assert last_lines(path, 5) == [b"fresh\n"]


def _notify_socket() -> tuple[socket.socket, str]:
    folder = tempfile.mkdtemp(prefix="ohs-n-", dir="/tmp")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(os.path.join(folder, "notify"))
    sock.settimeout(90)
    return sock, os.path.join(folder, "notify")


def test_login_and_sync_log_each_action_never_the_token_and_tell_systemd(
        isolated_env, devserver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo_id = devserver.create_library(USER, "OH-Memory", from_tree=DEMO_LIBRARY)
    mirror = tmp_path / "mirror"
    write_config(isolated_env, devserver.url, USER, mirror, poll_interval=1.0)
    import subprocess

    login = subprocess.run([*ohsync_cmd(), "login", "--server", devserver.url, "--username", USER,
                            "--password-stdin"], input=PASSWORD + "\n", env=isolated_env.vars(),
                           capture_output=True, text=True, timeout=60)
    assert login.returncode == 0, login.stderr
    token = devserver.token_for(USER)
    sock, address = _notify_socket()
    monkeypatch.setenv("NOTIFY_SOCKET", address)
    d = DaemonProc(isolated_env, args=("--verbose",))
    try:
        ready = sock.recv(4096).decode()
        assert ready.startswith("READY=1\n") and "OH-Memory" in ready
        assert d.client().call("ping") is not None  # ready means the socket answers
        d.wait_state("idle", timeout=90)
        (mirror / "notes").mkdir(exist_ok=True)
        (mirror / "notes" / "from-here.md").write_text("# local\n", encoding="utf-8")
        wait_for(lambda: devserver.read_file(repo_id, "/notes/from-here.md") == b"# local\n", timeout=60,
                 what="the upload")
        devserver.put_file(repo_id, "/notes/from-there.md", b"# remote\n")
        wait_for(lambda: (mirror / "notes" / "from-there.md").exists(), timeout=60, what="the download")
        polls = d.status()["polls"]
        wait_for(lambda: d.status()["polls"] >= polls + 2, timeout=60, what="an idle poll")
        assert d.cli("stop").returncode == 0
        assert sock.recv(4096) == b"STOPPING=1"
        assert d.wait_exit(60) == 0
    finally:
        d.stop()
        sock.close()
        shutil.rmtree(os.path.dirname(address), ignore_errors=True)

    log_file = isolated_env.root / "state" / "logs" / "ohsync.log"
    text = log_file.read_text(encoding="utf-8")
    assert re.search(r"ohsync\.sync: up +upload +ok +notes/from-here\.md$", text, re.M), text[-3000:]
    assert re.search(r"ohsync\.sync: down +download +ok +notes/from-there\.md$", text, re.M), text[-3000:]
    assert re.search(r" DEBUG .*sync pass in .*: 0 up, 0 down", text), "--verbose logs idle passes"
    printed = d.cli("log", "-n", "100000")
    assert printed.returncode == 0 and "notes/from-here.md" in printed.stdout
    output = (isolated_env.root / "daemon-output.log").read_text(encoding="utf-8", errors="replace")
    for where in (text, output, printed.stdout, login.stdout, login.stderr):
        assert token not in where and PASSWORD + "\n" not in where
