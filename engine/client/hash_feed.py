"""Hashing a download while it arrives, off the receiving thread.

The pieces httpx hands over are small (about 64 KiB); hashing each at once
on the receiving thread would stall it between two socket reads.
:class:`HashFeed` gathers them (without copying) into pieces of
:data:`PIECE` bytes and hashes each piece on a pool thread — the whole-file
sha1 and (when the hasher computes them) the per-block sha1s as two jobs,
which run side by side because hashlib releases the interpreter while it
hashes more than 2 KiB — while the receiving thread reads the next piece.
At most one piece is being hashed at a time, so memory stays bounded by
about two pieces.

The pool is borrowed (the engine owns no threads): a job that has not
started when the next piece is ready (every worker busy, perhaps with the
very download that waits for it) is cancelled and run on the receiving
thread instead, so a full pool slows the hashing down but never blocks it.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from ..ids import ContentHasher

__all__ = ["PIECE", "HashFeed"]

#: Bytes gathered before a piece is hashed.
PIECE = 4 * 1024 * 1024


class HashFeed:
    """Feed a :class:`~ohsync.engine.ids.ContentHasher` in big pieces, on a pool.

    :param hasher: the hasher fed, in stream order.
    :param pool: an executor (``submit(fn, *args)`` → future) that runs the
        hashing; None hashes each piece on the caller's thread.
    """

    def __init__(self, hasher: ContentHasher, pool: Any = None) -> None:
        self.hasher, self.pool = hasher, pool
        self._parts: list[bytes] = []
        self._gathered = 0
        self._jobs: list[tuple[Future[None], Any, list[bytes]]] = []

    def add(self, data: bytes) -> None:
        """The next bytes received (hashed once a piece is full)."""
        self._parts.append(data)
        self._gathered += len(data)
        if self._gathered >= PIECE:
            self._hand_over()

    def finish(self) -> ContentHasher:
        """Hash what is gathered and wait for every job; returns the hasher."""
        self._hand_over()
        self._wait()
        return self.hasher

    def reset(self) -> None:
        """Forget every byte fed (a download that starts over)."""
        self._wait()
        self._parts, self._gathered = [], 0
        self.hasher.reset()

    def _hand_over(self) -> None:
        if not self._gathered:
            return
        piece, self._parts, self._gathered = self._parts, [], 0
        self._wait()
        halves = [self.hasher.update_whole] + ([self.hasher.update_blocks] if self.hasher.blocks else [])
        if self.pool is None:
            for half in halves:
                _feed(half, piece)
            return
        self._jobs = [(self.pool.submit(_feed, half, piece), half, piece) for half in halves]

    def _wait(self) -> None:
        jobs, self._jobs = self._jobs, []
        for future, half, piece in jobs:
            if future.cancel():
                _feed(half, piece)  # the pool had no free worker: hash it here
            else:
                future.result()


def _feed(half: Any, parts: list[bytes]) -> None:
    """Feed the received parts, in order, to one half of the hasher."""
    for part in parts:
        half(part)
