"""The chaos run's stale-burst writer: another device that overwrites from an old read.

A client of the same account, speaking the plain Web API (httpx, nothing of
ohsync): it reads a file (``GET /api2/repos/{id}/file/?p=`` and the link,
docs/seafile-api.md §5.1), and some actions later overwrites it several
times in a row from that old version, a few tens of milliseconds apart,
through the ordinary update link with no ``head`` (§5.4): each upload is
the old version plus the lines it has added so far.  Whatever was written
to the file between its read and an overwrite is replaced by it.

What it replaces of its own or the other client's lines is their doing (the
run exempts them); what it replaces of the person's lines the daemon must
keep, live or in ``/.conflict/``.  A burst runs on its own thread, so the
person goes on editing (and the daemon on syncing) while it lasts; the
other client's actions wait for each overwrite (``lock``), so the lines a
burst replaces are known exactly.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx


class WebClient:
    """The few Web API calls a stale device needs, with its own HTTP connection.

    :param url: the server's base URL.  :param token: returns the account's
        current API token (asked again after a 401: the run revokes tokens).
    """

    def __init__(self, url: str, token: Callable[[], str]) -> None:
        self._token = token
        self._auth = token()
        self.http = httpx.Client(base_url=url, timeout=30.0)

    def _get(self, path: str, **params: str) -> httpx.Response:
        for _ in range(2):
            r = self.http.get(path, params=params, headers={"Authorization": f"Token {self._auth}"})
            if r.status_code != 401:
                break
            self._auth = self._token()
        r.raise_for_status()
        return r

    def read(self, repo: str, path: str) -> bytes:
        """The file's content: ``GET /api2/repos/{id}/file/?p=``, then the one-time link.

        :raises httpx.HTTPError: any failure (a 404 for a missing file, an injected fault).
        """
        link = self._get(f"/api2/repos/{repo}/file/", p=path).json()
        r = self.http.get(link)
        r.raise_for_status()
        return r.content

    def overwrite(self, repo: str, path: str, data: bytes) -> str:
        """Replace the file with ``data``: ``GET /api2/repos/{id}/update-link/``, then
        ``POST <link>`` with ``target_file`` and no ``head`` (whatever is there is replaced).

        :returns: the new file id (the bare-text answer).
        :raises httpx.HTTPError: any failure (441 for a missing target, an injected fault).
        """
        folder = path.rsplit("/", 1)[0] or "/"
        link = self._get(f"/api2/repos/{repo}/update-link/", p=folder).json()
        r = self.http.post(link, data={"target_file": path},
                           files={"file": (path.rsplit("/", 1)[-1], data, "application/octet-stream")})
        r.raise_for_status()
        return r.text.strip()

    def close(self) -> None:
        self.http.close()


@dataclass
class Burst:
    """One planned burst: ``rel`` read as ``old``, ``count`` overwrites, ``gaps`` seconds apart."""

    rel: str
    old: bytes
    count: int
    gaps: list[float]
    written: list[str] = field(default_factory=list)   # markers of the overwrites that landed


class StaleBursts:
    """Runs one burst at a time on a thread (see the module docstring).

    :param chaos: the run (:class:`chaos.Chaos`): its server, library,
        marker bookkeeping and note log.
    :param lock: held by the other client's actions and around each overwrite.
    """

    def __init__(self, chaos: Any, lock: threading.Lock) -> None:
        self.chaos = chaos
        self.lock = lock
        self.web = WebClient(chaos.srv.url, lambda: chaos.srv.token_for(chaos.user))
        self.reads: list[tuple[str, bytes]] = []
        self.thread: threading.Thread | None = None
        self.current: str | None = None
        self.bursts = 0
        self.overwrites = 0
        self.failed = 0

    def busy(self) -> bool:
        """True while a burst runs."""
        return self.thread is not None and self.thread.is_alive()

    def targets(self) -> list[str]:
        """The files read for a burst to come, and the one a burst overwrites now."""
        running = [self.current] if self.current is not None and self.busy() else []
        return running + [rel for rel, _ in self.reads]

    def read(self, rel: str) -> None:
        """Read ``rel`` now through the Web API, for a later burst."""
        try:
            data = self.web.read(self.chaos.repo, "/" + rel)
        except httpx.HTTPError as exc:
            self.chaos._note(f"stale read {rel}: {type(exc).__name__}")
            return
        self.reads.append((rel, data))
        self.chaos._note(f"stale read {rel}")

    def start(self, burst: Burst) -> None:
        """Start ``burst`` on its own thread (one at a time: the caller checks :meth:`busy`)."""
        self.bursts += 1
        self.current = burst.rel
        self.chaos._note(f"stale burst {burst.rel}: {burst.count} overwrites from an old read")
        self.thread = threading.Thread(target=self._run, args=(burst,), name="stale-burst", daemon=True)
        self.thread.start()

    def _run(self, burst: Burst) -> None:
        chaos, path = self.chaos, "/" + burst.rel
        for i in range(burst.count):
            if i:
                time.sleep(burst.gaps[i - 1])  # why: the burst's chosen spacing between overwrites
            with self.lock:
                try:
                    current = chaos.srv.read_file(chaos.repo, path)
                except FileNotFoundError:
                    chaos._note(f"stale overwrite {burst.rel}: gone")
                    return
                mine = burst.old + b"".join(chaos._line(burst.rel, m) for m in burst.written)
                # what it replaces of the remote writers' lines is their doing (never the person's)
                chaos._forget(("remote", "stale"), current, keep=mine)
                m = chaos._marker("stale", burst.rel)
                data = mine if mine.endswith(b"\n") or not mine else mine + b"\n"
                data += chaos._line(burst.rel, m)
                try:
                    self.web.overwrite(chaos.repo, path, data)
                except httpx.HTTPError as exc:
                    # an answer lost after the server applied it still counts as written
                    try:
                        landed = m.encode() in chaos.srv.read_file(chaos.repo, path)
                    except FileNotFoundError:
                        landed = False
                    chaos._note(f"stale overwrite {burst.rel} {m}: {type(exc).__name__}"
                                f"{'' if landed else ', not written'}")
                    if not landed:
                        chaos._unmark(m)
                        self.failed += 1
                        continue
                burst.written.append(m)
                self.overwrites += 1
                chaos._note(f"stale overwrite {burst.rel} {m}")

    def join(self, timeout: float = 120.0) -> None:
        """Wait for the running burst (before the run quiesces)."""
        if self.thread is not None:
            self.thread.join(timeout)
            assert not self.thread.is_alive(), "a stale burst did not finish"

    def close(self) -> None:
        self.join()
        self.web.close()
