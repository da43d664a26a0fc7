"""What other threads ask of the sync worker: each request is a message on its queue.

:class:`WorkerRequests` is the part of :class:`~ohsync.daemon.worker.SyncWorker`
that the watcher, the scheduler, the push channel, the socket methods and
the services call from their own threads: it only posts messages (or
submits jobs that run on the worker between passes) and reads the read
model (``daemon/worker/facts.py``) and the control state; everything that
touches the engine happens on the worker thread (``daemon/worker/worker.py``).
Also here: the types the worker's callers name (:class:`Session`,
:data:`SessionFactory`, :class:`FatalError`, :class:`Control`).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..scheduler import Ticket
from ..status import StatusModel
from .facts import MirrorFacts
from ...engine.errors import OhsyncError
from ...engine.events import SyncEvent

__all__ = ["ASKED_PASS_WINDOW", "Control", "FatalError", "Session", "SessionFactory", "WorkerRequests"]

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


class WorkerRequests:
    """The thread-safe requests of the sync worker (a base of ``SyncWorker``)."""

    _queue: queue.Queue[tuple[str, Any]]
    _control: Control
    _status: StatusModel
    _session: Session | None
    _shutdown: threading.Event
    _restructured: threading.Event
    _thread: threading.Thread
    _afresh_on_open: bool
    #: ``(when, conflict keys then)`` of the last ``refresh``/``resume`` (None: none yet)
    _asked: tuple[float, frozenset[tuple[str, str]] | None] | None = None
    facts: MirrorFacts

    def _set_control(self, **changes: Any) -> None:
        """Change the control state and tell the status model."""
        self._control = replace(self._control, **changes)
        self._status.update(**changes)

    def post_dirty(self, paths: Iterable[str], full_scan: bool = False) -> None:
        """Local paths changed (from the watcher)."""
        self._queue.put(("dirty", (list(paths), full_scan)))

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
        self._set_control(paused=True)
        self._queue.put(("pause", None))

    def resume(self) -> None:
        """Sync again, starting with a full scan and a poll (status says so at once)."""
        was_paused = self._control.paused
        self._note_asked()
        self._set_control(paused=False)
        self._queue.put(("resume", was_paused))

    def _note_asked(self) -> None:
        """Remember the conflicts known as a pass is asked for: a ``wait``
        right after counts those the asked pass makes (it may finish first)."""
        self._asked = (time.time(), self.facts.conflict_keys())

    @property
    def control(self) -> Control:
        """The control state now (any thread)."""
        return self._control

    def control_fact(self, name: str) -> Any:
        """One field of :attr:`control` (``paused``, ``problem``, ``problem_message``, ``retry_at``)."""
        return getattr(self._control, name)

    def _set_problem(self, problem: str | None, message: str = "", retry_at: float | None = None) -> None:
        self._set_control(problem=problem, problem_message=message, retry_at=retry_at)

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

    def held_deletes(self) -> list[dict[str, str]]:
        """Deletes held by the safety valve: ``[{"path", "side"}]`` (side: local/remote)."""
        return self.facts.held_deletes()

    def note_activity(self, path: str, action: str, result: str, message: str = "") -> None:
        """Add an item to the activity list (e.g. a filing outcome)."""
        self.facts.note_activity(path, action, result, message)

    def confirm_deletes(self) -> int:
        """Let the held deletes through on the next pass; returns how many are held now."""
        held = len(self.facts.held_deletes())

        def job() -> None:
            if self._session is not None:
                self._session.engine.confirm_deletes()
                self.post_dirty([], full_scan=True)
        self.submit(job)
        self.refresh()
        return held

    def resync(self, keep: str | None = None) -> None:
        """Reconcile everything again.

        While the library's history went backwards (``regression`` in the
        status), or with ``keep="newer"``, this keeps the newer version from
        either side on both (the held paths); otherwise (or with
        ``keep="afresh"``) it forgets what both sides last agreed on.
        Nothing is deleted by a resync: files on one side only are copied to
        the other, different versions are merged or archived as conflicts.
        """
        def job() -> None:
            if self._session is not None:
                engine = self._session.engine
                held = hasattr(engine, "regression") and engine.regression() is not None
                if keep == "newer" or (held and keep != "afresh"):
                    engine.keep_newer()
                else:
                    engine.reset_state()
                self.post_dirty([], full_scan=True)
        if keep != "newer" and self._session is None:
            self._afresh_on_open = True  # a state no session could open (a newer ohsync's) is set aside
        self.submit(job)
        self.refresh()

    def wait(self, timeout: float) -> tuple[bool, str]:
        """Block until everything on disk now is synced and verified.

        Asks for a full local scan (stat-only: no requests when nothing
        changed) and waits for that pass.  Not synced: a path failed, a
        deletion is held by the safety valve, a conflict appeared since the
        wait began (or since a ``refresh``/``resume`` asked at most
        :data:`ASKED_PASS_WINDOW` seconds before it: the pass that request
        started counts, even when it finished first), or a path cannot sync
        (``daemon/attention.py``).

        :returns: ``(synced, message)``.
        """
        synced, message, _ = self.wait_detail(timeout)
        return synced, message

    def wait_detail(self, timeout: float) -> tuple[bool, str, list[dict[str, str]]]:
        """:meth:`wait`, with the items behind a "not synced":
        ``[{"kind", "path", "reason"}]``."""
        started, before = time.time(), self.facts.conflict_keys()
        asked = self._asked
        if asked is not None and started - asked[0] <= ASKED_PASS_WINDOW:
            started, before = asked  # `refresh && wait`: the refresh's pass counts too
        self._asked = None  # the next wait starts from its own beginning
        ticket = Ticket(conflicts_before=before, started=started)
        self._queue.put(("wait", ticket))
        if not ticket.done.wait(timeout):
            return False, f"timed out after {timeout:g} s; see `ohsync status`", []
        return ticket.synced, ticket.message, [dict(r) for r in ticket.reasons]

    def request_shutdown(self) -> None:
        """Ask the worker to stop after the current file, without waiting (any thread)."""
        self._shutdown.set()
        self._queue.put(("shutdown", None))

    def shutdown(self, timeout: float = 60.0) -> bool:
        """Ask the worker to stop after the current pass and wait for it.

        :returns: False when the worker was still busy after ``timeout``.
        """
        self.request_shutdown()
        self.scheduler.stop()
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def stopping(self) -> bool:
        """True once shutdown was requested (the engine may check it between files)."""
        return self._shutdown.is_set()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def activity(self, limit: int = 50) -> list[dict[str, Any]]:
        """The last ``limit`` sync events, oldest first."""
        return self.facts.activity(limit)

    def conflicts(self) -> list[dict[str, Any]]:
        """Conflicts recorded and not settled (``ConflictRecord.as_dict``)."""
        return self.facts.conflicts()

    def damaged(self) -> list[dict[str, str]]:
        """Memory files that do not parse: ``[{"path", "reason"}]``."""
        return self.facts.damaged()

    def skipped(self) -> list[dict[str, str]]:
        """Names that cannot sync: ``[{"path", "reason"}]``."""
        return self.facts.skipped()
