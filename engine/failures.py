"""Per-path failures: exponential backoff, and no retry for what needs the person.

A path whose sync failed is remembered with the versions it failed on (the
local stat fingerprint and the remote file id).  Until that path changes on
either side, the engine skips it:

* ``retry_soon``/``retry_after`` failures (a 5xx on one file, a file busy
  here) wait ``base * 2**(n-1)`` seconds after the n-th failure, capped;
* ``needs_person`` failures (413, over quota, a name the other side cannot
  hold, a path too long, a read-only or full disk) are not retried at all
  until the path changes, the person acts (:meth:`FailureBook.release`:
  ``refresh``, ``resync``) or, for a full disk, a slow check sees enough
  room again (:meth:`FailureBook.due`).

So a permanent failure costs one attempt per change instead of one per
pass.  No threads; times are wall-clock seconds.

One request is retried by the same policy, a level below: the client's
retry loops (reads, links, downloads, chunks, uploads, API calls) all ask
:func:`resend_wait` whether to send a failed request again and how long to
wait first, and the answer is read from the same classification
(``Failure.transient``, ``Failure.behaviour``, ``Failure.retry_after``).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .errors import Failure, classify

__all__ = ["PathFailure", "FailureBook", "BACKOFF_BASE", "BACKOFF_CAP", "SPACE_CHECK", "MAX_RETRY_AFTER",
           "resend_wait"]

#: Seconds before the first retry of a path; doubled per further failure.
BACKOFF_BASE = 30.0
#: Longest wait between two retries of a failing path.
BACKOFF_CAP = 3600.0
#: Seconds between two looks at the free space for paths held by a full disk.
SPACE_CHECK = 60.0

#: Longest ``Retry-After`` a request waits out itself, seconds; a longer one
#: fails the request and the path waits in the failure book instead.
MAX_RETRY_AFTER = 60.0

Version = tuple[Any, ...]  # e.g. (local fingerprint or None, remote file id or None)


@dataclass(frozen=True)
class PathFailure:
    """What is known about one failing path.

    :ivar path: library-relative path.
    :ivar failure: the classification of the last failure.
    :ivar version: ``(local fingerprint, remote id)`` it failed on.
    :ivar count: failures since the path last changed or synced.
    :ivar since: when the first of them happened (Unix time).
    :ivar last: when the last happened.
    :ivar retry_at: next attempt (Unix time); None = not until the path
        changes or the person acts.
    :ivar need_bytes: for a full disk: free bytes wanted before a retry.
    """

    path: str
    failure: Failure
    version: Version
    count: int
    since: float
    last: float
    retry_at: float | None
    need_bytes: int = 0

    def as_dict(self) -> dict[str, Any]:
        """The status view: path, reason, title, needs, permanent, count, since, retry_at."""
        return {"path": self.path, "reason": self.failure.message, "title": self.failure.title,
                "needs": self.failure.needs, "permanent": self.failure.permanent,
                "count": self.count, "since": self.since, "retry_at": self.retry_at}


class FailureBook:
    """The failing paths of one mirror.

    :param root: the mirror folder (for the free-space check).
    :param clock: returns the time now (tests pass a fake).
    :param free_bytes: returns the free bytes at ``root`` (tests pass a fake).
    """

    def __init__(self, root: Path, *, clock: Callable[[], float] = time.time,
                 free_bytes: Callable[[Path], int] | None = None) -> None:
        self._root = root
        self._clock = clock
        self._free = free_bytes or (lambda p: shutil.disk_usage(p).free)
        self._items: dict[str, PathFailure] = {}
        self._space_checked = 0.0
        self._space_free: int | None = None  # free bytes at the last look

    def __len__(self) -> int:
        return len(self._items)

    def get(self, path: str) -> PathFailure | None:
        """The record of ``path``, or None."""
        return self._items.get(path)

    def items(self) -> list[PathFailure]:
        """Every record, by path."""
        return [self._items[p] for p in sorted(self._items)]

    def held(self, path: str, version: Version) -> PathFailure | None:
        """The record that keeps ``path`` from being tried now, or None (try it).

        A path whose version differs from the one that failed is forgotten
        (it changed: a fresh start).
        """
        item = self._items.get(path)
        if item is None:
            return None
        if item.version != version:
            del self._items[path]
            return None
        return item if not self._due(item) else None

    def _due(self, item: PathFailure) -> bool:
        now = self._clock()
        if item.retry_at is not None:
            return now >= item.retry_at
        if item.failure.needs == "space":
            if now - self._space_checked >= SPACE_CHECK:
                self._space_checked = now
                try:
                    self._space_free = self._free(self._root)
                except OSError:
                    self._space_free = None
            # one look serves every path held for space; only a look after the failure counts
            return self._space_free is not None and self._space_checked > item.last and \
                self._space_free > item.need_bytes
        return False

    def record(self, path: str, exc: BaseException, version: Version, *, need_bytes: int = 0) -> PathFailure:
        """Note one failure of ``path`` on ``version``; returns the updated record."""
        failure = classify(exc)
        now = self._clock()
        prev = self._items.get(path)
        count = prev.count + 1 if prev is not None and prev.version == version else 1
        since = prev.since if prev is not None and count > 1 else now
        if failure.permanent:
            retry_at = None
        elif failure.retry_after is not None:
            retry_at = now + max(failure.retry_after, BACKOFF_BASE * 2 ** (count - 1))
        else:
            retry_at = now + min(BACKOFF_CAP, BACKOFF_BASE * 2 ** (count - 1))
        if failure.needs == "space":
            self._space_checked = now
        item = PathFailure(path, failure, version, count, since, now, retry_at, need_bytes)
        self._items[path] = item
        return item

    def restore(self, path: str, item: PathFailure | None) -> None:
        """Put back the record ``path`` had before (None: no record): a failure
        that turned out to be the server's, not the path's, is not charged."""
        if item is None:
            self._items.pop(path, None)
        else:
            self._items[path] = item

    def succeeded(self, path: str) -> None:
        """``path`` synced: forget its failures."""
        self._items.pop(path, None)

    def forget(self, keep: Callable[[str], bool]) -> None:
        """Drop records of paths for which ``keep(path)`` is False (gone on both sides)."""
        for path in [p for p in self._items if not keep(p)]:
            del self._items[path]

    def release(self) -> int:
        """The person acted (``refresh``, ``resync``): every path is tried once
        more on the next pass.  Counts are kept, so a path that fails again
        goes straight back to its wait.  Returns how many were held."""
        now = self._clock()
        for path, item in list(self._items.items()):
            self._items[path] = replace(item, retry_at=now)
        return len(self._items)


def resend_wait(exc: BaseException, failures: int, *, idempotent: bool = True, base: float = 0.5,
                cap: float = 8.0, max_wait: float = MAX_RETRY_AFTER) -> float | None:
    """The one decision whether a failed request is sent again, and after how long.

    Read from the failure's classification (:func:`classify`):

    * not ``transient`` (a refusal, a missing file, a rejected login, a
      local error): never;
    * behaviour ``retry_after`` (a 429: the server did nothing with the
      request and said when to come back): after the server's
      ``Retry-After``, for any request, an upload as much as a read; never
      when it asks for more than ``max_wait`` seconds (the path then waits
      in the failure book, :meth:`FailureBook.record`);
    * any other transient failure (a drop, a 5xx, an answer we could not
      read) only of an ``idempotent`` request (a read, a link, a resumable
      chunk): after ``base * 2**(failures - 1)`` seconds, at most ``cap``.
      A plain upload that failed so may have been stored: the engine
      re-plans it instead.

    :param failures: failed attempts of this request so far, this one included (>= 1).
    :param idempotent: sending the request twice does no harm.
    :returns: seconds to wait before sending the request again, or None: raise ``exc``.
    """
    failure = classify(exc)
    if not failure.transient or failure.permanent:
        return None
    if failure.behaviour == "retry_after":
        wait = failure.retry_after if failure.retry_after is not None else 0.0
        return wait if 0.0 <= wait <= max_wait else None
    if not idempotent:
        return None
    return float(min(cap, base * 2 ** (max(1, failures) - 1)))
