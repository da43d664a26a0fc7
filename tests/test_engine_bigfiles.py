"""Big files: streamed through the real daemon in bounded memory, resumed
after a kill mid-upload, and moved without moving their content.

Bytes are counted at the devserver (it runs in this process): every POST to
``upload-api``/``update-api`` is recorded with its body size, and content
downloads are the ``GET /seafhttp/files/`` requests.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import wait_for
from engine_helpers import USER, make_mirror

MiB = 1024 * 1024
BIG = 200 * MiB
CHUNK = 8 * MiB
RSS_LIMIT_KB = 150 * 1024
_UPLOAD = re.compile(r"^/seafhttp/(upload|update)-api/")


def _make_file(path: Path, size: int, seed: bytes) -> str:
    """Write ``size`` pseudo-random bytes (incompressible, unique per seed); returns the sha1."""
    h = hashlib.sha1()
    block = hashlib.sha512(seed).digest() * (MiB // 64)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as fh:
        for i in range(size // MiB):
            piece = i.to_bytes(8, "big") + block[8:]
            fh.write(piece)
            h.update(piece)
    return h.hexdigest()


def _sha1(path: Path) -> str:
    h = hashlib.sha1()
    with open(path, "rb") as fh:
        while chunk := fh.read(MiB):
            h.update(chunk)
    return h.hexdigest()


class UploadMeter:
    """Counts upload POSTs and their body bytes at the devserver."""

    def __init__(self, srv) -> None:
        self.posts: list[int] = []
        self._orig = srv.dispatch
        srv.dispatch = self._dispatch

    def _dispatch(self, req):
        if req.method == "POST" and _UPLOAD.match(req.path):
            self.posts.append(int(req.headers.get("Content-Length") or 0))
        return self._orig(req)

    def reset(self) -> None:
        self.posts.clear()

    @property
    def bytes(self) -> int:
        return sum(self.posts)


class MemorySampler:
    """Samples VmRSS / VmHWM of a process from /proc every 50 ms."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak_rss_kb = 0
        self.hwm_kb = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                text = Path(f"/proc/{self.pid}/status").read_text()
            except OSError:
                return
            for line in text.splitlines():
                if line.startswith("VmRSS:"):
                    self.peak_rss_kb = max(self.peak_rss_kb, int(line.split()[1]))
                elif line.startswith("VmHWM:"):
                    self.hwm_kb = max(self.hwm_kb, int(line.split()[1]))
            self.samples += 1
            self._stop.wait(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def check(self, what: str) -> None:
        assert self.samples > 10, f"too few memory samples while {what}"
        assert self.peak_rss_kb < RSS_LIMIT_KB and self.hwm_kb < RSS_LIMIT_KB, \
            f"daemon memory while {what}: VmRSS peak {self.peak_rss_kb} kB, VmHWM {self.hwm_kb} kB"


@pytest.fixture
def daemon_setup(seed_daemon):
    s = seed_daemon(put={"/index.md": b"# index\n"}, poll_interval=1.0, upload_request_mib=8)
    return s.repo_id, s.mirror, s.start


def test_200mb_up_resumed_after_kill_and_down_in_bounded_memory(devserver, daemon_setup, tmp_path):
    repo, mirror, start = daemon_setup
    meter = UploadMeter(devserver)
    d = start()
    d.wait_state("idle", timeout=60)

    # --- upload, killed (SIGKILL) after half of the chunks reached the server
    staged = tmp_path / "staging" / "lecture-recording.bin"
    sha_up = _make_file(staged, BIG, b"up")
    chunks = BIG // CHUNK
    killed = threading.Event()

    def kill_at_half(_srv) -> None:
        if len(meter.posts) >= chunks // 2 and not killed.is_set():
            killed.set()
            os.kill(d.proc.pid, signal.SIGKILL)

    devserver.after_request("POST", r"/seafhttp/upload-api/", kill_at_half, count=chunks + 5)
    meter.reset()
    mem = MemorySampler(d.proc.pid)
    os.rename(staged, mirror / "lecture-recording.bin")   # appears whole in the mirror
    assert d.proc.wait(120) == -signal.SIGKILL, d.output()[-3000:]
    mem.stop()
    mem.check("uploading (first half)")
    sent_before = meter.bytes
    assert chunks // 2 <= len(meter.posts) <= chunks // 2 + 1
    assert devserver.file_id(repo, "/lecture-recording.bin") is None

    # --- restart: the upload continues where the server's partial file ends
    devserver.clear_faults()
    meter.reset()
    d2 = start()
    mem = MemorySampler(d2.proc.pid)
    wait_for(lambda: devserver.file_id(repo, "/lecture-recording.bin"), timeout=120, what="the upload to finish")
    d2.wait_state("idle", timeout=120)
    mem.stop()
    mem.check("uploading (resumed)")
    assert len(meter.posts) <= chunks - chunks // 2 + 1, len(meter.posts)   # the rest, not everything again
    assert sent_before + meter.bytes < BIG * 1.1, (sent_before, meter.bytes)
    assert hashlib.sha1(devserver.read_file(repo, "/lecture-recording.bin")).hexdigest() == sha_up

    # --- a 200 MB file from another device comes down, streamed
    remote = tmp_path / "staging" / "from-phone.bin"
    sha_down = _make_file(remote, BIG, b"down")
    devserver.put_file(repo, "/from-phone.bin", remote.read_bytes())
    remote.unlink()
    mem = MemorySampler(d2.proc.pid)
    target = mirror / "from-phone.bin"
    wait_for(lambda: target.exists() and target.stat().st_size == BIG, timeout=120, what="the download")
    d2.wait_state("idle", timeout=120)
    mem.stop()
    mem.check("downloading")
    assert _sha1(target) == sha_down
    assert not [p for p in mirror.iterdir() if p.name.startswith(".ohsync-tmp-")]


# ------------------------------------------------------------------- moves

def _content_requests(srv) -> list[str]:
    return [ln for ln in srv.faults.lines
            if re.match(r"POST /seafhttp/(upload|update)", ln) or ln.startswith("GET /seafhttp/files/")
            or "/zip" in ln]


def test_moving_a_50mb_file_transfers_no_content(devserver, tmp_path):
    repo = devserver.create_library(USER, "OH-Memory")
    m = make_mirror(devserver, repo, tmp_path)
    _make_file(m.root / "video" / "talk.bin", 50 * MiB, b"talk")
    for i in range(8):                                        # bystanders, so one move is not "mass"
        m.write(f"notes/n{i}.md", f"note {i}\n".encode())
    assert m.sync().errors == []
    fid = devserver.file_id(repo, "/video/talk.bin")
    assert fid is not None

    # local rename + move to another folder
    devserver.reset_counters()
    (m.root / "archive").mkdir()
    os.rename(m.root / "video" / "talk.bin", m.root / "archive" / "talk-2026.bin")
    report = m.sync()
    assert report.errors == [] and report.moved == [("video/talk.bin", "archive/talk-2026.bin")]
    assert devserver.file_id(repo, "/archive/talk-2026.bin") == fid
    assert devserver.file_id(repo, "/video/talk.bin") is None
    assert not any(p.startswith("/.trash") for p in devserver.tree_ids(repo))
    assert _content_requests(devserver) == []

    # remote move back: a local rename
    devserver.reset_counters()
    devserver.rename_path(repo, "/archive/talk-2026.bin", "talk.bin")
    devserver.move_path(repo, "/archive/talk.bin", "/video")
    report = m.sync()
    assert report.errors == [] and report.moved == [("archive/talk-2026.bin", "video/talk.bin")]
    assert (m.root / "video" / "talk.bin").stat().st_size == 50 * MiB
    assert not (m.root / "archive" / "talk-2026.bin").exists()
    assert _content_requests(devserver) == []


def test_moving_a_folder_of_100_files_transfers_no_content(devserver, tmp_path):
    repo = devserver.create_library(USER, "OH-Memory")
    m = make_mirror(devserver, repo, tmp_path)
    files = {f"course/week{i // 10:02}/note{i:03}.md": f"note {i}\n".encode() * (i + 1) for i in range(100)}
    for rel, data in files.items():
        m.write(rel, data)
    assert m.sync().errors == []
    ids = devserver.tree_ids(repo)

    devserver.reset_counters()
    (m.root / "archive" / "2026").mkdir(parents=True)
    os.rename(m.root / "course", m.root / "archive" / "2026" / "course-done")
    report = m.sync()
    assert report.errors == [] and report.held_deletes == []
    assert report.moved == [("course", "archive/2026/course-done")]  # one folder move
    after = devserver.tree_ids(repo)
    for rel in files:
        new = "/archive/2026/course-done/" + rel.split("/", 1)[1]
        assert after[new] == ids["/" + rel]
    assert not [p for p in after if p.startswith("/course/") or p.startswith("/.trash")]
    assert "/course" not in {d.rstrip("/") for d in devserver.dirs(repo)}
    assert _content_requests(devserver) == []
    assert m.sync().transferred == 0

    # and back, on the server: local renames only
    devserver.reset_counters()
    devserver.move_path(repo, "/archive/2026/course-done", "/")
    devserver.rename_path(repo, "/course-done", "course")
    report = m.sync()
    assert report.errors == [] and report.held_deletes == []
    assert report.moved == [("archive/2026/course-done", "course")]
    for rel, data in files.items():
        assert (m.root / rel).read_bytes() == data
    assert not (m.root / "archive" / "2026" / "course-done").exists()
    assert _content_requests(devserver) == []


def test_a_folder_move_is_one_server_side_move(devserver, tmp_path):
    repo = devserver.create_library(USER, "OH-Memory")
    m = make_mirror(devserver, repo, tmp_path)
    for i in range(100):
        m.write(f"course/note{i:03}.md", f"note {i}\n".encode())
    assert m.sync().errors == []
    devserver.reset_counters()
    os.rename(m.root / "course", m.root / "course-done")
    assert m.sync().errors == []
    assert devserver.request_count("POST") <= 5, devserver.request_count("POST")


def test_a_remote_folder_move_is_one_local_rename(devserver, tmp_path):
    repo = devserver.create_library(USER, "OH-Memory")
    m = make_mirror(devserver, repo, tmp_path)
    for i in range(30):
        m.write(f"course/sub/note{i:03}.md", f"note {i}\n".encode())
    assert m.sync().errors == []
    inode = os.stat(m.root / "course/sub/note000.md").st_ino
    devserver.mkdir(repo, "/archive")
    devserver.move_path(repo, "/course", "/archive")
    devserver.reset_counters()
    report = m.sync()
    assert report.moved == [("course", "archive/course")] and report.errors == []
    assert os.stat(m.root / "archive/course/sub/note000.md").st_ino == inode  # renamed, not downloaded
    assert devserver.request_count("/files/") == 0
    assert not (m.root / "course").exists()
    assert m.sync().transferred == 0
