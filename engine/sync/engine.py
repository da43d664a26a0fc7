"""The sync engine of one mirror: detect, reconcile, transfer, record.

:class:`SyncEngine` owns no threads.  The daemon's sync worker calls
:meth:`SyncEngine.sync` with the paths its watcher saw change (or None for
a full scan); each pass checks the server (one request when nothing
changed), classifies every candidate path against its base, and runs the
action of the reconciliation table (``reconcile``) through ``transfer``.
Per-path failures — including a 5xx, a dropped connection or a 429 on one
file's request — are reported and kept in a :class:`FailureBook`, and every
other path of the pass still syncs: the path is retried with exponential
backoff, or not at all while it needs the person (413, quota, a name the
other side cannot hold, a full or read-only disk) until it changes or the
person acts.  The pass ends with a typed error only for what is wider than
a path (``engine.errors.classify``): a rejected login, a missing mirror
folder, a server that cannot be reached or that failed several requests in
a row.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .. import regression, remote_diffs
from ..backups import prune_backups
from ..context import EngineOptions, MirrorContext
from ..crashpoints import reach
from ..errors import OhsyncError
from ..events import ConflictRecord, SyncEvent, SyncReport
from ..failures import FailureBook
from ..ignore import IGNORE_FILE, IgnoreRules
from ..library import resolve_library
from ..local_lookups import stat_or_none
from ..local_replace import recover_taken
from ..localfs import check_root, clean_temp_files, scan_tree
from ..merge.sfconflict import fold_foreign, original_of
from ..merge.stale_delete import CommitPages
from ..models import RepoInfo
from ..paths import normalize_rel
from ..remote_scan import scan_remote
from ..special_dirs import drop_settled_notices
from ..state import StateStore
from ..transfer import lift_fight_pauses
from ..trash import TRASH_DIR, is_trash_path, local_trash_note
from .confirm import confirm_plans, keep_confirmed
from .dirs import FolderSteps
from .echoes import OwnFolders, WatchedPaths, sort_watched
from .moves import move_sources, pair_moves, plan_again
from .pending import PendingLedger
from .reconcile import Action
from .valve import DeleteValve

__all__ = ["SyncEngine", "EngineOptions", "resolve_library"]


class SyncEngine(FolderSteps):
    """Keeps one local folder and one library subtree identical.

    :param client: a :class:`~ohsync.engine.client.SeafileClient`.
    :param repo_id: the library id.
    :param local_root: the mirror folder.
    :param state: this mirror's state store.
    :param remote_root: the library subtree mirrored (``/`` = all of it).
    :param options: tunables (backups, ignore patterns, read-back limit).
    :param on_event: called with :class:`SyncEvent` values (progress,
        synced paths, conflicts, per-path errors).
    :param executor: runs upload requests of new files in parallel
        (``concurrent.futures.Executor``; bounded by its workers); None =
        one after the other.  The engine never starts threads itself.
    """

    def __init__(self, client: Any, repo_id: str, local_root: Path, state: StateStore, *,
                 remote_root: str = "/", options: EngineOptions | None = None,
                 on_event: Callable[[SyncEvent], None] | None = None, executor: Any = None) -> None:
        self.options = options or EngineOptions()
        self.executor = executor
        self.local_root = Path(local_root).expanduser()
        self.ignore = IgnoreRules(self.options.ignore, self.local_root)
        self.ctx = MirrorContext(client, repo_id, remote_root, self.local_root, state,
                                 self.options, on_event)
        self.ctx.executor = executor
        self.state = state
        self.valve = DeleteValve(self.options.max_delete_files, self.options.max_delete_percent,
                                 floor=self.options.percent_floor)
        self._skipped_local: list[tuple[str, str]] = []
        self._pruned_on = ""
        self._case_insensitive: bool | None = None
        self._skipped_pass: list[tuple[str, str]] = []
        self._started = time.time()
        self._temps_cleaned = False
        #: fighting writers: rel path → (the versions it was paused on, the reason); announced once
        self._paused_paths: dict[str, tuple[Any, str]] = {}
        #: the paused paths this pass left alone, nothing changed on either side (nothing to do)
        self._quiet_pauses: set[str] = set()
        self._writer_held: set[str] = set()
        self._skipped_remote: list[tuple[str, str]] = []
        self._listed_since: str | None = None  # the head before this pass's listing
        self._delete_since: dict[str, str | None] = {}
        self._delete_pages: CommitPages | None = None
        self.failure_book = FailureBook(self.local_root)
        self.own_folders = OwnFolders()
        # (state generation, synced before, head) after a pass that found nothing to do
        # and left nothing waiting: while both hold, an idle poll is one request
        self._settled: tuple[int, bool, str] | None = None
        self._pending = PendingLedger(self.ctx.emit)  # the running pass's changes not carried yet
        self._strikes, self._struck = 0, []  # failed requests in a row (see RunSteps._per_path)

    # -- queries for the daemon ----------------------------------------
    def failures(self) -> list[dict[str, Any]]:
        """Paths that failed and wait (backoff) or need the person: ``[{"path",
        "reason", "title", "needs", "permanent", "count", "since", "retry_at"}]``
        (times are Unix seconds; ``retry_at`` None: not until the path changes
        or the person acts)."""
        return [item.as_dict() for item in self.failure_book.items()]

    def release_failures(self) -> int:
        """The person acted (``refresh``): try every failed path once more,
        and every path paused for fighting writers (the conflicts so far no
        longer count towards a pause: :func:`~ohsync.engine.transfer.lift_fight_pauses`).

        :returns: how many failed paths were released.
        """
        self._paused_paths.clear()
        lift_fight_pauses(self.ctx)
        return self.failure_book.release()

    def conflicts(self) -> list[ConflictRecord]:
        """Every conflict recorded for this mirror, oldest first."""
        return self.state.conflicts()

    def damaged(self) -> list[tuple[str, str]]:
        """``(path, reason)`` of memory files that do not parse (not those deleted or moved
        into the trash since: a damaged file the person trashed needs nothing more)."""
        return [(p, r) for p, r in self.state.issues("damaged")
                if not is_trash_path(p) and (self.state.get_base(p) is not None or self.ctx.local_path(p).exists())]

    def skipped(self) -> list[tuple[str, str]]:
        """``(path, reason)`` of names that cannot exist on the other side."""
        problems = {(IGNORE_FILE, p) for p in self.ignore.problems}
        notices = set(self.ctx.notices.items())
        return sorted(set(self._skipped_local) | set(self._skipped_remote) | set(self._skipped_pass) | problems
                      | notices)

    def clock_offset(self) -> float | None:
        """Seconds the server's clock is ahead of ours (None: not known yet).

        Only reported: versions are judged by content, never by clocks.
        """
        return getattr(self.ctx.client, "clock_offset", None)

    def held_deletes(self) -> list[tuple[str, str]]:
        """``(path, side)`` of deletes held by the safety valve (side: local/remote)."""
        return self.valve.held()

    def confirm_deletes(self) -> int:
        """Let the next pass carry out the held deletes; returns how many."""
        self._settled = None  # the next pass is a full one, whatever its shape
        return self.valve.confirm()

    def regression(self) -> str | None:
        """The sentence for a library whose history went backwards (held
        deletes and overwrites, see :mod:`~ohsync.engine.regression`), or None."""
        found = regression.load(self.state)
        return found.sentence() if found is not None else None

    def keep_newer(self) -> int:
        """Settle a history regression by keeping the newer version from
        either side on both (``ohsync resync``); the next pass does the
        uploads and merges.  Returns how many held paths it settled (0: none)."""
        found = regression.load(self.state)
        return regression.keep_newer(self.ctx, found) if found is not None else 0

    def reset_state(self) -> None:
        """Forget the sync history (``ohsync resync``): the next pass treats
        every path as new on both sides, so nothing is deleted: equal files
        are adopted, one-sided files copied, different ones merged against an
        empty base or archived as conflict copies."""
        self.state.forget_sync_history()
        self.ctx.snapshot = {}
        self.ctx.written.clear()
        self._settled = None
        self._paused_paths.clear()
        self.failure_book.release()

    def awaiting_push(self, rel_paths: Iterable[str]) -> set[str]:
        """The paths among ``rel_paths`` (the watcher's) that a pass would push:
        the local file differs from what was last synced by its stat
        fingerprint, is new, or is gone while a base says it was synced.

        Echo suppression for the count of waiting changes: our own writes
        (a download records the new fingerprint in the base) and events that
        changed nothing are left out, as are ignored names and folders.  One
        ``lstat`` and one indexed base lookup per path; nothing is hashed.

        :returns: the distinct rel paths (normalised) awaiting push.
        """
        return self.watched(rel_paths).awaiting

    def watched(self, rel_paths: Iterable[str]) -> WatchedPaths:
        """The watcher's paths sorted by :func:`~ohsync.engine.sync.echoes.sort_watched`:
        ``awaiting`` push (as :meth:`awaiting_push`), ``to_sync`` (what a pass
        must still look at) and ``echoes`` (our own writes and ignored names:
        a pass would find them unchanged without reading them).

        :returns: a :class:`~ohsync.engine.sync.echoes.WatchedPaths` of normalised rel paths.
        """
        return sort_watched(rel_paths, is_ignored=self.is_ignored, get_base=self.state.get_base,
                            local_path=self.ctx.local_path)

    def note_saved(self, rel_paths: Iterable[str]) -> None:
        """Paths whose save the watcher saw complete (closed after writing, or
        renamed onto): the next pass stamps such a memory file without first
        waiting for it to stay unchanged ``stamp_quiet`` seconds
        (:func:`~ohsync.engine.memory.stamp.stamp_edit`).  Forgotten after
        that pass."""
        self.ctx.saved.update(normalize_rel(p) for p in rel_paths)

    def own_folder(self, local_path: str | os.PathLike[str]) -> bool:
        """True when the folder at ``local_path`` is one this engine created
        (same rel path, same inode): the watcher's "created" event for it is
        an echo and needs no full scan (:class:`~ohsync.engine.sync.echoes.OwnFolders`).
        Any doubt (outside the mirror, ignored, gone, not a folder) is False."""
        rel = self.rel_path(local_path)
        if rel is None:
            return False
        st = stat_or_none(local_path, follow=False)
        return st is not None and stat.S_ISDIR(st.st_mode) and self.own_folders.is_own(rel, st.st_ino)

    def forget_own_folders(self) -> None:
        """A folder was deleted or moved here (the watcher says so): no later
        "created" event of a folder counts as an echo."""
        self.own_folders.forget()

    def release_snapshot(self) -> bool:
        """Between passes of a settled mirror: stop holding the remote listing
        in memory (it stays in the state database; the next pass that needs
        it reads it back).  An idle poll never needs it.

        :returns: True when a listing was dropped (worth a
            ``gc``/``malloc_trim``); False when the mirror is not settled
            (the next pass will want it) or none was held.
        """
        return self._settled is not None and self.ctx.release_snapshot()

    def is_ignored(self, rel_path: str) -> bool:
        """True when ``rel_path`` is never synced (ignore rules, temp files)."""
        return self.ignore.match(rel_path)

    def rel_path(self, local_path: str | os.PathLike[str]) -> str | None:
        """The rel path of a local path, or None when outside the mirror or ignored."""
        try:
            rel = Path(local_path).relative_to(self.local_root)
        except ValueError:
            return None
        rel_s = normalize_rel(rel.as_posix())
        if not rel_s or self.is_ignored(rel_s):
            return None
        return rel_s

    def prepare_root(self) -> None:
        """Create the folder of a mirror never synced, before the first pass.

        The daemon calls this when the engine opens, so that its file
        watcher runs from the first second: edits, moves and deletes made
        while the first pass downloads are seen, not reverted.

        :raises MirrorMissingError: the mirror was synced before and its
            folder is missing (an unmounted disk), or it cannot be created.
        """
        check_root(self.local_root, marker_expected=self.state.has_bases())

    # -- one pass ---------------------------------------------------------
    def sync(self, local_paths: Iterable[str] | None = None, *, check_remote: bool = True,
             should_stop: Callable[[], bool] | None = None) -> SyncReport:
        """Run one pass.

        :param local_paths: rel paths the watcher saw change; None = scan
            the whole mirror (stat only; changed files are hashed).
        :param check_remote: look for remote changes (head commit first).
        :param should_stop: asked between two files; when it answers True the
            pass ends there (``report.interrupted``), the rest waits for the
            next pass.  A file operation is never cut in the middle.
        :returns: what the pass did.
        :raises MirrorMissingError: the mirror root is gone (nothing done).
        :raises AuthError, NetworkError, ServerError, ThrottledError,
            ProtocolError: the server or network failed for the whole mirror
            (the head check, a listing, an unreachable server, or
            ``SERVER_STRIKES`` failed requests in a row; the error's scope is
            ``mirror``); the pass stopped, what was done is recorded, the rest
            is retried next pass.  A request that failed for one path only is
            in ``report.errors`` instead.
        """
        report = SyncReport()
        self._quiet_pauses = set()
        self._writer_held = set()
        drop_settled_notices(self.ctx)
        self.ctx.should_stop = should_stop
        requests_before = getattr(self.ctx.client, "request_count", 0)
        idle_shaped = local_paths is not None and check_remote
        if idle_shaped:
            local_paths = list(local_paths or [])
            idle_shaped = not local_paths
        info = None
        if idle_shaped and self._settled is not None:
            info = self._idle_poll()
            if info is None:
                self.ctx.should_stop = None
                self.ctx.saved.clear()
                report.idle = True
                report.requests = getattr(self.ctx.client, "request_count", 0) - requests_before
                return report
        self._settled = None
        self._strikes, self._struck = 0, []
        generation = self.state.generation
        held_before = set(self.valve.held())
        bases = self.state.all_bases()
        check_root(self.local_root, marker_expected=bool(bases))
        self.ignore.reload()
        if self.state.get_meta("head") is None:
            check_remote = True  # never listed: the snapshot means nothing yet
        folded: set[str] = set()
        if check_remote:
            self._check_remote(report, info)
        considered: set[str] | None = None  # None: the whole mirror
        try:
            if check_remote:
                folded = fold_foreign(self.ctx, report)
            if local_paths is None:
                note = local_trash_note(self.ctx)
                if note:
                    self.ctx.emit(SyncEvent("note", TRASH_DIR, message=note))
                self._prune_backups()
                if not self._temps_cleaned:
                    known = {b.sha1 for b in bases.values() if b.sha1}
                    for taken in clean_temp_files(self.local_root, older_than=self._started):
                        recover_taken(self.ctx, taken, known)   # a save a kill left under a temp name
                    self._temps_cleaned = True
                local, self._skipped_local = scan_tree(self.local_root, self.ignore)
                candidates = set(local) | set(bases) | set(self.ctx.snapshot)
            else:
                dirty = {normalize_rel(p) for p in local_paths}
                # a folder event stands for everything synced below it
                dirty |= {p for p in bases for d in list(dirty) if d and p.startswith(d + "/")}
                # paths that failed earlier are looked at again (skipped while they wait)
                candidates = dirty | self._remote_differences(bases) | {f.path for f in self.failure_book.items()}
                considered = candidates
                local = self._stat_paths(candidates)
                # the old half of a move may come in a later batch than the new file
                sources = move_sources(self.ctx, local, bases, candidates)
                if sources:
                    candidates |= sources
                    local.update(self._stat_paths(sources))
            candidates |= {original_of(p) or p for p in folded}
            candidates -= folded
            candidates = {p for p in candidates if p and not self.ignore.match(p)}
            candidates -= self._case_clashes(bases, report)
            candidates -= self._too_long_here(candidates, local, report)
            settled, again = self._folder_moves(local, bases, report)
            candidates = (candidates - settled) | again
            if local_paths is not None and again - set(local):
                local.update(self._stat_paths(again - set(local)))
            dir_deletes = self._sync_dirs(candidates, local, bases, report)
            plans = []
            for rel in sorted(candidates):
                entry = local.get(rel)
                remote = self.ctx.snapshot.get(rel)
                if (entry is not None and entry.is_dir) or (remote is not None and remote.is_dir):
                    continue
                plan = self._plan_file(rel, entry, remote, bases.get(rel), report)
                if plan is not None:
                    plans.append(plan)
            plans = confirm_plans(self.ctx, plans, lambda p, remote: self._plan_file(
                p.rel, local.get(p.rel), remote, bases.get(p.rel), report), held=self.valve.holding())
            held = regression.load(self.state)
            if held is not None:
                plans = regression.hold(self.ctx, plans, held, report)
            unchecked: list[tuple[str, OhsyncError]] = []
            plans, moves = pair_moves(self.ctx, plans, unchecked)
            for rel, exc in unchecked:
                # a failure, so the pass does not settle: the next poll looks again, not the next full scan
                message = f"not checked whether it was moved on the server: {self._per_path(exc, rel)}"
                report.errors.append((rel, message))
                self.ctx.emit(SyncEvent("error", rel, message=message))
            # a delete the valve holds is listed as held, never as waiting (not even for a moment)
            holding = self.valve.holding()
            self._pending.plan([p for p in plans if p.rel not in holding], moves)
            deferred: set[str] = set()
            if local_paths is not None and any(p.action is Action.DELETE_REMOTE for p in plans):
                # Local deletes are counted against the safety valve over the whole
                # mirror: a watcher delivers an `rm -r` in several batches.
                deferred = {p.rel for p in plans if p.action is Action.DELETE_REMOTE}
                plans = [p for p in plans if p.action is not Action.DELETE_REMOTE]
                report.rescan = True
            for old, new in moves:
                # moved with the base: changed content there is pulled or merged now, a file made
                # at the old path is pulled
                for rel in plan_again(old, new) if self._run_move(old, new, report) else []:
                    again_plan = self._plan_file(rel, self._stat_paths({rel}).get(rel), self.ctx.snapshot.get(rel),
                                                 self.state.get_base(rel), report)
                    if again_plan is not None:
                        plans.append(again_plan)
            # a delete left for the rescan stays held meanwhile (status must not flicker)
            plans = self.valve.filter(plans, sum(1 for b in bases.values() if not b.is_dir), report,
                                      None if local_paths is None else candidates - deferred)
            keep_confirmed(self.ctx, {rel for rel, _ in report.held_deletes})
            plans = [p for p in plans if not self._held_back(p)]
            # held deletes and paths waiting out a failure are listed as such, not as waiting
            self._pending.keep({p.rel for p in plans} | (deferred - holding))
            plans = self._bulk_pull(plans, report, should_stop)
            plans = self._batch_edits(self._batch_push(plans, report, should_stop), report, should_stop)
            for plan in plans:
                if should_stop is not None and should_stop():
                    report.interrupted = True
                    break
                self._run(plan, report)
            self._finish_dir_deletes(dir_deletes, report)
            self._forget_resolved_conflicts()
            if local_paths is None:
                self.failure_book.forget(lambda p: p in local or p in self.ctx.snapshot)
            if report.interrupted:
                # a folder moved mid-pass may have carried a temp file of ours away;
                # nothing of this pass is in flight any more, so the next scan may remove it
                self._started, self._temps_cleaned = time.time(), False
        finally:
            # our own writes of this pass: their folders are marked for listing again (remote_written)
            self.state.replace_remote_snapshot(self.ctx.snapshot.values())
            report.waiting_up, report.waiting_down = sorted(self._pending.up), sorted(self._pending.down)
            report.upload_retries, self.ctx.upload_retries = self.ctx.upload_retries, []
            self._pending = PendingLedger(self.ctx.emit)
            self.ctx.should_stop = None
            self.ctx.saved.clear()
            report.requests = getattr(self.ctx.client, "request_count", 0) - requests_before
            # a pass over some paths keeps what earlier passes skipped elsewhere
            kept = [] if considered is None else [s for s in self._skipped_pass if s[0] not in considered]
            self._skipped_pass = sorted(set(kept) | set(report.skipped))
        # settled: an idle-shaped pass, or a full scan with the server checked, that found nothing
        # (else every periodic full scan would be followed by a pass that reads every base again)
        quiet_full = local_paths is None and check_remote
        # deletes the valve holds, unchanged, are nothing to do: such a pass settles too (and the next
        # polls cost one request, not one per held path)
        nothing_new = not candidates - {rel for rel, _ in held_before} - self._quiet_pauses
        if (idle_shaped and nothing_new or quiet_full) and self._nothing_waits(report, generation, held_before):
            self._settled = (self.state.generation, bool(bases), self.state.get_meta("head") or "")
        return report

    def _nothing_waits(self, report: SyncReport, generation: int,
                       held_before: set[tuple[str, str]] | None = None) -> bool:
        """True when an idle pass did nothing and left nothing for the next one:
        a pass with the same head and no local change would do the same nothing.

        ``generation`` is the state's before the pass: nothing may have been
        written since.  ``held_before``: the deletes the valve held before the
        pass; the same ones still held wait for the person, not for a pass.
        """
        # a paused path left alone, unchanged on both sides, waits for the person or the clock
        skipped = [s for s in report.skipped if s[0] not in self._quiet_pauses]
        if (report.remote_changed or report.uploaded or report.downloaded or report.merged or report.conflicts
                or report.errors or skipped or report.damaged or report.deleted_local
                or report.deleted_remote or report.moved or report.interrupted or report.rescan):
            return False
        if set(report.held_deletes) != (held_before or set()) or set(self.valve.held()) != (held_before or set()):
            return False
        if self.failure_book.items() or regression.load(self.state) is not None:
            return False
        return self.state.generation == generation

    def _idle_poll(self) -> RepoInfo | None:
        """The fast idle poll of a settled mirror: one request, no table, no walk.

        :returns: None when the head is unchanged (the pass is over); else the
            library info read, for the full pass that follows.
        """
        assert self._settled is not None
        generation, synced, head = self._settled
        spec = self.ignore._spec
        check_root(self.local_root, marker_expected=synced)
        self.ignore.reload()
        info: RepoInfo = self.ctx.client.repo_info(self.ctx.repo_id)
        if (self.state.generation == generation and self.ignore._spec is spec and info.head_commit_id
                and info.head_commit_id == head and self.ctx.head == head and not self.ctx.head_stale):
            return None
        return info

    def _forget_resolved_conflicts(self) -> None:
        """A conflict whose archived copy was deleted on both sides is settled:
        the person looked at it and threw the other version away."""
        gone = [c.archived for c in self.state.conflicts()
                if c.archived not in self.ctx.snapshot and not self.ctx.local_path(c.archived).exists()]
        if gone:
            self.state.forget_conflicts(gone)

    def _prune_backups(self) -> None:
        """Drop backups past their retention, at most once a day."""
        today = time.strftime("%Y-%m-%d")
        if self.options.backup_dir is None or self._pruned_on == today:
            return
        self._pruned_on = today
        prune_backups(self.options.backup_dir, self.options.backup_days)

    def _check_remote(self, report: SyncReport, info: RepoInfo | None = None) -> None:
        prev_head = self.state.get_meta("head")
        self._listed_since = prev_head
        self._delete_pages = CommitPages(self.ctx)
        if info is None:
            info = self.ctx.client.repo_info(self.ctx.repo_id)
        # a moved head: the commits' own changes first, the walk when they cannot tell
        scan, since = remote_diffs.incremental(self.ctx, info, self._skipped_remote)
        if scan is None:
            scan = scan_remote(self.ctx.client, self.ctx.repo_id, self.ctx.remote_root, prev_head=prev_head,
                               prev_root_oid=self.state.get_meta("root_oid"),
                               prev_snapshot=self.ctx.snapshot, info=info)
        report.remote_changed = scan.changed
        if scan.changed:
            self.ctx.snapshot = dict(scan.snapshot)
            self._skipped_remote = scan.skipped
        for folder, problem in scan.rejected:
            report.errors.append((folder or "/", problem))
        if scan.rejected:
            # keep the last head and root id: the next pass lists those folders again
            self.state.replace_remote_snapshot(self.ctx.snapshot.values())
            return
        regression.detect(self.ctx, scan.head, (since.head, since.descends) if since is not None else None)
        if not scan.changed and scan.head == prev_head and self.state.get_meta(regression.WROTE):
            # We wrote since this head, yet it did not move: walk the tree to
            # see whether the server lost our writes (rolled back to it).
            scan = scan_remote(self.ctx.client, self.ctx.repo_id, self.ctx.remote_root, prev_head=None,
                               prev_root_oid=None, prev_snapshot=self.ctx.snapshot)
            report.remote_changed = True
            regression.check_own_writes(self.ctx, scan.head, scan.snapshot)
            self.ctx.snapshot = dict(scan.snapshot)
            self._skipped_remote = scan.skipped
        # the snapshot's changed rows and the head they belong to commit together
        with self.state.transaction():
            if self.state.replace_remote_snapshot(self.ctx.snapshot.values()):
                reach("remote.snapshot_written")
            self.state.set_meta("head", scan.head)
            self.state.set_meta("root_oid", scan.root_oid)
            regression.seen(self.state, scan.head, scan.head_mtime)
        self.ctx.written.clear()  # the uploads so far are in the history up to this head
        # a delete whose check failed keeps its starting point only while the delete stands
        for rel in [r for r in self._delete_since if r in self.ctx.snapshot or self.state.get_base(r) is None]:
            del self._delete_since[rel]
        self.ctx.set_head(scan.head or None, listed=True)  # read before every listing: a safe base for updates
        self.ctx.head_stale.clear()
