"""The ``trash`` socket method's work on the engine's thread (``ohsync trash``).

Each job is a function of the open :class:`~ohsync.engine.sync.engine.SyncEngine`,
run by :meth:`SyncWorker.call_engine`; the parts are in ``engine/trash.py``.
A restore writes the file back into the mirror and pushes it through the
normal write path (read-merge-write and read-back) before the trash entry is
deleted, so it answers only once the server holds the result.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..engine import trash
from ..engine.errors import OhsyncError
from ..engine.events import SyncEvent
from ..engine.local_limits import path_too_long
from ..engine.names import path_problem
from ..engine.special_dirs import is_under
from ..engine.transfer import push
from .socket.methods import CannotNow, InvalidParams

__all__ = ["trash_job"]


def _days(params: dict[str, Any], default: float) -> float:
    value = params.get("older_than", default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 36_500:
        raise InvalidParams("`older_than` must be a number of days from 0 to 36500")
    return float(value)


def _target_problem(to: str) -> str | None:
    """Why ``to`` (``restore --to``) cannot be a restore target, or None: the checks of every
    path the mirror uploads, on the path as given (it is not rewritten into another one)."""
    if "\\" in to:
        return (f"`to` {to!r} holds a backslash; write the path with / between folders "
                "(a backslash is not a separator here and the server refuses it in names)")
    if to.startswith("/"):
        return f"`to` {to!r} is an absolute path; give a path inside the mirror, such as notes/a.md"
    rel = to.strip()
    problem = path_problem(rel)
    if problem:
        return f"`to` {to!r} is not a path the mirror can hold ({problem})"
    for name in (".conflict", ".trash"):
        if is_under(rel, name):
            return f"`to` {to!r} lies in {name}/, which ohsync keeps for itself; choose a path outside it"
    return None


def trash_job(action: str, params: dict[str, Any], *, default_days: float) -> Callable[[Any], Any]:
    """The engine job for one ``trash`` request.

    :param action: ``"list"``, ``"restore"`` or ``"purge"``.
    :param params: the request's params (``path``, ``to``; ``older_than``, ``dry_run``).
    :param default_days: ``[safety] backup_days``, the purge age when none is given.
    :raises InvalidParams: a param of the wrong type (before anything runs).
    """
    if action == "list":
        return lambda engine: [e.as_dict() for e in trash.entries(engine.ctx)]
    if action == "purge":
        days = _days(params, default_days)
        dry_run = params.get("dry_run", False)
        if not isinstance(dry_run, bool):
            raise InvalidParams("`dry_run` must be true or false")

        def purge(engine: Any) -> dict[str, Any]:
            done = trash.purge(engine.ctx, days, dry_run=dry_run)
            engine.ctx.state.replace_remote_snapshot(engine.ctx.snapshot.values())
            return {"removed": done.removed, "kept_unknown": done.kept_unknown, "bytes": done.bytes,
                    "dry_run": dry_run, "older_than": days}
        return purge
    path, to = params.get("path"), params.get("to")
    if not isinstance(path, str) or not path.strip():
        raise InvalidParams("`path` must name a file in the trash (as `ohsync trash` lists it)")
    if to is not None and (not isinstance(to, str) or not to.strip()):
        raise InvalidParams("`to` must be a path in the mirror")
    problem = None if to is None else _target_problem(to)
    if problem:
        raise InvalidParams(f"{problem}; nothing was restored")

    def restore(engine: Any) -> dict[str, Any]:
        ctx = engine.ctx
        if to is not None:
            where = to.strip()
            why = "it is ignored (.ohsyncignore or the `ignore` setting)" if engine.is_ignored(where) else \
                path_too_long(ctx.local_root, ctx.local_root / where)
            if why:
                raise InvalidParams(f"`to` {to!r} cannot be restored to: {why}; nothing was restored")
        try:
            entry, target, data = trash.restore_local(ctx, path, to)
        except trash.TrashError as exc:
            raise InvalidParams(exc.message) from None
        try:
            outcome = push(ctx, target, ctx.state.get_base(target))
        except OhsyncError as exc:  # in the mirror now; the next pass pushes it, the trash keeps its copy
            raise CannotNow(f"{target} is back in the mirror, but the server did not take it yet ({exc.message}); "
                            "it is uploaded on the next pass and the trash keeps its copy meanwhile") from None
        ctx.state.replace_remote_snapshot(ctx.snapshot.values())
        ctx.emit(SyncEvent("synced", target, "up", action="restore"))
        removed = trash.finish_restore(ctx, entry, target, data)
        return {"restored": target, "from": entry.path, "action": outcome.action,
                "removed_from_trash": removed}
    return restore
