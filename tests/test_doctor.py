"""``ohsync doctor``: each check made to fail shows its fix; comfort problems keep exit 0.

Every check runs against devserver, temporary folders, and faked machine facts
(the inotify limit file, the socket, the environment, the tray host) passed in
through :class:`Probes`.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sqlite3
import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import isolated_env  # noqa: F401
from ohsync.daemon import credentials, doctor_local
from ohsync.daemon.cli.doctor import format_findings
from ohsync.daemon.cli.main import main
from ohsync.daemon.config import load_config
from ohsync.daemon.doctor import ERROR, OK, SKIPPED, WARNING, Probes, exit_code, run_checks
from ohsync.engine.client import SeafileClient
from ohsync.tray.install_hint import Machine, SystemPython, install_hint
from tls_helpers import tls_server  # noqa: F401

USER = "user@example.edu.cn"


@pytest.fixture
def setup_done(isolated_env, devserver):
    """A config, a saved token and the library, as `ohsync setup` leaves them."""
    home = isolated_env.root / "home"
    (home / "OH-Memory").mkdir(parents=True)
    (home / "OH-Drop").mkdir()
    devserver.create_library(USER, "OH-Memory")
    isolated_env.config.write_text(
        f'server = "{devserver.url}"\nusername = "{USER}"\n'
        f'[[mirror]]\nlibrary = "OH-Memory"\nlocal = "{home / "OH-Memory"}"\n'
        f'[filing]\ndrop_dir = "{home / "OH-Drop"}"\n')
    credentials.save_token(devserver.url, USER, devserver.token_for(USER))
    return isolated_env


@pytest.fixture
def probes(tmp_path, isolated_env) -> Probes:
    limit = tmp_path / "max_user_watches"
    limit.write_text("524288\n")
    return Probes(inotify_limit_file=limit, socket=isolated_env.socket, environ={"DISPLAY": ":99"},
                  platform="linux", find_tray_host=lambda env: "fake tray host", tray_libraries=lambda: None)


def _check(findings, name):
    [found] = [f for f in findings if f.check == name]
    return found


def _run(env, probes, **cfg_changes):
    cfg = load_config(env.config)
    return run_checks(replace(cfg, **cfg_changes) if cfg_changes else cfg, probes)


def test_a_fresh_setup_is_healthy(setup_done, probes) -> None:
    findings = _run(setup_done, probes)
    levels = {f.check: f.level for f in findings}
    assert levels == {"config": OK, "keyring": WARNING, "server": OK, "tls": OK, "login": OK, "library": OK,
                      "clock": OK, "mirror_folder": OK, "drop_folder": OK, "inotify": OK, "display": OK,
                      "tray": OK, "instance": WARNING, "state_db": OK}
    assert "plain file" in _check(findings, "keyring").message  # the test keyring is a file
    assert "ohsync run" in _check(findings, "instance").fix
    assert exit_code(findings) == 0
    assert not list(Path(setup_done.root / "home" / "OH-Memory").iterdir())  # the probe left nothing


def test_cli_json_and_exit_codes(setup_done, devserver, capsys) -> None:
    code = main(["doctor", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["ok"] is True
    assert {c["check"] for c in report["checks"]} >= {"keyring", "server", "login", "library", "state_db"}
    assert all(set(c) == {"check", "level", "message", "fix"} for c in report["checks"])
    devserver.revoke_token(devserver.token_for(USER))
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "ERROR    login: The server rejects the saved token" in out
    assert f"fix: Sign in again: `ohsync login --server {devserver.url} --username {USER}`" in out


def test_not_set_up(isolated_env, probes) -> None:
    findings = run_checks(load_config(isolated_env.config), probes)
    assert _check(findings, "config").level == ERROR and "ohsync setup" in _check(findings, "config").fix
    assert _check(findings, "server").level == SKIPPED
    assert exit_code(findings) == 1


def test_broken_config_file_is_the_finding(isolated_env, capsys) -> None:
    isolated_env.config.write_text("server = [broken\n")
    assert main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "not valid TOML" in out and "ohsync setup" in out
    assert out.count("move it away") == 1  # said once, on the fix line


def test_keyring_missing_or_without_login(setup_done, probes, monkeypatch) -> None:
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    found = _check(_run(setup_done, probes), "keyring")
    assert found.level == ERROR and "gnome-keyring" in found.fix and "--keyring file" in found.fix
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "ohsync.daemon.file_keyring.FileKeyring")
    credentials.delete_token(load_config(setup_done.config).server, USER)
    findings = _run(setup_done, probes)
    found = _check(findings, "keyring")
    assert found.level == ERROR and "ohsync login --server" in found.fix
    assert _check(findings, "login").level == SKIPPED and exit_code(findings) == 1


def test_server_unreachable_or_not_seafile(setup_done, devserver, probes) -> None:
    findings = _run(setup_done, probes, server="http://127.0.0.1:9")
    found = _check(findings, "server")
    assert found.level == ERROR and "Check the network connection" in found.fix
    assert {_check(findings, c).level for c in ("tls", "login", "library", "clock")} == {SKIPPED}
    found = _check(_run(setup_done, probes, server=devserver.url + "/seafile"), "server")
    assert found.level == ERROR and "Seafile base address" in found.fix


def test_plain_http_to_another_host_is_a_warning(setup_done, probes) -> None:
    from ohsync.daemon.doctor import _Remote

    out: list = []
    remote = _Remote(replace(load_config(setup_done.config), server="http://seafile.example"), probes, out)

    class Answers:
        def server_info(self):
            return {"version": "12.0"}

        def close(self):
            pass

    remote.probes = replace(probes, client_factory=lambda s, t: Answers())
    remote.server()
    assert _check(out, "tls").level == WARNING and "https://" in _check(out, "tls").fix


def test_untrusted_certificate(setup_done, probes, tls_server) -> None:
    findings = _run(setup_done, probes, server=tls_server)
    found = _check(findings, "tls")
    assert found.level == ERROR and "certificate" in found.message.lower()
    assert "SSL_CERT_FILE" in found.fix and "this computer's date" in found.fix
    assert exit_code(findings) == 1


def test_clock_offset_is_a_warning(setup_done, probes) -> None:
    class SkewedClient(SeafileClient):
        @property
        def clock_offset(self):  # what the Date headers said, an hour later
            offset = super().clock_offset
            return None if offset is None else offset + 3600

    findings = _run(setup_done, replace(probes, client_factory=lambda s, t: SkewedClient(s, t, retries=0)))
    found = _check(findings, "clock")
    assert found.level == WARNING and "60 min behind" in found.message and "timedatectl" in found.fix
    assert exit_code(findings) == 0


def test_library_missing(setup_done, probes) -> None:
    cfg = load_config(setup_done.config)
    other = (replace(cfg.mirrors[0], library="Nope"),)
    found = _check(_run(setup_done, probes, mirrors=other), "library")
    assert found.level == ERROR and "ohsync setup" in found.fix
    found = _check(_run(setup_done, probes, mirrors=other, create_library=True), "library")
    assert found.level == WARNING and "creates it" in found.message


def test_every_mirror_is_checked(setup_done, devserver, probes) -> None:
    """A second [[mirror]] with a library that does not exist is an error, not "syncing works"."""
    cfg = load_config(setup_done.config)
    home = setup_done.root / "home"
    devserver.create_library(USER, "Notes")
    notes = replace(cfg.mirrors[0], library="Notes", local=home / "Notes")
    findings = _run(setup_done, probes, mirrors=(cfg.mirrors[0], notes))
    assert _check(findings, "library:Notes").level == OK
    assert _check(findings, "mirror_folder:Notes").level == OK and "does not exist yet" in \
        _check(findings, "mirror_folder:Notes").message
    assert exit_code(findings) == 0
    typo = replace(notes, library="Notez")
    findings = _run(setup_done, probes, mirrors=(cfg.mirrors[0], typo))
    found = _check(findings, "library:Notez")
    assert found.level == ERROR and "'Notez' does not exist" in found.message and "`library`" in found.fix
    assert _check(findings, "library").level == OK and exit_code(findings) == 1
    # another account without a saved login
    other = replace(notes, username="other@example.edu.cn")
    found = _check(_run(setup_done, probes, mirrors=(cfg.mirrors[0], other)), "library:Notes")
    assert found.level == ERROR and "ohsync login --mirror Notes" in found.fix


def test_every_mirrors_folder_and_state_database_are_checked(setup_done, devserver, probes) -> None:
    """With two mirrors the doctor's config line names both, and the second's folder and state
    database get checks of their own: a problem there is found, not hidden behind the first's."""
    cfg = load_config(setup_done.config)
    home = setup_done.root / "home"
    notes_id = devserver.create_library(USER, "Notes")
    notes = replace(cfg.mirrors[0], library="Notes", local=home / "Notes")
    notes.local.write_text("not a folder")
    db = cfg.mirror_state_dir(notes_id, notes) / "state.sqlite3"
    db.parent.mkdir(parents=True)
    db.write_bytes(b"this is not a database at all" * 200)
    findings = _run(setup_done, probes, mirrors=(cfg.mirrors[0], notes))
    config = _check(findings, "config")
    assert config.level == OK and "OH-Memory, Notes at" in config.message and "2 mirrors" in config.message
    assert _check(findings, "mirror_folder").level == OK and _check(findings, "state_db").level == OK
    found = _check(findings, "mirror_folder:Notes")
    assert found.level == ERROR and "Move the file away" in found.fix
    found = _check(findings, "state_db:Notes")
    assert found.level == ERROR and str(db) in found.message and exit_code(findings) == 1


def test_a_first_mirror_with_its_own_account_is_checked_as_that_account(setup_done, probes) -> None:
    """The first mirror's library check uses its own account, like any other mirror's."""
    cfg = load_config(setup_done.config)
    other = replace(cfg.mirrors[0], username="other@example.edu.cn")
    found = _check(_run(setup_done, probes, mirrors=(other,)), "library")
    assert found.level == ERROR and "ohsync login --mirror OH-Memory" in found.fix


def test_mirror_folder_problems(setup_done, probes, monkeypatch) -> None:
    cfg = load_config(setup_done.config)
    mirror = cfg.mirrors[0].local
    # a file where the folder should be
    mirror.rmdir()
    mirror.write_text("not a folder")
    found = _check(_run(setup_done, probes), "mirror_folder")
    assert found.level == ERROR and "Move the file away" in found.fix
    # missing after it was synced: the safety stop
    mirror.unlink()
    db = cfg.mirror_state_dir(_library_id(cfg), cfg.mirrors[0]) / "state.sqlite3"
    db.parent.mkdir(parents=True)
    sqlite3.connect(db).close()
    found = _check(_run(setup_done, probes), "mirror_folder")
    assert found.level == ERROR and "Reconnect the drive" in found.fix
    mirror.mkdir()
    # cannot create files (faked: tests run as root, which ignores permissions)
    real_mkstemp = doctor_local.tempfile.mkstemp

    def refuse(*a, **kw):
        if Path(kw.get("dir", "")) == mirror:
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_mkstemp(*a, **kw)

    monkeypatch.setattr(doctor_local.tempfile, "mkstemp", refuse)
    findings = _run(setup_done, probes)
    found = _check(findings, "mirror_folder")
    assert found.level == ERROR and "chmod u+rwx" in found.fix
    assert exit_code(findings) == 1
    monkeypatch.setattr(doctor_local.tempfile, "mkstemp", real_mkstemp)
    # a file system with short names (eCryptfs)
    real_replace = os.replace

    def short_names(src, dst):
        if len(os.path.basename(dst).encode()) > 143:
            raise OSError(errno.ENAMETOOLONG, "File name too long")
        return real_replace(src, dst)

    monkeypatch.setattr(doctor_local.os, "replace", short_names)
    findings = _run(setup_done, probes)
    found = _check(findings, "mirror_folder")
    assert found.level == WARNING and "255-byte names" in found.fix and exit_code(findings) == 0
    assert not [p for p in mirror.iterdir()]  # the probe cleaned up after itself


def _library_id(cfg) -> str:
    with SeafileClient(cfg.server, credentials.load_token(cfg.server, cfg.username)) as client:
        return next(r.id for r in client.list_repos() if r.name == cfg.mirrors[0].library)


def test_drop_folder_overlapping_the_mirror(setup_done, probes) -> None:
    cfg = load_config(setup_done.config)
    found = _check(_run(setup_done, probes, filing=replace(cfg.filing, drop_dir=cfg.mirrors[0].local / "drop")),
                   "drop_folder")
    assert found.level == ERROR and "drop_dir" in found.fix
    # inside a second mirror: the daemon turns filing off just the same
    notes = replace(cfg.mirrors[0], library="Notes", local=setup_done.root / "home" / "Notes")
    found = _check(_run(setup_done, probes, mirrors=(cfg.mirrors[0], notes),
                        filing=replace(cfg.filing, drop_dir=notes.local / "drop")), "drop_folder")
    assert found.level == ERROR and str(notes.local) in found.message and "filing is off" in found.message


def test_inotify_limit(setup_done, probes) -> None:
    mirror = load_config(setup_done.config).mirrors[0].local
    for i in range(5):
        (mirror / f"d{i}").mkdir()
    # 5 subfolders + the mirror + the drop folder = 7 watches
    probes.inotify_limit_file.write_text("4\n")
    findings = _run(setup_done, probes)
    found = _check(findings, "inotify")
    assert found.level == ERROR and "7 folders" in found.message
    assert "sudo sysctl fs.inotify.max_user_watches=524288" in found.fix and "/etc/sysctl.d/" in found.fix
    assert exit_code(findings) == 1
    probes.inotify_limit_file.write_text("10\n")
    findings = _run(setup_done, probes)
    assert _check(findings, "inotify").level == WARNING and exit_code(findings) == 0
    probes.inotify_limit_file.unlink()
    assert _check(_run(setup_done, probes), "inotify").level == OK


def test_display_and_tray_host(setup_done, probes) -> None:
    findings = _run(setup_done, replace(probes, environ={}))
    found = _check(findings, "display")
    assert found.level == WARNING and "ohsync run --no-tray" in found.fix and exit_code(findings) == 0
    found = _check(_run(setup_done, replace(probes, tray_libraries=lambda: "pystray is missing")), "tray")
    assert found.level == WARNING and "pystray is missing" in found.message
    assert found.fix == install_hint()  # the command that fits this machine
    found = _check(_run(setup_done, replace(probes, find_tray_host=lambda env: None)), "tray")
    assert found.level == WARNING and "gnome-shell-extension-appindicator" in found.fix


def test_tray_fix_names_the_system_bindings_or_the_source_build(setup_done, probes) -> None:
    debian = Machine("linux", "debian",
                     SystemPython("/usr/bin/python3", (3, 11), ("gi", "Gtk", "AyatanaAppIndicator3")))
    missing = replace(probes, tray_libraries=lambda: "the tray's Python packages are missing (gi)")
    found = _check(_run(setup_done, replace(missing, tray_install_hint=lambda: install_hint(debian))), "tray")
    assert "sudo apt install python3-gi" in found.fix and "--system-site-packages '.[tray-system]'" in found.fix
    found = _check(_run(setup_done, replace(missing, tray_install_hint=lambda: install_hint(Machine("darwin")))),
                   "tray")
    assert "pipx install --force '.[tray]'" in found.fix and "apt" not in found.fix


def test_tray_host_search_finds_nothing_without_a_desktop() -> None:
    assert doctor_local.find_tray_host({}) is None
    no_desktop = {"DISPLAY": ":9999", "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent"}
    assert doctor_local.find_tray_host(no_desktop) is None


def test_running_instance(setup_done, probes) -> None:
    from ohsync.daemon.socket.server import SocketServer

    state = {"state": "idle", "message": "Up to date"}
    ping = {"pid": 1, "config": str(setup_done.config)}
    server = SocketServer(setup_done.socket, {"status": lambda p: dict(state), "ping": lambda p: dict(ping)})
    server.start()
    try:
        found = _check(_run(setup_done, probes), "instance")
        assert found.level == OK and "running with this config" in found.message
        # a daemon of another config file on the same socket is not this config's daemon
        ping["config"] = str(setup_done.root / "other.toml")
        found = _check(_run(setup_done, probes), "instance")
        assert found.level == WARNING and "runs another config" in found.message
        assert "ohsync is running" not in found.message
        ping["config"] = str(setup_done.config)
        state.update(state="auth_required", message="The server rejected the saved token.")
        findings = _run(setup_done, probes)
        found = _check(findings, "instance")
        assert found.level == ERROR and "rejected the saved token" in found.message
        assert "ohsync status" in found.fix and exit_code(findings) == 1
    finally:
        server.stop()


def test_the_summary_never_says_syncing_works_while_nothing_runs_or_something_needs_you(setup_done, probes) -> None:
    from daemon_helpers import idle_snapshot
    from ohsync.daemon.cli.doctor import format_findings
    from ohsync.daemon.socket.server import SocketServer
    from ohsync.daemon.status import build_status

    findings = _run(setup_done, probes)  # no daemon runs
    assert _check(findings, "instance").level == WARNING and exit_code(findings) == 0
    last = format_findings(findings).splitlines()[-1]
    assert "syncing works" not in last and "ohsync is not running, so nothing syncs now" in last

    asked: list[str] = []
    state = build_status(idle_snapshot(conflicts=1, held_deletes=2))
    server = SocketServer(setup_done.socket, {"status": lambda p: asked.append("status") or dict(state),
                                              "ping": lambda p: asked.append("ping") or {}})
    server.stamp_answers(config=str(setup_done.config))  # as the daemon does
    server.start()
    try:
        findings = _run(setup_done, probes)
        found = _check(findings, "instance")
        assert found.level == WARNING and "something needs you" in found.message
        assert "1 conflict needs you" in found.message and "2 deletions held" in found.message
        assert "ohsync conflicts" in found.fix and "ohsync confirm-deletes" in found.fix
        last = format_findings(findings).splitlines()[-1]
        assert "syncing works" not in last and "something needs you" in last
        assert asked == ["status"]  # whose daemon it is came with the status: no ping
        state.update(build_status(idle_snapshot()))
        findings = _run(setup_done, probes)
        assert _check(findings, "instance").level == OK
        assert "syncing works" in format_findings(findings).splitlines()[-1]  # the keyring's warning only
    finally:
        server.stop()


def test_instance_that_does_not_answer(setup_done, probes, isolated_env) -> None:
    path = isolated_env.sock_dir / "hung.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    try:
        found = _check(_run(setup_done, replace(probes, socket=path)), "instance")
        assert found.level == ERROR and "does not answer" in found.message and "ohsync stop" in found.fix
    finally:
        listener.close()


def test_state_database_integrity(setup_done, probes) -> None:
    cfg = load_config(setup_done.config)
    db = cfg.mirror_state_dir(_library_id(cfg), cfg.mirrors[0]) / "state.sqlite3"
    db.parent.mkdir(parents=True)
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t (k TEXT PRIMARY KEY, v TEXT)")
    conn.executemany("INSERT INTO t VALUES (?, ?)", [(f"key{i:05d}", "v" * 50) for i in range(2000)])
    conn.commit()
    conn.close()
    assert _check(_run(setup_done, probes), "state_db").level == OK
    data = bytearray(db.read_bytes())
    page = 4096
    data[page * 3 + 100: page * 3 + 400] = b"\xff" * 300  # damage a page in the middle
    db.write_bytes(bytes(data))
    findings = _run(setup_done, probes)
    found = _check(findings, "state_db")
    assert found.level == ERROR and f"mv '{db}' '{db}.broken'" in found.fix and exit_code(findings) == 1
    db.write_bytes(b"this is not a database at all" * 200)
    found = _check(_run(setup_done, probes), "state_db")
    assert found.level == ERROR and "cannot be read" in found.message and "ohsync stop" in found.fix


def test_state_database_of_a_newer_ohsync(setup_done, probes) -> None:
    from ohsync.engine.state_schema import SCHEMA_VERSION

    cfg = load_config(setup_done.config)
    db = cfg.mirror_state_dir(_library_id(cfg), cfg.mirrors[0]) / "state.sqlite3"
    db.parent.mkdir(parents=True)
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    conn.close()
    found = _check(_run(setup_done, probes), "state_db")
    assert found.level == ERROR and "newer ohsync" in found.message
    assert "Upgrade ohsync" in found.fix and "`ohsync resync`" in found.fix


def test_running_instance_with_older_settings_says_restart_it(setup_done, probes) -> None:
    """The config file edited while the daemon runs: doctor names the changed keys, never "syncing works"."""
    from ohsync.daemon.daemon_methods import Methods
    from ohsync.daemon.socket.server import SocketServer

    started = load_config(setup_done.config)  # what the daemon read when it started
    ping = Methods(type("Daemon", (), {"cfg": started})()).table()["ping"]  # the daemon's own answer
    state = {"state": "idle", "message": "Up to date"}
    server = SocketServer(setup_done.socket, {"status": lambda p: dict(state), "ping": ping})
    server.start()
    try:
        assert _check(_run(setup_done, probes), "instance").level == OK
        text = setup_done.config.read_text()
        setup_done.config.write_text("# a comment is no change\n" + text)
        assert _check(_run(setup_done, probes), "instance").level == OK
        elsewhere = setup_done.root / "home" / "Elsewhere"
        elsewhere.mkdir()
        setup_done.config.write_text(text.replace(str(setup_done.root / "home" / "OH-Memory"), str(elsewhere)))
        found = _check(_run(setup_done, probes), "instance")
        assert found.level == WARNING and "older settings (`mirror.local` changed" in found.message
        assert "ohsync stop" in found.fix and "ohsync run" in found.fix
        out = format_findings(_run(setup_done, probes))
        assert "the running daemon uses older settings" in out and "syncing works" not in out
    finally:
        server.stop()
