"""Shared pytest fixtures of ohsync.

devserver fixtures (owned by the devserver work; add other fixtures below):

* ``devserver`` — a started ``ohsync.devserver.DevServer`` on 127.0.0.1 with a
  free port and its data in ``tmp_path / "devserver"``; one account
  ``user@example.edu.cn`` / ``secret`` (``DEVSERVER_USER``,
  ``DEVSERVER_PASSWORD``).  Function-scoped; stopped afterwards.
* ``devserver_token`` — that user's API token (40 hex) on that server.

Daemon fixtures (``tests/daemon_helpers.py``, available to every test):

* ``isolated_env`` — config, state, logs, socket and a file keyring in a
  temporary folder.
* ``seed_daemon`` — a factory: a library on ``devserver``, the user's token
  saved, a config written; ``.start(wait="idle")`` runs ``ohsync run
  --no-tray``; every daemon it started is stopped afterwards.

Leak guard (every test): a test that leaves a thread it started still
running (daemon threads too: a daemon thread left behind still holds sockets,
files and servers and still acts on later tests), or a child process of the
test run still alive, fails in its teardown, after :data:`LEAK_GRACE`
seconds for them to end.  Only threads that the interpreter or a library
keeps for the rest of the run are let through (:data:`FOREVER_THREADS`, each
with its reason).  Leftover child processes are then killed so they cannot
disturb later tests.  A test that must leave something behind says so:
``@pytest.mark.leaves_running("why")``.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from daemon_helpers import isolated_env, seed_daemon  # noqa: F401 - fixtures for every test module

DEVSERVER_USER = "user@example.edu.cn"
DEVSERVER_PASSWORD = "secret"


@pytest.fixture
def devserver(tmp_path):
    """A started DevServer (``.url`` is ``http://127.0.0.1:PORT``)."""
    from ohsync.devserver import DevServer

    srv = DevServer(tmp_path / "devserver", users={DEVSERVER_USER: DEVSERVER_PASSWORD})
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def devserver_token(devserver) -> str:
    """The API token of ``DEVSERVER_USER`` on the ``devserver`` fixture."""
    return devserver.token_for(DEVSERVER_USER)


# ----------------------------------------------------------------------------- leak guard

#: Seconds a test's threads and child processes get to end after its teardown.
LEAK_GRACE = 3.0

#: Threads started during a test that are not the test's to stop: (name prefix, why it may stay).
#: Empty: no library the suite uses keeps a thread for the rest of the run (anyio's and
#: concurrent.futures' workers end with their event loop or executor, devserver's with stop()).
FOREVER_THREADS: tuple[tuple[str, str], ...] = ()


def _forever(thread: threading.Thread) -> bool:
    return any(thread.name.startswith(prefix) for prefix, _why in FOREVER_THREADS)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "leaves_running(reason): the test legitimately leaves threads or child processes running "
                   "(the leak guard of tests/conftest.py lets it pass)")


def _alive_children() -> set[int]:
    """Pids of this process's children that have not exited (zombies excluded)."""
    pids: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        try:
            pids.update(int(p) for p in (task / "children").read_text().split())
        except OSError:
            continue  # the thread ended meanwhile
    return {pid for pid in pids if _running(pid)}


def _running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def _describe(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        cmd = "?"
    return f"pid {pid}: {cmd[:200]}"


def _kill(pids: set[int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline and any(_running(p) for p in pids):
            time.sleep(0.05)  # why: the poll interval while the signalled children exit (no failure: SIGKILL next)


@pytest.fixture(autouse=True)
def _leak_guard(request: pytest.FixtureRequest):
    """Fail a test that leaves its threads or child processes running (see the module doc)."""
    if request.node.get_closest_marker("leaves_running"):
        yield
        return
    threads_before = set(threading.enumerate())
    children_before = _alive_children()
    yield
    deadline = time.monotonic() + LEAK_GRACE
    while True:
        threads = [t for t in threading.enumerate()
                   if t not in threads_before and t.is_alive() and not _forever(t)]
        children = _alive_children() - children_before
        if not (threads or children) or time.monotonic() >= deadline:
            break
        time.sleep(0.05)  # why: the poll interval of the leak guard's grace period (it fails with its own list)
    if threads or children:
        lines = [f"thread {t.name!r} ({t.__class__.__name__}{', daemon' if t.daemon else ''})" for t in threads]
        lines += [_describe(pid) for pid in sorted(children)]
        _kill(children)
        pytest.fail("the test left running (stop them in its teardown, or mark it leaves_running(reason)):\n  "
                    + "\n  ".join(lines), pytrace=False)
