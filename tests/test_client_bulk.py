"""Bulk and resumable transfers of the client (``ohsync.engine.client``)
against devserver: zip download (and the engine's cold sync through it),
chunked resumable upload, ranged resumable download.

Connections are dropped two ways: devserver's ``inject_fault(drop=True)``
(closed before any answer, or after the request was handled with
``after_processing``), and :class:`CuttingTransport`, which breaks a
response body after a number of bytes (a drop mid-body).  The bounded-memory
test runs devserver in a child process so that only the client's own
allocations are traced.
"""

from __future__ import annotations

import gc
import hashlib
import io
import os
import re
import subprocess
import sys
import tracemalloc
import zipfile
from collections.abc import Iterator

import httpx
import pytest

from engine_helpers import USER, make_mirror, mirrored, read_tree
from ohsync.engine.client import SeafileClient
from ohsync.engine.errors import NetworkError, NotFoundError, QuotaError, RemoteOperationError
from ohsync.engine.ids import file_hashes, seafile_file_id

MiB = 1024 * 1024
UPLOADS = r"^POST /seafhttp/upload-api/"
UPDATES = r"^POST /seafhttp/update-api/"
FILES = r"^GET /seafhttp/files/"
UPLOAD_PATH = "/seafhttp/upload-api/"
FILES_PATH = "/seafhttp/files/"


class Crash(BaseException):
    """Stands for the process being killed: nothing catches it."""


class CuttingTransport(httpx.BaseTransport):
    """A real HTTP transport that records requests and can break bodies.

    :ivar requests: ``(method, path, Range header or None)`` of every request.
    """

    def __init__(self, *, cut_after: int | None = None, cut_pattern: str = r"/seafhttp/files/",
                 cuts: int = 1, strip_range: bool = False) -> None:
        self.inner = httpx.HTTPTransport()
        self.cut_after, self.cut_pattern, self.cuts, self.strip_range = cut_after, cut_pattern, cuts, strip_range
        self.requests: list[tuple[str, str, str | None]] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.strip_range and "Range" in request.headers:
            del request.headers["Range"]
        self.requests.append((request.method, request.url.path, request.headers.get("Range")))
        resp = self.inner.handle_request(request)
        if self.cut_after is None or self.cuts <= 0 or not re.search(self.cut_pattern, request.url.path):
            return resp
        self.cuts -= 1
        return httpx.Response(resp.status_code, headers=resp.headers, stream=_Cut(resp.stream, self.cut_after),
                              extensions=resp.extensions)

    def ranges(self, pattern: str = r"/seafhttp/files/") -> list[str | None]:
        return [rng for method, path, rng in self.requests if method == "GET" and re.search(pattern, path)]

    def close(self) -> None:
        self.inner.close()


class _Cut(httpx.SyncByteStream):
    """Yields ``limit`` bytes of ``inner``, then fails like a dropped connection."""

    def __init__(self, inner: httpx.SyncByteStream, limit: int) -> None:
        self.inner, self.limit = inner, limit

    def __iter__(self) -> Iterator[bytes]:
        sent = 0
        for chunk in self.inner:
            if sent + len(chunk) >= self.limit:
                yield chunk[: self.limit - sent]
                raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")
            sent += len(chunk)
            yield chunk

    def close(self) -> None:
        self.inner.close()


def make_client(server, transport: httpx.BaseTransport | None = None, **kw) -> SeafileClient:
    kw.setdefault("retries", 2)
    kw.setdefault("sleep", lambda s: None)
    return SeafileClient(server.url, server.token_for(USER), transport=transport, **kw)


@pytest.fixture
def repo(devserver) -> str:
    return devserver.create_library(USER, "bulk")


def payload(size: int, seed: int = 1) -> bytes:
    """Deterministic, incompressible-enough bytes."""
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(f"{seed}-{counter}".encode()).digest() * 32
        counter += 1
    return bytes(out[:size])


# -- zip download ---------------------------------------------------------------------------

def seed_tree(server, repo_id: str) -> None:
    server.put_file(repo_id, "/notes/a.md", b"alpha\n")
    server.put_file(repo_id, "/notes/sub/b.txt", b"beta\n")
    server.put_file(repo_id, "/other.txt", b"other\n")


def test_zip_of_one_folder_has_entries_under_its_name(devserver, repo):
    seed_tree(devserver, repo)
    buf = io.BytesIO()
    with make_client(devserver) as client:
        client.download_zip(repo, "/", ["notes"], buf)
    names = {i.filename for i in zipfile.ZipFile(buf).infolist() if not i.is_dir()}
    assert names == {"notes/a.md", "notes/sub/b.txt"}
    assert zipfile.ZipFile(buf).read("notes/sub/b.txt") == b"beta\n"
    assert devserver.request_count(r"^GET /api/v2.1/repos/[-0-9a-f]+/zip-task/\?parent_dir=%2F&dirents=notes$") == 1
    assert devserver.request_count(r"^GET /api/v2.1/query-zip-progress/") == 1
    assert devserver.request_count(r"^GET /seafhttp/zip/") == 1


def test_zip_of_several_items_has_them_at_the_top_level(devserver, repo):
    seed_tree(devserver, repo)
    buf = io.BytesIO()
    with make_client(devserver) as client:
        client.download_zip(repo, "/notes", ["sub", "a.md"], buf)
    archive = zipfile.ZipFile(buf)
    assert {i.filename for i in archive.infolist() if not i.is_dir()} == {"sub/b.txt", "a.md"}
    assert archive.read("a.md") == b"alpha\n"


def test_zip_is_fetched_at_once_when_progress_is_not_answered(devserver, repo):
    seed_tree(devserver, repo)
    devserver.inject_fault("GET", "/api/v2.1/query-zip-progress/", status=500)
    buf = io.BytesIO()
    with make_client(devserver, retries=0) as client:
        client.download_zip(repo, "/", ["notes", "other.txt"], buf)
    assert zipfile.ZipFile(buf).read("other.txt") == b"other\n"
    assert devserver.request_count(r"^GET /api/v2.1/query-zip-progress/") == 1


def test_dropped_zip_stream_is_retried_with_a_new_task(devserver, repo):
    seed_tree(devserver, repo)
    devserver.inject_fault("GET", "/seafhttp/zip/", drop=True)
    buf = io.BytesIO(b"junk that must go")
    buf.seek(0, os.SEEK_END)
    start = buf.tell()
    with make_client(devserver) as client:
        client.download_zip(repo, "/", ["notes"], buf)
    assert buf.getvalue().startswith(b"junk that must go")
    assert zipfile.ZipFile(io.BytesIO(buf.getvalue()[start:])).read("notes/a.md") == b"alpha\n"
    assert devserver.request_count(r"zip-task") == 2  # the one-time token was burnt: a new task


def test_zip_of_a_missing_item_is_not_found(devserver, repo):
    seed_tree(devserver, repo)
    with make_client(devserver) as client, pytest.raises(NotFoundError):
        client.download_zip(repo, "/", ["nope"], io.BytesIO())
    assert devserver.request_count(r"^GET /seafhttp/zip/") == 0


@pytest.mark.parametrize("layout", ["one-folder", "several-items"])
def test_cold_sync_of_many_files_goes_through_one_zip(devserver, repo, tmp_path, layout):
    files = {}
    for i in range(24):
        top = "notes" if layout == "one-folder" or i % 3 else f"top{i}"
        files[f"/{top}/n{i:02d}.md"] = f"note {i}\n".encode() * (i + 1)
    files["/notes/deep/er/x.bin"] = payload(300_000)
    for path, data in files.items():
        devserver.put_file(repo, path, data)
    mirror = make_mirror(devserver, repo, tmp_path)
    devserver.reset_counters()
    report = mirror.sync()
    assert report.errors == []
    assert sorted(report.downloaded) == sorted(p[1:] for p in files)
    assert devserver.request_count(r"^GET /seafhttp/zip/") == 1
    assert devserver.request_count(FILES) == 0  # nothing fetched one by one
    assert read_tree(mirror.root) == mirrored(devserver.tree(repo)) == files
    for path, data in files.items():
        base = mirror.state.get_base(path[1:])
        assert base is not None and base.remote_id == seafile_file_id(data)
    devserver.reset_counters()
    again = mirror.sync()
    assert again.downloaded == [] and again.uploaded == [] and again.errors == []
    assert devserver.request_count(r"/seafhttp/") == 0
    mirror.client.close()
    mirror.state.close()


# -- chunked upload -------------------------------------------------------------------------

def test_chunked_upload_sends_content_range_chunks(devserver, repo):
    data = payload(2 * MiB + 123)
    seen: list[tuple[int, int]] = []
    transport = CuttingTransport()
    with make_client(devserver, transport) as client:
        result = client.upload_chunked(repo, "/big.bin", io.BytesIO(data), size=len(data), chunk_size=MiB,
                                       progress=lambda d, t: seen.append((d, t)), resume=False)
    assert result.path == "/big.bin" and result.size == len(data) and result.id == seafile_file_id(data)
    assert devserver.read_file(repo, "/big.bin") == data
    assert seen == [(MiB, len(data)), (2 * MiB, len(data)), (len(data), len(data))]
    assert devserver.request_count(UPLOADS) == 3
    assert devserver.request_count("file-uploaded-bytes") == 0  # resume=False: not asked
    assert devserver.request_count(r"upload-link") == 1  # one link serves every chunk


def test_small_file_goes_up_in_one_plain_request(devserver, repo):
    with make_client(devserver) as client:
        result = client.upload_chunked(repo, "/s.txt", io.BytesIO(b"small\n"), size=6, chunk_size=MiB)
        empty = client.upload_chunked(repo, "/e.txt", io.BytesIO(b""), size=0)
    assert result.id == seafile_file_id(b"small\n") and empty.id == "0" * 40
    assert devserver.request_count(UPLOADS) == 2 and devserver.request_count("file-uploaded-bytes") == 0


def test_new_file_upload_is_auto_renamed_and_replace_overwrites(devserver, repo):
    devserver.put_file(repo, "/r.bin", b"theirs")
    data = payload(3 * MiB)
    with make_client(devserver) as client:
        renamed = client.upload_chunked(repo, "/r.bin", io.BytesIO(data), size=len(data), chunk_size=MiB)
        replaced = client.upload_chunked(repo, "/r.bin", io.BytesIO(data), size=len(data), chunk_size=MiB,
                                         replace=True)
    assert renamed.path == "/r (1).bin" and replaced.path == "/r.bin"
    assert devserver.read_file(repo, "/r.bin") == data


def test_dropped_chunk_is_sent_again_from_the_confirmed_offset(devserver, repo):
    data = payload(3 * MiB + 7)
    devserver.after_request("POST", UPLOAD_PATH, lambda srv: srv.inject_fault("POST", UPLOAD_PATH, drop=True))
    with make_client(devserver) as client:
        result = client.upload_chunked(repo, "/d.bin", io.BytesIO(data), size=len(data), chunk_size=MiB)
    assert devserver.read_file(repo, "/d.bin") == data and result.id == seafile_file_id(data)
    assert devserver.request_count(UPLOADS) == 4 + 1  # 4 chunks + the dropped one
    assert devserver.request_count("file-uploaded-bytes") == 2  # at the start and after the drop
    assert devserver.request_count(r"upload-link") == 2  # a fresh link after the drop


def test_chunk_stored_but_answer_lost_is_not_corrupted(devserver, repo):
    data = payload(3 * MiB)
    devserver.after_request("POST", UPLOAD_PATH, lambda srv: srv.inject_fault(
        "POST", UPLOAD_PATH, drop=True, after_processing=True))
    with make_client(devserver) as client:
        client.upload_chunked(repo, "/a.bin", io.BytesIO(data), size=len(data), chunk_size=MiB)
    assert devserver.read_file(repo, "/a.bin") == data
    assert devserver.request_count(UPLOADS) == 4  # chunk 2 sent again (never ahead of what was confirmed)


def test_lost_answer_of_the_final_chunk_does_not_upload_twice(devserver, repo):
    data = payload(MiB + MiB // 2)
    devserver.after_request("POST", UPLOAD_PATH, lambda srv: srv.inject_fault(
        "POST", UPLOAD_PATH, drop=True, after_processing=True))
    with make_client(devserver) as client:
        result = client.upload_chunked(repo, "/f.bin", io.BytesIO(data), size=len(data), chunk_size=MiB)
    assert result.path == "/f.bin" and result.id == seafile_file_id(data)
    assert sorted(devserver.tree(repo)) == ["/f.bin"]  # no "f (1).bin"
    assert devserver.request_count(UPLOADS) == 2


def test_upload_resumes_after_a_restart(devserver, repo, tmp_path):
    data = payload(4 * MiB + 1000)
    source = tmp_path / "big.bin"
    source.write_bytes(data)

    def crash_at_third(first: int, end: int) -> None:
        if first == 2 * MiB:
            raise Crash("killed")

    with make_client(devserver) as client, open(source, "rb") as fh, pytest.raises(Crash):
        client.upload_chunked(repo, "/big.bin", fh, size=len(data), chunk_size=MiB, before_chunk=crash_at_third)
    assert "/big.bin" not in devserver.tree(repo)
    devserver.reset_counters()
    seen: list[int] = []
    with make_client(devserver) as client, open(source, "rb") as fh:  # a new process
        result = client.upload_chunked(repo, "/big.bin", fh, size=len(data), chunk_size=MiB,
                                       progress=lambda d, t: seen.append(d))
    assert devserver.read_file(repo, "/big.bin") == data and result.id == seafile_file_id(data)
    assert devserver.request_count(UPLOADS) == 3  # chunks 3, 4, 5 only
    assert seen[0] == 3 * MiB


def test_update_of_an_existing_file_uses_the_update_link(devserver, repo):
    devserver.put_file(repo, "/u.md", b"old\n")
    with make_client(devserver) as client:
        result = client.upload_chunked(repo, "/u.md", io.BytesIO(b"new text\n"), size=9, exists=True)
        with pytest.raises(NotFoundError):
            client.upload_chunked(repo, "/missing.md", io.BytesIO(b"x"), size=1, exists=True)
    assert result.path == "/u.md" and result.id == seafile_file_id(b"new text\n")
    assert devserver.read_file(repo, "/u.md") == b"new text\n"
    assert devserver.request_count(UPDATES) == 2 and devserver.request_count(UPLOADS) == 0


def test_chunked_update_of_an_existing_file(devserver, repo):
    devserver.put_file(repo, "/u.bin", b"old")
    data = payload(2 * MiB + 5)
    with make_client(devserver) as client:
        result = client.upload_chunked(repo, "/u.bin", io.BytesIO(data), size=len(data), exists=True,
                                       chunk_size=MiB)
    assert devserver.read_file(repo, "/u.bin") == data and result.id == seafile_file_id(data)
    assert devserver.request_count(UPDATES) == 3


def test_names_the_form_cannot_carry_are_refused_before_any_request(devserver, repo):
    devserver.reset_counters()
    with make_client(devserver) as client, pytest.raises(RemoteOperationError):
        client.upload_chunked(repo, '/say "hi".txt', io.BytesIO(b"x"), size=1)
    assert devserver.request_count() == 0


def test_quota_refusal_is_not_retried(devserver, repo):
    data = payload(2 * MiB)
    devserver.inject_fault("POST", UPLOAD_PATH, status=443)
    with make_client(devserver) as client, pytest.raises(QuotaError):
        client.upload_chunked(repo, "/q.bin", io.BytesIO(data), size=len(data), chunk_size=MiB)
    assert devserver.request_count(UPLOADS) == 1


def test_chunk_failures_in_a_row_are_bounded(devserver, repo):
    data = payload(2 * MiB)
    devserver.inject_fault("POST", UPLOAD_PATH, drop=True, count=10)
    with make_client(devserver) as client, pytest.raises(NetworkError):
        client.upload_chunked(repo, "/n.bin", io.BytesIO(data), size=len(data), chunk_size=MiB, attempts=3)
    assert devserver.request_count(UPLOADS) == 3


# -- resumable download ---------------------------------------------------------------------

def test_download_resumes_with_range_after_drops(devserver, repo):
    data = payload(5 * MiB + 3)
    file_id = devserver.put_file(repo, "/v.bin", data)
    cut = 1_500_000
    transport = CuttingTransport(cut_after=cut)
    # the body of the first answer breaks at `cut`; the second request is dropped unanswered
    devserver.after_request("GET", FILES_PATH, lambda srv: srv.inject_fault("GET", FILES_PATH, drop=True))
    buf = io.BytesIO()
    seen: list[tuple[int, int]] = []
    with make_client(devserver, transport) as client:
        got = client.download_resumable(repo, "/v.bin", buf, progress=lambda d, t: seen.append((d, t)))
    assert got == file_id and buf.getvalue() == data
    assert transport.ranges() == ["bytes=0-", f"bytes={cut}-", f"bytes={cut}-"]
    assert devserver.request_count(r"^GET /api2/repos/[-0-9a-f]+/file/\?p=%2Fv.bin&reuse=1$") == 1
    assert seen[-1] == (len(data), len(data)) and all(t == len(data) for _, t in seen)


def test_download_restarts_cleanly_when_ranges_are_ignored(devserver, repo):
    data = payload(3 * MiB)
    devserver.put_file(repo, "/r.bin", data)
    transport = CuttingTransport(cut_after=MiB + 17, strip_range=True)
    buf = io.BytesIO(b"keep")
    buf.seek(0, os.SEEK_END)
    with make_client(devserver, transport) as client:
        client.download_resumable(repo, "/r.bin", buf)
    assert buf.getvalue() == b"keep" + data
    assert transport.ranges() == [None, None]


def test_expired_link_is_replaced_and_the_same_version_continues(devserver, repo):
    data = payload(2 * MiB)
    devserver.put_file(repo, "/x.bin", data)
    transport = CuttingTransport(cut_after=MiB)
    buf = io.BytesIO()
    with make_client(devserver, transport, sleep=lambda s: devserver.expire_links()) as client:
        client.download_resumable(repo, "/x.bin", buf)
    assert buf.getvalue() == data
    assert transport.ranges() == ["bytes=0-", f"bytes={MiB}-", f"bytes={MiB}-"]  # 403, then the new link
    assert devserver.request_count(r"reuse=1") == 2


def test_download_resumes_after_a_restart(devserver, repo, tmp_path):
    data = payload(3 * MiB + 11)
    file_id = devserver.put_file(repo, "/p.bin", data)
    part = tmp_path / "p.part"
    cut = 2 * MiB + 5
    with (make_client(devserver, CuttingTransport(cut_after=cut), retries=0) as client, open(part, "wb") as fh,
          pytest.raises(NetworkError)):
        client.download_resumable(repo, "/p.bin", fh)
    assert part.stat().st_size == cut
    transport = CuttingTransport()
    with make_client(devserver, transport) as client, open(part, "r+b") as fh:  # a new process
        fh.seek(0, os.SEEK_END)
        assert client.download_resumable(repo, "/p.bin", fh, resume_id=file_id) == file_id
    assert part.read_bytes() == data
    assert transport.ranges() == [f"bytes={cut}-"]


def test_resume_of_an_outdated_version_starts_over(devserver, repo, tmp_path):
    old = payload(MiB, seed=1)
    old_id = devserver.put_file(repo, "/o.bin", old)
    new = payload(MiB // 2, seed=2)
    new_id = devserver.put_file(repo, "/o.bin", new)
    part = tmp_path / "o.part"
    part.write_bytes(old[:1000])
    with make_client(devserver) as client, open(part, "r+b") as fh:
        fh.seek(0, os.SEEK_END)
        assert client.download_resumable(repo, "/o.bin", fh, resume_id=old_id) == new_id
    assert part.read_bytes() == new


def test_complete_partial_and_empty_files(devserver, repo, tmp_path):
    data = payload(4000)
    file_id = devserver.put_file(repo, "/c.bin", data)
    empty_id = devserver.put_file(repo, "/empty", b"")
    part = tmp_path / "c.part"
    part.write_bytes(data)
    with make_client(devserver) as client:
        with open(part, "r+b") as fh:
            fh.seek(0, os.SEEK_END)
            assert client.download_resumable(repo, "/c.bin", fh, resume_id=file_id) == file_id
        buf = io.BytesIO()
        assert client.download_resumable(repo, "/empty", buf) == empty_id and buf.getvalue() == b""
        with pytest.raises(NotFoundError):
            client.download_resumable(repo, "/missing", io.BytesIO())
    assert part.read_bytes() == data


# -- bounded memory (devserver in another process) ------------------------------------------

@pytest.fixture
def child_devserver(tmp_path):
    """devserver as a child process: ``(url, token, repo_id)``."""
    proc = subprocess.Popen([sys.executable, "-m", "ohsync.devserver", "--port", "0", "--data",
                             str(tmp_path / "child-ds"), "--user", f"{USER}:secret"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        m = re.search(r"ready at (\S+)", line)
        assert m, f"devserver did not start: {line!r}"
        url = m.group(1)
        with httpx.Client(base_url=url) as http:
            token = http.get("/_devserver/token", params={"email": USER}).json()["token"]
            repo_id = http.post("/_devserver/libraries", json={"email": USER, "name": "mem"}).json()["repo_id"]
        yield url, token, repo_id
    finally:
        proc.terminate()
        proc.wait(10)


def test_50_mb_go_up_and_down_in_bounded_memory(child_devserver, tmp_path):
    url, token, repo_id = child_devserver
    size = 50 * 1000 * 1000
    source = tmp_path / "big.bin"
    with open(source, "wb") as fh:
        for i in range(0, size, MiB):
            fh.write(payload(min(MiB, size - i), seed=i))
    with open(source, "rb") as fh:
        sha1, file_id, _ = file_hashes(fh)
    chunk = 4 * MiB
    with SeafileClient(url, token, sleep=lambda s: None) as client:
        client.ping()  # connection pool and lazy imports before measuring
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            with open(source, "rb") as fh:
                result = client.upload_chunked(repo_id, "/big.bin", fh, size=size, chunk_size=chunk)
            up_peak = tracemalloc.get_traced_memory()[1] - base
            gc.collect()
            tracemalloc.reset_peak()
            base = tracemalloc.get_traced_memory()[0]
            with open(tmp_path / "back.bin", "wb") as out:
                got = client.download_resumable(repo_id, "/big.bin", out)
            down_peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
    assert result.id == file_id == got
    with open(tmp_path / "back.bin", "rb") as fh:
        assert file_hashes(fh)[0] == sha1
    assert up_peak < 2 * chunk, f"upload peak {up_peak / MiB:.1f} MiB"  # one chunk + slack
    assert down_peak < 2 * MiB, f"download peak {down_peak / MiB:.1f} MiB"
