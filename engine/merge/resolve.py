"""The conflict resolver: what happens when both sides changed one file.

Every writer that meets a version it did not expect asks :func:`decide`
and only carries the answer out (:func:`ohsync.engine.merge.archive.archive`
stores the conflict copy).  The split follows rclone bisync's
``resolve.go``: a pure choice of the winner from facts, then a separate
step that renames, moves or copies.  Nothing here reads files, the state or
the network.

The table (one row per :class:`Situation` and merge result):

=================  ===============================  ===============  =============  =============
situation          merge result                     outcome          live file      conflict copy
=================  ===============================  ===============  =============  =============
EDIT               clean, bytes are theirs          THEIRS_WINS      theirs         none (ours is backed up locally)
EDIT               clean, anything else             MERGED           merged bytes   none
EDIT               not clean, FIGHT_LIMIT recent    PAUSED           untouched      none (the path is left alone)
EDIT               parts conflict, ``partial``      BOTH_KEPT        partial merge  theirs, uploaded
EDIT               does not merge                   OURS_WINS        ours           theirs, uploaded
LARGE              (not merged: too large)          OURS_WINS        ours           theirs, moved on the server
SEAFILE_COPY       clean                            MERGED           merged bytes   none; the SFConflict file goes
SEAFILE_COPY       parts conflict, ``partial``      BOTH_KEPT        partial merge  the SFConflict file, moved
SEAFILE_COPY       does not merge / not merged      OURS_WINS        ours           the SFConflict file, moved
ROLLBACK           (not merged: older version)      OURS_WINS        ours           theirs, uploaded
=================  ===============================  ===============  =============  =============

Where the copy goes and its name: ``/.conflict/<dir>/<stem>__<origin>__<time><.ext>``
(:meth:`Copy.path`, names from :mod:`ohsync.engine.merge.conflict_names`).  ``origin`` names
who wrote the losing version: the frontmatter ``origin`` of theirs unless
the live version carries the same one (then ``remote``), the user part of an
SFConflict file's name, else ``remote``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from .conflict_names import CONFLICT_DIR, SFCONFLICT, conflict_copy_path, origin_of
from .text import MergeResult

__all__ = ["Situation", "Outcome", "Facts", "Copy", "Decision", "decide", "REASONS", "FIGHT_LIMIT", "FIGHT_WINDOW"]

#: A path that conflicted this many times within FIGHT_WINDOW is left alone
#: (two writers fighting): :attr:`Outcome.PAUSED`.
FIGHT_LIMIT = 3
FIGHT_WINDOW = timedelta(minutes=10)


class Situation(enum.Enum):
    """How the two versions met."""

    #: A push found theirs changed since base; theirs' bytes are in hand
    #: (small files, and a write that crossed ours found in the file history).
    EDIT = "edit"
    #: A push of a file too large to merge found theirs changed since base;
    #: theirs is only on the server.
    LARGE = "large"
    #: Another Seafile client's ``(SFConflict …)`` file beside the path.
    SEAFILE_COPY = "seafile_copy"
    #: The library went back to an older state: theirs is the older version.
    ROLLBACK = "rollback"


class Outcome(enum.Enum):
    """What the live file ends up holding."""

    MERGED = "merged"            #: both edits merged into the live file
    OURS_WINS = "ours_wins"      #: ours stays live, theirs is archived
    THEIRS_WINS = "theirs_wins"  #: theirs goes live, ours is backed up locally
    BOTH_KEPT = "both_kept"      #: every part that merged is live, theirs is archived whole
    PAUSED = "paused"            #: nothing is written: the path keeps conflicting


#: The conflict record's reason per situation (EDIT has its own sentences).
REASONS = {
    Situation.EDIT: "both sides changed it in ways that do not merge",
    Situation.LARGE: "both sides changed a file too large or not text to merge",
    Situation.SEAFILE_COPY: "another Seafile client's conflicting version does not merge",
    Situation.ROLLBACK: ("the library on the server went back to an older state; the newer local version "
                         "stays live and this is the server's older version"),
}
_ROLLBACK_FIELDS: tuple[str, ...] = ("older server version after a restore",)
_PARTIAL_REASON = "everything else merged into the live file; not merged: "


@dataclass(frozen=True)
class Facts:
    """What is known about one conflicting path.

    :ivar situation: how the versions met.
    :ivar rel_path: the path (relative to the library root).
    :ivar ours: the local version's bytes (at least the first 4 KiB, for its
        origin), or None when not read.
    :ivar theirs: the other version's bytes (at least the first 4 KiB), or
        None when it is only on the server.
    :ivar merge: the three-way merge result (:func:`ohsync.engine.merge.choose.merge_versions`),
        or None when no merge was tried (too large, no local file, a rollback).
    :ivar source: where theirs lives on the server when it is moved (an
        SFConflict file's rel path); None means ``rel_path``.
    :ivar recent_conflicts: conflicts recorded for the path within
        :data:`FIGHT_WINDOW`, or None when not counted (no pause then).
    """

    situation: Situation
    rel_path: str
    ours: bytes | None = None
    theirs: bytes | None = None
    merge: MergeResult | None = None
    source: str | None = None
    recent_conflicts: int | None = None


@dataclass(frozen=True)
class Copy:
    """The conflict copy to make of the losing version.

    :ivar how: ``upload`` (theirs' bytes are in hand: uploaded under the
        copy's name, never replacing) or ``move`` (a server-side rename and
        move of ``source``, then one download).
    :ivar source: the server path (rel) holding the version to move.
    :ivar origin: who wrote it (the name's middle part).
    :ivar reason: the conflict record's sentence.
    :ivar fields: what did not merge (the record's ``fields``).
    :ivar announce: the event message, ``{stored}`` standing for the copy's path.
    """

    how: str
    source: str
    origin: str
    reason: str
    fields: tuple[str, ...]
    announce: str = "remote version archived as {stored}"

    def path(self, rel_path: str, taken: Callable[[str], bool], when: datetime,
             folder: str = CONFLICT_DIR) -> str:
        """Where the copy of ``rel_path`` goes: a free rel path under ``folder``.

        :param taken: tells whether a candidate rel path exists on either side.
        :param when: the conflict time (UTC), part of the name.
        :param folder: the conflict folder's working name (``special_dirs``).
        """
        return conflict_copy_path(rel_path, self.origin, taken, when, folder)


@dataclass(frozen=True)
class Decision:
    """The resolver's answer.

    :ivar outcome: see :class:`Outcome`.
    :ivar live: the bytes the live file must hold now, or None to leave it as
        it is (the caller writes only bytes that differ from ours, backing
        ours up first).
    :ivar copy: the conflict copy to make, or None.
    :ivar drop_source: the server file ``Facts.source`` goes (an SFConflict
        file whose content merged).
    """

    outcome: Outcome
    live: bytes | None = None
    copy: Copy | None = None
    drop_source: bool = False


def _origin(theirs: bytes | None, live: bytes | None) -> str:
    """The losing version's origin, unless the live one carries the same."""
    if theirs is None:
        return "remote"
    origin = origin_of(theirs)
    if live is not None and origin == origin_of(live):
        return "remote"
    return origin


def _seafile_user(source: str) -> str:
    """The user part of an SFConflict name, made safe for a file name."""
    m = SFCONFLICT.match(source.rpartition("/")[2])
    who = re.sub(r"[^A-Za-z0-9_-]", "-", m.group("who").split("@")[0])[:32] if m else ""
    return who or "remote"


def _fields(merge: MergeResult | None) -> tuple[str, ...]:
    return tuple(merge.conflicts) if merge is not None and merge.conflicts else ("content",)


def decide(facts: Facts) -> Decision:
    """Decide the outcome of one conflicting path (the table in the module docstring).

    :returns: the :class:`Decision`.
    :raises ValueError: facts that cannot be carried out (an EDIT or
        ROLLBACK without theirs' bytes).
    """
    s, merge = facts.situation, facts.merge
    source = facts.source or facts.rel_path
    clean = merge is not None and merge.content is not None and not merge.conflicts
    if clean and s in (Situation.EDIT, Situation.SEAFILE_COPY):
        assert merge is not None and merge.content is not None
        if s is Situation.EDIT and merge.content == facts.theirs and merge.content != facts.ours:
            return Decision(Outcome.THEIRS_WINS, live=merge.content)
        return Decision(Outcome.MERGED, live=merge.content, drop_source=s is Situation.SEAFILE_COPY)
    if facts.recent_conflicts is not None and facts.recent_conflicts >= FIGHT_LIMIT:
        return Decision(Outcome.PAUSED)
    partial = merge.partial if merge is not None and s in (Situation.EDIT, Situation.SEAFILE_COPY) else None
    outcome = Outcome.BOTH_KEPT if partial is not None else Outcome.OURS_WINS
    live = partial if partial is not None else facts.ours
    if s is Situation.EDIT or s is Situation.ROLLBACK:
        if facts.theirs is None:
            raise ValueError(f"{s.value}: theirs' bytes are needed to upload the conflict copy")
        if s is Situation.ROLLBACK:
            reason, fields = REASONS[s], _ROLLBACK_FIELDS
        else:
            details = list(merge.details) if merge is not None else []
            reason = _PARTIAL_REASON + "; ".join(details) if details else REASONS[s]
            fields = _fields(merge)
        copy = Copy("upload", source, _origin(facts.theirs, live), reason, fields)
        return Decision(outcome, live=partial, copy=copy)
    if s is Situation.LARGE:
        return Decision(outcome, copy=Copy("move", source, "remote", REASONS[s], ("content",)))
    copy = Copy("move", source, _seafile_user(source), REASONS[s], _fields(merge),
                announce="Seafile conflict file archived as {stored}")
    return Decision(outcome, live=partial, copy=copy)
