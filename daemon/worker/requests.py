"""What other threads ask of the sync worker: each request is a message on its queue.

:class:`WorkerRequests` is the part a :class:`~ohsync.daemon.worker.SyncWorker`
holds for what the watcher, the scheduler, the push channel, the socket
methods and the services ask from their own threads: it only posts messages
(or submits jobs that run on the worker between passes) and reads the read
model (``daemon/worker/facts.py``) and the control state; everything that
touches the engine happens on the worker thread (``daemon/worker/worker.py``).
Also here: the control state itself (:class:`Control`, held in a
:class:`ControlState` the worker's parts share) and the types the worker's
callers name (:class:`Session`, :data:`SessionFactory`, :class:`FatalError`).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ...engine.errors import OhsyncError
from ...engine.events import SyncEvent
from ..scheduler import Ticket
from ..status import StatusModel
from .facts import MirrorFacts

__all__ = ["ASKED_PASS_WINDOW", "Control", "ControlState", "FatalError", "Session", "SessionFactory",
           "WorkerRequests"]

#: The answer of a ``wait`` the worker can no longer answer.
SHUTTING_DOWN = "ohsync is shutting down"

#: Seconds after a ``refresh`` or ``resume`` during which a ``wait`` also counts
#: the conflicts made by the pass that request started (``refresh && wait``).
ASKED_PASS_WINDOW = 60.0


class Session(Protocol):
    """What the worker needs from an opened mirror (see ``daemon/session.py``)."""

    engine: Any
    library_name: str

    def close(self) -> None: ...


#: ``open_session(on_event)`` opens the engine for the mirror; called in the worker thread.
SessionFactory = Callable[[Callable[[SyncEvent], None]], Session]


class FatalError(OhsyncError):
    """The daemon cannot run at all with this configuration (no login, no library).

    Classified (``engine.errors.classify``) as needing the person, for the
    whole daemon: retrying cannot help until the config, the login or the
    library is fixed.
    """

    scope = "daemon"
    behaviour = "needs_person"


@dataclass(frozen=True)
class Control:
    """Whether the worker may run a pass: the worker's own state, shown by status.

    :ivar problem: ``auth_required``, ``offline``, ``stopped``, ``error`` or None.
    :ivar retry_at: Unix time of the next attempt after a backoff.
    """

    paused: bool = False
    problem: str | None = None
    problem_message: str = ""
    retry_at: float | None = None




class ControlState:
    """The worker's :class:`Control`, shared by its parts; every change is told
    to the status model (which never decides from it).

    :param status: the mirror's status model.
    """

    def __init__(self, status: StatusModel) -> None:
        self._status = status
        self._control = Control()

    @property
    def now(self) -> Control:
        """The control state now (any thread)."""
        return self._control

    def set(self, **changes: Any) -> None:
        """Change the control state and tell the status model."""
        self._control = replace(self._control, **changes)
        self._status.update(**changes)

    def set_problem(self, problem: str | None, message: str = "", retry_at: float | None = None) -> None:
        """Record why no pass runs (``problem`` None: nothing stands in the way)."""
        self.set(problem=problem, problem_message=message, retry_at=retry_at)

    def clear_problem_untold(self) -> None:
        """The pass succeeded: no problem any more (the pass tells the status model with its other facts)."""
        self._control = replace(self._control, problem=None, problem_message="", retry_at=None)


class WorkerRequests:
    """The thread-safe requests of one sync worker: messages on its queue.

    :param messages: the worker's queue (``(kind, argument)``).
    :param control: the worker's control state (pause and resume show at once).
    :param facts: the read model (``wait`` compares its conflicts).
    :param shutdown: set once the worker is to stop.
    :param restructured: set when a local folder moved or vanished (a pass stops between two files).
    """

    def __init__(self, messages: queue.Queue[tuple[str, Any]], control: ControlState, facts: MirrorFacts, *,
                 shutdown: threading.Event, restructured: threading.Event) -> None:
        self._queue = messages
        self._control = control
        self._facts = facts
        self._shutdown = shutdown
        self._restructured = restructured
        #: ``(when, conflict keys then)`` of the last ``refresh``/``resume`` (None: none yet)
        self._asked: tuple[float, frozenset[tuple[str, str]] | None] | None = None
        #: the tickets of ``wait`` callers still waiting, and whether the worker stopped
        #: taking them (:meth:`close_tickets`): no caller waits on a worker that is gone
        self._tickets_lock = threading.Lock()
        self._tickets: dict[int, Ticket] = {}
        self._tickets_closed = False
        self._closed_message = SHUTTING_DOWN

    def post_dirty(self, paths: Iterable[str], full_scan: bool = False) -> None:
        """Local paths changed (from the watcher)."""
        self._queue.put(("dirty", (list(paths), full_scan)))

    def post_saved(self, paths: Iterable[str]) -> None:
        """Paths whose save the watcher saw complete (closed after writing,
        renamed onto), sent just before their ``post_dirty``."""
        self._queue.put(("saved", list(paths)))

    def post_poll(self) -> None:
        """Look at the server now (from the scheduler, when the next poll is due)."""
        self._queue.put(("poll", None))

    def note_restructure(self) -> None:
        """A local folder was moved or deleted (from the watcher, at once): a
        running pass stops between two files; the full scan that follows
        carries the change instead of writing into the old folder."""
        self._restructured.set()

    def refresh(self) -> None:
        """Poll the server and scan the local folder now (also retries a failed login)."""
        self._note_asked()
        self._queue.put(("refresh", None))

    def pause(self) -> None:
        """Stop syncing after the current pass (status says so at once)."""
        self._control.set(paused=True)
        self._queue.put(("pause", None))

    def resume(self) -> None:
        """Sync again, starting with a full scan and a poll (status says so at once)."""
        was_paused = self._control.now.paused
        self._note_asked()
        self._control.set(paused=False)
        self._queue.put(("resume", was_paused))

    def _note_asked(self) -> None:
        """Remember the conflicts known as a pass is asked for: a ``wait``
        right after counts those the asked pass makes (it may finish first)."""
        self._asked = (time.time(), self._facts.conflict_keys())

    def set_push(self, active: bool) -> None:
        """The push channel came up (True: compare the head once now, then poll
        only every ``push_poll_interval``) or went down (False: normal polling)."""
        self._queue.put(("push_mode", bool(active)))

    def push_update(self, commit_id: str = "") -> None:
        """The server announced a new head: poll now (coalesced with anything
        queued; dropped when ``commit_id`` is the head the last pass saw)."""
        self._queue.put(("push", commit_id))

    def submit(self, fn: Callable[[], None]) -> None:
        """Run ``fn()`` on the worker thread between passes (for helpers such as
        drop-folder filing that need the engine's thread)."""
        self._queue.put(("call", fn))

    def wait_detail(self, timeout: float) -> tuple[bool, str, list[dict[str, str]]]:
        """Block until everything on disk now is synced and verified (see
        :meth:`~ohsync.daemon.worker.SyncWorker.wait`).

        :param timeout: seconds to wait for the pass.
        :returns: ``(synced, message, [{"kind", "path", "reason"}])``: the
            items behind a "not synced".
        """
        return self.wait_result(self.post_wait(), timeout)

    def post_wait(self) -> Ticket:
        """Ask for the pass a ``wait`` waits for, without waiting (any thread):
        the ticket is then handed to :meth:`wait_result` (several mirrors are
        asked at once, then each answer awaited)."""
        started, before = time.time(), self._facts.conflict_keys()
        asked = self._asked
        if asked is not None and started - asked[0] <= ASKED_PASS_WINDOW:
            started, before = asked  # `refresh && wait`: the refresh's pass counts too
        self._asked = None  # the next wait starts from its own beginning
        ticket = Ticket(conflicts_before=before, started=started)
        with self._tickets_lock:
            if self._tickets_closed:
                ticket.message = self._closed_message
                ticket.done.set()
                return ticket
            self._tickets[id(ticket)] = ticket
        self._queue.put(("wait", ticket))
        return ticket

    def wait_result(self, ticket: Ticket, timeout: float, *,
                    deadline: float | None = None) -> tuple[bool, str, list[dict[str, str]]]:
        """Wait up to ``timeout`` seconds for the pass ``ticket`` stands for
        (:meth:`post_wait`); the answer of :meth:`wait_detail`.

        :param deadline: ``time.monotonic()`` by which to give up instead (a
            caller waiting on several workers within one ``timeout``).
        """
        left = timeout if deadline is None else deadline - time.monotonic()
        try:
            if not ticket.done.wait(max(0.0, left)):
                return False, f"timed out after {timeout:g} s; see `ohsync status`", []
        finally:
            with self._tickets_lock:
                self._tickets.pop(id(ticket), None)
        return ticket.synced, ticket.message, [dict(r) for r in ticket.reasons]

    def close_tickets(self, message: str = SHUTTING_DOWN) -> None:
        """The worker takes no more ``wait`` tickets: every one still open is
        answered "not synced" with ``message`` (a caller never outwaits the
        worker that would have answered it), and later ones at once."""
        with self._tickets_lock:
            if not self._tickets_closed:
                self._tickets_closed, self._closed_message = True, message
            tickets, self._tickets = list(self._tickets.values()), {}
        for ticket in tickets:
            if not ticket.done.is_set():
                ticket.synced, ticket.message = False, message
                ticket.done.set()

    def request_shutdown(self) -> None:
        """Ask the worker to stop after the current file, without waiting (any thread)."""
        self._shutdown.set()
        self._queue.put(("shutdown", None))

    @property
    def stopping(self) -> bool:
        """True once shutdown was requested (the engine may check it between files)."""
        return self._shutdown.is_set()
