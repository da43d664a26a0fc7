"""One retry decision: every request the server answers ``429 Retry-After: N``
is sent again after N seconds (``engine/failures.py`` ``resend_wait``, read
by every retry loop of ``engine/client/``): an upload (also of several
files at once), an update, a chunk of a large upload, a download, a read
and a write of the API.

devserver injects the 429s; the client's ``sleep`` seam records each wait,
so the tests see exactly how long the client waited before each resend
(and no test sleeps for real).  Request counts come from devserver's
counters: one 429 costs one extra request, and nothing is stored twice.
"""
from __future__ import annotations

import io
import os

import pytest

from ohsync.engine.client import SeafileClient
from ohsync.engine.errors import ServerError, ThrottledError
from ohsync.engine.ids import seafile_file_id

USER = "user@example.edu.cn"  # the account of the ``devserver`` fixture (conftest.py)
ADVISED = 2  # seconds, the Retry-After every injected 429 carries
MiB = 1024 * 1024


@pytest.fixture
def repo(devserver) -> str:
    rid = devserver.create_library(USER, "Throttled")
    devserver.put_file(rid, "/a.md", b"alpha\n")
    return rid


@pytest.fixture
def slept() -> list[float]:
    """The waits the client asked for, in order (its ``sleep`` seam)."""
    return []


@pytest.fixture
def client(devserver, slept):
    with SeafileClient(devserver.url, devserver.token_for(USER), retries=3, sleep=slept.append) as c:
        yield c


def _throttle(devserver, method: str, path: str, count: int = 1) -> None:
    devserver.inject_fault(method, path, status=429, retry_after=ADVISED, count=count)
    devserver.reset_counters()


@pytest.mark.parametrize("answers", [1, 3])
def test_an_upload_waits_out_each_429(devserver, repo, client, slept, answers):
    client.upload_link(repo, "/")  # the link is held: only the upload itself is throttled
    _throttle(devserver, "POST", r"/seafhttp/upload-api/", count=answers)
    result = client.upload(repo, "/new.md", b"new\n")
    assert slept == [ADVISED] * answers
    assert devserver.request_count(r"POST /seafhttp/upload-api/") == answers + 1
    assert result.path == "/new.md" and devserver.read_file(repo, "/new.md") == b"new\n"
    assert sorted(devserver.tree(repo)) == ["/a.md", "/new.md"]  # stored once, not as "new (1).md"


def test_a_batch_upload_waits_out_a_429(devserver, repo, client, slept):
    client.upload_link(repo, "/")
    _throttle(devserver, "POST", r"/seafhttp/upload-api/")
    results = client.upload_files(repo, "/", [("b.md", b"beta\n"), ("c.md", b"gamma\n")])
    assert slept == [ADVISED]
    assert devserver.request_count(r"POST /seafhttp/upload-api/") == 2
    assert [r.path for r in results] == ["/b.md", "/c.md"]
    assert sorted(devserver.tree(repo)) == ["/a.md", "/b.md", "/c.md"]


def test_an_update_waits_out_a_429(devserver, repo, client, slept):
    client.update_link(repo, "/")
    _throttle(devserver, "POST", r"/seafhttp/update-api/")
    result = client.update(repo, "/a.md", b"alpha, edited\n")
    assert slept == [ADVISED]
    assert devserver.request_count(r"POST /seafhttp/update-api/") == 2
    assert result.id == seafile_file_id(b"alpha, edited\n")
    assert devserver.read_file(repo, "/a.md") == b"alpha, edited\n"


def test_a_chunk_waits_out_a_429(devserver, repo, client, slept):
    data = os.urandom(3 * MiB)
    client.upload_link(repo, "/")
    _throttle(devserver, "POST", r"/seafhttp/upload-api/")
    result = client.upload_chunked(repo, "/big.bin", io.BytesIO(data), size=len(data), chunk_size=1 * MiB,
                                   resume=False)
    assert slept == [ADVISED]
    assert devserver.request_count(r"POST /seafhttp/upload-api/") == 3 + 1  # three chunks, one sent twice
    assert result.id == seafile_file_id(data) and devserver.read_file(repo, "/big.bin") == data


def test_a_download_waits_out_a_429(devserver, repo, client, slept):
    _throttle(devserver, "GET", r"/seafhttp/files/")
    content, _ = client.download_bytes(repo, "/a.md")
    assert content == b"alpha\n"
    assert slept == [ADVISED]
    assert devserver.request_count(r"GET /seafhttp/files/") == 2


def test_a_resumable_download_waits_out_a_429(devserver, repo, client, slept):
    _throttle(devserver, "GET", r"/seafhttp/files/")
    dest = io.BytesIO()
    client.download_resumable(repo, "/a.md", dest)
    assert dest.getvalue() == b"alpha\n"
    assert slept == [ADVISED]
    assert devserver.request_count(r"GET /seafhttp/files/") == 2


def test_an_api_read_waits_out_a_429(devserver, repo, client, slept):
    _throttle(devserver, "GET", r"/api2/repos/[-0-9a-f]{36}/dir/")
    assert [e.path for e in client.list_dir(repo, "/").entries] == ["/a.md"]
    assert slept == [ADVISED]
    assert devserver.request_count("GET /api2/repos/{id}/dir/") == 2


def test_an_api_write_waits_out_a_429(devserver, repo, client, slept):
    _throttle(devserver, "POST", r"/api2/repos/[-0-9a-f]{36}/dir/")
    client.mkdir(repo, "/made", parents=False)
    assert slept == [ADVISED]
    assert devserver.request_count(r"POST /api2/repos/[-0-9a-f]{36}/dir/") == 2
    assert "/made" in [e.path for e in client.list_dir(repo, "/").entries]


def test_a_wait_longer_than_the_cap_is_left_to_the_failure_book(devserver, repo, slept):
    """A 429 asking for more than ``max_retry_after`` fails the request at once
    (the path then waits in the failure book, which honours ``retry_after``)."""
    with SeafileClient(devserver.url, devserver.token_for(USER), retries=3, sleep=slept.append,
                       max_retry_after=1.0) as c:
        c.upload_link(repo, "/")
        _throttle(devserver, "POST", r"/seafhttp/upload-api/")
        with pytest.raises(ThrottledError) as info:
            c.upload(repo, "/new.md", b"new\n")
    assert info.value.retry_after == ADVISED and slept == []
    assert devserver.request_count(r"POST /seafhttp/upload-api/") == 1


def test_an_upload_that_failed_otherwise_is_not_sent_again(devserver, repo, client, slept):
    """A 5xx may come after the file server stored the upload: it is not
    resent (the engine re-plans and reads back), unlike a 429."""
    client.upload_link(repo, "/")
    devserver.inject_fault("POST", r"/seafhttp/upload-api/", status=502)
    devserver.reset_counters()
    with pytest.raises(ServerError):
        client.upload(repo, "/new.md", b"new\n")
    assert slept == [] and devserver.request_count(r"POST /seafhttp/upload-api/") == 1


def test_a_local_save_throttled_once_goes_up_in_the_same_pass(devserver, repo, tmp_path, slept):
    """Through the engine: the save's update is answered 429 once; the pass
    waits the advised time and stores it, with no failure recorded."""
    from engine_helpers import make_mirror

    m = make_mirror(devserver, repo, tmp_path)
    assert m.sync().errors == []
    m.client.http.sleep = slept.append  # the client's sleep seam
    m.write("a.md", b"alpha\nsaved while throttled\n")
    m.client.update_link(repo, "/")
    _throttle(devserver, "POST", r"/seafhttp/update-api/")
    report = m.sync(["a.md"])
    assert report.errors == [] and report.uploaded == ["a.md"]
    assert slept == [ADVISED]
    assert devserver.request_count(r"POST /seafhttp/update-api/") == 2
    assert devserver.read_file(repo, "/a.md") == b"alpha\nsaved while throttled\n"
    assert m.engine.failure_book.get("a.md") is None
