"""The daemon's socket methods (docs/architecture.md §7.1), routed to its mirrors.

:class:`Methods` builds the table ``name → handler(params)`` that
``daemon/socket/server.py`` serves.  A method that acts on one mirror takes
the optional ``mirror`` param (:data:`~ohsync.daemon.protocol.MIRROR_PARAM`:
a mirror's name, its library's name or id, or its folder).  With one mirror
nothing changes.  With several and no ``mirror``: ``refresh``, ``pause``,
``resume`` and ``wait`` act on all; the lists (``conflicts``, ``damaged``,
``activity``, ``held_deletes``, ``skipped``) cover all, each item with its
``mirror``; ``confirm_deletes`` confirms every mirror's held deletions
(answering per mirror); ``resolve`` acts on the one mirror whose conflicts
hold the path; ``restore_deletes`` on the one mirror holding deletions;
``memory.*`` works on the mirror of the memory library (``OH-Memory``) when
exactly one mirror holds it; ``resync`` (and ``memory.*`` otherwise) answer
-32602 naming the choices.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .config import DEFAULT_LIBRARY
from .filing_service import FilingUnavailable
from .protocol import MEMORY_METHODS, MIRROR_PARAM, PROTOCOL, Method, combine_status
from .socket.server import CannotNow, InvalidParams

if TYPE_CHECKING:
    from .app import Daemon
    from .mirror import Mirror

__all__ = ["Methods", "choices"]

Handler = Callable[[dict[str, Any]], Any]


def _number(params: dict[str, Any], name: str, default: float, lo: float, hi: float) -> float:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise InvalidParams(f"`{name}` must be a number from {lo:g} to {hi:g}")
    return float(value)


def choices(mirrors: Sequence[Mirror]) -> str:
    """``OH-Memory (/home/me/OH-Memory), docs (/home/me/Docs)``: how to name each mirror."""
    return ", ".join(f"{m.name} ({m.local})" for m in mirrors)


class Methods:
    """The daemon's method table over its mirrors.

    :param daemon: the running daemon (its ``mirrors``, ``cfg``, ``request_stop``).
    """

    def __init__(self, daemon: Daemon) -> None:
        self._daemon = daemon

    @property
    def _mirrors(self) -> list[Mirror]:
        return self._daemon.mirrors

    def table(self) -> dict[str, Handler]:
        """Every method the daemon answers (``subscribe`` is the server's own)."""
        table: dict[str, Handler] = {
            Method.STATUS: self.status,
            Method.REFRESH: self.refresh,
            Method.PAUSE: self.pause,
            Method.RESUME: self.resume,
            Method.CONFLICTS: lambda p: self._lists(p, lambda m: m.worker.conflicts()),
            Method.DAMAGED: lambda p: self._lists(p, lambda m: m.worker.damaged()),
            Method.ACTIVITY: self.activity,
            Method.WAIT: self.wait,
            Method.SHUTDOWN: self.shutdown,
            Method.PING: lambda p: {"pid": os.getpid(), "protocol": PROTOCOL, "config": str(self._daemon.cfg.path),
                                    "settings": dict(self._daemon.cfg.settings)},
            Method.FILE: self.file,
            Method.CONFIRM_DELETES: self.confirm_deletes,
            Method.HELD_DELETES: lambda p: self._lists(p, lambda m: m.worker.held_deletes()),
            Method.SKIPPED: lambda p: self._lists(p, lambda m: m.worker.skipped()),
            Method.RESYNC: self.resync,
            Method.RESOLVE: self.resolve,
            Method.RESTORE_DELETES: self.restore_deletes,
            Method.PANEL: self.panel,
            Method.TRASH: self.trash,
        }
        for name in MEMORY_METHODS:
            table[name] = self._memory(name)
        return table

    # ----------------------------------------------------------------- choosing mirrors

    def pick(self, params: dict[str, Any], *, several: bool) -> list[Mirror]:
        """The mirrors a request names.

        :param several: without a selector, all mirrors (else exactly one is needed).
        :raises InvalidParams: no such mirror, an ambiguous name, or several
            mirrors and none named (the message lists the choices).
        """
        selector = params.get(MIRROR_PARAM)
        mirrors = self._mirrors
        if selector is None or selector == "":
            if len(mirrors) == 1 or several:
                return list(mirrors)
            raise InvalidParams(f"this daemon syncs {len(mirrors)} mirrors; name one with --mirror NAME "
                                f"(socket parameter `mirror`): {choices(mirrors)}")
        if not isinstance(selector, str):
            raise InvalidParams("`mirror` must be a mirror's name, library or folder")
        named = [m for m in mirrors if m.answers_to(selector)]
        if not named:
            raise InvalidParams(f"no mirror is called {selector!r}; the mirrors are: {choices(mirrors)}")
        if len(named) > 1:
            raise InvalidParams(f"{selector!r} names {len(named)} mirrors; name one by its folder: "
                                f"{choices(named)}")
        return named

    def one(self, params: dict[str, Any]) -> Mirror:
        """The one mirror a request acts on (see :meth:`pick`)."""
        return self.pick(params, several=False)[0]

    def _lists(self, params: dict[str, Any], read: Callable[[Mirror], list[dict[str, Any]]]) -> list[dict[str, Any]]:
        """A list method: one mirror's list as it is, several mirrors' with each item's ``mirror``."""
        mirrors = self.pick(params, several=True)
        if len(self._mirrors) == 1:
            return read(mirrors[0])
        return [{**item, "mirror": m.name} for m in mirrors for item in read(m)]

    # ----------------------------------------------------------------- methods

    def status(self, params: dict[str, Any]) -> dict[str, Any]:
        """The status object: the first mirror's at the top, every mirror in ``mirrors``;
        with ``mirror``, that mirror's own object."""
        if params.get(MIRROR_PARAM):
            return self.one(params).status.status()
        return combine_status([m.status.status() for m in self._mirrors])

    def refresh(self, params: dict[str, Any]) -> dict[str, Any]:
        for m in self.pick(params, several=True):
            m.worker.refresh()
            if m.filing is not None:
                m.filing.retry_held()
        return {"queued": True}

    def pause(self, params: dict[str, Any]) -> dict[str, Any]:
        for m in self.pick(params, several=True):
            m.worker.pause()
        return {"paused": True}

    def resume(self, params: dict[str, Any]) -> dict[str, Any]:
        for m in self.pick(params, several=True):
            m.worker.resume()
        return {"paused": False}

    def activity(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        limit = int(_number(params, "limit", 50, 1, 10_000))
        items = self._lists(params, lambda m: m.worker.activity(limit))
        if len(self._mirrors) > 1:  # oldest first across mirrors (ISO times of one offset sort as text)
            items = sorted(items, key=lambda a: str(a.get("time")))[-limit:]
        return items

    def wait(self, params: dict[str, Any]) -> dict[str, Any]:
        """Wait for each named mirror's pass (all at once); synced only if all are."""
        timeout = _number(params, "timeout", 30, 0, 86_400)
        mirrors = self.pick(params, several=True)
        # every mirror is asked at once, then each answer awaited within the one timeout
        tickets = [m.worker.post_wait() for m in mirrors]
        deadline = time.monotonic() + timeout
        answers = [m.worker.wait_result(ticket, timeout, deadline=deadline)
                   for m, ticket in zip(mirrors, tickets, strict=True)]
        several = len(self._mirrors) > 1
        messages, reasons = [], []
        for m, (_synced, message, why) in zip(mirrors, answers, strict=True):
            if message:
                messages.append(f"{m.name}: {message}" if several else message)
            reasons += [{**r, "mirror": m.name} if several else r for r in why]
        result: dict[str, Any] = {"synced": all(a[0] for a in answers)}
        if messages and not result["synced"]:
            result["message"] = "; ".join(messages)
        if reasons:
            result["reasons"] = reasons
        return result

    def confirm_deletes(self, params: dict[str, Any]) -> dict[str, Any]:
        """Let the deletions the safety valve holds through (on each mirror's next pass).

        :returns: one mirror: ``{"confirmed": n}``; several and one named:
            ``{"confirmed": n, "mirror": name}``; several and none named: every
            mirror's held deletions, ``{"confirmed": total, "mirrors": [{"mirror",
            "confirmed"}]}`` (each mirror that held some), plus ``"mirror"`` when
            exactly one did (as before there was a list).
        """
        mirrors = self.pick(params, several=True)
        if len(self._mirrors) == 1:
            return {"confirmed": mirrors[0].worker.confirm_deletes()}
        if params.get(MIRROR_PARAM):
            return {"confirmed": mirrors[0].worker.confirm_deletes(), "mirror": mirrors[0].name}
        counts = [(m.name, m.worker.confirm_deletes()) for m in mirrors if m.worker.held_deletes()]
        result: dict[str, Any] = {"confirmed": sum(n for _, n in counts),
                                  "mirrors": [{"mirror": name, "confirmed": n} for name, n in counts]}
        if len(counts) == 1:
            result["mirror"] = counts[0][0]
        return result

    def resync(self, params: dict[str, Any]) -> dict[str, Any]:
        keep = params.get("keep") if isinstance(params, dict) else None
        if keep not in (None, "newer", "afresh"):
            raise InvalidParams("`keep` must be \"newer\" or \"afresh\"")
        m = self.one(params)
        regression = m.worker.facts.regression
        m.worker.resync(keep)
        return {"queued": True, "regression": regression,
                "keep": keep or ("newer" if regression else "afresh")}

    # --- the library's trash (engine/trash.py) ------------------------------------

    def trash(self, params: dict[str, Any]) -> Any:
        """``trash``: ``{"action": "list"}`` → entries; ``{"action": "restore", "path", "to"?}``
        → ``{"restored", "from", "removed_from_trash"}`` once the server holds it;
        ``{"action": "purge", "older_than"? (days, default [safety] backup_days), "dry_run"?}``
        → ``{"removed", "kept_unknown", "bytes", "dry_run", "older_than"}``."""
        from .trash_jobs import trash_job

        action = params.get("action", "list")
        if action not in ("list", "restore", "purge"):
            raise InvalidParams("`action` must be \"list\", \"restore\" or \"purge\"")
        from .worker_job import run_job

        mirror = self.one(params)
        job = trash_job(action, params, default_days=self._daemon.cfg.safety.backup_days)

        def on_engine() -> Any:
            engine = mirror.engine
            if engine is None:
                raise CannotNow("ohsync is still connecting to the server; try again in a moment")
            return job(engine)
        return run_job(mirror.worker.submit, on_engine, _number(params, "timeout", 120, 1, 3600),
                       f"the trash {action}")

    def file(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        paths = params.get("paths")
        if not isinstance(paths, list) or not paths or not all(isinstance(p, str) and os.path.isabs(p) for p in paths):
            raise InvalidParams("`paths` must be a non-empty list of absolute paths")
        folders = [p for p in paths if not os.path.isfile(p)]
        if folders:
            raise InvalidParams(f"not a file: {folders[0]} (documents are filed one by one)")
        filer = self._mirrors[self._daemon.cfg.filing.mirror]
        if filer.filing is None:
            raise CannotNow(filer.filing_problem or "filing is not available")
        try:
            results = filer.filing.file_now(paths)
        except FilingUnavailable as exc:
            raise CannotNow(str(exc)) from None
        return [r.as_dict() for r in results]

    def restore_deletes(self, params: dict[str, Any]) -> dict[str, Any]:
        """Undo the deletions the safety valve holds (the other choice beside
        ``confirm_deletes``): each file comes back on the side it was deleted
        on; answers once that is done.  With several mirrors and none named:
        the one mirror holding deletions."""
        from ..engine.sync.held_restore import restore_held
        from .worker_job import run_job

        mirrors = self.pick(params, several=True)
        holding = [m for m in mirrors if m.worker.held_deletes()]
        if len(holding) > 1:
            raise InvalidParams(f"{len(holding)} mirrors hold deletions; name one with --mirror NAME "
                                f"(socket parameter `mirror`): {choices(holding)}")
        if not holding:
            return {"restored": [], "left": []}
        mirror = holding[0]
        timeout = _number(params, "timeout", 120, 1, 3600)

        def job() -> tuple[list[str], list[tuple[str, str]]]:
            engine = mirror.engine
            if engine is None:
                raise CannotNow("ohsync is still connecting to the server; nothing was restored")
            held = [(h["path"], h["side"]) for h in mirror.worker.held_deletes()]
            result = restore_held(engine.ctx, held)
            mirror.worker.post_dirty([], full_scan=True)  # the held list is read afresh by a full pass
            return result

        restored, left = run_job(mirror.worker.submit, job, timeout, "restoring the held files")
        mirror.worker.refresh()
        answer: dict[str, Any] = {"restored": restored, "left": [{"path": p, "reason": r} for p, r in left]}
        if len(self._mirrors) > 1:
            answer["mirror"] = mirror.name
        return answer

    def resolve(self, params: dict[str, Any]) -> dict[str, Any]:
        """Settle one conflict (``ohsync resolve``, the local page's buttons); answers once
        the server holds the result.

        Params: ``path`` (the conflicted file or its archived copy), ``keep``
        (``live``, ``other`` or ``merged``), ``content`` (the text for
        ``merged``), ``expected`` (``{"live", "other"}``: the SHA-256 of the
        versions the person saw; a change since refuses), ``timeout``
        (seconds, default 60), ``mirror``.
        """
        path = params.get("path")
        if not isinstance(path, str) or not path.strip():
            raise InvalidParams("`path` must name the conflicted file or its archived copy")
        mirror = self.conflict_mirror(path, params)
        timeout = _number(params, "timeout", 60, 1, 3600)
        result = mirror.conflicts.resolve(path, params.get("keep", ""), params.get("content"), timeout,
                                          params.get("expected"))
        if len(self._mirrors) > 1:
            result["mirror"] = mirror.name
        return result

    def conflict_mirror(self, path: str, params: dict[str, Any]) -> Mirror:
        """The mirror whose conflict ``path`` names (``resolve``, the local page's views).

        :param path: the conflicted file or its archived copy, library-relative.
        :param params: the request's params; their ``mirror`` picks the mirror outright.
        :returns: the named mirror; else the only one; else the one mirror whose open
            conflicts hold ``path``.
        :raises InvalidParams: several mirrors, none named, and not exactly one holds
            that conflict (the message names ``--mirror`` and the choices).
        """
        mirrors = self.pick(params, several=True)
        if len(mirrors) == 1:
            return mirrors[0]
        owning = [m for m in mirrors if m.conflicts.owns(path)]
        if len(owning) == 1:
            return owning[0]
        what = f"has conflicts in {len(owning)} mirrors" if owning else "is not an open conflict of any mirror"
        raise InvalidParams(f"{path} {what}; name one with --mirror NAME (socket parameter `mirror`): "
                            f"{choices(owning or mirrors)}")

    def panel(self, params: dict[str, Any]) -> dict[str, Any]:
        """Where the local page is: ``{"url"}`` (the address with its secret, to open once) and
        ``{"address"}`` (without it)."""
        panel = getattr(self._daemon, "panel", None)
        if panel is None or not panel.running:
            raise CannotNow(getattr(self._daemon, "panel_problem", "") or "the local page is not running")
        return {"url": panel.login_url(), "address": panel.address}

    def shutdown(self, params: dict[str, Any]) -> dict[str, Any]:
        self._daemon.request_stop()
        return {"stopping": True}

    def memory_mirror(self, params: dict[str, Any]) -> Mirror:
        """The mirror a ``memory.*`` request works on.

        The one named by ``mirror``; without a selector, the only mirror, or
        among several the one mirror of the memory library (``OH-Memory``).

        :raises InvalidParams: as :meth:`pick` when none of those rules names
            exactly one mirror.
        """
        if not params.get(MIRROR_PARAM) and len(self._mirrors) > 1:
            memory = [m for m in self._mirrors if m.config.library == DEFAULT_LIBRARY]
            if len(memory) == 1:
                return memory[0]
        return self.one(params)

    def _memory(self, name: str) -> Handler:
        """A ``memory.*`` method of the one mirror named (the memory tools work on one library)."""
        def handler(params: dict[str, Any]) -> Any:
            mirror = self.memory_mirror(params)
            rest = {k: v for k, v in params.items() if k != MIRROR_PARAM}
            return mirror.memory.handlers()[name](rest)
        return handler
