"""Edits of existing files sent together, read back by folder (a burst of saves).

The per-file push of an edit the snapshot vouches for costs the update and
its read-back (``file/detail``, :data:`~ohsync.engine.transfer.LISTING_TRUST`).
When a pass pushes several such edits into one folder, this module sends
their updates (Seafile's update takes one file per request; on the
transfer pool, at most :data:`IN_FLIGHT` at a time), each carrying the head
the snapshot was listed with (:func:`~ohsync.engine.transfer.listed_head`),
and reads each folder back with one listing once its updates were answered:
a file counts as pushed only when the listing shows, at its path, the id
the update answered and the content id computed locally from the bytes
sent (another id is downloaded and compared, as
:func:`~ohsync.engine.write_path.read_back` does).  A folder with one such
edit gains nothing from a listing: that file takes the per-file push.

Whatever does not verify goes back to the per-file read-merge-write, which
looks at the file afresh:

* an edit that landed on the server after that head stays live and the
  update is stored beside it as an SFConflict file; the listing shows it, so
  it is deleted at once (its bytes are local) and the per-file push merges
  the live version in;
* the server's own damaged copy of our update (the C fileserver's stray
  trailing ``\\r``, :func:`~ohsync.engine.write_path.damaged_copy`) is a
  failed upload: it becomes the base and the file is sent again at once by
  the per-file push on top of it (``SyncReport.upload_retries``);
* anything else (a later writer, a refused or failed update) is left to it.

Only plain pushes are sent this way: a file whose remote changed since base
is merged by the per-file push, and none is batched while the engine would
read the file's history after a plain update (``EngineOptions.history_check``).

Known limit: by default (``history_check`` unset) edits are batched before
the server was ever seen honouring ``head``, while the per-file push reads
two revisions as its read-back until then.  On a server that ignored
``head``, an edit another client made between the listing and a batched
update would be replaced unseen (kept only in the server's file history).
Every seafile-server whose source is public reads ``head`` on update
(``upload-file.c`` since 2016, the Go fileserver since it was written), so
this is left open rather than paid for with a history read per file.

Requests: one update per file and one listing per folder; the update link is
the library's, cached by the client.  The engine owns no threads: only the
update requests run on the caller's ``executor``; reading files, listings,
the state store and events stay on the caller's thread.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from .context import MirrorContext
from .errors import OhsyncError, RemoteError
from .ids import seafile_file_id, sha1_bytes
from .merge.sfconflict import original_of, remove_remote
from .merge.stale import record_push
from .models import RemoteEntry, UploadResult
from .paths import from_remote, parent_rel
from .sync.reconcile import Action
from .sync.valve import Plan
from .transfer import (
    HEAD_HONOURED,
    PushOutcome,
    _check_history,
    _read_local,
    _record_base,
    listed_head,
    push,
    remote_written,
)
from .upload_batch import BATCH_MAX_FILE, _Inline
from .write_path import adopt_damaged, damaged_copy, holds_content, send

__all__ = ["IN_FLIGHT", "EditOutcome", "batchable_edit", "push_edits"]

#: Update requests submitted and not yet collected.
IN_FLIGHT = 8
#: Bytes of sent files held until their folder is read back; past it no
#: further update is sent before the oldest folders are.
HELD_BYTES = 64 * 1024 * 1024
#: Bytes of one folder's files read back by one listing (a larger share of
#: the folder's edits takes another listing).
SEGMENT_BYTES = 16 * 1024 * 1024


@dataclass
class EditOutcome:
    """What :func:`push_edits` did not finish.

    :ivar rest: plans for the ordinary per-file push (not verified, raced,
        refused, or alone in their folder).
    :ivar repeated: ``(plan, outcome)`` for files the server stored damaged
        and that were sent again, verified, by the per-file push.
    :ivar error: a failure of the server or the network that stopped the
        sending (raised by the caller's rules, after what was sent was read back).
    """

    rest: list[Plan] = field(default_factory=list)
    repeated: list[tuple[Plan, PushOutcome]] = field(default_factory=list)
    error: RemoteError | None = None


@dataclass
class _Edit:
    plan: Plan
    head: str
    data: bytes
    fp: tuple[int, int, int]
    fid: str
    answer: str | None = None


@dataclass
class _Folder:
    rel: str
    edits: list[_Edit] = field(default_factory=list)
    outstanding: int = 0
    closed: bool = False


def batchable_edit(ctx: MirrorContext, plan: Plan) -> bool:
    """True when ``plan`` is a plain push of a small file the snapshot shows
    as its base, which an update at the listing's head may carry unread."""
    entry, base = plan.entry, plan.base
    return (plan.action is Action.PUSH and base is not None and not base.is_dir and plan.remote is not None
            and entry is not None and not entry.is_dir and entry.fingerprint[0] <= BATCH_MAX_FILE
            and listed_head(ctx, plan.rel, base) is not None and not _check_history(ctx, "upload"))


def push_edits(ctx: MirrorContext, plans: Iterable[Plan], *, executor: Any = None,
               on_done: Callable[[str], None] = lambda rel: None,
               should_stop: Callable[[], bool] | None = None,
               prepare: Callable[[Plan], None] = lambda plan: None) -> EditOutcome:
    """Update the files of ``plans`` (see :func:`batchable_edit`) and verify
    them by one listing per folder (see the module docstring).

    :param plans: plain PUSH plans (callers filter with :func:`batchable_edit`).
    :param executor: runs the update requests (``submit(fn, *args)``); None = inline.
    :param on_done: called with each rel path once it is verified and its base recorded.
    :param should_stop: asked between folders; True leaves the unsent files in ``rest``.
    :param prepare: called with each plan right before its file is read (the
        caller's last local step, e.g. stamping a memory file, overlapping the
        updates in flight); raising leaves the plan to the per-file push.
    :returns: what is left for the per-file push; ``error`` when the server
        or the network failed (the caller decides whether the pass ends).
    """
    groups: dict[str, list[Plan]] = {}
    for plan in plans:
        groups.setdefault(parent_rel(plan.rel), []).append(plan)
    runner = _Runner(ctx, executor or _Inline(), on_done, prepare)
    try:
        for rel in sorted(groups):
            group = sorted(groups[rel], key=lambda p: p.rel)
            if len(group) < 2 or runner.outcome.error is not None or (should_stop is not None and should_stop()):
                runner.outcome.rest.extend(group)  # alone in its folder: a listing saves nothing
                continue
            runner.folder(rel, group)
    finally:
        runner.drain()
    return runner.outcome


class _Runner:
    def __init__(self, ctx: MirrorContext, executor: Any, on_done: Callable[[str], None],
                 prepare: Callable[[Plan], None]) -> None:
        self.ctx = ctx
        self.prepare = prepare
        self.executor = executor
        self.on_done = on_done
        self.outcome = EditOutcome()
        self.inflight: deque[tuple[_Folder, _Edit, Any]] = deque()
        self.held = 0  # bytes of sent files not yet read back

    # -- sending ---------------------------------------------------------
    def folder(self, rel: str, plans: list[Plan]) -> None:
        folder = _Folder(rel)
        size = 0
        for i, plan in enumerate(plans):
            if self.outcome.error is not None:
                self.outcome.rest.extend(plans[i:])
                break
            head = listed_head(self.ctx, plan.rel, plan.base)
            try:
                self.prepare(plan)
                data, fp = _read_local(self.ctx, plan.rel)
            except (OhsyncError, OSError):
                self.outcome.rest.append(plan)  # re-read (and reported) by the per-file push
                continue
            if head is None or len(data) > BATCH_MAX_FILE:
                self.outcome.rest.append(plan)
                continue
            if size and size + len(data) > SEGMENT_BYTES:
                self._close(folder)
                folder, size = _Folder(rel), 0
            self._send(folder, _Edit(plan, head, data, fp, seafile_file_id(data)))
            size += len(data)
        self._close(folder)

    def _close(self, folder: _Folder) -> None:
        folder.closed = True
        if folder.outstanding == 0:
            self._verify(folder)

    def _send(self, folder: _Folder, edit: _Edit) -> None:
        while self.inflight and (len(self.inflight) >= IN_FLIGHT or self.held >= HELD_BYTES):
            self._collect()
        remote_written(self.ctx, edit.plan.rel)  # whatever happens next, the file may have changed
        future = self.executor.submit(_update, self.ctx, edit)
        folder.edits.append(edit)
        folder.outstanding += 1
        self.held += len(edit.data)
        self.inflight.append((folder, edit, future))

    def drain(self) -> None:
        while self.inflight:
            self._collect()

    def _collect(self) -> None:
        folder, edit, future = self.inflight.popleft()
        try:
            edit.answer = future.result().id
        except OhsyncError as exc:
            # gone since the listing, refused, or the server failing: the per-file
            # push looks at the file afresh (and reports); a failing server stops the sending
            if isinstance(exc, RemoteError) and exc.retryable and self.outcome.error is None:
                self.outcome.error = exc
        folder.outstanding -= 1
        if folder.closed and folder.outstanding == 0:
            self._verify(folder)

    # -- reading back ----------------------------------------------------
    def _verify(self, folder: _Folder) -> None:
        """One listing of the folder decides which updates the server holds exactly."""
        ctx = self.ctx
        edits, folder.edits = folder.edits, []
        self.held -= sum(len(e.data) for e in edits)
        sent = [e for e in edits if e.answer is not None]
        self.outcome.rest.extend(e.plan for e in edits if e.answer is None)
        if not sent:
            return
        try:
            listing = ctx.client.list_dir(ctx.repo_id, ctx.remote_path(folder.rel))
        except RemoteError as exc:
            if exc.retryable and self.outcome.error is None:
                self.outcome.error = exc
            self.outcome.rest.extend(e.plan for e in sent)  # the per-file push reads each back
            return
        listed = {entry.name: entry for entry in listing.entries}
        verified: list[tuple[_Edit, RemoteEntry]] = []
        others: list[tuple[_Edit, RemoteEntry | None]] = []
        for edit in sent:
            entry = listed.get(edit.plan.rel.rpartition("/")[2])
            if entry is None or entry.is_dir:
                others.append((edit, None))
                continue
            here = RemoteEntry(edit.plan.rel, False, entry.id, entry.size, entry.mtime)
            if entry.id == edit.answer and holds_content(ctx, here, sha1=sha1_bytes(edit.data), size=len(edit.data),
                                                         file_id=edit.fid):
                verified.append((edit, here))
            else:
                others.append((edit, here))
        with ctx.state.transaction():
            for edit, here in verified:
                base = edit.plan.base
                assert base is not None and edit.answer is not None
                base_content = ctx.state.base_content(base)
                record_push(ctx, edit.plan.rel, edit.answer, base.remote_id, base_content, edit.data, base_content)
                _record_base(ctx, edit.plan.rel, edit.data, edit.answer, edit.fp)
                ctx.snapshot[edit.plan.rel] = here
                ctx.wrote(edit.plan.rel, edit.answer)
        for edit, _ in verified:
            self.on_done(edit.plan.rel)
        own: dict[tuple[str | None, str | None], str] = {}  # (its file, id) -> an SFConflict file in the folder
        for entry in listing.entries:
            rel = from_remote(ctx.remote_root, entry.path) if "(SFConflict " in entry.name else None
            if rel and not entry.is_dir:
                own[(original_of(rel), entry.id)] = rel
        for edit, seen in others:
            self._not_verified(edit, seen, own.get((edit.plan.rel, edit.answer)))

    def _not_verified(self, edit: _Edit, here: RemoteEntry | None, own: str | None) -> None:
        """The listing shows another file than ours at the path of ``edit``."""
        ctx, plan = self.ctx, edit.plan
        try:
            if own is not None:
                # the server kept an edit that landed after the head: ours is local,
                # its SFConflict copy goes, and the per-file push merges the live version in
                remove_remote(ctx, own)
                ctx.state.set_meta(HEAD_HONOURED, "1")
            elif (copy := damaged_copy(ctx, edit.data, here, edit.answer)) is not None:
                # the server stored our update wrong: a failed upload, sent again on top of it
                base = adopt_damaged(ctx, plan.rel, copy)
                plan = dataclasses.replace(plan, base=base, remote=copy.entry)
                self.outcome.repeated.append((plan, push(ctx, plan.rel, base)))
                return
        except (OhsyncError, OSError):
            pass  # the per-file push tries again (on the base the path has now) and reports
        self.outcome.rest.append(dataclasses.replace(plan, base=ctx.state.get_base(plan.rel)))


def _update(ctx: MirrorContext, edit: _Edit) -> UploadResult:
    """One update request (on the executor), based on the listing's head."""
    return send(ctx, edit.plan.rel, edit.data, len(edit.data), exists=True, head=edit.head)
