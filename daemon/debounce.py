"""One debouncer for the daemon's folder services: keys (paths) that must
stay quiet for a while before they are handed on.

The mirror's :class:`~ohsync.daemon.watcher.Watcher` touches a path on each
file event and hands it to the sync once no event came for ``quiet``
seconds (an editor's burst of writes becomes one dirty path); the drop
folder's :class:`~ohsync.daemon.filing_service.FilingService` does the same
and also holds a key back until a retry time (backoff, quota).  Like
watchdog's ``EventDebouncer`` the wait restarts with every new event, but
per key, so one busy file does not hold back the others.

Not thread-safe by itself: the owner calls it under its own lock (the
``cond`` of :class:`~ohsync.daemon.service_thread.ServiceThread`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

__all__ = ["Debouncer"]

K = TypeVar("K", bound=Hashable)


class Debouncer(Generic[K]):
    """Keys with a quiet period (see the module docstring).

    :param quiet: seconds a key must go untouched before it is due.
    :param clock: the monotonic clock (seconds); tests pass their own.
    """

    def __init__(self, quiet: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.quiet = float(quiet)
        self._clock = clock
        self._touched: dict[K, float] = {}
        self._held: dict[K, float] = {}

    def __len__(self) -> int:
        return len(self._touched)

    def __contains__(self, key: object) -> bool:
        return key in self._touched

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._touched))

    def now(self) -> float:
        """The debouncer's clock, now."""
        return self._clock()

    def touch(self, key: K, *, at: float | None = None) -> None:
        """(Re)start ``key``'s quiet period at ``at`` (default now); a hold stays."""
        self._touched[key] = self._clock() if at is None else at

    def hold(self, key: K, until: float, *, at: float | None = None) -> None:
        """Touch ``key`` and keep it back until monotonic time ``until`` as well."""
        self.touch(key, at=at)
        self._held[key] = until

    def release_holds(self) -> None:
        """Forget every hold (the keys are due after their quiet period)."""
        self._held.clear()

    def discard(self, key: K) -> None:
        """Forget ``key`` (no error when it is not there)."""
        self._touched.pop(key, None)
        self._held.pop(key, None)

    def due_at(self, key: K) -> float:
        """When ``key`` is due: the end of its quiet period or of its hold.

        :raises KeyError: ``key`` is not waiting.
        """
        return max(self._touched[key] + self.quiet, self._held.get(key, 0.0))

    def next_due(self) -> float | None:
        """When the first key is due (monotonic time), None when none waits."""
        return min((self.due_at(k) for k in self._touched), default=None)

    def newest(self) -> float | None:
        """When the most recently touched key was touched, None when none waits."""
        return max(self._touched.values(), default=None)

    def pop_due(self, now: float | None = None) -> list[K]:
        """Remove and return the keys due at ``now`` (default now), oldest first."""
        now = self._clock() if now is None else now
        ready = sorted((k for k in self._touched if self.due_at(k) <= now), key=self._touched.__getitem__)
        for key in ready:
            self.discard(key)
        return ready

    def pop_all(self) -> list[K]:
        """Remove and return every key, oldest first."""
        ready = sorted(self._touched, key=self._touched.__getitem__)
        self._touched.clear()
        self._held.clear()
        return ready
