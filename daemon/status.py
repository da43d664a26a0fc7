"""The status object of docs/architecture.md §7.2, derived from facts, never set by hand.

The worker records *facts* in a :class:`StatusModel` (when the last poll and
the last local scan finished, whether the watcher lives, the last error, the
current transfer…); :func:`build_status` turns a :class:`Snapshot` of them into
the status object.  ``idle`` is therefore honest by construction: it needs a
poll that finished recently and a full local scan no later than the
scheduler planned (``next_scan``, from the scan's own cost), a live watcher, a working
token and nothing pending.  Every other case is a named degraded state with a
sentence; ``attention`` is the state of a mirror that syncs but holds
something the person must look at (a conflict copy not settled yet, a held
mass delete, a damaged memory file, a name that cannot sync); all but the
conflicts (listed by the ``conflicts`` method) are listed in ``attention``
with their path and reason.  Listeners (the socket server's subscribers) are told whenever
the derived object changes; a pass that finds nothing to do changes nothing
(``syncing`` is shown only once there is work, or after
:data:`CHECK_GRACE` seconds of checking), so an idle poll publishes nothing.
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from .attention import MAX_ITEMS, summary
from .protocol import PROTOCOL, STATES

__all__ = ["CHECK_GRACE", "STATES", "Snapshot", "StatusModel", "build_status", "iso_time", "scan_interval"]

#: Seconds a pass may check both sides before status says ``syncing``.
CHECK_GRACE = 2.0


def iso_time(ts: float | None) -> str | None:
    """Unix time → ISO 8601 with the local offset (``2026-11-30T09:12:03+08:00``)."""
    if ts is None:
        return None
    return datetime.fromtimestamp(ts).astimezone().isoformat(timespec="seconds")


def scan_interval(poll_interval: float) -> float:
    """Seconds between the periodic stat-only full scans (10 polls, 1–10 minutes)."""
    return min(600.0, max(60.0, 10 * poll_interval))


@dataclass(frozen=True)
class Snapshot:
    """Facts about the daemon at one moment (wall-clock Unix times).

    :ivar phase: ``starting`` until the first pass ran, then ``running``,
        ``stopping`` on the way out (the state stays what it was: a tray must
        not announce a safety stop when the person quits).
    :ivar regression: the sentence for a library whose history went
        backwards (remote deletes and overwrites held): state ``stopped``.
    :ivar problem: a named problem that overrides the normal states:
        ``auth_required``, ``offline``, ``stopped`` or ``error``; with
        ``problem_message`` (a sentence) and ``retry_at`` (next attempt).
    :ivar syncing: the pass under way has work (a transfer, a synced path).
    :ivar checking_since: when the pass under way started (None: no pass);
        it shows as ``syncing`` only after :data:`CHECK_GRACE` seconds.
    :ivar attention: ``{"kind", "path", "reason"}`` items (daemon/attention.py).
    """

    library: str = ""
    local: str = ""
    #: what status, CLI and tray call the mirror (its config ``name``, else the library)
    name: str = ""
    poll_interval: float = 30.0
    phase: str = "starting"
    paused: bool = False
    syncing: bool = False
    checking_since: float | None = None
    problem: str | None = None
    problem_message: str = ""
    retry_at: float | None = None
    watcher_alive: bool = False
    last_poll: float | None = None
    last_scan: float | None = None
    #: when the scheduler plans the next full scan (Unix time; daemon/scheduler.py
    #: ``full_scan_every``); None: the configured spacing after ``last_scan``
    next_scan: float | None = None
    last_sync: float | None = None
    pending_up: int = 0
    pending_down: int = 0
    conflicts: int = 0
    damaged: int = 0
    skipped: int = 0
    held_deletes: int = 0
    attention: tuple[dict[str, str], ...] = ()
    #: per-path failures waiting (backoff) or needing the person:
    #: ``{"path", "reason", "title", "needs", "permanent", "count", "since", "retry_at"}``
    failures: tuple[dict[str, Any], ...] = ()
    errors: int = 0
    transfer: dict[str, Any] | None = None
    current_path: str | None = None
    requests: int = 0
    polls: int = 0
    clock_offset: float | None = None
    drop_dir: str | None = None
    filing: dict[str, Any] | None = None
    regression: str | None = None
    #: ``push`` while the server's notification service reaches us, else ``polling``
    notifications: str = "polling"
    #: seconds between the safety polls while notifications are ``push``
    push_poll_interval: float = 300.0
    #: the memory tools' index: ``not built`` until the first ``memory.*`` request, ``building``, ``ready``
    memory_index: str = "not built"
    now: float = field(default_factory=time.time)


#: Seconds of clock difference with the server worth mentioning.
CLOCK_SKEW_WARN = 300


def _state(s: Snapshot) -> tuple[str, str]:
    if s.problem == "auth_required":
        return "auth_required", s.problem_message or (
            "The server rejected the saved login. Run `ohsync login` and then restart ohsync.")
    if s.problem == "stopped":
        return "stopped", s.problem_message or "A safety valve stopped syncing."
    if s.paused:
        return "paused", "Syncing is paused; run `ohsync resume` to continue"
    if s.problem == "offline":
        when = ""
        if s.retry_at is not None:
            secs = round(s.retry_at - s.now)
            when = f"; retrying in {secs} s" if secs >= 1 else "; retrying now"
        return "offline", (s.problem_message or "Cannot reach the server") + when
    if s.problem == "error":
        return "error", s.problem_message or "Syncing failed"
    checking_long = s.checking_since is not None and s.now - s.checking_since >= CHECK_GRACE
    if s.syncing or checking_long:
        if s.transfer:
            arrow = "Uploading" if s.transfer.get("direction") == "up" else "Downloading"
            return "syncing", f"{arrow} {s.transfer.get('path')}"
        return "syncing", f"Syncing {s.current_path}" if s.current_path else "Syncing"
    if s.regression:
        return "stopped", s.regression  # a safety valve holds every remote delete and overwrite
    if s.phase == "starting" or s.last_poll is None or s.last_scan is None:
        return "starting", "Starting: first check of the server and the local folder"
    if not s.watcher_alive:
        return "error", ("The file watcher stopped, so local edits are only noticed by the periodic scan; "
                         "restart ohsync")
    if s.pending_up or s.pending_down:
        ways = [f"{n} to {way}" for n, way in ((s.pending_up, "upload"), (s.pending_down, "download")) if n]
        return "syncing", f"{s.pending_up + s.pending_down} change(s) waiting to sync: {', '.join(ways)}"
    if s.failures:
        first = s.failures[0]
        waiting = "" if first.get("permanent") else " (retried later)"
        return "error", (f"{len(s.failures)} file(s) cannot sync now; {first['path']}: {first['reason']}{waiting}"
                         "; see `ohsync status --json`")
    if s.errors:
        return "error", f"{s.errors} file(s) failed to sync and will be retried; see `ohsync activity`"
    interval = s.push_poll_interval if s.notifications == "push" else s.poll_interval
    stale_poll = s.now - s.last_poll > 3 * interval + 30
    # a full scan starts at the first poll after it is due: overdue only past the scheduler's own plan
    due = s.next_scan if s.next_scan is not None else s.last_scan + scan_interval(s.poll_interval)
    stale_scan = s.now > due + 3 * interval + 30
    if stale_poll:
        return "error", f"No successful check of the server since {iso_time(s.last_poll)}"
    if stale_scan:
        return "error", f"No local scan since {iso_time(s.last_scan)}"
    note = ""
    if s.clock_offset is not None and abs(s.clock_offset) > CLOCK_SKEW_WARN:
        note = (f"; this computer's clock is {abs(s.clock_offset) / 60:.0f} min "
                f"{'behind' if s.clock_offset > 0 else 'ahead of'} the server's (nothing depends on it)")
    # an open conflict copy waits for the person like a held delete: never "Up to date" beside it
    filing = s.filing or {}
    unfiled = len(filing.get("held") or []) + len(filing.get("refused") or [])
    needs = summary(held=s.held_deletes, damaged=s.damaged, skipped=s.skipped, conflicts=s.conflicts,
                    unfiled=unfiled, drop_error=filing.get("error"))
    if needs:
        return "attention", needs + note
    return "idle", "Up to date" + note


def build_status(s: Snapshot) -> dict[str, Any]:
    """The status object of docs/architecture.md §7.2 (exact keys first, extra fields after)."""
    state, message = _state(s)
    return {
        "protocol": PROTOCOL,
        "state": state,
        "message": message,
        "last_sync": iso_time(s.last_sync),
        "pending_up": s.pending_up,
        "pending_down": s.pending_down,
        "conflicts": s.conflicts,
        "damaged": s.damaged,
        "skipped": s.skipped,
        "held_deletes": s.held_deletes,
        "transfer": copy.deepcopy(s.transfer),
        "mirrors": [_mirror_item(s, state, message)],
        # extra fields (docs/architecture.md §7.2: add freely)
        "last_poll": iso_time(s.last_poll),
        "last_scan": iso_time(s.last_scan),
        "next_scan": iso_time(s.next_scan),
        "watcher": s.watcher_alive,
        "regression": s.regression,
        "errors": s.errors,
        "polls": s.polls,
        # HTTP requests of this mirror's sync passes since the start (the bench counts a
        # server of its own with it: a real server has no counter to ask)
        "requests": s.requests,
        "notifications": s.notifications,
        "memory_index": s.memory_index,
        "clock_offset": None if s.clock_offset is None else round(s.clock_offset),
        "drop_dir": s.drop_dir,
        "filing": copy.deepcopy(s.filing),
        "attention": [dict(item) for item in s.attention[:MAX_ITEMS]],
        "failures": [dict(f, since=iso_time(f.get("since")), retry_at=iso_time(f.get("retry_at")))
                     for f in s.failures[:200]],
    }


def _mirror_item(s: Snapshot, state: str, message: str) -> dict[str, Any]:
    """This mirror's item of ``mirrors`` (keys: ``protocol.MIRROR_KEYS``)."""
    return {"name": s.name or s.library, "library": s.library, "local": s.local, "state": state,
            "message": message, "last_sync": iso_time(s.last_sync), "pending_up": s.pending_up,
            "pending_down": s.pending_down, "conflicts": s.conflicts, "damaged": s.damaged, "skipped": s.skipped,
            "held_deletes": s.held_deletes, "transfer": copy.deepcopy(s.transfer),
            "attention": [dict(item) for item in s.attention[:MAX_ITEMS]]}


#: Fields that change on every pass without anything happening.
_ALWAYS_MOVING = ("last_poll", "last_scan", "next_scan", "polls", "requests", "clock_offset")


class StatusModel:
    """Thread-safe holder of the facts; tells listeners when the status changes.

    Writers call :meth:`update` with fact fields; readers call :meth:`status`.
    ``listeners`` get the new status object (called outside the lock).
    """

    def __init__(self, **facts: Any) -> None:
        self._lock = threading.Lock()
        self._snap = Snapshot(**facts)
        self._last_sent: dict[str, Any] | None = None
        self._listeners: list[Callable[[dict[str, Any]], None]] = []
        self.watcher_alive: Callable[[], bool] = lambda: False
        #: the drop folder's filing facts read now (else the last ones given to :meth:`update`)
        self.filing_now: Callable[[], dict[str, Any]] | None = None

    def add_listener(self, fn: Callable[[dict[str, Any]], None]) -> None:
        """Call ``fn(status)`` whenever the status object changes."""
        with self._lock:
            self._listeners.append(fn)

    def snapshot(self) -> Snapshot:
        """The facts now (watcher liveness, filing and clock read at this moment)."""
        with self._lock:
            snap = self._snap
        filing = self.filing_now() if self.filing_now is not None else snap.filing
        return replace(snap, watcher_alive=self.watcher_alive(), filing=filing, now=time.time())

    def status(self) -> dict[str, Any]:
        """The status object now."""
        return build_status(self.snapshot())

    def get(self, name: str) -> Any:
        """One fact."""
        with self._lock:
            return getattr(self._snap, name)

    def update(self, **facts: Any) -> None:
        """Change facts and notify listeners if the status object changed."""
        with self._lock:
            self._snap = replace(self._snap, **facts)
        self.notify()

    def update_quietly(self, **facts: Any) -> None:
        """Change facts without telling listeners: readers of :meth:`status`
        see them at once, listeners with the next :meth:`update` or
        :meth:`notify` (for facts that change many times a second)."""
        with self._lock:
            self._snap = replace(self._snap, **facts)

    def notify(self) -> None:
        """Tell listeners the current status if it differs from the last one told
        (ignoring the always-moving fields: an idle poll must publish nothing)."""
        status = self.status()
        key = {k: v for k, v in status.items() if k not in _ALWAYS_MOVING}
        with self._lock:
            if key == self._last_sent:
                return
            self._last_sent = key
            listeners = list(self._listeners)
        for fn in listeners:
            fn(status)
