"""Carrying a memory tool's write to the server: local write, read-merge-write, verify.

The one write path of the memory tools.  :func:`apply_write` reads the file
in the mirror, lets a planner (:class:`~ohsync.engine.memory.tools.MemoryTools`)
compute the new bytes, writes them atomically into the mirror (backing up
the version it replaces, re-checking that nobody saved the file meanwhile),
then pushes the path with :func:`ohsync.engine.transfer.push` — the same
read-merge-write with read-back verification every local edit goes through
(docs/architecture.md §5) — so a concurrent append on another device is merged, never
overwritten.  It returns once the server holds the bytes; any failure is
raised, and the file stays in the mirror for the next sync pass.

:func:`trash_entity` marks an entity ``status: trashed``, pushes that, then
moves it into ``/.trash/`` on the server and removes it from the mirror
(after a backup).  When the move fails, the entity stays in place, marked.

Call these on the thread that owns the engine (the daemon's sync worker).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from ..backups import backup_file
from ..errors import OhsyncError
from ..events import SyncEvent
from ..local_replace import BeingWritten, keep_crossed, refuse_if_written
from ..localfs import Fingerprint, stat_fingerprint
from ..nofollow import FileChanged, OutsideMirrorError, entry_stat, read_file, remove_file, write_file
from ..regression import HeldByRollback, hold_push
from ..sync.deletes import delete_remote
from ..transfer import push
from .edit import MemoryToolError
from .tools import WritePlan

__all__ = ["Planner", "apply_write", "trash_entity"]

log = logging.getLogger(__name__)

#: ``planner(current bytes or None) -> WritePlan``; may raise MemoryToolError.
Planner = Callable[[bytes | None], WritePlan]

_ROUNDS = 3  # a person saving the same file between our read and our write
#: seconds a write waits for a program that holds the file open for writing to close it
_WRITER_WAIT = 5.0


def _wait_for_writer(ctx: Any, rel: str) -> None:
    """Return once no program is saving ``rel`` in place (``EngineOptions.being_written``):
    a write planned on a half-saved file would replace it under the program,
    whose rest of the save would then reach no one.

    :raises MemoryToolError: still being written after :data:`_WRITER_WAIT` seconds.
    """
    deadline = time.monotonic() + _WRITER_WAIT
    while True:
        try:
            refuse_if_written(ctx, rel)
            return
        except BeingWritten as exc:
            if time.monotonic() >= deadline:
                raise MemoryToolError(f"{exc.message.split(';')[0]}, so nothing was written; "
                                      "try again once it is saved and closed") from None
            time.sleep(0.1)


def _write_local(engine: Any, rel: str, planner: Planner, create: bool) -> WritePlan:
    """Plan against the current bytes and write the result into the mirror.

    Every access goes through :mod:`~ohsync.engine.nofollow`: a symbolic
    link as the file or a folder on its way is refused, never followed.
    """
    try:
        return _write_inside(engine, rel, planner, create)
    except OutsideMirrorError as exc:
        raise MemoryToolError(f"refused: {exc}") from None


def _write_inside(engine: Any, rel: str, planner: Planner, create: bool) -> WritePlan:
    ctx = engine.ctx
    root = ctx.local_root
    for _ in range(_ROUNDS):
        if entry_stat(root, rel) is not None:
            _wait_for_writer(ctx, rel)  # plan on the finished save
        try:
            data: bytes | None
            data, st = read_file(root, rel)
            fp: Fingerprint | None = stat_fingerprint(st)
        except (FileNotFoundError, NotADirectoryError):
            fp, data = None, None
        if create and data is not None:
            raise MemoryToolError(f"{rel} already exists; add to it with memory_append")
        if not create and data is None:
            raise MemoryToolError(f"{rel} is no longer in the mirror (deleted or moved); search for it again")
        plan = planner(data)
        if data is not None and plan.data == data:
            return plan  # nothing to change (e.g. the observation is already there)
        now = entry_stat(root, rel)
        if (stat_fingerprint(now) if now is not None else None) != fp:
            continue  # saved by someone meanwhile: plan again on the new bytes
        if data is not None:
            try:
                refuse_if_written(ctx, rel)
            except BeingWritten:
                continue  # opened for writing since: the next round waits for it
        if data is not None and ctx.options.backup_dir is not None:
            backup_file(root, rel, ctx.options.backup_dir, ctx.options.library_name, data=data)
        try:
            # replaced only if still the version planned on, checked on the very file replaced
            write_file(root, rel, plan.data, expected=fp)
        except FileChanged as exc:
            if exc.crossed is not None:
                keep_crossed(ctx, rel, ctx.local_path(exc.crossed))
            continue  # saved by someone in the last instant: plan again on the new bytes
        return plan
    raise MemoryToolError(f"{rel} keeps changing (someone is editing it); try again in a moment")


def apply_write(engine: Any, rel: str, planner: Planner, *, create: bool = False,
                on_written: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """Write one memory file and push it; returns the plan's result once verified.

    :param engine: the open :class:`~ohsync.engine.sync.engine.SyncEngine`.
    :param rel: library-relative path.
    :param planner: computes the new bytes from the current ones.
    :param create: the file must not exist yet.
    :param on_written: called once the new bytes are in the mirror (before the push).
    :returns: the plan's result plus ``verified`` (True), ``action``
        (``upload``/``merge``/``conflict``) and ``archived`` when the
        server's version did not merge and was archived as a conflict copy.
    :raises MemoryToolError: the planner refused, or the file keeps changing.
    :raises HeldByRollback: the library went back to an older state and the
        path is held (:func:`~ohsync.engine.regression.hold_push`); the new
        bytes stay in the mirror until ``ohsync resync``.
    :raises OhsyncError: the push failed (server, network, local race); the
        new bytes stay in the mirror and sync on a later pass.
    """
    plan = _write_local(engine, rel, planner, create)
    on_written()
    ctx = engine.ctx
    base = ctx.state.get_base(rel)
    hold_push(ctx, rel, base)  # a rollback's older version must not be merged into the live file
    outcome = push(ctx, rel, base)
    ctx.state.replace_remote_snapshot(ctx.snapshot.values())  # as a pass would, so a crash now costs nothing
    ctx.emit(SyncEvent("synced", rel, "up", action=outcome.action))
    result = dict(plan.result)
    result.update(verified=True, action=outcome.action)
    if outcome.conflict is not None:
        result["archived"] = outcome.conflict.archived
    return result


def trash_entity(engine: Any, rel: str, planner: Planner,
                 on_written: Callable[[], None] = lambda: None) -> dict[str, Any]:
    """Soft-delete a memory entity: mark it trashed, push, move it into ``/.trash/``.

    :returns: the plan's result plus ``trash`` (the path in the trash, or
        None) and ``in_place`` (True when the move failed and the entity
        stays where it was with ``status: trashed``; ``message`` says why).
    :raises MemoryToolError, OhsyncError: as :func:`apply_write` (then
        nothing was moved; a :class:`~ohsync.engine.regression.HeldByRollback`
        says so).
    """
    try:
        result = apply_write(engine, rel, planner, on_written=on_written)
    except HeldByRollback as exc:
        # a resync pushes the marking only: the move is the agent's to ask again
        raise HeldByRollback(f"{exc.message}; the entity is marked trashed here but was not moved into "
                             "/.trash/: delete it again once that is done", path=rel) from None
    ctx = engine.ctx
    base = ctx.state.get_base(rel)
    try:
        if base is None:
            raise OhsyncError(f"{rel} has no synced version to move")
        moved = delete_remote(ctx, rel, base)
    except (OhsyncError, OSError) as exc:
        log.warning("moving %s into the trash failed (%s); it stays in place marked trashed", rel, exc)
        result.update(trash=None, in_place=True,
                      message=f"the move into /.trash/ failed ({exc}); the entity stays in place with "
                              "status: trashed")
        return result
    try:
        data = read_file(ctx.local_root, rel)[0]
    except (OSError, OutsideMirrorError):
        data = None  # gone, or a link now: nothing of ours to back up or remove
    if data is not None:
        if ctx.options.backup_dir is not None:
            backup_file(ctx.local_root, rel, ctx.options.backup_dir, ctx.options.library_name, data=data)
        try:
            # only the version just pushed and trashed: a save since stays (a new file to the next pass)
            remove_file(ctx.local_root, rel, expected=base.fingerprint())
        except FileChanged as exc:
            if exc.crossed is not None:
                keep_crossed(ctx, rel, ctx.local_path(exc.crossed))
        except OutsideMirrorError:
            pass
    ctx.state.replace_remote_snapshot(ctx.snapshot.values())
    ctx.emit(SyncEvent("synced", rel, "up", action="delete"))
    result.update(trash=moved, in_place=False)
    return result
