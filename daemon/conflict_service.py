"""Settling conflicts inside the daemon: the one implementation behind the
socket method ``resolve``, ``ohsync resolve`` and the local page's buttons.

:class:`ConflictService` belongs to one mirror.  A resolution runs as a job
on the mirror's sync worker (the thread that owns the engine), through
:func:`ohsync.engine.merge.settle.resolve_conflict`, and the caller
waits for it: the answer comes once the server holds the result (read
back), or says why it does not.  Reading the two versions of a conflict
(:meth:`ConflictService.versions`) only reads the mirror's files, on the
caller's thread.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .socket.methods import CannotNow, InvalidParams
from .worker_job import run_job
from ..engine.merge.settle import KEEP_CHOICES, ResolveRefused, find_conflict, read_version, resolve_conflict
from ..engine.errors import OhsyncError
from ..engine.events import ConflictRecord
from ..engine.merge.choose import is_text

__all__ = ["ConflictService", "DEFAULT_TIMEOUT", "SHOWN_BYTES"]

log = logging.getLogger(__name__)

#: Seconds a resolution waits for the server by default.
DEFAULT_TIMEOUT = 60.0
#: Most bytes of one version shown as text (larger files are described by size and hash).
SHOWN_BYTES = 2 * 1024 * 1024


class ConflictService:
    """Resolve and show one mirror's conflicts.

    :param submit: runs a function on the mirror's sync worker (``SyncWorker.submit``).
    :param engine: the open engine, or None while the mirror connects.
    :param conflicts: the open conflicts as the read model lists them (``as_dict`` items).
    :param after: called on the worker after a resolution (re-reads the read model).
    """

    def __init__(self, submit: Callable[[Callable[[], None]], None], engine: Callable[[], Any],
                 conflicts: Callable[[], list[dict[str, Any]]], after: Callable[[Any], None]) -> None:
        self._submit = submit
        self._engine = engine
        self._conflicts = conflicts
        self._after = after

    def open_conflicts(self) -> list[ConflictRecord]:
        """The open conflicts as records."""
        return [ConflictRecord(str(c["path"]), str(c["archived"]), str(c.get("time", "")), str(c.get("reason", "")),
                               tuple(c.get("fields") or ())) for c in self._conflicts()]

    def owns(self, path: str) -> bool:
        """True when ``path`` names one of this mirror's open conflicts (live file or archived copy)."""
        rel = "/".join(part for part in path.strip().split("/") if part not in ("", "."))
        return any(rel in (c.path, c.archived) for c in self.open_conflicts())

    def versions(self, path: str) -> dict[str, Any]:
        """Both versions of the conflict ``path`` names, for a side-by-side view.

        :returns: ``{"conflict": {...}, "live": version, "other": version}``,
            each version ``{"path", "exists", "size", "mtime", "sha256",
            "text"}`` (``text`` None for a binary file or one over
            :data:`SHOWN_BYTES`).
        :raises InvalidParams: no such conflict.
        :raises CannotNow: the mirror is not open yet.
        """
        record = self._record(path)
        engine = self._engine()
        if engine is None:
            raise CannotNow("ohsync is still connecting to the server; try again in a moment")
        return {"conflict": record.as_dict(), "live": self._version(engine, record.path),
                "other": self._version(engine, record.archived)}

    def read(self, path: str, side: str) -> bytes | None:
        """The bytes of one version (``side``: ``live`` or ``other``) of the conflict
        ``path`` names, at most :data:`SHOWN_BYTES` × 4; None when gone.

        :raises InvalidParams: no such conflict, or a bad side.
        :raises CannotNow: the mirror is not open yet.
        """
        record = self._record(path)
        engine = self._engine()
        if side not in ("live", "other"):
            raise InvalidParams("`side` is live or other")
        if engine is None:
            raise CannotNow("ohsync is still connecting to the server; try again in a moment")
        try:
            found = read_version(engine.ctx, record.path if side == "live" else record.archived, SHOWN_BYTES * 4)
        except ResolveRefused as exc:
            raise InvalidParams(exc.message) from None
        return None if found is None else found.data

    @staticmethod
    def _version(engine: Any, rel: str) -> dict[str, Any]:
        try:
            found = read_version(engine.ctx, rel, SHOWN_BYTES)
        except ResolveRefused as exc:
            return {"path": rel, "exists": False, "error": exc.message}
        if found is None:
            return {"path": rel, "exists": False}
        text = found.data.decode("utf-8", errors="replace") if found.complete and is_text(found.data) else None
        return {"path": rel, "exists": True, "size": found.size, "mtime": found.mtime, "sha256": found.sha256,
                "text": text}

    def _record(self, path: str) -> ConflictRecord:
        if not isinstance(path, str) or not path.strip():
            raise InvalidParams("`path` must name the conflicted file or its archived copy")
        try:
            return find_conflict(self.open_conflicts(), path)
        except ResolveRefused as exc:
            raise InvalidParams(exc.message) from None

    def resolve(self, path: str, keep: str, content: str | None = None,
                timeout: float = DEFAULT_TIMEOUT, expected: dict[str, Any] | None = None) -> dict[str, Any]:
        """Settle the conflict ``path`` names and wait for the server.

        :param keep: ``live``, ``other`` or ``merged`` (then ``content`` is the text to keep).
        :param expected: ``{"live": sha256, "other": sha256}`` of the versions the
            person was shown; a version that changed since refuses.
        :returns: :meth:`Resolution.as_dict <ohsync.engine.merge.settle.Resolution.as_dict>`
            plus ``message``, a sentence saying what the server now holds.
        :raises InvalidParams: a bad choice or no such conflict.
        :raises CannotNow: the mirror is busy or not open, a version changed
            since, or the server failed (the sentence says what happened).
        """
        if keep not in KEEP_CHOICES:
            raise InvalidParams(f"`keep` must be one of {', '.join(KEEP_CHOICES)}")
        if keep == "merged" and not isinstance(content, str):
            raise InvalidParams("`content` (the merged text) is needed with keep=merged")
        expected = expected if isinstance(expected, dict) else {}
        hashes = {side: expected.get(side) for side in ("live", "other")}
        if not all(h is None or (isinstance(h, str) and len(h) == 64) for h in hashes.values()):
            raise InvalidParams("`expected` holds the SHA-256 (hex) of the live and the other version")
        record = self._record(path)
        data = content.encode("utf-8") if keep == "merged" and content is not None else None

        def job() -> dict[str, Any]:
            engine = self._engine()
            if engine is None:
                raise CannotNow("ohsync is still connecting to the server; nothing was changed")
            try:
                return resolve_conflict(engine.ctx, record, keep, data, expected_live=hashes["live"],
                                        expected_other=hashes["other"]).as_dict()
            finally:
                try:
                    self._after(engine)
                except Exception:  # noqa: BLE001 - the read model catches up on the next pass
                    log.exception("re-reading the conflict list failed")

        try:
            result: dict[str, Any] = run_job(self._submit, job, timeout, f"the resolution of {record.path}")
        except CannotNow:
            raise
        except OhsyncError as exc:
            raise CannotNow(f"{record.path}: {exc.message}") from None
        except Exception as exc:  # noqa: BLE001 - answered with a sentence, logged in full
            log.error("resolving the conflict of %s failed", record.path, exc_info=exc)
            raise CannotNow(f"resolving {record.path} failed: internal error {exc!r}; see the log") from None
        result["message"] = _sentence(result)
        return result


def _sentence(result: dict[str, Any]) -> str:
    """What the server holds now, as a sentence."""
    path, keep = result["path"], result["keep"]
    said = {"live": f"Kept the live version of {path}",
            "other": f"{path} now holds the other version",
            "merged": f"{path} now holds the merged text"}[keep]
    parts = [said + " (verified on the server)."]
    if result.get("replaced"):
        parts.append(f"The version it replaced is in {result['replaced']}.")
    if result.get("trashed"):
        parts.append(f"The archived copy went to {result['trashed']}.")
    if result.get("new_conflict"):
        parts.append(f"An edit made meanwhile did not merge; it is in {result['new_conflict']}.")
    return " ".join(parts)
