"""History going backwards: a library head that is not a descendant of the last one.

A restore from history done below Seafile, a snapshot rollback of the
server, a library replaced from a backup: the head commit moves to one that
does not have the last head we saw among its ancestors.  Every file then
looks "changed on the server" (older content) or "deleted on the server"
(files made since), and following the server would roll the person's newer
files back.  So while a regression is recorded:

* remote-driven deletes are held (the local file stays);
* remote-driven overwrites and merges are held: the local version stays live
  and the server's (older) version is archived into ``/.conflict/`` once
  (the resolver's ``ROLLBACK`` row, :mod:`ohsync.engine.merge.resolve`);
* a push outside a pass of such a path (a memory tool's write, filing's
  journal line, a conflict settled by hand) is refused, also before any
  pass has seen the rollback (:func:`hold_push`): the new bytes stay in the
  mirror and the caller says so; every push refuses to merge with a server
  version that is not its base (:func:`hold_merge`), which also covers a
  restore and a server edit made between a pass's listing and its push;
* everything else (local edits of untouched paths, new files on either side)
  syncs as usual;
* the mirror reports a named state with a sentence (:meth:`Regression.sentence`)
  until :func:`keep_newer` (``ohsync resync``) puts the newer version from
  either side back on both: a local version newer than the server's older
  one is uploaded, a server version edited after the rollback is merged
  with the local one (the older version as base), a file the server lost is
  uploaded again.

Ancestry comes from ``GET /api2/repos/{id}/history/`` (:func:`head_descends`).
The record lives in the state's meta table, so a restart keeps holding.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .context import MirrorContext
from .errors import OhsyncError
from .events import SyncEvent, SyncReport
from .ids import seafile_file_id, sha1_bytes
from .local_lookups import read_bytes_or_none
from .localfs import hash_file
from .merge.archive import archive
from .merge.choose import is_text
from .merge.resolve import Facts, Situation, decide
from .nofollow import open_regular
from .remote_scan import scan_remote
from .state import Base, StateStore
from .sync.reconcile import Action
from .sync.valve import Plan

__all__ = ["HeldByRollback", "Regression", "check_own_writes", "detect", "head_descends", "hold", "hold_merge",
           "hold_push", "keep_newer", "last_seen", "load",
           "save", "seen"]

META_KEY = "regression"
LAST_HEAD, LAST_HEAD_MTIME = "last_head", "last_head_mtime"
#: Set by :func:`~ohsync.engine.transfer.remote_written` (we wrote to the
#: server), cleared when a scan sees a new head: a head that stays put after
#: our writes means the server may have lost them (:func:`check_own_writes`).
WROTE = "wrote_since_head"

#: History pages read at most when looking for the last head (newest first).
MAX_PAGES = 5
#: Pages read when those could not tell (more new commits than they hold,
#: e.g. after a long absence): once per such head, so worth a longer read.
DEEP_PAGES = 40
PER_PAGE = 50


@dataclass
class Regression:
    """A recorded regression of the library's history.

    :ivar old_head: the last head seen before it.
    :ivar new_head: the head that does not descend from it.
    :ivar since: ISO 8601 UTC time it was found.
    :ivar held: rel path → the server's file id that was held back (its
        older version, archived), or None for a held delete.
    :ivar archived: rel path → rel path of the archived older version.
    """

    old_head: str
    new_head: str
    since: str
    held: dict[str, str | None] = field(default_factory=dict)
    archived: dict[str, str] = field(default_factory=dict)

    def sentence(self) -> str:
        """What happened and what the person can do, in one status message."""
        kept = len(self.held)
        files = f"{kept} newer local file{'s' if kept != 1 else ''} kept" if kept else "nothing changed here"
        return (f"The library on the server went back to an older state (restored from history or a "
                f"snapshot); {files}, nothing deleted or overwritten here, the server's older versions "
                f"are in .conflict/. Run `ohsync resync` to keep the newer version from either side.")

    def as_json(self) -> str:
        """The record as stored in the meta table."""
        return json.dumps({"old_head": self.old_head, "new_head": self.new_head, "since": self.since,
                           "held": self.held, "archived": self.archived}, ensure_ascii=False)


def load(state: StateStore) -> Regression | None:
    """The recorded regression of this mirror, or None."""
    raw = state.get_meta(META_KEY)
    if not raw:
        return None
    try:
        data: dict[str, Any] = json.loads(raw)
        return Regression(str(data["old_head"]), str(data["new_head"]), str(data["since"]),
                          dict(data.get("held") or {}), dict(data.get("archived") or {}))
    except (ValueError, KeyError, TypeError):
        return None


def save(state: StateStore, regression: Regression | None) -> None:
    """Record (or with None, clear) the regression."""
    state.set_meta(META_KEY, regression.as_json() if regression is not None else None)


def seen(state: StateStore, head: str, mtime: int) -> None:
    """Remember ``head`` (commit time ``mtime``) as the newest head known to
    hold everything this mirror saw and wrote: the next check starts there."""
    state.set_meta(LAST_HEAD, head)
    state.set_meta(LAST_HEAD_MTIME, str(mtime))
    state.set_meta(WROTE, None)


def check_own_writes(ctx: MirrorContext, head: str, walked: dict[str, Any]) -> bool:
    """After a pass that wrote, the head did not move: record a regression
    when the server no longer holds what was last agreed (a file whose base
    is gone or has another id), i.e. it went back to the head before our writes.

    :param walked: a fresh snapshot of the server (rel path → entry).
    :returns: True when a regression was recorded now.
    """
    ctx.state.set_meta(WROTE, None)
    if load(ctx.state) is not None:
        return False
    for rel, base in ctx.state.all_bases().items():
        if base.is_dir or not base.remote_id:
            continue
        entry = walked.get(rel)
        if entry is None or entry.is_dir or entry.id != base.remote_id:
            found = found_now("(our last writes)", head)
            save(ctx.state, found)
            ctx.emit(SyncEvent("error", "", message=found.sentence()))
            return True
    return False


def last_seen(state: StateStore) -> tuple[str | None, int]:
    """The newest head seen (see :func:`seen`) and its commit time (0: unknown)."""
    return state.get_meta(LAST_HEAD) or state.get_meta("head"), int(state.get_meta(LAST_HEAD_MTIME) or 0)


def detect(ctx: MirrorContext, head: str, known: tuple[str, bool | None] | None = None) -> bool:
    """Record a regression when ``head`` does not descend from the newest head seen.

    :param known: ``(head, descends)`` already found for this last head by
        one read of the history (:func:`~ohsync.engine.remote_diffs.history_since`);
        used when it is about ``head``, else the history is read here.
    :returns: True when one was found now (a :class:`SyncEvent` ``error``
        with the sentence is emitted); False otherwise, also while one is
        already recorded or when the history cannot tell.
    :raises RemoteError: from the client.
    """
    state = ctx.state
    last, ctime = last_seen(state)
    if not last or head == last or load(state) is not None:
        return False
    descends = known[1] if known is not None and known[0] == head else None
    if descends is None:
        # read here, or the shared read could not tell (more commits since the last
        # head than it holds): a rollback followed by many writes must still be found,
        # and an ordinary head answers on the first page anyway
        descends = head_descends(ctx.client, ctx.repo_id, last, ctime, head, max_pages=DEEP_PAGES)
    if descends is not False:
        return False
    found = found_now(last, head)
    save(state, found)
    ctx.emit(SyncEvent("error", "", message=found.sentence()))
    return True


def head_descends(client: Any, repo_id: str, old_head: str, old_ctime: int, new_head: str, *,
                  first: tuple[list[Any], bool] | None = None, max_pages: int = MAX_PAGES) -> bool | None:
    """Whether ``new_head`` has ``old_head`` among its ancestors.

    Reads ``GET /api2/repos/{id}/history/`` from the current head, newest
    first, at most ``max_pages`` pages of :data:`PER_PAGE` commits.

    :param old_ctime: the old head's commit time (Unix seconds, server clock;
        0 if unknown): commits older than it in the pages read, without
        ``old_head`` among them, say it is not an ancestor.
    :param first: the first page (``commit_history(page=1, per_page=PER_PAGE)``)
        when the caller read it already.
    :returns: True (descendant), False (not: the history reached the
        library's first commit, or the pages read hold commits older than
        ``old_head`` but not it), None (cannot tell: the history is longer
        or was trimmed).
    :raises RemoteError: from the client.
    """
    if new_head == old_head:
        return True
    seen_new = older = False
    for page in range(1, max_pages + 1):
        commits, more = first if page == 1 and first is not None else \
            client.commit_history(repo_id, page=page, per_page=PER_PAGE)
        for commit in commits:
            seen_new = seen_new or commit.id == new_head
            if commit.id == old_head or old_head in (commit.parent_id, commit.second_parent_id):
                return True
            if commit.parent_id is None:
                return False  # the library's first commit: old_head is not an ancestor
            # Older than the old head: not yet an answer, for a desktop client's
            # commit carries its own clock (one running ahead made the old head).
            older = older or bool(seen_new and old_ctime and commit.ctime < old_ctime)
        if not more:
            break  # the history ends here (trimmed by the library's history limit)
    # the old head never came: older commits than it say it is not an ancestor
    return False if older else None


def hold(ctx: MirrorContext, plans: list[Plan], regression: Regression, report: SyncReport) -> list[Plan]:
    """Drop the remote-driven deletes and overwrites of a pass during a regression.

    A held overwrite archives the server's version, the first time the path
    is held, as a conflict copy on both sides; the local version stays live.

    :returns: the plans that may run.
    :raises RemoteError: from the client while archiving (the pass stops).
    """
    out: list[Plan] = []
    for plan in plans:
        rel = plan.rel
        if plan.action is Action.DELETE_LOCAL:
            regression.held[rel] = None
            continue
        if plan.action in (Action.PULL, Action.MERGE) and plan.base is not None and plan.entry is not None \
                and plan.remote is not None:
            _, local_id, _, _ = hash_file(ctx.local_path(rel))
            if local_id == plan.remote.id:
                out.append(plan)  # same content on both sides: adopting it loses nothing
                continue
            # Held once is enough: a later server edit of the path was made
            # after the rollback; keep_newer merges it with the local version
            # against the older one archived here.
            if rel not in regression.held:
                theirs, theirs_id = ctx.client.download_bytes(ctx.repo_id, ctx.remote_path(rel))
                with open_regular(ctx.local_root, rel) as fh:
                    ours_head = fh.read(4096)  # the live version's origin names the copy
                decision = decide(Facts(Situation.ROLLBACK, rel, ours=ours_head, theirs=theirs))
                assert decision.copy is not None
                record = archive(ctx, rel, decision.copy, theirs=theirs)
                report.conflicts.append(record)
                regression.held[rel] = theirs_id
                regression.archived[rel] = record.archived
            continue
        out.append(plan)
    save(ctx.state, regression)
    return out


class HeldByRollback(OhsyncError):
    """A push held during a regression: the server's version of the path is
    the older one the rollback brought back (or the path is gone there), and
    a read-merge-write against it would take the newer lines out of the live
    file.  The local file stays as it is until :func:`keep_newer`."""


def hold_merge(ctx: MirrorContext, rel: str) -> None:
    """Refuse a push's merge with a server version that is not the base
    while a regression is recorded: that version may be the older one the
    rollback brought back, and merging ours with it (against our newer base)
    would take lines out of the live file.  :func:`hold` keeps such paths
    out of a pass; this catches every other push (a memory tool's write, a
    settled conflict, a restore, a filing's journal line) and a server edit
    made between a pass's listing and its push.

    :raises HeldByRollback: a regression is recorded.
    """
    if load(ctx.state) is not None:
        raise _held(rel)


def _held(rel: str) -> HeldByRollback:
    return HeldByRollback(f"{rel} is saved in the mirror but not on the server: the library on the server "
                          "went back to an older state, and pushing would roll this file back with it. "
                          "Run `ohsync resync` to keep the newer version from either side")


def hold_push(ctx: MirrorContext, rel: str, base: Base | None) -> None:
    """Refuse a push outside a sync pass (a memory tool's write, filing's
    journal and sidecar, a conflict settled by hand) that :func:`hold` would
    drop from a pass: during a regression, of a path held
    already or one whose server version is not the base (deleted or
    different in the last listing).

    Without a record, the server's head is read first (and its history
    when it moved since the last head seen): a rollback no pass has looked
    at yet is recorded now and the push refused.  Pushed, the write would be
    merged against the older version, and its update (based on the last
    head) would put that head back among the ancestors, hiding the rollback
    from the next pass, which would then follow the older state.

    :raises HeldByRollback: with a sentence saying where the write is and
        what the person can do.
    :raises RemoteError: from the client while reading the head or history.
    """
    found = load(ctx.state)
    if found is None:
        last, _ = last_seen(ctx.state)
        head = ctx.client.repo_info(ctx.repo_id).head_commit_id if last else None
        if not head:
            return
        if head == last:
            # our writes since this head did not move it: the server may have
            # lost them (a pass would see it, but not after our push moved it)
            if not ctx.state.get_meta(WROTE) or not _lost_own_writes(ctx, head):
                return
        elif not detect(ctx, head):
            return
        # The listing predates the rollback: the next pass lists the server
        # first, even one without a remote check (the daemon's pass for this
        # very path), which would push it on that listing.
        ctx.state.set_meta("head", None)
        raise _held(rel)  # found just now: the listing is older than it, so any path may be touched
    remote = ctx.snapshot.get(rel)
    if rel in found.held or (base is not None and (remote is None or remote.id != base.remote_id)):
        raise _held(rel)


def _lost_own_writes(ctx: MirrorContext, head: str) -> bool:
    """Walk the server's tree (as a pass does when the head stayed put after
    our writes) and record a regression when it lost them; the walk becomes
    the listing, so the next pass holds what the loss touched.

    :raises RemoteError: from the client.
    """
    walked = scan_remote(ctx.client, ctx.repo_id, ctx.remote_root, prev_head=None, prev_root_oid=None,
                         prev_snapshot=ctx.snapshot)
    lost = check_own_writes(ctx, head, walked.snapshot)
    ctx.snapshot = dict(walked.snapshot)
    return lost


def keep_newer(ctx: MirrorContext, regression: Regression) -> int:
    """Settle a regression by keeping the newer version from either side.

    For each held path the base becomes the server's older version, so the
    next pass uploads a newer local version, merges a server version edited
    after the rollback with the local one, and uploads a file the server lost
    again.  The regression record is cleared.

    :returns: how many held paths were settled.
    """
    for rel, held_id in regression.held.items():
        if held_id is None:
            ctx.state.delete_base(rel)  # the server lost it: the local file is new to it
            continue
        archived = regression.archived.get(rel)
        older = read_bytes_or_none(ctx.local_path(archived)) if archived else None
        if older is None or seafile_file_id(older) != held_id:
            ctx.state.set_base(Base(rel, False, "", held_id))
            continue
        ctx.state.set_base(Base(rel, False, sha1_bytes(older), held_id), older if is_text(older) else None)
    save(ctx.state, None)
    return len(regression.held)


def found_now(old_head: str, new_head: str) -> Regression:
    """A new regression record, found now."""
    return Regression(old_head, new_head, datetime.now(timezone.utc).isoformat(timespec="seconds"))
