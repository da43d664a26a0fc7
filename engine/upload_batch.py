"""New local files go up in batches: several files per upload request.

The per-file push of a new file costs six requests (file detail → 404,
upload link, upload, file detail, download link, download).  For files the
pass knows are new — no base, nothing at that path in the remote snapshot —
this module sends the files of one folder in multipart POSTs of up to
:data:`BATCH_FILES` files, then reads the folders back and compares each
listed file id with the id computed locally from the bytes sent (Seafile
ids are content hashes, docs/seafile-api.md §6.1).

Requests: one upload link for the whole pass — the link of the mirror's
root folder, each POST naming its folder in ``relative_path``, which makes
the file server create missing folders (no ``mkdir``, no link per folder:
the server binds a link to its folder) — one POST per batch, and the
read-back: when the pass uploads into one folder, one listing of it; into
several, one recursive listing of their closest common folder once every
upload was answered (or once :data:`DEFER_BYTES` wait for it), with one
listing per folder only if the recursive one fails.  A folder whose name
the form cannot carry is created with ``mkdir`` and gets its own link.
A file counts as synced only when the server lists exactly our content at
exactly its path; everything else goes back to the caller for the ordinary
read-merge-write push, which merges whatever raced with us.

Races are safe because uploads never replace: a name taken on the server
meanwhile makes the server store ours as ``name (1).ext``; that stray copy
is deleted again (only while it still holds our bytes, which are local
anyway) and the file takes the per-file path.

A file the server stored wrong (its own damaged copy of our upload,
:func:`~ohsync.engine.write_path.damaged_copy`: the C fileserver's stray
trailing ``\r``) is a failed upload: the copy becomes its base and the file
is sent again at once by the per-file push on top of it (counted in
``SyncReport.upload_retries``), so it is never merged or archived as another
writer's version; a version another writer put there is left to the
per-file push as before.

Concurrency: the engine owns no threads.  The caller may pass an
``executor`` (``concurrent.futures.Executor``: ``submit(fn, *args)`` →
future); only the upload requests run there, at most :data:`IN_FLIGHT` at a
time, while reading files, listings, the state store and events stay on the
caller's thread.  Without one, batches are sent one after the other.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .context import MirrorContext
from .crashpoints import reach
from .errors import (
    AuthError,
    LocalError,
    NotFoundError,
    OhsyncError,
    ProtocolError,
    QuotaError,
    RemoteError,
    RemoteOperationError,
)
from .ids import seafile_file_id
from .merge.stale import record_push
from .models import RemoteEntry, UploadResult
from .names import upload_name_problem
from .paths import parent_rel
from .state import Base
from .sync.reconcile import Action
from .sync.valve import Plan
from .transfer import PushOutcome, _read_local, _record_base, ensure_remote_dir, push, remote_written
from .write_path import adopt_damaged, batch_listing, damaged_copy, send_batch

__all__ = ["BATCH_FILES", "BATCH_BYTES", "BATCH_MAX_FILE", "IN_FLIGHT", "BatchOutcome", "batchable",
           "push_new_files"]

#: Files per upload request.
BATCH_FILES = 50
#: Bytes per upload request (a batch closes before it would exceed this).
BATCH_BYTES = 4 * 1024 * 1024
#: Larger new files take the per-file path (streamed, resumable).
BATCH_MAX_FILE = 1024 * 1024
#: Upload requests submitted and not yet collected.
IN_FLIGHT = 8
#: A folder's files are read back by one listing per this many files.
SEGMENT_FILES = 2000
#: Bytes of uploaded files held for a deferred read-back (several folders)
#: before it is done with what is answered so far.
DEFER_BYTES = 64 * 1024 * 1024


@dataclass
class BatchOutcome:
    """What :func:`push_new_files` did not finish.

    :ivar rest: plans for the ordinary per-file push (not verified, raced,
        or refused for a reason the per-file path reports per path).
    :ivar errors: ``(plan, error)`` for files that failed this pass in a way
        sending them one by one would not change (over quota, too large).
    :ivar repeated: ``(plan, outcome)`` for files the server stored damaged
        and that were sent again, verified, by the per-file push (whose
        outcome may be a merge or a conflict when another writer raced it);
        each is also handed to ``on_repeated`` as soon as it is verified.
    """

    rest: list[Plan] = field(default_factory=list)
    errors: list[tuple[Plan, QuotaError]] = field(default_factory=list)
    repeated: list[tuple[Plan, PushOutcome]] = field(default_factory=list)


@dataclass
class _Item:
    plan: Plan
    name: str
    data: bytes
    fp: tuple[int, int, int]
    fid: str


@dataclass
class _Segment:
    """Files of one folder read back by one listing."""

    folder: str
    items: list[_Item] = field(default_factory=list)
    answers: list[tuple[list[_Item], list[UploadResult]]] = field(default_factory=list)
    outstanding: int = 0
    closed: bool = False
    via_link: bool = False  # sent through the root's link with relative_path


def batchable(ctx: MirrorContext, plan: Plan) -> bool:
    """True when ``plan`` uploads a small file the pass knows is new remotely."""
    entry = plan.entry
    return (plan.action is Action.PUSH and plan.base is None and plan.remote is None
            and entry is not None and not entry.is_dir and entry.fingerprint[0] <= BATCH_MAX_FILE
            and plan.rel not in ctx.snapshot)


class _Inline:
    """The executor used without one: runs the call at once."""

    @staticmethod
    def submit(fn: Callable[..., Any], *args: Any) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        try:
            future.set_result(fn(*args))
        except BaseException as exc:  # noqa: BLE001 - handed to the collector like a pool would
            future.set_exception(exc)
        return future


def push_new_files(ctx: MirrorContext, plans: Iterable[Plan], *, executor: Any = None,
                   on_done: Callable[[str], None] = lambda rel: None,
                   on_repeated: Callable[[Plan, PushOutcome], None] = lambda plan, pushed: None,
                   should_stop: Callable[[], bool] | None = None) -> BatchOutcome:
    """Upload new files (see :func:`batchable`) in batches and verify them.

    :param plans: PUSH plans of new files (callers filter with :func:`batchable`).
    :param executor: runs the upload requests (``submit(fn, *args)``); None = inline.
    :param on_done: called with each rel path as soon as it is verified and
        its base recorded.
    :param on_repeated: called with ``(plan, push outcome)`` as soon as a file
        the server stored damaged was sent again and verified (also when the
        batch raises afterwards: that file is done, not left to the caller).
    :param should_stop: asked between batches; True leaves the unsent files
        in ``rest``.
    :returns: what is left for the per-file path, and per-path failures.
    :raises RemoteError: the server or the network failed (AuthError,
        ServerError, NetworkError, ThrottledError); raised after every
        request already sent was collected and the files the server holds
        were recorded, so nothing done is lost; the rest is retried next pass.
    """
    groups: dict[str, list[Plan]] = {}
    for plan in plans:
        groups.setdefault(parent_rel(plan.rel), []).append(plan)
    runner = _Runner(ctx, executor or _Inline(), on_done, on_repeated, defer=len(groups) > 1)
    try:
        for folder in sorted(groups):
            runner.folder(folder, sorted(groups[folder], key=lambda p: p.rel), should_stop)
        runner.drain()
        runner.verify_ready()
    finally:
        runner.drain()
    if runner.error is not None:
        raise runner.error
    return runner.outcome


class _Runner:
    def __init__(self, ctx: MirrorContext, executor: Any, on_done: Callable[[str], None],
                 on_repeated: Callable[[Plan, PushOutcome], None], *, defer: bool = False) -> None:
        self.ctx = ctx
        self.executor = executor
        self.on_done = on_done
        self.on_repeated = on_repeated
        self.outcome = BatchOutcome()
        self.error: RemoteError | None = None
        self.inflight: deque[tuple[_Segment, list[_Item], concurrent.futures.Future[Any]]] = deque()
        self.defer = defer  # read back once for every folder (see verify_ready)
        self.ready: list[_Segment] = []
        self.ready_bytes = 0
        self.under = ctx.remote_path("")  # the one folder whose upload link serves every batch

    # -- sending ---------------------------------------------------------
    def folder(self, folder: str, plans: list[Plan], should_stop: Callable[[], bool] | None) -> None:
        ctx = self.ctx
        if self.error is not None:
            self.outcome.rest.extend(plans)
            return
        segment = _Segment(folder, via_link=self._creatable(folder))
        if not segment.via_link:
            try:
                ensure_remote_dir(ctx, folder)
            except (NotFoundError, RemoteOperationError, QuotaError):
                self.outcome.rest.extend(plans)  # the per-file path reports it per path
                return
        batch: list[_Item] = []
        size = 0
        for i, plan in enumerate(plans):
            if self.error is not None or (should_stop is not None and should_stop()):
                self.outcome.rest.extend(plans[i:])
                break
            try:
                data, fp = _read_local(ctx, plan.rel)
            except (LocalError, OSError):
                self.outcome.rest.append(plan)  # re-read (and reported) by the per-file path
                continue
            if len(data) > BATCH_MAX_FILE:
                self.outcome.rest.append(plan)
                continue
            if batch and (len(batch) >= BATCH_FILES or size + len(data) > BATCH_BYTES
                          or len(segment.items) >= SEGMENT_FILES):
                self._send(segment, batch)
                batch, size = [], 0
            if len(segment.items) >= SEGMENT_FILES:
                self._close(segment)
                segment = _Segment(folder, via_link=segment.via_link)
            item = _Item(plan, plan.rel.rpartition("/")[2], data, fp, seafile_file_id(data))
            batch.append(item)
            segment.items.append(item)
            size += len(data)
        if batch:
            self._send(segment, batch)
        self._close(segment)

    def _send(self, segment: _Segment, batch: list[_Item]) -> None:
        while len(self.inflight) >= IN_FLIGHT:
            self._collect()
        if self.error is not None:  # the server is failing: keep the rest for the next pass
            self._forget(segment, batch)
            self.outcome.rest.extend(item.plan for item in batch)
            return
        ctx = self.ctx
        remote_written(ctx, *(item.plan.rel for item in batch))  # whatever happens next, these changed
        files = [(item.name, item.data) for item in batch]
        under = self.under if segment.via_link else None
        future = self.executor.submit(send_batch, ctx, ctx.remote_path(segment.folder), files, under)
        segment.outstanding += 1
        self.inflight.append((segment, batch, future))

    def _creatable(self, folder: str) -> bool:
        """Can the uploads into ``folder`` create it through ``relative_path``?
        (Names the form carries, and no file on the server in the way: then
        ``mkdir`` reports the problem.)"""
        if not folder:
            return True
        parts = folder.split("/")
        for i in range(1, len(parts) + 1):
            entry = self.ctx.snapshot.get("/".join(parts[:i]))
            if (entry is not None and not entry.is_dir) or upload_name_problem(parts[i - 1]):
                return False
        return True

    def _close(self, segment: _Segment) -> None:
        segment.closed = True
        if segment.outstanding == 0:
            self._settled(segment)

    def _settled(self, segment: _Segment) -> None:
        """Every upload of ``segment`` was answered: read it back (now or deferred)."""
        if not self.defer:
            self._verify(segment)
            return
        self.ready.append(segment)
        self.ready_bytes += sum(len(item.data) for item in segment.items)
        if self.ready_bytes >= DEFER_BYTES:
            self.verify_ready()

    def verify_ready(self) -> None:
        """Read back every settled segment with one recursive listing of
        their closest common folder (per-folder listings if it fails)."""
        segments = [segment for segment in self.ready if segment.items]
        self.ready, self.ready_bytes = [], 0
        if len(segments) <= 1:
            for segment in segments:
                self._verify(segment)
            return
        ctx = self.ctx
        top = _common_folder([segment.folder for segment in segments])
        try:
            listing = ctx.client.list_dir(ctx.repo_id, ctx.remote_path(top), recursive=True)
        except AuthError as exc:
            self.error = self.error or exc
            return
        except RemoteError:
            for segment in segments:  # e.g. a commit landed during the walk: folder by folder
                self._verify(segment)
            return
        by_folder: dict[str, dict[str, RemoteEntry]] = {}
        for entry in listing.entries:
            by_folder.setdefault(entry.path.rpartition("/")[0] or "/", {})[entry.name] = entry
        for segment in segments:
            self._verify(segment, by_folder.get(ctx.remote_path(segment.folder), {}))

    def drain(self) -> None:
        while self.inflight:
            self._collect()

    # -- collecting ------------------------------------------------------
    def _collect(self) -> None:
        segment, batch, future = self.inflight.popleft()
        try:
            results = future.result()
        except QuotaError as exc:
            self._forget(segment, batch)
            if len(batch) == 1:
                self.outcome.errors.append((batch[0].plan, exc))
            else:  # the batch as a whole may not fit: one by one tells which file does not
                self.outcome.rest.extend(item.plan for item in batch)
        except (NotFoundError, RemoteOperationError):
            self._forget(segment, batch)
            self.outcome.rest.extend(item.plan for item in batch)
        except ProtocolError:
            pass  # the answer is unreadable; the listing tells what the server holds
        except RemoteError as exc:
            # Server trouble: the batch may or may not be stored.  Stop sending;
            # the listing still records what the server holds.
            self.error = self.error or exc
        else:
            segment.answers.append((batch, results))
            if segment.via_link:
                self._folders_exist(segment.folder)
            reach("batch.uploaded")
        segment.outstanding -= 1
        if segment.closed and segment.outstanding == 0:
            self._settled(segment)

    @staticmethod
    def _forget(segment: _Segment, batch: list[_Item]) -> None:
        ids = {id(item) for item in batch}
        segment.items = [item for item in segment.items if id(item) not in ids]

    def _folders_exist(self, folder: str) -> None:
        """An upload created ``folder`` and its parents: the snapshot knows them now."""
        parts = folder.split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if sub not in self.ctx.snapshot:
                self.ctx.snapshot[sub] = RemoteEntry(sub, True, "")

    def _record_folders(self, folder: str) -> None:
        """A folder an upload created holds a verified file: it is synced
        both ways now, so record its base (and its parents') as the folder
        steps do after a ``mkdir``."""
        parts = folder.split("/") if folder else []
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if self.ctx.state.get_base(sub) is None and self.ctx.local_path(sub).is_dir():
                self.ctx.state.set_base(Base(sub, True, None, None))

    # -- reading back ----------------------------------------------------
    def _verify(self, segment: _Segment, listed: dict[str, RemoteEntry] | None = None) -> None:
        """One listing (one file detail for a single file) decides which
        files the server holds exactly; strays of a race are removed.

        :param listed: the folder's entries by name, already read (a
            recursive listing); None: read them now."""
        ctx = self.ctx
        if not segment.items:
            return
        strays = [(item, result) for batch, results in segment.answers
                  for item, result in _pair(batch, results, ctx)
                  if result.path != ctx.remote_path(item.plan.rel)]
        if listed is None:
            try:
                listed = self._listed(segment, strays)
            except RemoteError as exc:
                if not isinstance(exc, (NotFoundError, RemoteOperationError)):
                    self.error = self.error or exc
                    return
                listed = {}
        reach("batch.verified")
        verified = []
        suspects: list[tuple[_Item, RemoteEntry]] = []  # another file than ours listed at the path
        with ctx.state.transaction():
            for item in segment.items:
                entry = listed.get(item.name)
                if entry is None or entry.is_dir or entry.id != item.fid:
                    if entry is not None and not entry.is_dir:
                        suspects.append((item, entry))
                    else:
                        self.outcome.rest.append(item.plan)
                    continue
                _record_base(ctx, item.plan.rel, item.data, item.fid, item.fp)
                record_push(ctx, item.plan.rel, item.fid, None, None, item.data)  # a new file of ours
                ctx.snapshot[item.plan.rel] = RemoteEntry(item.plan.rel, False, item.fid, len(item.data), entry.mtime)
                ctx.wrote(item.plan.rel, item.fid)
                verified.append(item.plan.rel)
            if verified and segment.via_link:
                self._record_folders(segment.folder)
        for rel in verified:
            self.on_done(rel)
        answered = {result.path: result.id for _, results in segment.answers for result in results}
        for item, entry in suspects:  # before the strays: a failing server ends that loop early
            self._repeat_damaged(item, entry, answered.get(ctx.remote_path(item.plan.rel)))
        for item, result in strays:
            entry = listed.get(result.path.rpartition("/")[2])
            if entry is not None and not entry.is_dir and entry.id == result.id == item.fid:
                try:
                    ctx.client.delete(ctx.repo_id, result.path)  # our own bytes, auto-renamed by a race
                except (NotFoundError, RemoteOperationError):
                    pass
                except RemoteError as exc:
                    self.error = self.error or exc
                    return
        segment.items = []

    def _repeat_damaged(self, item: _Item, listed: RemoteEntry, answered_id: str | None) -> None:
        """``listed`` is at the path of ``item`` instead of our bytes: when it is
        the server's damaged copy of our upload, send the file again on top of
        it (the per-file push, verified); else leave it to the per-file push,
        which merges another writer's version as usual."""
        ctx, rel = self.ctx, item.plan.rel
        entry = RemoteEntry(rel, False, listed.id, listed.size, listed.mtime)
        try:
            copy = damaged_copy(ctx, item.data, entry, answered_id)
        except RemoteError:
            copy = None
        if copy is None:
            self.outcome.rest.append(item.plan)
            return
        base = adopt_damaged(ctx, rel, copy)
        plan = dataclasses.replace(item.plan, base=base, remote=copy.entry)
        try:
            pushed = push(ctx, rel, base)
        except (OhsyncError, OSError):
            self.outcome.rest.append(plan)  # the per-file path tries again on top of the copy, and reports
            return
        self.outcome.repeated.append((plan, pushed))
        self.on_repeated(plan, pushed)

    def _listed(self, segment: _Segment, strays: list[tuple[_Item, UploadResult]]) -> dict[str, RemoteEntry]:
        one = segment.items[0].plan.rel if len(segment.items) == 1 and not strays else None
        return batch_listing(self.ctx, segment.folder, one)


def _common_folder(folders: list[str]) -> str:
    """The closest folder (rel path, "" = the root) holding every one of ``folders``."""
    common = folders[0].split("/") if folders[0] else []
    for folder in folders[1:]:
        parts = folder.split("/") if folder else []
        n = 0
        while n < min(len(common), len(parts)) and common[n] == parts[n]:
            n += 1
        common = common[:n]
    return "/".join(common)


def _pair(batch: list[_Item], results: list[UploadResult], ctx: MirrorContext) -> list[tuple[_Item, UploadResult]]:
    """Match the server's answers to the files sent.

    The Go file server answers in request order, the C one in reverse; the
    ids (content hashes) tell which, the names break a tie (equal contents).
    No consistent order: no pairs (then no stray is removed).
    """
    if len(results) != len(batch):
        return []
    orders = [results, results[::-1]]
    candidates = [list(zip(batch, order, strict=True)) for order in orders
                  if all(item.fid == result.id for item, result in zip(batch, order, strict=True))]
    if not candidates:
        return []
    return max(candidates, key=lambda pairs: sum(result.path == ctx.remote_path(item.plan.rel)
                                                 for item, result in pairs))
