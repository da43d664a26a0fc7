"""The reconciliation table of docs/architecture.md §4, as a pure function.

Each side of a path is classified against its base, then one ordered rule
picks the action.  A delete on one side is propagated only when the other
side still holds exactly the base (modification always beats deletion);
remote deletes are soft (moved into ``/.trash/``), local deletes are
preceded by a backup.  :func:`action_for` looks the pair up; what a merge
that does not come out clean keeps is another decision, the resolver's
(:func:`ohsync.engine.merge.resolve.decide`).
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Side", "Action", "action_for"]


class Side(Enum):
    """One side of a path compared with its base."""

    ABSENT = "absent"      # not there (and no base: never was)
    SAME = "same"          # equals base
    CHANGED = "changed"    # differs from base, or new without a base
    GONE = "gone"          # there was a base, the side no longer has it


class Action(Enum):
    """What to do with one path."""

    NOTHING = "nothing"
    PULL = "pull"                    # remote → local
    PUSH = "push"                    # local → remote (read-merge-write)
    MERGE = "merge"                  # both changed: read-merge-write
    DELETE_LOCAL = "delete_local"    # remote deleted, local unchanged: back up, remove
    DELETE_REMOTE = "delete_remote"  # local deleted, remote unchanged: move into /.trash/
    FORGET = "forget"                # gone on both sides: drop the base


def action_for(local: Side, remote: Side) -> Action:
    """The action for a file whose sides are classified as given.

    Rules, in order: unchanged sides do nothing; a one-sided change flows
    to the other side; both changed merge; modification beats deletion;
    a one-sided deletion restores (deletes are not propagated yet); gone on
    both sides forgets the base.  A one-sided deletion of an unchanged
    file is propagated (the caller's safety valve may hold it).
    """
    table = {
        (Side.SAME, Side.SAME): Action.NOTHING,
        (Side.SAME, Side.CHANGED): Action.PULL,
        (Side.SAME, Side.GONE): Action.DELETE_LOCAL,
        (Side.CHANGED, Side.SAME): Action.PUSH,
        (Side.CHANGED, Side.CHANGED): Action.MERGE,
        (Side.CHANGED, Side.GONE): Action.PUSH,
        (Side.CHANGED, Side.ABSENT): Action.PUSH,
        (Side.GONE, Side.SAME): Action.DELETE_REMOTE,
        (Side.GONE, Side.CHANGED): Action.PULL,
        (Side.GONE, Side.GONE): Action.FORGET,
        (Side.ABSENT, Side.CHANGED): Action.PULL,
        (Side.ABSENT, Side.ABSENT): Action.NOTHING,
    }
    return table.get((local, remote), Action.NOTHING)
