"""The state database's schema version: checked on open, older versions
migrated in one transaction, a newer one refused untouched, a damaged file
moved aside and the mirror adopted again by content (nothing lost or
duplicated)."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from engine_helpers import USER, make_mirror, mirrored, read_tree, sample_library
from ohsync.engine import state_schema
from ohsync.engine.events import ConflictRecord
from ohsync.engine.state import Base, StateStore, StateTooNew
from ohsync.engine.state_schema import SCHEMA_VERSION

# The schema as the first release (today's main before versioning) created
# it, copied here on purpose: the test must not follow later edits of the module.
V1_DDL = """
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

SHA = "a" * 40
RID = "b" * 40


def _v1_database(path: Path) -> None:
    """A database as the first release left it: WAL, its tables, ``meta.schema = 1``, some rows."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(V1_DDL)
    db.execute("INSERT INTO meta VALUES ('schema', '1'), ('head', 'c0ffee'), ('root_oid', 'r00t')")
    db.execute("INSERT INTO base VALUES ('notes/a.md', 0, ?, ?, 12, 1000, 77, 1)", (SHA, RID))
    db.execute("INSERT INTO base VALUES ('notes', 1, NULL, NULL, 0, 0, 0, 0)")
    db.execute("INSERT INTO remote VALUES ('notes/a.md', 0, ?, 12, 1700000000)", (RID,))
    db.execute("INSERT INTO remote VALUES ('notes', 1, 'd1r', 0, 1700000000)")
    db.execute("INSERT INTO conflicts(path,archived,time,reason,fields) VALUES "
               "('notes/a.md', '.conflict/notes/a__phone__2026.md', '2026-11-30T01:00:00Z', 'both edited', 'title')")
    db.execute("INSERT INTO issues VALUES ('damaged', 'people/x.md', 'no frontmatter')")
    db.close()


def _user_version(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_new_database_carries_the_current_version(tmp_path: Path) -> None:
    store = StateStore(tmp_path / "s.db", tmp_path / "blobs")
    store.close()
    assert _user_version(tmp_path / "s.db") == SCHEMA_VERSION
    assert store.recovered is None


def test_an_empty_file_is_a_new_database(tmp_path: Path) -> None:
    (tmp_path / "s.db").write_bytes(b"")
    store = StateStore(tmp_path / "s.db", tmp_path / "blobs")
    assert store.recovered is None and not store.has_bases()
    store.close()
    assert _user_version(tmp_path / "s.db") == SCHEMA_VERSION


def test_a_version_1_database_from_the_first_release_is_migrated_keeping_every_row(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    _v1_database(db)
    assert _user_version(db) == 0
    store = StateStore(db, tmp_path / "blobs")
    try:
        assert store.recovered is None
        assert store.get_base("notes/a.md") == Base("notes/a.md", False, SHA, RID, 12, 1000, 77, True)
        assert store.get_base("notes") == Base("notes", True, None, None)
        assert set(store.remote_snapshot()) == {"notes/a.md", "notes"}
        assert store.remote_snapshot()["notes/a.md"].id == RID
        assert store.get_meta("head") == "c0ffee" and store.get_meta("root_oid") == "r00t"
        assert store.get_meta("schema") is None            # the version moved into user_version
        assert [c.archived for c in store.conflicts()] == [".conflict/notes/a__phone__2026.md"]
        assert store.conflicts()[0].fields == ("title",)
        assert store.conflicts_since("notes/a.md", "2026-01-01T00:00:00Z") == 1
        assert store.issues("damaged") == [("people/x.md", "no frontmatter")]
    finally:
        store.close()
    assert _user_version(db) == SCHEMA_VERSION
    conn = sqlite3.connect(db)
    indexes = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='index'")}
    conn.close()
    assert "conflicts_path_time" in indexes
    # opening again changes nothing more
    before = _digest(db)
    StateStore(db, tmp_path / "blobs").close()
    assert _user_version(db) == SCHEMA_VERSION and _digest(db) == before


def test_every_older_version_has_a_migration_and_its_ddl() -> None:
    assert set(state_schema.MIGRATIONS) == set(range(1, SCHEMA_VERSION))
    assert set(state_schema.SCHEMAS) == set(range(1, SCHEMA_VERSION + 1))
    assert state_schema.SCHEMAS[1].split() == V1_DDL.split()   # version 1 is what the first release made


def test_a_migration_that_fails_half_way_leaves_the_old_version_untouched(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "s.db"
    _v1_database(db)
    real = state_schema.MIGRATIONS[1]

    def half(conn: sqlite3.Connection) -> None:
        real(conn)   # the index is made and the meta row dropped, then the step dies
        raise RuntimeError("killed half way")

    monkeypatch.setitem(state_schema.MIGRATIONS, 1, half)
    with pytest.raises(RuntimeError):
        StateStore(db, tmp_path / "blobs")
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == 0
        assert conn.execute("SELECT value FROM meta WHERE key='schema'").fetchone() == ("1",)
        assert conn.execute("SELECT COUNT(*) FROM sqlite_master WHERE type='index' AND name='conflicts_path_time'"
                            ).fetchone() == (0,)
    finally:
        conn.close()
    monkeypatch.setitem(state_schema.MIGRATIONS, 1, real)
    store = StateStore(db, tmp_path / "blobs")      # the next start migrates it whole
    assert store.get_base("notes/a.md") is not None and store.get_meta("schema") is None
    store.close()
    assert _user_version(db) == SCHEMA_VERSION


def test_a_newer_version_is_refused_with_what_to_do_and_left_untouched(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.executescript("CREATE TABLE future (x); INSERT INTO future VALUES (1);")
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = sorted(p.name for p in tmp_path.iterdir()), _digest(db)
    with pytest.raises(StateTooNew) as info:
        StateStore(db, tmp_path / "blobs")
    message = info.value.message
    assert str(db) in message and f"state version {SCHEMA_VERSION + 1}" in message
    assert "Upgrade ohsync" in message and "`ohsync resync`" in message and "nothing is deleted" in message
    assert info.value.scope == "mirror" and info.value.behaviour == "needs_person"
    assert (sorted(p.name for p in tmp_path.iterdir() if p.name != "blobs"), _digest(db)) == before
    # `ohsync resync` sets it aside and starts afresh; the newer file is kept
    moved = state_schema.set_aside(db, "newer")
    assert moved.name.startswith("s.db.newer-") and _user_version(moved) == SCHEMA_VERSION + 1
    store = StateStore(db, tmp_path / "blobs")
    assert not store.has_bases()
    store.close()


def test_tables_of_no_known_version_count_as_damage(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE something_else (x)")
    conn.commit()
    conn.close()
    store = StateStore(db, tmp_path / "blobs")
    try:
        assert store.recovered is not None and "no known ohsync version" in store.recovered.reason
        assert store.recovered.backup.is_file()
    finally:
        store.close()


def _garbage(db: Path) -> None:
    db.write_bytes(b"this is not a database, it was overwritten by accident\n" * 200)


def _malformed(db: Path) -> None:
    """Scribble over the pages past the header (a bad disk block, a bad copy)."""
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(db.read_bytes())
    assert len(data) > 4096 * 4
    for off in range(4096, len(data), 5):
        data[off] = 0x5A
    db.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [_garbage, _malformed], ids=["not-a-database", "malformed-pages"])
def test_a_damaged_database_is_kept_aside_and_the_mirror_adopted_by_content(devserver, tmp_path: Path,
                                                                          damage) -> None:
    repo = devserver.create_library(USER, "OH-Memory", from_tree=sample_library(tmp_path / "seed"))
    m = make_mirror(devserver, repo, tmp_path)
    m.sync()
    m.state.add_conflict(ConflictRecord("index.md", ".conflict/index__phone__x.md", "2026-11-30T01:00:00Z",
                                        "both edited"))
    m.state.close()
    m.client.close()
    server_before, local_before = mirrored(devserver.tree(repo)), read_tree(m.root)
    assert server_before == local_before and len(server_before) > 10
    db = tmp_path / "m-state" / "state.db"
    damage(db)
    damaged_bytes = db.read_bytes()

    devserver.reset_counters()
    again = make_mirror(devserver, repo, tmp_path)
    try:
        rec = again.state.recovered
        assert rec is not None and rec.backup.read_bytes() == damaged_bytes     # kept as a local backup
        assert rec.backup.parent == db.parent and rec.backup.name.startswith("state.db.damaged-")
        sentence = rec.sentence(db)
        assert str(rec.backup) in sentence and "nothing is deleted" in sentence
        report = again.sync()
        # every file equal on both sides was adopted: nothing moved either way, nothing doubled
        assert report.uploaded == [] and report.downloaded == [] and report.conflicts == []
        assert report.deleted_local == [] and report.deleted_remote == [] and report.errors == []
        assert devserver.request_count(r"POST .*/(upload|update)") == 0
        assert devserver.request_count(r"GET /seafhttp/files/") == 0
        assert mirrored(devserver.tree(repo)) == server_before and read_tree(again.root) == local_before
        assert not [p for p in devserver.tree(repo) if p.startswith("/.conflict/")]
        assert len(again.state.all_bases()) >= len(server_before)            # every file has its base again
        assert again.sync().uploaded == []
    finally:
        again.state.close()
        again.client.close()
    if damage is _garbage:
        assert rec.conflicts == 0


def test_conflicts_still_readable_from_a_damaged_database_are_kept(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    store = StateStore(db, tmp_path / "blobs")
    store.add_conflict(ConflictRecord("a.md", ".conflict/a__phone__x.md", "2026-11-30T01:00:00Z", "both edited",
                                      ("title",)))
    store.set_base(Base("a.md", False, SHA, RID, 1, 2, 3))
    store.close()
    conn = sqlite3.connect(db)
    conn.execute("DROP TABLE issues")            # a shape no version had
    conn.commit()
    conn.close()
    again = StateStore(db, tmp_path / "blobs")
    try:
        assert again.recovered is not None and again.recovered.conflicts == 1
        assert "1 recorded conflict(s)" in again.recovered.sentence(db)
        assert [(c.path, c.archived, c.fields) for c in again.conflicts()] == [
            ("a.md", ".conflict/a__phone__x.md", ("title",))]
        assert not again.has_bases()                 # bases are rebuilt by content, not trusted
    finally:
        again.close()
