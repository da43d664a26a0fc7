"""What an installed ``ohsync`` says about itself: ``--version``, and the
install hint of the ``[tray]`` extra naming commands that work from a clone."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import isolated_env, ohsync_cmd  # noqa: F401
from ohsync.daemon.cli.main import main

REPO = Path(__file__).resolve().parent.parent
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def test_version_is_the_project_version(isolated_env, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out == f"ohsync {VERSION}\n"
    done = subprocess.run([*ohsync_cmd(), "--version"], capture_output=True, text=True, timeout=60,
                          env=isolated_env.vars())
    assert (done.returncode, done.stdout) == (0, f"ohsync {VERSION}\n")


def test_help_lists_the_new_commands(isolated_env, capsys) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "autostart" in out and "log" in out and "--version" in out


def _assert_clone_commands(text: str) -> None:
    assert "pipx install --force '.[tray]'" in text and "pip install --user '.[tray]'" in text
    assert "pip install 'ohsync[tray]'" not in text  # on no index: that command fails


def _machine_without_system_bindings(monkeypatch) -> None:
    """The hint as on a Debian machine whose own Python is too old for the prebuilt bindings."""
    from ohsync.tray import install_hint

    old = install_hint.SystemPython("/usr/bin/python3", (3, 10))
    monkeypatch.setattr(install_hint, "probe_machine", lambda: install_hint.Machine("linux", "debian", old))


def test_tray_without_the_extra_names_commands_that_work(isolated_env, monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "ohsync.tray.app", None)  # as if pystray & co were missing
    _machine_without_system_bindings(monkeypatch)
    assert main(["tray"]) == 1
    err = capsys.readouterr().err
    assert "No tray" in err and "Traceback" not in err
    _assert_clone_commands(err)


def test_tray_without_the_extra_names_the_system_bindings_where_they_are(isolated_env, monkeypatch, capsys) -> None:
    from ohsync.tray import install_hint

    monkeypatch.setitem(sys.modules, "ohsync.tray.app", None)
    system = install_hint.SystemPython("/usr/bin/python3", (3, 11))
    monkeypatch.setattr(install_hint, "probe_machine", lambda: install_hint.Machine("linux", "debian", system))
    assert main(["tray"]) == 1
    err = capsys.readouterr().err
    assert "pipx install --force --python /usr/bin/python3 --system-site-packages '.[tray-system]'" in err
    assert "Traceback" not in err and "'.[tray]'" not in err


def test_tray_without_pygobject_names_commands_and_system_packages(monkeypatch) -> None:
    from ohsync.tray import desktop

    monkeypatch.setitem(sys.modules, "gi", None)
    _machine_without_system_bindings(monkeypatch)
    with pytest.raises(desktop.TrayUnavailable) as e:
        desktop.choose_linux_backend()
    _assert_clone_commands(str(e.value))
    assert "libgirepository1.0-dev" in str(e.value) and "README" in str(e.value)
