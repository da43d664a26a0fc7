"""The mass-delete safety valve (docs/architecture.md §4).

Deletes on one side are counted over a rolling window (so a watcher
delivering a mass delete in small batches is caught too) and held when

* the count exceeds ``max_delete_files`` (an absolute number of files, as
  Dropbox's and Seafile's own clients count), or
* the count reaches ``percent_floor`` **and** exceeds ``max_delete_percent``
  of the mirror's files: the share only matters from a floor on, so tidying
  up 6 notes in a library of 25 is ordinary use, not a mass delete; or
* one pass deletes every file of a mirror of at least ``EMPTY_FLOOR`` files
  (:func:`empties`): a small mirror whose folder was emptied or recreated
  empty is under both limits, yet it is exactly the case the valve is for.

Held deletes wait for :meth:`DeleteValve.confirm` (``ohsync
confirm-deletes``) while everything else keeps syncing.  An emptied mount
point, a wiped library or a mistaken ``rm -r`` thus never propagates on its
own.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from .reconcile import Action

__all__ = ["Plan", "DeleteValve", "WINDOW_SECONDS", "PERCENT_FLOOR", "EMPTY_FLOOR", "exceeds", "empties"]

#: Deletes executed within this many seconds count together.
WINDOW_SECONDS = 300.0
#: Fewest deletes on one side for which ``max_delete_percent`` applies.
PERCENT_FLOOR = 10
#: Fewest files of a mirror for which deleting all of them in one pass is held.
EMPTY_FLOOR = 2


def exceeds(count: int, tracked: int, *, max_files: int, max_percent: float,
            floor: int = PERCENT_FLOOR) -> bool:
    """True when ``count`` deletes on one side of a mirror of ``tracked``
    files are a mass delete that must be held.

    :param count: deletes on one side within the window.
    :param tracked: files in the mirror's base (the 100 % of the share).
    :param max_files: more deletes than this are always held.
    :param max_percent: a share of ``tracked`` (0–100) …
    :param floor: … that holds deletes only when there are at least this many.
    """
    if count > max_files:
        return True
    return count >= floor and count > tracked * max_percent / 100.0


def empties(count: int, tracked: int) -> bool:
    """True when ``count`` file deletes in one pass remove every one of the
    ``tracked`` files of a mirror of at least :data:`EMPTY_FLOOR` files."""
    return tracked >= EMPTY_FLOOR and count >= tracked


@dataclass(frozen=True)
class Plan:
    """The action chosen for one file, with what the plan saw.

    :ivar fp: the local fingerprint at planning time (None: absent).
    """

    rel: str
    action: Action
    entry: Any
    remote: Any
    base: Any
    fp: tuple[int, int, int] | None


_SIDES = {Action.DELETE_LOCAL: "local", Action.DELETE_REMOTE: "remote"}


class DeleteValve:
    """Holds mass deletes until confirmed.

    :param max_files: deletes on one side beyond this are held.
    :param max_percent: … and so are ``floor`` or more beyond this share of
        the tracked files (see :func:`exceeds`).
    :param floor: fewest deletes the share applies to.
    :param clock: monotonic seconds (injectable for tests).
    """

    def __init__(self, max_files: int, max_percent: float, clock: Any = time.monotonic,
                 floor: int = PERCENT_FLOOR) -> None:
        self.max_files = max_files
        self.max_percent = max_percent
        self.floor = floor
        self._clock = clock
        self._recent: dict[str, deque[float]] = {"local": deque(), "remote": deque()}
        self._held: list[tuple[str, str]] = []
        self._confirmed = False

    def allows(self, count: int, tracked: int) -> bool:
        """True when ``count`` deletes on one side of ``tracked`` files may go ahead."""
        return not exceeds(count, tracked, max_files=self.max_files, max_percent=self.max_percent,
                           floor=self.floor)

    def held(self) -> list[tuple[str, str]]:
        """``(rel path, side)`` of the deletes currently held."""
        return list(self._held)

    def holding(self) -> set[str]:
        """Rel paths whose deletes stay held on the next pass (empty once the
        person confirmed: then they go ahead)."""
        return set() if self._confirmed else {rel for rel, _ in self._held}

    def confirm(self) -> int:
        """Allow the held deletes on the next pass; returns how many are held."""
        self._confirmed = True
        return len(self._held)

    def filter(self, plans: list[Plan], tracked: int, report: Any,
               considered: set[str] | None = None) -> list[Plan]:
        """Drop held deletes from ``plans``; record them on ``report.held_deletes``.

        :param tracked: files in the mirror's base (the 100 % of the limit).
        :param considered: the paths this pass looked at; deletes held
            earlier for other paths stay held (None: all paths were looked at).
        """
        now = self._clock()
        keep: list[Plan] = []
        held: list[tuple[str, str]] = []
        for name in ("local", "remote"):
            window = self._recent[name]
            while window and now - window[0] > WINDOW_SECONDS:
                window.popleft()
        by_side: dict[str, list[Plan]] = {"local": [], "remote": []}
        for plan in plans:
            side = _SIDES.get(plan.action)
            if side is None:
                keep.append(plan)
            else:
                by_side[side].append(plan)
        for side, batch in by_side.items():
            if not batch:
                continue
            files = sum(1 for p in batch if not getattr(p.base, "is_dir", False))
            if self._confirmed or (self.allows(len(batch) + len(self._recent[side]), tracked)
                                   and not empties(files, tracked)):
                keep.extend(batch)
                self._recent[side].extend([now] * len(batch))
            else:
                held.extend((p.rel, side) for p in batch)
        if self._confirmed:
            self._confirmed = False
            for window in self._recent.values():
                window.clear()
        elif considered is not None:
            held = [h for h in self._held if h[0] not in considered] + held
        self._held = held
        report.held_deletes = list(held)
        return keep
