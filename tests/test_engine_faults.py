"""The engine under faults: 5xx, 429, dropped connections (before and after
the server applied the request), a refused connection, a process killed
mid-pass, and a second writer racing on the same file.  A request that fails
for one file fails that file only (the rest of the pass syncs; the file is
retried after its backoff); a server that cannot be reached or fails several
requests in a row ends the pass.  The invariant is always the same: every
version that existed on either side ends up in the mirror, on the server or
in /.conflict/ — never nowhere."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import socket
import subprocess
import sys
import textwrap
import time

import httpx
import pytest

from engine_helpers import USER, make_mirror, mirrored, read_tree, sample_library
from ohsync.devserver.seahub_api import SeahubBase
from ohsync.engine.errors import LibraryGoneError, ServerError, ThrottledError, UnreachableError, classify
from ohsync.engine.failures import BACKOFF_BASE, FailureBook
from ohsync.engine.sync.run import SERVER_STRIKES

JOURNAL = "journal/2026-11.md"


class Clock:
    """The failure book's clock, moved by hand (backoff without sleeping)."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def synced(devserver, tmp_path, clock):
    repo_id = devserver.create_library(USER, "OH-Memory", from_tree=sample_library(tmp_path / "seed"))
    mirror = make_mirror(devserver, repo_id, tmp_path)
    mirror.engine.failure_book = FailureBook(mirror.root, clock=clock)
    mirror.sync()
    return mirror


def everything_in(text: bytes, *lines: bytes) -> bool:
    return all(text.count(line) == 1 for line in lines)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# a read of the journal's latest version: read-merge-write's first, or the read-back's
JOURNAL_READ = r"/file/(detail|history)/.*2026-11"


def test_a_server_error_on_one_file_fails_that_file_only_and_the_next_pass_finishes(devserver, synced, clock):
    repo = synced.repo_id
    line = b"- [x] 2026-11-30 10:00 written while the server failed on this file\n"
    remote_line = b"- [x] 2026-11-30 10:01 written on the phone meanwhile\n"
    old = synced.read(JOURNAL)
    synced.write(JOURNAL, old + line)
    devserver.put_file(repo, "/" + JOURNAL, old + remote_line)
    synced.write("index.md", synced.read("index.md") + b"\nedited here\n")
    devserver.put_file(repo, "/knowledge/from-phone.md", b"written on the phone\n")
    devserver.inject_fault("GET", JOURNAL_READ, status=503, count=10)

    report = synced.sync([JOURNAL, "index.md"])  # no exception: the pass went on

    assert [p for p, _ in report.errors] == [JOURNAL] and "503" in report.errors[0][1]
    assert devserver.read_file(repo, "/index.md").endswith(b"\nedited here\n")
    assert synced.read("knowledge/from-phone.md") == b"written on the phone\n"
    assert line not in devserver.read_file(repo, "/" + JOURNAL)
    assert synced.read(JOURNAL) == old + line  # nothing overwritten here
    assert synced.state.get_base(JOURNAL).sha1 == hashlib.sha1(old).hexdigest()  # the base the retry merges on
    (failure,) = synced.engine.failures()
    assert failure["path"] == JOURNAL and not failure["permanent"]
    assert failure["retry_at"] == pytest.approx(clock.now + BACKOFF_BASE)

    devserver.clear_faults()
    assert JOURNAL not in synced.sync([]).uploaded  # it waits out its backoff
    clock.now += BACKOFF_BASE + 1
    report = synced.sync([])  # the next pass after the wait: no local event needed
    assert report.errors == [] and JOURNAL in report.uploaded and report.conflicts == []
    remote = devserver.read_file(repo, "/" + JOURNAL)
    assert everything_in(remote, line, remote_line) and remote == synced.read(JOURNAL)
    assert synced.engine.failures() == []


def test_a_throttled_file_waits_its_retry_after_and_only_it(devserver, synced, clock):
    repo = synced.repo_id
    line = b"- [x] 2026-11-30 10:05 written while the server throttled this file\n"
    synced.write(JOURNAL, synced.read(JOURNAL) + line)
    synced.write("index.md", synced.read("index.md") + b"\nedited while throttled\n")
    devserver.inject_fault("GET", JOURNAL_READ, status=429, retry_after=120, count=10)

    report = synced.sync([JOURNAL, "index.md"])

    assert [p for p, _ in report.errors] == [JOURNAL]
    assert "index.md" in report.uploaded
    assert synced.engine.failure_book.get(JOURNAL).retry_at == pytest.approx(clock.now + 120)
    devserver.clear_faults()
    clock.now += 60
    assert JOURNAL not in synced.sync([]).uploaded  # the server asked for two minutes
    clock.now += 61
    report = synced.sync([])
    assert report.errors == [] and synced.engine.failures() == []
    # pushed again, or (when the throttled read was the read-back of an
    # update the server had stored) adopted as it stands on the server
    assert synced.state.get_base(JOURNAL).remote_id == devserver.file_id(repo, "/" + JOURNAL)
    assert everything_in(devserver.read_file(repo, "/" + JOURNAL), line)


def test_a_server_failing_every_request_ends_the_pass(devserver, synced):
    for i in range(6):
        synced.write(f"knowledge/edit-{i}.md", f"edit {i}\n".encode())
    synced.sync()
    for i in range(6):
        synced.write(f"knowledge/edit-{i}.md", f"edit {i}, again\n".encode())
    devserver.inject_fault(None, r"/file/detail/|/update-api/|/update-link/", status=503, count=10_000)

    with pytest.raises(ServerError) as info:
        synced.sync([f"knowledge/edit-{i}.md" for i in range(6)])

    failure = classify(info.value)
    assert failure.scope == "mirror" and not failure.permanent
    assert f"{SERVER_STRIKES} requests in a row" in info.value.message
    assert synced.engine.failures() == []  # the server's outage, not charged to the files it hit first
    devserver.clear_faults()
    assert synced.sync().errors == []  # the next pass, with no wait per file
    assert all(devserver.read_file(synced.repo_id, f"/knowledge/edit-{i}.md") == f"edit {i}, again\n".encode()
               for i in range(6))


def test_failures_between_successes_never_add_up_to_an_outage(devserver, synced):
    # a folder each: every edit is pushed and read back (its file history) on its own
    names = [f"knowledge/{i}/{i}-{'bad' if i % 2 == 0 else 'good'}.md" for i in range(2 * SERVER_STRIKES)]
    for rel in names:
        synced.write(rel, f"{rel} v1\n".encode())
    synced.sync()
    for rel in names:
        synced.write(rel, f"{rel} v2\n".encode())
    devserver.inject_fault(None, r"/file/(detail|history)/.*-bad", status=503, count=10_000)

    report = synced.sync(names)  # bad, good, bad, good…: each success resets the count

    assert sorted(p for p, _ in report.errors) == [n for n in names if "-bad" in n]
    assert sorted(report.uploaded) == [n for n in names if "-good" in n]


def test_a_refused_connection_ends_the_pass_with_a_mirror_wide_error(devserver, synced, monkeypatch):
    repo = synced.repo_id
    devserver.put_file(repo, "/knowledge/from-phone.md", b"written on the phone\n")
    synced.write("index.md", synced.read("index.md") + b"\nedited while offline\n")
    # the API answers, the file server it links to refuses every connection
    dead = f"http://127.0.0.1:{_free_port()}/seafhttp"
    monkeypatch.setattr(SeahubBase, "fs_root", lambda self, req: dead)

    with pytest.raises(UnreachableError) as info:
        synced.sync()

    assert classify(info.value).scope == "mirror"
    assert synced.engine.failures() == []  # not charged to the file that happened to be first
    monkeypatch.undo()
    assert synced.sync().errors == []
    assert synced.read("knowledge/from-phone.md") == b"written on the phone\n"
    assert devserver.read_file(repo, "/index.md").endswith(b"\nedited while offline\n")


def test_a_library_deleted_on_the_server_ends_the_pass_and_deletes_nothing_here(devserver, synced):
    before = read_tree(synced.root)
    synced.write("index.md", synced.read("index.md") + b"\nedited after the library went\n")
    answer = httpx.delete(f"{devserver.url}/api2/repos/{synced.repo_id}/",
                          headers={"Authorization": f"Token {devserver.token_for(USER)}"})
    assert answer.status_code == 200

    with pytest.raises(LibraryGoneError) as info:
        synced.sync()

    assert classify(info.value).scope == "mirror" and "not on the server any more" in info.value.message
    assert read_tree(synced.root) == {**before, "/index.md": synced.read("index.md")}  # nothing removed here


def test_throttling_is_a_typed_error_with_retry_after(devserver, synced):
    devserver.put_file(synced.repo_id, "/index.md", b"changed\n")
    devserver.inject_fault("GET", r"/api2/repos/[^/]+/$", status=429, retry_after=120, count=5)
    with pytest.raises(ThrottledError) as info:
        synced.sync()
    assert info.value.retry_after == 120
    devserver.clear_faults()
    synced.sync()
    assert synced.read("index.md") == b"changed\n"


@pytest.mark.parametrize("after_processing", [False, True], ids=["lost-request", "lost-answer"])
def test_dropped_upload_connection_loses_nothing_and_duplicates_nothing(devserver, synced, after_processing):
    line = b"- [x] 2026-11-30 11:00 upload whose connection dropped\n"
    synced.write(JOURNAL, synced.read(JOURNAL) + line)
    devserver.inject_fault("POST", r"/update-api/", drop=True, after_processing=after_processing)
    report = synced.sync([JOURNAL])
    assert [p for p, _ in report.errors] == [JOURNAL]  # this file's trouble, not the pass's
    synced.engine.release_failures()
    report = synced.sync()
    remote = devserver.read_file(synced.repo_id, "/" + JOURNAL)
    assert everything_in(remote, line) and remote == synced.read(JOURNAL)
    assert report.conflicts == []
    assert read_tree(synced.root) == mirrored(devserver.tree(synced.repo_id))


def test_dropped_download_leaves_the_old_file_intact(devserver, synced, clock):
    old = synced.read("index.md")
    devserver.put_file(synced.repo_id, "/index.md", old + b"\nnew remote paragraph\n")
    devserver.inject_fault("GET", r"/files/", drop=True, count=10)
    report = synced.sync()
    assert [p for p, _ in report.errors] == ["index.md"]
    assert synced.read("index.md") == old
    assert not [p for p in synced.root.rglob(".ohsync-tmp-*")]  # no temp file left behind
    devserver.clear_faults()
    clock.now += BACKOFF_BASE + 1
    synced.sync()
    assert synced.read("index.md") == old + b"\nnew remote paragraph\n"


_KILLED_PASS = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    from pathlib import Path
    from ohsync.engine.client import SeafileClient
    from ohsync.engine.context import EngineOptions
    from ohsync.engine.state import StateStore
    from ohsync.engine.sync.engine import SyncEngine
    base = Path({base!r})
    state = StateStore(base / "m-state" / "state.db", base / "m-state" / "blobs")
    client = SeafileClient({url!r}, {token!r}, retries=0)
    engine = SyncEngine(client, {repo!r}, base / "m", state,
                        options=EngineOptions(backup_dir=base / "m-state" / "backups"))
    print("start", flush=True)
    engine.sync()
""")


def test_process_killed_mid_pass_then_restarted_converges_without_loss(devserver, synced, tmp_path):
    """SIGKILL at a random moment while both sides have many changes."""
    repo = synced.repo_id
    rng = random.Random(7)
    expected_local, expected_remote = {}, {}
    for i in range(12):
        rel = f"knowledge/local-{i}.md"
        expected_local[rel] = f"---\ntitle: local {i}\n---\n\n## Observations\n- [x] local {i}\n".encode()
        synced.write(rel, expected_local[rel])
        rel = f"knowledge/remote-{i}.md"
        expected_remote[rel] = f"---\ntitle: remote {i}\n---\n\n## Observations\n- [x] remote {i}\n".encode()
        devserver.put_file(repo, "/" + rel, expected_remote[rel])
    local_line = b"- [x] 2026-11-30 12:00 local journal line\n"
    remote_line = b"- [x] 2026-11-30 12:01 remote journal line\n"
    synced.write(JOURNAL, synced.read(JOURNAL) + local_line)
    devserver.put_file(repo, "/" + JOURNAL, devserver.read_file(repo, "/" + JOURNAL) + remote_line)
    synced.state.close()
    devserver.inject_fault(None, r".", latency=0.05, count=10_000)  # slow every request down
    script = _KILLED_PASS.format(tests=str(os.path.dirname(__file__)), base=str(tmp_path), url=devserver.url,
                                 token=devserver.token_for(USER), repo=repo)
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
        assert proc.stdout.readline() == b"start\n"
        time.sleep(rng.uniform(0.3, 1.5))  # why: a random point in the pass to kill it at
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    devserver.clear_faults()
    finished = make_mirror(devserver, repo, tmp_path)
    finished.sync()
    report = finished.sync()
    assert report.conflicts == [] and report.errors == []
    tree = devserver.tree(repo)
    assert read_tree(finished.root) == mirrored(tree)
    for rel, data in {**expected_local, **expected_remote}.items():
        assert tree["/" + rel] == data
    assert everything_in(tree["/" + JOURNAL], local_line, remote_line)
    assert not [p for p in finished.root.rglob(".ohsync-tmp-*")]


def test_second_writer_racing_on_the_journal_never_loses_a_line(devserver, synced):
    """Randomised: each round the phone appends on the server (sometimes in the
    window between our upload and our read-back), we append locally, and we
    sync; every line written anywhere ends up in the journal exactly once."""
    repo = synced.repo_id
    rng = random.Random(2026)
    written: list[bytes] = []
    for round_no in range(15):
        when = f"2026-11-30 {13 + round_no // 60:02d}:{round_no % 60:02d}"
        if rng.random() < 0.7:
            line = f"- [phone] {when} phone line {round_no}\n".encode()
            written.append(line)
            if rng.random() < 0.5:
                devserver.after_request(
                    "POST", r"/update-api/",
                    lambda srv, line=line: srv.put_file(repo, "/" + JOURNAL, srv.read_file(repo, "/" + JOURNAL) + line))
            else:
                devserver.put_file(repo, "/" + JOURNAL, devserver.read_file(repo, "/" + JOURNAL) + line)
        line = f"- [desk] {when} desk line {round_no}\n".encode()
        written.append(line)
        synced.write(JOURNAL, synced.read(JOURNAL) + line)
        report = synced.sync()
        assert report.conflicts == []
    synced.sync()
    final = devserver.read_file(repo, "/" + JOURNAL)
    assert synced.read(JOURNAL) == final
    assert everything_in(final, *written)


def test_large_upload_resumes_after_a_dropped_chunk(devserver, synced):
    big = os.urandom(7 * 1024 * 1024)
    synced.engine.options.upload_chunk = 2 * 1024 * 1024
    synced.write("Files/big.bin", big)
    devserver.inject_fault("POST", r"/upload-api/", drop=True, count=1)  # the first chunk is lost

    synced.sync()
    assert devserver.read_file(synced.repo_id, "/Files/big.bin") == big
    devserver.reset_counters()
    assert synced.sync().transferred == 0


def test_large_download_survives_a_dropped_connection(devserver, synced):
    big = os.urandom(5 * 1024 * 1024)
    devserver.put_file(synced.repo_id, "/Files/remote-big.bin", big)
    devserver.inject_fault("GET", r"/files/", drop=True, count=1)
    synced.sync()
    assert synced.read("Files/remote-big.bin") == big


def test_a_remote_folder_that_does_not_exist_stops_the_mirror_with_a_sentence(devserver, tmp_path):
    """`remote = "/Nope"`: the mirror stops for the person (not retried for ever as "Not found")."""
    from ohsync.engine.client import SeafileClient
    from ohsync.engine.errors import NotFoundError
    from ohsync.engine.state import StateStore
    from ohsync.engine.sync.engine import SyncEngine

    repo = devserver.create_library(USER, "Sub")
    devserver.put_file(repo, "/Files/a.md", b"a\n")
    root = tmp_path / "m"
    state = StateStore(tmp_path / "st" / "state.db", tmp_path / "st" / "blobs")
    with SeafileClient(devserver.url, devserver.token_for(USER), retries=0) as client:
        engine = SyncEngine(client, repo, root, state, remote_root="/Nope")
        with pytest.raises(NotFoundError) as info:
            engine.sync()
        failure = classify(info.value)
        assert failure.scope == "mirror" and failure.permanent
        assert "/Nope" in failure.message and "`remote`" in failure.message
        assert not root.exists() or not any(root.iterdir())
    state.close()
