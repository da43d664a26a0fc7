"""What one pass found to carry across and has not carried yet.

The pass plans its file actions, then carries them out one by one; this
small ledger knows, at any moment, which planned changes still wait: local
changes to push (``up``) and remote changes to apply here (``down``; a merge
is both).  Each change of either count is told to the caller as a
:class:`~ohsync.engine.events.SyncEvent` of kind ``pending`` (``direction``
``up`` or ``down``, ``total`` = how many wait), so the daemon's
``pending_up``/``pending_down`` follow the pass.  A path leaves the ledger
when its action was carried out *or failed* (a failure is reported as an
error, not as waiting); what is left when the pass ends (interrupted, or
local deletes left for the full scan) goes into the report.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..events import SyncEvent
from .reconcile import Action
from .valve import Plan

__all__ = ["PendingLedger", "directions"]

_UP = {Action.PUSH, Action.MERGE, Action.DELETE_REMOTE}
_DOWN = {Action.PULL, Action.MERGE, Action.DELETE_LOCAL}


def directions(action: Action) -> tuple[bool, bool]:
    """``(up, down)``: whether ``action`` carries a local change up, a remote one down."""
    return action in _UP, action in _DOWN


class PendingLedger:
    """The changes of one pass that wait to be carried out.

    :param emit: called with each ``pending`` event (the context's ``emit``).
    """

    def __init__(self, emit: Callable[[SyncEvent], None]) -> None:
        self._emit = emit
        self.up: set[str] = set()
        self.down: set[str] = set()

    def plan(self, plans: Iterable[Plan], moves: Iterable[tuple[Plan, Plan]] = ()) -> None:
        """Start the pass's ledger from its plans and paired moves (a move is
        one change, counted under its new path)."""
        up: set[str] = set()
        down: set[str] = set()
        for plan in plans:
            is_up, is_down = directions(plan.action)
            if is_up:
                up.add(plan.rel)
            if is_down:
                down.add(plan.rel)
        for old, new in moves:
            (up if old.action is Action.DELETE_REMOTE else down).add(new.rel)
        self.up, self.down = set(), set()
        self._set(up, down, force=True)

    def keep(self, rels: set[str]) -> None:
        """Forget the planned paths not in ``rels`` (held by a safety valve or
        waiting out a failure: they are listed as such, not as waiting)."""
        self._set(self.up & rels, self.down & rels)

    def done(self, *rels: str) -> None:
        """The actions of ``rels`` were carried out or failed."""
        # in place: a copy of the sets per path made a 30,000-file pass quadratic
        up, down = len(self.up), len(self.down)
        self.up.difference_update(rels)
        self.down.difference_update(rels)
        if len(self.up) != up:
            self._emit(SyncEvent("pending", "", "up", total=len(self.up)))
        if len(self.down) != down:
            self._emit(SyncEvent("pending", "", "down", total=len(self.down)))

    def _set(self, up: set[str], down: set[str], force: bool = False) -> None:
        changed_up = force or len(up) != len(self.up)
        changed_down = force or len(down) != len(self.down)
        self.up, self.down = up, down
        if changed_up:
            self._emit(SyncEvent("pending", "", "up", total=len(up)))
        if changed_down:
            self._emit(SyncEvent("pending", "", "down", total=len(down)))
