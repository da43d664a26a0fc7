"""Every fault knob of devserver, seen through the daemon's client.

Each test sets one knob (``DevServer.inject_fault``, ``set_quota``,
``revoke_token``, ``plant_entry``) and shows that
``ohsync.engine.client.SeafileClient`` sees exactly that fault: the typed
error of ``ohsync.engine.errors`` with the injected status, or, for hostile
remote names, the entry left out of ``list_dir`` and reported in
``client.last_rejected``.  The client runs with ``retries=0`` unless a test
is about retrying, so one injected fault is one raised error.
"""
from __future__ import annotations

import json
import time
import urllib.request

import pytest

from ohsync.engine.client import SeafileClient
from ohsync.engine.errors import (
    AuthError,
    NetworkError,
    QuotaError,
    ServerError,
    ThrottledError,
)

DEVSERVER_USER = "user@example.edu.cn"  # the account of the ``devserver`` fixture (conftest.py)

# the client's name limit (engine/client/paths.py MAX_NAME_BYTES) is 255 bytes
LONG_NAME = "长" * 100  # 300 UTF-8 bytes


@pytest.fixture
def repo(devserver) -> str:
    """A library with two small files and a folder."""
    rid = devserver.create_library(DEVSERVER_USER, "Faults")
    devserver.put_file(rid, "/a.md", b"alpha\n")
    devserver.put_file(rid, "/sub/b.md", b"beta\n" * 1000)
    return rid


@pytest.fixture
def client(devserver):
    """A client that never retries (one fault = one error)."""
    c = SeafileClient(devserver.url, devserver.token_for(DEVSERVER_USER), retries=0, timeout=5.0)
    yield c
    c.close()


def _control(devserver, method: str, path: str, body: dict | None = None) -> dict:
    data = None if body is None else json.dumps(body).encode("utf-8")
    req = urllib.request.Request(devserver.url + "/_devserver" + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=5) as resp:
        return json.loads(resp.read())


# ---------------------------------------------------------------- 5xx statuses
@pytest.mark.parametrize("status", [500, 502, 503])
def test_seahub_5xx_is_server_error_with_that_status(devserver, client, repo, status):
    devserver.inject_fault("GET", r"/api2/repos/[-0-9a-f]{36}/dir/", status=status)
    with pytest.raises(ServerError) as exc:
        client.list_dir(repo, "/")
    assert exc.value.status == status
    assert exc.value.retryable
    assert [e.path for e in client.list_dir(repo, "/").entries] == ["/sub", "/a.md"]  # one use only


@pytest.mark.parametrize("status", [500, 502, 503])
def test_fileserver_5xx_is_server_error_with_that_status(devserver, client, repo, status):
    devserver.inject_fault("POST", r"/seafhttp/upload-api/", status=status)
    with pytest.raises(ServerError) as exc:
        client.upload(repo, "/new.md", b"new\n")
    assert exc.value.status == status
    assert "/new.md" not in devserver.tree(repo)  # answered instead of processed


def test_5xx_is_retried_and_counted(devserver, repo):
    devserver.inject_fault("GET", r"/api2/repos/[-0-9a-f]{36}/dir/", status=503, count=2)
    devserver.reset_counters()
    with SeafileClient(devserver.url, devserver.token_for(DEVSERVER_USER), retries=2,
                       sleep=lambda s: None) as c:
        assert [e.path for e in c.list_dir(repo, "/").entries] == ["/sub", "/a.md"]
    assert devserver.request_count("GET /api2/repos/{id}/dir/") == 3


# ---------------------------------------------------------------- 429
def test_429_retry_after_is_throttled_error_with_that_delay(devserver, client, repo):
    devserver.inject_fault("GET", r"/api2/repos/$", status=429, retry_after=7)
    with pytest.raises(ThrottledError) as exc:
        client.list_repos()
    assert exc.value.status == 429
    assert exc.value.retry_after == 7


def test_429_is_waited_out_as_the_server_asks(devserver, repo):
    devserver.inject_fault("GET", r"/api2/repos/$", status=429, retry_after=3)
    slept: list[float] = []
    with SeafileClient(devserver.url, devserver.token_for(DEVSERVER_USER), retries=1, sleep=slept.append) as c:
        assert [r.id for r in c.list_repos()] == [repo]
    assert slept == [3]


# ---------------------------------------------------------------- latency
def test_latency_delays_the_answer(devserver, client, repo):
    devserver.inject_fault("GET", r"/api2/repos/$", latency=0.4)
    t0 = time.monotonic()
    assert [r.id for r in client.list_repos()] == [repo]
    assert time.monotonic() - t0 >= 0.4


def test_latency_beyond_the_timeout_is_network_error(devserver, repo):
    devserver.inject_fault("GET", r"/api2/repos/$", latency=1.0)
    with (
        SeafileClient(devserver.url, devserver.token_for(DEVSERVER_USER), retries=0, timeout=0.3) as c,
        pytest.raises(NetworkError) as exc,
    ):
        c.list_repos()
    assert exc.value.status is None


# ---------------------------------------------------------------- dropped connections
def test_dropped_connection_is_network_error(devserver, client, repo):
    devserver.inject_fault("GET", r"/api2/repos/[-0-9a-f]{36}/dir/", drop=True)
    with pytest.raises(NetworkError):
        client.list_dir(repo, "/")


def test_download_dropped_mid_body_is_network_error(devserver, client, repo):
    devserver.inject_fault("GET", r"/seafhttp/files/", drop_after_bytes=1000)
    with pytest.raises(NetworkError) as exc:
        client.download_bytes(repo, "/sub/b.md")
    assert exc.value.status is None
    assert devserver.request_count("GET /seafhttp/files/{token}/{name}") == 1
    assert client.download_bytes(repo, "/sub/b.md")[0] == b"beta\n" * 1000  # one use only


def test_download_dropped_mid_body_is_retried_from_the_start(devserver, repo):
    devserver.inject_fault("GET", r"/seafhttp/files/", drop_after_bytes=10)
    with SeafileClient(devserver.url, devserver.token_for(DEVSERVER_USER), retries=1,
                       sleep=lambda s: None) as c:
        assert c.download_bytes(repo, "/sub/b.md")[0] == b"beta\n" * 1000


def test_upload_dropped_mid_body_is_network_error_and_commits_nothing(devserver, client, repo):
    head = devserver.head_commit(repo)
    devserver.inject_fault("POST", r"/seafhttp/upload-api/", drop_after_bytes=64 * 1024)
    with pytest.raises(NetworkError) as exc:
        client.upload(repo, "/big.bin", b"\x01" * (4 * 1024 * 1024))
    assert exc.value.status is None
    assert devserver.head_commit(repo) == head
    assert "/big.bin" not in devserver.tree(repo)


def test_update_dropped_mid_body_is_network_error_and_keeps_the_old_content(devserver, client, repo):
    devserver.inject_fault("POST", r"/seafhttp/update-api/", drop_after_bytes=0)
    with pytest.raises(NetworkError):
        client.update(repo, "/a.md", b"changed\n" * 100_000)
    assert devserver.read_file(repo, "/a.md") == b"alpha\n"


# ---------------------------------------------------------------- after processing
def test_status_after_processing_commits_the_upload_but_reports_the_error(devserver, client, repo):
    devserver.inject_fault("POST", r"/seafhttp/upload-api/", status=500, after_processing=True)
    with pytest.raises(ServerError) as exc:
        client.upload(repo, "/done.md", b"done\n")
    assert exc.value.status == 500
    assert devserver.read_file(repo, "/done.md") == b"done\n"


def test_drop_after_processing_commits_the_update_but_no_answer_arrives(devserver, client, repo):
    devserver.inject_fault("POST", r"/seafhttp/update-api/", drop=True, after_processing=True)
    with pytest.raises(NetworkError):
        client.update(repo, "/a.md", b"omega\n")
    assert devserver.read_file(repo, "/a.md") == b"omega\n"


# ---------------------------------------------------------------- quota, token
def test_quota_exhausted_is_quota_error_443(devserver, client, repo):
    devserver.set_quota(DEVSERVER_USER, 100)  # the library already holds more
    with pytest.raises(QuotaError) as exc:
        client.upload(repo, "/more.md", b"more\n")
    assert exc.value.status == 443
    assert "/more.md" not in devserver.tree(repo)
    with pytest.raises(QuotaError) as exc:
        client.update(repo, "/a.md", b"alpha, longer\n")
    assert exc.value.status == 443
    devserver.set_quota(DEVSERVER_USER, 0)  # unlimited again
    client.upload(repo, "/more.md", b"more\n")


def test_revoked_token_is_auth_error_401(devserver, client, repo):
    client.ping()
    devserver.revoke_token(devserver.token_for(DEVSERVER_USER))
    with pytest.raises(AuthError) as exc:
        client.list_repos()
    assert exc.value.status == 401
    with pytest.raises(AuthError):
        client.ping()


def test_control_endpoint_knobs(devserver, client, repo):
    """The same knobs set from another process through ``/_devserver/``."""
    _control(devserver, "POST", "/faults", {"method": "GET", "path_regex": "/seafhttp/files/",
                                            "drop_after_bytes": 5})
    assert _control(devserver, "GET", "/faults")[0]["drop_after_bytes"] == 5
    with pytest.raises(NetworkError):
        client.download_bytes(repo, "/sub/b.md")
    _control(devserver, "POST", "/faults", {"method": "GET", "path_regex": "/api2/repos/$", "status": 429,
                                            "retry_after": 2})
    with pytest.raises(ThrottledError) as exc:
        client.list_repos()
    assert exc.value.retry_after == 2
    _control(devserver, "POST", "/quota", {"email": DEVSERVER_USER, "total": 1})
    with pytest.raises(QuotaError):
        client.upload(repo, "/q.md", b"q")
    _control(devserver, "POST", f"/libraries/{repo}/plant", {"parent": "/", "name": "..", "text": "x"})
    client.list_dir(repo, "/")
    assert [p for p, _ in client.last_rejected] == ["/.."]
    _control(devserver, "POST", "/revoke-token", {"token": devserver.token_for(DEVSERVER_USER)})
    with pytest.raises(AuthError):
        client.list_repos()


# ---------------------------------------------------------------- hostile names
HOSTILE = {
    "dotdot": "..",
    "absolute": "/etc/passwd",
    "slash": "sub/../../escape.md",
    "long": LONG_NAME + ".md",
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.parametrize("as_dir", [False, True], ids=["file", "dir"])
def test_hostile_name_is_dropped_into_last_rejected(devserver, client, repo, kind, as_dir):
    raw = HOSTILE[kind]
    devserver.plant_entry(repo, "/sub", raw, None if as_dir else b"pwned\n")
    listing = client.list_dir(repo, "/sub")
    assert [e.path for e in listing.entries] == ["/sub/b.md"]
    assert [p for p, _ in client.last_rejected] == ["/sub/" + raw]
    # the recursive listing of the root does not let it through either
    listing = client.list_dir(repo, "/", recursive=True)
    assert sorted(e.path for e in listing.entries) == ["/a.md", "/sub", "/sub/b.md"]
    assert client.last_rejected


def test_hostile_names_are_on_the_wire_as_planted(devserver, repo):
    """devserver really lists the raw names (so the client test above is not vacuous)."""
    for raw in HOSTILE.values():
        devserver.plant_entry(repo, "/", raw, b"x")
    req = urllib.request.Request(f"{devserver.url}/api2/repos/{repo}/dir/?p=/",
                                 headers={"Authorization": "Token " + devserver.token_for(DEVSERVER_USER)})
    with urllib.request.urlopen(req, timeout=5) as resp:
        names = {e["name"] for e in json.loads(resp.read())}
    assert set(HOSTILE.values()) <= names
    assert len(LONG_NAME.encode("utf-8")) == 300


def test_percent_encoded_slash_is_never_decoded_into_a_path(devserver, client, repo):
    """A name with ``/`` percent-encoded is a literal (harmless) name: it is either
    rejected or kept verbatim, never turned into a path with more components."""
    raw = "..%2F..%2Fetc%2Fpasswd"
    devserver.plant_entry(repo, "/sub", raw, b"x")
    listing = client.list_dir(repo, "/sub")
    kept = [e.path for e in listing.entries if e.path != "/sub/b.md"]
    rejected = [p for p, _ in client.last_rejected]
    assert (kept, rejected) in ((["/sub/" + raw], []), ([], ["/sub/" + raw]))


# ---------------------------------------------------------------- docs guard
def test_every_endpoint_names_its_upstream_source():
    """devserver/routes.py SOURCES documents each endpoint's seahub / fileserver origin."""
    from ohsync.devserver import routes

    templates = {template for _methods, template, _handler, _auth in routes.ROUTES}
    assert templates == set(routes.SOURCES)
    assert all(("seahub/" in src or "fileserver/" in src) and ".py" in src or ".go" in src
               for src in routes.SOURCES.values())
