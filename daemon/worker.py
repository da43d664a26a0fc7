"""The sync worker: the one thread that owns the engine and its state DB.

Everything that changes sync state arrives as a message on the worker's
queue (dirty paths from the watcher, "poll" from the :class:`Scheduler`,
refresh, wait, pause, resume, shutdown from the socket); the worker coalesces
what is queued into one :meth:`SyncEngine.sync` pass at a time, records the
facts in the :class:`StatusModel`, and decides what happens after an error:
offline / server trouble → retry with backoff (``Retry-After`` honoured);
rejected token → ``auth_required``, no more polling until login + refresh or a
restart; missing mirror → ``stopped``; a missing library or login at start →
fatal (the daemon exits with the message).  The engine is opened inside this
thread because its SQLite connection belongs to the thread that made it.
"""

from __future__ import annotations

import collections
import logging
import queue
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ohsync.daemon.attention import attention_items, conflict_since, wait_verdict
from ohsync.daemon.logs import log_action
from ohsync.daemon.memory_trim import release_memory, worth_releasing
from ohsync.daemon.status import CHECK_GRACE, StatusModel, iso_time, scan_interval
from ohsync.engine.errors import (
    LibraryNotFound,
    NetworkError,
    OhsyncError,
    StateTooNew,
    TwoFactorRequired,
    classify,
)
from ohsync.engine.events import SyncEvent, SyncReport

__all__ = ["Session", "SessionFactory", "FatalError", "Scheduler", "SyncWorker", "backoff_delay"]

log = logging.getLogger(__name__)


class Session(Protocol):
    """What the worker needs from an opened mirror (see ``daemon/session.py``)."""

    engine: Any
    library_name: str

    def close(self) -> None: ...


#: ``open_session(on_event)`` opens the engine for the mirror; called in the worker thread.
SessionFactory = Callable[[Callable[[SyncEvent], None]], Session]


class FatalError(OhsyncError):
    """The daemon cannot run at all with this configuration (no login, no library)."""


#: Seconds between local deletes seen by the watcher and the full scan that carries them out.
RESCAN_DELAY = 2.0
#: full scans are spaced by 200 × their measured duration (at most 0.5 % of the time) ...
SCAN_COST_FACTOR = 200.0
#: ... but a missed watcher event waits at most an hour
MAX_SCAN_INTERVAL = 3600.0


def backoff_delay(attempt: int, *, base: float = 2.0, cap: float = 300.0) -> float:
    """Seconds before retry number ``attempt`` (1, 2, …): exponential with ±20 % jitter."""
    delay = min(cap, base ** max(1, attempt))
    return delay * random.uniform(0.8, 1.2)


class Scheduler:
    """Posts "poll" to the worker when the next poll is due.

    The worker decides *when* (:meth:`poll_in` after every pass: the poll
    interval, or a backoff after an error; :meth:`halt` when polling must
    stop); this thread only keeps the clock.

    :param post_poll: called from the scheduler thread when a poll is due.
    """

    def __init__(self, post_poll: Callable[[], None]) -> None:
        self._post = post_poll
        self._cond = threading.Condition()
        self._due: float | None = None
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="ohsync-scheduler", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def poll_in(self, seconds: float) -> None:
        """Post the next poll ``seconds`` from now (replacing any earlier plan)."""
        with self._cond:
            self._due = time.monotonic() + max(0.0, seconds)
            self._cond.notify_all()

    def halt(self) -> None:
        """No polls until the next :meth:`poll_in`."""
        with self._cond:
            self._due = None
            self._cond.notify_all()

    @property
    def due_in(self) -> float | None:
        """Seconds until the next poll, or None when halted."""
        with self._cond:
            return None if self._due is None else self._due - time.monotonic()

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopping:
                    return
                if self._due is None:
                    self._cond.wait()
                    continue
                wait = self._due - time.monotonic()
                if wait > 0:
                    self._cond.wait(timeout=wait)
                    continue
                self._due = None
            self._post()


@dataclass
class _Ticket:
    """A ``wait``/``refresh`` caller waiting for the next pass to finish."""

    done: threading.Event = field(default_factory=threading.Event)
    synced: bool = False
    message: str = ""
    reasons: tuple[dict[str, str], ...] = ()
    #: conflicts known when the wait began (None: not read from the engine yet)
    conflicts_before: frozenset[tuple[str, str]] | None = None
    started: float = 0.0


@dataclass
class _Work:
    """What the next pass must cover (coalesced from many messages)."""

    dirty: set[str] = field(default_factory=set)
    full_scan: bool = False
    check_remote: bool = False
    tickets: list[_Ticket] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.dirty or self.full_scan or self.check_remote)


class SyncWorker:
    """The sync worker thread.

    :param open_session: opens the engine (called in the worker thread).
    :param status: where the facts go.
    :param poll_interval: seconds between polls when all is well.
    :param publish: sends an event to socket subscribers (``{"type": …}``).
    :param on_ready: called with the session once it is open (the daemon
        starts the watcher there); called in the worker thread.
    :param on_fatal: called with the error when the daemon cannot run.
    :param before_pass: called in the worker thread before and after every
        pass (the daemon starts or restarts the watcher there).
    :param login_changed: True when the keyring holds a newer login than the
        one the server rejected (then the worker signs in with it at once).
    :param push_poll_interval: seconds between the safety polls while push
        notifications arrive (:meth:`set_push`).
    """

    def __init__(
        self,
        open_session: SessionFactory,
        status: StatusModel,
        *,
        poll_interval: float,
        publish: Callable[[dict[str, Any]], None] = lambda event: None,
        on_ready: Callable[[Session], None] = lambda session: None,
        on_fatal: Callable[[BaseException], None] = lambda exc: None,
        before_pass: Callable[[], None] = lambda: None,
        login_changed: Callable[[], bool] = lambda: False,
        activity_size: int = 200,
        push_poll_interval: float = 300.0,
    ) -> None:
        self._open_session = open_session
        self._status = status
        self._poll_interval = poll_interval
        self._push_poll_interval = push_poll_interval
        self._push = False
        self._known_head: str | None = None
        self._scan_interval = scan_interval(poll_interval)
        self._publish = publish
        self._on_ready = on_ready
        self._on_fatal = on_fatal
        self._before_pass = before_pass
        self._login_changed = login_changed
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._session: Session | None = None
        self._work = _Work(full_scan=True, check_remote=True)  # the initial sync
        self._retry: set[str] = set()
        self._calls: list[Callable[[], None]] = []
        self._paused = False
        self._shutdown = threading.Event()
        self._restructured = threading.Event()
        self._attempt = 0
        self._last_full_scan = 0.0
        self._last_scan_seconds = 0.0  # how long the last full scan took (wall time)
        self._lock = threading.Lock()  # guards the caches below (read by socket threads)
        self._activity: collections.deque[dict[str, Any]] = collections.deque(maxlen=activity_size)
        self._conflicts: list[dict[str, Any]] = []
        self._damaged: list[dict[str, str]] = []
        self._held: list[dict[str, str]] = []
        self._skipped: list[dict[str, str]] = []
        self._failures: list[dict[str, Any]] = []
        self._refreshed_since_open = False
        self._afresh_on_open = False  # `ohsync resync` while the state could not be opened
        self._caches_loaded = False
        self._big_pass = False  # the last pass was big: give its memory back (daemon/memory_trim.py)
        self._repeats: dict[tuple[str, str], tuple[dict[str, Any], int, float]] = {}
        self.scheduler = Scheduler(lambda: self._queue.put(("poll", None)))
        self._thread = threading.Thread(target=self._run, name="ohsync-sync-worker", daemon=True)

    # ----------------------------------------------------------------- API (any thread)

    def start(self) -> None:
        self.scheduler.start()
        self._queue.put(("start", None))  # the initial sync: full scan + remote check
        self._thread.start()

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
        self._queue.put(("refresh", None))

    def pause(self) -> None:
        """Stop syncing after the current pass (status says so at once)."""
        self._status.update(paused=True)
        self._queue.put(("pause", None))

    def resume(self) -> None:
        """Sync again, starting with a full scan and a poll."""
        self._status.update(paused=False)
        self._queue.put(("resume", None))

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
        with self._lock:
            return list(self._held)

    def note_activity(self, path: str, action: str, result: str, message: str = "") -> None:
        """Add an item to the activity list (e.g. a filing outcome)."""
        item = {"time": iso_time(time.time()), "path": path, "action": action, "result": result}
        if message:
            item["message"] = message
        with self._lock:
            self._activity.append(item)
        log_action(path, action, result, "up" if action == "file" else "", message)

    def confirm_deletes(self) -> int:
        """Let the held deletes through on the next pass; returns how many are held now."""
        held = int(self._status.get("held_deletes"))

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
        wait began, or a path cannot sync (``daemon/attention.py``).

        :returns: ``(synced, message)``.
        """
        synced, message, _ = self.wait_detail(timeout)
        return synced, message

    def wait_detail(self, timeout: float) -> tuple[bool, str, list[dict[str, str]]]:
        """:meth:`wait`, with the items behind a "not synced":
        ``[{"kind", "path", "reason"}]``."""
        with self._lock:
            before = (frozenset((str(c.get("path")), str(c.get("archived"))) for c in self._conflicts)
                      if self._caches_loaded else None)
        ticket = _Ticket(conflicts_before=before, started=time.time())
        self._queue.put(("wait", ticket))
        if not ticket.done.wait(timeout):
            return False, f"timed out after {timeout:g} s; see `ohsync status`", []
        return ticket.synced, ticket.message, [dict(r) for r in ticket.reasons]

    def shutdown(self, timeout: float = 60.0) -> bool:
        """Ask the worker to stop after the current pass and wait for it.

        :returns: False when the worker was still busy after ``timeout``.
        """
        self._shutdown.set()
        self._queue.put(("shutdown", None))
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
        with self._lock:
            items = list(self._activity)
        return items[-limit:] if limit > 0 else []

    def conflicts(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._conflicts)

    def damaged(self) -> list[dict[str, str]]:
        with self._lock:
            return list(self._damaged)

    def skipped(self) -> list[dict[str, str]]:
        """Names that cannot sync: ``[{"path", "reason"}]``."""
        with self._lock:
            return list(self._skipped)

    # ----------------------------------------------------------------- the thread

    def _run(self) -> None:
        try:
            while not self._shutdown.is_set():
                msg = self._queue.get()
                self._handle(msg)
                while True:  # coalesce everything already queued into one pass
                    try:
                        self._handle(self._queue.get_nowait())
                    except queue.Empty:
                        break
                if self._shutdown.is_set():
                    break
                self._step()
        except Exception as exc:  # noqa: BLE001 - last resort: say so and let the daemon exit
            log.exception("the sync worker crashed")
            self._status.update(problem="error", problem_message=f"Internal error in the sync worker: {exc!r}")
            self._on_fatal(exc)
        finally:
            self._finish_tickets(False, "ohsync is shutting down")
            self._close_session()

    def _handle(self, msg: tuple[str, Any]) -> None:
        kind, arg = msg
        work = self._work
        if kind == "dirty":
            paths, full_scan = arg
            work.dirty.update(paths)
            work.full_scan = work.full_scan or full_scan
        elif kind == "poll":
            work.check_remote = True
            work.dirty.update(self._retry)
            self._retry.clear()
            if time.monotonic() - self._last_full_scan >= self._full_scan_every():
                work.full_scan = True
        elif kind == "push":
            if not arg or arg != self._known_head:
                work.check_remote = True
                work.dirty.update(self._retry)
                self._retry.clear()
        elif kind == "push_mode":
            self._push = arg
            self._status.update(notifications="push" if arg else "polling")
            if arg:
                work.check_remote = True  # events sent while we were away are lost: look once
            else:
                due = self.scheduler.due_in
                self.scheduler.poll_in(self._poll_interval if due is None else min(due, self._poll_interval))
        elif kind in ("refresh", "wait"):
            work.full_scan = True
            if kind == "refresh":
                work.check_remote = True
            else:
                work.tickets.append(arg)
            if kind == "refresh":
                self._refreshed_since_open = True  # e.g. after `ohsync login`: a new token may wait
            if kind == "refresh" and self._session is not None and hasattr(self._session.engine, "release_failures"):
                self._session.engine.release_failures()  # the person acted: try held paths once more
            if self._status.get("problem") in ("auth_required", "offline", "error", "stopped") and kind == "refresh":
                self._status.update(problem=None, problem_message="", retry_at=None)
                self._attempt = 0
        elif kind == "pause":
            self._paused = True
            self._status.update(paused=True)
        elif kind == "resume":
            if self._paused:
                self._paused = False
                work.full_scan = work.check_remote = True
                self._status.update(paused=False)
        elif kind == "shutdown":
            self._shutdown.set()
        elif kind == "call":
            self._calls.append(arg)
        self._status.update(pending_up=len(work.dirty))

    def _finish_tickets(self, synced: bool, message: str) -> None:
        tickets, self._work.tickets = self._work.tickets, []
        for t in tickets:
            t.synced, t.message = synced, message
            t.done.set()

    def _blocked(self) -> str | None:
        """Why no pass may run now, or None."""
        if self._paused:
            return "syncing is paused"
        problem = self._status.get("problem")
        if problem in ("auth_required", "stopped"):
            return self._status.get("problem_message") or problem
        retry_at = self._status.get("retry_at")
        if problem in ("offline", "error") and retry_at is not None and time.time() < retry_at - 0.5:
            return self._status.get("problem_message") or problem  # wait for the backoff to end
        return None

    def _step(self) -> None:
        blocked = self._blocked()
        if blocked:
            self._finish_tickets(False, blocked)
            return
        if self._session is None and not self._open():
            return
        # submitted jobs first: a confirm or a resync must shape the pass that follows
        self._drain()
        while self._calls:  # including jobs that arrived while the session opened
            calls, self._calls = self._calls, []
            for fn in calls:
                try:
                    fn()
                except Exception:  # noqa: BLE001 - a helper's failure must not stop syncing
                    log.exception("a job submitted to the sync worker failed")
            self._drain()
        if self._work or self._work.tickets:
            self._maintain()
            self._pass()
            if self._big_pass:  # its lists are gone now; hand the pages back
                self._big_pass = False
                release_memory()
            self._maintain()

    def _drain(self) -> None:
        """Take in messages the jobs just queued (e.g. a full scan after a resync)."""
        while True:
            try:
                self._handle(self._queue.get_nowait())
            except queue.Empty:
                return

    def _maintain(self) -> None:
        try:
            self._before_pass()
        except Exception:  # noqa: BLE001 - e.g. the watcher cannot restart yet
            log.exception("keeping the daemon's helpers alive failed")

    # ----------------------------------------------------------------- opening

    def _open(self) -> bool:
        self._status.update(checking_since=time.time(), current_path=None)
        self._notify_if_slow()
        try:
            session = self._open_session_afresh()
        except (FatalError, LibraryNotFound, TwoFactorRequired) as exc:
            log.error("%s: %s", exc.title, exc.message)
            self._status.update(checking_since=None, problem="error", problem_message=exc.message)
            self._finish_tickets(False, exc.message)
            self._on_fatal(exc)
            self._shutdown.set()
            return False
        except BaseException as exc:  # noqa: BLE001 - classified below
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
            log.error("%s: %s", exc.title, exc.message)
            self._status.update(problem="error", problem_message=exc.message)
            self._finish_tickets(False, exc.message)
            self._close_session()
            self._on_fatal(exc)
            self._shutdown.set()
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
            from ohsync.engine.state_schema import set_aside
            moved = set_aside(Path(str(exc.db_path)), "newer")
            log.warning("resync: the state database of a newer ohsync was moved to %s; comparing both sides "
                        "afresh (nothing is deleted)", moved)
            return self._open_session(self._on_event)
        finally:
            self._afresh_on_open = False

    def _close_session(self) -> None:
        if self._session is not None:
            try:
                self._session.close()
            except Exception:  # noqa: BLE001
                log.exception("closing the sync engine failed")
            self._session = None

    # ----------------------------------------------------------------- one pass

    def _pass(self) -> None:
        assert self._session is not None
        work, self._work = self._work, _Work()
        paths = None if work.full_scan else sorted(work.dirty)
        started = time.time()
        # a pass that finds nothing must change no state (no syncing→idle flicker):
        # "syncing" shows once there is work (_on_event) or the check takes long
        self._status.update(checking_since=started, pending_up=len(work.dirty))
        self._notify_if_slow()
        try:
            self._restructured.clear()
            report: SyncReport = self._session.engine.sync(
                paths, check_remote=work.check_remote,
                should_stop=lambda: self._shutdown.is_set() or self._restructured.is_set())
        except BaseException as exc:  # noqa: BLE001 - classified in _failed
            # keep the work for the retry, together with anything that arrived meanwhile
            self._work.dirty |= work.dirty
            self._work.full_scan |= work.full_scan
            self._work.check_remote = True
            self._work.tickets[:0] = work.tickets
            self._status.update(syncing=False, checking_since=None, transfer=None, current_path=None,
                                pending_up=len(self._work.dirty))
            self._failed(exc)
            message = self._status.get("problem_message") or str(exc)
            self._finish_tickets(False, message)
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            return
        if report.interrupted and not self._shutdown.is_set():
            # a local folder moved or vanished mid-pass: rescan before writing anything more
            log.info("a local folder was moved or deleted during the pass; scanning again")
            self._status.update(syncing=False, transfer=None, current_path=None)
            self._work.full_scan = self._work.check_remote = True
            self._work.dirty |= work.dirty
            self._work.tickets[:0] = work.tickets
            return
        if report.interrupted:
            log.info("stopped between two files for shutdown; the rest syncs on the next start")
            self._status.update(syncing=False, checking_since=None, transfer=None, current_path=None)
            self._finish_tickets(False, "ohsync is shutting down")
            for t in work.tickets:
                t.synced, t.message = False, "ohsync is shutting down"
                t.done.set()
            return
        self._attempt = 0
        if report.rescan:  # local deletes wait for a full scan that sees them all
            timer = threading.Timer(RESCAN_DELAY, self.post_dirty, args=([],), kwargs={"full_scan": True})
            timer.daemon = True
            timer.start()
        self._retry |= {p for p, _ in report.errors}
        now = time.time()
        busy = report.transferred or report.merged or report.conflicts or report.errors or report.moved or report.deleted_local or report.deleted_remote
        facts: dict[str, Any] = {
            "syncing": False, "checking_since": None, "transfer": None, "current_path": None,
            "phase": "running", "problem": None, "problem_message": "", "retry_at": None,
            "errors": len(self._retry), "pending_up": len(self._work.dirty),
            "requests": self._status.get("requests") + report.requests,
        }
        if busy or self._status.get("last_sync") is None:
            facts["last_sync"] = now  # the last time something was carried across: idle polls move nothing
        if work.check_remote:
            facts["last_poll"] = now
            facts["polls"] = self._status.get("polls") + 1
        if work.full_scan:
            facts["last_scan"] = now
            self._last_full_scan = time.monotonic()
            if not busy:  # the cost of looking, not of what a busy pass carried across
                self._last_scan_seconds = now - started
        carried = len(report.uploaded) + len(report.downloaded) + len(report.merged) + len(report.moved) + \
            len(report.deleted_local) + len(report.deleted_remote)
        self._big_pass = worth_releasing(full_scan=work.full_scan, carried=carried, dirty=len(work.dirty),
                                         seconds=now - started)
        if not getattr(report, "idle", False) or not self._caches_loaded:
            self._refresh_caches()  # an idle pass read and changed nothing: the caches hold
        self._status.update(**facts)
        log.log(logging.INFO if busy else logging.DEBUG,
                "sync pass in %.2f s: %d up, %d down, %d merged, %d moved, %d deleted here, %d trashed on the "
                "server, %d conflicts, %d errors, %d requests",
                now - started, len(report.uploaded), len(report.downloaded), len(report.merged),
                len(report.moved), len(report.deleted_local), len(report.deleted_remote),
                len(report.conflicts), len(report.errors), report.requests)
        for path, message in report.errors:
            log.warning("%s: %s", path, message)
        for t in work.tickets:
            self._settle(t, report)
        if work.check_remote and not getattr(report, "idle", False):
            self._known_head = self._engine_head()
        if work.check_remote and not self._shutdown.is_set():
            self.scheduler.poll_in(self._push_poll_interval if self._push else self._poll_interval)

    def _full_scan_every(self) -> float:
        """Seconds between the periodic stat-only full scans: the configured
        interval, stretched so that scans take at most 0.5 % of the time
        (200 × the last scan's duration: a 30,000-file mirror scanned in 2 s
        is scanned every 400 s)."""
        return max(self._scan_interval, min(MAX_SCAN_INTERVAL, SCAN_COST_FACTOR * self._last_scan_seconds))

    def _engine_head(self) -> str | None:
        """The head commit the engine saw last (None when it cannot say)."""
        state = getattr(getattr(self._session, "engine", None), "state", None)
        try:
            head = state.get_meta("head") if state is not None else None
        except Exception:  # noqa: BLE001 - only an optimisation
            return None
        return head if isinstance(head, str) else None

    def _settle(self, ticket: _Ticket, report: SyncReport) -> None:
        """Answer a ``wait``: synced only if nothing failed, is held, conflicted
        since the wait began or cannot sync."""
        with self._lock:
            conflicts, held, skipped = list(self._conflicts), list(self._held), list(self._skipped)
            failures = list(self._failures)
        # paths failing in this pass, and those still waiting out a backoff or the person
        errors = list(report.errors)
        errors += [(str(f["path"]), str(f.get("reason") or "failed")) for f in failures
                   if f.get("path") not in {p for p, _ in errors}]
        before = ticket.conflicts_before
        if before is None:  # the wait came before the engine's lists were read: go by time
            new = [c for c in conflicts if conflict_since(c, ticket.started)]
        else:
            new = [c for c in conflicts if (str(c.get("path")), str(c.get("archived"))) not in before]
        verdict = wait_verdict(errors=errors, held=[(h["path"], h["side"]) for h in held],
                               new_conflicts=new, skipped=[(s["path"], s["reason"]) for s in skipped])
        ticket.synced, ticket.message, ticket.reasons = verdict.synced, verdict.message, verdict.reasons
        ticket.done.set()

    def _notify_if_slow(self) -> None:
        """Let subscribers see ``syncing`` once a check outlasts :data:`CHECK_GRACE`."""
        timer = threading.Timer(CHECK_GRACE + 0.05, self._status.notify)
        timer.daemon = True
        timer.start()

    def _failed(self, exc: BaseException) -> None:
        """Record an error of opening or of a pass and plan what comes next,
        from its one classification (``engine.errors.classify``)."""
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
            self._status.update(problem="auth_required", problem_message=(
                "The server rejected the saved login. Run `ohsync login` to sign in again; "
                "the running daemon then signs in with the new login."))
            self.scheduler.halt()
            self._close_session()
            return
        if failure.scope == "mirror" and failure.permanent:  # e.g. the mirror folder is gone
            log.error("%s", failure.message)
            self._status.update(problem="stopped", problem_message=failure.message)
            self.scheduler.halt()
            return
        self._attempt += 1
        if failure.retry_after is not None:
            delay = max(failure.retry_after, 1.0)
        else:
            delay = backoff_delay(self._attempt, cap=max(300.0, self._poll_interval))
        if isinstance(exc, NetworkError):
            problem, message = "offline", f"Cannot reach the server ({exc.message})"
        elif isinstance(exc, OhsyncError):
            problem, message = "error", f"{exc.title}: {exc.message}"
        else:
            problem, message = "error", f"Internal error: {exc!r}; see the log"
            log.error("sync pass failed", exc_info=exc)
        log.warning("%s; retry in %.0f s", message, delay)
        self._status.update(problem=problem, problem_message=message, retry_at=time.time() + delay)
        if not self._shutdown.is_set():
            self.scheduler.poll_in(delay)

    def _refresh_caches(self) -> None:
        assert self._session is not None
        engine = self._session.engine
        try:
            conflicts = [c.as_dict() for c in engine.conflicts()]
            damaged = [{"path": p, "reason": r} for p, r in engine.damaged()]
            skipped = list(engine.skipped())
            held = list(engine.held_deletes()) if hasattr(engine, "held_deletes") else []
            failures = list(engine.failures()) if hasattr(engine, "failures") else []
            clock = engine.clock_offset() if hasattr(engine, "clock_offset") else None
            regression = engine.regression() if hasattr(engine, "regression") else None
        except Exception:  # noqa: BLE001 - status must not die on a read
            log.exception("reading conflicts/damaged from the engine failed")
            return
        with self._lock:
            self._conflicts, self._damaged = conflicts, damaged
            self._held = [{"path": p, "side": side} for p, side in held]
            self._skipped = [{"path": p, "reason": r} for p, r in skipped]
            self._failures = failures
            self._caches_loaded = True
        was_held = self._status.get("held_deletes")
        items = attention_items(held=held, damaged=[(d["path"], d["reason"]) for d in damaged], skipped=skipped)
        was_regressed = self._status.get("regression")
        self._status.update(conflicts=len(conflicts), damaged=len(damaged), skipped=len(skipped),
                            held_deletes=len(held), clock_offset=clock, attention=tuple(items),
                            failures=tuple(failures), regression=regression)
        if regression and not was_regressed:
            log.warning("%s", regression)
            self._publish({"type": "error", "kind": "regression", "message": regression})
        if held and not was_held:
            # side is where the deletion would be carried out: "remote" holds a deletion made here
            made = {"remote": "made here", "local": "made on the server"}
            sides = sorted({made.get(side, side) for _, side in held})
            message = (f"{len(held)} deletion(s) ({' and '.join(sides)}) are held because they are more than "
                       "the safety limit; run `ohsync confirm-deletes` to carry them out, or restore the files")
            log.warning("%s", message)
            self._publish({"type": "error", "kind": "held_deletes", "count": len(held), "message": message})

    # ----------------------------------------------------------------- engine events

    def _coalesce(self, event: SyncEvent, now: float) -> bool:
        """Fold a repeated failure into its first activity line ("failed 22
        times since 10:02"); a success of the path ends the run.  Caller holds the lock."""
        if event.kind != "error":
            for key in [k for k in self._repeats if k[0] == event.path]:
                del self._repeats[key]
            return False
        key = (event.path, event.message)
        seen = self._repeats.get(key)
        if seen is None or not any(it is seen[0] for it in self._activity):
            if len(self._repeats) > 1000:  # runs whose line left the list long ago
                self._repeats.clear()
            return False
        item, count, first = seen
        count += 1
        self._repeats[key] = (item, count, first)
        item["count"] = count
        item["last"] = iso_time(now)
        item["message"] = f"{event.message} (failed {count} times since {time.strftime('%H:%M', time.localtime(first))})"
        return True

    def _on_event(self, event: SyncEvent) -> None:
        """Called by the engine inside :meth:`sync` (worker thread)."""
        if event.kind == "transfer":
            self._status.update(syncing=True, current_path=event.path, transfer={
                "path": event.path, "direction": event.direction, "done": event.done, "total": event.total})
            return
        now = time.time()
        item = {"time": iso_time(now), "path": event.path,
                "action": event.action or event.kind, "result": {"synced": "ok"}.get(event.kind, event.kind),
                "direction": event.direction}
        if event.message:
            item["message"] = event.message
        with self._lock:
            fresh = not self._coalesce(event, now)
            if fresh:
                self._activity.append(item)
                if event.kind == "error":
                    self._repeats[(event.path, event.message)] = (item, 1, now)
        if fresh:  # a repeated error is counted in the activity list, not logged again
            log_action(event.path, "conflict" if event.kind == "conflict" else item["action"], item["result"],
                       event.direction, event.message)
        self._status.update(syncing=True, transfer=None, current_path=event.path)
        if event.kind == "conflict":
            self._publish({"type": "conflict", "path": event.path, "archived": event.action,
                           "message": event.message})
        elif event.kind == "error":
            self._publish({"type": "error", "path": event.path, "message": event.message})
        elif event.kind == "synced":
            self._publish({"type": "synced", "path": event.path, "action": event.action,
                           "direction": event.direction})
