"""Confirm before destroying: one listing is never enough to delete locally.

A folder listing can be wrong in ways its ``oid`` header does not show (a
cache that forgets an entry, a proxy that answers for another folder), and a
listing is all a remote delete or a remote move is built from.  So:

* :func:`listing_problem` checks a listing against the folder id it was
  asked for (the parent listing's entry id, or the library's ``root``): an
  answer for another folder is rejected, never used;
* :func:`confirm_vanished` asks the server directly about every file that
  vanished from a listing before the engine deletes (or moves) the local
  copy: only a 404 from ``GET /api2/repos/{id}/file/detail/`` (or, for a
  whole folder gone, from its own listing) confirms the absence.  A file the
  server still has goes back into the snapshot as the server describes it.

A delete the safety valve holds is not asked about on every pass: its
confirmed absence is kept (``ctx.confirmed_absent``) while the folder it was
in keeps the id it had then, for at most :data:`RECHECK_HELD_SECONDS`; a held
mass delete thus costs no request per pass.  Once the person confirms the
deletes, every one is asked about again right before it is carried out.

No threads, no local writes: the caller re-plans what this returns.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Iterable

from ..context import MirrorContext
from ..errors import NotFoundError
from ..models import DirListing, RemoteEntry
from ..paths import parent_rel
from .reconcile import Action
from .valve import Plan

__all__ = ["RECHECK_HELD_SECONDS", "listing_problem", "confirm_vanished", "confirm_plans", "folder_key",
           "keep_confirmed"]

log = logging.getLogger(__name__)

#: Seconds a held delete's confirmed absence is trusted while its folder is unchanged.
RECHECK_HELD_SECONDS = 3600.0


def folder_key(ctx: MirrorContext, rel: str) -> str:
    """What changes when the folder holding ``rel`` changes on the server:
    the id of its nearest folder still listed (the library root's id, the
    ``root_oid`` meta, for a file at the top)."""
    d = parent_rel(rel)
    while d and d not in ctx.snapshot:
        d = parent_rel(d)
    if d:
        return f"{d}\0{ctx.snapshot[d].id}"
    return "\0" + (ctx.state.get_meta("root_oid") or "")


def keep_confirmed(ctx: MirrorContext, held: Collection[str]) -> None:
    """Forget the confirmed absences of paths no longer held (confirmed, restored, gone)."""
    ctx.confirmed_absent = {rel: mark for rel, mark in ctx.confirmed_absent.items() if rel in held}


def listing_problem(listing: DirListing, expected_oid: str | None) -> str | None:
    """Why a listing cannot be trusted, or None.

    :param listing: the answer of ``GET /api2/repos/{id}/dir/?p=``.
    :param expected_oid: the folder id the caller knows the folder has now
        (from the parent's listing or the library's ``root``); None: unknown.
    :returns: a sentence when the ``oid`` header names another folder.
    """
    if expected_oid is None or listing.oid == expected_oid:
        return None
    return (f"the server answered the listing of {listing.path} with the id of another folder "
            f"({listing.oid[:12]}…, expected {expected_oid[:12]}…); it was not used and is asked again next pass")


def confirm_vanished(ctx: MirrorContext, rels: Iterable[str]) -> tuple[set[str], dict[str, RemoteEntry]]:
    """Ask the server directly about files that vanished from a listing.

    A file whose folder vanished too is confirmed by one listing of the
    top-most vanished folder answering 404; every other file by its own
    ``GET /api2/repos/{id}/file/detail/?p=`` answering 404.

    :param rels: rel paths of files that have a base but no snapshot entry.
    :returns: ``(confirmed, still_there)``: the rel paths the server really
        no longer has, and rel path → entry for files it still has.
    :raises RemoteError: from the client (other than 404): the caller drops
        the deletes this pass.
    """
    confirmed: set[str] = set()
    present: dict[str, RemoteEntry] = {}
    folder_gone: dict[str, bool] = {}

    def gone_folder(rel_dir: str) -> bool:
        """True when the top-most vanished folder above ``rel_dir`` answers 404."""
        top = None
        d = rel_dir
        while d and d not in ctx.snapshot:
            top = d
            d = parent_rel(d)
        if top is None:
            return False
        if top not in folder_gone:
            try:
                ctx.client.list_dir(ctx.repo_id, ctx.remote_path(top))
                folder_gone[top] = False
            except NotFoundError:
                folder_gone[top] = True
        return folder_gone[top]

    for rel in sorted(rels):
        if gone_folder(parent_rel(rel)):
            confirmed.add(rel)
            continue
        try:
            detail = ctx.client.file_detail(ctx.repo_id, ctx.remote_path(rel))
        except NotFoundError:
            confirmed.add(rel)
            continue
        log.warning("%s vanished from a listing but the server still has it; kept", rel)
        present[rel] = RemoteEntry(rel, False, detail.id, detail.size, detail.mtime)
    return confirmed, present


def confirm_plans(ctx: MirrorContext, plans: list[Plan],
                  replan: Callable[[Plan, RemoteEntry], Plan | None],
                  held: Collection[str] = ()) -> list[Plan]:
    """Keep a ``DELETE_LOCAL`` plan only when the server confirms the absence.

    A file the server still has is put back into ``ctx.snapshot`` (with its
    folders, under an id that makes the next scan list them again) and its
    plan is replaced by ``replan(plan, entry)`` (None: nothing to do).

    :param held: rel paths whose deletes the valve holds: one confirmed
        before, in a folder unchanged since (and less than
        :data:`RECHECK_HELD_SECONDS` ago), is not asked about again.
    :returns: the plans to carry out, in the same order.
    :raises RemoteError: from the client (the pass stops; nothing was deleted).
    """
    vanished = [p.rel for p in plans if p.action is Action.DELETE_LOCAL]
    if not vanished:
        return plans
    now = time.monotonic()
    keys = {rel: folder_key(ctx, rel) for rel in vanished}

    def trusted(rel: str) -> bool:
        mark = ctx.confirmed_absent.get(rel)
        return rel in held and mark is not None and mark[0] == keys[rel] and now - mark[1] < RECHECK_HELD_SECONDS

    confirmed, present = confirm_vanished(ctx, [rel for rel in vanished if not trusted(rel)])
    for rel in confirmed:
        ctx.confirmed_absent[rel] = (keys[rel], now)
    out: list[Plan] = []
    for plan in plans:
        entry = present.get(plan.rel) if plan.action is Action.DELETE_LOCAL else None
        if entry is None:
            out.append(plan)
            continue
        ctx.snapshot[plan.rel] = entry
        folder = parent_rel(plan.rel)
        while folder and folder not in ctx.snapshot:
            ctx.snapshot[folder] = RemoteEntry(folder, True, "0" * 40, 0)
            folder = parent_rel(folder)
        again = replan(plan, entry)
        if again is not None:
            out.append(again)
    return out
