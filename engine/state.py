"""The state store: base versions, the remote snapshot, conflicts.

One SQLite database (WAL) per mirror plus a content-addressed blob folder
for base contents of text files.  Everything here but the base contents and
the conflict list can be rebuilt by a full rescan; losing the database means
a careful resync (both sides present and different ⇒ merge or conflict
copy), never data loss.

Tables: ``meta`` (key/value: head commit id, root folder id, markers),
``base`` (per rel path: sha1, remote file id, local fingerprint, blob
present), ``remote`` (the last listing: per rel path: is_dir, id, size,
mtime), ``conflicts``, ``issues`` (damaged and skipped paths with reasons).
The schema's versions, their migrations and what happens to a damaged or
newer file are in :mod:`.state_schema`.

The remote snapshot is written by difference (only rows added, changed or
gone), in the caller's transaction when one is open: the sync engine
records it together with the head it belongs to, so the two never disagree
after a crash.
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from .events import ConflictRecord
from .local_lookups import fsync_dir_best_effort
from .models import RemoteEntry
from .state_schema import SCHEMA_VERSION, Recovered, StateTooNew, open_state_db

__all__ = ["Base", "StateStore", "SCHEMA_VERSION", "StateTooNew", "Recovered"]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class Base:
    """What both sides last agreed on for one path.

    :ivar sha1: hex sha1 of the content (None for folders).
    :ivar remote_id: the remote file id at that time.
    :ivar size: bytes; ``mtime_ns``/``inode``: the local stat fingerprint.
    :ivar has_blob: the base content is kept (text files up to a limit).
    """

    path: str
    is_dir: bool
    sha1: str | None
    remote_id: str | None
    size: int = 0
    mtime_ns: int = 0
    inode: int = 0
    has_blob: bool = False

    def fingerprint(self) -> tuple[int, int, int]:
        """``(size, mtime_ns, inode)`` as last seen locally."""
        return (self.size, self.mtime_ns, self.inode)


class StateStore:
    """SQLite state of one mirror.

    :param db_path: the database file (created with its folder); an older
        schema is migrated, a damaged file moved aside (:attr:`recovered`).
    :param blob_dir: folder for base contents, named by sha1.
    :raises StateTooNew: the file was written by a newer ohsync (untouched).
    :raises sqlite3.OperationalError: the file cannot be opened (locked, I/O).
    :raises OSError: a damaged file could not be moved aside.
    """

    def __init__(self, db_path: Path, blob_dir: Path) -> None:
        db_path.parent.mkdir(parents=True, exist_ok=True)
        blob_dir.mkdir(parents=True, exist_ok=True)
        self.db_path = db_path
        self.blob_dir = blob_dir
        self._db, recovered = open_state_db(db_path)
        #: set when the file was damaged and moved aside on open (the caller says so)
        self.recovered: Recovered | None = recovered
        #: bumped by every write: equal values mean nothing was written in between
        self.generation = 0
        self._remote_cache: dict[str, RemoteEntry] | None = None  # what the ``remote`` table holds
        self._tx_depth = 0

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    # -- meta -------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        """A value from the key/value table, or None."""
        row = self._db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str | None) -> None:
        """Set (or with None, delete) a key/value entry (no write when it holds that already)."""
        if self.get_meta(key) == value:
            return
        self.generation += 1
        if value is None:
            self._db.execute("DELETE FROM meta WHERE key=?", (key,))
        else:
            self._db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    # -- base -------------------------------------------------------------
    def get_base(self, path: str) -> Base | None:
        """The base of ``path`` or None when the path was never synced."""
        row = self._db.execute(
            "SELECT path,is_dir,sha1,remote_id,size,mtime_ns,inode,has_blob FROM base WHERE path=?",
            (path,)).fetchone()
        return _base(row) if row else None

    def has_bases(self) -> bool:
        """True when at least one path was ever synced (one indexed lookup)."""
        return self._db.execute("SELECT 1 FROM base LIMIT 1").fetchone() is not None

    def has_bases_under(self, folder: str) -> bool:
        """True when some path below ``folder`` (a rel path, no slashes at
        the ends) was synced: one indexed range lookup."""
        row = self._db.execute("SELECT 1 FROM base WHERE path >= ? AND path < ? LIMIT 1",
                               (folder + "/", folder + "0")).fetchone()   # "0" follows "/"
        return row is not None

    def all_bases(self) -> dict[str, Base]:
        """Every base, keyed by rel path."""
        rows = self._db.execute(
            "SELECT path,is_dir,sha1,remote_id,size,mtime_ns,inode,has_blob FROM base")
        return {r[0]: _base(r) for r in rows}

    def set_base(self, base: Base, content: bytes | None = None) -> None:
        """Record ``base``; keep ``content`` as its base blob when given.

        The blob is written (temp + rename) before the row, so a row that
        says ``has_blob`` always has its blob.
        """
        self.generation += 1
        has_blob = False
        if content is not None and base.sha1:
            self._put_blob(base.sha1, content)
            has_blob = True
        self._db.execute(
            "INSERT OR REPLACE INTO base(path,is_dir,sha1,remote_id,size,mtime_ns,inode,has_blob)"
            " VALUES (?,?,?,?,?,?,?,?)",
            (base.path, int(base.is_dir), base.sha1, base.remote_id, base.size,
             base.mtime_ns, base.inode, int(has_blob)))

    def delete_base(self, path: str) -> None:
        """Forget the base of ``path`` (its blob is pruned by :meth:`prune_blobs`)."""
        self.generation += 1
        self._db.execute("DELETE FROM base WHERE path=?", (path,))

    def base_content(self, base: Base) -> bytes | None:
        """The kept base content of ``base`` or None when none was kept.

        The blob is checked against its name (its sha1): base blobs are written
        without an fsync (:meth:`_put_blob`), so after a power cut one may be
        empty or cut short; such a blob is no base (None), never a wrong one.
        """
        if not base.has_blob or not base.sha1:
            return None
        try:
            data = (self.blob_dir / base.sha1).read_bytes()
        except FileNotFoundError:
            return None
        return data if hashlib.sha1(data).hexdigest() == base.sha1 else None

    def keep_blob(self, content: bytes) -> str:
        """Keep ``content`` in the blob folder (no base refers to it yet);
        returns its sha1, under which :meth:`base_content` finds it.

        Synced to disk (file and folder): such a blob is a record of one of
        our pushes, read to tell a stale overwrite of it, and unlike a base it
        cannot be read again from the server once a power cut damaged it.
        """
        sha1 = hashlib.sha1(content).hexdigest()
        self._put_blob(sha1, content, durable=True)
        return sha1

    def _put_blob(self, sha1: str, content: bytes, durable: bool = False) -> None:
        """Keep ``content`` as the blob ``sha1``.

        A new base blob is created under its name at once (``O_EXCL``) and
        not synced to disk: a base blob is only ever read through
        :meth:`base_content`, which checks it against its sha1, so one cut
        short (a crash while it was written, a power cut) is a missing base,
        a conflict copy rather than a merge, never a loss; a temp file and a
        rename, and the fsync, per file cost a cold mirror most of its time.
        A blob already there that does not hold ``content`` is written again
        (temp file + rename); a ``durable`` one (:meth:`keep_blob`) always so,
        and synced.
        """
        target = self.blob_dir / sha1
        if not durable:
            try:
                fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _CLOEXEC, 0o600)
            except FileExistsError:
                pass
            else:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(content)
                return
        try:
            if target.stat().st_size == len(content) and target.read_bytes() == content:
                if durable:  # written before as a base, maybe not on disk yet
                    with open(target, "rb") as fh:
                        os.fsync(fh.fileno())
                    fsync_dir_best_effort(self.blob_dir)
                return
        except FileNotFoundError:
            pass
        fd, tmp = tempfile.mkstemp(dir=self.blob_dir, prefix=".tmp-")
        with os.fdopen(fd, "wb") as fh:
            fh.write(content)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, target)
        if durable:
            fsync_dir_best_effort(self.blob_dir)

    def prune_blobs(self) -> int:
        """Delete blobs no base refers to and no record of our pushes names
        (meta ``pushed:<path>``, kept to judge stale overwrites:
        ``engine/merge/stale.py``); returns how many were removed."""
        used = {r[0] for r in self._db.execute("SELECT sha1 FROM base WHERE has_blob=1")}
        for (value,) in self._db.execute("SELECT value FROM meta WHERE key LIKE 'pushed:%'"):
            used.update(re.findall(r"[0-9a-f]{40}", value or ""))
        removed = 0
        for entry in self.blob_dir.iterdir():
            if entry.name not in used:
                entry.unlink(missing_ok=True)
                removed += 1
        return removed

    def forget_sync_history(self) -> None:
        """Drop every base, the snapshot and the head (for a resync).

        Conflicts and issues are kept; base blobs are pruned later.
        """
        self.generation += 1
        self._remote_cache = {}
        with self.transaction():
            self._db.execute("DELETE FROM base")
            self._db.execute("DELETE FROM remote")
            self._db.execute("DELETE FROM meta WHERE key IN ('head', 'root_oid')")

    # -- remote snapshot --------------------------------------------------
    def remote_snapshot(self) -> dict[str, RemoteEntry]:
        """The last listing, keyed by rel path (entries carry rel paths too)."""
        rows = self._db.execute("SELECT path,is_dir,id,size,mtime FROM remote")
        snapshot = {r[0]: RemoteEntry(r[0], bool(r[1]), r[2], r[3], r[4]) for r in rows}
        self._remote_cache = dict(snapshot)
        return snapshot

    def release_remote_cache(self, current: dict[str, RemoteEntry]) -> bool:
        """Forget the in-memory copy of the ``remote`` table when it equals
        ``current`` (the caller's listing), so that neither need stay in
        memory; the next :meth:`replace_remote_snapshot` reads the table again.

        :returns: False (nothing forgotten) inside a transaction, or when the
            table's rows are unknown or differ from ``current``.
        """
        if self._tx_depth or self._remote_cache is None or self._remote_cache != current:
            return False
        self._remote_cache = None
        return True

    def replace_remote_snapshot(self, entries: Iterable[RemoteEntry]) -> int:
        """Store a new listing snapshot atomically (inside the caller's
        transaction when one is open, so that it commits with the head).

        Only the difference to what the table holds is written (rows added,
        changed or gone); an unchanged snapshot writes nothing.

        :returns: how many rows were written or deleted.
        """
        new = {e.path: e for e in entries}
        old = self._remote_cache
        if old is None:
            self.remote_snapshot()
            old = self._remote_cache
        assert old is not None
        if new == old:  # entries are mostly the same objects: a fast identity compare
            return 0
        self.generation += 1
        changed = [e for p, e in new.items() if old.get(p) != e]
        gone = [(p,) for p in old if p not in new]
        with self.transaction():
            self._db.executemany("DELETE FROM remote WHERE path=?", gone)
            self._db.executemany(
                "INSERT OR REPLACE INTO remote(path,is_dir,id,size,mtime) VALUES (?,?,?,?,?)",
                [(e.path, int(e.is_dir), e.id, e.size, e.mtime) for e in changed])
            self._remote_cache = new  # dropped again if the transaction rolls back
        return len(changed) + len(gone)

    # -- conflicts and issues ---------------------------------------------
    def add_conflict(self, rec: ConflictRecord) -> bool:
        """Record a conflict, once per archived copy.

        :returns: False when a conflict with that archived copy was already
            recorded (the same version archived again: nothing is added).
        """
        if self._db.execute("SELECT 1 FROM conflicts WHERE archived=? LIMIT 1", (rec.archived,)).fetchone():
            return False
        self.generation += 1
        self._db.execute(
            "INSERT INTO conflicts(path,archived,time,reason,fields) VALUES (?,?,?,?,?)",
            (rec.path, rec.archived, rec.time, rec.reason, "\n".join(rec.fields)))
        return True

    def conflicts(self) -> list[ConflictRecord]:
        """Every recorded conflict, oldest first, one per archived copy (a
        state written before :meth:`add_conflict` kept them apart may hold
        the same copy several times: the oldest row stands for it)."""
        rows = self._db.execute("SELECT path,archived,time,reason,fields FROM conflicts ORDER BY id")
        seen: set[str] = set()
        out = []
        for r in rows:
            if r[1] not in seen:
                seen.add(r[1])
                out.append(ConflictRecord(r[0], r[1], r[2], r[3], tuple(f for f in r[4].split("\n") if f)))
        return out

    def forget_conflicts(self, archived: list[str]) -> None:
        """Drop the conflicts whose archived copies are given (resolved)."""
        self.generation += 1
        with self.transaction():
            self._db.executemany("DELETE FROM conflicts WHERE archived=?", [(a,) for a in archived])

    def conflicts_since(self, path: str, since_iso: str) -> int:
        """How many conflicts ``path`` had at or after ``since_iso`` (ISO 8601 UTC), one per archived copy."""
        row = self._db.execute("SELECT COUNT(DISTINCT archived) FROM conflicts WHERE path=? AND time>=?",
                               (path, since_iso)).fetchone()
        return int(row[0])

    def set_issue(self, kind: str, path: str, reason: str | None) -> None:
        """Record (or with None, clear) a ``damaged``/``skipped`` path."""
        self.generation += 1
        if reason is None:
            self._db.execute("DELETE FROM issues WHERE kind=? AND path=?", (kind, path))
        else:
            self._db.execute("INSERT OR REPLACE INTO issues(kind,path,reason) VALUES (?,?,?)",
                             (kind, path, reason))

    def issues(self, kind: str) -> list[tuple[str, str]]:
        """``(path, reason)`` of every issue of ``kind``, sorted by path."""
        rows = self._db.execute("SELECT path,reason FROM issues WHERE kind=? ORDER BY path", (kind,))
        return [(r[0], r[1]) for r in rows]

    # -- transactions -----------------------------------------------------
    def transaction(self) -> "_Tx":
        """``with store.transaction():`` groups writes atomically.

        Transactions nest: an inner one joins the outer one, and only the
        outermost commits (or, on an exception, rolls everything back).
        """
        return _Tx(self)

    def total_changes(self) -> int:
        """Rows inserted, updated or deleted through this connection since it
        was opened (SQLite's ``total_changes``): a measure of write cost."""
        return self._db.total_changes


class _Tx:
    def __init__(self, store: StateStore) -> None:
        self._store = store

    def __enter__(self) -> None:
        store = self._store
        if store._tx_depth == 0:
            store._db.execute("BEGIN")
        store._tx_depth += 1

    def __exit__(self, exc_type: object, *_: object) -> None:
        store = self._store
        store._tx_depth -= 1
        if store._tx_depth:
            return
        if exc_type is None:
            store._db.execute("COMMIT")
            return
        store._db.execute("ROLLBACK")
        store._remote_cache = None  # the table holds what it held before: read it again when needed
        store.generation += 1


def _base(row: tuple) -> Base:  # type: ignore[type-arg]
    return Base(row[0], bool(row[1]), row[2], row[3], row[4] or 0, row[5] or 0, row[6] or 0, bool(row[7]))

