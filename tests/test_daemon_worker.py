"""The sync worker and the daemon wiring, with a fake engine (no server)."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import FakeEngine, FakeSession, isolated_env, wait_for  # noqa: F401
from ohsync.daemon.app import AlreadyRunning, Daemon
from ohsync.daemon.config import load_config
from ohsync.daemon.protocol import RpcClient, RpcError
from ohsync.daemon.status import StatusModel
from ohsync.daemon.worker import FatalError, SyncWorker
from ohsync.engine.errors import AuthError, MirrorMissingError, NetworkError


def _worker(engine: FakeEngine, poll: float = 0.3, **kw):
    status = StatusModel(library="OH-Memory", local=str(engine.local_root), poll_interval=poll)
    status.watcher_alive = lambda: True

    def open_session(on_event):
        engine.on_event = on_event
        return FakeSession(engine)

    w = SyncWorker(open_session, status, poll_interval=poll, **kw)
    return w, status


def test_initial_sync_then_polls_and_dirty_paths(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path)
    w, status = _worker(engine)
    w.start()
    try:
        wait_for(lambda: status.status()["state"] == "idle", what="idle")
        assert engine.calls[0] == (None, True)  # full scan + remote check first
        wait_for(lambda: len(engine.calls) >= 3, what="polls")
        assert all(c == ((), True) or c[0] is None for c in engine.calls[1:])  # polls: remote only
        w.post_dirty(["a.md", "b.md"])
        w.post_dirty(["a.md"])
        wait_for(lambda: any(c[0] and "a.md" in c[0] for c in engine.calls), what="dirty pass")
        assert [a["path"] for a in w.activity()][-2:] == ["a.md", "b.md"]
        assert w.wait(10) == (True, "")
    finally:
        assert w.shutdown(10)


def test_auth_error_stops_polling_until_refresh(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path, fail_with=[AuthError("Invalid token", status=401)])
    w, status = _worker(engine, poll=0.2)
    w.start()
    try:
        wait_for(lambda: status.status()["state"] == "auth_required", what="auth_required")
        st = status.status()
        assert "ohsync login" in st["message"]
        n = len(engine.calls)
        assert w.wait(1.0)[0] is False
        import time
        time.sleep(1.0)  # why: a quiet period of five poll intervals: no pass while the login is rejected
        assert len(engine.calls) == n  # no polling while the login is rejected
        w.refresh()  # e.g. after `ohsync login`
        wait_for(lambda: status.status()["state"] == "idle", what="idle after refresh")
    finally:
        w.shutdown(10)


def test_offline_backs_off_and_recovers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ohsync.daemon.worker.recovery.backoff_delay", lambda attempt, **kw: 0.5)
    engine = FakeEngine(tmp_path, fail_with=[NetworkError("connection refused")] * 2)
    w, status = _worker(engine, poll=0.2)
    w.start()
    try:
        wait_for(lambda: status.status()["state"] == "offline", what="offline")
        assert "; retrying " in status.status()["message"]  # "in N s", or "now" once due
        wait_for(lambda: status.status()["state"] == "idle", timeout=20, what="idle again")
        assert engine.calls[-1][0] is None or len(engine.calls) >= 3
    finally:
        w.shutdown(10)


def test_mirror_missing_stops(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path, fail_with=[MirrorMissingError("The mirror folder is missing.")])
    w, status = _worker(engine)
    w.start()
    try:
        wait_for(lambda: status.status()["state"] == "stopped", what="stopped")
        assert status.status()["message"] == "The mirror folder is missing."
    finally:
        w.shutdown(10)


def test_pause_holds_work(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path)
    w, status = _worker(engine, poll=60)
    w.start()
    try:
        wait_for(lambda: status.status()["state"] == "idle", what="idle")
        w.pause()
        wait_for(lambda: status.status()["state"] == "paused", what="paused")
        n = len(engine.calls)
        w.post_dirty(["x.md"])
        assert w.wait(0.5)[0] is False
        assert len(engine.calls) == n
        # the worker's thread counts the posted path (a loaded machine takes its time); no pass runs
        wait_for(lambda: status.status()["pending_up"] == 1, what="the held path counted")
        assert len(engine.calls) == n
        w.resume()
        wait_for(lambda: status.status()["state"] == "idle", what="idle after resume")
        assert engine.calls[-1] == (None, True)
    finally:
        w.shutdown(10)


def test_fatal_open_error(tmp_path: Path) -> None:
    fatal = []
    status = StatusModel()
    w = SyncWorker(lambda on_event: (_ for _ in ()).throw(FatalError("No such library.")), status,
                   poll_interval=1, on_fatal=fatal.append)
    w.start()
    wait_for(lambda: fatal, what="fatal")
    assert str(fatal[0]) == "No such library."
    assert w.shutdown(10)


# ------------------------------------------------------------------ the daemon, in-process


def _config(isolated_env, tmp_path: Path, **extra) -> Path:
    lines = ['server = "http://127.0.0.1:9"', 'username = "u@x"', "poll_interval = 0.5",
             f'state_dir = "{tmp_path}/state"', "[[mirror]]", f'local = "{tmp_path}/mirror"']
    isolated_env.config.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return isolated_env.config


@pytest.fixture
def daemon(isolated_env, tmp_path: Path):
    cfg = load_config(_config(isolated_env, tmp_path))
    engine = FakeEngine(cfg.mirrors[0].local)
    (tmp_path / "mirror").mkdir()

    def factory(on_event):
        engine.on_event = on_event
        return FakeSession(engine)

    d = Daemon(cfg, session_factory=factory, install_signals=False)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("code", d.run()), daemon=True)
    t.start()
    assert d.ready.wait(10)
    d.engine = engine
    d.thread = t
    d.result = result
    yield d
    d.request_stop()
    t.join(15)


def test_daemon_socket_methods(daemon, isolated_env) -> None:
    client = RpcClient(isolated_env.socket, timeout=10)
    wait_for(lambda: client.call("status")["state"] == "idle", what="idle")
    st = client.call("status")
    assert st["mirrors"][0]["local"] == str(daemon.cfg.mirrors[0].local)
    assert client.call("pause") == {"paused": True}
    assert client.call("status")["state"] == "paused"
    client.call("resume")
    assert client.call("refresh") == {"queued": True}
    assert client.call("wait", {"timeout": 10}) == {"synced": True}
    assert client.call("conflicts") == []
    assert client.call("damaged") == []
    (daemon.cfg.mirrors[0].local / "new.md").write_text("hi")
    wait_for(lambda: any(a["path"] == "new.md" for a in client.call("activity", {"limit": 10})),
             what="watcher → worker → activity")
    for bad in ({"limit": "x"}, {"limit": 0}):
        with pytest.raises(RpcError) as e:
            client.call("activity", bad)
        assert e.value.code == -32602
    with pytest.raises(RpcError) as e:
        client.call("wait", {"timeout": -1})
    assert e.value.code == -32602
    with pytest.raises(RpcError) as e:
        client.call("frobnicate")
    assert e.value.code == -32601
    assert client.call("shutdown") == {"stopping": True}
    daemon.thread.join(15)
    assert daemon.result == {"code": 0}
    assert not isolated_env.socket.exists()


def test_the_daemon_has_no_first_mirror_shortcuts(daemon) -> None:
    """Each mirror's worker, status and memory tools are reached through ``mirrors``: the daemon
    has no ``worker``/``status``/``memory`` standing for the first mirror's (issue #21)."""
    for name in ("worker", "status", "memory"):
        assert not hasattr(daemon, name), name
    assert daemon.mirrors[0].worker.is_alive()


def test_second_daemon_is_refused(daemon, isolated_env) -> None:
    other = Daemon(daemon.cfg, session_factory=lambda on_event: FakeSession(FakeEngine(Path("/"))),
                   install_signals=False)
    with pytest.raises(AlreadyRunning) as e:
        other.run()
    assert f"pid {os.getpid()}" in e.value.message
    assert "ohsync stop" in e.value.message


def test_shutdown_stops_between_files(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path, initial_files=[f"f{i}.md" for i in range(20)], per_file_delay=0.2)
    w, status = _worker(engine)
    w.start()
    wait_for(lambda: len(engine.finished) >= 2, what="the pass started")
    import time
    t0 = time.monotonic()
    assert w.shutdown(30)
    assert time.monotonic() - t0 < 2.0
    assert 2 <= len(engine.finished) < 20
    # the file in progress when shutdown came was finished, not cut off
    assert [a["path"] for a in w.activity(100)] == engine.finished


def test_submit_runs_on_the_worker_thread(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path)
    w, status = _worker(engine, poll=60)
    w.start()
    try:
        ran = []
        w.submit(lambda: ran.append(threading.current_thread().name))
        w.submit(lambda: 1 / 0)  # logged, not fatal
        w.submit(lambda: ran.append("second"))
        wait_for(lambda: len(ran) == 2, what="submitted jobs")
        assert ran == ["ohsync-sync-worker", "second"]
        assert w.is_alive()
    finally:
        w.shutdown(10)


def test_a_stop_while_the_engine_opens_leaves_no_watcher_running(isolated_env, tmp_path: Path) -> None:
    """A stop that comes while the worker opens the engine: the watcher (and the other helpers)
    it would start afterwards are not started, so no thread outlives the daemon."""
    cfg = load_config(_config(isolated_env, tmp_path))
    (tmp_path / "mirror").mkdir()
    opening, stopped = threading.Event(), threading.Event()

    def factory(on_event):
        opening.set()
        assert stopped.wait(10)      # the engine opens only once the stop has begun
        return FakeSession(FakeEngine(cfg.mirrors[0].local, on_event=on_event))

    d = Daemon(cfg, session_factory=factory, install_signals=False)
    t = threading.Thread(target=d.run, name="daemon-under-test")
    t.start()
    assert opening.wait(10)
    for mirror in d.mirrors:          # what the daemon's teardown does first, then the engine opens
        mirror.stop_helpers()
    stopped.set()
    d.request_stop()
    t.join(30)
    assert not t.is_alive()
    assert [th.name for th in threading.enumerate() if th.name.startswith("ohsync-watch")] == []


def _rescanning(engine: FakeEngine, passes: int) -> None:
    """Make the first ``passes`` passes of ``engine`` report local deletes (``rescan``)."""
    plain = engine.sync

    def sync(*args, **kw):
        report = plain(*args, **kw)
        report.rescan = len(engine.calls) <= passes
        return report
    engine.sync = sync  # type: ignore[method-assign]


def test_local_deletes_get_their_full_scan_on_the_schedulers_clock(tmp_path: Path) -> None:
    engine = FakeEngine(tmp_path)
    _rescanning(engine, passes=2)
    w, status = _worker(engine, poll=600.0)  # no poll comes in the test's time
    w.start()
    try:
        wait_for(lambda: len(engine.calls) >= 1, what="the initial pass")
        w.post_dirty(["gone.md"])
        wait_for(lambda: len(engine.calls) >= 2, what="the pass that sees the delete")
        assert engine.calls[1] == (("gone.md",), False)
        # the full scan that carries the deletes out, RESCAN_DELAY later, asked by nobody else
        wait_for(lambda: len(engine.calls) >= 3, timeout=20, what="the rescan")
        assert engine.calls[2][0] is None
    finally:
        assert w.shutdown(10)


def test_once_shut_down_no_thread_the_worker_started_runs(tmp_path: Path) -> None:
    """The worker's delayed calls (the rescan after local deletes, the "syncing"
    notice of a slow check) run on its scheduler, which it joins: none outlives it."""
    before = set(threading.enumerate())
    engine = FakeEngine(tmp_path)
    _rescanning(engine, passes=100)
    w, status = _worker(engine)
    w.start()
    try:
        wait_for(lambda: len(engine.calls) >= 2, what="two passes, each planning a rescan in 2 s")
    finally:
        assert w.shutdown(10)
    assert [t.name for t in threading.enumerate() if t not in before and t.is_alive()] == []


def test_the_scheduler_runs_delayed_calls_in_order_and_drops_them_at_stop() -> None:
    from ohsync.daemon.scheduler import Scheduler
    before = set(threading.enumerate())
    ran: list[tuple[str, str]] = []
    sched = Scheduler(lambda: ran.append(("poll", threading.current_thread().name)))
    sched.start()
    try:
        sched.call_in(0.2, lambda: ran.append(("late", threading.current_thread().name)))
        sched.call_in(0.05, lambda: ran.append(("early", threading.current_thread().name)))
        sched.call_in(0.1, lambda: 1 / 0)  # logged; the clock goes on
        sched.poll_in(0.15)
        sched.call_in(60, lambda: ran.append(("never", "")))
        wait_for(lambda: len(ran) >= 3, what="three calls")
        assert ran == [("early", "ohsync-scheduler"), ("poll", "ohsync-scheduler"), ("late", "ohsync-scheduler")]
    finally:
        sched.stop()
    assert [t.name for t in threading.enumerate() if t not in before and t.is_alive()] == []  # joined
    assert ("never", "") not in ran


def test_the_workers_threads_are_on_the_daemons_thread_base(tmp_path: Path) -> None:
    from ohsync.daemon.service_thread import ServiceThread
    w, _ = _worker(FakeEngine(tmp_path))
    assert isinstance(w.scheduler, ServiceThread)
    w.start()
    try:
        threads = {t.name: t for t in threading.enumerate()}
        assert not threads["ohsync-scheduler"].daemon  # it never blocks: shutdown() always joins it
        assert threads["ohsync-sync-worker"].daemon  # a pass stuck in a request may outlast the join
    finally:
        assert w.shutdown(10)
    assert not w.is_alive()


def test_a_pass_stopped_by_a_local_restructure_is_run_again_unasked(tmp_path: Path) -> None:
    """A local folder moved mid-pass stops the pass for a rescan; the rescan
    comes on the worker's own clock, not only when another message arrives."""
    engine = FakeEngine(tmp_path)
    plain = engine.sync

    def sync(*args, **kw):
        report = plain(*args, **kw)
        report.interrupted = len(engine.calls) == 1  # the initial pass (it took the poll) is stopped
        return report
    engine.sync = sync  # type: ignore[method-assign]
    w, status = _worker(engine, poll=600.0)  # no poll of its own comes in the test's time
    w.start()
    try:
        wait_for(lambda: len(engine.calls) >= 2, timeout=20, what="the pass run again")
        assert engine.calls[1] == (None, True)  # a full scan with the server checked, as the stopped pass
    finally:
        assert w.shutdown(10)
