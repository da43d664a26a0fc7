"""Permanent failures back off: one policy, one attempt per change, one activity line."""

from __future__ import annotations

import errno
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import wait_for  # noqa: E402
from engine_helpers import USER, make_mirror  # noqa: E402

from ohsync.engine.errors import (  # noqa: E402
    AuthError,
    DiskFullError,
    LocalNameError,
    NetworkError,
    QuotaError,
    ReadOnlyError,
    ServerError,
    TooLargeError,
    UnreachableError,
    classify,
    local_error,
)
from ohsync.engine.failures import BACKOFF_BASE, BACKOFF_CAP, SPACE_CHECK, FailureBook  # noqa: E402

UPLOADS = r"^POST /seafhttp/upload-api/"


def test_classification_by_scope_and_behaviour() -> None:
    cases = {
        OSError(errno.ENOSPC, "No space left on device"): (DiskFullError, "path", "needs_person", "space"),
        OSError(errno.EROFS, "Read-only file system"): (ReadOnlyError, "path", "needs_person", "permission"),
        OSError(errno.ENAMETOOLONG, "File name too long"): (LocalNameError, "path", "needs_person", "name"),
    }
    for exc, (cls, scope, behaviour, needs) in cases.items():
        err = local_error(exc, "a/b.md")
        assert isinstance(err, cls) and err.__cause__ is exc and "a/b.md" in err.message
        f = classify(exc)
        assert (f.scope, f.behaviour, f.needs) == (scope, behaviour, needs)
    assert classify(OSError(errno.EIO, "I/O error")).behaviour == "retry_soon"
    assert classify(AuthError("x")).scope == "daemon" and classify(AuthError("x")).needs == "login"
    assert classify(NetworkError("x")).scope == "path" and not classify(NetworkError("x")).permanent
    assert classify(UnreachableError("x")).scope == "mirror" and classify(ServerError("x")).scope == "path"
    assert classify(TooLargeError("x")).needs == "limit" and classify(TooLargeError("x")).permanent
    assert classify(QuotaError("x")).needs == "quota"
    assert classify(RuntimeError("bug")).behaviour == "retry_soon"


def test_backoff_grows_is_capped_and_resets_when_the_path_changes(tmp_path) -> None:
    now = [1000.0]
    book = FailureBook(tmp_path, clock=lambda: now[0])
    v1 = ((1, 2, 3), None)
    waits = []
    for _ in range(12):
        item = book.record("a.md", ServerError("boom"), v1)
        waits.append(item.retry_at - now[0])
        assert book.held("a.md", v1) is item
        now[0] = item.retry_at
        assert book.held("a.md", v1) is None  # due
    assert waits[:3] == [BACKOFF_BASE, 2 * BACKOFF_BASE, 4 * BACKOFF_BASE]
    assert max(waits) == BACKOFF_CAP
    book.record("a.md", ServerError("boom"), v1)
    assert book.held("a.md", ((9, 9, 9), None)) is None  # changed: a fresh start
    assert book.get("a.md") is None


def test_full_disk_waits_for_room(tmp_path) -> None:
    now = [1000.0]
    free = [10]
    book = FailureBook(tmp_path, clock=lambda: now[0], free_bytes=lambda p: free[0])
    v = (None, "f" * 40)
    book.record("big.bin", OSError(errno.ENOSPC, "No space left on device"), v, need_bytes=3_000_000)
    now[0] += 10 * SPACE_CHECK
    assert book.held("big.bin", v) is not None  # still no room
    free[0] = 50_000_000
    now[0] += SPACE_CHECK / 2
    assert book.held("big.bin", v) is not None  # not looked at again yet
    now[0] += SPACE_CHECK
    assert book.held("big.bin", v) is None  # room again: try once more


def test_413_upload_is_tried_once_per_change(devserver, tmp_path) -> None:
    repo = devserver.create_library(USER, "OH-Memory")
    devserver.put_file(repo, "/notes/ok.md", b"fine\n")
    m = make_mirror(devserver, repo, tmp_path)
    m.sync()
    m.write("Files/big.bin", os.urandom(200_000))
    m.write("notes/ok.md", b"fine, edited\n")  # an update: not behind the upload proxy's limit
    devserver.inject_fault("POST", r"/seafhttp/upload-api/.*", status=413, count=10_000)
    devserver.reset_counters()
    first = m.sync()
    assert [p for p, _ in first.errors] == ["Files/big.bin"]
    assert "413" in first.errors[0][1] and "not retried until the file changes" in first.errors[0][1]
    assert devserver.tree(repo)["/notes/ok.md"] == b"fine, edited\n"  # the rest syncs
    tried = devserver.request_count(UPLOADS)
    assert tried >= 1
    for _ in range(5):
        again = m.sync()
        assert again.errors == []
        m.sync(["Files/big.bin"])
    assert devserver.request_count(UPLOADS) == tried  # no request for the held path
    (item,) = m.engine.failures()
    assert item["path"] == "Files/big.bin" and item["permanent"] and item["needs"] == "limit"
    # the file changes: one new attempt
    m.write("Files/big.bin", os.urandom(100_000))
    m.sync(["Files/big.bin"])
    assert devserver.request_count(UPLOADS) == tried + 1
    # the person acts (refresh): one more attempt; the fault is gone, so it syncs
    devserver.clear_faults()
    m.engine.release_failures()
    assert m.sync().errors == []
    assert m.engine.failures() == []
    assert devserver.tree(repo)["/Files/big.bin"] == m.read("Files/big.bin")


def test_full_local_disk_is_not_redownloaded_every_pass(devserver, tmp_path, monkeypatch) -> None:
    repo = devserver.create_library(USER, "OH-Memory")
    devserver.put_file(repo, "/big.bin", os.urandom(300_000))
    m = make_mirror(devserver, repo, tmp_path)
    real = m.client.download_resumable

    def full(repo_id, path, fh, **kw):
        real(repo_id, path, fh, **kw)  # the bytes arrive, the disk cannot take them
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(m.client, "download_resumable", full)
    rep = m.sync()
    assert [p for p, _ in rep.errors] == ["big.bin"] and "disk is full" in rep.errors[0][1]
    devserver.reset_counters()
    for _ in range(4):
        assert m.sync().errors == []
    assert devserver.request_count(r"/files/|download") == 0
    assert m.engine.failures()[0]["needs"] == "space"


@pytest.fixture
def daemon_env(seed_daemon):
    return seed_daemon(put={"/notes/a.md": b"a\n"}, poll_interval=1.0)


def test_daemon_413_costs_a_few_requests_and_one_activity_line(daemon_env) -> None:
    srv, repo_id, mirror = daemon_env.srv, daemon_env.repo_id, daemon_env.mirror
    p = daemon_env.start(wait="idle", timeout=60)
    srv.inject_fault("POST", r"/seafhttp/upload-api/.*", status=413, count=100_000)
    srv.reset_counters()
    (mirror / "Files").mkdir()
    (mirror / "Files" / "scan.pdf").write_bytes(os.urandom(1_000_000))
    st = wait_for(lambda: (s := p.status())["failures"] and s, timeout=30, what="the failure in status")
    # half a minute of polls (every second) and a full scan after the failure: none retries the upload
    wait_for(lambda: (now := p.status())["last_scan"] != st["last_scan"] and now["polls"] >= st["polls"] + 30,
             timeout=150, interval=0.5, what="a full scan and 30 polls after the failure")
    assert srv.request_count(UPLOADS) <= 2, srv.requests
    st = p.status()
    assert st["state"] == "error"
    assert "Files/scan.pdf" in st["message"] and "413" in st["message"]
    (f,) = st["failures"]
    assert f["path"] == "Files/scan.pdf" and f["permanent"] and f["needs"] == "limit"
    lines = [a for a in p.client().call("activity", {"limit": 200}) if a["path"] == "Files/scan.pdf"]
    assert len(lines) == 1 and lines[0]["result"] == "error", lines
    # other paths keep syncing meanwhile (an edit goes through the update link, not the limited one)
    (mirror / "notes" / "a.md").write_text("a, edited\n")
    wait_for(lambda: srv.tree(repo_id).get("/notes/a.md") == b"a, edited\n", timeout=30, what="a.md uploaded")
    # the person raises the limit and says so: synced
    srv.clear_faults()
    assert p.cli("refresh").returncode == 0
    wait_for(lambda: srv.tree(repo_id).get("/Files/scan.pdf") == (mirror / "Files" / "scan.pdf").read_bytes(),
             timeout=30, what="scan.pdf uploaded after refresh")
    wait_for(lambda: not p.status()["failures"], timeout=30, what="failure cleared")


def test_a_remote_path_too_long_for_this_disk_is_named_and_not_retried(devserver, tmp_path) -> None:
    repo = devserver.create_library(USER, "OH-Memory")
    deep = "/".join(["d" * 200] * 22)  # 4,400 bytes: more than PATH_MAX on Linux
    devserver.put_file(repo, f"/{deep}/note.md", b"far away\n")
    devserver.put_file(repo, "/near.md", b"near\n")
    m = make_mirror(devserver, repo, tmp_path)
    first = m.sync()
    assert m.read("near.md") == b"near\n"  # the rest syncs
    assert first.errors and any("too long" in msg for _, msg in first.errors), first.errors
    failures = {f["path"]: f for f in m.engine.failures()}
    assert any(f["needs"] == "name" and f["permanent"] for f in failures.values()), failures
    for _ in range(3):
        assert m.sync().errors == []  # held: neither an error line nor an attempt per pass


def test_over_quota_waits_for_the_person(devserver, tmp_path) -> None:
    repo = devserver.create_library(USER, "OH-Memory")
    devserver.put_file(repo, "/seed.md", b"seed\n")
    m = make_mirror(devserver, repo, tmp_path)
    m.sync()
    devserver.set_quota(USER, 10)  # bytes: already over
    m.write("notes/new.md", b"a new note that does not fit\n")
    first = m.sync()
    assert [p for p, _ in first.errors] == ["notes/new.md"] and "quota" in first.errors[0][1].lower()
    devserver.reset_counters()
    for _ in range(3):
        assert m.sync().errors == []
        m.sync(["notes/new.md"])
    assert devserver.request_count(r"upload") == 0
    assert m.engine.failures()[0]["needs"] == "quota"
    devserver.set_quota(USER, 0)  # more quota, and the person says so
    m.engine.release_failures()
    assert m.sync().errors == []
    assert devserver.tree(repo)["/notes/new.md"] == b"a new note that does not fit\n"


def test_full_disk_during_a_cold_bulk_download_is_per_path_not_a_failed_pass(devserver, tmp_path, monkeypatch) -> None:
    from ohsync.engine.sync.new_files import NewFileBatch

    repo = devserver.create_library(USER, "OH-Memory")
    for i in range(30):
        devserver.put_file(repo, f"/notes/n{i:02d}.md", f"note {i}\n".encode())
    m = make_mirror(devserver, repo, tmp_path)

    def full(*a, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(NewFileBatch, "stage", full)  # the zip's files, written in batches
    monkeypatch.setattr(m.client, "download_resumable", full)
    rep = m.sync()  # no exception: each file fails on its own
    assert len(rep.errors) == 30 and all("disk is full" in msg for _, msg in rep.errors)
    devserver.reset_counters()
    assert m.sync().errors == []
    assert devserver.request_count(r"zip|/files/|download") == 0
