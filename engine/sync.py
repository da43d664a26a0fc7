"""The sync engine of one mirror: detect, reconcile, transfer, record.

:class:`SyncEngine` owns no threads.  The daemon's sync worker calls
:meth:`SyncEngine.sync` with the paths its watcher saw change (or None for
a full scan); each pass checks the server (one request when nothing
changed), classifies every candidate path against its base, and runs the
action of the reconciliation table (``reconcile``) through ``transfer``.
Per-path failures are reported and kept in a :class:`FailureBook`: the
path is retried with exponential backoff, or not at all while it needs the
person (413, quota, a name the other side cannot hold, a full or read-only
disk) until it changes or the person acts; failures of the server or the
network abort the pass with a typed error.
"""

from __future__ import annotations

import os
import stat
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .context import EngineOptions, MirrorContext
from .errors import (LibraryNotFound, LocalError, NotFoundError, OhsyncError, QuotaError, RemoteOperationError,
                     local_error)
from .events import ConflictRecord, SyncEvent, SyncReport
from .failures import FailureBook
from .ignore import IGNORE_FILE, IgnoreRules
from .localfs import LocalFile, check_root, find_decomposed, clean_temp_files, hash_file, prune_backups, scan_tree, stat_fingerprint
from .models import RemoteEntry, RepoInfo
from .paths import name_problem, normalize_rel
from .reconcile import Action, Side, decide
from .remote_scan import scan_remote
from .state import Base, StateStore
from .deletes import delete_local, delete_remote
from .bulk import bulk_pull
from .confirm import confirm_plans
from . import regression
from .folder_moves import apply_folder_move, find_folder_moves
from .moves import move_local, move_remote, pair_moves
from .memory_check import memory_problem
from .memory_merge import is_memory_file
from .memory_stamp import stamp_edit
from .transfer_large import LARGE_FILE, push_large
from .upload_batch import batchable, push_new_files
from .transfer import LocalChanged, WritersFighting, adopt, ensure_remote_dir, pull, push, remote_written
from .history_merge import merge_back
from .sfconflict import fold_foreign, original_of
from .valve import DeleteValve, Plan

__all__ = ["SyncEngine", "EngineOptions", "resolve_library"]

_PER_PATH_ERRORS = (LocalError, NotFoundError, RemoteOperationError, QuotaError)


def _probe_case_insensitive(folder: Path) -> bool:
    """True when ``folder``'s file system treats ``A`` and ``a`` as one name."""
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".ohsync-tmp-CaseProbe")
    except OSError:
        return False
    os.close(fd)
    try:
        return os.path.exists(os.path.join(folder, os.path.basename(name).lower()))
    finally:
        os.unlink(name)


def resolve_library(client: Any, *, name: str | None = None, library_id: str | None = None,
                    create: bool = False) -> RepoInfo:
    """Find the configured library (``GET /api2/repos/``), optionally creating it.

    :raises LibraryNotFound: no library with that id/name (and ``create`` is
        False), or the name is ambiguous.
    :raises RemoteError: from the client.
    """
    repos: list[RepoInfo] = client.list_repos()
    if library_id:
        for repo in repos:
            if repo.id == library_id:
                return repo
        raise LibraryNotFound(f"No library with id {library_id} is visible to this account.")
    matches = [r for r in repos if r.name == name]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        ids = ", ".join(r.id for r in matches)
        ambiguous = LibraryNotFound(f"Several libraries are named '{name}' ({ids}). "
                                    "Set `library_id` in the [[mirror]] section to pick one.")
        ambiguous.ambiguous = True
        raise ambiguous
    if create and name:
        created: RepoInfo = client.create_repo(name)
        return created
    raise LibraryNotFound(f"The library '{name}' does not exist on the server.")


class SyncEngine:
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
                                 self.options, on_event, state.remote_snapshot())
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
        self._paused_paths: set[str] = set()  # fighting writers, announced once
        self._skipped_remote: list[tuple[str, str]] = []
        self.failure_book = FailureBook(self.local_root)
        # (state generation, synced before, head) after a pass that found nothing to do
        # and left nothing waiting: while both hold, an idle poll is one request
        self._settled: tuple[int, bool, str] | None = None

    # -- queries for the daemon ----------------------------------------
    def failures(self) -> list[dict[str, Any]]:
        """Paths that failed and wait (backoff) or need the person: ``[{"path",
        "reason", "title", "needs", "permanent", "count", "since", "retry_at"}]``
        (times are Unix seconds; ``retry_at`` None: not until the path changes
        or the person acts)."""
        return [item.as_dict() for item in self.failure_book.items()]

    def release_failures(self) -> int:
        """The person acted (``refresh``): try every failed path once more."""
        return self.failure_book.release()

    def conflicts(self) -> list[ConflictRecord]:
        """Every conflict recorded for this mirror, oldest first."""
        return self.state.conflicts()

    def damaged(self) -> list[tuple[str, str]]:
        """``(path, reason)`` of memory files that do not parse."""
        return self.state.issues("damaged")

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
        self._settled = None
        self.failure_book.release()

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
            ProtocolError: the server or network failed; the pass stopped,
            what was done is recorded, the rest is retried next pass.
        """
        report = SyncReport()
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
                report.idle = True
                report.requests = getattr(self.ctx.client, "request_count", 0) - requests_before
                return report
        self._settled = None
        generation = self.state.generation
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
                self._prune_backups()
                if not self._temps_cleaned:
                    clean_temp_files(self.local_root, older_than=self._started)
                    self._temps_cleaned = True
                local, self._skipped_local = scan_tree(self.local_root, self.ignore)
                candidates = set(local) | set(bases) | set(self.ctx.snapshot)
            else:
                dirty = {normalize_rel(p) for p in local_paths}
                # a folder event stands for everything synced below it
                dirty |= {p for p in bases for d in list(dirty) if d and p.startswith(d + "/")}
                candidates = dirty | self._remote_differences(bases)
                considered = candidates
                local = self._stat_paths(candidates)
            candidates |= {original_of(p) or p for p in folded}
            candidates -= folded
            candidates = {p for p in candidates if p and not self.ignore.match(p)}
            candidates -= self._case_clashes(bases, report)
            candidates -= self._folder_moves(local, bases, report)
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
                p.rel, local.get(p.rel), remote, bases.get(p.rel), report))
            held = regression.load(self.state)
            if held is not None:
                plans = regression.hold(self.ctx, plans, held, report)
            plans, moves = pair_moves(self.ctx, plans)
            deferred: set[str] = set()
            if local_paths is not None and any(p.action is Action.DELETE_REMOTE for p in plans):
                # Local deletes are counted against the safety valve over the whole
                # mirror: a watcher delivers an `rm -r` in several batches.
                deferred = {p.rel for p in plans if p.action is Action.DELETE_REMOTE}
                plans = [p for p in plans if p.action is not Action.DELETE_REMOTE]
                report.rescan = True
            for old, new in moves:
                self._run_move(old, new, report)
            # a delete left for the rescan stays held meanwhile (status must not flicker)
            plans = self.valve.filter(plans, sum(1 for b in bases.values() if not b.is_dir), report,
                                      None if local_paths is None else candidates - deferred)
            plans = self._bulk_pull([p for p in plans if not self._held_back(p)], report, should_stop)
            plans = self._batch_push(plans, report, should_stop)
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
            self.state.replace_remote_snapshot(self.ctx.snapshot.values())
            self.ctx.should_stop = None
            report.requests = getattr(self.ctx.client, "request_count", 0) - requests_before
            # a pass over some paths keeps what earlier passes skipped elsewhere
            kept = [] if considered is None else [s for s in self._skipped_pass if s[0] not in considered]
            self._skipped_pass = sorted(set(kept) | set(report.skipped))
        if idle_shaped and not candidates and self._nothing_waits(report, generation):
            self._settled = (self.state.generation, bool(bases), self.state.get_meta("head") or "")
        return report

    def _nothing_waits(self, report: SyncReport, generation: int) -> bool:
        """True when an idle pass did nothing and left nothing for the next one:
        a pass with the same head and no local change would do the same nothing.

        ``generation`` is the state's before the pass: nothing may have been
        written since.
        """
        if (report.remote_changed or report.uploaded or report.downloaded or report.merged or report.conflicts
                or report.errors or report.skipped or report.damaged or report.deleted_local
                or report.deleted_remote or report.held_deletes or report.moved or report.interrupted
                or report.rescan):
            return False
        if self.failure_book.items() or self.valve.held() or regression.load(self.state) is not None:
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

    def _case_clashes(self, bases: dict[str, Base], report: SyncReport) -> set[str]:
        """Remote paths this disk cannot hold because they differ only by case.

        On a case-insensitive file system (macOS, Windows defaults) ``A.md``
        and ``a.md`` would overwrite each other: the one already synced (or
        the first in sort order) is kept, the others are skipped and listed.
        """
        if self._case_insensitive is None:
            self._case_insensitive = _probe_case_insensitive(self.local_root)
        if not self._case_insensitive:
            return set()
        groups: dict[str, list[str]] = {}
        for path in self.ctx.snapshot:
            groups.setdefault(path.casefold(), []).append(path)
        clashing: set[str] = set()
        for paths in groups.values():
            if len(paths) < 2:
                continue
            keep = next((p for p in sorted(paths) if p in bases), sorted(paths)[0])
            for other in paths:
                if other != keep:
                    clashing.add(other)
                    report.skipped.append((other, f"differs only by letter case from {keep}; "
                                                  "this disk cannot hold both"))
        self._skipped_remote = [s for s in self._skipped_remote if s[0] not in clashing] + \
            [s for s in report.skipped if s[0] in clashing]
        return clashing

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
        scan = scan_remote(self.ctx.client, self.ctx.repo_id, self.ctx.remote_root,
                           prev_head=self.state.get_meta("head"),
                           prev_root_oid=self.state.get_meta("root_oid"),
                           prev_snapshot=self.ctx.snapshot, info=info)
        report.remote_changed = scan.changed
        if scan.changed:
            self.ctx.snapshot = dict(scan.snapshot)
            self._skipped_remote = scan.skipped
            self.state.replace_remote_snapshot(self.ctx.snapshot.values())
        for folder, problem in scan.rejected:
            report.errors.append((folder or "/", problem))
        if scan.rejected:
            return  # keep the last head and root id: the next pass lists those folders again
        regression.detect(self.ctx, scan.head)
        if not scan.changed and self.state.get_meta(regression.WROTE):
            # We wrote since this head, yet it did not move: walk the tree to
            # see whether the server lost our writes (rolled back to it).
            scan = scan_remote(self.ctx.client, self.ctx.repo_id, self.ctx.remote_root, prev_head=None,
                               prev_root_oid=None, prev_snapshot=self.ctx.snapshot)
            report.remote_changed = True
            regression.check_own_writes(self.ctx, scan.head, scan.snapshot)
            self.ctx.snapshot = dict(scan.snapshot)
            self._skipped_remote = scan.skipped
            self.state.replace_remote_snapshot(self.ctx.snapshot.values())
        with self.state.transaction():
            self.state.set_meta("head", scan.head)
            self.state.set_meta("root_oid", scan.root_oid)
            regression.seen(self.state, scan.head, scan.head_mtime)
        self.ctx.head = scan.head or None  # read before every listing: a safe base for updates
        self.ctx.head_stale.clear()

    def _remote_differences(self, bases: dict[str, Base]) -> set[str]:
        """Rel paths (files and folders) whose remote entry differs from its base."""
        snap = self.ctx.snapshot
        out = {p for p, e in snap.items()
               if p not in bases or bases[p].is_dir != e.is_dir or (not e.is_dir and bases[p].remote_id != e.id)}
        out |= {p for p in bases if p not in snap}
        return out

    def _stat_paths(self, paths: set[str]) -> dict[str, LocalFile]:
        found: dict[str, LocalFile] = {}
        for rel in paths:
            if not rel or name_problem(rel) or self._through_symlink(rel):
                continue
            try:
                st = os.lstat(self.ctx.local_path(rel))
            except FileNotFoundError:
                # the watcher names paths composed (NFC); the file may be written decomposed
                if not find_decomposed(self.local_root, rel):
                    continue
                try:
                    st = os.lstat(self.ctx.local_path(rel))
                except OSError:
                    continue
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                found[rel] = LocalFile(rel, True)
            elif stat.S_ISREG(st.st_mode):
                found[rel] = LocalFile(rel, False, stat_fingerprint(st))
        return found

    def _sync_dirs(self, candidates: set[str], local: dict[str, LocalFile],
                   bases: dict[str, Base], report: SyncReport) -> list[str]:
        """Create folders both ways; return folders deleted on one side.

        Folder deletes are finished after the files inside them were
        handled (:meth:`_finish_dir_deletes`).
        """
        deletes: list[str] = []
        for rel in sorted(candidates, key=lambda p: p.count("/")):
            entry, remote = local.get(rel), self.ctx.snapshot.get(rel)
            local_dir = entry is not None and entry.is_dir
            remote_dir = remote is not None and remote.is_dir
            base = bases.get(rel)
            if not (local_dir or remote_dir or (base is not None and base.is_dir)):
                continue
            if self._through_symlink(rel):
                report.skipped.append((rel, "inside a symbolic link to a folder (not followed)"))
                continue
            if (local_dir and remote is not None and not remote_dir) or (remote_dir and entry is not None and not local_dir):
                if base is not None and base.is_dir:
                    deletes.append(rel)  # a synced folder replaced by a file: empty the folder first
                else:
                    report.skipped.append((rel, "a folder on one side and a file on the other"))
                continue
            if base is not None and base.is_dir and not (local_dir and remote_dir):
                deletes.append(rel)
                continue
            if local_dir and not remote_dir and base is None and self._only_ignored(rel):
                continue  # nothing to sync in it (only ignored files): no folder on the server
            version = ("dir", local_dir, remote.id if remote is not None else None)
            if self.failure_book.held(rel, version) is not None:
                continue  # failed on these very versions: waits (backoff) or needs the person
            try:
                if local_dir and not remote_dir:
                    ensure_remote_dir(self.ctx, rel)
                elif remote_dir and not local_dir:
                    self.ctx.local_path(rel).mkdir(parents=True, exist_ok=True)
                if base is None:
                    self.state.set_base(Base(rel, True, None, None))
            except _PER_PATH_ERRORS as exc:
                self._dir_failed(rel, exc, version, report)
            except OSError as exc:
                self._dir_failed(rel, local_error(exc, rel, what="creating the folder"), version, report)
            else:
                self.failure_book.succeeded(rel)
        return deletes

    def _dir_failed(self, rel: str, exc: OhsyncError, version: tuple[Any, ...], report: SyncReport) -> None:
        """Report and remember a folder that could not be created."""
        item = self.failure_book.record(rel, exc, version)
        message = str(exc)
        if item.failure.permanent:
            message += " (not retried until it changes or you run `ohsync refresh`)"
        report.errors.append((rel, message))
        self.ctx.emit(SyncEvent("error", rel, message=message))

    def _only_ignored(self, rel: str) -> bool:
        """True when local folder ``rel`` holds something, all of it ignored
        (junk such as ``.DS_Store``, at any depth)."""
        root = self.ctx.local_path(rel)
        seen = False
        for folder, dirs, files in os.walk(root):
            sub = Path(folder).relative_to(self.local_root).as_posix()
            for name in files:
                if not self.ignore.match(normalize_rel(f"{sub}/{name}"), False):
                    return False
                seen = True
            for name in list(dirs):
                if self.ignore.match(normalize_rel(f"{sub}/{name}"), True):
                    dirs.remove(name)
                    seen = True
        return seen

    def _finish_dir_deletes(self, folders: list[str], report: SyncReport) -> None:
        """Propagate folder deletes, deepest first, only for emptied folders.

        A folder that still holds something on the side that kept it (a new
        file, a held delete) is re-created on the other side instead.
        """
        replaced: list[str] = []
        for rel in sorted(folders, key=lambda p: -p.count("/")):
            local_path = self.ctx.local_path(rel)
            remote = self.ctx.snapshot.get(rel)
            try:
                if remote is not None and remote.is_dir:  # deleted (or replaced by a file) locally
                    if any(p.startswith(rel + "/") for p in self.ctx.snapshot):
                        if local_path.exists() and not local_path.is_dir():
                            report.skipped.append((rel, "replaced by a file here while the server's folder "
                                                        "still holds files"))
                        else:
                            local_path.mkdir(parents=True, exist_ok=True)
                        continue
                    # Look again right before deleting: a file another client put there
                    # during this pass must not go with the folder.
                    if self.ctx.client.list_dir(self.ctx.repo_id, self.ctx.remote_path(rel)).entries:
                        remote_written(self.ctx, rel + "/")
                        if not local_path.exists():
                            local_path.mkdir(parents=True, exist_ok=True)
                        continue
                    self.ctx.client.delete(self.ctx.repo_id, self.ctx.remote_path(rel))
                    self.ctx.snapshot.pop(rel, None)
                    remote_written(self.ctx, rel)
                elif local_path.is_dir():  # deleted (or replaced by a file) on the server
                    if any(local_path.iterdir()):
                        if remote is not None:
                            report.skipped.append((rel, "replaced by a file on the server while the local "
                                                        "folder still holds files"))
                        elif self._only_ignored(rel):
                            # ignored leftovers (.DS_Store) stay here, local only: they never
                            # bring the folder back on the server
                            self.state.delete_base(rel)
                        else:
                            ensure_remote_dir(self.ctx, rel)
                        continue
                    local_path.rmdir()
                self.state.delete_base(rel)
                if remote is not None and not remote.is_dir or local_path.is_file():
                    replaced.append(rel)
            except _PER_PATH_ERRORS as exc:
                report.errors.append((rel, str(exc)))
            except OSError as exc:
                report.errors.append((rel, exc.strerror or str(exc)))
        # The file that took a removed folder's place can move now.
        for rel in replaced:
            entry = self._stat_paths({rel}).get(rel)
            plan = self._plan_file(rel, entry, self.ctx.snapshot.get(rel), None, report)
            if plan is not None:
                self._run(plan, report)

    def _classify_local(self, rel: str, entry: LocalFile | None, base: Base | None) -> tuple[Side, tuple[int, int, int] | None]:
        if entry is None:
            return (Side.GONE if base is not None else Side.ABSENT), None
        if base is None:
            return Side.CHANGED, entry.fingerprint
        if entry.fingerprint == base.fingerprint():
            return Side.SAME, entry.fingerprint
        sha1, _, _, fp = hash_file(self.ctx.local_path(rel))
        if sha1 == base.sha1:
            # Touched, not changed: remember the new fingerprint.
            self.state.set_base(Base(rel, False, base.sha1, base.remote_id, *fp),
                                self.state.base_content(base))
            return Side.SAME, fp
        return Side.CHANGED, fp

    @staticmethod
    def _classify_remote(remote: RemoteEntry | None, base: Base | None) -> Side:
        if remote is None:
            return Side.GONE if base is not None and base.remote_id else Side.ABSENT
        if base is not None and base.remote_id == remote.id:
            return Side.SAME
        return Side.CHANGED

    def _through_symlink(self, rel: str) -> bool:
        """True when a folder on the way to ``rel`` is a symbolic link here:
        writing or deleting there would touch files outside the mirror."""
        parts = rel.split("/")[:-1]
        path = self.local_root
        for part in parts:
            path = path / part
            try:
                if stat.S_ISLNK(os.lstat(path).st_mode):
                    return True
            except OSError:
                return False
        return False

    def _plan_file(self, rel: str, entry: LocalFile | None, remote: RemoteEntry | None,
                   base: Base | None, report: SyncReport) -> Plan | None:
        """Classify both sides of one file and pick its action."""
        if self._through_symlink(rel):
            report.skipped.append((rel, "inside a symbolic link to a folder (not followed)"))
            return None
        try:
            local_side, fp = self._classify_local(rel, entry, base)
        except LocalError as exc:
            report.errors.append((rel, str(exc)))
            return None
        except OSError as exc:
            report.errors.append((rel, f"{rel}: {exc.strerror or exc}"))
            return None
        action = decide(local_side, self._classify_remote(remote, base))
        if action is Action.NOTHING:
            return None
        return Plan(rel, action, entry, remote, base, fp)

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
        failed = len(report.errors)
        self._run_plan(plan, report)
        if len(report.errors) == failed:
            self.failure_book.succeeded(plan.rel)

    def _run_plan(self, plan: Plan, report: SyncReport) -> None:
        ctx, rel, action = self.ctx, plan.rel, plan.action
        entry, remote, base = plan.entry, plan.remote, plan.base
        try:
            if action in (Action.PULL, Action.MERGE) and entry is not None and remote is not None:
                # Same bytes on both sides (e.g. a crash after an upload): adopt.
                _, fid, _, _ = hash_file(ctx.local_path(rel))
                if fid == remote.id:
                    adopt(ctx, rel, remote.id)
                    ctx.emit(SyncEvent("synced", rel, action="adopt"))
                    self._check_damaged(rel)
                    return
            if action is Action.FORGET:
                self.state.delete_base(rel)
            elif action is Action.DELETE_LOCAL:
                delete_local(ctx, rel, plan.fp)
                report.deleted_local.append(rel)
                ctx.emit(SyncEvent("synced", rel, "down", action="delete"))
            elif action is Action.DELETE_REMOTE:
                assert base is not None
                delete_remote(ctx, rel, base)
                report.deleted_remote.append(rel)
                ctx.emit(SyncEvent("synced", rel, "up", action="delete"))
            elif action in (Action.PULL, Action.MERGE) and entry is not None and remote is not None and \
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
                self._paused_paths.discard(rel)
                self._check_damaged(rel)
        except LocalChanged as exc:
            report.errors.append((rel, str(exc)))
        except WritersFighting as exc:
            report.skipped.append((rel, str(exc)))
            if rel not in self._paused_paths:
                self._paused_paths.add(rel)
                ctx.emit(SyncEvent("error", rel, message=str(exc)))
        except _PER_PATH_ERRORS as exc:
            self._path_failed(plan, exc, report)
        except OSError as exc:
            self._path_failed(plan, local_error(exc, rel), report)

    def _bulk_pull(self, plans: list[Plan], report: SyncReport,
                   should_stop: Callable[[], bool] | None = None) -> list[Plan]:
        """Fetch many new remote files through one zip download (cold start)."""
        fresh = [p for p in plans if p.action is Action.PULL and p.base is None and p.entry is None]
        done = bulk_pull(self.ctx, [p.remote for p in fresh], should_stop) if fresh else set()
        for rel in sorted(done):
            report.downloaded.append(rel)
            self.ctx.emit(SyncEvent("synced", rel, "down", action="download"))
            self._check_damaged(rel)
        return [p for p in plans if p.rel not in done]

    def _batch_push(self, plans: list[Plan], report: SyncReport,
                    should_stop: Callable[[], bool] | None) -> list[Plan]:
        """Upload new small files several per request; returns the plans left."""
        new = [p for p in plans if batchable(self.ctx, p)]
        if not new:
            return plans

        def done(rel: str) -> None:
            report.uploaded.append(rel)
            self.ctx.emit(SyncEvent("synced", rel, "up", action="upload"))
            self._paused_paths.discard(rel)
            self.failure_book.succeeded(rel)
            self._check_damaged(rel)

        outcome = push_new_files(self.ctx, new, executor=self.executor, on_done=done, should_stop=should_stop)
        for plan, exc in outcome.errors:
            self._path_failed(plan, exc, report)
        left = {p.rel for p in outcome.rest}
        handled = {p.rel for p in new} - left
        return [p for p in plans if p.rel not in handled]

    def _folder_moves(self, local: dict[str, LocalFile], bases: dict[str, Base], report: SyncReport) -> set[str]:
        """Carry whole-folder moves first; returns the paths they accounted for."""
        done: set[str] = set()
        for move in find_folder_moves(self.ctx, local, bases):
            try:
                done |= set(apply_folder_move(self.ctx, move, bases))
            except (*_PER_PATH_ERRORS, OSError) as exc:
                report.errors.append((move.old, f"folder move to {move.new} not done: {exc}"))
                continue
            report.moved.append((move.old, move.new))
            self.ctx.emit(SyncEvent("synced", move.new, "up" if move.local_side else "down", action="move",
                                    message=f"folder moved from {move.old}"))
        return done

    def _run_move(self, old: Plan, new: Plan, report: SyncReport) -> None:
        """Carry out one move; on failure the two halves run as delete + create."""
        local_move = old.action is Action.DELETE_REMOTE
        try:
            if local_move:
                move_remote(self.ctx, old, new)
            else:
                move_local(self.ctx, old, new)
        except (LocalChanged, *_PER_PATH_ERRORS, OSError) as exc:
            report.errors.append((old.rel, f"move to {new.rel} not done: {exc}"))
            return
        report.moved.append((old.rel, new.rel))
        self.ctx.emit(SyncEvent("synced", new.rel, "up" if local_move else "down", action="move",
                                message=f"moved from {old.rel}"))

    def _check_damaged(self, rel: str) -> None:
        """Keep the ``damaged`` list true for a memory file just transferred."""
        if not is_memory_file(rel):
            return
        try:
            data = self.ctx.local_path(rel).read_bytes()
        except OSError:
            return
        self.state.set_issue("damaged", rel, memory_problem(data))
