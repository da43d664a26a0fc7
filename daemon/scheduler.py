"""When the sync worker runs a pass: the poll clock, the retry backoff, the coalesced work.

:class:`Scheduler` is a thread that only keeps the clock: the worker tells
it when the next poll is due (:meth:`Scheduler.poll_in`, after every pass:
the poll interval, or a backoff from :func:`backoff_delay`) and it posts
"poll" then; on the same clock it runs the worker's one-shot delayed calls
(:meth:`Scheduler.call_in`), so that no timer thread outlives the worker.
:class:`Work` is what the next pass must cover, coalesced from
many queued messages; :class:`Ticket` is a ``wait`` caller waiting for it.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from .service_thread import ServiceThread

__all__ = ["MAX_SCAN_INTERVAL", "SCAN_COST_FACTOR", "Scheduler", "Ticket", "Work", "backoff_delay",
           "full_scan_every"]

log = logging.getLogger(__name__)

#: full scans are spaced by 1,000 × their measured duration (at most 0.1 % of the time:
#: a laptop's idle budget is 0.5 % CPU, and the watcher sees changes between scans) ...
SCAN_COST_FACTOR = 1000.0
#: ... but a missed watcher event waits at most an hour
MAX_SCAN_INTERVAL = 3600.0


def full_scan_every(interval: float, last_scan_seconds: float) -> float:
    """Seconds between the periodic stat-only full scans: the configured
    ``interval``, stretched so that scans take at most 0.1 % of the time
    (1,000 × the last scan's duration: a 30,000-file mirror scanned in 2 s is
    scanned every 2,000 s), at most :data:`MAX_SCAN_INTERVAL`."""
    return max(interval, min(MAX_SCAN_INTERVAL, SCAN_COST_FACTOR * last_scan_seconds))


def backoff_delay(attempt: int, *, base: float = 2.0, cap: float = 300.0) -> float:
    """Seconds before retry number ``attempt`` (1, 2, …): exponential with ±20 % jitter."""
    delay = min(cap, base ** max(1, attempt))
    return delay * random.uniform(0.8, 1.2)


class Scheduler(ServiceThread):
    """Posts "poll" to the worker when the next poll is due (a loop thread
    on the daemon's thread base, without a watched folder).

    The worker decides *when* (:meth:`poll_in` after every pass: the poll
    interval, or a backoff after an error; :meth:`halt` when polling must
    stop); this thread only keeps the clock.  The worker that makes it
    starts and stops it (:meth:`stop` joins the thread; the delayed calls
    not yet due are dropped).

    :param post_poll: called from the scheduler thread when a poll is due.
    """

    def __init__(self, post_poll: Callable[[], None]) -> None:
        # not a daemon thread: it never blocks but on its condition, so stop() always joins it
        super().__init__("ohsync-scheduler", daemon=False)
        self._post = post_poll
        self._due: float | None = None
        #: one-shot delayed calls: ``(monotonic due time, order, fn)`` as a heap
        self._calls: list[tuple[float, int, Callable[[], None]]] = []
        self._order = itertools.count()

    def start(self) -> None:
        """Start the clock thread."""
        self.start_thread()

    def call_in(self, seconds: float, fn: Callable[[], None]) -> None:
        """Call ``fn()`` once on the scheduler thread ``seconds`` from now
        (dropped when the scheduler stops first; an error is logged)."""
        with self.cond:
            heapq.heappush(self._calls, (time.monotonic() + max(0.0, seconds), next(self._order), fn))
            self.cond.notify_all()

    def poll_in(self, seconds: float) -> None:
        """Post the next poll ``seconds`` from now (replacing any earlier plan)."""
        with self.cond:
            self._due = time.monotonic() + max(0.0, seconds)
            self.cond.notify_all()

    def halt(self) -> None:
        """No polls until the next :meth:`poll_in`."""
        with self.cond:
            self._due = None
            self.cond.notify_all()

    @property
    def due_in(self) -> float | None:
        """Seconds until the next poll, or None when halted."""
        with self.cond:
            return None if self._due is None else self._due - time.monotonic()

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the clock: no more polls or delayed calls; joins the thread."""
        with self.cond:
            self._calls.clear()
        super().stop(timeout)

    def run_loop(self) -> None:
        """The clock thread: post each poll and run each delayed call when due."""
        while True:
            with self.cond:
                if not self.should_keep_running():
                    return
                now = time.monotonic()
                calls = []
                while self._calls and self._calls[0][0] <= now:
                    calls.append(heapq.heappop(self._calls)[2])
                poll = self._due is not None and self._due <= now
                if poll:
                    self._due = None
                if not calls and not poll:
                    deadlines = [d for d in (self._due, self._calls[0][0] if self._calls else None) if d is not None]
                    self.cond.wait(timeout=min(deadlines) - now if deadlines else None)
                    continue
            for fn in calls:
                try:
                    fn()
                except Exception:  # noqa: BLE001 - one delayed call must not stop the clock
                    log.exception("a delayed call of the sync worker failed")
            if poll:
                self._post()


@dataclass
class Ticket:
    """A ``wait``/``refresh`` caller waiting for the next pass to finish."""

    done: threading.Event = field(default_factory=threading.Event)
    synced: bool = False
    message: str = ""
    reasons: tuple[dict[str, str], ...] = ()
    #: conflicts known when the wait began (None: not read from the engine yet)
    conflicts_before: frozenset[tuple[str, str]] | None = None
    started: float = 0.0


@dataclass
class Work:
    """What the next pass must cover (coalesced from many messages)."""

    dirty: set[str] = field(default_factory=set)
    #: the dirty paths awaiting push (echoes of our own writes left out): ``pending_up``
    awaiting: set[str] = field(default_factory=set)
    full_scan: bool = False
    check_remote: bool = False
    tickets: list[Ticket] = field(default_factory=list)
    #: dirty paths whose save the watcher saw complete (:meth:`SyncEngine.note_saved`)
    saved: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.dirty or self.full_scan or self.check_remote)
