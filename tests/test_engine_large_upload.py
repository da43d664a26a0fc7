"""How a large file goes up (engine/client/chunked.py, engine/transfer_large.py):
one streamed request up to ``upload_max_request``, hashed while it is sent;
resumable chunks after that request failed or above the limit, growing from
``upload_chunk``; the read-back still verifies every upload.

Upload requests are recorded at the devserver (it runs in this process) with
their ``Content-Range`` header and body size.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from daemon_helpers import wait_for
from engine_helpers import USER, make_mirror
from ohsync.engine.client import SeafileClient
from ohsync.engine.ids import ContentHasher, seafile_file_id

MiB = 1024 * 1024
_UPLOAD = re.compile(r"^/seafhttp/(upload|update)-api/")


class Posts:
    """Upload POSTs seen by the devserver: ``(Content-Range or None, body bytes)``."""

    def __init__(self, srv) -> None:
        self.seen: list[tuple[str | None, int]] = []
        self._orig = srv.dispatch
        srv.dispatch = self._dispatch

    def _dispatch(self, req):
        if req.method == "POST" and _UPLOAD.match(req.path):
            self.seen.append((req.headers.get("Content-Range"), int(req.headers.get("Content-Length") or 0)))
        return self._orig(req)

    def ranges(self) -> list[tuple[int, int]]:
        """``(first, last)`` of every chunk request."""
        out = []
        for crange, _ in self.seen:
            m = re.match(r"bytes (\d+)-(\d+)/\d+", crange or "")
            assert m, f"not a chunk: {crange!r}"
            out.append((int(m.group(1)), int(m.group(2))))
        return out


@pytest.fixture(params=["inline", "pool"])
def mirror(request, devserver, tmp_path):
    """A synced mirror of an empty library; ``pool``: with a transfer pool as the
    daemon gives its engines (the file is then hashed on it while it is sent)."""
    repo = devserver.create_library(USER, "Big")
    m = make_mirror(devserver, repo, tmp_path)
    pool = ThreadPoolExecutor(4) if request.param == "pool" else None
    m.engine.executor = m.engine.ctx.executor = pool
    m.sync()
    yield m
    if pool is not None:
        pool.shutdown(wait=True)
    m.client.close()
    m.state.close()


def test_a_large_file_goes_up_in_one_streamed_request_and_is_verified(devserver, mirror):
    data = os.urandom(20 * MiB + 11)
    mirror.write("video.bin", data)
    posts = Posts(devserver)
    devserver.reset_counters()
    report = mirror.sync()
    assert report.uploaded == ["video.bin"] and not report.errors
    assert devserver.read_file(mirror.repo_id, "/video.bin") == data
    assert len(posts.seen) == 1 and posts.seen[0][0] is None  # one plain request, no Content-Range
    assert posts.seen[0][1] > len(data)  # the whole file in its body
    # no 404 pre-check of a path the pass just listed as new, no resume query;
    # the read-back is one file/detail whose id is the content hash: no download
    assert devserver.request_count("GET /api2/repos/{id}/file/detail/") == 1
    assert devserver.request_count("file-uploaded-bytes") == 0
    assert devserver.request_count(r"GET /seafhttp/files/") == 0
    base = mirror.state.get_base("video.bin")
    assert base.sha1 == hashlib.sha1(data).hexdigest() and base.remote_id == seafile_file_id(data)
    devserver.reset_counters()
    assert mirror.sync().transferred == 0


def test_a_dropped_single_request_goes_on_in_resumable_chunks(devserver, mirror):
    data = os.urandom(20 * MiB)
    mirror.write("drop.bin", data)
    posts = Posts(devserver)
    devserver.inject_fault("POST", r"/upload-api/", drop_after_bytes=5 * MiB, count=1)
    report = mirror.sync()
    assert report.uploaded == ["drop.bin"] and not report.errors
    assert sorted(devserver.tree(mirror.repo_id)) == ["/drop.bin"]
    assert devserver.read_file(mirror.repo_id, "/drop.bin") == data
    assert posts.seen[0][0] is None  # the one request, cut short
    posts.seen.pop(0)
    ranges = posts.ranges()  # then chunks only
    assert ranges[0][0] == 0  # the plain request left nothing on the server to resume from
    assert ranges[-1][1] == len(data) - 1
    assert mirror.state.get_base("drop.bin").remote_id == seafile_file_id(data)


def test_the_lost_answer_of_the_single_request_is_not_uploaded_twice(devserver, mirror):
    data = os.urandom(12 * MiB)
    mirror.write("lost.bin", data)
    posts = Posts(devserver)
    devserver.inject_fault("POST", r"/upload-api/", drop=True, after_processing=True, count=1)
    report = mirror.sync()
    assert not report.errors
    assert sorted(devserver.tree(mirror.repo_id)) == ["/lost.bin"]  # no "lost (1).bin"
    assert devserver.read_file(mirror.repo_id, "/lost.bin") == data
    assert len(posts.seen) == 1  # the server's file was checked instead of sending it again


def test_above_the_request_limit_chunks_grow_from_the_first_chunk_size(devserver, mirror):
    mirror.engine.options.upload_chunk = 1 * MiB
    mirror.engine.options.upload_max_request = 4 * MiB
    data = os.urandom(14 * MiB + 3)
    mirror.write("grow.bin", data)
    posts = Posts(devserver)
    report = mirror.sync()
    assert report.uploaded == ["grow.bin"] and not report.errors
    assert devserver.read_file(mirror.repo_id, "/grow.bin") == data
    ranges = posts.ranges()
    sizes = [last - first + 1 for first, last in ranges]
    assert sizes[0] == 1 * MiB  # a first chunk of upload_chunk
    assert max(sizes) <= 4 * MiB and max(sizes) > 1 * MiB  # then larger ones, none above the limit
    assert [f for f, _ in ranges] == [0] + [last + 1 for _, last in ranges[:-1]]  # in order, no gap
    assert ranges[-1][1] == len(data) - 1 and len(ranges) < 14


def test_fixed_chunks_when_the_request_limit_is_the_chunk_size(devserver, mirror):
    mirror.engine.options.upload_chunk = mirror.engine.options.upload_max_request = 2 * MiB
    data = os.urandom(9 * MiB)
    mirror.write("fixed.bin", data)
    posts = Posts(devserver)
    mirror.sync()
    assert devserver.read_file(mirror.repo_id, "/fixed.bin") == data
    assert [last - first + 1 for first, last in posts.ranges()] == [2 * MiB] * 4 + [1 * MiB]


def test_one_streamed_request_holds_no_copy_of_the_file_in_memory():
    data = os.urandom(48 * MiB)
    data_id = seafile_file_id(data)
    received = {"bytes": 0}

    class Server(httpx.BaseTransport):  # consumes the body as it streams (MockTransport reads it whole)
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            if request.method == "GET":
                return httpx.Response(200, json="http://seafile.test/seafhttp/upload-api/" + "t" * 36)
            for piece in request.stream:  # type: ignore[union-attr]
                received["bytes"] += len(piece)
            return httpx.Response(200, json=[{"id": data_id, "name": "m.bin", "size": len(data)}])

    hasher = ContentHasher()
    repo = "0" * 8 + "-0000-0000-0000-" + "0" * 12
    with SeafileClient("http://seafile.test", "token", transport=Server()) as client:
        tracemalloc.start()
        try:
            result = client.upload_chunked(repo, "/m.bin", io.BytesIO(data), size=len(data), resume=False,
                                           max_request=64 * MiB, hasher=hasher)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert received["bytes"] > len(data)  # one request carried the whole file
    assert result.id == hasher.file_id() == data_id
    assert hasher.sha1() == hashlib.sha1(data).hexdigest()
    assert peak < 4 * MiB, peak  # 64 KiB reads, no buffer of the file or of a chunk


def test_progress_shows_while_the_one_request_streams(devserver, mirror):
    data = os.urandom(20 * MiB)
    mirror.write("progress.bin", data)
    events = []
    mirror.engine.ctx.on_event = events.append
    mirror.sync()
    done = [e.done for e in events if e.kind == "transfer" and e.path == "progress.bin" and e.direction == "up"]
    assert len(done) >= 10 and done == sorted(done)  # about every MiB of the one request
    assert done[-1] == len(data) and 0 < done[0] < len(data)


def test_the_daemon_sends_a_large_file_in_one_request_hashed_on_its_pool(devserver, seed_daemon):
    s = seed_daemon(put={"/index.md": b"# index\n"}, poll_interval=1.0)  # default upload_request_mib
    posts = Posts(devserver)
    d = s.start(wait="idle")
    data = os.urandom(40 * MiB + 5)
    staged = s.mirror.parent / "staged.bin"
    staged.write_bytes(data)
    posts.seen.clear()
    os.rename(staged, s.mirror / "talk.bin")  # appears whole in the mirror
    wait_for(lambda: devserver.file_id(s.repo_id, "/talk.bin"), timeout=60, what="the upload")
    d.wait_state("idle", timeout=60)
    assert devserver.read_file(s.repo_id, "/talk.bin") == data
    assert devserver.file_id(s.repo_id, "/talk.bin") == seafile_file_id(data)
    assert [crange for crange, _ in posts.seen] == [None]  # one plain request carried it


def test_a_stopped_upload_leaves_no_hashing_behind(devserver):
    repo = devserver.create_library(USER, "Stop")
    data = os.urandom(6 * MiB)

    class Source(io.BytesIO):
        """Records reads made after the upload call returned."""
        late = 0
        done = False

        def read(self, n: int | None = -1) -> bytes:  # type: ignore[override]
            if self.done:
                Source.late += 1
            # why: a slow source, so the hashing task (it reads with read(); the sender with readinto())
            time.sleep(0.05)
            return super().read(n)

    def stop_at_third(first: int, end: int) -> None:
        if first >= 2 * MiB:
            raise RuntimeError("stopped")

    src = Source(data)
    with SeafileClient(devserver.url, devserver.token_for(USER), retries=1) as client, \
            ThreadPoolExecutor(4) as pool:
        with pytest.raises(RuntimeError):
            client.upload_chunked(repo, "/s.bin", src, size=len(data), chunk_size=MiB, max_request=MiB,
                                  resume=False, executor=pool, in_flight=1, before_chunk=stop_at_third)
        src.done = True
        time.sleep(0.3)  # why: a quiet period: a task still running would read again meanwhile
    assert Source.late == 0  # the hashing task was stopped and waited for before the call returned
