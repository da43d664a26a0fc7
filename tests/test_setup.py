"""``ohsync setup`` against devserver: scripted with flags, interactive through an injected input
function and through a real terminal (pty), with the file keyring of ``isolated_env``."""

from __future__ import annotations

import io
import os
import socket
import sys
import tomllib
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import isolated_env  # noqa: F401
from ohsync.daemon import credentials
from ohsync.daemon.cli import setup as cli_setup
from ohsync.daemon.cli.main import main
from ohsync.daemon.config import load_config
from ohsync.daemon.setup_flow import SetupAnswers, SetupError, run_setup
from ohsync.daemon.setup_prompt import MissingAnswer, Prompter
from tls_helpers import tls_server  # noqa: F401

USER = "user@example.edu.cn"
PASSWORD = "secret"


def _scripted(env, devserver, *extra: str) -> list[str]:
    home = env.root / "home"
    return ["setup", "--yes", "--server", devserver.url, "--username", USER, "--password-stdin",
            "--local", str(home / "Mirror"), "--drop", str(home / "Drop"), "--no-autostart", *extra]


def _stdin(monkeypatch, text: str) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(text))


def test_scripted_setup_creates_library_writes_config_and_token(isolated_env, devserver, monkeypatch,
                                                                  capsys) -> None:
    isolated_env.config.write_text('poll_interval = 7\nmystery = "kept"\n')
    _stdin(monkeypatch, PASSWORD + "\n")
    code = main(_scripted(isolated_env, devserver, "--create-library"))
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Created the library 'OH-Memory'" in out and "ohsync doctor" in out
    repo_id = devserver.library_id("OH-Memory")
    assert repo_id
    cfg = load_config(isolated_env.config)
    assert cfg.server == devserver.url and cfg.username == USER
    assert cfg.mirrors[0].library == "OH-Memory" and cfg.mirrors[0].library_id is None
    assert cfg.mirrors[0].local == isolated_env.root / "home" / "Mirror" and cfg.mirrors[0].local.is_dir()
    assert cfg.filing.drop_dir == isolated_env.root / "home" / "Drop" and cfg.filing.drop_dir.is_dir()
    assert cfg.poll_interval == 7 and tomllib.loads(isolated_env.config.read_text())["mystery"] == "kept"
    token = credentials.load_token(devserver.url, USER)
    assert token == devserver.token_for(USER)
    assert token not in isolated_env.config.read_text() and token not in out + err


def test_setup_writes_mirror_tables_a_second_one_can_be_appended_to(isolated_env, devserver, monkeypatch,
                                                                    capsys) -> None:
    """The README adds a library with a `[[mirror]]` block; an inline `mirror = [...]` written by
    setup made that file invalid TOML ("Cannot mutate immutable namespace")."""
    isolated_env.config.write_text('# my notes about this file\npoll_interval = 7  # fast\n')
    _stdin(monkeypatch, PASSWORD + "\n")
    assert main(_scripted(isolated_env, devserver, "--create-library")) == 0, capsys.readouterr().err
    text = isolated_env.config.read_text()
    assert "[[mirror]]" in text and "# my notes about this file" in text and "# fast" in text
    home = isolated_env.root / "home"
    with isolated_env.config.open("a") as f:
        f.write(f'\n[[mirror]]\nlibrary = "Notes"\nlocal = "{home / "Notes"}"\n')
    cfg = load_config(isolated_env.config)
    assert [m.library for m in cfg.mirrors] == ["OH-Memory", "Notes"]
    # setup again keeps both mirrors and what the person wrote in them
    isolated_env.config.write_text(isolated_env.config.read_text().replace(
        'library = "Notes"', 'library = "Notes"  # course notes'))
    _stdin(monkeypatch, PASSWORD + "\n")
    assert main(_scripted(isolated_env, devserver)) == 0, capsys.readouterr().err
    text = isolated_env.config.read_text()
    assert "# course notes" in text and text.count("[[mirror]]") == 2
    assert [m.library for m in load_config(isolated_env.config).mirrors] == ["OH-Memory", "Notes"]


def test_scripted_setup_with_a_token_takes_the_username_from_the_account(isolated_env, devserver, monkeypatch,
                                                                         capsys) -> None:
    devserver.create_library(USER, "OH-Memory")
    _stdin(monkeypatch, devserver.token_for(USER) + "\n")
    home = isolated_env.root / "home"
    code = main(["setup", "--yes", "--server", devserver.url, "--token-stdin", "--local", str(home / "M"),
                 "--no-autostart"])
    assert code == 0, capsys.readouterr().err
    cfg = load_config(isolated_env.config)
    assert cfg.username == USER and cfg.filing.drop_dir == home / "OH-Drop"
    assert credentials.load_token(devserver.url, USER) == devserver.token_for(USER)


def test_scripted_setup_names_each_missing_flag(isolated_env, devserver, monkeypatch, capsys) -> None:
    # no secret and no saved login
    assert main(["setup", "--yes", "--server", devserver.url, "--username", USER, "--no-autostart"]) == 2
    assert "--password-stdin or --token-stdin" in capsys.readouterr().err
    # a missing library is created only when asked
    _stdin(monkeypatch, PASSWORD + "\n")
    assert main(_scripted(isolated_env, devserver)) == 2
    assert "needs --create-library" in capsys.readouterr().err
    assert not isolated_env.config.exists() and credentials.load_token(devserver.url, USER) is None


def test_scripted_setup_leaves_autostart_off_unless_asked(isolated_env, devserver, monkeypatch, capsys) -> None:
    """--yes takes the defaults; autostart changes the machine, so it stays off and setup says so."""
    devserver.create_library(USER, "OH-Memory")
    monkeypatch.setattr(cli_setup, "autostart_enabler", lambda: lambda path: pytest.fail("autostart enabled"))
    _stdin(monkeypatch, PASSWORD + "\n")
    home = isolated_env.root / "home"
    code = main(["setup", "--yes", "--server", devserver.url, "--username", USER, "--password-stdin",
                 "--local", str(home / "M")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "Autostart is off (--yes leaves it off unless --autostart is given)" in out


def test_scripted_setup_with_autostart_installs_the_entry(isolated_env, devserver, monkeypatch, capsys) -> None:
    """Without a systemd user manager (a stand-in systemctl says so) autostart is an XDG entry that
    runs this config, where a desktop session would read it."""
    bin_dir = isolated_env.root / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text("#!/bin/sh\necho 'Failed to connect to bus' >&2\nexit 1\n")
    (bin_dir / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    # no desktop session installed: nothing would read the entry, so none is written and setup fails
    monkeypatch.setenv("XDG_DATA_DIRS", str(isolated_env.root / "xdg-data-dirs"))
    _stdin(monkeypatch, PASSWORD + "\n")
    argv = _scripted(isolated_env, devserver, "--create-library")
    argv[argv.index("--no-autostart")] = "--autostart"
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Autostart could not be enabled: Nothing on this machine would start ohsync at login" in err
    entry = isolated_env.root / "xdg-config" / "autostart" / "ohsync.desktop"
    assert not entry.exists() and load_config(isolated_env.config).server == devserver.url
    # a machine with a desktop session (a display manager offers one): the entry is installed
    sessions = isolated_env.root / "xdg-data-dirs" / "xsessions"
    sessions.mkdir(parents=True)
    (sessions / "xfce.desktop").write_text("[Desktop Entry]\nName=Xfce Session\nExec=startxfce4\n")
    _stdin(monkeypatch, PASSWORD + "\n")
    assert main(argv) == 0, capsys.readouterr().err
    assert f"--config {isolated_env.config} run\n" in entry.read_text()
    assert f"Installed {entry}" in capsys.readouterr().out


def test_autostart_that_fails_is_said_and_exits_1(isolated_env, devserver, monkeypatch, capsys) -> None:
    from ohsync.daemon import autostart

    def refuse(**kw):
        raise autostart.AutostartError("Cannot find the installed `ohsync` command to start at login.")

    monkeypatch.setattr(autostart, "enable", refuse)
    _stdin(monkeypatch, PASSWORD + "\n")
    argv = _scripted(isolated_env, devserver, "--create-library")
    argv[argv.index("--no-autostart")] = "--autostart"
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "Autostart could not be enabled: Cannot find the installed `ohsync` command" in err
    assert load_config(isolated_env.config).server == devserver.url  # the rest of setup is kept


def test_non_empty_folder_needs_merge_unless_it_mirrors_the_library(isolated_env, devserver, monkeypatch,
                                                                     capsys) -> None:
    devserver.create_library(USER, "OH-Memory")
    mine = isolated_env.root / "home" / "Mirror"
    mine.mkdir(parents=True)
    (mine / "notes.md").write_text("my notes\n")
    _stdin(monkeypatch, PASSWORD + "\n")
    assert main(_scripted(isolated_env, devserver)) == 1  # the folder's content is no usage mistake
    err = capsys.readouterr().err
    assert "is not empty and is not a mirror of 'OH-Memory'" in err and "--merge" in err
    assert "usage:" not in err
    assert not isolated_env.config.exists()
    assert (mine / "notes.md").read_text() == "my notes\n"

    _stdin(monkeypatch, PASSWORD + "\n")
    assert main(_scripted(isolated_env, devserver, "--merge")) == 0, capsys.readouterr().err
    assert load_config(isolated_env.config).mirrors[0].local == mine

    # a folder this config already syncs with the library is accepted as it is
    cfg = load_config(isolated_env.config)
    state = cfg.mirror_state_dir(devserver.library_id("OH-Memory"), cfg.mirrors[0])
    state.mkdir(parents=True)
    (state / "state.sqlite3").write_bytes(b"")
    _stdin(monkeypatch, "")
    assert main(["setup", "--yes", "--server", devserver.url, "--local", str(mine), "--drop",
                 str(isolated_env.root / "home" / "Drop"), "--no-autostart"]) == 0
    assert "already mirrors 'OH-Memory'" in capsys.readouterr().out  # and the saved login was kept


def test_folders_are_checked_before_the_library_is_created(isolated_env, devserver, monkeypatch,
                                                          capsys) -> None:
    mine = isolated_env.root / "home" / "Mirror"
    mine.mkdir(parents=True)
    (mine / "notes.md").write_text("my notes\n")
    _stdin(monkeypatch, PASSWORD + "\n")
    assert main(_scripted(isolated_env, devserver, "--create-library")) == 1
    out, err = capsys.readouterr()
    assert "is not empty and is not a mirror of 'OH-Memory'" in err and "usage:" not in err
    assert "Created the library" not in out and not devserver.library_id("OH-Memory")
    assert not isolated_env.config.exists()


def test_input_that_ends_at_a_question_is_no_usage_error(isolated_env, devserver, monkeypatch, capsys) -> None:
    monkeypatch.setattr("builtins.input", lambda prompt="": (_ for _ in ()).throw(EOFError))
    assert main(["setup", "--no-autostart"]) == 1
    err = capsys.readouterr().err
    assert "The input ended at the question “Seafile server”" in err and "--server" in err
    assert "usage:" not in err


def test_drop_folder_inside_the_mirror_is_refused(isolated_env, devserver, monkeypatch, capsys) -> None:
    devserver.create_library(USER, "OH-Memory")
    _stdin(monkeypatch, PASSWORD + "\n")
    home = isolated_env.root / "home"
    argv = _scripted(isolated_env, devserver)
    argv[argv.index("--drop") + 1] = str(home / "Mirror" / "drop")
    assert main(argv) == 1
    assert "overlaps the mirror" in capsys.readouterr().err
    assert not isolated_env.config.exists()


def test_unreachable_server_and_wrong_password(isolated_env, devserver, monkeypatch, capsys) -> None:
    _stdin(monkeypatch, PASSWORD + "\n")
    argv = _scripted(isolated_env, devserver, "--create-library")
    argv[argv.index("--server") + 1] = "http://127.0.0.1:9"
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "does not answer as a Seafile server" in err and "Traceback" not in err
    _stdin(monkeypatch, "wrong\n")
    assert main(_scripted(isolated_env, devserver, "--create-library")) == 1
    err = capsys.readouterr().err
    assert "did not accept this username and password" in err and "wrong" not in err


def test_untrusted_certificate_is_named(isolated_env, tls_server, monkeypatch, capsys) -> None:
    _stdin(monkeypatch, PASSWORD + "\n")
    assert main(["setup", "--yes", "--server", tls_server, "--username", USER, "--password-stdin",
                 "--no-autostart"]) == 1
    err = capsys.readouterr().err
    assert "TLS certificate" in err and "SSL_CERT_FILE" in err and "Traceback" not in err


def test_no_keyring_is_said_before_any_other_question(isolated_env, devserver, monkeypatch, capsys) -> None:
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    asked: list[str] = []
    with pytest.raises(credentials.KeyringUnavailable, match="--keyring file"):
        run_setup(SetupAnswers(), Prompter(ask=lambda q: asked.append(q) or ""), isolated_env.config)
    # the one question is whether to use the file store; the default (Enter) is no, and nothing is stored
    assert len(asked) == 1 and "a file only you can read" in asked[0] and "[y/N]" in asked[0]
    assert load_config(isolated_env.config).keyring == "system"


def test_scripted_setup_without_keyring_names_the_file_option(isolated_env, devserver, monkeypatch,
                                                              capsys) -> None:
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    _stdin(monkeypatch, PASSWORD + "\n")
    assert main(_scripted(isolated_env, devserver, "--create-library")) == 1
    err = capsys.readouterr().err
    assert "No usable keyring" in err and "--keyring file" in err and "Traceback" not in err
    assert devserver.library_id("OH-Memory") is None  # nothing was created on the server either


def test_headless_setup_with_the_file_store_end_to_end(isolated_env, devserver, monkeypatch, capsys) -> None:
    """No keyring at all: setup --keyring file stores the token 0600 in the state folder, doctor
    warns about it, and logout leaves nothing behind."""
    import json
    import stat

    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    state = isolated_env.root / "state"
    isolated_env.config.write_text(f'state_dir = "{state}"\n')
    _stdin(monkeypatch, PASSWORD + "\n")
    code = main(_scripted(isolated_env, devserver, "--create-library", "--keyring", "file"))
    out, err = capsys.readouterr()
    assert code == 0, err
    store = state / "credentials.json"
    assert f"the login in the credentials file {store}" in out and "only your user can read" in out
    # what the file store means is said once, before signing in; that the login is there, only after it
    assert out.index(f"will be kept in {store}") < out.index("Signed in as") \
        < out.index(f"the login in the credentials file {store}")
    assert out.count("only your user can read") == 1 and out.count("ohsync doctor` reminds you") == 1
    cfg = load_config(isolated_env.config)
    assert cfg.keyring == "file" and cfg.credentials_file == store
    assert stat.S_IMODE(store.stat().st_mode) == 0o600
    token = devserver.token_for(USER)
    assert json.loads(store.read_text()) == {"ohsync": {f"{devserver.url} {USER}": token}}
    assert token not in out + err
    # another process reading the same config finds the token there (the daemon does the same)
    credentials.use_file_store(None)
    load_config(isolated_env.config)
    assert credentials.load_token(devserver.url, USER) == token
    # doctor says plainly that the token is in a file
    assert main(["--config", str(isolated_env.config), "doctor"]) in (0, 1)
    doctor = capsys.readouterr().out
    assert f"plain text in {store}" in doctor and "--keyring system" in doctor
    # logout: no token, no empty section, no file
    assert main(["--config", str(isolated_env.config), "logout"]) == 0
    assert f"from the credentials file {store}" in capsys.readouterr().out  # not "the keyring"
    assert not store.exists()


def test_interactive_setup_without_keyring_offers_the_file_store(isolated_env, devserver, monkeypatch) -> None:
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    home = isolated_env.root / "home"
    ask = Script("y", devserver.url, "1", USER, "", "y", str(home / "M"), "", "")
    out = io.StringIO()
    run_setup(SetupAnswers(), Prompter(ask=ask, secret=Script(PASSWORD), out=out), isolated_env.config,
              enable_autostart=lambda p: "Autostart is on.")
    assert "a file only you can read" in ask.prompts[0]
    cfg = load_config(isolated_env.config)
    assert cfg.keyring == "file"
    assert credentials.load_token(devserver.url, USER) == devserver.token_for(USER)
    assert "reminds you while it is in use" in out.getvalue()


class Script:
    """An input function answering prompts in order; records every prompt."""

    def __init__(self, *answers: str) -> None:
        self.answers = list(answers)
        self.prompts: list[str] = []

    def __call__(self, prompt: str) -> str:
        self.prompts.append(prompt)
        if not self.answers:
            raise EOFError
        return self.answers.pop(0)


def test_interactive_setup_asks_everything(isolated_env, devserver, monkeypatch) -> None:
    home = isolated_env.root / "home"
    busy = home / "Busy"
    busy.mkdir(parents=True)
    (busy / "x.txt").write_text("x")
    ask = Script(devserver.url, "1", USER,      # server, sign in with a password, username
                 "",                           # library: the default, OH-Memory
                 "y",                          # create it
                 str(busy), "n",               # a non-empty folder: do not merge, ask again
                 str(home / "Fresh"),          # the mirror folder
                 "",                           # the drop folder: the default
                 "")                           # autostart: the default (yes)
    secret = Script(PASSWORD)
    enabled: list[Path] = []
    out = io.StringIO()
    result = run_setup(SetupAnswers(), Prompter(ask=ask, secret=secret, out=out), isolated_env.config,
                       enable_autostart=lambda p: enabled.append(p) or "Autostart is on.")
    prompts = "\n".join(ask.prompts)
    assert "Seafile server [https://cloud.tsinghua.edu.cn]" in prompts
    assert "Library to mirror [OH-Memory]" in prompts and "Create it? [Y/n]" in prompts
    assert "Merge them with the library?" in prompts and "[y/N]" in prompts
    assert f"Drop folder (documents put here are filed into /Files/) [{home / 'OH-Drop'}]" in prompts
    assert "Start ohsync automatically when you log in? [Y/n]" in prompts
    assert secret.prompts == [f"Password for {USER}: "]
    assert "is not empty and is not a mirror" in out.getvalue()
    assert result.local == home / "Fresh" and result.drop == home / "OH-Drop"
    assert enabled == [isolated_env.config] and result.autostart == "Autostart is on."
    cfg = load_config(isolated_env.config)
    assert cfg.mirrors[0].local == home / "Fresh" and cfg.mirrors[0].library == "OH-Memory"
    assert credentials.load_token(devserver.url, USER) == devserver.token_for(USER)
    assert (busy / "x.txt").read_text() == "x"


def test_an_unusable_mirror_folder_is_asked_again_keeping_the_other_answers(isolated_env, devserver) -> None:
    """A file, a folder under a file, a folder inside another mirror of the config: each is explained
    and only the folder is asked again (the server, the username and the password are kept)."""
    devserver.create_library(USER, "OH-Memory")
    home = isolated_env.root / "home"
    home.mkdir(parents=True)
    (home / "a-file").write_text("x")
    isolated_env.config.write_text(f'[[mirror]]\nlibrary = "OH-Memory"\nlocal = "{home / "Old"}"\n\n'
                                   f'[[mirror]]\nlibrary = "Notes"\nlocal = "{home / "Notes"}"\n')
    ask = Script(devserver.url, "1", USER, "",
                 str(home / "a-file"), str(home / "a-file" / "M"), str(home / "Notes" / "M"),
                 str(home / "M"), "", "n")
    secret = Script(PASSWORD)
    out = io.StringIO()
    result = run_setup(SetupAnswers(), Prompter(ask=ask, secret=secret, out=out), isolated_env.config,
                       enable_autostart=lambda p: pytest.fail("autostart was declined"))
    said = out.getvalue()
    assert f"{home / 'a-file'} is a file, not a folder" in said
    assert f"{home / 'a-file' / 'M'} cannot be made: {home / 'a-file'} is a file" in said
    assert f"overlaps the folder {home / 'Notes'} of the mirror 'Notes'" in said
    assert sum("Local folder for the mirror" in p for p in ask.prompts) == 4
    assert sum("Seafile server" in p for p in ask.prompts) == 1 and len(secret.prompts) == 1
    assert result.local == home / "M"
    assert [m.local for m in load_config(isolated_env.config).mirrors] == [home / "M", home / "Notes"]


@pytest.mark.parametrize("where", ["under a file", "inside another mirror"])
def test_a_scripted_unusable_mirror_folder_ends_setup_naming_it(isolated_env, devserver, monkeypatch, capsys,
                                                               where) -> None:
    devserver.create_library(USER, "OH-Memory")
    home = isolated_env.root / "home"
    home.mkdir(parents=True)
    (home / "a-file").write_text("x")
    before = f'[[mirror]]\nlibrary = "OH-Memory"\nlocal = "{home / "Old"}"\n\n' \
             f'[[mirror]]\nlibrary = "Notes"\nlocal = "{home / "Notes"}"\n'
    isolated_env.config.write_text(before)
    argv = _scripted(isolated_env, devserver)
    folder = home / "a-file" / "M" if where == "under a file" else home / "Notes" / "M"
    argv[argv.index("--local") + 1] = str(folder)
    _stdin(monkeypatch, PASSWORD + "\n")
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert str(folder) in err and "Choose a folder" in err and "Traceback" not in err and "usage:" not in err
    assert ("is a file, not a folder" if where == "under a file" else "of the mirror 'Notes'") in err
    assert isolated_env.config.read_text() == before and not folder.exists()


def test_interactive_wrong_password_is_asked_again_then_token(isolated_env, devserver) -> None:
    """After a refused password, Enter alone at the password question goes back to how to sign in."""
    devserver.create_library(USER, "OH-Memory")
    home = isolated_env.root / "home"
    ask = Script(devserver.url, "1", USER, "2", "", str(home / "M"), "", "n")
    secret = Script("wrong", "", devserver.token_for(USER))
    out = io.StringIO()
    result = run_setup(SetupAnswers(), Prompter(ask=ask, secret=secret, out=out), isolated_env.config,
                       enable_autostart=lambda p: pytest.fail("autostart was declined"))
    assert "did not accept this username and password" in out.getvalue()
    assert secret.prompts[2] == "Paste the API token: "
    assert result.username == USER and result.autostart and "Autostart is off" in result.autostart


def test_a_wrong_password_asks_only_the_password_again(isolated_env, devserver) -> None:
    """The server and the username are kept after a refused password; the tries are bounded."""
    devserver.create_library(USER, "OH-Memory")
    home = isolated_env.root / "home"
    ask = Script(devserver.url, "1", USER, "", str(home / "M"), "", "n")
    secret = Script("wrong", PASSWORD)
    out = io.StringIO()
    result = run_setup(SetupAnswers(), Prompter(ask=ask, secret=secret, out=out), isolated_env.config,
                       enable_autostart=lambda p: pytest.fail("autostart was declined"))
    assert "did not accept this username and password" in out.getvalue()
    assert secret.prompts == [f"Password for {USER}: ",
                              f"Password for {USER} again (Enter alone: another username, or an API token): "]
    assert sum("Username" in p for p in ask.prompts) == 1 and sum("Choice" in p for p in ask.prompts) == 1
    assert result.username == USER
    assert credentials.load_token(devserver.url, USER) == devserver.token_for(USER)

    ask = Script(devserver.url, "1", USER)
    secret = Script("wrong", "still wrong", "wrong again", PASSWORD)
    with pytest.raises(SetupError, match="failed 3 times"):
        run_setup(SetupAnswers(), Prompter(ask=ask, secret=secret, out=io.StringIO()),
                  isolated_env.root / "other.toml")
    assert len(secret.prompts) == 3 and sum("Username" in p for p in ask.prompts) == 1
    assert not (isolated_env.root / "other.toml").exists()


def test_interactive_two_factor_code_is_asked_when_the_server_wants_it(isolated_env, devserver,
                                                                       monkeypatch) -> None:
    from ohsync.engine.client import SeafileClient
    from ohsync.engine.errors import TwoFactorRequired

    devserver.create_library(USER, "OH-Memory")
    calls: list = []

    def obtain_token(server_url, username, password, *, otp=None, **kw):
        calls.append(otp)
        if otp != "123456":
            raise TwoFactorRequired("This account uses two-factor authentication.")
        return devserver.token_for(USER)

    monkeypatch.setattr(SeafileClient, "obtain_token", staticmethod(obtain_token))
    home = isolated_env.root / "home"
    ask = Script(devserver.url, "1", USER, "123456", "", str(home / "M"), "")
    run_setup(SetupAnswers(autostart=False), Prompter(ask=ask, secret=Script(PASSWORD), out=io.StringIO()),
              isolated_env.config)
    assert calls == [None, "123456"]
    assert any("Two-factor code" in p for p in ask.prompts)


def test_scripted_two_factor_code_is_the_second_stdin_line(isolated_env, devserver, monkeypatch,
                                                           capsys) -> None:
    from ohsync.engine.client import SeafileClient
    from ohsync.engine.errors import TwoFactorRequired

    calls: list = []

    def obtain_token(server_url, username, password, *, otp=None, **kw):
        calls.append((password, otp))
        if otp != "654321":
            raise TwoFactorRequired("This account uses two-factor authentication.")
        return devserver.token_for(USER)

    monkeypatch.setattr(SeafileClient, "obtain_token", staticmethod(obtain_token))
    _stdin(monkeypatch, PASSWORD + "\n")
    assert main(_scripted(isolated_env, devserver, "--create-library")) == 1
    assert "second line on standard input" in capsys.readouterr().err
    _stdin(monkeypatch, PASSWORD + "\n654321\n")
    assert main(_scripted(isolated_env, devserver, "--create-library")) == 0, capsys.readouterr().err
    assert calls[-2:] == [(PASSWORD, None), (PASSWORD, "654321")]
    assert credentials.load_token(devserver.url, USER) == devserver.token_for(USER)


def test_closed_input_names_the_flag(isolated_env, devserver) -> None:
    with pytest.raises(MissingAnswer, match="pass --server"):
        run_setup(SetupAnswers(), Prompter(ask=Script(), out=io.StringIO()), isolated_env.config)


def test_a_bad_flag_answer_ends_setup_a_typed_one_is_asked_again(isolated_env, devserver) -> None:
    with pytest.raises(SetupError, match="not a web address"):
        run_setup(SetupAnswers(server="ftp://x"), Prompter(ask=Script(), out=io.StringIO()), isolated_env.config)
    out = io.StringIO()
    ask = Script("ftp://x")
    with pytest.raises(MissingAnswer):
        run_setup(SetupAnswers(), Prompter(ask=ask, out=out), isolated_env.config)
    assert "not a web address" in out.getvalue() and len(ask.prompts) == 2


def test_setup_in_a_real_terminal(isolated_env, devserver) -> None:
    """The installed command at a pty: the password is read without echo."""
    import pexpect

    home = isolated_env.root / "home"
    env = isolated_env.vars()
    child = pexpect.spawn(sys.executable, ["-m", "ohsync.daemon.cli", "setup"], env=env, encoding="utf-8",
                          timeout=30)
    child.logfile_read = log = io.StringIO()
    try:
        child.expect_exact("Seafile server [https://cloud.tsinghua.edu.cn]: ")
        child.sendline(devserver.url)
        child.expect_exact("Choice [1]: ")
        child.sendline("1")
        child.expect_exact("Username (email): ")
        child.sendline(USER)
        child.expect_exact(f"Password for {USER}: ")
        child.sendline(PASSWORD)
        child.expect_exact("Signed in as")
        child.expect_exact("Library to mirror [OH-Memory]: ")
        child.sendline("")
        child.expect_exact("Create it? [Y/n]: ")
        child.sendline("y")
        child.expect_exact("Local folder for the mirror [")
        child.sendline(str(home / "Mirror"))
        child.expect_exact("Drop folder")
        child.sendline("")
        # default Yes only where something would start it (a desktop session, a systemd user manager)
        from ohsync.daemon.cli.setup import autostart_unreachable

        default = "y/N" if autostart_unreachable() else "Y/n"
        child.expect_exact(f"Start ohsync automatically when you log in? [{default}]: ")
        child.sendline("n")  # yes would install autostart files (tests/test_autostart.py covers that)
        child.expect_exact("ohsync is set up")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    transcript = log.getvalue()
    assert child.exitstatus == 0, transcript
    assert f"Password for {USER}: " in transcript and "ohsync is set up" in transcript
    assert PASSWORD not in transcript.replace(USER, "")  # the password is not echoed
    cfg = load_config(isolated_env.config)
    assert cfg.mirrors[0].local == home / "Mirror" and (home / "Mirror").is_dir()
    assert credentials.load_token(devserver.url, USER) == devserver.token_for(USER)


def test_login_at_a_terminal_asks_only_the_password_again(isolated_env, devserver) -> None:
    """`ohsync login` in a pty: a wrong password is asked again (server and username kept), three
    tries in all; the paragraph about the credentials file is printed once per run."""
    import pexpect

    state = isolated_env.root / "state"
    isolated_env.config.write_text(f'server = "{devserver.url}"\nusername = "{USER}"\nstate_dir = "{state}"\n')
    env = isolated_env.vars()
    env["PYTHON_KEYRING_BACKEND"] = "keyring.backends.fail.Keyring"

    def login(*passwords: str) -> tuple[int, str]:
        child = pexpect.spawn(sys.executable, ["-m", "ohsync.daemon.cli", "login", "--keyring", "file"], env=env,
                              encoding="utf-8", timeout=30)
        child.logfile_read = log = io.StringIO()
        try:
            for password in passwords:
                child.expect_exact(f"Password for {USER} at {devserver.url}")
                child.sendline(password)
            child.expect(pexpect.EOF)
        finally:
            child.close()
        return child.exitstatus, log.getvalue()

    code, transcript = login("wrong", "still wrong", "wrong again")
    assert code == 1, transcript
    assert transcript.count("Password for") == 3 and transcript.count(f"{devserver.url} again: ") == 2
    assert transcript.count("did not accept this username and password") == 3
    assert "Traceback" not in transcript and not (state / "credentials.json").exists()
    code, transcript = login("wrong", PASSWORD)
    assert code == 0, transcript
    assert transcript.count("Password for") == 2 and "Logged in as" in transcript
    assert transcript.count("will be kept in") == 1 and transcript.count("only your user can read") == 1
    assert PASSWORD not in transcript.replace(USER, "")
    credentials.use_file_store(state / "credentials.json")
    assert credentials.load_token(devserver.url, USER) == devserver.token_for(USER)


def test_setup_names_a_running_daemon_only_when_it_runs_this_config(isolated_env, devserver, monkeypatch,
                                                                  capsys) -> None:
    from ohsync.daemon.socket.server import SocketServer

    devserver.create_library(USER, "OH-Memory")
    ping = {"pid": 1, "config": str(isolated_env.root / "other.toml")}
    server = SocketServer(isolated_env.socket, {"ping": lambda p: dict(ping)})
    server.start()
    try:
        _stdin(monkeypatch, PASSWORD + "\n")
        assert main(_scripted(isolated_env, devserver)) == 0
        out = capsys.readouterr().out
        assert "running with the old settings" not in out and "runs another config" in out
        ping["config"] = str(isolated_env.config)
        _stdin(monkeypatch, PASSWORD + "\n")
        assert main(_scripted(isolated_env, devserver)) == 0
        assert "ohsync is running with the old settings" in capsys.readouterr().out
    finally:
        server.stop()


def test_setup_writes_exactly_the_keys_the_readme_names(isolated_env, devserver, monkeypatch, capsys) -> None:
    """README "First run": the config holds only the answers; everything else is a default."""
    _stdin(monkeypatch, PASSWORD + "\n")
    assert main(_scripted(isolated_env, devserver, "--create-library")) == 0
    doc = tomllib.loads(isolated_env.config.read_text())
    assert set(doc) == {"server", "username", "mirror", "filing"}
    assert [set(m) for m in doc["mirror"]] == [{"library", "local"}] and set(doc["filing"]) == {"drop_dir"}
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    assert "holds only what was answered" in readme


def test_a_failed_switch_to_the_system_keyring_keeps_the_file_login(isolated_env, devserver, monkeypatch,
                                                                    capsys) -> None:
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    state = isolated_env.root / "state"
    isolated_env.config.write_text(f'state_dir = "{state}"\n')
    _stdin(monkeypatch, PASSWORD + "\n")
    assert main(_scripted(isolated_env, devserver, "--create-library", "--keyring", "file")) == 0
    capsys.readouterr()
    _stdin(monkeypatch, PASSWORD + "\n")
    assert main(["login", "--keyring", "system", "--password-stdin"]) == 1
    assert "Keyring unavailable" in capsys.readouterr().err
    assert load_config(isolated_env.config).keyring == "file"  # unchanged: the switch did not happen
    assert credentials.load_token(devserver.url, USER) == devserver.token_for(USER)


@pytest.mark.parametrize("why", ["wrong password", "no server"])
def test_a_failed_setup_writes_nothing_to_the_config(isolated_env, devserver, monkeypatch, capsys, why) -> None:
    """With the file store chosen, a wrong password or an unreachable server leaves the config as it
    was (no ``keyring = "file"``), no credentials file, and no "The login is kept in" sentence."""
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    state = isolated_env.root / "state"
    before = f'state_dir = "{state}"\n'
    isolated_env.config.write_text(before)
    _stdin(monkeypatch, ("not the password" if why == "wrong password" else PASSWORD) + "\n")
    argv = _scripted(isolated_env, devserver, "--create-library", "--keyring", "file")
    if why == "no server":
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        argv[argv.index(devserver.url)] = f"http://127.0.0.1:{port}"
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 1, out + err
    assert isolated_env.config.read_text() == before
    assert not (state / "credentials.json").exists()
    assert "The login is kept in" not in out + err and "Saved the settings" not in out


def test_login_names_the_credentials_file_when_the_file_store_is_in_use(isolated_env, devserver, monkeypatch,
                                                                        capsys) -> None:
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    state = isolated_env.root / "state"
    isolated_env.config.write_text(f'state_dir = "{state}"\n')
    store = state / "credentials.json"
    base = ["--config", str(isolated_env.config), "login", "--server", devserver.url, "--username", USER,
            "--password-stdin", "--keyring", "file"]
    _stdin(monkeypatch, "not the password\n")
    assert main(base) == 1
    out, err = capsys.readouterr()
    assert not store.exists()
    assert 'keyring = "file"' not in isolated_env.config.read_text()  # a failed login wrote nothing
    assert "is kept in" not in out + err
    _stdin(monkeypatch, PASSWORD + "\n")
    assert main(base) == 0
    out = capsys.readouterr().out
    assert f"The token is in the credentials file {store}" in out and "in the keyring" not in out
    assert 'keyring = "file"' in isolated_env.config.read_text()


def test_autostart_is_offered_with_default_no_where_nothing_would_start_it(isolated_env, devserver) -> None:
    home = isolated_env.root / "home"
    devserver.create_library(USER, "OH-Memory")
    enabled: list[Path] = []

    def setup(unreachable: str | None, answer: str) -> tuple[Script, str, list[Path]]:
        enabled.clear()
        ask = Script(devserver.url, "1", USER, "", str(home / "M"), "", answer)
        out = io.StringIO()
        config = isolated_env.root / f"config-{len(ask.prompts)}-{unreachable is None}.toml"
        run_setup(SetupAnswers(merge=True), Prompter(ask=ask, secret=Script(PASSWORD), out=out), config,
                  enable_autostart=lambda p: enabled.append(p) or "Autostart is on.",
                  autostart_unreachable=lambda: unreachable)
        return ask, out.getvalue(), list(enabled)

    ask, out, done = setup("no desktop session here, and no systemd user bus", "")
    assert ask.prompts[-1] == "Start ohsync automatically when you log in? [y/N]: "
    assert "Autostart would not start ohsync on this machine: no desktop session here" in out
    assert done == []  # Enter took the default: no
    ask, out, done = setup(None, "")
    assert ask.prompts[-1] == "Start ohsync automatically when you log in? [Y/n]: "
    assert "would not start" not in out and len(done) == 1


def test_a_secret_read_without_a_terminal_shows_no_getpass_warning(monkeypatch, capsys) -> None:
    """Setup's password question with standard input not a terminal: the answer is read, and no
    GetPassWarning (with its source line) is printed around ohsync's own text."""
    import getpass
    import io
    import warnings

    from ohsync.daemon.setup_prompt import Prompter

    def no_terminal(prompt: str = "") -> str:  # what getpass does without /dev/tty
        warnings.warn("Can not control echo on the terminal.", getpass.GetPassWarning, stacklevel=2)
        return io.StringIO("secret\n").readline().rstrip("\n")

    monkeypatch.setattr(getpass, "getpass", no_terminal)
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        assert Prompter().secret("Password", flag="--password-stdin") == "secret"
    assert not [w for w in shown if issubclass(w.category, getpass.GetPassWarning)]
