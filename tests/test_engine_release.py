"""What an idle daemon does not keep in memory: a settled engine drops its
remote listing between passes (it stays in the state database) and the next
pass still finds every change on both sides; the sync worker does that after
``RELEASE_AFTER`` seconds without work; the push channel reads its token's
expiry without importing PyJWT (and with it ``cryptography``); httpx's
command-line tool (click, pygments) is not loaded."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import jwt
import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import FakeEngine, FakeSession, wait_for
from engine_helpers import USER, make_mirror, read_tree
from ohsync.daemon.notifications import _expiry
from ohsync.daemon.status import StatusModel
from ohsync.daemon.worker import worker as worker_mod
from ohsync.engine.models import RemoteEntry


def _library(devserver, tmp_path: Path) -> str:
    seed = tmp_path / "seed"
    for f in range(3):
        for i in range(5):
            path = seed / f"folder{f}" / f"note{i}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"# note {f}/{i}\n")
    return devserver.create_library(USER, "OH-Memory", from_tree=seed)


def _settle(m) -> None:  # m: engine_helpers.Mirror
    """Passes until an idle poll is one request with nothing to do (the engine is settled)."""
    for _ in range(4):
        assert m.sync().errors == []
        if m.engine.sync([]).idle:
            return
    raise AssertionError("the mirror did not settle")


def test_a_settled_engine_drops_its_listing_and_later_passes_still_find_every_change(devserver, tmp_path):
    repo = _library(devserver, tmp_path)
    m = make_mirror(devserver, repo, tmp_path)
    try:
        _settle(m)
        assert m.engine.ctx.held_snapshot is not None
        assert m.engine.release_snapshot() is True
        assert m.engine.ctx.held_snapshot is None and m.state._remote_cache is None
        assert m.engine.release_snapshot() is False  # nothing held any more

        # an idle poll needs no listing: it stays out of memory
        assert m.engine.sync([]).idle
        assert m.engine.ctx.held_snapshot is None

        # a remote edit, a remote delete, a remote new file and a local edit, all after the release
        devserver.put_file(repo, "/folder0/note0.md", b"# edited on the phone\n")
        devserver.delete_path(repo, "/folder1/note1.md")
        devserver.put_file(repo, "/folder2/new.md", b"# new on the phone\n")
        m.write("folder2/note2.md", b"# edited here\n")
        report = m.sync(["folder2/note2.md"])  # a watcher's pass: the remote half comes from the listing
        assert report.errors == []
        assert sorted(report.downloaded) == ["folder0/note0.md", "folder2/new.md"]
        assert report.deleted_local == ["folder1/note1.md"]
        assert report.uploaded == ["folder2/note2.md"]
        assert not (m.root / "folder1" / "note1.md").exists()
        local = read_tree(m.root)
        assert devserver.read_file(repo, "/folder2/note2.md") == b"# edited here\n"
        assert {p: devserver.read_file(repo, p) for p in devserver.tree_ids(repo)} == local

        # settled again: released again, and the table still holds the server's listing
        _settle(m)
        assert m.engine.release_snapshot() is True
        snap = m.state.remote_snapshot()
        assert {p: e.id for p, e in snap.items() if not e.is_dir} == \
            {p.lstrip("/"): fid for p, fid in devserver.tree_ids(repo).items()}

        # a remote rename after the release is found as such (old path gone, new one there)
        devserver.rename_path(repo, "/folder0/note3.md", "renamed.md")
        report = m.sync()
        assert report.errors == []
        assert (m.root / "folder0" / "renamed.md").read_bytes() == b"# note 0/3\n"
        assert not (m.root / "folder0" / "note3.md").exists()
    finally:
        m.state.close()
        m.client.close()


def test_an_engine_with_work_left_keeps_its_listing(devserver, tmp_path):
    repo = _library(devserver, tmp_path)
    m = make_mirror(devserver, repo, tmp_path)
    try:
        report = m.sync()  # the first pass downloads everything: not settled yet
        assert report.downloaded
        assert m.engine.release_snapshot() is False
        assert m.engine.ctx.held_snapshot is not None
    finally:
        m.state.close()
        m.client.close()


def test_the_state_forgets_its_copy_only_when_it_equals_the_listing(tmp_path):
    from ohsync.engine.state import StateStore

    store = StateStore(tmp_path / "s.db", tmp_path / "blobs")
    try:
        entries = [RemoteEntry("a.md", False, "1" * 40, 3, 5), RemoteEntry("b", True, "2" * 40)]
        store.replace_remote_snapshot(entries)
        listing = store.remote_snapshot()
        other = dict(listing, **{"c.md": RemoteEntry("c.md", False, "3" * 40)})
        assert store.release_remote_cache(other) is False  # the table does not hold that
        with store.transaction():
            assert store.release_remote_cache(listing) is False  # not while rows may roll back
        assert store.release_remote_cache(listing) is True
        assert store.release_remote_cache(listing) is False  # already forgotten
        # written by difference again after the table is read back
        assert store.replace_remote_snapshot(other.values()) == 1
        assert set(store.remote_snapshot()) == {"a.md", "b", "c.md"}
    finally:
        store.close()


@dataclass
class _ReleasingEngine(FakeEngine):
    releases: list[float] = field(default_factory=list)

    def release_snapshot(self) -> bool:
        self.releases.append(time.monotonic())
        return True


def test_the_worker_releases_the_engines_listing_once_it_has_been_idle(tmp_path, monkeypatch):
    monkeypatch.setattr(worker_mod, "RELEASE_AFTER", 0.3)
    trims: list[float] = []
    monkeypatch.setattr(worker_mod, "release_memory", lambda: trims.append(time.monotonic()) or True)
    engine = _ReleasingEngine(tmp_path)
    status = StatusModel(library="OH-Memory", local=str(tmp_path), poll_interval=600.0)
    status.watcher_alive = lambda: True

    def open_session(on_event):
        engine.on_event = on_event
        return FakeSession(engine)

    w = worker_mod.SyncWorker(open_session, status, poll_interval=600.0)
    w.start()
    try:
        wait_for(lambda: engine.releases, timeout=10, what="the idle release")
        assert engine.releases[0] - 0.25 >= 0 and len(engine.calls) == 1
        assert trims  # the dropped listing's pages are handed back
        time.sleep(0.8)  # why: a quiet period of three idle spells: no second release may follow
        assert len(engine.releases) == 1  # once per quiet spell, not in a loop
        w.post_dirty(["a.md"])
        wait_for(lambda: len(engine.releases) == 2, timeout=10, what="the release after the next pass")
        assert len(engine.calls) == 2
    finally:
        assert w.shutdown(10)


def _token(claims: dict) -> str:
    return jwt.encode(claims, "a-secret-of-thirty-two-bytes-or-more!", algorithm="HS256")


def test_the_push_token_expiry_is_read_from_its_claims():
    assert _expiry(_token({"exp": 1_900_000_000, "repo_id": "r", "name": "é" * 5})) == 1_900_000_000.0
    payload = base64.urlsafe_b64encode(json.dumps({"exp": 1_800_000_123.5}).encode()).rstrip(b"=").decode()
    assert _expiry(f"x.{payload}.sig") == 1_800_000_123.5


@pytest.mark.parametrize("token", ["", "no-dots", "a.%%%.c", "a.W10.c", "a.bnVsbA.c", "a.eyJleHAiOiJ4In0.c",
                                   "a.eyJub3QiOjF9.c", "a.//79.c"])
def test_an_unreadable_push_token_counts_as_valid_for_a_day(token):
    assert abs(_expiry(token) - (time.time() + 86_400)) < 60


def test_the_daemon_imports_neither_pyjwt_nor_cryptography_nor_httpx_cli():
    # click and pygments are installed here (uvicorn's and pytest's): httpx would load them for its CLI
    code = ("import sys; import ohsync.daemon.cli.main, ohsync.daemon.app, ohsync.daemon.session, "
            "ohsync.daemon.notifications, httpx; assert callable(httpx.main); "
            "print(sorted(m for m in ('jwt', 'cryptography', 'click', 'pygments') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]", out.stdout
