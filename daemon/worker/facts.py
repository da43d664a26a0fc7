"""The read model of one mirror: what happened and what needs the person.

Fed by the sync worker only (engine events during a pass, the engine's
lists after one), read by socket threads: the activity list (a repeated
failure folds into its first line), conflicts, damaged files, held deletes,
names that cannot sync, per-path failures.  It writes the counts and
attention items into the mirror's :class:`~ohsync.daemon.status.StatusModel`
and publishes ``synced``/``conflict``/``error`` events; it never decides
whether a pass runs (that control state is the worker's own).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from ...engine.events import SyncEvent, SyncReport
from ..attention import attention_items, conflict_since, wait_verdict
from ..logs import log_action
from ..scheduler import Ticket
from ..status import StatusModel, iso_time

__all__ = ["MirrorFacts"]

log = logging.getLogger(__name__)

#: Seconds between two status changes told for the files synced one after
#: another (the path shown); what readers of the status see is never older.
PATH_INTERVAL = 0.2


class MirrorFacts:
    """The lists behind ``activity``, ``conflicts``, ``damaged``, ``held_deletes``, ``skipped``.

    :param status: where counts and attention items go.
    :param publish: sends an event to socket subscribers (``{"type": …}``).
    :param activity_size: most activity items kept.
    """

    def __init__(self, status: StatusModel, publish: Callable[[dict[str, Any]], None], *,
                 activity_size: int = 200) -> None:
        self._status = status
        self._publish = publish
        self._lock = threading.Lock()
        self._activity: collections.deque[dict[str, Any]] = collections.deque(maxlen=activity_size)
        self._conflicts: list[dict[str, Any]] = []
        self._damaged: list[dict[str, str]] = []
        self._held: list[dict[str, str]] = []
        self._skipped: list[dict[str, str]] = []
        self._failures: list[dict[str, Any]] = []
        self._regression: str | None = None
        self.loaded = False  # the engine's lists were read at least once
        self._repeats: dict[tuple[str, str], tuple[dict[str, Any], int, float]] = {}
        self._path_told = -PATH_INTERVAL  # monotonic time the path being synced was last told

    # ----------------------------------------------------------------- readers (any thread)

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

    def held_deletes(self) -> list[dict[str, str]]:
        """Deletes held by the safety valve: ``[{"path", "side"}]`` (side: local/remote)."""
        with self._lock:
            return list(self._held)

    @property
    def regression(self) -> str | None:
        """The sentence for a library whose history went backwards, or None."""
        with self._lock:
            return self._regression

    def conflict_keys(self) -> frozenset[tuple[str, str]] | None:
        """``(path, archived)`` of the conflicts known now (None before the first read)."""
        with self._lock:
            if not self.loaded:
                return None
            return frozenset((str(c.get("path")), str(c.get("archived"))) for c in self._conflicts)

    # ----------------------------------------------------------------- writers (worker thread)

    def note_activity(self, path: str, action: str, result: str, message: str = "") -> None:
        """Add an item to the activity list (e.g. a filing outcome)."""
        item = {"time": iso_time(time.time()), "path": path, "action": action, "result": result}
        if message:
            item["message"] = message
        with self._lock:
            self._activity.append(item)
        log_action(path, action, result, "up" if action == "file" else "", message)

    def settle(self, ticket: Ticket, report: SyncReport) -> None:
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

    def refresh(self, engine: Any) -> None:
        """Read the engine's lists again and update counts, attention items and events."""
        try:
            conflicts = [c.as_dict() for c in engine.conflicts()]
            damaged = [{"path": p, "reason": r} for p, r in engine.damaged()]
            skipped = list(engine.skipped())
            held = list(engine.held_deletes()) if hasattr(engine, "held_deletes") else []
            failures = list(engine.failures()) if hasattr(engine, "failures") else []
            clock = engine.clock_offset() if hasattr(engine, "clock_offset") else None
            regression = engine.regression() if hasattr(engine, "regression") else None
        except Exception:  # status must not die on a read
            log.exception("reading conflicts/damaged from the engine failed")
            return
        with self._lock:
            was_held, was_regressed = bool(self._held), self._regression
            self._conflicts, self._damaged = conflicts, damaged
            self._held = [{"path": p, "side": side} for p, side in held]
            self._skipped = [{"path": p, "reason": r} for p, r in skipped]
            self._failures = failures
            self._regression = regression
            self.loaded = True
        items = attention_items(held=held, damaged=[(d["path"], d["reason"]) for d in damaged], skipped=skipped)
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
                       "the safety limit; run `ohsync confirm-deletes` to carry them out, or "
                       "`ohsync restore-deletes` to bring the files back")
            log.warning("%s", message)
            self._publish({"type": "error", "kind": "held_deletes", "count": len(held), "message": message})

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
        since = time.strftime("%H:%M", time.localtime(first))
        item["message"] = f"{event.message} (failed {count} times since {since})"
        return True

    def on_event(self, event: SyncEvent) -> None:
        """Called by the engine inside a pass (worker thread)."""
        if event.kind == "pending":  # the pass's changes still to carry, per direction
            self._status.update(**{"pending_up" if event.direction == "up" else "pending_down": event.total})
            return
        if event.kind == "transfer":
            self._status.update(syncing=True, current_path=event.path, transfer={
                "path": event.path, "direction": event.direction, "done": event.done, "total": event.total})
            return
        now = time.time()
        item: dict[str, Any] = {"time": iso_time(now), "path": event.path,
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
        mono = time.monotonic()
        if event.kind == "synced" and mono - self._path_told < PATH_INTERVAL and self._status.get("syncing"):
            # thousands of files a pass (a cold mirror): the path shown moves at most this often
            # (the first of a pass is told: listeners see that syncing began)
            self._status.update_quietly(syncing=True, transfer=None, current_path=event.path)
        else:
            self._path_told = mono
            self._status.update(syncing=True, transfer=None, current_path=event.path)
        if event.kind == "conflict":
            self._publish({"type": "conflict", "path": event.path, "archived": event.action,
                           "message": event.message})
        elif event.kind == "error":
            self._publish({"type": "error", "path": event.path, "message": event.message})
        elif event.kind == "synced":
            self._publish({"type": "synced", "path": event.path, "action": event.action,
                           "direction": event.direction})
