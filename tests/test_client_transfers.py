"""Transfers hashed as they stream and chunks in flight
(engine/client/chunked.py, engine/client/resume.py, engine/ids.py), against
devserver.

Every test checks the bytes on the server (or in the destination) and that
the hasher's sha1 and Seafile id are those of the whole content.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from engine_helpers import USER
from ohsync.engine.client import SeafileClient
from ohsync.engine.client.chunked import ChunkedUploads
from ohsync.engine.ids import ContentHasher, seafile_file_id

MiB = 1024 * 1024
CHUNKS = r"^POST /seafhttp/(upload|update)-api/"


def make_client(server, **kw) -> SeafileClient:
    kw.setdefault("retries", 2)
    kw.setdefault("sleep", lambda s: None)
    return SeafileClient(server.url, server.token_for(USER), **kw)


@pytest.fixture
def repo(devserver) -> str:
    return devserver.create_library(USER, "transfers")


def test_hasher_matches_the_whole_content_fed_in_any_pieces():
    data = os.urandom(17 * MiB + 3)
    for piece in (1, 4096, 3 * MiB + 1, len(data)):
        hasher = ContentHasher(keep=10)
        for i in range(0, len(data), piece):
            hasher.update(data[i:i + piece])
        assert hasher.sha1() == hashlib.sha1(data).hexdigest()
        assert hasher.file_id() == seafile_file_id(data) and hasher.size == len(data)
        assert hasher.kept() is None
    small = ContentHasher(keep=10)
    small.update(b"0123456789")
    assert small.kept() == b"0123456789"
    assert ContentHasher().file_id() == "0" * 40


@pytest.mark.parametrize("exists", [False, True], ids=["upload", "update"])
def test_chunks_in_flight_assemble_the_exact_file(devserver, repo, exists):
    data = os.urandom(10 * MiB + 12345)
    if exists:
        devserver.put_file(repo, "/big.bin", b"old")
    seen: list[int] = []
    hasher = ContentHasher()
    devserver.reset_counters()
    with make_client(devserver) as client, ThreadPoolExecutor(4) as pool:
        result = client.upload_chunked(repo, "/big.bin", io.BytesIO(data), size=len(data), exists=exists,
                                       chunk_size=1 * MiB, executor=pool, in_flight=4, hasher=hasher,
                                       progress=lambda done, total: seen.append(done), resume=False)
    assert devserver.read_file(repo, "/big.bin") == data
    assert result.id == hasher.file_id() == seafile_file_id(data)
    assert hasher.sha1() == hashlib.sha1(data).hexdigest()
    assert devserver.request_count(CHUNKS) == 11
    assert seen == sorted(seen) and seen[-1] == len(data)  # the confirmed prefix only grows


def test_a_chunk_dropped_in_flight_is_sent_again_and_nothing_is_corrupted(devserver, repo):
    data = os.urandom(12 * MiB)
    devserver.inject_fault("POST", r"^/seafhttp/upload-api/", drop=True, count=1)  # the first chunk
    devserver.inject_fault("POST", r"^/seafhttp/upload-api/", drop=True, after_processing=True, count=1)
    with make_client(devserver) as client, ThreadPoolExecutor(4) as pool:
        result = client.upload_chunked(repo, "/d.bin", io.BytesIO(data), size=len(data), chunk_size=1 * MiB,
                                       executor=pool, in_flight=4, resume=False)
    assert devserver.read_file(repo, "/d.bin") == data
    assert result.id == seafile_file_id(data) and result.path == "/d.bin"


def test_the_final_chunk_waits_for_every_other_one(devserver, repo):
    """The chunk that ends the file makes the server assemble it: it is sent
    only once all chunks below it were answered."""
    data = os.urandom(6 * MiB)
    lock = threading.Lock()
    order: list[tuple[str, int]] = []

    real_post = ChunkedUploads._post

    def post(self, link, form, name, data_, crange, target, exists):
        with lock:
            order.append(("start", crange[0]))
        resp = real_post(self, link, form, name, data_, crange, target, exists)
        with lock:
            order.append(("end", crange[0]))
        return resp

    ChunkedUploads._post = post  # type: ignore[method-assign]
    try:
        with make_client(devserver) as client, ThreadPoolExecutor(4) as pool:
            client.upload_chunked(repo, "/f.bin", io.BytesIO(data), size=len(data), chunk_size=1 * MiB,
                                  executor=pool, in_flight=4, resume=False)
    finally:
        ChunkedUploads._post = real_post  # type: ignore[method-assign]
    assert devserver.read_file(repo, "/f.bin") == data
    last = 5 * MiB
    final_start = order.index(("start", last))
    assert all(order.index(("end", i * MiB)) < final_start for i in range(5))
    assert order[0] == ("start", 0) and order[1] == ("end", 0)  # the first chunk goes alone


def test_a_resumed_upload_hashes_the_bytes_already_on_the_server(devserver, repo):
    data = os.urandom(5 * MiB)

    class Stop(Exception):
        pass

    def stop_at_3(first: int, end: int) -> None:
        if first >= 3 * MiB:
            raise Stop

    with make_client(devserver) as client:
        with pytest.raises(Stop):
            client.upload_chunked(repo, "/r.bin", io.BytesIO(data), size=len(data), chunk_size=1 * MiB,
                                  before_chunk=stop_at_3)
        devserver.reset_counters()
        hasher = ContentHasher()
        result = client.upload_chunked(repo, "/r.bin", io.BytesIO(data), size=len(data), chunk_size=1 * MiB,
                                       hasher=hasher, resume_cap=2 * MiB)
    assert devserver.read_file(repo, "/r.bin") == data
    assert devserver.request_count(CHUNKS) == 3  # from the cap (2 MiB), below the server's 3 MiB
    assert hasher.file_id() == result.id == seafile_file_id(data)


def test_download_is_hashed_while_it_streams_also_across_a_restart(devserver, repo):
    data = os.urandom(3 * MiB + 7)
    devserver.put_file(repo, "/x.bin", data)
    devserver.inject_fault("GET", r"^/seafhttp/files/", drop_after_bytes=MiB, count=1)
    hasher = ContentHasher()
    buf = io.BytesIO()
    with make_client(devserver) as client:
        file_id = client.download_resumable(repo, "/x.bin", buf, hasher=hasher)
    assert buf.getvalue() == data
    assert hasher.sha1() == hashlib.sha1(data).hexdigest() and hasher.file_id() == file_id == seafile_file_id(data)


def test_a_download_resumed_after_a_restart_feeds_the_bytes_it_held(devserver, repo, tmp_path):
    data = os.urandom(2 * MiB)
    devserver.put_file(repo, "/p.bin", data)
    part = tmp_path / "p.part"
    part.write_bytes(data[:MiB])
    hasher = ContentHasher()
    with make_client(devserver) as client, open(part, "r+b") as fh:
        fh.seek(0, os.SEEK_END)
        client.download_resumable(repo, "/p.bin", fh, resume_id=seafile_file_id(data), hasher=hasher)
    assert part.read_bytes() == data
    assert hasher.sha1() == hashlib.sha1(data).hexdigest()
    assert re.fullmatch(r"[0-9a-f]{40}", hasher.file_id())
