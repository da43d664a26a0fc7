"""Tests of the Seafile client (``ohsync.engine.client``).

Unit tests run the client against ``httpx.MockTransport`` handlers that
answer like the real server (shapes from ``tests/data/seafile-transcripts``);
integration tests at the end run it against devserver.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable
from urllib.parse import parse_qs

import httpx
import pytest

from ohsync.engine.client import SeafileClient
from ohsync.engine.errors import (
    AuthError,
    LocalError,
    NetworkError,
    NotFoundError,
    ProtocolError,
    QuotaError,
    RemoteOperationError,
    ServerError,
    ThrottledError,
    TwoFactorRequired,
)
from ohsync.engine.models import EMPTY_ID

SERVER = "https://cloud.example.edu"
TOKEN = "3f9a0c1e5b7d29e4c6a8f0b2d4e6a8c0e2f4a6b8"
REPO = "0b8e4c2a-7d51-4a3e-9f60-2c1d8e5b7a90"
FID = "4226e5b3d7da1a4575241f9501f9882aee9b5ea9"
DID = "aa01bb02cc03dd04ee05ff06aa07bb08cc09dd10"
HEAD = "9c1f0e7b3a5d2c4e6f8a0b1c2d3e4f5a6b7c8d9e"

Handler = Callable[[httpx.Request], httpx.Response]


class FakeServer:
    """Routes ``(METHOD, path)`` to handlers and records every request."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Handler] = {}
        self.requests: list[httpx.Request] = []

    def on(self, method: str, path: str, handler: Handler | httpx.Response) -> None:
        self.routes[(method, path)] = handler if callable(handler) else (lambda _r, h=handler: h)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        request.read()
        self.requests.append(request)
        handler = self.routes.get((request.method, request.url.path))
        if handler is None:
            return httpx.Response(404, html="<html>Page not found</html>")
        return handler(request)

    def calls(self, method: str, path: str) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == method and r.url.path == path]


def seq(*responses: httpx.Response | Exception) -> Handler:
    """A handler answering each response (or raising each exception) in turn."""
    items = list(responses)

    def handler(request: httpx.Request) -> httpx.Response:
        item = items.pop(0) if len(items) > 1 else items[0]
        if isinstance(item, Exception):
            raise item
        return item

    return handler


def json_resp(status: int, body: object, **headers: str) -> httpx.Response:
    return httpx.Response(status, content=json.dumps(body).encode(), headers={
        "Content-Type": "application/json", **headers})


def fs_error(status: int, message: str) -> httpx.Response:
    """A Go file-server error: not strict JSON (raw newline inside the string)."""
    body = '{"error": "' + message + '\n"}\n'
    return httpx.Response(status, content=body.encode(), headers={"Content-Type": "text/plain; charset=utf-8"})


@pytest.fixture
def fake() -> FakeServer:
    return FakeServer()


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def client(fake: FakeServer, sleeps: list[float]) -> SeafileClient:
    c = SeafileClient(SERVER, TOKEN, transport=httpx.MockTransport(fake), sleep=sleeps.append)
    yield c
    c.close()


def form_of(request: httpx.Request) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(request.content.decode()).items()}


DIR_PATH = f"/api2/repos/{REPO}/dir/"
FILE_PATH = f"/api2/repos/{REPO}/file/"


# -- error mapping --------------------------------------------------------------

@pytest.mark.parametrize(
    ("status", "body", "exc_type"),
    [
        (401, {"detail": "Invalid token"}, AuthError),
        (403, {"detail": "Authentication credentials were not provided."}, AuthError),
        (403, {"error_msg": "Permission denied."}, RemoteOperationError),
        (404, {"error_msg": "Library not found."}, NotFoundError),
        (409, {"error_msg": "The new name is the same to the old"}, RemoteOperationError),
        (400, {"error_msg": "p invalid."}, RemoteOperationError),
        (440, {"error_msg": "Invalid filename."}, RemoteOperationError),
        (443, {"error_msg": "Out of quota."}, QuotaError),
        (447, {"error_msg": "Too many files in library."}, QuotaError),
        (500, {"error_msg": "Internal Server Error"}, ServerError),
        (502, "Bad gateway", ServerError),
        (520, {"error_msg": "Failed to list dir."}, ServerError),
        (301, "moved", ProtocolError),
    ],
)
def test_status_mapping(fake, client, status, body, exc_type):
    fake.on("GET", f"/api2/repos/{REPO}/", json_resp(status, body, Location=f"{SERVER}/elsewhere/"))
    with pytest.raises(exc_type) as info:
        client.repo_info(REPO)
    assert info.value.status == status
    assert TOKEN not in str(info.value)


def test_401_message_tells_to_login(fake, client):
    fake.on("GET", "/api2/auth/ping/", json_resp(401, {"detail": "Invalid token"}))
    with pytest.raises(AuthError, match=r"ohsync login"):
        client.ping()
    assert len(fake.requests) == 1  # auth errors are not retried


def test_ping_sends_token_header_and_trailing_slash(fake, client):
    fake.on("GET", "/api2/auth/ping/", json_resp(200, "pong"))
    client.ping()
    request = fake.requests[0]
    assert request.headers["Authorization"] == f"Token {TOKEN}"
    assert str(request.url) == f"{SERVER}/api2/auth/ping/"


def test_ping_without_token_is_auth_error(fake):
    fake.on("GET", "/api2/auth/ping/",
            json_resp(403, {"detail": "Authentication credentials were not provided."}))
    with SeafileClient(SERVER, None, transport=httpx.MockTransport(fake)) as c, pytest.raises(AuthError):
        c.ping()
    assert "Authorization" not in fake.requests[0].headers


def test_fileserver_error_body_is_not_strict_json(fake, client):
    fake.on("GET", f"/api2/repos/{REPO}/upload-link/", json_resp(200, "/seafhttp/upload-api/tok"))
    fake.on("POST", "/seafhttp/upload-api/tok", fs_error(443, "Out of quota."))
    with pytest.raises(QuotaError, match="Out of quota.") as info:
        client.upload(REPO, "/a.md", b"x")
    assert info.value.status == 443
    assert "\n" not in str(info.value)


def test_fileserver_442_is_quota_error(fake, client):
    fake.on("GET", f"/api2/repos/{REPO}/upload-link/", json_resp(200, "/seafhttp/upload-api/tok"))
    fake.on("POST", "/seafhttp/upload-api/tok", fs_error(442, "File size is too large."))
    with pytest.raises(QuotaError, match="larger"):
        client.upload(REPO, "/big.bin", b"x")


def test_fileserver_gc_conflict_is_server_error_and_upload_not_retried(fake, client):
    fake.on("GET", f"/api2/repos/{REPO}/upload-link/", json_resp(200, "/seafhttp/upload-api/tok"))
    fake.on("POST", "/seafhttp/upload-api/tok", fs_error(409, "GC Conflict."))
    with pytest.raises(ServerError, match="GC conflict"):
        client.upload(REPO, "/a.md", b"x")
    assert len(fake.calls("POST", "/seafhttp/upload-api/tok")) == 1


def test_garbage_body_is_protocol_error(fake, client):
    fake.on("GET", "/api2/repos/", httpx.Response(200, content=b"\xff\xfe not json"))
    with pytest.raises(ProtocolError):
        client.list_repos()


def test_html_error_page_is_summarized(fake, client):
    fake.on("GET", "/api2/repos/", httpx.Response(500, html="<html>" + "x" * 5000 + "</html>"))
    with pytest.raises(ServerError) as info:
        client.list_repos()
    assert "HTML" in str(info.value) and len(str(info.value)) < 400


@pytest.mark.parametrize(
    "body",
    [
        {"not": "a list"},
        [{"type": "repo", "name": "x"}],  # no id
        [{"id": "NOT-A-UUID", "name": "x", "head_commit_id": HEAD}],
        [{"id": REPO, "name": "x", "head_commit_id": "short"}],
        [{"id": REPO, "name": "x", "head_commit_id": HEAD, "mtime": "soon"}],
    ],
)
def test_wrong_shape_is_protocol_error(fake, client, body):
    fake.on("GET", "/api2/repos/", json_resp(200, body))
    with pytest.raises(ProtocolError):
        client.list_repos()


def test_dropped_connection_is_retried_then_network_error(fake, client, sleeps):
    fake.on("GET", "/api2/repos/", seq(httpx.RemoteProtocolError("peer closed connection")))
    with pytest.raises(NetworkError) as info:
        client.list_repos()
    assert isinstance(info.value.__cause__, httpx.RemoteProtocolError)
    assert len(fake.requests) == 4  # 1 + retries=3
    assert sleeps == [0.5, 1.0, 2.0]


def test_timeout_and_connect_errors_are_network_errors(fake, client):
    fake.on("GET", "/api2/repos/", seq(httpx.ConnectTimeout("slow"), httpx.ConnectError("refused"),
                                       json_resp(200, [])))
    assert client.list_repos() == []
    assert len(fake.requests) == 3


def test_backoff_is_capped(fake, sleeps):
    fake.on("GET", "/api2/repos/", json_resp(503, "busy"))
    with (
        SeafileClient(SERVER, TOKEN, transport=httpx.MockTransport(fake), retries=6,
                      retry_base=1.0, retry_cap=4.0, sleep=sleeps.append) as c,
        pytest.raises(ServerError),
    ):
        c.list_repos()
    assert sleeps == [1.0, 2.0, 4.0, 4.0, 4.0, 4.0]


def test_429_retry_after_is_honoured(fake, client, sleeps):
    throttled = json_resp(429, {"detail": "Request was throttled. Expected available in 3 seconds."},
                          **{"Retry-After": "3"})
    fake.on("GET", "/api2/repos/", seq(throttled, json_resp(200, [])))
    assert client.list_repos() == []
    assert sleeps == [3.0]


def test_429_without_header_defaults_to_one_second(fake, client, sleeps):
    fake.on("GET", "/api2/repos/", seq(json_resp(429, {"detail": "Request was throttled."}),
                                       json_resp(200, [])))
    client.list_repos()
    assert sleeps == [1.0]


def test_429_with_long_wait_is_raised_for_the_scheduler(fake, client, sleeps):
    fake.on("GET", "/api2/repos/", json_resp(429, {"detail": "x"}, **{"Retry-After": "600"}))
    with pytest.raises(ThrottledError) as info:
        client.list_repos()
    assert info.value.retry_after == 600 and sleeps == []


def test_retries_zero_means_one_attempt(fake, sleeps):
    fake.on("GET", "/api2/repos/", json_resp(500, "x"))
    with (
        SeafileClient(SERVER, TOKEN, transport=httpx.MockTransport(fake), retries=0,
                      sleep=sleeps.append) as c,
        pytest.raises(ServerError),
    ):
        c.list_repos()
    assert len(fake.requests) == 1


def test_token_never_in_messages_or_repr(fake, client):
    echo = json_resp(400, {"error_msg": f"bad token {TOKEN} here"})
    fake.on("GET", "/api2/repos/", echo)
    with pytest.raises(RemoteOperationError) as info:
        client.list_repos()
    assert TOKEN not in str(info.value) and TOKEN not in repr(info.value)
    assert TOKEN not in repr(client)
    fake.on("GET", "/api2/repos/", json_resp(500, {"error_msg": TOKEN}))
    with pytest.raises(ServerError) as info:
        client.list_repos()
    assert TOKEN not in str(info.value)


def test_on_request_counts_every_request(fake):
    seen: list[tuple[str, str]] = []
    fake.on("GET", "/api2/repos/", seq(json_resp(500, "x"), json_resp(200, [])))
    with SeafileClient(SERVER, TOKEN, transport=httpx.MockTransport(fake),
                       on_request=lambda m, u: seen.append((m, u)), sleep=lambda s: None) as c:
        c.list_repos()
    assert seen == [("GET", f"{SERVER}/api2/repos/")] * 2


# -- login -----------------------------------------------------------------------

def test_obtain_token(fake):
    fake.on("POST", "/api2/auth-token/", json_resp(200, {"token": TOKEN}))
    token = SeafileClient.obtain_token(SERVER, "u@example.edu", "pw", transport=httpx.MockTransport(fake))
    assert token == TOKEN
    assert form_of(fake.requests[0]) == {"username": "u@example.edu", "password": "pw"}


def test_obtain_token_wrong_password(fake):
    fake.on("POST", "/api2/auth-token/",
            json_resp(400, {"non_field_errors": ["Unable to login with provided credentials."]}))
    with pytest.raises(AuthError, match="did not accept this username and password") as info:
        SeafileClient.obtain_token(SERVER, "u", "hunter2", transport=httpx.MockTransport(fake))
    assert "hunter2" not in str(info.value)


def test_obtain_token_two_factor(fake):
    needed = json_resp(400, {"non_field_errors": ["Two factor auth token is missing."]},
                       **{"X-Seafile-OTP": "required"})
    fake.on("POST", "/api2/auth-token/", needed)
    with pytest.raises(TwoFactorRequired):
        SeafileClient.obtain_token(SERVER, "u", "pw", transport=httpx.MockTransport(fake))
    fake.on("POST", "/api2/auth-token/", json_resp(200, {"token": TOKEN}))
    assert SeafileClient.obtain_token(SERVER, "u", "pw", otp="123456",
                                      transport=httpx.MockTransport(fake)) == TOKEN
    assert fake.requests[-1].headers["X-SEAFILE-OTP"] == "123456"


def test_obtain_token_throttled(fake):
    fake.on("POST", "/api2/auth-token/", json_resp(429, {"detail": "x"}, **{"Retry-After": "12"}))
    with pytest.raises(ThrottledError) as info:
        SeafileClient.obtain_token(SERVER, "u", "pw", transport=httpx.MockTransport(fake))
    assert info.value.retry_after == 12


# -- account and libraries ----------------------------------------------------------

def test_account_info_unlimited_quota(fake, client):
    fake.on("GET", "/api2/account/info/", json_resp(200, {
        "email": "u7e3@auth.local", "name": "Ada", "contact_email": "", "total": -2, "usage": 10}))
    info = client.account_info()
    assert info.total is None and info.usage == 10 and info.free is None


def test_list_repos_and_repo_info(fake, client):
    fake.on("GET", "/api2/repos/", json_resp(200, [
        {"type": "repo", "id": REPO, "name": "OH-Memory", "mtime": 1716212345, "size": 5,
         "encrypted": False, "permission": "rw", "root": "", "head_commit_id": HEAD}]))
    fake.on("GET", f"/api2/repos/{REPO}/", json_resp(200, {
        "type": "repo", "id": REPO, "owner": "self", "name": "OH-Memory", "mtime": 1, "size": 5,
        "encrypted": False, "root": DID, "permission": "rw", "head_commit_id": HEAD}))
    [repo] = client.list_repos()
    assert (repo.id, repo.name, repo.head_commit_id, repo.root) == (REPO, "OH-Memory", HEAD, "")
    info = client.repo_info(REPO.upper())  # ids are lower-cased before use
    assert info.root == DID and info.head_commit_id == HEAD


def test_create_repo_uses_form_and_parses_download_info(fake, client):
    fake.on("POST", "/api2/repos/", json_resp(200, {
        "repo_id": REPO, "repo_name": "OH-Memory", "repo_desc": "", "repo_size": 0,
        "mtime": 1716212000, "encrypted": "", "head_commit_id": HEAD, "permission": "rw"}))
    repo = client.create_repo("OH-Memory", "memory")
    assert repo.id == REPO and repo.encrypted is False
    assert form_of(fake.requests[0]) == {"name": "OH-Memory", "desc": "memory"}


def test_invalid_repo_id_is_refused_without_request(fake, client):
    with pytest.raises(NotFoundError):
        client.repo_info("../../etc")
    assert fake.requests == []


# -- listings -------------------------------------------------------------------------

def listing(entries: list[dict], oid: str = DID) -> httpx.Response:
    return json_resp(200, entries, oid=oid, dir_perm="rw")


def file_entry(name: str, fid: str = FID, **extra: object) -> dict:
    return {"type": "file", "name": name, "id": fid, "mtime": 1716212345, "size": 6, **extra}


def dir_entry(name: str, did: str = EMPTY_ID, **extra: object) -> dict:
    return {"type": "dir", "name": name, "id": did, "mtime": 1716210000, **extra}


def test_list_dir_paths_and_oid(fake, client):
    fake.on("GET", DIR_PATH, listing([dir_entry("Files", DID), file_entry("index.md")]))
    result = client.list_dir(REPO, "/x/")
    assert result.path == "/x" and result.oid == DID and not result.uptodate
    assert [(e.path, e.is_dir, e.size) for e in result.entries] == [
        ("/x/Files", True, 0), ("/x/index.md", False, 6)]
    assert fake.requests[0].url.params["p"] == "/x"


def test_list_dir_uptodate(fake, client):
    fake.on("GET", DIR_PATH, json_resp(200, "uptodate", oid=DID))
    result = client.list_dir(REPO, "/", oid=DID)
    assert result.uptodate and result.entries == () and result.oid == DID
    assert fake.requests[0].url.params["oid"] == DID


def test_list_dir_missing_is_not_found(fake, client):
    fake.on("GET", DIR_PATH, json_resp(404, {"error_msg": "Folder /nope/ not found."}))
    with pytest.raises(NotFoundError):
        client.list_dir(REPO, "/nope")
    assert len(fake.requests) == 1


def test_list_dir_recursive_parent_dir_quirks(fake, client):
    fake.on("GET", DIR_PATH, listing([
        dir_entry("y", DID, parent_dir="/x/"),
        dir_entry("z", DID, parent_dir="/x/y"),
        file_entry("n.txt", parent_dir="/x/y/z"),
        file_entry("top.md", parent_dir="/x/"),
    ]))
    result = client.list_dir(REPO, "/x", recursive=True)
    assert [e.path for e in result.entries] == ["/x/y", "/x/y/z", "/x/y/z/n.txt", "/x/top.md"]
    assert fake.requests[0].url.params["recursive"] == "1"
    assert client.last_rejected == []


def test_list_dir_recursive_from_root(fake, client):
    fake.on("GET", DIR_PATH, listing([dir_entry("d", DID, parent_dir="/"),
                                      file_entry("a", parent_dir="/d")]))
    assert [e.path for e in client.list_dir(REPO, "/", recursive=True).entries] == ["/d", "/d/a"]


def test_list_dir_rejects_hostile_names(fake, client):
    fake.on("GET", DIR_PATH, listing([
        dir_entry(".."), dir_entry("."), file_entry("a/b"), file_entry("nul\x00"),
        file_entry("é" * 128), file_entry(""), file_entry("ok.md"), file_entry("ok.md"),
    ]))
    result = client.list_dir(REPO, "/")
    assert [e.path for e in result.entries] == ["/ok.md"]
    reasons = dict(client.last_rejected)
    assert len(client.last_rejected) == 7
    assert "reserved" in reasons["/.."] and "255" in reasons["/" + "é" * 128]
    assert reasons["/ok.md"] == "listed twice"
    fake.on("GET", DIR_PATH, listing([file_entry("fine")]))
    client.list_dir(REPO, "/")
    assert client.last_rejected == []  # reset per call


def test_list_dir_recursive_rejects_escaping_parents(fake, client):
    fake.on("GET", DIR_PATH, listing([
        file_entry("passwd", parent_dir="/etc"),          # outside /x
        file_entry("a", parent_dir="/x/../etc"),          # traversal
        file_entry("b", parent_dir="relative"),           # not absolute
        dir_entry("..", parent_dir="/x/"),                # hostile dir ...
        file_entry("c", parent_dir="/x/.."),              # ... and its child
        file_entry("d", parent_dir="/x/ghost"),           # parent never listed
        file_entry("good", parent_dir="/x/"),
    ]))
    result = client.list_dir(REPO, "/x", recursive=True)
    assert [e.path for e in result.entries] == ["/x/good"]
    assert len(client.last_rejected) == 6


@pytest.mark.parametrize("entry", [
    "not an object", {"type": "file", "name": "a"}, {"type": "link", "name": "a", "id": FID},
    {"type": "file", "name": "a", "id": "zz"}, {"type": "file", "name": "a", "id": FID, "size": "big"},
])
def test_list_dir_wrong_shape(fake, client, entry):
    fake.on("GET", DIR_PATH, listing([entry]))
    with pytest.raises(ProtocolError):
        client.list_dir(REPO, "/")


def test_list_dir_without_oid_header_is_protocol_error(fake, client):
    fake.on("GET", DIR_PATH, json_resp(200, []))
    with pytest.raises(ProtocolError):
        client.list_dir(REPO, "/")


def test_caller_paths_are_validated(client):
    with pytest.raises(ValueError):
        client.list_dir(REPO, "/a/../b")


# -- mkdir ----------------------------------------------------------------------------

def test_mkdir_existing_folder_is_noop(fake, client):
    fake.on("GET", DIR_PATH, listing([dir_entry("d1")]))
    client.mkdir(REPO, "/d1")
    assert fake.calls("POST", DIR_PATH) == []


def test_mkdir_creates_with_parents(fake, client):
    fake.on("GET", DIR_PATH, json_resp(404, {"error_msg": "Folder /x/y/ not found."}))
    fake.on("POST", DIR_PATH, httpx.Response(
        201, json="success", headers={"Location": f"{SERVER}{DIR_PATH}?p=/x/y/z"}))
    client.mkdir(REPO, "/x/y/z")
    [post] = fake.calls("POST", DIR_PATH)
    assert post.url.params["p"] == "/x/y/z"
    assert form_of(post) == {"operation": "mkdir", "create_parents": "true"}


def test_mkdir_root_level_double_slash_location(fake, client):
    fake.on("GET", DIR_PATH, listing([]))
    fake.on("POST", DIR_PATH, httpx.Response(
        201, json="success", headers={"Location": f"{SERVER}{DIR_PATH}?p=//d1"}))
    client.mkdir(REPO, "/d1", parents=False)
    assert "create_parents" not in form_of(fake.calls("POST", DIR_PATH)[0])


def test_mkdir_without_parents_missing_parent(fake, client):
    fake.on("GET", DIR_PATH, json_resp(404, {"error_msg": "Folder /x/ not found."}))
    with pytest.raises(NotFoundError):
        client.mkdir(REPO, "/x/y", parents=False)
    assert fake.calls("POST", DIR_PATH) == []


def test_mkdir_file_in_the_way(fake, client):
    fake.on("GET", DIR_PATH, listing([file_entry("d1")]))
    with pytest.raises(RemoteOperationError, match="file"):
        client.mkdir(REPO, "/d1")


def test_mkdir_auto_renamed_by_race_is_reported(fake, client):
    fake.on("GET", DIR_PATH, listing([]))
    fake.on("POST", DIR_PATH, httpx.Response(
        201, json="success", headers={"Location": f"{SERVER}{DIR_PATH}?p=//d1%20%281%29"}))
    with pytest.raises(RemoteOperationError, match=r"d1 \(1\)"):
        client.mkdir(REPO, "/d1", parents=False)


# -- files ----------------------------------------------------------------------------

def test_file_detail(fake, client):
    fake.on("GET", f"{FILE_PATH}detail/", json_resp(200, {
        "type": "file", "id": FID, "name": "a.md", "mtime": 1716212345, "size": 6}))
    entry = client.file_detail(REPO, "/Files/a.md")
    assert (entry.path, entry.id, entry.size, entry.mtime) == ("/Files/a.md", FID, 6, 1716212345)


def serve_download(fake: FakeServer, content: bytes, *, link: str = "/seafhttp/files/tok1/a.md") -> None:
    fake.on("GET", FILE_PATH, json_resp(200, link, oid=FID))
    fake.on("GET", httpx.URL(link).path if link.startswith("http") else link.split("?")[0],
            httpx.Response(200, content=content, headers={"Content-Type": "text/plain; charset=gbk"}))


def test_download_streams_with_progress_and_relative_link(fake, client):
    content = b"x" * (2 * 1024 * 1024 + 5)
    serve_download(fake, content)
    dest = io.BytesIO()
    progress: list[tuple[int, int]] = []
    assert client.download(REPO, "/a.md", dest, progress=lambda d, t: progress.append((d, t))) == FID
    assert dest.getvalue() == content
    assert progress[-1] == (len(content), len(content)) and len(progress) == 3
    fs_request = fake.calls("GET", "/seafhttp/files/tok1/a.md")[0]
    assert str(fs_request.url).startswith(SERVER)
    assert "Authorization" not in fs_request.headers  # the token stays with seahub
    assert "If-Modified-Since" not in fs_request.headers


def test_download_absolute_link_on_other_port(fake, client):
    serve_download(fake, b"hello\n", link="http://fs.example.edu:8082/files/tok/a.md")
    assert client.download_bytes(REPO, "/a.md") == (b"hello\n", FID)


def test_download_retries_with_a_fresh_link(fake, client):
    links = iter(["/seafhttp/files/t1/a", "/seafhttp/files/t2/a"])
    fake.on("GET", FILE_PATH, lambda r: json_resp(200, next(links), oid=FID))
    fake.on("GET", "/seafhttp/files/t1/a", httpx.Response(403, text="Access token not found\n"))
    fake.on("GET", "/seafhttp/files/t2/a", httpx.Response(200, content=b"data"))
    assert client.download_bytes(REPO, "/a") == (b"data", FID)
    assert len(fake.calls("GET", FILE_PATH)) == 2


def test_download_rewinds_dest_between_attempts(fake, client):
    links = iter(["/seafhttp/files/t1/a", "/seafhttp/files/t2/a"])
    fake.on("GET", FILE_PATH, lambda r: json_resp(200, next(links), oid=FID))
    # t1 promises 10 bytes and sends 4: a truncated transfer
    fake.on("GET", "/seafhttp/files/t1/a",
            httpx.Response(200, content=b"part", headers={"Content-Length": "10"}))
    fake.on("GET", "/seafhttp/files/t2/a", httpx.Response(200, content=b"0123456789"))
    dest = io.BytesIO(b"HDR")
    dest.seek(3)
    client.download(REPO, "/a", dest)
    assert dest.getvalue() == b"HDR0123456789"


def test_download_missing_file(fake, client):
    fake.on("GET", FILE_PATH, json_resp(404, {"error_msg": "File not found"}))
    with pytest.raises(NotFoundError):
        client.download_bytes(REPO, "/nope")


def test_download_write_failure_is_local_error(fake, client):
    serve_download(fake, b"data")

    class Full(io.RawIOBase):
        def writable(self) -> bool:
            return True

        def write(self, b):  # type: ignore[override]
            raise OSError(28, "No space left on device")

    with pytest.raises(LocalError, match="No space left"):
        client.download(REPO, "/a.md", Full())


def upload_server(fake: FakeServer, answer: httpx.Response, link: str = "/seafhttp/upload-api/tok") -> None:
    fake.on("GET", f"/api2/repos/{REPO}/upload-link/", json_resp(200, link))
    fake.on("POST", link.split("?")[0], answer)


def multipart_fields(request: httpx.Request) -> dict[str, str]:
    """Fields of a multipart body (enough for these tests)."""
    boundary = request.headers["Content-Type"].split("boundary=")[1].encode()
    fields = {}
    for part in request.content.split(b"--" + boundary)[1:-1]:
        head, _, body = part.partition(b"\r\n\r\n")
        name = re.search(rb'name="([^"]*)"', head).group(1).decode()
        filename = re.search(rb'filename="([^"]*)"', head)
        fields[name] = body[:-2].decode() if not filename else f"{filename.group(1).decode()}:{body[:-2].decode()}"
    return fields


def test_upload_new_file(fake, client):
    upload_server(fake, json_resp(200, [{"id": FID, "name": "a (1).md", "size": 6}]))
    result = client.upload(REPO, "/Files/a.md", b"hello\n", mtime=1614834367)
    assert (result.path, result.id, result.size) == ("/Files/a (1).md", FID, 6)
    link_req = fake.calls("GET", f"/api2/repos/{REPO}/upload-link/")[0]
    assert link_req.url.params["p"] == "/Files" and "replace" not in link_req.url.params
    post = fake.calls("POST", "/seafhttp/upload-api/tok")[0]
    assert post.url.params["ret-json"] == "1"
    assert "Authorization" not in post.headers
    assert multipart_fields(post) == {"parent_dir": "/Files", "replace": "0",
                                      "last_modify": "2021-03-04T05:06:07Z", "file": "a.md:hello\n"}


def test_upload_replace_and_file_object_and_existing_query(fake, client):
    upload_server(fake, json_resp(200, [{"id": FID, "name": "a.md", "size": 6}]),
                  link="/seafhttp/upload-api/tok?from=api")
    client.upload(REPO, "/a.md", io.BytesIO(b"hello\n"), replace=True)
    post = fake.requests[-1]
    assert post.url.params["from"] == "api" and post.url.params["ret-json"] == "1"
    assert multipart_fields(post)["replace"] == "1"


@pytest.mark.parametrize("name", ['q"uote.txt', "back\\slash", "tab\there", "..", "x" * 256])
def test_upload_refuses_names_the_form_cannot_carry(fake, client, name):
    with pytest.raises(RemoteOperationError):
        client.upload(REPO, "/" + name if name != ".." else "/a/..", b"x")
    assert fake.requests == []


def test_upload_refuses_unsafe_stored_name(fake, client):
    upload_server(fake, json_resp(200, [{"id": FID, "name": "../evil", "size": 6}]))
    with pytest.raises(ProtocolError):
        client.upload(REPO, "/a.md", b"x")


def test_upload_link_missing_folder(fake, client):
    fake.on("GET", f"/api2/repos/{REPO}/upload-link/", json_resp(404, {"error_msg": "Folder /x not found."}))
    with pytest.raises(NotFoundError):
        client.upload(REPO, "/x/a.md", b"x")


def test_update_bare_id(fake, client):
    fake.on("GET", f"/api2/repos/{REPO}/update-link/", json_resp(200, "/seafhttp/update-api/tok"))
    fake.on("POST", "/seafhttp/update-api/tok", httpx.Response(200, text=FID))
    result = client.update(REPO, "/Files/a.md", io.BytesIO(b"hello\n"))
    assert (result.path, result.id, result.size) == ("/Files/a.md", FID, 6)
    post = fake.requests[-1]
    assert multipart_fields(post)["target_file"] == "/Files/a.md"
    assert fake.requests[0].url.params["p"] == "/Files"


def test_update_quoted_id_and_missing_target(fake, client):
    fake.on("GET", f"/api2/repos/{REPO}/update-link/", json_resp(200, "/seafhttp/update-api/tok"))
    fake.on("POST", "/seafhttp/update-api/tok", httpx.Response(200, text=f'"{FID}"'))
    assert client.update(REPO, "/a.md", b"x").id == FID
    fake.on("POST", "/seafhttp/update-api/tok", fs_error(441, "File does not exist."))
    with pytest.raises(NotFoundError):
        client.update(REPO, "/a.md", b"x")


def test_update_garbage_answer(fake, client):
    fake.on("GET", f"/api2/repos/{REPO}/update-link/", json_resp(200, "/seafhttp/update-api/tok"))
    fake.on("POST", "/seafhttp/update-api/tok", httpx.Response(200, text="<html>oops</html>"))
    with pytest.raises(ProtocolError):
        client.update(REPO, "/a.md", b"x")


def test_delete(fake, client):
    fake.on("DELETE", FILE_PATH, json_resp(200, "success"))
    client.delete(REPO, "/Files/old dir")
    assert fake.requests[0].url.params["p"] == "/Files/old dir"
    with pytest.raises(ValueError):
        client.delete(REPO, "/")


def test_delete_not_retried(fake, client):
    fake.on("DELETE", FILE_PATH, json_resp(500, "x"))
    with pytest.raises(ServerError):
        client.delete(REPO, "/a")
    assert len(fake.requests) == 1


def test_rename_file_301_location(fake, client):
    fake.on("POST", FILE_PATH, httpx.Response(
        301, json="success", headers={"Location": f"{SERVER}{FILE_PATH}?p=//b%20%281%29.txt"}))
    assert client.rename(REPO, "/a.txt", "b.txt") == "/b (1).txt"
    assert form_of(fake.requests[0]) == {"operation": "rename", "newname": "b.txt"}
    assert len(fake.requests) == 1  # the 301 is not followed


def test_rename_same_name_is_noop_and_missing_is_not_found(fake, client):
    assert client.rename(REPO, "/a.txt", "a.txt") == "/a.txt"
    fake.on("POST", FILE_PATH, json_resp(520, {"error_msg": "Failed to rename file: file does not exist"}))
    with pytest.raises(NotFoundError):
        client.rename(REPO, "/nope.txt", "n.txt")
    with pytest.raises(RemoteOperationError):
        client.rename(REPO, "/a.txt", "x/y")


def test_rename_folder_clash(fake, client):
    listings = iter([listing([dir_entry("rn1"), dir_entry("rn2")]),
                     listing([dir_entry("rn2"), dir_entry("rn2 (1)")])])
    fake.on("GET", DIR_PATH, lambda r: next(listings))
    fake.on("POST", DIR_PATH, json_resp(200, "success"))
    assert client.rename(REPO, "/rn1", "rn2", is_dir=True) == "/rn2 (1)"


def test_move_file_301_body(fake, client):
    fake.on("POST", FILE_PATH, json_resp(
        301, {"repo_id": REPO, "parent_dir": "/x/", "obj_name": "a2 (1).txt"},
        Location=f"{SERVER}{FILE_PATH}?p=/x/a2%20%281%29.txt"))
    assert client.move(REPO, "/a2.txt", "/x/") == "/x/a2 (1).txt"
    assert form_of(fake.requests[0]) == {"operation": "move", "dst_repo": REPO, "dst_dir": "/x"}


def test_move_into_same_folder_sends_nothing(fake, client):
    assert client.move(REPO, "/x/a.txt", "/x") == "/x/a.txt"
    assert fake.requests == []


def test_move_folder_uses_batch_move(fake, client):
    fake.on("GET", DIR_PATH, listing([]))
    fake.on("POST", "/api/v2.1/repos/sync-batch-move-item/", json_resp(200, {"success": True}))
    assert client.move(REPO, "/d2", "/x", is_dir=True) == "/x/d2"
    body = json.loads(fake.calls("POST", "/api/v2.1/repos/sync-batch-move-item/")[0].content)
    assert body == {"src_repo_id": REPO, "src_parent_dir": "/", "src_dirents": ["d2"],
                    "dst_repo_id": REPO, "dst_parent_dir": "/x"}


# -- hardening ------------------------------------------------------------------------

def test_internal_listings_do_not_clobber_last_rejected(fake, client):
    fake.on("GET", DIR_PATH, listing([file_entry(".."), dir_entry("d1")]))
    client.list_dir(REPO, "/")
    assert [p for p, _ in client.last_rejected] == ["/.."]
    client.mkdir(REPO, "/d1")  # lists / internally
    assert [p for p, _ in client.last_rejected] == ["/.."]


def test_rename_folder_with_dot_clash_uses_whatever_appeared(fake, client):
    listings = iter([listing([dir_entry("v1"), dir_entry("v1.2")]),
                     listing([dir_entry("v1.2"), dir_entry("v1.2 (1)")])])
    fake.on("GET", DIR_PATH, lambda r: next(listings))
    fake.on("POST", DIR_PATH, json_resp(200, "success"))
    assert client.rename(REPO, "/v1", "v1.2", is_dir=True) == "/v1.2 (1)"


def test_retry_after_http_date(fake, client, sleeps):
    import email.utils
    import time as _time
    when = email.utils.formatdate(_time.time() + 5, usegmt=True)
    fake.on("GET", "/api2/repos/", seq(json_resp(429, {}, **{"Retry-After": when}), json_resp(200, [])))
    client.list_repos()
    assert len(sleeps) == 1 and 3 <= sleeps[0] <= 6


def test_download_into_unseekable_dest_is_not_retried_after_bytes(fake, client):
    fake.on("GET", FILE_PATH, json_resp(200, "/seafhttp/files/t/a", oid=FID))
    fake.on("GET", "/seafhttp/files/t/a",
            httpx.Response(200, content=b"part", headers={"Content-Length": "10"}))

    class Pipe(io.RawIOBase):
        def __init__(self) -> None:
            self.data = b""

        def writable(self) -> bool:
            return True

        def seekable(self) -> bool:
            return False

        def write(self, b):  # type: ignore[override]
            self.data += bytes(b)
            return len(b)

    pipe = Pipe()
    with pytest.raises(NetworkError, match="ended after 4 of 10"):
        client.download(REPO, "/a", pipe)
    assert len(fake.calls("GET", FILE_PATH)) == 1


def test_fileserver_403_other_than_token_is_refusal(fake, client):
    upload_server(fake, fs_error(403, "Parent dir doesn't match."))
    with pytest.raises(RemoteOperationError, match="Parent dir"):
        client.upload(REPO, "/a.md", b"x")


@pytest.mark.parametrize("url", ["cloud.example.edu", "ftp://x", ""])
def test_server_url_must_be_http(url):
    with pytest.raises(ValueError):
        SeafileClient(url, TOKEN)


def test_server_url_with_path_prefix_and_relative_links(fake):
    fake.on("GET", "/seafile/api2/repos/" + REPO + "/file/", json_resp(200, "/seafhttp/files/t/a", oid=FID))
    fake.on("GET", "/seafhttp/files/t/a", httpx.Response(200, content=b"ok"))
    with SeafileClient(SERVER + "/seafile/", TOKEN, transport=httpx.MockTransport(fake)) as c:
        assert c.download_bytes(REPO, "/a") == (b"ok", FID)


def test_download_link_must_be_http(fake, client):
    fake.on("GET", FILE_PATH, json_resp(200, "file:///etc/passwd", oid=FID))
    with pytest.raises(ProtocolError):
        client.download_bytes(REPO, "/a")


def test_move_missing_destination(fake, client):
    fake.on("POST", FILE_PATH, json_resp(404, {"error_msg": "Folder /nope not found."}))
    with pytest.raises(NotFoundError):
        client.move(REPO, "/a.txt", "/nope")


def test_move_root_shortcut_success(fake, client):
    fake.on("POST", FILE_PATH, json_resp(200, "success"))
    assert client.move(REPO, "/x/e.txt", "/") == "/e.txt"


# -- integration against devserver ----------------------------------------------------

USER = "user@example.edu.cn"


@pytest.fixture
def dev(devserver):
    """The shared devserver (tests/conftest.py): one account ``USER`` / ``secret``."""
    return devserver


@pytest.fixture
def live(dev):
    """``(client, repo_id, counted requests)`` on a fresh library of ``dev``."""
    seen: list[tuple[str, str]] = []
    repo_id = dev.create_library(USER, "OH-Memory")
    c = SeafileClient(dev.url, dev.token_for(USER), on_request=lambda m, u: seen.append((m, u)),
                      sleep=lambda s: None)
    yield c, repo_id, seen
    c.close()


def test_live_login_and_account(dev):
    token = SeafileClient.obtain_token(dev.url, USER, "secret")
    with SeafileClient(dev.url, token) as c:
        c.ping()
        assert c.account_info().email
        assert "version" in c.server_info()
    with pytest.raises(AuthError):
        SeafileClient.obtain_token(dev.url, USER, "wrong")


def test_live_round_trip(live):
    c, repo, seen = live
    with pytest.raises(NotFoundError):
        c.upload(repo, "/Files/notes/a.md", b"hello\n")
    c.mkdir(repo, "/Files/notes")
    result = c.upload(repo, "/Files/notes/a.md", b"hello\n", mtime=1614834367)
    assert (result.path, result.id, result.size) == ("/Files/notes/a.md", FID, 6)
    listing = c.list_dir(repo, "/Files/notes")
    [entry] = listing.entries
    assert (entry.path, entry.id, entry.size, entry.mtime) == ("/Files/notes/a.md", FID, 6, 1614834367)
    assert c.file_detail(repo, "/Files/notes/a.md").id == FID
    dest = io.BytesIO()
    assert c.download(repo, "/Files/notes/a.md", dest) == FID
    assert dest.getvalue() == b"hello\n"
    assert all(u.startswith(("http://127.0.0.1", "http://localhost")) for _, u in seen)


def test_live_update_and_oid_uptodate(live):
    c, repo, _ = live
    c.upload(repo, "/a.md", b"v1\n")
    root = c.list_dir(repo, "/")
    assert c.list_dir(repo, "/", oid=root.oid).uptodate
    head = c.repo_info(repo).head_commit_id
    result = c.update(repo, "/a.md", b"v2\n")
    assert result.path == "/a.md" and result.id != root.entries[0].id and result.size == 3
    assert c.repo_info(repo).head_commit_id != head
    again = c.list_dir(repo, "/", oid=root.oid)
    assert not again.uptodate and again.oid != root.oid
    assert c.download_bytes(repo, "/a.md") == (b"v2\n", result.id)
    with pytest.raises(NotFoundError):
        c.update(repo, "/missing.md", b"x")


def test_live_auto_rename_and_replace(live):
    c, repo, _ = live
    c.upload(repo, "/hello.txt", b"one")
    assert c.upload(repo, "/hello.txt", b"two").path == "/hello (1).txt"
    replaced = c.upload(repo, "/hello.txt", b"three", replace=True)
    assert replaced.path == "/hello.txt"
    assert c.download_bytes(repo, "/hello.txt")[0] == b"three"


def test_live_mkdir_parents_idempotent(live):
    c, repo, _ = live
    c.mkdir(repo, "/x/y/z")
    c.mkdir(repo, "/x/y/z")
    c.mkdir(repo, "/x")
    names = [e.path for e in c.list_dir(repo, "/x", recursive=True).entries]
    assert names == ["/x/y", "/x/y/z"]
    assert [e.path for e in c.list_dir(repo, "/").entries] == ["/x"]  # no "x (1)"
    with pytest.raises(NotFoundError):
        c.mkdir(repo, "/q/r", parents=False)


def test_live_recursive_listing_paths(live):
    c, repo, _ = live
    c.mkdir(repo, "/x/y/z")
    c.upload(repo, "/x/y/z/n.txt", b"n")
    c.upload(repo, "/x/top.md", b"t")
    c.upload(repo, "/root.md", b"r")
    paths = [e.path for e in c.list_dir(repo, "/", recursive=True).entries]
    assert sorted(paths) == ["/root.md", "/x", "/x/top.md", "/x/y", "/x/y/z", "/x/y/z/n.txt"]
    sub = [e.path for e in c.list_dir(repo, "/x", recursive=True).entries]
    assert sorted(sub) == ["/x/top.md", "/x/y", "/x/y/z", "/x/y/z/n.txt"]
    assert c.last_rejected == []


def test_live_rename_move_delete(live):
    c, repo, _ = live
    c.upload(repo, "/a.txt", b"a")
    c.upload(repo, "/b.txt", b"b")
    assert c.rename(repo, "/a.txt", "a2.txt") == "/a2.txt"
    assert c.rename(repo, "/a2.txt", "b.txt") == "/b (1).txt"
    c.mkdir(repo, "/x")
    assert c.move(repo, "/b.txt", "/x") == "/x/b.txt"
    c.upload(repo, "/b.txt", b"b again")
    assert c.move(repo, "/b.txt", "/x") == "/x/b (1).txt"
    c.mkdir(repo, "/d1")
    assert c.rename(repo, "/d1", "d2", is_dir=True) == "/d2"
    assert c.move(repo, "/d2", "/x", is_dir=True) == "/x/d2"
    c.delete(repo, "/x/b.txt")
    c.delete(repo, "/x/b.txt")  # idempotent
    c.delete(repo, "/x/d2")     # folders too
    assert sorted(e.path for e in c.list_dir(repo, "/x").entries) == ["/x/b (1).txt"]
    with pytest.raises(NotFoundError):
        c.rename(repo, "/nope.txt", "n.txt")


def test_live_revoked_token_is_auth_error(dev, live):
    c, repo, _ = live
    c.ping()
    dev.revoke_token(dev.token_for(USER))
    with pytest.raises(AuthError, match="ohsync login"):
        c.list_dir(repo, "/")


def test_live_fault_injection_retried(dev, live):
    c, repo, seen = live
    dev.inject_fault("GET", r"/api2/repos/[^/]+/dir/", status=503, count=2)
    assert c.list_dir(repo, "/").entries == ()
    assert sum(1 for m, u in seen if "/dir/" in u) == 3
    dev.inject_fault("GET", r"/api2/repos/[^/]+/dir/", status=429, count=1, retry_after=0)
    c.list_dir(repo, "/")


def test_live_dropped_connection_and_latency(dev, live):
    c, repo, _ = live
    dev.inject_fault("GET", r"/api2/repos/[^/]+/dir/", drop=True, count=1)
    assert c.list_dir(repo, "/").entries == ()
    with SeafileClient(dev.url, dev.token_for(USER), timeout=0.2, retries=0) as slow:
        dev.inject_fault("GET", r"/api2/repos/[^/]+/$", latency=1.0, count=1)
        with pytest.raises(NetworkError, match="in time"):
            slow.repo_info(repo)


def test_live_throttled_waits_retry_after(dev, live):
    _, repo, _ = live
    waits: list[float] = []
    with SeafileClient(dev.url, dev.token_for(USER), sleep=waits.append) as w:
        dev.inject_fault("GET", r"/api2/repos/$", status=429, retry_after=2, count=1)
        assert [r.id for r in w.list_repos()] == [repo]
    assert waits == [2.0]


def test_live_download_retried_with_fresh_link(dev, live):
    c, repo, seen = live
    c.upload(repo, "/a.md", b"data")
    dev.inject_fault("GET", r"/seafhttp/files/", status=500, count=1)
    assert c.download_bytes(repo, "/a.md")[0] == b"data"
    assert sum(1 for m, u in seen if m == "GET" and f"/api2/repos/{repo}/file/" in u) == 2


def test_live_upload_not_retried(dev, live):
    c, repo, seen = live
    dev.inject_fault("POST", r"/seafhttp/upload-api/", status=500, count=1)
    with pytest.raises(ServerError):
        c.upload(repo, "/a.md", b"data")
    assert sum(1 for m, u in seen if m == "POST") == 1
    assert c.list_dir(repo, "/").entries == ()


def test_live_quota(dev, live):
    c, repo, _ = live
    dev.set_quota(USER, 10)
    assert c.account_info().total == 10
    with pytest.raises(QuotaError):
        c.upload(repo, "/big.bin", b"x" * 100)


def test_live_big_file_streams_both_ways(dev, live, tmp_path):
    c, repo, _ = live
    from ohsync.devserver import file_id as dev_file_id
    data = bytes(range(256)) * (9 * 1024 * 1024 // 256 + 7)  # > 9 MiB: two blocks
    src = tmp_path / "big.bin"
    src.write_bytes(data)
    with src.open("rb") as fh:
        result = c.upload(repo, "/big.bin", fh)
    assert result.size == len(data) and result.id == dev_file_id(data)
    progress: list[tuple[int, int]] = []
    out = tmp_path / "out.bin"
    with out.open("wb") as fh:
        assert c.download(repo, "/big.bin", fh, progress=lambda d, t: progress.append((d, t))) == result.id
    assert out.read_bytes() == data
    assert progress[-1] == (len(data), len(data)) and len(progress) >= 9


def test_every_call_of_a_call_group_is_a_call_of_the_client(client):
    """SeafileClient is a transport and call groups composed onto it; every
    public call of a group is reachable as ``client.<call>`` (the rest of
    ohsync never names a group), bound to that group."""
    from ohsync.engine.client.transport import SeafileHTTP

    groups = [v for v in vars(client).values()
              if type(v).__module__.startswith("ohsync.engine.client.") and not isinstance(v, SeafileHTTP)]
    assert {type(g).__name__ for g in groups} >= {"FileCalls", "DirCalls", "MoveCalls", "ChunkedUploads",
                                                  "ResumableDownloads", "ZipDownloads", "BatchUploads",
                                                  "HistoryCalls", "CommitReads", "NotificationAPI"}
    shared = {"listing"}  # DirCalls.listing: the moves' check of a folder, not a call of the client
    missing = [f"{type(g).__name__}.{name}" for g in groups for name in vars(type(g))
               if not name.startswith("_") and name not in shared and callable(getattr(g, name))
               and getattr(client, name, None) != getattr(g, name)]
    assert missing == []
    assert client.upload_link == client.http.links.upload_link and client.forget_links == client.http.links.forget
