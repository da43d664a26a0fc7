"""Every thread of the daemon and the tray has an owner that joins it
(docs/architecture.md §6, "Threads and their owners").

* read from the source (``ast``): the one ``threading.Thread(`` of
  ``daemon/`` and ``tray/`` is the thread base's, in
  ``daemon/service_thread.py``; no ``Timer(``; every executor names its
  threads; every ``daemon=True`` (and werkzeug's ``daemon_threads = True``)
  says why in a comment right above it;
* at run time: once :meth:`Daemon.run` returns, no thread it or its parts
  started is alive (the socket's selector and handler threads, the local
  page's, the root guard, each mirror's worker, scheduler, watcher and
  memory index build), without the leak guard's grace period.
"""

from __future__ import annotations

import ast
import os
import sys
import threading
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import FakeEngine, FakeSession, isolated_env, wait_for  # noqa: F401
from ohsync.daemon.app import Daemon
from ohsync.daemon.config import load_config
from ohsync.daemon.protocol import Method, RpcClient
from ohsync.daemon.service_thread import ServiceThread, Ticker

REPO = Path(__file__).resolve().parent.parent
THREAD_BASE = "daemon/service_thread.py"


def _calls(folder: str) -> list[tuple[str, int, ast.Call, list[str]]]:
    """``(file, line, call, source lines)`` of every call in ``folder``'s modules."""
    found = []
    for path in sorted((REPO / folder).rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call):
                found.append((str(path.relative_to(REPO)), node.lineno, node, lines))
    return found


def _name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _said_why(lines: list[str], line: int) -> bool:
    """A comment on the line above ``line`` (1-based), or on the line itself."""
    return "#" in lines[line - 1] or lines[line - 2].strip().startswith("#")


def test_the_only_thread_of_the_daemon_and_the_tray_is_the_thread_bases() -> None:
    calls = _calls("daemon") + _calls("tray")
    threads = [f"{f}:{n}" for f, n, call, _ in calls if _name(call) == "Thread"]
    assert len(threads) == 1 and threads[0].startswith(THREAD_BASE + ":"), threads
    timers = [f"{f}:{n}" for f, n, call, _ in calls if _name(call) == "Timer"]
    assert timers == [], f"a delayed call runs on its owner's clock (Scheduler.call_in, Ticker): {timers}"


def test_every_executor_names_its_threads() -> None:
    unnamed = [f"{f}:{n}" for f, n, call, _ in _calls("daemon") + _calls("tray")
               if _name(call) == "ThreadPoolExecutor"
               and "thread_name_prefix" not in {k.arg for k in call.keywords}]
    assert unnamed == [], f"an executor's threads carry its owner's name (thread_name_prefix): {unnamed}"


def test_every_daemon_thread_says_why_nothing_can_join_it() -> None:
    flagged, silent = [], []
    for f, n, call, lines in _calls("daemon") + _calls("tray"):
        for kw in call.keywords:
            if kw.arg == "daemon" and isinstance(kw.value, ast.Constant) and kw.value.value is True:
                flagged.append(f"{f}:{n}")
                if not _said_why(lines, n):
                    silent.append(f"{f}:{n}")
    for path in sorted([*(REPO / "daemon").rglob("*.py"), *(REPO / "tray").rglob("*.py")]):
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, text in enumerate(lines, 1):
            if "daemon_threads = True" in text:
                flagged.append(f"{path.relative_to(REPO)}:{i}")
                if not _said_why(lines, i):
                    silent.append(f"{path.relative_to(REPO)}:{i}")
    assert silent == [], f"daemon=True without a comment saying why nothing can join it: {silent}"
    # the worker (a pass in a request), the push channel (its requests), the tray's notifier
    # (a desktop call without timeout), the local page's request threads (open event streams)
    assert len(flagged) == 4, flagged


def test_a_service_thread_is_joined_by_stop_and_a_ticker_ticks_until_stopped() -> None:
    ticks = threading.Semaphore(0)
    ticker = Ticker("ohsync-test-ticker", 0.01, ticks.release)
    ticker.start_thread()
    assert ticks.acquire(timeout=10) and ticks.acquire(timeout=10)
    ticker.stop()
    assert not ticker.thread_alive()
    ran = threading.Event()
    loop = ServiceThread("ohsync-test-loop", target=ran.set)
    assert not loop.thread_alive()
    loop.start_thread()
    loop.stop()
    assert ran.is_set() and not loop.thread_alive()


def test_after_the_daemon_stops_no_thread_it_started_is_alive(isolated_env, tmp_path: Path) -> None:
    isolated_env.config.write_text("\n".join([
        'server = "http://127.0.0.1:9"', 'username = "u@x"', "poll_interval = 0.5",
        f'state_dir = "{tmp_path}/state"', "[[mirror]]", f'local = "{tmp_path}/mirror"']) + "\n",
        encoding="utf-8")
    cfg = load_config(isolated_env.config)
    (tmp_path / "mirror").mkdir()
    engine = FakeEngine(cfg.mirrors[0].local)

    def factory(on_event):
        engine.on_event = on_event
        return FakeSession(engine)

    before = set(threading.enumerate())
    daemon = Daemon(cfg, session_factory=factory, install_signals=False)
    result: dict[str, int] = {}
    runner = threading.Thread(target=lambda: result.setdefault("code", daemon.run()), name="daemon-under-test")
    runner.start()
    try:
        assert daemon.ready.wait(10)
        client = RpcClient(isolated_env.socket, timeout=10)
        events = RpcClient(isolated_env.socket, timeout=10).subscribe()
        assert next(events) == {"type": "subscribed"}   # a subscriber the server holds open
        wait_for(lambda: client.call(Method.STATUS)["state"] == "idle", what="idle")
        assert client.call(Method.WAIT, {"timeout": 10}) == {"synced": True}   # a handler thread ran
        assert client.call(Method.MEMORY_LIST, {}) is not None   # the memory index was built
        wait_for(lambda: client.call(Method.STATUS)["watcher"], what="the watcher started")
        started = {t.name for t in threading.enumerate() if t not in before}
        for name in ("ohsync-socket", "ohsync-rpc", "ohsync-panel", "ohsync-root-guard", "ohsync-sync-worker",
                     "ohsync-scheduler", "ohsync-watcher"):
            assert any(n.startswith(name) for n in started), (name, started)
        assert client.call(Method.SHUTDOWN) == {"stopping": True}
        runner.join(30)
        assert not runner.is_alive() and result == {"code": 0}
        assert all(e.get("type") for e in events)   # the stream (the events sent meanwhile) ended with the daemon
        # no grace period: every thread was joined before run() returned
        alive = sorted(t.name for t in threading.enumerate() if t not in before and t.is_alive())
        assert alive == [], f"threads the daemon started are still alive after run() returned: {alive}"
    finally:
        daemon.request_stop()
        runner.join(30)
