"""Breaker: quota, auth loss, 5xx storms, missing/emptied root, big files, drops."""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import time

import pytest

from breaker_helpers import missing_lines, missing_versions, synced_small
from engine_helpers import USER, make_mirror, mirrored, read_tree
from ohsync.engine.errors import AuthError, MirrorMissingError, RemoteError
from ohsync.engine.failures import BACKOFF_CAP, FailureBook


def test_quota_exhausted_mid_pass_with_conflict(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/n.txt": b"x\n", "/k.txt": b"k\n"})
    devserver.put_file(m.repo_id, "/n.txt", b"theirs\n")
    m.write("n.txt", b"ours\n")
    m.write("k.txt", b"k edited\n")
    m.write("new.txt", b"brand new\n")
    devserver.set_quota(USER, 1)
    rep = m.sync()
    assert rep.errors, "quota errors must be reported"
    devserver.set_quota(USER, 0)
    m.sync()
    m.sync()
    assert missing_versions(m, tmp_path, [b"theirs\n", b"ours\n", b"k edited\n", b"brand new\n"]) == []


def test_token_revoked_mid_pass(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/a.txt": b"a\n", "/b.txt": b"b\n", "/c.txt": b"c\n"})
    for name in "abc":
        m.write(f"{name}.txt", f"{name} edited\n".encode())
    devserver.put_file(m.repo_id, "/b.txt", b"b remote\n")
    token = devserver.token_for(USER)
    devserver.after_request("POST", r"/(upload|update)-api/", lambda srv: srv.revoke_token(token), count=1)
    with pytest.raises(AuthError) as info:
        m.sync()
    assert "Traceback" not in str(info.value)
    m2 = make_mirror(devserver, m.repo_id, tmp_path)  # same state, new token
    m2.sync()
    m2.sync()
    assert missing_lines(m2, tmp_path, [b"a edited", b"b edited", b"c edited", b"b remote"]) == []


def test_5xx_storm_then_convergence(devserver, tmp_path):
    rnd = random.Random(3)
    files = {f"/s/f{i}.txt": f"file {i}\n".encode() for i in range(10)}
    m = synced_small(devserver, tmp_path, files)
    now = [time.time()]
    m.engine.failure_book = FailureBook(m.root, clock=lambda: now[0])  # backoff without sleeping
    versions = []
    for i in range(10):
        if i % 3 == 0:
            data = f"file {i} local\n".encode()
            m.write(f"s/f{i}.txt", data)
            versions.append(data)
        if i % 2 == 0:
            data = f"file {i} remote\n".encode()
            devserver.put_file(m.repo_id, f"/s/f{i}.txt", data)
            versions.append(data)
    (m.root / "s/f5.txt").unlink()
    devserver.delete_path(m.repo_id, "/s/f7.txt")
    for _ in range(6):
        devserver.clear_faults()
        for method, rx in [("GET", r"/file/detail/"), ("POST", r"/(upload|update)-api/"), ("GET", r"/files/"),
                           ("POST", r"/file/"), ("GET", r"/dir/"), (None, r"/update-link/")]:
            if rnd.random() < 0.6:
                devserver.inject_fault(method, rx, status=rnd.choice([500, 502, 503]), count=rnd.randint(1, 3),
                                       after_processing=rnd.random() < 0.5)
        with contextlib.suppress(RemoteError):
            m.sync()
    devserver.clear_faults()
    m.sync()  # still inside the backoff: a path that differs waits, and says so
    tree = mirrored(devserver.tree(m.repo_id))  # the trash stays on the server
    local = read_tree(m.root)
    differ = {k for k in set(tree) | set(local) if tree.get(k) != local.get(k)}
    waiting = {"/" + f["path"] for f in m.engine.failures() if f["retry_at"] is not None}
    assert differ <= waiting, "a path out of sync must be in the failure book, never taken for synced"
    now[0] += BACKOFF_CAP + 1  # every path that failed in the storm is due again
    m.sync()
    m.sync()
    assert missing_lines(m, tmp_path, [v.strip() for v in versions] + [b"file 5", b"file 7"]) == []
    tree = mirrored(devserver.tree(m.repo_id))
    assert {k: v for k, v in read_tree(m.root).items()} == tree


def test_mirror_root_deleted_while_running(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/a.txt": b"a\n"})
    before = devserver.tree(m.repo_id)
    shutil.rmtree(m.root)
    with pytest.raises(MirrorMissingError):
        m.sync()
    with pytest.raises(MirrorMissingError):
        m.sync(["a.txt"])
    assert devserver.tree(m.repo_id) == before


def test_mirror_root_replaced_by_empty_folder_holds_deletes(devserver, tmp_path):
    """An unmounted drive leaves an empty mount point: nothing may be deleted remotely."""
    m = synced_small(devserver, tmp_path, {"/a.txt": b"a\n"})
    before = devserver.tree(m.repo_id)
    shutil.rmtree(m.root)
    m.root.mkdir()
    m.sync()
    after = devserver.tree(m.repo_id)
    assert {k: v for k, v in after.items() if not k.startswith("/.trash/")} == before


def test_mirror_root_emptied_via_watcher_batches(devserver, tmp_path):
    """Deletes delivered by the watcher in small batches, valve must still catch them."""
    m = synced_small(devserver, tmp_path, {})
    before = devserver.tree(m.repo_id)
    files = sorted((m.root / "pad").iterdir())
    for f in files:
        f.unlink()
        m.sync([f"pad/{f.name}"])
    after = devserver.tree(m.repo_id)
    live = [k for k in after if k.startswith("/pad/")]
    assert len(live) >= len(before) - 6, f"only {len(live)} of {len(before)} left"


def test_large_file_edited_during_chunked_upload(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {})
    m.engine.options.upload_chunk = m.engine.options.upload_max_request = 1024 * 1024  # fixed chunks
    big1 = os.urandom(5 * 1024 * 1024)
    m.write("big.bin", big1)
    m.sync()
    assert devserver.read_file(m.repo_id, "/big.bin") == big1
    big2 = os.urandom(5 * 1024 * 1024)
    big3 = os.urandom(5 * 1024 * 1024)
    m.write("big.bin", big2)
    calls = {"n": 0}

    def edit(srv):
        calls["n"] += 1
        if calls["n"] == 2:
            (m.root / "big.bin").write_bytes(big3)

    devserver.after_request("POST", r"/(upload|update)-api/", edit, count=10)
    m.sync(["big.bin"])
    devserver.clear_faults()
    m.sync(["big.bin"])
    m.sync()
    assert devserver.read_file(m.repo_id, "/big.bin") == big3 == m.read("big.bin")
    tree = devserver.tree(m.repo_id)
    garbled = [p for p, d in tree.items() if p.startswith("/.conflict/") and d not in (big1, big2, big3)]
    assert garbled == [], f"a mixed old/new upload was archived as a conflict copy: {garbled}"


def sync_past_a_lost_answer(devserver, m) -> None:
    """Sync once with the answer to the next ``POST /file/`` lost after the server applied
    it (a RemoteError there is expected), then twice more."""
    devserver.inject_fault("POST", r"/file/", drop=True, after_processing=True)
    with contextlib.suppress(RemoteError):
        m.sync()
    m.sync()
    m.sync()


def test_dropped_move_answer_local_move(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/a/x.md": b"moving\n"})
    (m.root / "b").mkdir()
    os.rename(m.root / "a/x.md", m.root / "b/x.md")
    sync_past_a_lost_answer(devserver, m)
    tree = devserver.tree(m.repo_id)
    assert tree.get("/b/x.md") == b"moving\n"
    assert missing_versions(m, tmp_path, [b"moving\n"]) == []


def test_dropped_trash_move_answer(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/a.txt": b"to trash\n"})
    (m.root / "a.txt").unlink()
    sync_past_a_lost_answer(devserver, m)
    assert missing_versions(m, tmp_path, [b"to trash\n"]) == []
    assert "/a.txt" not in devserver.tree(m.repo_id)


def test_negative_backup_days_does_not_wipe_todays_backups(devserver, tmp_path):
    """[safety] backup_days = -1 is accepted by the config; pruning must not eat today's backups."""
    m = synced_small(devserver, tmp_path, {"/a.txt": b"only copy after the remote delete\n"})
    devserver.delete_path(m.repo_id, "/a.txt")
    m.sync()
    assert missing_versions(m, tmp_path, [b"only copy after the remote delete\n"]) == []  # in backups
    # the daemon restarts with backup_days = -1 (accepted by load_config)
    m2 = make_mirror(devserver, m.repo_id, tmp_path)
    m2.engine.options.backup_days = -1
    m2.sync()
    assert missing_versions(m2, tmp_path, [b"only copy after the remote delete\n"]) == []


def test_config_rejects_empty_local_and_negative_backup_days(tmp_path):
    from ohsync.daemon.config import ConfigError, load_config
    cfg = tmp_path / "c.toml"
    cfg.write_text('[[mirror]]\nlocal = ""\n')
    with pytest.raises(ConfigError):
        load_config(cfg)
    cfg.write_text('[safety]\nbackup_days = -1\n')
    with pytest.raises(ConfigError):
        load_config(cfg)
