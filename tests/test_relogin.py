"""A new login reaches a running daemon without a second command.

``ohsync login`` tells a running daemon to sign in again, and a daemon whose
token the server rejects first looks in the keyring: a newer token saved
meanwhile (a login that raced with its restart) is used at once instead of
halting with ``auth_required``.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import DEMO_LIBRARY, USER, wait_for
from ohsync.daemon import credentials


@pytest.fixture
def daemon(seed_daemon, devserver):
    s = seed_daemon(tree=DEMO_LIBRARY, poll_interval=1.0)
    return s.start(wait="idle"), devserver, s.repo_id, s.mirror


def test_ohsync_login_wakes_a_daemon_that_waits_for_a_login(daemon) -> None:
    d, srv, repo, mirror = daemon
    srv.revoke_token(srv.token_for(USER))
    d.wait_state("auth_required", timeout=60)
    r = d.cli("login", "--server", srv.url, "--username", USER, "--token-stdin",
              input=srv.token_for(USER) + "\n")
    assert r.returncode == 0, r.stderr
    assert "signs in with it now" in r.stdout
    d.wait_state("idle", timeout=60)                  # no `ohsync refresh` needed
    srv.put_file(repo, "/after-login.md", b"written after the new login\n")
    wait_for(lambda: (mirror / "after-login.md").is_file(), timeout=30, what="the pull after the new login")


def test_a_token_saved_while_the_old_one_was_in_use_is_taken_up(daemon) -> None:
    d, srv, repo, mirror = daemon
    srv.revoke_token(srv.token_for(USER))
    # a login saved by another process that did not (or could not) tell the daemon
    credentials.save_token(srv.url, USER, srv.token_for(USER))
    srv.put_file(repo, "/while-relogging.md", b"written while the login changed\n")
    wait_for(lambda: (mirror / "while-relogging.md").is_file(), timeout=30, what="the pull with the new token")
    assert d.status()["state"] != "auth_required"
    assert "a new login was saved meanwhile" in d.output()


def test_login_and_logout_speak_only_for_the_daemon_of_their_own_config(daemon, tmp_path: Path) -> None:
    d, srv, repo, mirror = daemon
    # another config file that names the same (default) socket: the daemon there is not its daemon
    other = tmp_path / "other.toml"
    other.write_text(f'server = "{srv.url}"\nusername = "{USER}"\n', encoding="utf-8")
    r = d.cli("--config", str(other), "login", "--token-stdin", input=srv.token_for(USER) + "\n")
    assert r.returncode == 0, r.stderr
    assert "Logged in" in r.stdout and "signs in with it now" not in r.stdout
    r = d.cli("logout")
    assert r.returncode == 0, r.stderr
    assert "keeps the token it holds until it stops" in r.stdout
