"""The sync worker: the one thread that owns the engine and its state DB.

Everything that changes sync state arrives as a message on the worker's
queue (dirty paths from the watcher, "poll" from the :class:`Scheduler`,
refresh, wait, pause, resume, shutdown from the socket); the worker coalesces
what is queued into one :meth:`SyncEngine.sync` pass at a time, records the
facts in the :class:`StatusModel`, and decides what happens after an error:
offline / server trouble → retry with backoff (``Retry-After`` honoured);
rejected token → ``auth_required``, no more polling until login + refresh or a
restart; missing mirror → ``stopped``; a missing library or login at start →
fatal (the daemon exits with the message; with ``exit_on_fatal=False``, one
mirror among several, that mirror stops with it until a ``refresh``).  The
engine is opened inside this thread because its SQLite connection belongs to
the thread that made it.

The worker is composed of parts it holds and gives what they need: its
:class:`~ohsync.daemon.worker.requests.WorkerRequests` (what other threads
ask: messages on the queue), its
:class:`~ohsync.daemon.worker.recovery.WorkerRecovery` (opening the session
and the policy after an error), its read model and its poll clock (a
:class:`Scheduler` it starts and stops, which also runs the worker's delayed
calls: the rescan after local deletes, the "syncing" notice of a slow check).

The worker owns the control state (:class:`Control`: paused, the problem
and when to retry, in a :class:`ControlState` its parts share); the status
model is only told it.  The lists read by
socket threads (activity, conflicts, held deletes…) are the read model in
``daemon/worker/facts.py``; the poll clock is ``daemon/scheduler.py``.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from ...engine.events import SyncReport
from .. import last_sync
from ..memory_trim import release_memory, worth_releasing
from ..scheduler import MAX_SCAN_INTERVAL, SCAN_COST_FACTOR, Scheduler, Ticket, Work, backoff_delay, full_scan_every
from ..service_thread import ServiceThread
from ..status import CHECK_GRACE, StatusModel, scan_interval
from .echoes import awaiting_push, sort_watched
from .facts import MirrorFacts
from .recovery import WorkerRecovery
from .requests import SHUTTING_DOWN, Control, ControlState, FatalError, Session, SessionFactory, WorkerRequests

__all__ = ["MAX_SCAN_INTERVAL", "SCAN_COST_FACTOR", "Control", "Session", "SessionFactory", "FatalError", "Scheduler",
           "SyncWorker", "backoff_delay"]

log = logging.getLogger("ohsync.daemon.worker")  # one logger for all the worker says


#: Seconds between local deletes seen by the watcher and the full scan that carries them out.
RESCAN_DELAY = 2.0

#: Seconds without work after which a settled mirror's remote listing leaves memory
#: (``SyncEngine.release_snapshot``): a burst of edits keeps it, an idle daemon does not.
RELEASE_AFTER = 10.0


class SyncWorker:
    """The sync worker thread, holding its parts: :attr:`requests` (what
    other threads may ask of it, :class:`WorkerRequests`), :attr:`recovery`
    (opening and the policy after an error, :class:`WorkerRecovery`),
    :attr:`facts` (the read model) and :attr:`scheduler` (the poll clock).

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
    :param exit_on_fatal: a fatal error at opening ends the worker (the
        daemon then exits); False keeps it, stopped with the sentence, until
        a ``refresh`` tries again (one mirror among several).
    :param login_command: the command that signs this mirror's account in
        again (named when the server rejects the token).
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
        exit_on_fatal: bool = True,
        login_command: str = "ohsync login",
    ) -> None:
        self._status = status
        self._poll_interval = poll_interval
        self._push_poll_interval = push_poll_interval
        self._push = False
        self._known_head: str | None = None
        self._scan_interval = scan_interval(poll_interval)
        self._before_pass = before_pass
        self._on_fatal = on_fatal
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._work = Work(full_scan=True, check_remote=True)  # the initial sync
        self._retry: set[str] = set()
        self._calls: list[Callable[[], None]] = []
        self._control = ControlState(status)
        self._shutdown = threading.Event()
        self._restructured = threading.Event()
        self._last_full_scan = 0.0
        self._last_scan_seconds = 0.0  # how long the last full scan took (wall time)
        self._request_count = self._polls = 0
        self._synced_once = False
        self._big_pass = False  # the last pass was big: give its memory back (daemon/memory_trim.py)
        self._release_at: float | None = None  # monotonic time of the idle release (RELEASE_AFTER)
        self.facts = MirrorFacts(status, publish, activity_size=activity_size)
        self.requests = WorkerRequests(self._queue, self._control, self.facts,
                                       shutdown=self._shutdown, restructured=self._restructured)
        self.scheduler = Scheduler(self.requests.post_poll)
        self.recovery = WorkerRecovery(
            open_session, status, self._control, self.scheduler, self.facts, on_event=self.facts.on_event,
            shutdown=self._shutdown, post_poll=self.requests.post_poll, finish_tickets=self._finish_tickets,
            notify_if_slow=self._notify_if_slow, on_ready=on_ready, on_fatal=on_fatal,
            login_changed=login_changed, login_command=login_command, exit_on_fatal=exit_on_fatal,
            poll_interval=poll_interval)
        # a daemon thread: shutdown() joins it, but a pass stuck in a request past the daemon's
        # stop deadline cannot be joined, and the process exits anyway
        self._thread = ServiceThread("ohsync-sync-worker", target=self._run, daemon=True)

    @property
    def _session(self) -> Session | None:
        """The open session (held by :attr:`recovery`, which opens and closes it)."""
        return self.recovery.session

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Start the poll clock and the worker thread (the initial sync: full scan + remote check)."""
        self.scheduler.start()
        self._queue.put(("start", None))  # the initial sync: full scan + remote check
        self._thread.start_thread()

    # ----------------------------------------------------------------- the thread

    def _run(self) -> None:
        try:
            while not self._shutdown.is_set():
                msg = self._next_message()
                if msg is None:  # RELEASE_AFTER seconds without a message
                    self._release_idle()
                    continue
                self._handle(msg)
                while True:  # coalesce everything already queued into one pass
                    try:
                        self._handle(self._queue.get_nowait())
                    except queue.Empty:
                        break
                if self._shutdown.is_set():
                    break
                self._step()
        except Exception as exc:  # last resort: say so and let the daemon exit
            log.exception("the sync worker crashed")
            self._control.set_problem("error", f"Internal error in the sync worker: {exc!r}")
            self._on_fatal(exc)
        finally:
            gone = SHUTTING_DOWN if self._shutdown.is_set() else "the sync worker stopped; see the log"
            self._finish_tickets(False, gone)
            self.requests.close_tickets(gone)  # and the ones still queued: nobody waits on a worker that is gone
            self.recovery.close_session()

    def _next_message(self) -> tuple[str, Any] | None:
        """The next message; None once the idle release is due and none came."""
        if self._release_at is None:
            return self._queue.get()
        try:
            return self._queue.get(timeout=max(0.0, self._release_at - time.monotonic()))
        except queue.Empty:
            return None

    def _release_idle(self) -> None:
        """Drop what a settled engine holds for its next pass (the remote
        listing, about 12 MiB at 30,000 files) and hand the pages back."""
        self._release_at = None
        release = getattr(getattr(self._session, "engine", None), "release_snapshot", None)
        try:
            if release is not None and release():
                release_memory()
        except Exception:  # memory is an optimisation; syncing goes on
            log.exception("releasing the idle engine's memory failed")

    def _handle(self, msg: tuple[str, Any]) -> None:
        kind, arg = msg
        work = self._work
        if kind == "saved":
            work.saved.update(arg)
        elif kind == "dirty":
            paths, full_scan = arg
            to_sync, awaiting = self._watched(paths)
            work.dirty.update(to_sync)  # echoes of our own writes cost no pass
            work.awaiting |= awaiting
            work.full_scan = work.full_scan or full_scan
        elif kind == "poll":
            work.check_remote = True
            work.dirty.update(self._retry)
            work.awaiting |= self._awaiting_push(self._retry)
            self._retry.clear()
            if time.monotonic() - self._last_full_scan >= self._full_scan_every():
                work.full_scan = True
        elif kind == "push":
            if not arg or arg != self._known_head:
                work.check_remote = True
                work.dirty.update(self._retry)
                work.awaiting |= self._awaiting_push(self._retry)
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
                self.recovery.refreshed_since_open = True  # e.g. after `ohsync login`: a new token may wait
            if kind == "refresh" and self._session is not None and hasattr(self._session.engine, "release_failures"):
                self._session.engine.release_failures()  # the person acted: try held paths once more
            if self._control.now.problem in ("auth_required", "offline", "error", "stopped") and kind == "refresh":
                self._control.set_problem(None)
                self.recovery.attempt = 0
        elif kind == "pause":
            self._control.set(paused=True)
        elif kind == "resume":
            if arg or self._control.now.paused:
                work.full_scan = work.check_remote = True
                self._control.set(paused=False)
        elif kind == "shutdown":
            self._shutdown.set()
        elif kind == "call":
            self._calls.append(arg)
        self._status.update(pending_up=len(work.awaiting))

    def _awaiting_push(self, paths: Iterable[str]) -> set[str]:
        """The paths that await push, echoes of our own writes left out."""
        return awaiting_push(getattr(self._session, "engine", None), paths)

    def _watched(self, paths: Iterable[str]) -> tuple[set[str], set[str]]:
        """``(still to sync, awaiting push)`` of the watcher's paths (echoes cost no pass)."""
        return sort_watched(getattr(self._session, "engine", None), paths)

    def _finish_tickets(self, synced: bool, message: str) -> None:
        tickets, self._work.tickets = self._work.tickets, []
        for t in tickets:
            t.synced, t.message = synced, message
            t.done.set()

    def _blocked(self) -> str | None:
        """Why no pass may run now, or None."""
        control = self._control.now
        if control.paused:
            return "syncing is paused"
        problem = control.problem
        if problem in ("auth_required", "stopped"):
            return control.problem_message or problem
        retry_at = control.retry_at
        if problem in ("offline", "error") and retry_at is not None and time.time() < retry_at - 0.5:
            return control.problem_message or problem  # wait for the backoff to end
        return None

    def _step(self) -> None:
        blocked = self._blocked()
        if blocked:
            self._finish_tickets(False, blocked)
            return
        if self._session is None and not self.recovery.open():
            return
        # submitted jobs first: a confirm or a resync must shape the pass that follows
        self._drain()
        while self._calls:  # including jobs that arrived while the session opened
            calls, self._calls = self._calls, []
            for fn in calls:
                try:
                    fn()
                except Exception:  # a helper's failure must not stop syncing
                    log.exception("a job submitted to the sync worker failed")
            self._drain()
        if self._work or self._work.tickets:
            self._maintain()
            self._pass()
            if self._big_pass:  # its lists are gone now; hand the pages back
                self._big_pass = False
                release_memory()
            self._maintain()
        self._release_at = time.monotonic() + RELEASE_AFTER

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
        except Exception:  # e.g. the watcher cannot restart yet
            log.exception("keeping the daemon's helpers alive failed")

    # ----------------------------------------------------------------- one pass

    def _pass(self) -> None:
        assert self._session is not None
        work, self._work = self._work, Work()
        paths = None if work.full_scan else sorted(work.dirty)
        started = time.time()
        # a pass that finds nothing must change no state (no syncing→idle flicker):
        # "syncing" shows once there is work (MirrorFacts.on_event) or the check takes long
        self._status.update(checking_since=started, pending_up=len(work.awaiting))
        self._notify_if_slow()
        try:
            self._restructured.clear()
            note_saved = getattr(self._session.engine, "note_saved", None)
            if note_saved is not None and work.saved & work.dirty:
                note_saved(work.saved & work.dirty)  # their writers are done: no wait before stamping them
            report: SyncReport = self._session.engine.sync(
                paths, check_remote=work.check_remote,
                should_stop=lambda: self._shutdown.is_set() or self._restructured.is_set())
        except BaseException as exc:  # classified in _failed
            # keep the work for the retry, together with anything that arrived meanwhile
            self._work.dirty |= work.dirty
            self._work.awaiting |= work.awaiting
            self._work.full_scan |= work.full_scan
            self._work.check_remote = True
            self._work.tickets[:0] = work.tickets
            self._status.update(syncing=False, checking_since=None, transfer=None, current_path=None,
                                pending_up=len(self._work.awaiting))
            self.recovery.failed(exc)
            message = self._control.now.problem_message or str(exc)
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
            self._work.awaiting |= work.awaiting | set(getattr(report, "waiting_up", ()))
            self._work.tickets[:0] = work.tickets
            # and soon, asked by nobody else: the poll this pass took is spent, and the
            # watcher may say nothing more (paused or restarted meanwhile)
            due = self.scheduler.due_in
            self.scheduler.poll_in(RESCAN_DELAY if due is None else min(due, RESCAN_DELAY))
            return
        if report.interrupted:
            log.info("stopped between two files for shutdown; the rest syncs on the next start")
            self._status.update(syncing=False, checking_since=None, transfer=None, current_path=None)
            self._finish_tickets(False, SHUTTING_DOWN)
            for t in work.tickets:
                t.synced, t.message = False, SHUTTING_DOWN
                t.done.set()
            return
        self.recovery.attempt = 0
        if report.rescan:  # local deletes wait for a full scan that sees them all
            self.scheduler.call_in(RESCAN_DELAY, lambda: self.requests.post_dirty([], full_scan=True))
        self._retry |= {p for p, _ in report.errors}
        # what the pass left (local deletes for the full scan) waits with what arrived since
        self._work.awaiting |= set(getattr(report, "waiting_up", ()))
        now = time.time()
        busy = (report.transferred or report.merged or report.conflicts or report.errors or report.moved
                or report.deleted_local or report.deleted_remote)
        self._request_count += report.requests
        self._control.clear_problem_untold()
        self.recovery.resumed()
        facts: dict[str, Any] = {
            "syncing": False, "checking_since": None, "transfer": None, "current_path": None,
            "phase": "running", "problem": None, "problem_message": "", "retry_at": None,
            "errors": len(self._retry), "pending_up": len(self._work.awaiting),
            "pending_down": len(getattr(report, "waiting_down", ())),
            "requests": self._request_count,
        }
        if busy or not self._synced_once:
            facts["last_sync"] = now  # the last time something was carried across: idle polls move nothing
            self._synced_once = True
        if busy:  # kept for the status after a restart (an idle pass writes nothing)
            last_sync.record(self._session.engine, now)
        if work.check_remote:
            self._polls += 1
            facts["last_poll"] = now
            facts["polls"] = self._polls
        if work.full_scan:
            facts["last_scan"] = now
            self._last_full_scan = time.monotonic()
            if not busy:  # the cost of looking, not of what a busy pass carried across
                self._last_scan_seconds = now - started
            facts["next_scan"] = now + self._full_scan_every()  # status judges "overdue" by this plan
        carried = len(report.uploaded) + len(report.downloaded) + len(report.merged) + len(report.moved) + \
            len(report.deleted_local) + len(report.deleted_remote)
        self._big_pass = worth_releasing(full_scan=work.full_scan, carried=carried, dirty=len(work.dirty),
                                         seconds=now - started)
        if not getattr(report, "idle", False) or not self.facts.loaded:
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
            self.facts.settle(t, report)
        if work.check_remote and not getattr(report, "idle", False):
            self._known_head = self._engine_head()
        if work.check_remote and not self._shutdown.is_set():
            self.scheduler.poll_in(self._push_poll_interval if self._push else self._poll_interval)

    def _full_scan_every(self) -> float:
        return full_scan_every(self._scan_interval, self._last_scan_seconds)

    def _engine_head(self) -> str | None:
        """The head commit the engine saw last (None when it cannot say)."""
        state = getattr(getattr(self._session, "engine", None), "state", None)
        try:
            head = state.get_meta("head") if state is not None else None
        except Exception:  # noqa: BLE001 - only an optimisation
            return None
        return head if isinstance(head, str) else None

    def _notify_if_slow(self) -> None:
        """Let subscribers see ``syncing`` once a check outlasts :data:`CHECK_GRACE`."""
        self.scheduler.call_in(CHECK_GRACE + 0.05, self._status.notify)

    def _refresh_caches(self) -> None:
        assert self._session is not None
        self.facts.refresh(self._session.engine)

    # ----------------------------------------------------------------- requests (any thread)
    # what other threads ask is the requests part's; these name it on the worker

    def post_dirty(self, paths: Iterable[str], full_scan: bool = False) -> None:
        """Local paths changed (from the watcher): :meth:`WorkerRequests.post_dirty`."""
        self.requests.post_dirty(paths, full_scan)

    def post_saved(self, paths: Iterable[str]) -> None:
        """Saves the watcher saw complete: :meth:`WorkerRequests.post_saved`."""
        self.requests.post_saved(paths)

    def note_restructure(self) -> None:
        """A local folder was moved or deleted: :meth:`WorkerRequests.note_restructure`."""
        self.requests.note_restructure()

    def refresh(self) -> None:
        """Poll the server and scan the local folder now (also retries a failed login)."""
        self.requests.refresh()

    def pause(self) -> None:
        """Stop syncing after the current pass (status says so at once)."""
        self.requests.pause()

    def resume(self) -> None:
        """Sync again, starting with a full scan and a poll (status says so at once)."""
        self.requests.resume()

    def set_push(self, active: bool) -> None:
        """The push channel came up or went down: :meth:`WorkerRequests.set_push`."""
        self.requests.set_push(active)

    def push_update(self, commit_id: str = "") -> None:
        """The server announced a new head: :meth:`WorkerRequests.push_update`."""
        self.requests.push_update(commit_id)

    def submit(self, fn: Callable[[], None]) -> None:
        """Run ``fn()`` on the worker thread between passes (for helpers such as
        drop-folder filing that need the engine's thread)."""
        self.requests.submit(fn)

    @property
    def control(self) -> Control:
        """The control state now (any thread)."""
        return self._control.now

    def control_fact(self, name: str) -> Any:
        """One field of :attr:`control` (``paused``, ``problem``, ``problem_message``, ``retry_at``)."""
        return getattr(self._control.now, name)

    def confirm_deletes(self) -> int:
        """Let the held deletes through on the next pass; returns how many are held now."""
        held = len(self.facts.held_deletes())

        def job() -> None:
            if self._session is not None:
                self._session.engine.confirm_deletes()
                self.requests.post_dirty([], full_scan=True)
        self.requests.submit(job)
        self.requests.refresh()
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
                self.requests.post_dirty([], full_scan=True)
        if keep != "newer" and self._session is None:
            self.recovery.afresh_on_open = True  # a state no session could open (a newer ohsync's) is set aside
        self.requests.submit(job)
        self.requests.refresh()

    def wait(self, timeout: float) -> tuple[bool, str]:
        """Block until everything on disk now is synced and verified.

        Asks for a full local scan (stat-only: no requests when nothing
        changed) and waits for that pass.  Not synced: a path failed, a
        deletion is held by the safety valve, a conflict appeared since the
        wait began (or since a ``refresh``/``resume`` asked at most
        :data:`~ohsync.daemon.worker.requests.ASKED_PASS_WINDOW` seconds
        before it: the pass that request started counts, even when it
        finished first), or a path cannot sync (``daemon/attention.py``).

        :returns: ``(synced, message)``.
        """
        synced, message, _ = self.requests.wait_detail(timeout)
        return synced, message

    def wait_detail(self, timeout: float) -> tuple[bool, str, list[dict[str, str]]]:
        """:meth:`wait`, with the items behind a "not synced":
        ``[{"kind", "path", "reason"}]``."""
        return self.requests.wait_detail(timeout)

    def post_wait(self) -> Ticket:
        """:meth:`wait` in two halves, for a caller waiting on several workers at once:
        ask for the pass now, then :meth:`wait_result` with the ticket."""
        return self.requests.post_wait()

    def wait_result(self, ticket: Ticket, timeout: float, *,
                    deadline: float | None = None) -> tuple[bool, str, list[dict[str, str]]]:
        """The answer of :meth:`wait_detail` for a ticket of :meth:`post_wait`: waits up to
        ``timeout`` s, or until the monotonic ``deadline`` when given."""
        return self.requests.wait_result(ticket, timeout, deadline=deadline)

    def request_shutdown(self) -> None:
        """Ask the worker to stop after the current file, without waiting (any thread)."""
        self.requests.request_shutdown()

    def shutdown(self, timeout: float = 60.0) -> bool:
        """Ask the worker to stop after the current pass, stop its clock and wait for the thread.

        :returns: False when the worker was still busy after ``timeout``.
        """
        self.requests.request_shutdown()
        self._thread.stop(timeout)  # stopped in the reverse order of start(): the thread, then its clock
        self.scheduler.stop()
        self.requests.close_tickets()  # a pass stuck past the timeout leaves no `wait` caller waiting
        return not self._thread.thread_alive()

    @property
    def stopping(self) -> bool:
        """True once shutdown was requested (the engine may check it between files)."""
        return self.requests.stopping

    def is_alive(self) -> bool:
        """True while the worker thread runs."""
        return self._thread.thread_alive()

    # ----------------------------------------------------------------- the read model (any thread)

    def held_deletes(self) -> list[dict[str, str]]:
        """Deletes held by the safety valve: ``[{"path", "side"}]`` (side: local/remote)."""
        return self.facts.held_deletes()

    def note_carried(self) -> None:
        """Something reached the server outside a pass (a document filed from the drop
        folder, a memory tool's write, verified): ``last sync`` moves as for a pass that
        carried something across, in the status and the state database.  Runs on the
        worker thread (filing and memory writes run there), like the pass's own record."""
        now = time.time()
        self._status.update(last_sync=now)
        if self._session is not None:
            last_sync.record(self._session.engine, now)

    def note_activity(self, path: str, action: str, result: str, message: str = "") -> None:
        """Add an item to the activity list (e.g. a filing outcome)."""
        self.facts.note_activity(path, action, result, message)

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
