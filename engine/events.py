"""Typed results and events the sync engine hands to its caller.

The engine never prints, notifies or logs for a person: it returns a
:class:`SyncReport` per pass and calls an ``on_event`` callback with
:class:`SyncEvent` values; the daemon turns them into status, activity and
notifications.  Paths are library-relative POSIX paths without a leading
slash (``journal/2026-11.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SyncEvent", "ConflictRecord", "SyncReport"]


@dataclass(frozen=True)
class SyncEvent:
    """Something the engine is doing or did.

    :ivar kind: ``"transfer"`` (progress; ``done``/``total`` in bytes),
        ``"synced"`` (a path finished; ``action`` says what), ``"conflict"``,
        ``"error"`` (a per-path failure, ``message`` says why), ``"skipped"``,
        ``"pending"`` (``total`` changes of the pass wait in ``direction``
        ``up`` or ``down``; see ``engine/sync/pending.py``), ``"note"`` (a remark for
        the person, made once: ``message``).
    :ivar path: library-relative path.
    :ivar direction: ``"up"``, ``"down"`` or ``""``.
    :ivar action: for ``synced``: ``upload``, ``download``, ``merge``,
        ``adopt``, ``restore``, ``conflict``.
    """

    kind: str
    path: str
    direction: str = ""
    action: str = ""
    done: int = 0
    total: int = 0
    message: str = ""


@dataclass(frozen=True)
class ConflictRecord:
    """A version that could not be merged and was archived.

    :ivar path: the path whose local version won.
    :ivar archived: library-relative path of the conflict copy
        (``.conflict/<dir>/<stem>__<origin>__<UTC>.<ext>``).
    :ivar time: ISO 8601 time of the conflict.
    :ivar reason: a sentence.
    :ivar fields: what could not merge (frontmatter fields or line ranges).
    """

    path: str
    archived: str
    time: str
    reason: str
    fields: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, object]:
        """The socket's ``conflicts`` item: path, archived, time, reason, fields."""
        return {"path": self.path, "archived": self.archived, "time": self.time,
                "reason": self.reason, "fields": list(self.fields)}


@dataclass
class SyncReport:
    """What one :meth:`SyncEngine.sync` pass did.

    :ivar remote_changed: the head commit differed from the last pass.
    :ivar uploaded/downloaded/merged: paths per action.
    :ivar conflicts: conflicts recorded in this pass.
    :ivar errors: ``(path, message)`` per path that failed and will be retried.
    :ivar skipped: ``(path, reason)`` names that cannot exist on the other side.
    :ivar damaged: ``(path, reason)`` memory files that do not parse.
    :ivar deleted_local: paths removed locally (a backup was made first).
    :ivar deleted_remote: paths moved into the server's ``/.trash/``.
    :ivar moved: ``(old path, new path)`` moves carried to the other side.
    :ivar held_deletes: ``(path, side)`` deletes held by the safety valve.
    :ivar requests: HTTP requests made during the pass.
    :ivar interrupted: the caller asked the pass to stop between two files.
    :ivar idle: the head was unchanged and nothing was waiting: the pass was
        one request and read or wrote no state (the caller's caches still hold).
    :ivar rescan: local deletes were seen; they are carried out by the next
        full scan (call ``sync(None)`` soon), where the valve sees them all.
    :ivar upload_retries: paths whose upload failed because the server
        stored other bytes than we sent (its own damaged copy, such as the C
        fileserver's stray trailing ``\r``), once per failed upload; each was
        sent again on top of that copy (never filed as another writer's
        version), and is in ``uploaded`` once the repeat was verified.
    :ivar waiting_up/waiting_down: paths whose planned change (a local one to
        push, a remote one to apply here) was not carried out when the pass
        ended: interrupted, or local deletes left for the full scan.  Failed
        and held paths are not waiting (they are in ``errors`` and
        ``held_deletes``).
    """

    remote_changed: bool = False
    uploaded: list[str] = field(default_factory=list)
    downloaded: list[str] = field(default_factory=list)
    merged: list[str] = field(default_factory=list)
    conflicts: list[ConflictRecord] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    damaged: list[tuple[str, str]] = field(default_factory=list)
    deleted_local: list[str] = field(default_factory=list)
    deleted_remote: list[str] = field(default_factory=list)
    held_deletes: list[tuple[str, str]] = field(default_factory=list)
    moved: list[tuple[str, str]] = field(default_factory=list)
    requests: int = 0
    interrupted: bool = False
    rescan: bool = False
    idle: bool = False
    waiting_up: list[str] = field(default_factory=list)
    waiting_down: list[str] = field(default_factory=list)
    upload_retries: list[str] = field(default_factory=list)

    @property
    def transferred(self) -> int:
        """Number of paths uploaded or downloaded."""
        return len(self.uploaded) + len(self.downloaded)
