"""``bench/run.py --server URL``: the bench against a Seafile server of one's own.

:class:`RealServer` stands where :class:`common.DevServerProc` stands in the
scenarios (``url``, ``token``, ``repo_id``, ``reset``/``counters``,
``put_file``, ``read_file``, ``stop``) but talks only the Web API a real
server has:

* the token from ``POST /api2/auth-token/`` (or given), the version from
  ``GET /api2/server-info/``;
* every library the scenarios ask for is a **scratch library** named
  ``ohsync-bench-<stamp>-<run id>-<name>``, made with ``POST /api2/repos/``;
  :meth:`RealServer.stop` (run.py calls it in ``finally``, also after Ctrl-C
  or SIGTERM) lists the libraries (``GET /api2/repos/``) and deletes every one
  whose name has this run's prefix (``DELETE /api2/repos/{id}/``): also one
  whose create request was cut short by the signal, whose id the run never
  got (it waits a few seconds for such a library to show up);
* requests are counted on the tools' side, since a real server has no counter
  to ask: the engine's client reports each request it sends
  (``SeafileHTTP``'s ``on_request`` hook) to :data:`TALLY`, rclone runs with
  ``--dump headers`` and its ``HTTP REQUEST`` lines are counted
  (:func:`count_rclone_dump`), a daemon's count is the ``requests`` of its
  status (the HTTP requests of its sync passes).  The bench's own requests
  (making libraries, putting "another client's" edits, reading back to check)
  go through a client of their own and are not counted, as devserver's control
  API is not.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

import httpx

__all__ = ["TALLY", "RequestTally", "RealServer", "count_rclone_dump", "counted_client", "endpoint_key",
           "server_version"]

_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{40}")


#: The file server's paths (below ``/seafhttp`` or at the root of a host of its own,
#: as ``FILE_SERVER_ROOT = http://host:8082`` has it): ``<op>/<token>[/<name>]``.
_FILESERVER = re.compile(r"((?:/seafhttp)?/(?:files|zip|upload-api|update-api|upload-aj|update-aj|"
                         r"upload-blks-api|update-blks-api|upload-raw-blks-api|update-raw-blks-api)/)[^/]+(.*)")


def endpoint_key(method: str, url: str) -> str:
    """``GET /api2/repos/{id}/file/`` for a request: the path with library, file and
    commit ids replaced by ``{id}``, file-server tokens by ``{token}``, no query.
    A file-server path is keyed below ``/seafhttp`` also where the file server
    has a port of its own (``/upload-api/<token>`` → ``/seafhttp/upload-api/{token}``),
    so the scenarios count one name whatever ``FILE_SERVER_ROOT`` is."""
    path = urlsplit(url).path
    m = _FILESERVER.fullmatch(path)
    if m:  # /seafhttp/files/<token>/<name>, /upload-api/<token>
        op = m.group(1).removeprefix("/seafhttp")
        return f"{method.upper()} /seafhttp{op}{{token}}{'/…' if m.group(2).strip('/') else ''}"
    return f"{method.upper()} {_ID.sub('{id}', path)}"


class RequestTally:
    """Requests counted by the tools that sent them (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = 0
        self.endpoints: Counter[str] = Counter()

    def add(self, method: str, url: str) -> None:
        """One request (the ``on_request`` hook of the engine's HTTP client)."""
        key = endpoint_key(method, url)
        with self._lock:
            self.total += 1
            self.endpoints[key] += 1

    def add_many(self, key: str, n: int) -> None:
        """``n`` requests under ``key`` (a daemon's count, which has no endpoints)."""
        if n:
            with self._lock:
                self.total += n
                self.endpoints[key] += n

    def reset(self) -> None:
        with self._lock:
            self.total = 0
            self.endpoints.clear()

    def snapshot(self) -> dict[str, Any]:
        """``{"total": int, "endpoints": {key: int}}``, the shape of devserver's counters."""
        with self._lock:
            return {"total": self.total, "endpoints": dict(self.endpoints)}


#: The one tally of a bench run: engine mirrors and rclone runs add to it.
TALLY = RequestTally()

_DUMP_REQ = re.compile(r"HTTP REQUEST \(req")
_DUMP_LINE = re.compile(r"DEBUG : (GET|POST|PUT|DELETE|HEAD|PATCH) (\S+) HTTP/")


def counted_client(timeout: float = 600) -> httpx.Client:
    """An httpx client whose requests are added to :data:`TALLY` (the bench's plain
    streams, the floor the engine is compared with; devserver counts them too)."""
    def hook(request: httpx.Request) -> None:
        TALLY.add(request.method, str(request.url))

    return httpx.Client(timeout=timeout, event_hooks={"request": [hook]})


def count_rclone_dump(log_path: Path) -> tuple[int, dict[str, int]]:
    """The requests in an rclone ``--dump headers`` log: (total, endpoints).

    Each request opens with an ``HTTP REQUEST (req 0x…)`` line followed by its
    request line (``GET /api2/… HTTP/1.1``), from which the endpoint is taken.
    """
    total = 0
    endpoints: Counter[str] = Counter()
    want_line = False
    try:
        text = log_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return 0, {}
    for line in text.splitlines():
        if _DUMP_REQ.search(line):
            total += 1
            want_line = True
            continue
        if want_line:
            m = _DUMP_LINE.search(line)
            if m:
                endpoints[endpoint_key(m.group(1), m.group(2))] += 1
                want_line = False
    return total, dict(endpoints)


def server_version(url: str, *, transport: httpx.BaseTransport | None = None) -> str:
    """``GET /api2/server-info/``: ``"<version>"`` plus the edition when the server says
    it (``"12.0.14 (pro)"``); ``"unknown"`` when the answer has no version."""
    try:
        with httpx.Client(timeout=30, transport=transport) as c:
            info = c.get(url.rstrip("/") + "/api2/server-info/").json()
    except (httpx.HTTPError, ValueError):
        return "unknown"
    if not isinstance(info, dict) or not info.get("version"):
        return "unknown"
    edition = " (pro)" if "seafile-pro" in (info.get("features") or []) else ""
    return f"{info['version']}{edition}"


class RealServer:
    """A Seafile server reached only through its Web API, with scratch libraries.

    :param url: the server's base URL (``https://seafile.example.org``).
    :param username: the account (its e-mail); rclone logs in with it.
    :param password: the account's password (for the token and rclone), or None with ``token``.
    :param token: an API token; then no password is needed (rclone gets ``auth_token``).
    :raises RuntimeError: the login failed (the message says the server's answer).
    """

    #: Requests are counted by the tools (:data:`TALLY`), not by the server.
    counts_requests = False
    #: No fault injection (latency, failures): the scenarios that need it are skipped.
    faults = False

    def __init__(self, url: str, username: str, *, password: str | None = None, token: str | None = None) -> None:
        self.url = url.rstrip("/")
        self.user = username
        self.password = password
        # the bench's own requests (not counted, like devserver's control API)
        self.http = httpx.Client(base_url=self.url, timeout=120, follow_redirects=False)
        if token is None:
            if password is None:
                raise RuntimeError("a password or a token is needed (--password-stdin or --token-stdin)")
            r = self.http.post("/api2/auth-token/", data={"username": username, "password": password})
            if r.status_code != 200 or "token" not in r.text:
                raise RuntimeError(f"could not log in to {self.url} as {username}: HTTP {r.status_code} "
                                   f"{r.text[:200]!r}; check the username, the password and the URL")
            token = str(r.json()["token"])
        self.token = token
        self.http.headers["Authorization"] = f"Token {token}"
        self.version = server_version(self.url)
        # unique to the run: the cleanup deletes by this prefix, never another run's libraries
        self.prefix = f"ohsync-bench-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        #: scratch libraries made so far: bench name -> library id
        self.created: dict[str, str] = {}
        #: server names of scratch libraries whose create request got no answer (cut short):
        #: the server may have made them all the same
        self.unanswered: set[str] = set()
        #: counts outside the tally (a daemon's status): name -> (read, value at reset)
        self._sources: dict[str, tuple[Callable[[], int], int]] = {}

    # -- libraries
    def lib_name(self, name: str) -> str:
        """The scratch library's name on the server for the bench's library ``name``."""
        return f"{self.prefix}-{name}"

    def repo_id(self, name: str) -> str:
        """The id of the scratch library for ``name``, made (``POST /api2/repos/``) on first use."""
        if name not in self.created:
            lib = self.lib_name(name)
            self.unanswered.add(lib)
            r = self.http.post("/api2/repos/", data={"name": lib})
            self.unanswered.discard(lib)
            if r.status_code not in (200, 201):
                raise RuntimeError(f"could not create the scratch library {self.lib_name(name)!r}: HTTP "
                                   f"{r.status_code} {r.text[:200]!r}")
            self.created[name] = str(r.json()["repo_id"])
        return self.created[name]

    def scratch_left(self) -> list[str]:
        """Names of this run's scratch libraries still on the server (``GET /api2/repos/``)."""
        return sorted(self._scratch_on_server().values())

    def _scratch_on_server(self) -> dict[str, str]:
        """``{library id: name}`` of this run's own libraries on the server (``GET /api2/repos/?type=mine``).

        :raises httpx.HTTPError: the listing failed.  ValueError: its answer is not a JSON list.
        """
        r = self.http.get("/api2/repos/", params={"type": "mine"})
        r.raise_for_status()
        libs = r.json()
        if not isinstance(libs, list):
            raise ValueError(f"GET /api2/repos/ answered {type(libs).__name__}, not a list")
        mine = self.prefix + "-"
        return {str(lib["id"]): str(lib["name"]) for lib in libs
                if isinstance(lib, dict) and lib.get("type", "repo") == "repo" and lib.get("id")
                and str(lib.get("name", "")).startswith(mine)}

    def delete_scratch(self, settle: float = 10.0) -> list[str]:
        """``DELETE /api2/repos/{id}/`` of every scratch library; returns what may be left.

        The libraries are found by name on the server (this run's prefix) as
        well as by the ids the run got back: a create cut short by Ctrl-C
        may have made a library whose id the run never saw.  While such a
        create is unanswered (:attr:`unanswered`) the listing is read again
        every half second for up to ``settle`` seconds, until that library
        shows up and is deleted (the server may still be making it).

        :returns: the names that could not be deleted, and those of interrupted
            creates that did not show up (maybe never made: to check by hand).
        """
        deadline = time.monotonic() + settle
        while True:
            try:
                found: dict[str, str] | None = self._scratch_on_server()
            except (httpx.HTTPError, ValueError, KeyError):
                found = None  # the ids the run got are still deleted
            targets = dict(found or {})
            for name, repo in self.created.items():
                targets.setdefault(repo, self.lib_name(name))
            failed = []
            for repo, lib in targets.items():
                try:
                    r = self.http.delete(f"/api2/repos/{repo}/")
                    ok = r.status_code in (200, 204, 404)
                except httpx.HTTPError:
                    ok = False
                if not ok:
                    failed.append(lib)
                    continue
                self.created = {n: i for n, i in self.created.items() if i != repo}
                self.unanswered.discard(lib)
            if found is None or not self.unanswered or time.monotonic() >= deadline:
                break
            time.sleep(0.5)  # an interrupted create the server may still be finishing
        return sorted(failed) + [f"{lib} (its create was interrupted: check whether the server made it)"
                                 for lib in sorted(self.unanswered)]

    # -- counting
    def watch(self, name: str, read: Callable[[], int]) -> None:
        """Add a tool whose requests it counts itself (a daemon: its status's ``requests``)."""
        self._sources[name] = (read, _safe(read))

    def unwatch(self, name: str) -> None:
        self._sources.pop(name, None)

    def reset(self) -> None:
        """Start counting from zero (the tally and every watched tool)."""
        TALLY.reset()
        self._sources = {k: (read, _safe(read)) for k, (read, _) in self._sources.items()}

    def counters(self) -> dict[str, Any]:
        """Requests since :meth:`reset`: ``{"total", "endpoints"}`` as devserver's counters."""
        snap = TALLY.snapshot()
        for name, (read, start) in self._sources.items():
            n = max(0, _safe(read) - start)
            if n:
                snap["total"] += n
                snap["endpoints"][f"{name} (its sync passes)"] = n
        return snap

    # -- files, as another client
    def put_file(self, repo_id: str, path: str, data: bytes) -> str:
        """Write ``path`` as another client would (upload link, ``replace=1``); returns the file id."""
        return self._upload(repo_id, path, data)

    def put_file_from(self, repo_id: str, path: str, src: Path) -> str:
        with open(src, "rb") as fh:
            return self._upload(repo_id, path, fh)

    def _upload(self, repo_id: str, path: str, body: Any) -> str:
        parent, _, name = path.rpartition("/")
        parent = parent or "/"
        link = self.http.get(f"/api2/repos/{repo_id}/upload-link/", params={"p": parent})
        link.raise_for_status()
        url = httpx.URL(self.url + "/").join(link.json())
        r = self.http.post(url, params={"ret-json": "1"}, data={"parent_dir": parent, "replace": "1"},
                           files={"file": (name, body, "application/octet-stream")}, timeout=600)
        r.raise_for_status()
        answer = r.json()
        return str(answer[0]["id"] if isinstance(answer, list) else answer)

    def read_file(self, repo_id: str, path: str) -> bytes:
        """The file's bytes (download link, then the file server)."""
        link = self.http.get(f"/api2/repos/{repo_id}/file/", params={"p": path})
        link.raise_for_status()
        r = self.http.get(httpx.URL(self.url + "/").join(link.json()), timeout=600)
        r.raise_for_status()
        return r.content

    def stop(self) -> None:
        """Delete the scratch libraries and close the client.

        :raises RuntimeError: some scratch library could not be deleted (named, to delete by hand).
        """
        if self.http.is_closed:  # stopped already (before the scale scenario)
            return
        failed = self.delete_scratch()
        self.http.close()
        if failed:
            raise RuntimeError(f"could not delete the scratch libraries {failed} on {self.url}: delete them by hand")


def _safe(read: Callable[[], int]) -> int:
    try:
        return int(read())
    except Exception:  # noqa: BLE001 - a tool that is not up yet has counted nothing
        return 0
