"""Credentials: the file keyring for tests/demo, and a clear sentence without any keyring."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import isolated_env  # noqa: F401
from ohsync.daemon import credentials
from ohsync.daemon.cli.main import main


def test_file_keyring_round_trip(isolated_env) -> None:
    assert credentials.load_token("https://s.example", "u@x") is None
    credentials.save_token("https://s.example", "u@x", "tok-123456789")
    assert credentials.load_token("https://s.example", "u@x") == "tok-123456789"
    data = json.loads(isolated_env.keyring_file.read_text())
    assert data == {"ohsync": {"https://s.example u@x": "tok-123456789"}}
    assert stat.S_IMODE(isolated_env.keyring_file.stat().st_mode) == 0o600
    assert credentials.delete_token("https://s.example", "u@x") is True
    assert credentials.delete_token("https://s.example", "u@x") is False
    assert credentials.load_token("https://s.example", "u@x") is None


def test_no_backend_is_a_clear_sentence(isolated_env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    with pytest.raises(credentials.KeyringUnavailable) as e:
        credentials.save_token("https://s.example", "u@x", "tok-123456789")
    msg = e.value.message
    assert "No usable keyring" in msg
    assert "gnome-keyring" in msg and "--keyring file" in msg
    assert "tok-123456789" not in msg


def test_file_backend_without_its_file_variable(isolated_env, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OHSYNC_KEYRING_FILE")
    with pytest.raises(credentials.KeyringUnavailable, match="OHSYNC_KEYRING_FILE"):
        credentials.load_token("https://s.example", "u@x")


def test_cli_login_without_keyring_fails_before_prompting(isolated_env, monkeypatch, capsys) -> None:
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    monkeypatch.setattr("getpass.getpass", lambda prompt="": pytest.fail("prompted for a password"))
    code = main(["login", "--server", "http://127.0.0.1:9", "--username", "u@x"])
    assert code == 1
    err = capsys.readouterr().err
    assert "Keyring unavailable: No usable keyring" in err
    assert "Traceback" not in err
