"""A stale writer in bursts: another client that read a file once and then
overwrites it again and again from what it read.

Each overwrite is an ordinary update-link upload without ``head`` (``GET
/api2/repos/{id}/update-link/``, then ``POST <FS>/update-api/<token>`` with
``target_file``), sent through the server's own request dispatch (counters,
faults and after-request hooks apply; no socket is opened), so the file's
history records each one as its own revision, exactly as a read-modify-write
bot on a real server leaves it.  Overwrite ``i`` (from 0) holds the old
content followed by ``line.format(i=i)``.
"""
from __future__ import annotations

import io
import json
import threading
from urllib.parse import urlsplit

from werkzeug.test import EnvironBuilder
from werkzeug.wrappers import Request

from .names import norm_path, parent_and_name

__all__ = ["StaleBurst", "DEFAULT_LINE"]

#: What each overwrite appends to the old content (``{i}`` is its number).
DEFAULT_LINE = "- [note] stale writer {i} #bot\n"


class StaleBurst:
    """``count`` overwrites of ``path`` from ``old``, ``spacing`` seconds apart.

    ``ids`` lists the file id each overwrite got (in order), ``errors`` what a
    failed one answered; ``done`` is set when the burst ended (all sent, or
    :meth:`stop`).  Run it in the caller's thread with :meth:`run`, or in the
    background with :meth:`start` and then :meth:`wait`.
    """

    def __init__(self, app, repo_id: str, path: str, old: bytes, count: int, spacing: float,
                 line: str = DEFAULT_LINE, email: str | None = None) -> None:
        self.app, self.repo_id, self.path = app, repo_id, norm_path(path)
        self.old, self.count, self.spacing, self.line = old, int(count), max(0.0, float(spacing)), line
        self.email = email or app.store.repos[repo_id].owner
        self.ids: list[str] = []
        self.errors: list[str] = []
        self.done = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def content(self, i: int) -> bytes:
        """The bytes overwrite ``i`` uploads."""
        return self.old + self.line.format(i=i).encode("utf-8")

    def start(self) -> "StaleBurst":
        """Run the burst in a background thread; returns self."""
        self._thread = threading.Thread(target=self.run, name="devserver-stale-burst", daemon=True)
        self._thread.start()
        return self

    def wait(self, timeout: float = 60.0) -> list[str]:
        """Wait for the burst to end; returns :attr:`ids`.

        :raises TimeoutError: it did not end within ``timeout`` seconds.
        """
        if not self.done.wait(timeout):
            raise TimeoutError(f"the stale burst on {self.path} did not end within {timeout} s")
        if self._thread is not None:
            self._thread.join(timeout)
        return list(self.ids)

    def stop(self) -> None:
        """Send no further overwrite (the one in flight completes)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(10)

    def run(self) -> None:
        """Send every overwrite in the calling thread."""
        try:
            for i in range(self.count):
                if i and self._stop.wait(self.spacing):
                    break
                if self._stop.is_set():
                    break
                self._overwrite(i)
        finally:
            self.done.set()

    def _request(self, method: str, path: str, **kwargs) -> tuple[int, bytes]:
        token = self.app.store.token_for(self.email)
        builder = EnvironBuilder(path=path, method=method, base_url=self.app.url,
                                 headers=[("Authorization", f"Token {token}")], **kwargs)
        try:
            resp = self.app.dispatch(Request(builder.get_environ()))
        finally:
            builder.close()
        return resp.status_code, resp.get_data()

    def _overwrite(self, i: int) -> None:
        parent, name = parent_and_name(self.path)
        status, body = self._request("GET", f"/api2/repos/{self.repo_id}/update-link/",
                                     query_string={"p": parent})
        if status != 200:
            self.errors.append(f"update-link: HTTP {status} {body[:200]!r}")
            return
        link = urlsplit(json.loads(body))
        status, body = self._request("POST", link.path, query_string=link.query,
                                     data={"target_file": self.path,
                                           "file": (io.BytesIO(self.content(i)), name)})
        if status != 200:
            self.errors.append(f"update: HTTP {status} {body[:200]!r}")
            return
        self.ids.append(body.decode().strip())
