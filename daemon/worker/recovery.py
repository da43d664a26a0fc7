"""How the sync worker opens its mirror and what it does after an error.

:class:`WorkerRecovery` is the part a :class:`~ohsync.daemon.worker.SyncWorker`
holds to open the session (in the worker thread: the engine's SQLite connection
belongs to it) and to decide, from the one classification of the error
(``engine.errors.classify``), what follows a failure of opening or of a
pass: a rejected token → ``auth_required`` (no more polling until login +
refresh, or at once when a newer login was saved); a failure that needs the
person and concerns the whole daemon (no login, no such library) → fatal
(:meth:`WorkerRecovery.fatal`); one that concerns the mirror (its folder is
gone) → ``stopped``; anything else → retry with backoff.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path

from ...engine.errors import StateTooNew, classify
from ...engine.events import SyncEvent
from ..scheduler import Scheduler, backoff_delay
from ..status import StatusModel
from .facts import MirrorFacts
from .requests import ControlState, FatalError, Session, SessionFactory

__all__ = ["WorkerRecovery"]

log = logging.getLogger("ohsync.daemon.worker")  # one logger for all the worker says


class WorkerRecovery:
    """Opening the session and the policy after an error (runs in the worker thread).

    Holds the open session (:attr:`session`) and the retry count.

    :param open_session: opens the engine, given the engine's event listener.
    :param status: the mirror's status model.
    :param control: the worker's control state (the problem it records).
    :param scheduler: the poll clock (a retry is the next poll; a stop halts it).
    :param facts: the read model (read from the engine once it is open).
    :param on_event: the engine's event listener (the worker's).
    :param shutdown: set once the worker is to stop.
    :param post_poll: asks the worker for a poll at once.
    :param finish_tickets: answers the waiting ``wait`` callers ``(synced, message)``.
    :param notify_if_slow: lets subscribers see ``syncing`` if opening takes long.
    :param on_ready: called with the session once it is open; may raise :class:`FatalError`.
    :param on_fatal: called with the error when the mirror cannot run.
    :param login_changed: True when the keyring holds a newer login than the rejected one.
    :param login_command: the command that signs this mirror's account in again.
    :param exit_on_fatal: a fatal error ends the worker (else: the mirror stops).
    :param poll_interval: seconds between polls (the backoff's cap is at least this).
    """

    def __init__(self, open_session: SessionFactory, status: StatusModel, control: ControlState,
                 scheduler: Scheduler, facts: MirrorFacts, *, on_event: Callable[[SyncEvent], None],
                 shutdown: threading.Event, post_poll: Callable[[], None],
                 finish_tickets: Callable[[bool, str], None], notify_if_slow: Callable[[], None],
                 on_ready: Callable[[Session], None], on_fatal: Callable[[BaseException], None],
                 login_changed: Callable[[], bool], login_command: str, exit_on_fatal: bool,
                 poll_interval: float) -> None:
        self._open_session = open_session
        self._status = status
        self._control = control
        self._scheduler = scheduler
        self._facts = facts
        self._on_event = on_event
        self._shutdown = shutdown
        self._post_poll = post_poll
        self._finish_tickets = finish_tickets
        self._notify_if_slow = notify_if_slow
        self._on_ready = on_ready
        self._on_fatal = on_fatal
        self._login_changed = login_changed
        self._login_command = login_command
        self._exit_on_fatal = exit_on_fatal
        self._poll_interval = poll_interval
        #: the open session (None: not open, or closed after an error)
        self.session: Session | None = None
        #: failed attempts in a row (the backoff grows with it; a good pass or a refresh resets it)
        self.attempt = 0
        #: a refresh came after this session read the keyring (a login meanwhile?)
        self.refreshed_since_open = False
        #: `ohsync resync` while the state could not be opened: set a newer ohsync's state aside
        self.afresh_on_open = False
        #: why syncing stopped (logged as an error) until a pass succeeds again; None: it did not
        self.stopped_because: str | None = None

    def _stop(self, problem: str, message: str) -> None:
        """Record the stop ``problem`` (``stopped``, ``auth_required``) and remember it for :meth:`resumed`."""
        self._control.set_problem(problem, message)
        self.stopped_because = message

    def resumed(self) -> None:
        """A pass succeeded: after a stop, say in the log that syncing goes on again (the last
        line of the log would otherwise be the error that stopped it)."""
        if self.stopped_because is not None:
            log.info("syncing resumed (it had stopped: %s)", self.stopped_because.split(". ")[0].rstrip("."))
            self.stopped_because = None

    def open(self) -> bool:
        """Open the session; False (the failure recorded by :meth:`failed`) when it cannot open."""
        self._status.update(checking_since=time.time(), current_path=None)
        self._notify_if_slow()
        try:
            session = self._open_session_afresh()
        except BaseException as exc:  # noqa: BLE001 - classified in _failed, as the errors of a pass
            self._status.update(checking_since=None)
            self.failed(exc)
            return False
        self.session = session
        self.refreshed_since_open = False  # this session read the keyring just now
        self._status.update(checking_since=None, library=session.library_name)
        self._facts.refresh(session.engine)
        try:
            self._on_ready(session)
        except FatalError as exc:   # e.g. another daemon already syncs this folder
            self.close_session()
            self.failed(exc)
            return False
        except Exception:
            log.exception("starting the watcher failed; local edits are seen only by periodic scans")
        return True

    def _open_session_afresh(self) -> Session:
        """Open the session; after `ohsync resync`, a state database of a newer
        ohsync is set aside (kept) and a new one started."""
        try:
            return self._open_session(self._on_event)
        except StateTooNew as exc:
            if not self.afresh_on_open:
                raise
            from ...engine.state_schema import set_aside
            moved = set_aside(Path(str(exc.db_path)), "newer")
            log.warning("resync: the state database of a newer ohsync was moved to %s; comparing both sides "
                        "afresh (nothing is deleted)", moved)
            return self._open_session(self._on_event)
        finally:
            self.afresh_on_open = False

    def fatal(self, exc: BaseException, message: str) -> None:
        """This mirror cannot run with its configuration (``message`` says
        why and what to do): end the worker (one mirror: the daemon exits),
        or stop this mirror until a refresh."""
        self._finish_tickets(False, message)
        if self._exit_on_fatal:
            self._control.set_problem("error", message)
            self._on_fatal(exc)
            self._shutdown.set()
            return
        self._stop("stopped", message)
        self._scheduler.halt()
        self._on_fatal(exc)

    def close_session(self) -> None:
        """Close the open session (its engine and state DB), if any."""
        if self.session is not None:
            try:
                self.session.close()
            except Exception:
                log.exception("closing the sync engine failed")
            self.session = None

    def failed(self, exc: BaseException) -> None:
        """Record an error of opening or of a pass and plan what comes next,
        from its one classification (``engine.errors.classify``): a rejected
        login waits for ``ohsync login``; a failure no retry can mend stops
        the mirror (no login or library at all: :meth:`fatal`); anything
        else is retried with backoff (``Retry-After`` honoured)."""
        failure = classify(exc)
        if failure.needs == "login" and self._login_changed():
            # `ohsync login` saved a new token while the old one was in use: sign in with it
            log.info("the server rejected the token, but a new login was saved meanwhile; using it")
            self.close_session()
            if not self._shutdown.is_set():
                self._scheduler.poll_in(0.5)
            return
        if failure.needs == "login" and self.refreshed_since_open and self.session is not None:
            # a refresh came after this session read the token (a login meanwhile?):
            # read the keyring again before saying a login is needed
            log.info("the server rejected the token; opening again with the saved login")
            self.close_session()
            self._post_poll()
            return
        if failure.needs == "login":
            log.error("the server rejected the token: %s", failure.message)
            self._stop("auth_required", (
                f"The server rejected the saved login. Run `{self._login_command}` to sign in again; "
                "the running daemon then signs in with the new login."))
            self._scheduler.halt()
            self.close_session()
            return
        if failure.scope == "daemon" and failure.permanent:  # no login or no library to sync at all
            log.error("%s: %s", failure.title, failure.message)
            self.fatal(exc, failure.message)
            return
        if failure.scope == "mirror" and failure.permanent:  # e.g. the mirror folder is gone
            log.error("%s", failure.message)
            self._stop("stopped", failure.message)
            self._scheduler.halt()
            return
        self.attempt += 1
        if failure.retry_after is not None:
            delay = max(failure.retry_after, 1.0)
        else:
            delay = backoff_delay(self.attempt, cap=max(300.0, self._poll_interval))
        if failure.origin == "network":
            problem, message = "offline", f"Cannot reach the server ({failure.message})"
        elif failure.origin == "internal":
            problem, message = "error", failure.message
            log.error("sync pass failed", exc_info=exc)
        else:
            problem, message = "error", f"{failure.title}: {failure.message}"
        log.warning("%s; retry in %.0f s", message, delay)
        self._control.set_problem(problem, message, time.time() + delay)
        if not self._shutdown.is_set():
            self._scheduler.poll_in(delay)
