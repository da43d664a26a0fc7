"""How the sync worker opens its mirror and what it does after an error.

:class:`WorkerRecovery` is the part of :class:`~ohsync.daemon.worker.SyncWorker`
that opens the session (in the worker thread: the engine's SQLite connection
belongs to it) and decides, from the one classification of the error
(``engine.errors.classify``), what follows a failure of opening or of a
pass: a rejected token → ``auth_required`` (no more polling until login +
refresh, or at once when a newer login was saved); a failure that needs the
person and concerns the whole daemon (no login, no such library) → fatal
(:meth:`WorkerRecovery._fatal`); one that concerns the mirror (its folder is
gone) → ``stopped``; anything else → retry with backoff.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..scheduler import Scheduler, backoff_delay
from ..status import StatusModel
from .requests import FatalError, Session, SessionFactory, WorkerRequests
from ...engine.errors import StateTooNew, classify
from ...engine.events import SyncEvent

__all__ = ["WorkerRecovery"]

log = logging.getLogger("ohsync.daemon.worker")  # one logger for all the worker says


class WorkerRecovery(WorkerRequests):
    """Opening the session and the policy after an error (a base of ``SyncWorker``;
    runs in the worker thread)."""

    _open_session: SessionFactory
    _status: StatusModel
    _session: Session | None
    _queue: queue.Queue[tuple[str, Any]]
    _shutdown: threading.Event
    _on_ready: Callable[[Session], None]
    _on_fatal: Callable[[BaseException], None]
    _login_changed: Callable[[], bool]
    _login_command: str
    _exit_on_fatal: bool
    _poll_interval: float
    _refreshed_since_open: bool
    _afresh_on_open: bool
    _attempt: int
    scheduler: Scheduler

    def _notify_if_slow(self) -> None:
        raise NotImplementedError

    def _refresh_caches(self) -> None:
        raise NotImplementedError

    def _finish_tickets(self, synced: bool, message: str) -> None:
        raise NotImplementedError

    def _on_event(self, event: SyncEvent) -> None:
        raise NotImplementedError

    def _open(self) -> bool:
        """Open the session; False (the failure recorded by :meth:`_failed`) when it cannot open."""
        self._status.update(checking_since=time.time(), current_path=None)
        self._notify_if_slow()
        try:
            session = self._open_session_afresh()
        except BaseException as exc:  # noqa: BLE001 - classified in _failed, as the errors of a pass
            self._status.update(checking_since=None)
            self._failed(exc)
            return False
        self._session = session
        self._refreshed_since_open = False  # this session read the keyring just now
        self._status.update(checking_since=None, library=session.library_name)
        self._refresh_caches()
        try:
            self._on_ready(session)
        except FatalError as exc:   # e.g. another daemon already syncs this folder
            self._close_session()
            self._failed(exc)
            return False
        except Exception:  # noqa: BLE001
            log.exception("starting the watcher failed; local edits are seen only by periodic scans")
        return True

    def _open_session_afresh(self) -> Session:
        """Open the session; after `ohsync resync`, a state database of a newer
        ohsync is set aside (kept) and a new one started."""
        try:
            return self._open_session(self._on_event)
        except StateTooNew as exc:
            if not self._afresh_on_open:
                raise
            from ...engine.state_schema import set_aside
            moved = set_aside(Path(str(exc.db_path)), "newer")
            log.warning("resync: the state database of a newer ohsync was moved to %s; comparing both sides "
                        "afresh (nothing is deleted)", moved)
            return self._open_session(self._on_event)
        finally:
            self._afresh_on_open = False

    def _fatal(self, exc: BaseException, message: str) -> None:
        """This mirror cannot run with its configuration (``message`` says
        why and what to do): end the worker (one mirror: the daemon exits),
        or stop this mirror until a refresh."""
        self._finish_tickets(False, message)
        if self._exit_on_fatal:
            self._set_problem("error", message)
            self._on_fatal(exc)
            self._shutdown.set()
            return
        self._set_problem("stopped", message)
        self.scheduler.halt()
        self._on_fatal(exc)

    def _close_session(self) -> None:
        if self._session is not None:
            try:
                self._session.close()
            except Exception:  # noqa: BLE001
                log.exception("closing the sync engine failed")
            self._session = None

    def _failed(self, exc: BaseException) -> None:
        """Record an error of opening or of a pass and plan what comes next,
        from its one classification (``engine.errors.classify``): a rejected
        login waits for ``ohsync login``; a failure no retry can mend stops
        the mirror (no login or library at all: :meth:`_fatal`); anything
        else is retried with backoff (``Retry-After`` honoured)."""
        failure = classify(exc)
        if failure.needs == "login" and self._login_changed():
            # `ohsync login` saved a new token while the old one was in use: sign in with it
            log.info("the server rejected the token, but a new login was saved meanwhile; using it")
            self._close_session()
            if not self._shutdown.is_set():
                self.scheduler.poll_in(0.5)
            return
        if failure.needs == "login" and self._refreshed_since_open and self._session is not None:
            # a refresh came after this session read the token (a login meanwhile?):
            # read the keyring again before saying a login is needed
            log.info("the server rejected the token; opening again with the saved login")
            self._close_session()
            self._queue.put(("poll", None))
            return
        if failure.needs == "login":
            log.error("the server rejected the token: %s", failure.message)
            self._set_problem("auth_required", (
                f"The server rejected the saved login. Run `{self._login_command}` to sign in again; "
                "the running daemon then signs in with the new login."))
            self.scheduler.halt()
            self._close_session()
            return
        if failure.scope == "daemon" and failure.permanent:  # no login or no library to sync at all
            log.error("%s: %s", failure.title, failure.message)
            self._fatal(exc, failure.message)
            return
        if failure.scope == "mirror" and failure.permanent:  # e.g. the mirror folder is gone
            log.error("%s", failure.message)
            self._set_problem("stopped", failure.message)
            self.scheduler.halt()
            return
        self._attempt += 1
        if failure.retry_after is not None:
            delay = max(failure.retry_after, 1.0)
        else:
            delay = backoff_delay(self._attempt, cap=max(300.0, self._poll_interval))
        if failure.origin == "network":
            problem, message = "offline", f"Cannot reach the server ({failure.message})"
        elif failure.origin == "internal":
            problem, message = "error", failure.message
            log.error("sync pass failed", exc_info=exc)
        else:
            problem, message = "error", f"{failure.title}: {failure.message}"
        log.warning("%s; retry in %.0f s", message, delay)
        self._set_problem(problem, message, time.time() + delay)
        if not self._shutdown.is_set():
            self.scheduler.poll_in(delay)
