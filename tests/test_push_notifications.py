"""Push notifications: devserver's emulated notification server, the daemon's
channel (daemon/notifications.py) and the daemon running on it.

The service is started on the same 127.0.0.1 devserver (``/notification``);
``devserver.notifications.set_state`` switches it up, down (a crashed or
restarting service: connections dropped, ping 502) or absent (none
deployed: 404, as on most servers).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import threading
import time
from itertools import pairwise
from pathlib import Path

import httpx
import jwt
import pytest
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import DaemonProc, wait_for
from ohsync.daemon.notifications import PushChannel
from ohsync.engine.client import SeafileClient

USER = "user@example.edu.cn"


@pytest.fixture
def library(devserver):
    devserver.notifications.set_state("up")
    return devserver.create_library(USER, "OH-Memory")


def ws_url(devserver) -> str:
    return devserver.url.replace("http://", "ws://") + "/notification"


def subscribe(ws, repo_id: str, token: str) -> None:
    ws.send(json.dumps({"type": "subscribe", "content": {"repos": [{"id": repo_id, "jwt_token": token}]}}))


def token(devserver, repo_id: str) -> str:
    resp = httpx.get(f"{devserver.url}/api/v2.1/repos/{repo_id}/repo-notification-jwt-token/",
                     headers={"Authorization": f"Token {devserver.token_for(USER)}"})
    assert resp.status_code == 200
    return resp.json()["token"]


# ------------------------------------------------------------------ devserver's service

def test_discovery_answers_like_a_proxied_notification_server(devserver, library):
    assert httpx.get(devserver.url + "/notification/ping").text == '{"ret": "pong"}\n'
    devserver.notifications.set_state("down")
    assert httpx.get(devserver.url + "/notification/ping").status_code == 502
    devserver.notifications.set_state("absent")
    assert httpx.get(devserver.url + "/notification/ping").status_code == 404
    # seahub hands out a token whether or not a service exists
    claims = jwt.decode(token(devserver, library), devserver.notifications.secret, algorithms=["HS256"])
    assert claims["repo_id"] == library and claims["username"] == USER
    assert abs(claims["exp"] - time.time() - 259_200) < 60
    client = SeafileClient(devserver.url, devserver.token_for(USER), retries=0)
    assert client.notification_ping() is False
    devserver.notifications.set_state("up")
    assert client.notification_ping() is True
    assert client.notification_url() == ws_url(devserver)


def test_subscription_gets_repo_updates_and_bad_tokens_get_jwt_expired(devserver, library):
    with connect(ws_url(devserver), proxy=None) as ws:
        ws.send(json.dumps({"type": "subscribe", "content": {"repos": [
            {"id": library, "jwt_token": token(devserver, library)},
            {"id": "8d1e0f2a-3b4c-4d5e-8f9a-0b1c2d3e4f5a", "jwt_token": "not-a-token"}]}}))
        assert json.loads(ws.recv(timeout=5)) == {
            "type": "jwt-expired", "content": {"repo_id": "8d1e0f2a-3b4c-4d5e-8f9a-0b1c2d3e4f5a"}}
        wait_for(lambda: devserver.notifications.info()["subscriptions"].get(library) == 1, timeout=5)
        devserver.put_file(library, "/a.md", b"a\n")
        frame = ws.recv(timeout=5)
        assert frame.endswith("\n")
        assert json.loads(frame) == {"type": "repo-update", "content": {
            "repo_id": library, "commit_id": devserver.head_commit(library)}}
        ws.send(json.dumps({"type": "unsubscribe", "content": {"repos": [{"id": library}]}}))
        wait_for(lambda: not devserver.notifications.info()["subscriptions"], timeout=5)
        devserver.put_file(library, "/b.md", b"b\n")
        with pytest.raises(TimeoutError):
            ws.recv(timeout=1)


def test_an_unexpected_message_drops_the_connection(devserver, library):
    with connect(ws_url(devserver), proxy=None) as ws:
        ws.send("hello")
        with pytest.raises(ConnectionClosed) as info:
            ws.recv(timeout=5)
        assert info.value.rcvd is None  # no close frame: the client sees 1006


def test_the_service_pings_every_second(devserver, library):
    seen: list[float] = []

    from ohsync.daemon.notifications import _Watched

    class Counting(_Watched):
        def process_event(self, event):
            super().process_event(event)
            if self.last_ping is not None and (not seen or seen[-1] != self.last_ping):
                seen.append(self.last_ping)

    with (connect(ws_url(devserver), proxy=None, ping_interval=None, create_connection=Counting) as ws,
          pytest.raises(TimeoutError)):
        ws.recv(timeout=3.5)
    assert len(seen) >= 3 and all(0.5 < b - a < 1.5 for a, b in pairwise(seen))


# ------------------------------------------------------------------ the daemon's channel

class Recorder:
    def __init__(self) -> None:
        self.modes: list[bool] = []
        self.updates: list[tuple[float, str]] = []
        self.lock = threading.Lock()

    def mode(self, active: bool) -> None:
        with self.lock:
            self.modes.append(active)

    def update(self, commit: str) -> None:
        with self.lock:
            self.updates.append((time.monotonic(), commit))


@pytest.fixture
def channel(devserver, library):
    rec = Recorder()
    client = SeafileClient(devserver.url, devserver.token_for(USER), retries=0)
    chan = PushChannel(client, library, on_update=rec.update, on_mode=rec.mode, ping_deadline=2.0)
    chan.start()
    yield chan, rec
    chan.stop()
    client.close()


def test_channel_subscribes_and_relays_each_update(devserver, library, channel):
    chan, rec = channel
    wait_for(lambda: rec.modes == [True], timeout=10, what="push mode")
    wait_for(lambda: devserver.notifications.info()["subscriptions"].get(library) == 1, timeout=5)
    sent = time.monotonic()
    devserver.put_file(library, "/x.md", b"x\n")
    wait_for(lambda: rec.updates, timeout=5, what="the repo-update")
    assert rec.updates[0][1] == devserver.head_commit(library)
    assert rec.updates[0][0] - sent < 1.0
    other = devserver.create_library(USER, "Other")
    devserver.put_file(other, "/y.md", b"y\n")  # not our library: not relayed (not subscribed)
    time.sleep(0.5)  # why: a quiet period: the other library's update must not be relayed
    assert len(rec.updates) == 1


def test_channel_reconnects_after_the_service_restarts(devserver, library, channel):
    chan, rec = channel
    wait_for(lambda: rec.modes == [True], timeout=10, what="push mode")
    devserver.notifications.set_state("down")
    wait_for(lambda: rec.modes == [True, False], timeout=10, what="polling once the service died")
    time.sleep(1.5)  # why: the service stays down a while: the channel's reconnect attempts fail meanwhile
    devserver.notifications.set_state("up")
    wait_for(lambda: rec.modes == [True, False, True], timeout=20, what="push again after the restart")
    wait_for(lambda: devserver.notifications.info()["subscriptions"].get(library) == 1, timeout=5)
    devserver.put_file(library, "/after.md", b"after\n")
    wait_for(lambda: rec.updates, timeout=5, what="an update on the new connection")


def test_channel_leaves_a_half_dead_connection(devserver, library, channel):
    """The server stops pinging (and delivering) but keeps the socket: reconnect."""
    chan, rec = channel
    wait_for(lambda: rec.modes == [True], timeout=10, what="push mode")
    devserver.notifications.ping_interval = 3600  # this connection gets no more pings
    wait_for(lambda: rec.modes[:2] == [True, False], timeout=10, what="the dead connection noticed")
    devserver.notifications.ping_interval = 1.0
    wait_for(lambda: rec.modes[-1] is True, timeout=20, what="a fresh connection")


def test_channel_stays_on_polling_without_a_service(devserver):
    devserver.notifications.set_state("absent")
    repo = devserver.create_library(USER, "OH-Memory")
    rec = Recorder()
    client = SeafileClient(devserver.url, devserver.token_for(USER), retries=0)
    chan = PushChannel(client, repo, on_update=rec.update, on_mode=rec.mode)
    devserver.reset_counters()
    chan.start()
    time.sleep(1.5)  # why: a quiet period: after the one probe nothing more is asked
    chan.stop()
    assert rec.modes == [] and chan.active is False
    assert devserver.requests == {"GET /notification/ping": 1}  # one probe, then nothing for a long while


# ------------------------------------------------------------------ the daemon

@pytest.fixture
def daemon_setup(seed_daemon, devserver):
    s = seed_daemon(put={"/index.md": b"# Index\n"}, config=False)

    def start(poll_interval: float, safety: float = 600.0, **extra: object) -> DaemonProc:
        s.configure(poll_interval=poll_interval, push_safety_poll=safety, **extra)
        return s.start()

    return devserver, s.repo_id, s.mirror, start


def _local(mirror: Path, rel: str) -> bytes | None:
    try:
        return (mirror / rel).read_bytes()
    except OSError:
        return None


def test_daemon_with_push_gets_a_remote_change_in_under_a_second(daemon_setup):
    srv, repo, mirror, start = daemon_setup
    srv.notifications.set_state("up")
    d = start(poll_interval=600)
    d.wait_state("idle", timeout=90)
    wait_for(lambda: d.status()["notifications"] == "push", timeout=20, what="push mode")
    assert "notifications: push" in d.cli("status").stdout
    delays = []
    for i in range(5):
        data = f"# Note {i}\n\nwritten on the phone\n".encode()
        sent = time.monotonic()
        srv.put_file(repo, f"/deep/er/note{i}.md", data)
        wait_for(lambda i=i, data=data: _local(mirror, f"deep/er/note{i}.md") == data, timeout=10, interval=0.01,
                 what="the remote change locally")
        delays.append(time.monotonic() - sent)
    assert statistics.median(delays) < 1.0, delays
    # idle with push: no polling at all (the safety poll is 600 s away)
    d.wait_state("idle", timeout=30)
    srv.reset_counters()
    time.sleep(3)  # why: a quiet period: no polling at all with push
    assert srv.request_count(r"^GET /api2/repos/") == 0, srv.requests


def test_daemon_reconnects_after_a_restart_and_loses_no_change(daemon_setup):
    srv, repo, mirror, start = daemon_setup
    srv.notifications.set_state("up")
    d = start(poll_interval=600)  # polling alone would not see anything within this test
    d.wait_state("idle", timeout=90)
    wait_for(lambda: d.status()["notifications"] == "push", timeout=20, what="push mode")
    srv.notifications.set_state("down")
    wait_for(lambda: d.status()["notifications"] == "polling", timeout=20, what="polling mode")
    srv.put_file(repo, "/while-down.md", b"written while the service was down\n")  # no event for this
    time.sleep(1)  # why: the service stays down a while after the change it never announced
    srv.notifications.set_state("up")
    wait_for(lambda: d.status()["notifications"] == "push", timeout=30, what="push mode again")
    wait_for(lambda: _local(mirror, "while-down.md") == b"written while the service was down\n",
             timeout=15, what="the change made while the channel was down")


@pytest.mark.parametrize("how", ["absent", "dies", "turned-off"])
def test_daemon_falls_back_to_polling(daemon_setup, how):
    srv, repo, mirror, start = daemon_setup
    srv.notifications.set_state("absent" if how == "absent" else "up")
    d = start(poll_interval=1.0, safety=600, **({"notifications": False} if how == "turned-off" else {}))
    d.wait_state("idle", timeout=90)
    if how == "dies":
        wait_for(lambda: d.status()["notifications"] == "push", timeout=20, what="push mode")
        srv.notifications.set_state("down")
    wait_for(lambda: d.status()["notifications"] == "polling", timeout=20, what="polling mode")
    srv.put_file(repo, "/polled.md", b"found by polling\n")
    wait_for(lambda: _local(mirror, "polled.md") == b"found by polling\n", timeout=15,
             what="the change found by the normal poll")
    assert d.status()["notifications"] == "polling"
    if how == "turned-off":
        assert srv.request_count(r"notification") == 0 and srv.notifications.info()["connections"] == 0


def test_config_keys_for_transfers_and_push(tmp_path):
    from ohsync.daemon.config import ConfigError, load_config

    path = tmp_path / "config.toml"
    path.write_text("", encoding="utf-8")
    cfg = load_config(path)
    assert (cfg.transfers, cfg.notifications, cfg.push_safety_poll) == (4, True, 300.0)
    path.write_text("transfers = 8\nnotifications = false\npush_safety_poll = 120\n", encoding="utf-8")
    cfg = load_config(path)
    assert (cfg.transfers, cfg.notifications, cfg.push_safety_poll) == (8, False, 120.0)
    assert not cfg.warnings
    for bad in ("transfers = 0", "transfers = 2.5", "notifications = 1", "push_safety_poll = 0"):
        path.write_text(bad + "\n", encoding="utf-8")
        with pytest.raises(ConfigError):
            load_config(path)


# ------------------------------------------------------------------ the worker's side

def test_worker_polls_on_push_skips_known_heads_and_slows_its_timer(tmp_path):
    from daemon_helpers import FakeEngine, FakeSession
    from ohsync.daemon.status import StatusModel
    from ohsync.daemon.worker import SyncWorker

    class Meta:
        @staticmethod
        def get_meta(key: str) -> str | None:
            return "a" * 40 if key == "head" else None

    engine = FakeEngine(tmp_path)
    engine.state = Meta()  # the head the last pass saw
    status = StatusModel(library="OH-Memory", local=str(tmp_path), poll_interval=0.5, push_poll_interval=600)
    status.watcher_alive = lambda: True
    w = SyncWorker(lambda on_event: FakeSession(engine), status, poll_interval=0.5, push_poll_interval=600)
    w.start()
    try:
        wait_for(lambda: status.status()["state"] == "idle", what="idle")
        assert status.status()["notifications"] == "polling"
        w.set_push(True)
        wait_for(lambda: status.status()["notifications"] == "push", what="push mode")
        time.sleep(1.0)  # why: settling: the pass the new channel asked for runs, then the safety poll is 600 s away
        calls = len(engine.calls)
        time.sleep(1.5)  # why: a quiet period: polling at 0.5 s would have passed three times
        assert len(engine.calls) == calls
        w.push_update("a" * 40)  # our own head: nothing to do
        time.sleep(0.5)  # why: a quiet period: no pass for our own head
        assert len(engine.calls) == calls
        for _ in range(5):  # a burst of announcements: coalesced
            w.push_update("b" * 40)
        wait_for(lambda: len(engine.calls) > calls, what="a pass after the announcement")
        time.sleep(0.5)  # why: a quiet period: the burst's other announcements add at most one pass
        assert 1 <= len(engine.calls) - calls <= 2 and engine.calls[-1][1] is True
        w.set_push(False)  # the channel went down: back to the normal interval
        calls = len(engine.calls)
        wait_for(lambda: len(engine.calls) >= calls + 2, timeout=5, what="normal polling again")
        assert status.status()["notifications"] == "polling"
    finally:
        assert w.shutdown(10)
