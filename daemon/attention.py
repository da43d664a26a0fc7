"""What needs the person: conflicts, damaged files, names that cannot sync, held deletes.

None of these stops syncing, yet none may hide behind "Up to date": the
status object carries each one as an *attention item* ``{"kind", "path",
"reason"}`` (``kind``: ``damaged``, ``skipped`` or ``held_delete``) and the
state ``attention`` while any exists.  This module builds the items from
what the engine reports, the one-line summary of the status message (which
also counts the conflict copies still to settle; those are listed by
``conflicts``, not as items), and the
verdict of ``ohsync wait`` (which must not say "synced" while something is
held back).  Paths are library-relative POSIX paths.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

__all__ = ["KINDS", "MAX_ITEMS", "WaitVerdict", "attention_items", "conflict_since", "natural_key", "summary",
           "wait_verdict"]

#: The kinds of attention item, in the order they are listed.
KINDS = ("held_delete", "damaged", "skipped")

#: Most items carried in one status object (the counts give the totals).
MAX_ITEMS = 200

_HELD_REASON = {
    "remote": ("deleted here; deleting it on the server is held by the safety valve "
               "(run `ohsync confirm-deletes`, or `ohsync restore-deletes` to bring the file back)"),
    "local": ("deleted on the server; deleting it here is held by the safety valve "
              "(run `ohsync confirm-deletes`, or `ohsync restore-deletes` to put it back on the server)"),
}


_DIGITS = re.compile(r"(\d+)")


def natural_key(text: str) -> tuple[tuple[int, int, str], ...]:
    """Sort key that orders digit runs by value: ``f2`` before ``f10`` (case-insensitive, then exact)."""
    return tuple((1, int(part), part) if part.isdigit() else (0, 0, part.casefold())
                 for part in _DIGITS.split(text)) + ((0, 0, text),)


def _by_path(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    return sorted(set(pairs), key=lambda pair: (natural_key(pair[0]), pair[1]))


def attention_items(*, held: Iterable[tuple[str, str]] = (), damaged: Iterable[tuple[str, str]] = (),
                    skipped: Iterable[tuple[str, str]] = ()) -> list[dict[str, str]]:
    """The attention items, held deletes first, then damaged files, then skipped names.

    :param held: ``(path, side)`` from the safety valve (side: ``local``: the
        local copy would be deleted; ``remote``: the server's).
    :param damaged: ``(path, reason)`` of memory files that do not parse.
    :param skipped: ``(path, reason)`` of names that cannot exist on the other side.
    :returns: ``[{"kind", "path", "reason"}]``, each path once per kind.
    """
    items: list[dict[str, str]] = []
    for path, side in _by_path(held):
        items.append({"kind": "held_delete", "path": path, "side": side,
                      "reason": _HELD_REASON.get(side, "deletion held by the safety valve")})
    for path, reason in _by_path(damaged):
        items.append({"kind": "damaged", "path": path,
                      "reason": f"memory file does not parse: {reason} (it still syncs as it is; fix it "
                                "in an editor)"})
    for path, reason in _by_path(skipped):
        items.append({"kind": "skipped", "path": path.lstrip("/"), "reason": f"not synced: {reason}"})
    return items


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def summary(*, held: int, damaged: int, skipped: int, conflicts: int = 0, unfiled: int = 0,
            drop_error: str | None = None) -> str:
    """The status message of the ``attention`` state, e.g. ``"Needs attention: 1
    conflict needs you (`ohsync conflicts`, or compare both versions in `ohsync panel`), 3
    deletions held by the safety valve (`ohsync confirm-deletes`)"``; each part names the
    command that lists or settles it.

    :param conflicts: conflict copies in ``/.conflict/`` not settled yet.
    :param unfiled: documents in the drop folder that wait for the person
        (no space on the server, or refused as they are: a link, a FIFO).
    :param drop_error: why the last look at the drop folder failed, or None.
    Returns ``""`` when all counts are 0.
    """
    parts = []
    if conflicts:
        parts.append(_plural(conflicts, "conflict needs", "conflicts need") + " you (`ohsync conflicts`, "
                     "or compare both versions in `ohsync panel`)")
    if held:
        parts.append(_plural(held, "deletion", "deletions") + " held by the safety valve "
                     "(`ohsync confirm-deletes`)")
    if damaged:
        parts.append(_plural(damaged, "damaged memory file", "damaged memory files") + " (`ohsync damaged`)")
    if skipped:
        parts.append(_plural(skipped, "name that cannot sync", "names that cannot sync")
                     + " (each one is listed with its reason and fix)")
    if unfiled:
        parts.append(_plural(unfiled, "dropped document", "dropped documents") + " not filed "
                     "(each one is listed with its reason)")
    if drop_error:
        parts.append(drop_error)  # it names the drop folder itself
    if not parts:
        return ""
    return "Needs attention: " + ", ".join(parts)


@dataclass(frozen=True)
class WaitVerdict:
    """The answer of ``wait``: synced or not, why, and the items behind it.

    :ivar reasons: ``[{"kind", "path", "reason"}]`` (kinds: ``failed``,
        ``held_delete``, ``conflict``, ``skipped``).
    """

    synced: bool
    message: str
    reasons: tuple[dict[str, str], ...] = ()


def conflict_since(conflict: dict[str, Any], since: float) -> bool:
    """True when the conflict (``{"time": ISO 8601, …}``) was recorded at or after
    ``since`` (Unix seconds; the record's time has whole seconds).  A record
    without a readable time counts as new: better one "not synced" too many."""
    try:
        when = datetime.fromisoformat(str(conflict.get("time")).replace("Z", "+00:00"))
    except ValueError:
        return True
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp() >= int(since)


def _names(paths: Sequence[str], limit: int = 3) -> str:
    shown = ", ".join(paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def _with_reasons(pairs: Sequence[tuple[str, str]], limit: int = 3) -> str:
    """``(names): reason`` when every path has the same reason; else each group of
    paths with its own reason, ``: a, b (reason); c (other reason)`` (at most
    ``limit`` groups, the rest counted): a reason is never shown for a path it is not about."""
    groups: dict[str, list[str]] = {}
    for path, reason in pairs:
        groups.setdefault(reason, []).append(path)
    if len(groups) == 1:
        [(reason, paths)] = groups.items()
        return f" ({_names(paths)}): {reason}"
    shown = [f"{_names(paths)} ({reason})" for reason, paths in list(groups.items())[:limit]]
    rest = sum(len(paths) for paths in list(groups.values())[limit:])
    return ": " + "; ".join(shown) + (f"; and {rest} more" if rest else "")


def wait_verdict(*, errors: Sequence[tuple[str, str]] = (), held: Sequence[tuple[str, str]] = (),
                 new_conflicts: Sequence[dict[str, Any]] = (),
                 skipped: Sequence[tuple[str, str]] = ()) -> WaitVerdict:
    """Whether everything on disk is synced, after the pass a ``wait`` asked for.

    :param errors: ``(path, message)`` that failed in that pass.
    :param held: ``(path, side)`` deletes held by the safety valve.
    :param new_conflicts: conflicts (``{"path", "archived", …}``) recorded
        since the wait began and not resolved yet.
    :param skipped: ``(path, reason)`` names that cannot sync.
    :returns: a :class:`WaitVerdict`; ``message`` is ``""`` when synced, else
        one sentence per cause, each naming paths and what to do.
    """
    sentences: list[str] = []
    reasons: list[dict[str, str]] = []
    if errors:
        sentences.append(f"{_plural(len(errors), 'file', 'files')} failed to sync{_with_reasons(errors)}")
        reasons += [{"kind": "failed", "path": p, "reason": m} for p, m in errors]
    if held:
        sentences.append(f"{_plural(len(held), 'deletion is', 'deletions are')} held by the safety valve "
                         f"({_names([p for p, _ in _by_path(held)])}); run `ohsync confirm-deletes` to carry "
                         "them out, or `ohsync restore-deletes` to bring the files back")
        reasons += [{"kind": "held_delete", "path": p, "reason": _HELD_REASON.get(side, "held")}
                    for p, side in _by_path(held)]
    if new_conflicts:
        paths = [str(c.get("path")) for c in new_conflicts]
        kept = new_conflicts[0].get("archived")
        sentences.append(f"{_plural(len(paths), 'conflict', 'conflicts')} since the wait began "
                         f"({_names(paths)}): the other version is kept as {kept}; see `ohsync conflicts`")
        reasons += [{"kind": "conflict", "path": str(c.get("path")),
                     "reason": f"conflict: the other version is kept as {c.get('archived')}"}
                    for c in new_conflicts]
    if skipped:
        sentences.append(f"{_plural(len(skipped), 'path is', 'paths are')} not synced"
                         f"{_with_reasons(_by_path(skipped))}")
        reasons += [{"kind": "skipped", "path": p, "reason": r} for p, r in _by_path(skipped)]
    if not sentences:
        return WaitVerdict(True, "")
    return WaitVerdict(False, "; ".join(sentences), tuple(reasons))
