"""The CLI without a daemon: exit codes, usage, login/logout against devserver."""

from __future__ import annotations

import io
import os
import sys
import tomllib

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import isolated_env  # noqa: F401
from ohsync.daemon import credentials
from ohsync.daemon.cli.main import main

USER = "user@example.edu.cn"
PASSWORD = "secret"


@pytest.mark.parametrize("argv", [["status"], ["status", "--json"], ["refresh"], ["pause"], ["resume"],
                                  ["conflicts"], ["activity"], ["stop"], ["wait"], ["damaged"]])
def test_no_daemon_exit_3(isolated_env, capsys, argv) -> None:
    assert main(argv) == 3
    captured = capsys.readouterr()
    assert "ohsync is not running" in captured.err and "ohsync run" in captured.err
    assert "Traceback" not in captured.err
    assert captured.out == ""


def test_usage_errors_exit_2(isolated_env, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main([])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["frobnicate"])
    assert e.value.code == 2
    with pytest.raises(SystemExit) as e:
        main(["login", "--password-stdin", "--token-stdin", "--server", "x", "--username", "y"])
    assert e.value.code == 2
    assert main(["login"]) == 2  # no server/username anywhere
    assert "needs --server" in capsys.readouterr().err


def test_run_without_login_says_what_to_do(isolated_env, capsys) -> None:
    assert main(["run", "--no-tray"]) == 1
    err = capsys.readouterr().err
    assert "ohsync login" in err and "Traceback" not in err


def test_login_password_stdin_stores_token(isolated_env, devserver, monkeypatch, capsys) -> None:
    isolated_env.config.write_text('poll_interval = 7\nmystery = "kept"\n[[mirror]]\nlocal = "/x"\n')
    monkeypatch.setattr(sys, "stdin", io.StringIO(PASSWORD + "\n"))
    code = main(["login", "--server", devserver.url + "/", "--username", USER, "--password-stdin"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert f"Logged in as {USER}" in out
    token = credentials.load_token(devserver.url, USER)
    assert token == devserver.token_for(USER)
    doc = tomllib.loads(isolated_env.config.read_text())
    assert doc["server"] == devserver.url and doc["username"] == USER
    assert doc["poll_interval"] == 7 and doc["mystery"] == "kept" and doc["mirror"] == [{"local": "/x"}]
    # the password and the token are nowhere on disk except the (test) keyring
    for path in isolated_env.root.rglob("*"):
        if path.is_file() and path != isolated_env.keyring_file and "devserver" not in path.parts:
            data = path.read_bytes()
            assert PASSWORD.encode() not in data and token.encode() not in data, path
    assert token not in out + err

    assert main(["logout"]) == 0
    assert credentials.load_token(devserver.url, USER) is None
    assert "Logged out" in capsys.readouterr().out
    assert main(["logout"]) == 0
    assert "No saved login" in capsys.readouterr().out


def test_login_wrong_password_exit_1(isolated_env, devserver, monkeypatch, capsys) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO("wrong\n"))
    code = main(["login", "--server", devserver.url, "--username", USER, "--password-stdin"])
    err = capsys.readouterr().err
    assert code == 1
    assert "Login needed:" in err and "Traceback" not in err and "wrong" not in err
    assert credentials.load_token(devserver.url, USER) is None
    assert not isolated_env.config.exists()


def test_login_token_stdin(isolated_env, devserver, monkeypatch, capsys) -> None:
    token = devserver.token_for(USER)
    monkeypatch.setattr(sys, "stdin", io.StringIO(token + "\n"))
    assert main(["login", "--server", devserver.url, "--username", USER, "--token-stdin"]) == 0
    assert credentials.load_token(devserver.url, USER) == token
    monkeypatch.setattr(sys, "stdin", io.StringIO("f" * 40 + "\n"))
    assert main(["login", "--server", devserver.url, "--username", USER, "--token-stdin"]) == 1
    assert "did not accept this token" in capsys.readouterr().err
    assert credentials.load_token(devserver.url, USER) == token  # the good one stays


class _Terminal(io.StringIO):
    """Standard input that is a terminal (what getpass then reads from)."""

    def isatty(self) -> bool:
        return True


def test_login_prompts_without_echo(isolated_env, devserver, monkeypatch, capsys) -> None:
    prompts = []
    monkeypatch.setattr(sys, "stdin", _Terminal())
    monkeypatch.setattr("getpass.getpass", lambda prompt="": prompts.append(prompt) or PASSWORD)
    assert main(["login", "--server", devserver.url, "--username", USER]) == 0
    assert prompts and USER in prompts[0]
    assert credentials.load_token(devserver.url, USER) == devserver.token_for(USER)


def _fake_2fa(monkeypatch, calls):
    from ohsync.engine.client import SeafileClient
    from ohsync.engine.errors import TwoFactorRequired

    def obtain_token(server_url, username, password, *, otp=None, **kw):
        calls.append((username, password, otp))
        if otp != "123456":
            raise TwoFactorRequired("This account uses two-factor authentication.")
        return "a" * 40

    monkeypatch.setattr(SeafileClient, "obtain_token", staticmethod(obtain_token))


def test_login_two_factor_from_stdin(isolated_env, monkeypatch, capsys) -> None:
    calls: list = []
    _fake_2fa(monkeypatch, calls)
    monkeypatch.setattr(sys, "stdin", io.StringIO("pw\n123456\n"))
    assert main(["login", "--server", "https://s.example", "--username", USER, "--password-stdin"]) == 0
    assert calls == [(USER, "pw", None), (USER, "pw", "123456")]
    assert credentials.load_token("https://s.example", USER) == "a" * 40


def test_login_two_factor_prompt(isolated_env, monkeypatch, capsys) -> None:
    calls: list = []
    _fake_2fa(monkeypatch, calls)
    monkeypatch.setattr(sys, "stdin", _Terminal())
    monkeypatch.setattr("getpass.getpass", lambda prompt="": "pw")
    monkeypatch.setattr("builtins.input", lambda prompt="": "123456")
    assert main(["login", "--server", "https://s.example", "--username", USER]) == 0
    assert calls[-1] == (USER, "pw", "123456")


def test_login_two_factor_missing_code(isolated_env, monkeypatch, capsys) -> None:
    _fake_2fa(monkeypatch, [])
    monkeypatch.setattr(sys, "stdin", io.StringIO("pw\n"))
    assert main(["login", "--server", "https://s.example", "--username", USER, "--password-stdin"]) == 1
    err = capsys.readouterr().err
    assert "Two-factor code needed" in err and "Traceback" not in err


@pytest.mark.parametrize("bad", ["1e308", "inf", "nan", "-20", "0", "3601", "soon"])
def test_memory_timeout_out_of_range_is_a_usage_error(isolated_env, capsys, bad: str) -> None:
    with pytest.raises(SystemExit) as e:
        main(["memory", "append", "p", "k", "v", "--timeout", bad])
    assert e.value.code == 2
    assert "not a number of seconds from 1 to 3600" in capsys.readouterr().err


def test_login_without_a_terminal_says_so_and_nothing_of_python(isolated_env) -> None:
    """`ohsync login < /dev/null` on a headless machine (no controlling terminal): one sentence, no
    GetPassWarning with its source line."""
    import subprocess

    from daemon_helpers import ohsync_cmd

    with open(os.devnull, "rb") as devnull:
        r = subprocess.run([*ohsync_cmd(), "login", "--server", "http://127.0.0.1:9", "--username", USER],
                           stdin=devnull, capture_output=True, text=True, env=isolated_env.vars(), timeout=60,
                           start_new_session=True)  # no /dev/tty to fall back to
    assert r.returncode == 1
    assert "Warning" not in r.stderr and "warn" not in r.stderr and "Traceback" not in r.stderr
    assert "No terminal to type the password at" in r.stderr and "--password-stdin" in r.stderr
