"""The daemon with a state database it cannot use as it is: one of a newer
ohsync stops the mirror with what to do, and `ohsync resync` sets it aside
and adopts every file by content; a damaged one is set aside at start with
a sentence in the log. Nothing is uploaded, downloaded or doubled."""

from __future__ import annotations

import os
import sqlite3
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import DaemonProc, Env, mirrored, read_tree, wait_for
from ohsync.engine.state_schema import SCHEMA_VERSION

FILES = {f"notes/n{i}.md": f"# note {i}\n".encode() for i in range(8)} | {"pic.bin": b"\x89PNG\x00" * 40}


@pytest.fixture
def synced(isolated_env: Env, devserver, seed_daemon):
    s = seed_daemon(files=FILES, poll_interval=1.0)
    first = s.start(wait="idle")
    wait_for(s.converged, timeout=60, what="the first sync")
    first.stop()
    (db,) = (isolated_env.root / "state" / "mirrors").glob("*/state.sqlite3")
    devserver.reset_counters()
    return s.repo_id, s.mirror, db


def _no_transfers(devserver) -> None:
    assert devserver.request_count(r"POST /seafhttp/(upload|update)") == 0, devserver.faults.lines
    assert devserver.request_count(r"GET /seafhttp/files/") == 0, devserver.faults.lines


def test_a_newer_state_stops_the_mirror_until_resync_sets_it_aside(isolated_env: Env, devserver, synced) -> None:
    repo, mirror, db = synced
    conn = sqlite3.connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")   # as a newer ohsync would leave it
    conn.commit()
    conn.close()
    daemon = DaemonProc(isolated_env)
    try:
        st = daemon.wait_state("stopped", timeout=60)
        assert "newer ohsync" in st["message"] and "`ohsync resync`" in st["message"], st["message"]
        assert "Upgrade ohsync" in st["message"]
        done = daemon.cli("resync")
        assert done.returncode == 0, done.stderr
        daemon.wait_state("idle", timeout=60)
        assert daemon.client().call("wait", {"timeout": 60}) == {"synced": True}
    finally:
        daemon.stop()
    kept = list(db.parent.glob("state.sqlite3.newer-*"))
    assert len(kept) == 1
    conn = sqlite3.connect(kept[0])
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1   # kept as it was
    conn.close()
    assert read_tree(mirror) == mirrored(devserver.tree(repo))
    assert not [p for p in devserver.tree(repo) if p.startswith("/.conflict/")]
    _no_transfers(devserver)


def test_a_damaged_state_is_set_aside_at_start_and_said_in_the_log(isolated_env: Env, devserver, synced) -> None:
    repo, mirror, db = synced
    for side in (db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        side.unlink(missing_ok=True)
    db.write_bytes(b"overwritten by a bad copy\n" * 100)
    daemon = DaemonProc(isolated_env)
    try:
        daemon.wait_state("idle", timeout=90)
        assert daemon.client().call("wait", {"timeout": 60}) == {"synced": True}
    finally:
        daemon.stop()
    (kept,) = db.parent.glob("state.sqlite3.damaged-*")
    assert kept.read_bytes() == b"overwritten by a bad copy\n" * 100
    logged = "\n".join(p.read_text(errors="replace") for p in (isolated_env.root / "state").rglob("*.log"))
    logged += (isolated_env.root / "daemon-output.log").read_text(errors="replace")
    assert f"was moved to {kept}" in logged and "nothing is deleted" in logged
    assert read_tree(mirror) == mirrored(devserver.tree(repo))
    assert not [p for p in devserver.tree(repo) if p.startswith("/.conflict/")]
    _no_transfers(devserver)
