"""The transfer steps of a pass: carry out the plans, record per-path failures.

:class:`RunSteps` runs one :class:`~ohsync.engine.sync.valve.Plan` at a time
(download, read-merge-write upload, deletes, adopting equal files), many new
files at once (a zip download on a cold start, batch uploads of new small
files) and moves.  A failure of one path is reported and kept in the
engine's :class:`~ohsync.engine.failures.FailureBook` (backoff, or held
until the path changes or the person acts); the path keeps its base, so the
next attempt merges against the right version.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from typing import Any

from ..errors import OhsyncError, RemoteError, classify, local_error, server_down
from ..events import SyncEvent, SyncReport
from ..failures import PathFailure
from ..local_lookups import read_bytes_or_none
from ..local_replace import BeingWritten, refuse_if_written
from ..localfs import LocalFile, hash_file
from ..memory.check import memory_problem
from ..memory.merge import is_memory_file
from ..memory.stamp import stamp_edit
from ..merge.stale_delete import CommitPages, keep_unseen_before_delete
from ..paths import parent_rel
from ..state import Base
from ..transfer import LocalChanged, PushOutcome, WritersFighting, adopt, fighting, merge_back, pull, push
from ..transfer_large import LARGE_FILE, push_large
from ..update_batch import batchable_edit, push_edits
from ..upload_batch import batchable, push_new_files
from .bulk import bulk_pull
from .deletes import delete_local, delete_remote
from .folder_moves import apply_folder_move, find_folder_moves
from .moves import move_local, move_remote
from .plan import PlanSteps
from .reconcile import Action
from .valve import Plan

__all__ = ["RunSteps", "SERVER_STRIKES"]

#: Requests the server may fail in a row (no success between) before the pass
#: ends: one failing file is that file's trouble, a run of them the server's.
SERVER_STRIKES = 3


class RunSteps(PlanSteps):
    """Carrying out plans (no public API; a layer of the sync engine)."""

    #: requests failed in a row in this pass (reset by every success) ...
    _strikes: int
    #: ... and the paths they were charged to, with the record each had before
    _struck: list[tuple[str, PathFailure | None]]
    #: the head of the listing before this pass's (it still held what this pass sees deleted)
    _listed_since: str | None
    #: that head for each remote delete whose check failed (kept for the next try)
    _delete_since: dict[str, str | None]
    #: the commit history those checks read in this pass (shared; None before the first listing)
    _delete_pages: CommitPages | None
    #: ``(path, reason)`` skipped by the last passes (the engine's)
    _skipped_pass: list[tuple[str, str]]

    def _per_path(self, exc: BaseException, rel: str | None, *, what: str = "") -> OhsyncError:
        """The failure of one path's operation, as the error to report for it.

        An OSError is translated first (:func:`~ohsync.engine.errors.local_error`).
        Raises the error instead, ending the pass, when its classification is
        wider than the path (a rejected login, a missing mirror folder, a
        server that cannot be reached), and when the server failed
        :data:`SERVER_STRIKES` requests in a row (:func:`server_down`); then
        the paths of that run get their earlier failure records back (an
        outage does not make them wait out a growing backoff afterwards).
        Anything that is not a failure ohsync knows (a bug) is re-raised.
        """
        err = local_error(exc, rel, what=what) if isinstance(exc, OSError) and not isinstance(exc, OhsyncError) else exc
        if not isinstance(err, OhsyncError):
            raise exc
        if classify(err).scope != "path":
            raise err
        if isinstance(err, RemoteError) and err.retryable:  # a 5xx, a drop, a 429, garbage
            self._strikes += 1
            if self._strikes >= SERVER_STRIKES:
                for path, before in reversed(self._struck):
                    self.failure_book.restore(path, before)
                self._struck = []
                raise server_down(err, self._strikes)
            if rel is not None:
                self._struck.append((rel, self.failure_book.get(rel)))
        return err

    def _went_through(self) -> None:
        """A path's operation succeeded: the server is answering."""
        self._strikes = 0
        self._struck = []

    @staticmethod
    def _version(plan: Plan) -> tuple[Any, Any]:
        """What a failure of ``plan`` is remembered against: both sides' versions."""
        fp = plan.fp if plan.fp is not None else (plan.entry.fingerprint if plan.entry is not None else None)
        return (tuple(fp) if fp is not None else None, plan.remote.id if plan.remote is not None else None)

    def _held_back(self, plan: Plan) -> bool:
        """True when ``plan``'s path failed on these very versions and waits."""
        return self.failure_book.held(plan.rel, self._version(plan)) is not None

    def _path_failed(self, plan: Plan, exc: OhsyncError, report: SyncReport) -> None:
        """Report one per-path failure and remember it (backoff, or held until a change)."""
        need = plan.remote.size if plan.remote is not None and plan.action is Action.PULL else 0
        item = self.failure_book.record(plan.rel, exc, self._version(plan), need_bytes=need)
        message = str(exc)
        if item.failure.permanent:
            message += " (not retried until the file changes or you run `ohsync refresh`)"
        report.errors.append((plan.rel, message))
        self.ctx.emit(SyncEvent("error", plan.rel, message=message))

    def _run(self, plan: Plan, report: SyncReport) -> None:
        """Carry out one plan; per-path failures are reported, not raised."""
        held = next((h for h in self._writer_held if plan.rel.startswith(h + "/")), None)
        if held is not None:
            # a file of the server's folder whose name a file here still holds, open in a program
            report.skipped.append((plan.rel, f"waits until {held}, open in another program, is closed"))
            self._pending.done(plan.rel)
            return
        paused = self._paused_paths.get(plan.rel)
        if paused is not None and paused[0] == self._version(plan) and fighting(self.ctx, plan.rel):
            # left alone until either side changes, the pause ends or the person refreshes:
            # no request, and a pass that finds nothing else settles
            report.skipped.append((plan.rel, paused[1]))
            self._quiet_pauses.add(plan.rel)
            self._pending.done(plan.rel)
            return
        failed, skipped = len(report.errors), len(report.skipped)
        self._run_plan(plan, report)
        self._pending.done(plan.rel)
        if len(report.errors) == failed:
            self.failure_book.succeeded(plan.rel)
            self._went_through()
            if len(report.skipped) == skipped:
                # synced, deleted or forgotten: a later fight at this path is a new one, announced again
                self._paused_paths.pop(plan.rel, None)

    def _run_plan(self, plan: Plan, report: SyncReport) -> None:
        ctx, rel, action = self.ctx, plan.rel, plan.action
        entry, remote, base = plan.entry, plan.remote, plan.base
        try:
            if action in (Action.PULL, Action.MERGE, Action.DELETE_LOCAL) and entry is not None:
                # the local file would be replaced or removed: not while a program is saving it
                # (asked again just before; asking first saves a download every pass it stays open)
                refuse_if_written(ctx, rel)
            if action in (Action.PULL, Action.MERGE) and entry is not None and remote is not None:
                # Same bytes on both sides (e.g. a crash after an upload): adopt.
                _, fid, _, _ = hash_file(ctx.local_path(rel))
                if fid == remote.id:
                    adopt(ctx, rel, remote.id, edited=base if action is Action.MERGE else None)
                    ctx.emit(SyncEvent("synced", rel, action="adopt"))
                    self._check_damaged(rel)
                    return
            if action is Action.FORGET:
                self.state.delete_base(rel)
            elif action is Action.DELETE_LOCAL:
                if plan.fp is not None:
                    # a stale overwrite, then a delete: what the deleter never saw goes to /.conflict/
                    # (a check that failed is tried again from the same listing's head)
                    since = self._delete_since.setdefault(rel, self._listed_since)
                    keep_unseen_before_delete(ctx, rel, since, self._delete_pages)
                self._delete_since.pop(rel, None)
                delete_local(ctx, rel, plan.fp)
                report.deleted_local.append(rel)
                ctx.emit(SyncEvent("synced", rel, "down", action="delete"))
            elif action is Action.DELETE_REMOTE:
                assert base is not None
                delete_remote(ctx, rel, base)
                report.deleted_remote.append(rel)
                ctx.emit(SyncEvent("synced", rel, "up", action="delete"))
            elif action is Action.PULL and entry is not None and remote is not None and \
                    merge_back(ctx, rel, remote, base, report):
                self._check_damaged(rel)
            elif action is Action.PULL:
                assert remote is not None
                pull(ctx, rel, remote, plan.fp if entry is not None else None)
                report.downloaded.append(rel)
                ctx.emit(SyncEvent("synced", rel, "down", action="download"))
                self._check_damaged(rel)
            else:
                large = entry is not None and entry.fingerprint[0] > LARGE_FILE
                if not large and entry is not None and self.options.stamp_edits:
                    stamp_edit(ctx, rel, plan.fp, base, remote_changed=action is Action.MERGE)
                outcome = push_large(ctx, rel, base) if large else push(ctx, rel, base)
                report.uploaded.append(rel)
                if outcome.action == "merge":
                    report.merged.append(rel)
                if outcome.conflict is not None:
                    report.conflicts.append(outcome.conflict)
                ctx.emit(SyncEvent("synced", rel, "up", action=outcome.action))
                self._check_damaged(rel)
        except BeingWritten as exc:
            # left for the pass the watcher starts when the program closes the file: no error, no backoff
            reason = str(exc)
            if (rel, reason) not in self._skipped_pass:
                ctx.emit(SyncEvent("skipped", rel, message=reason))
            report.skipped.append((rel, reason))
        except LocalChanged as exc:
            report.errors.append((rel, str(exc)))
        except WritersFighting as exc:
            report.skipped.append((rel, str(exc)))
            if rel not in self._paused_paths:
                ctx.emit(SyncEvent("error", rel, message=str(exc)))
            self._paused_paths[rel] = (self._version(plan), str(exc))
        except (OhsyncError, OSError) as exc:
            self._path_failed(plan, self._per_path(exc, rel), report)

    def _bulk_pull(self, plans: list[Plan], report: SyncReport,
                   should_stop: Callable[[], bool] | None = None) -> list[Plan]:
        """Fetch many new remote files through one zip download (cold start);
        paths that failed before are left to the ordinary pull, one by one."""
        # a path that failed before is retried on its own: a zip would carry what already landed
        fresh = [p for p in plans if p.action is Action.PULL and p.base is None and p.entry is None
                 and self.failure_book.get(p.rel) is None]
        refused: dict[str, OSError] = {}  # names this disk refused: each fails alone
        checked: set[str] = set()  # what the zip path wrote is checked as it lands, not read back

        def written(rel: str, data: bytes) -> None:
            self._check_damaged(rel, data)
            checked.add(rel)

        done = bulk_pull(self.ctx, [p.remote for p in fresh], should_stop, refused, written) if fresh else set()
        for rel in sorted(done):
            report.downloaded.append(rel)
            self.ctx.emit(SyncEvent("synced", rel, "down", action="download"))
        self._pending.done(*done)  # one count for the lot, not one status change per file
        with self.state.transaction():  # the damaged list's rows of the other files: one commit
            for rel in sorted(done - checked):
                self._check_damaged(rel)
        for plan in fresh:
            if plan.rel in refused:
                self._path_failed(plan, self._per_path(refused[plan.rel], plan.rel, what="writing the file"), report)
                self._pending.done(plan.rel)
        return [p for p in plans if p.rel not in done and p.rel not in refused]

    def _uploaded(self, rel: str, report: SyncReport, uploaded: set[str], pushed: PushOutcome | None = None) -> None:
        """One file of a batch went up and was verified: count it in
        ``report`` and ``uploaded``; ``pushed`` when it was sent again (the
        server had stored it damaged) and so may have merged or conflicted."""
        uploaded.add(rel)
        self._went_through()
        report.uploaded.append(rel)
        self._pending.done(rel)
        self.ctx.emit(SyncEvent("synced", rel, "up", action="upload"))
        self._paused_paths.pop(rel, None)
        self.failure_book.succeeded(rel)
        self._check_damaged(rel)
        if pushed is not None and pushed.action == "merge":
            report.merged.append(rel)
        if pushed is not None and pushed.conflict is not None:
            report.conflicts.append(pushed.conflict)

    def _batch_push(self, plans: list[Plan], report: SyncReport,
                    should_stop: Callable[[], bool] | None) -> list[Plan]:
        """Upload new small files several per request; returns the plans left."""
        new = [p for p in plans if batchable(self.ctx, p)]
        if not new:
            return plans

        uploaded: set[str] = set()

        def done(rel: str) -> None:
            self._uploaded(rel, report, uploaded)

        def repeated(plan: Plan, pushed: PushOutcome) -> None:
            # stored damaged by the server, sent again and verified: done now, even if the
            # batch fails later (the per-file way would push it again, stamped as an edit)
            self._uploaded(plan.rel, report, uploaded, pushed)

        try:
            outcome = push_new_files(self.ctx, new, executor=self.executor, on_done=done, on_repeated=repeated,
                                     should_stop=should_stop)
        except (OhsyncError, OSError) as exc:
            # a batch request failed (a 5xx, a drop): ends the pass when it is the server's
            # trouble; otherwise the files not verified take the per-file way, each on the
            # base it has now (the server's damaged copy of an upload of ours, if one was found)
            self._per_path(exc, None)
            rebased = set(self.ctx.upload_retries)
            return [dataclasses.replace(p, base=self.state.get_base(p.rel)) if p.rel in rebased else p
                    for p in plans if p.rel not in uploaded]
        for plan, refused in outcome.errors:
            self._path_failed(plan, refused, report)
            self._pending.done(plan.rel)
        left = {p.rel: p for p in outcome.rest}  # a plan may come back based on the server's damaged copy
        handled = {p.rel for p in new} - set(left)
        return [left.get(p.rel, p) for p in plans if p.rel not in handled]

    def _batch_edits(self, plans: list[Plan], report: SyncReport,
                     should_stop: Callable[[], bool] | None) -> list[Plan]:
        """Send the plain pushes of small files, when a folder holds several,
        as updates read back by one listing per folder (:mod:`.update_batch`);
        returns the plans left for the per-file push."""
        edits = [p for p in plans if batchable_edit(self.ctx, p)]
        folders = Counter(parent_rel(p.rel) for p in edits)
        edits = [p for p in edits if folders[parent_rel(p.rel)] > 1]
        if not edits:
            return plans

        def stamp(plan: Plan) -> None:  # as _run_plan does before a push
            if self.options.stamp_edits:
                stamp_edit(self.ctx, plan.rel, plan.fp, plan.base, remote_changed=False)

        uploaded: set[str] = set()

        def done(rel: str) -> None:
            self._uploaded(rel, report, uploaded)

        outcome = push_edits(self.ctx, edits, executor=self.executor, on_done=done, should_stop=should_stop,
                             prepare=stamp)
        if outcome.error is not None:
            self._per_path(outcome.error, None)  # ends the pass when the server is down
        for plan, pushed in outcome.repeated:  # stored damaged by the server, sent again and verified
            self._uploaded(plan.rel, report, uploaded, pushed)
        left = {p.rel: p for p in outcome.rest}  # a plan may come back based on the server's damaged copy
        return [left.get(p.rel, p) for p in plans if p.rel not in uploaded]

    def _folder_moves(self, local: dict[str, LocalFile], bases: dict[str, Base],
                      report: SyncReport) -> tuple[set[str], set[str]]:
        """Carry whole-folder moves first (``bases`` is updated to the new paths).

        :returns: ``(settled, again)``: the paths the moves accounted for, and
            the new paths the per-file pass must still look at (files changed
            since the base on either side, files the server added inside).
        """
        done: set[str] = set()
        again: set[str] = set()
        for move in find_folder_moves(self.ctx, local, bases):
            try:
                outcome = apply_folder_move(self.ctx, move, bases)
                done |= outcome.settled
                again |= outcome.again
            except (OhsyncError, OSError) as exc:
                report.errors.append((move.old, f"folder move to {move.new} not done: "
                                                f"{self._per_path(exc, move.old)}"))
                continue
            report.moved.append((move.old, move.new))
            self.ctx.emit(SyncEvent("synced", move.new, "up" if move.local_side else "down", action="move",
                                    message=f"folder moved from {move.old}"))
        return done, again

    def _run_move(self, old: Plan, new: Plan, report: SyncReport) -> bool:
        """Carry out one move; on failure the two halves run as delete + create
        in a later pass.

        :returns: True when it was carried out.
        """
        local_move = old.action is Action.DELETE_REMOTE
        self._pending.done(new.rel)
        try:
            if local_move:
                move_remote(self.ctx, old, new)
            else:
                move_local(self.ctx, old, new)
        except (OhsyncError, OSError) as exc:
            report.errors.append((old.rel, f"move to {new.rel} not done: {self._per_path(exc, old.rel)}"))
            return False
        report.moved.append((old.rel, new.rel))
        self.ctx.emit(SyncEvent("synced", new.rel, "up" if local_move else "down", action="move",
                                message=f"moved from {old.rel}"))
        return True

    def _check_damaged(self, rel: str, data: bytes | None = None) -> None:
        """Keep the ``damaged`` list true for a memory file just transferred.

        :param data: the bytes just written there (None: read from the file).
        """
        if not is_memory_file(rel):
            return
        if data is None:
            data = read_bytes_or_none(self.ctx.local_path(rel))
            if data is None:
                return
        self.state.set_issue("damaged", rel, memory_problem(data))
