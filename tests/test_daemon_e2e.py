"""End to end: the real ``ohsync run --no-tray`` process against devserver on 127.0.0.1.

The devserver runs in the test process (the ``devserver`` fixture); the
daemon is a subprocess with an isolated config, state dir, socket and file
keyring.  Timeouts are generous: they bound a failure, not the speed.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import (
    DEMO_LIBRARY,
    DaemonProc,
    mirrored,
    ohsync_cmd,
    read_tree,
    wait_for,
    write_config,
)
from ohsync.daemon import credentials

USER = "user@example.edu.cn"
LINE = "- [observation] 2026-11-30 10:00 在桌面端追加的一行 #测试 (e2e)\n"


@pytest.fixture
def setup(seed_daemon):
    """A library seeded from the demo tree, a login in the test keyring, a config."""
    return seed_daemon(tree=DEMO_LIBRARY, poll_interval=1.0)


def _same(srv, repo_id: str, mirror: Path) -> bool:
    return mirrored(srv.tree(repo_id)) == read_tree(mirror)


def test_cold_start_edits_both_ways_and_stop(setup) -> None:
    srv, repo_id, mirror = setup.srv, setup.repo_id, setup.mirror
    d = setup.start()
    st = d.wait_state("idle", timeout=90)
    [item] = st["mirrors"]
    assert (item["name"], item["library"], item["local"], item["state"], item["message"]) == (
        "OH-Memory", "OH-Memory", str(mirror), "idle", "Up to date")
    assert read_tree(mirror) == mirrored(srv.tree(repo_id)) == mirrored(read_tree(DEMO_LIBRARY))  # byte-identical

    # a local edit reaches the server
    journal = mirror / "journal" / "2026-10.md"
    with open(journal, "ab") as f:
        f.write(LINE.encode("utf-8"))
    wait_for(lambda: srv.read_file(repo_id, "/journal/2026-10.md") == journal.read_bytes(), timeout=60,
             what="the local edit on the server")
    assert d.client().call("wait", {"timeout": 60}) == {"synced": True}

    # a remote edit reaches the local file within a few poll intervals
    remote = srv.read_file(repo_id, "/index.md") + "- [remote] 从另一台设备写入 #测试\n".encode("utf-8")
    t0 = time.monotonic()
    srv.put_file(repo_id, "/index.md", remote)
    wait_for(lambda: (mirror / "index.md").read_bytes() == remote, timeout=60, what="the remote edit locally")
    assert time.monotonic() - t0 < 15  # poll_interval is 1 s
    d.wait_state("idle", timeout=60)
    assert _same(srv, repo_id, mirror)

    # scheduled idle polls (every 1 s here) cost one request each
    client = d.client()
    p0 = client.call("status")["polls"]
    srv.reset_counters()
    wait_for(lambda: client.call("status")["polls"] >= p0 + 4, timeout=30, what="four idle polls")
    p1 = client.call("status")["polls"]
    n = srv.request_count()
    assert p1 - p0 >= 3
    assert p1 - p0 - 1 <= n <= p1 - p0 + 1, (p1 - p0, srv.faults.lines)

    # status --json prints the status object exactly
    r = d.cli("status", "--json")
    assert r.returncode == 0, r.stderr
    st = json.loads(r.stdout)
    assert list(st)[:12] == ["protocol", "state", "message", "last_sync", "pending_up", "pending_down",
                             "conflicts", "damaged", "skipped", "held_deletes", "transfer", "mirrors"]
    assert st["state"] == "idle"
    r = d.cli("activity")
    assert r.returncode == 0 and "journal/2026-10.md" in r.stdout

    r = d.cli("stop")
    assert r.returncode == 0, r.stderr
    assert d.wait_exit(60) == 0
    assert not setup.env.socket.exists()
    r = d.cli("status")
    assert r.returncode == 3


def test_restart_transfers_nothing_and_idle_poll_is_one_request(setup, isolated_env, devserver) -> None:
    srv, _repo_id, mirror = setup.srv, setup.repo_id, setup.mirror
    d = setup.start()
    d.wait_state("idle", timeout=90)
    assert d.cli("stop").returncode == 0
    assert d.wait_exit(60) == 0
    stamps = {p: p.stat().st_mtime_ns for p in mirror.rglob("*") if p.is_file()}

    # restart with a long poll interval so that only our refresh polls
    write_config(isolated_env, devserver.url, USER, mirror, poll_interval=3600)
    srv.reset_counters()
    d2 = setup.start()
    d2.wait_state("idle", timeout=90)
    lines = list(srv.faults.lines)
    assert not [ln for ln in lines if "/seafhttp/" in ln or "upload" in ln or "download" in ln or "zip" in ln], lines
    assert {p: p.stat().st_mtime_ns for p in mirror.rglob("*") if p.is_file()} == stamps

    # one idle poll = exactly one request
    client = d2.client()
    polls = client.call("status")["polls"]
    srv.reset_counters()
    client.call("refresh")
    wait_for(lambda: client.call("status")["polls"] > polls, timeout=30, what="the refresh poll")
    d2.wait_state("idle", timeout=30)
    assert srv.request_count() == 1, srv.faults.lines
    # `wait` (a local scan) costs nothing on an up-to-date mirror
    srv.reset_counters()
    assert client.call("wait", {"timeout": 30}) == {"synced": True}
    assert srv.request_count() == 0, srv.faults.lines


def test_revoked_token_is_auth_required_and_nothing_is_lost(setup) -> None:
    srv, _repo_id, mirror = setup.srv, setup.repo_id, setup.mirror
    d = setup.start()
    d.wait_state("idle", timeout=90)
    before = read_tree(mirror)
    srv.revoke_token(srv.token_for(USER))
    st = d.wait_state("auth_required", timeout=60)
    assert "ohsync login" in st["message"]
    r = d.cli("status", "--json")
    # the daemon runs, but the mirror does not sync: exit 1, the message says what to do
    assert r.returncode == 1 and json.loads(r.stdout)["state"] == "auth_required"
    assert read_tree(mirror) == before  # nothing deleted or overwritten
    # polling stopped: no requests for a few poll intervals
    srv.reset_counters()
    time.sleep(3)  # why: a quiet period of a few poll intervals: no request may be made
    assert srv.request_count() == 0, srv.faults.lines
    assert d.proc.poll() is None  # still running, waiting for a login
    # the token never reached a log line
    token = credentials.load_token(srv.url, USER)
    logs = d.output() + (setup.env.root / "state" / "logs" / "ohsync.log").read_text(encoding="utf-8")
    assert "Login needed" in logs or "rejected" in logs
    assert token and token not in logs


def test_both_sides_edited_while_stopped_merge(setup) -> None:
    srv, repo_id, mirror = setup.srv, setup.repo_id, setup.mirror
    d = setup.start()
    d.wait_state("idle", timeout=90)
    assert d.cli("stop").returncode == 0
    d.wait_exit(60)
    journal = mirror / "journal" / "2026-10.md"
    with open(journal, "ab") as f:
        f.write(LINE.encode("utf-8"))
    remote_line = "- [observation] 2026-11-30 10:05 手机端追加的一行 #测试 (android)\n".encode("utf-8")
    srv.put_file(repo_id, "/journal/2026-10.md", srv.read_file(repo_id, "/journal/2026-10.md") + remote_line)
    d2 = setup.start()
    d2.wait_state("idle", timeout=90)
    wait_for(lambda: _same(srv, repo_id, mirror), timeout=60, what="both sides equal")
    merged = journal.read_bytes()
    assert LINE.encode("utf-8") in merged and remote_line in merged


def test_second_instance_and_sigterm(setup) -> None:
    d = setup.start()
    d.wait_state("idle", timeout=90)
    r = subprocess.run([*ohsync_cmd(), "run", "--no-tray"], env=setup.env.vars(), capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 1
    assert "already running" in r.stderr and f"pid {d.proc.pid}" in r.stderr, r.stderr
    d.proc.send_signal(signal.SIGTERM)
    assert d.wait_exit(60) == 0
    assert not setup.env.socket.exists()
    assert not (setup.env.root / "state" / "ohsync.pid").exists()


def test_missing_library_is_a_clear_error_unless_create(isolated_env, devserver, tmp_path: Path) -> None:
    credentials.save_token(devserver.url, USER, devserver.token_for(USER))
    mirror = tmp_path / "mirror"
    write_config(isolated_env, devserver.url, USER, mirror, library="No-Such-Library")
    r = subprocess.run([*ohsync_cmd(), "run", "--no-tray"], env=isolated_env.vars(), capture_output=True,
                       text=True, timeout=90)
    assert r.returncode == 1
    assert "No-Such-Library" in r.stderr and "create_library" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr

    write_config(isolated_env, devserver.url, USER, mirror, library="No-Such-Library", create_library=True)
    d = DaemonProc(isolated_env)
    try:
        d.wait_state("idle", timeout=90)
        assert devserver.library_id("No-Such-Library") is not None
    finally:
        d.stop()


def test_demo_seconds(isolated_env, tmp_path: Path) -> None:
    """The commands the demo prints reach its daemon as they are, from the person's own
    environment (their config and socket elsewhere), without the "another config" note."""
    import shlex

    demo_dir = tmp_path / "demo"
    proc = subprocess.Popen([*ohsync_cmd(), "demo", "--seconds", "90", "--dir", str(demo_dir), "--no-tray"],
                            env=isolated_env.vars(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        printed = []
        for line in proc.stdout:
            printed.append(line)
            if line.startswith("Press Ctrl-C"):
                break
        status_line = next(line for line in printed if line.strip().endswith(" status"))
        command = shlex.split(status_line.strip().removeprefix("• "))
        assert "--config" in command and not any(w.startswith("OHSYNC_") for w in command), status_line

        def status_answers() -> subprocess.CompletedProcess[str] | None:
            r = subprocess.run(command, env=isolated_env.vars(), capture_output=True, text=True, timeout=60)
            return r if r.returncode == 0 and ("idle" in r.stdout or "attention" in r.stdout) else None
        r = wait_for(status_answers, timeout=90, what="the printed status command answering")
        assert "note:" not in r.stderr and "another config" not in r.stderr, r.stderr
        stop = subprocess.run(command[:-1] + ["stop"], env=isolated_env.vars(), capture_output=True, text=True,
                              timeout=120)
        assert stop.returncode == 0 and "note:" not in stop.stderr, stop.stdout + stop.stderr
        rest, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, "".join(printed) + rest
    assert read_tree(demo_dir / "OH-Memory") == read_tree(DEMO_LIBRARY)
    assert not isolated_env.keyring_file.exists()  # the demo used its own keyring
    assert (demo_dir / "keyring.json").exists()


def test_tray_failure_falls_back_to_headless(setup) -> None:
    """A display that cannot be opened: one clear log line, then the daemon runs headless."""
    env = setup.env.vars()
    env["DISPLAY"] = ":4242"  # nothing listens there
    with open(setup.env.root / "tray-run.log", "wb") as log:  # the daemon's own copy stays open
        proc = subprocess.Popen([*ohsync_cmd(), "run"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        from ohsync.daemon.protocol import RpcClient

        client = RpcClient(setup.env.socket, timeout=10)
        wait_for(lambda: client.call("status")["state"] == "idle", timeout=90, what="idle without a tray")
        out = (setup.env.root / "tray-run.log").read_text(encoding="utf-8", errors="replace")
        assert "headless" in out, out
        assert "Traceback" not in out, out
    finally:
        proc.terminate()
        assert proc.wait(60) == 0


def test_mirror_folder_gone_stops_then_refresh_recovers(setup) -> None:
    srv, repo_id, mirror = setup.srv, setup.repo_id, setup.mirror
    d = setup.start()
    d.wait_state("idle", timeout=90)
    before = srv.tree(repo_id)
    aside = mirror.with_name("mirror-unmounted")
    mirror.rename(aside)  # like a drive that was unplugged
    st = d.wait_state("stopped", timeout=60)
    assert str(mirror) in st["message"]
    time.sleep(2)  # why: a quiet period: a stopped mirror must not delete anything on the server
    assert srv.tree(repo_id) == before  # nothing deleted on the server
    aside.rename(mirror)
    r = d.cli("refresh")
    assert r.returncode == 0, r.stderr
    d.wait_state("idle", timeout=60)

    def resumed_after_the_error() -> bool:  # the log does not end with the error that stopped syncing
        lines = d.cli("log", "-n", "200").stdout.splitlines()
        stop = max(i for i, line in enumerate(lines) if "is missing. Syncing is stopped" in line)
        return any("INFO" in line and "syncing resumed (it had stopped: The mirror folder" in line
                   for line in lines[stop + 1:])
    wait_for(resumed_after_the_error, timeout=30, what="an INFO line: syncing resumed")
    # the watcher works again
    (mirror / "tasks" / "新任务.md").write_text("---\ntitle: 新任务\n---\n", encoding="utf-8")
    wait_for(lambda: "/tasks/新任务.md" in srv.tree(repo_id), timeout=60, what="new file after recovery")


def test_binary_edited_on_both_sides_is_a_listed_conflict(setup) -> None:
    srv, repo_id, mirror = setup.srv, setup.repo_id, setup.mirror
    rel = "Files/downloads/2026-11/hash_benchmark_chart (1).png"
    d = setup.start()
    d.wait_state("idle", timeout=90)
    assert d.cli("stop").returncode == 0
    d.wait_exit(60)
    (mirror / rel).write_bytes(b"\x89PNG\r\n\x1a\nlocal version")
    srv.put_file(repo_id, "/" + rel, b"\x89PNG\r\n\x1a\nremote version")
    d2 = setup.start()
    st = d2.wait_state("attention", timeout=90)  # the conflict copy needs the person: never "Up to date"
    assert "1 conflict needs you" in st["message"] and "`ohsync conflicts`" in st["message"]
    r = d2.cli("conflicts", "--json")
    assert r.returncode == 0, r.stderr
    items = json.loads(r.stdout)
    assert [c["path"] for c in items] == [rel]
    assert set(items[0]) >= {"path", "archived", "time", "reason", "fields"}
    assert d2.status()["conflicts"] == 1
    assert (mirror / rel).read_bytes() == b"\x89PNG\r\n\x1a\nlocal version"  # local wins the path
    wait_for(lambda: (mirror / items[0]["archived"]).exists(), timeout=60, what="the archived copy locally")
    assert (mirror / items[0]["archived"]).read_bytes() == b"\x89PNG\r\n\x1a\nremote version"
    r = d2.cli("conflicts")
    assert rel in r.stdout and items[0]["archived"] in r.stdout
