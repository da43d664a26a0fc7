"""One debouncer for the daemon's folder services: keys (paths) that must
stay quiet for a while before they are handed on.

The mirror's :class:`~ohsync.daemon.watcher.Watcher` touches a path on each
file event and hands it to the sync once no event came for ``quiet``
seconds (an editor's burst of writes becomes one dirty path); the drop
folder's :class:`~ohsync.daemon.filing_service.FilingService` does the same
and also holds a key back until a retry time (backoff, quota).  Like
watchdog's ``EventDebouncer`` the wait restarts with every new event, but
per key, so one busy file does not hold back the others.

A key whose last event said the write is over (:meth:`Debouncer.complete`:
the editor closed the file it wrote, or renamed its temp file onto it) need
not wait the whole quiet period: it is due once ``settle`` seconds passed
with no event on any key, so a save goes out at once while a burst of
writes (one file saved again and again, or many files) still coalesces
into one batch.  It is never due later than its quiet period would make it.

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
    :param settle: seconds without any event after which a completed key
        (:meth:`complete`) is due; None: completions count as plain touches.
    """

    def __init__(self, quiet: float, clock: Callable[[], float] = time.monotonic, *,
                 settle: float | None = None) -> None:
        self.quiet = float(quiet)
        self.settle = None if settle is None else float(settle)
        self._clock = clock
        self._touched: dict[K, float] = {}
        self._held: dict[K, float] = {}
        self._complete: set[K] = set()  # keys whose last event ended a write
        self._last_event = float("-inf")  # the newest touch or completion of any key

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
        """(Re)start ``key``'s quiet period at ``at`` (default now); a hold stays.

        A completed key written again waits its whole quiet period again."""
        when = self._clock() if at is None else at
        self._touched[key] = when
        self._complete.discard(key)
        self._last_event = max(self._last_event, when)

    def complete(self, key: K, *, at: float | None = None) -> None:
        """Touch ``key`` at ``at`` (default now) with an event that ends a write
        (a close after writing, a rename onto it): it is due ``settle``
        seconds after the last event of any key, or after its quiet period,
        whichever comes first (a hold stays)."""
        self.touch(key, at=at)
        if self.settle is not None:
            self._complete.add(key)

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
        self._complete.discard(key)

    def is_complete(self, key: K) -> bool:
        """Whether ``key`` waits and its last event ended a write (:meth:`complete`)."""
        return key in self._complete

    def due_at(self, key: K, *, prompt: bool = True) -> float:
        """When ``key`` is due: the end of its quiet period (of the settle
        time, when completed and ``prompt``) or of its hold, whichever is later.

        :param prompt: False: completed keys wait their quiet period too.
        :raises KeyError: ``key`` is not waiting.
        """
        touched = self._touched[key]
        due = touched + self.quiet
        if prompt and self.settle is not None and key in self._complete:
            due = min(due, max(touched, self._last_event) + self.settle)
        return max(due, self._held.get(key, 0.0))

    def next_due(self, *, prompt: bool = True) -> float | None:
        """When the first key is due (monotonic time), None when none waits
        (``prompt`` as :meth:`due_at`)."""
        return min((self.due_at(k, prompt=prompt) for k in self._touched), default=None)

    def newest(self) -> float | None:
        """When the most recently touched key was touched, None when none waits."""
        return max(self._touched.values(), default=None)

    def pop_due(self, now: float | None = None, *, prompt: bool = True) -> list[K]:
        """Remove and return the keys due at ``now`` (default now), oldest first
        (``prompt`` as :meth:`due_at`)."""
        now = self._clock() if now is None else now
        ready = sorted((k for k in self._touched if self.due_at(k, prompt=prompt) <= now),
                       key=self._touched.__getitem__)
        for key in ready:
            self.discard(key)
        return ready

    def pop_all(self) -> list[K]:
        """Remove and return every key, oldest first."""
        ready = sorted(self._touched, key=self._touched.__getitem__)
        self._touched.clear()
        self._held.clear()
        self._complete.clear()
        return ready
