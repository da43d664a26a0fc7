"""The state database's schema: its versions, their migrations, opening.

The version lives in SQLite's ``PRAGMA user_version`` (a field of the file
header, written in the same transaction as the tables it describes).  On
open (:func:`open_state_db`):

- an empty file or a new one gets the current schema (:data:`SCHEMA_VERSION`);
- an older version is migrated, every step from its version up to the
  current one in **one** transaction (a kill in the middle leaves the old
  version untouched);
- a newer version than this build knows raises :class:`StateTooNew`: the
  database is not touched (nothing is rewritten by a build that cannot read
  it); the person upgrades ohsync or runs ``ohsync resync``, which sets that
  database aside (:func:`set_aside`) and compares both sides afresh;
- a damaged file (not a database, a failed ``PRAGMA quick_check``, or
  tables of a shape no version had) is moved aside, kept beside the new
  one as ``<name>.damaged-<UTC time>``, and a new database is started: the
  engine then adopts every file equal on both sides by content and merges
  or archives the rest, so nothing is lost or duplicated.

Versions:

1. the schema of the first release (``user_version`` 0, a ``meta`` row
   ``schema = 1``): tables ``meta``, ``base``, ``remote``, ``conflicts``,
   ``issues``;
2. ``user_version`` holds the version (the ``meta`` row is dropped); an
   index on ``conflicts(path, time)`` for :meth:`StateStore.conflicts_since`.

A new version: write its full DDL into :data:`SCHEMAS` (what a new database
gets), a function migrating the previous version into :data:`MIGRATIONS`,
and bump :data:`SCHEMA_VERSION`.  Tests build a database of every earlier
version from its DDL and open it (``tests/test_state_schema.py``).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from .errors import StateTooNew

__all__ = ["SCHEMA_VERSION", "SCHEMAS", "MIGRATIONS", "StateTooNew", "Recovered", "open_state_db",
           "set_aside"]

#: The version this build writes.
SCHEMA_VERSION = 2

_V1 = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS base (
    path TEXT PRIMARY KEY, is_dir INTEGER NOT NULL, sha1 TEXT, remote_id TEXT,
    size INTEGER, mtime_ns INTEGER, inode INTEGER, has_blob INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS remote (
    path TEXT PRIMARY KEY, is_dir INTEGER NOT NULL, id TEXT NOT NULL,
    size INTEGER NOT NULL, mtime INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS conflicts (
    id INTEGER PRIMARY KEY AUTOINCREMENT, path TEXT NOT NULL, archived TEXT NOT NULL,
    time TEXT NOT NULL, reason TEXT NOT NULL, fields TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS issues (
    kind TEXT NOT NULL, path TEXT NOT NULL, reason TEXT NOT NULL, PRIMARY KEY (kind, path));
"""

_V2 = _V1 + """
CREATE INDEX IF NOT EXISTS conflicts_path_time ON conflicts(path, time);
"""

#: version → the DDL of a database of that version (tables and indexes).
SCHEMAS: dict[int, str] = {1: _V1, 2: _V2}


def _v1_to_v2(db: sqlite3.Connection) -> None:
    db.execute("CREATE INDEX IF NOT EXISTS conflicts_path_time ON conflicts(path, time)")
    db.execute("DELETE FROM meta WHERE key='schema'")  # the version is in user_version now


#: version N → the function turning a version-N database into version N+1
#: (runs inside the migration's one transaction; never commits).
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {1: _v1_to_v2}

# sqlite3 result codes of a damaged file (the rest, e.g. "locked", is not damage)
_SQLITE_CORRUPT, _SQLITE_NOTADB = 11, 26


@dataclass(frozen=True)
class Recovered:
    """A damaged database that was moved aside on open.

    :ivar backup: where the damaged file went.
    :ivar reason: what was wrong (SQLite's words).
    :ivar conflicts: conflict rows that could still be read from it and were
        copied into the new database.
    """

    backup: Path
    reason: str
    conflicts: int = 0

    def sentence(self, db_path: Path) -> str:
        """What happened and what it means, for the log."""
        kept = f" {self.conflicts} recorded conflict(s) were read from it and kept." if self.conflicts else ""
        return (f"The state database {db_path} was damaged ({self.reason}); it was moved to {self.backup} "
                "and a new one was started. The next pass compares both sides afresh: files equal on both "
                f"sides are kept as they are, nothing is deleted, different versions are merged or kept as "
                f"conflict copies.{kept}")


class _Damaged(Exception):
    pass


def _stamp() -> str:
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())


def set_aside(db_path: Path, why: str) -> Path:
    """Move ``db_path`` and its ``-wal``/``-shm`` files to ``<name>.<why>-<UTC time>``
    (the WAL must go with it: left behind it would be replayed into a new file).

    :returns: the new path of the database file.
    :raises OSError: the files cannot be renamed.
    """
    target = db_path.with_name(f"{db_path.name}.{why}-{_stamp()}")
    n = 1
    while target.exists():
        n += 1
        target = db_path.with_name(f"{db_path.name}.{why}-{_stamp()}-{n}")
    for suffix in ("-wal", "-shm"):
        side = db_path.with_name(db_path.name + suffix)
        if side.exists():
            side.replace(target.with_name(target.name + suffix))
    if db_path.exists():
        db_path.replace(target)
    return target


def _shape(db: sqlite3.Connection) -> dict[str, list[tuple[str, str, int, object, int]]]:
    """Tables (not indexes) → their columns as ``PRAGMA table_info`` gives them."""
    names = [r[0] for r in db.execute(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    return {n: [tuple(c[1:]) for c in db.execute(f"PRAGMA table_info('{n}')")] for n in names}


def _expected_shape(version: int) -> dict[str, list[tuple[str, str, int, object, int]]]:
    scratch = sqlite3.connect(":memory:")
    try:
        scratch.executescript(SCHEMAS[version])
        return _shape(scratch)
    finally:
        scratch.close()


def _version(db: sqlite3.Connection) -> int:
    """The schema version of an open database (0: empty, nothing created yet)."""
    version = int(db.execute("PRAGMA user_version").fetchone()[0])
    if version:
        return version
    if not _shape(db):
        return 0
    # the first release kept no user_version: its version is a meta row
    try:
        row = db.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
    except sqlite3.OperationalError:
        raise _Damaged("tables of no known ohsync version") from None
    try:
        return int(row[0]) if row is not None and row[0] is not None else 1
    except ValueError:
        raise _Damaged(f"an unreadable schema version {row[0]!r}") from None


def _check(db: sqlite3.Connection, version: int) -> None:
    """Raise :class:`_Damaged` unless the file is sound and of ``version``'s shape."""
    rows = db.execute("PRAGMA quick_check").fetchall()
    if rows != [("ok",)]:
        raise _Damaged("; ".join(str(r[0]) for r in rows[:3]))
    if _shape(db) != _expected_shape(version):
        raise _Damaged(f"tables that do not match state version {version}")


def _prepare(db: sqlite3.Connection, db_path: Path) -> None:
    """Bring an open database to :data:`SCHEMA_VERSION` (see the module docstring)."""
    db.execute("BEGIN IMMEDIATE")  # a second opener waits instead of migrating too
    try:
        version = _version(db)
        if version > SCHEMA_VERSION:
            raise StateTooNew(db_path, version, SCHEMA_VERSION)
        if version == 0:
            for statement in _statements(SCHEMAS[SCHEMA_VERSION]):
                db.execute(statement)
        else:
            if version not in SCHEMAS:
                raise _Damaged(f"state version {version}, which no ohsync ever wrote")
            _check(db, version)
            for step in range(version, SCHEMA_VERSION):
                MIGRATIONS[step](db)
        if version != SCHEMA_VERSION:
            db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            _check(db, SCHEMA_VERSION)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def _statements(ddl: str) -> list[str]:
    """The statements of ``ddl`` (``executescript`` would commit the open transaction)."""
    return [s.strip() for s in ddl.split(";") if s.strip()]


def _salvage_conflicts(db_path: Path) -> list[tuple[str, str, str, str, str]]:
    """Conflict rows still readable from a damaged database (best effort)."""
    try:
        old = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
        try:
            rows = old.execute("SELECT path,archived,time,reason,fields FROM conflicts ORDER BY id").fetchall()
            # a damaged page reads as anything: keep only rows of the right shape
            return [tuple(r) for r in rows if all(isinstance(v, str) for v in r) and r[0] and r[1]]
        finally:
            old.close()
    except sqlite3.Error:
        return []


def _connect(db_path: Path) -> sqlite3.Connection:
    # check_same_thread off: the daemon's worker owns the store, but it is
    # created on the main thread in tests
    db = sqlite3.connect(str(db_path), isolation_level=None, check_same_thread=False, timeout=30)
    try:
        found = int(db.execute("PRAGMA user_version").fetchone()[0])
        if found > SCHEMA_VERSION:
            # before anything is written, not even the journal mode
            raise StateTooNew(db_path, found, SCHEMA_VERSION)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        _prepare(db, db_path)
    except BaseException:
        db.close()
        raise
    return db


def _damage(exc: sqlite3.DatabaseError) -> str | None:
    """SQLite's words when ``exc`` means a damaged file, else None (locked, I/O…)."""
    if isinstance(exc, sqlite3.OperationalError):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF not in (_SQLITE_CORRUPT, _SQLITE_NOTADB):
        return None
    return str(exc)


def open_state_db(db_path: Path) -> tuple[sqlite3.Connection, Recovered | None]:
    """Open (create, migrate or recover) the state database at ``db_path``.

    :returns: the connection (autocommit mode, WAL) at :data:`SCHEMA_VERSION`,
        and what was recovered when the file was damaged (None normally).
    :raises StateTooNew: the file has a newer version (left untouched).
    :raises sqlite3.OperationalError: the file cannot be opened (locked,
        permissions, I/O).
    :raises OSError: a damaged file could not be moved aside.
    """
    try:
        return _connect(db_path), None
    except _Damaged as exc:
        reason = str(exc)
    except sqlite3.DatabaseError as exc:
        found = _damage(exc)
        if found is None:
            raise
        reason = found
    conflicts = _salvage_conflicts(db_path)
    backup = set_aside(db_path, "damaged")
    db = _connect(db_path)
    if conflicts:
        db.execute("BEGIN")
        try:
            db.executemany("INSERT INTO conflicts(path,archived,time,reason,fields) VALUES (?,?,?,?,?)",
                           conflicts)
            db.execute("COMMIT")
        except sqlite3.Error:
            db.execute("ROLLBACK")
            conflicts = []
    return db, Recovered(backup, reason, len(conflicts))
