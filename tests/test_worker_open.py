"""What the sync worker does when its mirror cannot open: the policy of a
failed pass, from the same classification (``engine.errors.classify``)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import FakeEngine, FakeSession, wait_for
from ohsync.daemon.config import load_config
from ohsync.daemon.session import open_session
from ohsync.daemon.status import StatusModel
from ohsync.daemon.worker import FatalError, SyncWorker
from ohsync.engine.errors import AuthError, LibraryNotFound, StateTooNew, UnreachableError


def _worker(tmp_path: Path, failures: list[BaseException], **kw: Any):
    """A worker whose ``open_session`` raises ``failures`` in turn, then opens a fake engine."""
    engine = FakeEngine(tmp_path)
    status = StatusModel(library="Docs", local=str(tmp_path), poll_interval=0.3)
    status.watcher_alive = lambda: True
    attempts: list[float] = []
    fatal: list[BaseException] = []

    def opener(on_event):
        attempts.append(time.monotonic())
        if len(attempts) <= len(failures):
            raise failures[len(attempts) - 1]
        engine.on_event = on_event
        return FakeSession(engine)

    kw.setdefault("open_session", opener)
    w = SyncWorker(kw.pop("open_session"), status, poll_interval=0.3, on_fatal=fatal.append, **kw)
    return w, status, attempts, fatal


def test_a_refused_connection_at_open_is_retried_with_backoff(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    delays: list[int] = []

    def backoff(attempt: int, **kw: Any) -> float:
        delays.append(attempt)
        return 0.4

    monkeypatch.setattr("ohsync.daemon.worker.recovery.backoff_delay", backoff)
    refused = UnreachableError("Cannot connect to http://127.0.0.1:9 (connection refused)")
    w, status, attempts, fatal = _worker(tmp_path, [refused, refused])
    w.start()
    try:
        st = wait_for(lambda: (s := status.status())["state"] == "offline" and s, what="offline")
        assert st["message"].startswith("Cannot reach the server (Cannot connect to http://127.0.0.1:9")
        assert "; retrying " in st["message"]
        wait_for(lambda: status.status()["state"] == "idle", timeout=20, what="idle once the server answers")
        assert len(attempts) == 3 and delays == [1, 2]  # backed off after each refusal, one attempt more
        assert attempts[1] - attempts[0] >= 0.35 and attempts[2] - attempts[1] >= 0.35
        assert fatal == []
    finally:
        assert w.shutdown(10)


def test_a_rejected_login_at_open_waits_for_a_login_like_a_rejected_pass(tmp_path: Path) -> None:
    w, status, attempts, fatal = _worker(tmp_path, [AuthError("Invalid token", status=401)],
                                         login_command="ohsync login --mirror Docs")
    w.start()
    try:
        st = wait_for(lambda: (s := status.status())["state"] == "auth_required" and s, what="auth_required")
        assert st["message"] == ("The server rejected the saved login. Run `ohsync login --mirror Docs` to sign "
                                 "in again; the running daemon then signs in with the new login.")
        time.sleep(1.0)  # why: a quiet period of three poll intervals: no attempt with the rejected token
        assert len(attempts) == 1 and fatal == []
        assert w.wait(0.5) == (False, st["message"])
        w.refresh()  # after `ohsync login`
        wait_for(lambda: status.status()["state"] == "idle", what="idle after the refresh")
        assert len(attempts) == 2
    finally:
        assert w.shutdown(10)


def _deleted_library_opener(tmp_path: Path):
    """The daemon's own ``open_session`` against a server where the library is gone."""
    config = tmp_path / "config.toml"
    config.write_text(f'server = "http://127.0.0.1:9"\nusername = "u@x"\nstate_dir = "{tmp_path}/state"\n'
                      f'[[mirror]]\nlibrary = "Docs"\nlocal = "{tmp_path}/Docs"\n', encoding="utf-8")
    cfg = load_config(config)

    class NoLibraries:
        def __init__(self, server: str, token: str) -> None:
            pass

        def list_repos(self) -> list[Any]:
            return []

        def close(self) -> None:
            pass

    def opener(on_event):
        opened.append(1)
        return open_session(cfg, on_event, mirror=cfg.mirrors[0], token="t", client_factory=NoLibraries)

    opened: list[int] = []
    return opener, config, opened


def test_a_deleted_library_at_open_stops_the_mirror_with_what_to_do(tmp_path: Path) -> None:
    opener, config, opened = _deleted_library_opener(tmp_path)
    w, status, _attempts, fatal = _worker(tmp_path, [], open_session=opener, exit_on_fatal=False)
    w.start()
    try:
        st = wait_for(lambda: (s := status.status())["state"] == "stopped" and s, what="stopped")
        assert st["message"] == (f"The library 'Docs' does not exist on the server. Create it in the web "
                                 f"interface, fix `library` in {config}, or set `create_library = true` to let "
                                 "ohsync create it.")
        assert len(fatal) == 1 and isinstance(fatal[0], FatalError)
        assert w.is_alive() and w.control.retry_at is None  # no retry: the person must act
        assert w.wait(0.5) == (False, st["message"])
        assert len(opened) == 1
    finally:
        assert w.shutdown(10)


def test_a_deleted_library_of_the_only_mirror_ends_the_worker(tmp_path: Path) -> None:
    opener, _config, opened = _deleted_library_opener(tmp_path)
    w, status, _attempts, fatal = _worker(tmp_path, [], open_session=opener)
    w.start()
    wait_for(lambda: fatal, what="fatal")
    wait_for(lambda: not w.is_alive(), what="the worker ended")
    assert status.status()["state"] == "error"
    assert status.status()["message"].startswith("The library 'Docs' does not exist on the server.")
    assert len(opened) == 1
    assert w.shutdown(10)


@pytest.mark.parametrize("error, state, is_fatal", [
    (LibraryNotFound("No library with id 0f3c is visible to this account."), "stopped", True),
    (StateTooNew("/state/state.sqlite3", 9, 4), "stopped", False),
])
def test_an_error_that_needs_the_person_at_open_is_not_retried(tmp_path: Path, error: BaseException, state: str,
                                                                is_fatal: bool) -> None:
    w, status, attempts, fatal = _worker(tmp_path, [error], exit_on_fatal=False)
    w.start()
    try:
        st = wait_for(lambda: (s := status.status())["state"] == state and s, what=state)
        assert st["message"] == str(error)
        time.sleep(1.0)  # why: a quiet period of three poll intervals: not retried
        assert len(attempts) == 1 and bool(fatal) is is_fatal
    finally:
        assert w.shutdown(10)
