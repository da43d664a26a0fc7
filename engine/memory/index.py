"""The index of the memory entities of a mirror folder, in SQLite FTS5.

The memory tools (``memory_search``, ``memory_read``, …) answer from this
index instead of reading the tree on every call.  It is a cache of the
files, kept in one SQLite file in the mirror's state folder:

* built once (:meth:`MemoryIndex.rebuild`), then kept current by
  :meth:`MemoryIndex.update` with the paths the daemon saw change (sync
  events, watcher events, its own writes);
* on the next start :meth:`MemoryIndex.load` opens the file and re-reads
  only the files whose size or mtime changed while the daemon was off (one
  ``stat`` per file, no reads of unchanged files), so the first search after
  a restart answers at once;
* rebuilt from the files only when the file holds another schema version
  (:data:`INDEX_VERSION`, SQLite's ``user_version``), indexes another folder
  or another time offset, or is damaged (it is a cache: nothing in it is the
  only copy of anything).

Tables: ``entities`` (one row per file: the frontmatter fields the filters
use, size and mtime), ``tags``, ``titles`` (the names a ``[[link]]`` finds an
entity by), ``links`` (relations and wikilinks, so links are followed both
ways: a renamed or moved entity keeps its incoming links, which name its
title), and two FTS5 tables with the ``trigram`` tokenizer, ``fts_head``
(title, permalink, tags) and ``fts_body`` (body; apart, so that the short
fields' hits are found without reading the bodies' long term lists three
more times): every three characters are a term, so CJK text is found as
substrings without word segmentation.  A one- or two-character word
is looked up among the terms it begins (each field ends in two newlines, so
every substring begins some term; listing them reads their hit lists, so
the list is kept until the index next changes); should a word begin more
terms than :data:`_MAX_PREFIX_TERMS`, it is found by scanning the fields
instead.

Ranking: per word and field the entity scores the field's weight when the
word occurs in it (title 4, permalink 3, tags 2, body 1, as
:data:`WEIGHTS`), summed over the words; ties go to the newest
``modified``, then the path.  A common word is in most bodies, so scoring
every hit is what a search costs: each FTS5 query returns row ids only (one
JSON array), the sums are set operations, and the bodies' hits are usually
not read at all.  Short-field hits are worth more than any sum of body hits
once their score passes the number of words, so the entities with a hit in
a short field are scored first, best group first, their bodies looked up
among them alone; the rest is needed only when those are too few (then, for
one word in many bodies, the newest entities are walked checking their body
one by one).

Nothing here runs a thread.  One connection per index, opened with
``check_same_thread=False`` like the state store (``engine/state.py``): the
daemon's memory service builds it on one thread and reads it on the socket
threads, always under its own lock.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import stat
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import timedelta, timezone
from pathlib import Path
from typing import Any

from ..local_lookups import scandir_or_none
from ..nofollow import OutsideMirrorError, entry_stat, read_file
from .entity import (
    FULLWIDTH,
    Entity,
    is_indexed,
    parse_entity,
    parse_offset,
    title_from_filename,
    title_keys,
    to_timestamp,
)

__all__ = ["Entity", "MemoryIndex", "INDEX_VERSION", "WEIGHTS", "is_indexed", "parse_entity",
           "parse_offset", "to_timestamp", "FULLWIDTH", "title_from_filename"]

log = logging.getLogger(__name__)

#: The schema version of the index file; another version is rebuilt from the files.
INDEX_VERSION = 1
#: The weight of a word's hit in each field (title, permalink, tags, body).
WEIGHTS = (("title", 4), ("permalink", 3), ("tags", 2), ("body", 1))
#: A short word beginning more index terms than this is found by scanning the fields.
_MAX_PREFIX_TERMS = 2000
#: A word in fewer bodies than this (or than a quarter of the entities) is ranked from its hits, read at once.
_FEW_BODY_HITS = 500
#: What ends every indexed field: makes each one- and two-character substring the start of a trigram.
_END = "\n\n"

_SCHEMA = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE entities (
    id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, permalink TEXT NOT NULL, title TEXT NOT NULL,
    type TEXT NOT NULL, tags TEXT NOT NULL, created TEXT NOT NULL, modified TEXT NOT NULL,
    modified_ts REAL NOT NULL, sensitivity TEXT NOT NULL, status TEXT NOT NULL, size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL, damaged TEXT);
CREATE INDEX entities_permalink ON entities(permalink);
CREATE INDEX entities_newest ON entities(modified_ts DESC, path);
CREATE TABLE tags (tag TEXT NOT NULL, id INTEGER NOT NULL, PRIMARY KEY (tag, id)) WITHOUT ROWID;
CREATE INDEX tags_id ON tags(id);
CREATE TABLE titles (key TEXT NOT NULL, id INTEGER NOT NULL, PRIMARY KEY (key, id)) WITHOUT ROWID;
CREATE INDEX titles_id ON titles(id);
CREATE TABLE links (
    src INTEGER NOT NULL, ord INTEGER NOT NULL, rel TEXT NOT NULL, target TEXT NOT NULL,
    target_key TEXT NOT NULL, PRIMARY KEY (src, ord)) WITHOUT ROWID;
CREATE INDEX links_target ON links(target_key);
CREATE VIRTUAL TABLE fts_head USING fts5(title, permalink, tags, tokenize='trigram');
CREATE VIRTUAL TABLE fts_head_terms USING fts5vocab(fts_head, 'row');
CREATE VIRTUAL TABLE fts_body USING fts5(body, tokenize='trigram');
CREATE VIRTUAL TABLE fts_body_terms USING fts5vocab(fts_body, 'row');
"""

_COLUMNS = ("id, path, permalink, title, type, tags, created, modified, modified_ts, sensitivity, status, "
            "size, damaged")


def link_key(target: str) -> str:
    """The lowercased name a ``[[target]]`` looks for (without ``|alias`` and ``#heading``)."""
    return target.split("|", 1)[0].split("#", 1)[0].strip().lower()


def _phrase(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _clean_word(word: str) -> str:
    return word.lower().replace("\x00", "").replace("\x01", "")


def _never(rel: str) -> bool:
    """No path is ignored (an index without the mirror's rules: tests, tools run on a plain folder)."""
    return False


class MemoryIndex:
    """Every memory entity of one mirror folder, by path, permalink, title and text.

    :param root: the mirror folder.
    :param tz: offset for frontmatter times written without one.
    :param db_path: the index file (``None``: held in memory, gone when closed).
    :raises sqlite3.OperationalError: the index file cannot be opened (locked, I/O).
    """

    def __init__(self, root: Path, tz: timezone | None = None, db_path: Path | None = None) -> None:
        self.root = Path(root)
        self.tz = tz or timezone(timedelta(hours=8))
        self.db_path = db_path
        #: ``ignored(rel)``: True for a path that never syncs (``.ohsyncignore``, the ``ignore`` setting); such
        #: files are not indexed, so no tool returns or changes them (the daemon sets the mirror's rules)
        self.ignored: Callable[[str], bool] = _never
        #: ``(table, short word)`` → its :meth:`_expression`: listing the terms a word begins reads
        #: their hit lists, so it is kept until the next change to the index.
        self._expressions: dict[tuple[str, str], str | None] = {}
        self._db = self._connect()
        if db_path is None:
            self._start_afresh()  # empty, ready for :meth:`rebuild` or :meth:`update`

    # -- the file -------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        target = ":memory:" if self.db_path is None else str(self.db_path)
        if self.db_path is not None:
            self.db_path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(target, isolation_level=None, check_same_thread=False, timeout=30)
        if self.db_path is not None:
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
            except sqlite3.DatabaseError:
                pass  # a damaged file: :meth:`load` finds out and starts afresh
        return db

    def _identity(self) -> dict[str, str]:
        return {"root": str(self.root), "tz": str(self.tz.utcoffset(None))}

    def _reusable(self) -> str | None:
        """Why the open file cannot be used as it is, or None when it can."""
        try:
            version = int(self._db.execute("PRAGMA user_version").fetchone()[0])
            if version == 0:
                return "new"
            if version != INDEX_VERSION:
                return f"schema version {version}, this build writes {INDEX_VERSION}"
            meta = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
            if any(meta.get(k) != v for k, v in self._identity().items()):
                return "built for another folder or time offset"
            for table in ("fts_head_terms", "fts_body_terms"):
                self._db.execute(f"SELECT count(*) FROM {table} WHERE term >= 'a' AND term < 'b'").fetchone()
        except sqlite3.DatabaseError as exc:
            return f"damaged ({exc})"
        return None

    def _start_afresh(self) -> None:
        """An empty index of the current schema: the file (with its WAL) is removed and created again."""
        if self.db_path is not None:
            self._db.close()
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{self.db_path}{suffix}")
            self._db = self._connect()
        else:
            for name in ("fts_head_terms", "fts_body_terms", "fts_head", "fts_body", "links", "titles", "tags",
                         "entities", "meta"):
                self._db.execute(f"DROP TABLE IF EXISTS {name}")
        with self._transaction():
            for statement in (s.strip() for s in _SCHEMA.split(";")):
                if statement:
                    self._db.execute(statement)
            self._db.executemany("INSERT INTO meta(key, value) VALUES (?, ?)", self._identity().items())
            self._db.execute(f"PRAGMA user_version = {INDEX_VERSION}")

    def close(self) -> None:
        """Close the index file (the object is unusable afterwards)."""
        self._db.close()

    # -- building -------------------------------------------------------------------

    def load(self) -> tuple[int, int]:
        """Open the index and bring it up to date with the folder.

        A usable file (this schema version, this folder and offset, readable)
        is kept and only the files whose size or mtime changed since it was
        written are re-read, files gone are dropped; otherwise it is rebuilt.

        :returns: ``(entities, files re-read)``; after a rebuild both are the count.
        :raises OSError: the folder cannot be read.
        """
        why = self._reusable() if self.db_path is not None else "new"
        if why is not None:
            if why != "new":
                log.warning("memory index %s: %s; rebuilding it from the files", self.db_path, why)
            count = self.rebuild()
            return count, count
        known = {path: (size, mtime_ns) for path, size, mtime_ns in
                 self._db.execute("SELECT path, size, mtime_ns FROM entities")}
        changed: list[str] = []
        for rel, st in self._walk_stat(""):
            if known.pop(rel, None) != (st.st_size, st.st_mtime_ns):
                changed.append(rel)
        with self._transaction():
            for rel in known:  # deleted while the daemon was off
                self._drop(rel)
            for rel in changed:
                self._load(rel)
        return len(self), len(changed) + len(known)

    def rebuild(self) -> int:
        """Forget everything and read every memory file under the root.

        :returns: the number of entities indexed.
        """
        self._start_afresh()
        with self._transaction():
            for rel, _ in self._walk_stat(""):
                self._load(rel)
        for table in ("fts_head", "fts_body"):
            self._db.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
        return len(self)

    def update(self, rel_paths: Iterable[str]) -> None:
        """Re-read these paths (files or folders) after they changed.

        A missing path drops its entity and everything indexed below it; a
        folder is re-read file by file.  Only the named paths are touched.
        """
        with self._transaction():
            for rel in rel_paths:
                rel = rel.strip("/")
                local = self.root / rel if rel else self.root
                if rel and local.is_file():
                    self._load(rel)
                    continue
                if rel:
                    below = self._db.execute("SELECT path FROM entities WHERE path = ? OR "
                                             "substr(path, 1, ?) = ?", (rel, len(rel) + 1, rel + "/")).fetchall()
                else:
                    below = self._db.execute("SELECT path FROM entities").fetchall()
                for (known,) in below:
                    self._drop(known)
                if self._real_folder(rel):  # never read through a link out of the mirror
                    for sub, _ in self._walk_stat(rel):
                        self._load(sub)

    def _transaction(self) -> Any:
        index = self

        class _Tx:
            def __enter__(self) -> None:
                index._expressions.clear()
                index._db.execute("BEGIN")

            def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
                index._expressions.clear()  # the terms may have changed
                index._db.execute("COMMIT" if kind is None else "ROLLBACK")
        return _Tx()

    def _real_folder(self, rel: str) -> bool:
        """True when ``rel`` is a folder reached without a symbolic link on the way."""
        if not rel:
            return self.root.is_dir()
        try:
            st = entry_stat(self.root, rel)
        except (OSError, OutsideMirrorError):
            return False
        return st is not None and stat.S_ISDIR(st.st_mode)

    def _walk_stat(self, rel_dir: str) -> Iterator[tuple[str, os.stat_result]]:
        """Every indexed file below ``rel_dir`` with its ``stat`` (symbolic links are not followed).

        The same files as :func:`is_indexed` takes, tested by name as the walk
        goes (a restart stats every file: 30,000 of them before the first
        search), so no dot-folder nor the top-level ``Files/`` is entered.
        """
        if rel_dir and not is_indexed(rel_dir + "/x.md"):
            return
        top = self.root / rel_dir if rel_dir else self.root
        stack = [(str(top), rel_dir + "/" if rel_dir else "")]
        while stack:
            folder, prefix = stack.pop()
            for entry in scandir_or_none(folder) or ():  # a folder gone or unreadable is skipped
                name = entry.name
                if name.startswith("."):
                    continue
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if prefix or name != "Files":
                            stack.append((entry.path, prefix + name + "/"))
                    elif len(name) > 3 and name[-3:].lower() == ".md" and entry.is_file(follow_symlinks=False) \
                            and not self.ignored(prefix + name):
                        yield prefix + name, entry.stat(follow_symlinks=False)
                except OSError:
                    continue

    def drop_ignored(self) -> int:
        """Forget the entities whose paths :attr:`ignored` now takes (no file is read).

        :returns: how many were dropped.
        """
        gone = [path for (path,) in self._db.execute("SELECT path FROM entities") if self.ignored(path)]
        if gone:
            with self._transaction():
                for rel in gone:
                    self._drop(rel)
        return len(gone)

    def _load(self, rel: str) -> None:
        """Read one file into the index (replacing what it held for that path)."""
        if not is_indexed(rel):
            return
        if self.ignored(rel):
            self._drop(rel)
            return
        try:
            data, st = read_file(self.root, rel)  # no link followed, in the file nor in a folder on its way
        except (OSError, OutsideMirrorError):
            self._drop(rel)
            return
        entity = parse_entity(rel, data, st.st_mtime, self.tz)
        db = self._db
        row = db.execute("SELECT id FROM entities WHERE path=?", (rel,)).fetchone()
        values = (rel, entity.permalink, entity.title, entity.type, json.dumps(list(entity.tags), ensure_ascii=False),
                  entity.created, entity.modified, entity.modified_ts, entity.sensitivity, entity.status,
                  entity.size, st.st_mtime_ns, entity.damaged)
        if row is None:
            eid = int(db.execute("INSERT INTO entities(path, permalink, title, type, tags, created, modified, "
                                 "modified_ts, sensitivity, status, size, mtime_ns, damaged) "
                                 "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", values).lastrowid or 0)
        else:
            eid = int(row[0])  # the row keeps its id: an entity holding a permalink keeps holding it
            self._forget_parts(eid)
            db.execute("UPDATE entities SET path=?, permalink=?, title=?, type=?, tags=?, created=?, modified=?, "
                       "modified_ts=?, sensitivity=?, status=?, size=?, mtime_ns=?, damaged=? WHERE id=?",
                       (*values, eid))
        db.executemany("INSERT OR IGNORE INTO tags(tag, id) VALUES (?, ?)", [(t, eid) for t in entity.tags_l])
        db.executemany("INSERT OR IGNORE INTO titles(key, id) VALUES (?, ?)", [(k, eid) for k in title_keys(entity)])
        db.executemany("INSERT INTO links(src, ord, rel, target, target_key) VALUES (?, ?, ?, ?, ?)",
                       [(eid, i, r, t, link_key(t)) for i, (r, t) in enumerate(entity.links)])
        db.execute("INSERT INTO fts_head(rowid, title, permalink, tags) VALUES (?, ?, ?, ?)",
                   (eid, entity.title + _END, entity.permalink + _END, "\n".join(entity.tags) + _END))
        db.execute("INSERT INTO fts_body(rowid, body) VALUES (?, ?)", (eid, entity.body + _END))
        # the same permalink at a path whose file is gone: the file was renamed or moved
        for (other,) in db.execute("SELECT path FROM entities WHERE permalink=? AND path<>?",
                                   (entity.permalink, rel)).fetchall():
            if not (self.root / other).is_file():
                self._drop(other)

    def _forget_parts(self, eid: int) -> None:
        for table, column in (("tags", "id"), ("titles", "id"), ("links", "src"), ("fts_head", "rowid"),
                              ("fts_body", "rowid")):
            self._db.execute(f"DELETE FROM {table} WHERE {column}=?", (eid,))

    def _drop(self, rel: str) -> None:
        row = self._db.execute("SELECT id FROM entities WHERE path=?", (rel,)).fetchone()
        if row is not None:
            self._forget_parts(int(row[0]))
            self._db.execute("DELETE FROM entities WHERE id=?", (row[0],))

    # -- entities -------------------------------------------------------------------

    def __len__(self) -> int:
        return int(self._db.execute("SELECT count(*) FROM entities").fetchone()[0])

    def _entity(self, row: Sequence[Any], body: str | None = None, *, links: bool = True,
                link_rows: tuple[tuple[str, str], ...] | None = None) -> Entity:
        """An entity from its ``entities`` row; ``body`` given (e.g. ``""``) is not read,
        ``links=False`` leaves its links out (for listings), ``link_rows`` given are its links."""
        eid, path, permalink, title, type_, tags, created, modified, modified_ts, sensitivity, status, size, \
            damaged = row
        if body is None:
            found = self._db.execute("SELECT body FROM fts_body WHERE rowid=?", (eid,)).fetchone()
            body = found[0] if found else ""
        body = body[:-len(_END)] if body.endswith(_END) else body
        if link_rows is None:
            link_rows = tuple((r, t) for r, t in self._db.execute(
                "SELECT rel, target FROM links WHERE src=? ORDER BY ord", (eid,))) if links else ()
        tag_tuple = tuple(json.loads(tags))
        return Entity(path=path, permalink=permalink, title=title, type=type_, tags=tag_tuple, created=created,
                      modified=modified, modified_ts=modified_ts, sensitivity=sensitivity, status=status, body=body,
                      links=link_rows, size=size, damaged=damaged, title_l=title.lower(), permalink_l=permalink.lower(),
                      tags_l=tuple(t.lower() for t in tag_tuple))

    def _full(self, rows: Sequence[Sequence[Any]]) -> list[Entity]:
        """The entities of these ``entities`` rows with bodies and links, read in one query each."""
        if not rows:
            return []
        marks = ",".join("?" * len(rows))
        ids = [r[0] for r in rows]
        bodies = dict(self._db.execute(f"SELECT rowid, body FROM fts_body WHERE rowid IN ({marks})", ids).fetchall())
        links: dict[int, list[tuple[str, str]]] = {}
        for src, rel, target in self._db.execute(
                f"SELECT src, rel, target FROM links WHERE src IN ({marks}) ORDER BY src, ord", ids):
            links.setdefault(src, []).append((rel, target))
        return [self._entity(r, bodies.get(r[0], ""), link_rows=tuple(links.get(r[0], ()))) for r in rows]

    def _one(self, where: str, params: Sequence[Any]) -> Entity | None:
        row = self._db.execute(f"SELECT {_COLUMNS} FROM entities WHERE {where}", params).fetchone()
        return self._entity(row) if row is not None else None

    def entities(self) -> Iterator[Entity]:
        """Every entity, in no particular order (bodies included: for tests and small libraries)."""
        rows = self._db.execute(f"SELECT {_COLUMNS} FROM entities").fetchall()
        return iter([self._entity(r) for r in rows])

    def get(self, rel_path: str) -> Entity | None:
        """The entity at a path, or None."""
        return self._one("path=?", (rel_path,))

    def by_permalink(self, permalink: str) -> Entity | None:
        """The entity with this permalink, checking that its file still exists.

        A stale entry (the file was moved without an event naming it) is
        dropped and the next holder of the permalink, if any, returned.
        """
        key = permalink.strip()
        for (rel,) in self._db.execute("SELECT path FROM entities WHERE permalink=? ORDER BY id", (key,)).fetchall():
            if (self.root / rel).is_file():
                return self.get(rel)
            with self._transaction():
                self._drop(rel)
        return None

    def resolve_link(self, target: str) -> Entity | None:
        """The entity a ``[[target]]`` names: by title (case-insensitive), else by file name, else permalink."""
        want = link_key(target)
        if not want:
            return None
        rows = self._db.execute(f"SELECT {_COLUMNS.replace('id,', 'e.id,', 1)} FROM titles t JOIN entities e "
                                "ON e.id = t.id WHERE t.key=? ORDER BY lower(e.title) <> ?, e.path LIMIT 1",
                                (want, want)).fetchall()
        if rows:
            return self._entity(rows[0])
        return self._one("permalink=? ORDER BY id LIMIT 1", (target.strip(),))

    def resolve_links(self, targets: Iterable[str]) -> dict[str, Entity | None]:
        """:meth:`resolve_link` of many targets in one query; the entities come without body and links.

        :returns: each target → the entity it names, or None.
        """
        wanted = {t: link_key(t) for t in dict.fromkeys(targets)}
        keys = sorted({k for k in wanted.values() if k})
        best: dict[str, tuple[bool, str, Entity]] = {}
        cols = ", ".join(f"e.{c.strip()}" for c in _COLUMNS.split(","))
        for start in range(0, len(keys), 500):
            chunk = keys[start:start + 500]
            for key, *row in self._db.execute(
                    f"SELECT t.key, {cols} FROM titles t JOIN entities e ON e.id = t.id "
                    f"WHERE t.key IN ({','.join('?' * len(chunk))})", chunk):
                rank = (row[3].lower() != key, row[1])  # the title itself before a file name, then by path
                if key not in best or rank < best[key][:2]:
                    best[key] = (*rank, self._entity(row, body="", links=False))
        out: dict[str, Entity | None] = {}
        for target, key in wanted.items():
            if not key:
                out[target] = None
            elif key in best:
                out[target] = best[key][2]
            else:
                row = self._db.execute(f"SELECT {_COLUMNS} FROM entities WHERE permalink=? ORDER BY id LIMIT 1",
                                       (target.strip(),)).fetchone()
                out[target] = self._entity(row, body="", links=False) if row is not None else None
        return out

    def has_permalink(self, permalink: str) -> bool:
        """True when some entity uses this permalink."""
        return self._db.execute("SELECT 1 FROM entities WHERE permalink=? LIMIT 1", (permalink,)).fetchone() is not None

    def backlinks(self, entity: Entity, limit: int = 20) -> list[tuple[str, str, Entity]]:
        """The links of other entities that lead to ``entity``: ``(relation type, link text, source)``,
        by source path, at most ``limit``; each source without its body and links.  A link
        counts when it resolves to ``entity`` (:meth:`resolve_link`)."""
        keys = sorted(title_keys(entity) | {entity.permalink.lower()})
        marks = ",".join("?" * len(keys))
        cols = ", ".join(f"e.{c.strip()}" for c in _COLUMNS.split(","))
        rows = self._db.execute(
            f"SELECT l.rel, l.target, {cols} FROM links l JOIN entities e ON e.id = l.src "
            f"WHERE l.target_key IN ({marks}) AND e.path <> ? ORDER BY e.path, l.ord LIMIT ?",
            (*keys, entity.path, 4 * limit)).fetchall()
        out: list[tuple[str, str, Entity]] = []
        resolved = {t: (e.path if e else None) for t, e in self.resolve_links(r[1] for r in rows).items()}
        for rel, target, *source in rows:
            if resolved[target] != entity.path:
                continue
            out.append((rel, target, self._entity(source, body="", links=False)))
            if len(out) >= limit:
                break
        return out

    # -- search ---------------------------------------------------------------------

    def _expression(self, table: str, word: str) -> str | None:
        """The FTS5 query finding ``word`` in ``table`` (``fts_head``/``fts_body``): the word as a
        phrase, or for a one- or two-character word the terms it begins; ``""``: it occurs
        nowhere; None: it begins too many terms to list."""
        if len(word) >= 3:
            return _phrase(word)
        key = (table, word)
        if key not in self._expressions:
            terms = [r[0] for r in self._db.execute(
                f"SELECT term FROM {table}_terms WHERE term >= ? AND term < ? LIMIT ?",
                (word, word + "\U0010ffff", _MAX_PREFIX_TERMS + 1))]
            if len(self._expressions) >= 256:
                self._expressions.clear()
            self._expressions[key] = None if len(terms) > _MAX_PREFIX_TERMS else \
                "(" + " OR ".join(_phrase(t) for t in terms) + ")" if terms else ""
        return self._expressions[key]

    def _ids(self, sql: str, params: Sequence[Any]) -> list[int]:
        """The row ids one query selects, as one JSON array from SQLite (no Python row per id)."""
        ids: list[int] = json.loads(self._db.execute(f"SELECT json_group_array(id) FROM ({sql})", params).fetchone()[0])
        return ids

    def _head_hits(self, word: str, allowed: set[int] | None) -> list[tuple[set[int], int]]:
        """``[(ids of the entities whose short field holds word, the field's weight)]``, only among
        ``allowed`` ids when given: one FTS5 query per field, returning row ids only."""
        head: list[tuple[set[int], int]] = []
        expr = self._expression("fts_head", word)
        if expr == "":
            return head
        for column, weight in WEIGHTS[:3]:
            if expr is None:  # too common to list its terms: scan the field
                ids = self._ids(f"SELECT rowid AS id FROM fts_head WHERE instr(lower({column}), ?) > 0", (word,))
            else:
                ids = self._ids("SELECT rowid AS id FROM fts_head WHERE fts_head MATCH ?", (f"{column} : {expr}",))
            found = set(ids) if allowed is None else allowed.intersection(ids)
            if found:
                head.append((found, weight))
        return head

    def _body_hits(self, word: str, allowed: set[int] | None) -> set[int]:
        """The ids of the entities whose body holds ``word`` (among ``allowed`` when given)."""
        expr = self._expression("fts_body", word)
        if expr and allowed is not None:
            return self._bodies_among(expr, allowed)
        if expr is None:
            body = set(self._ids("SELECT rowid AS id FROM fts_body WHERE instr(lower(body), ?) > 0", (word,)))
        elif expr:
            body = set(self._ids("SELECT rowid AS id FROM fts_body WHERE fts_body MATCH ?", (expr,)))
        else:
            body = set()
        return body if allowed is None else body & allowed

    def _bodies_among(self, expr: str, ids: set[int]) -> set[int]:
        """Those of ``ids`` whose body matches the FTS5 query ``expr``: a few are looked up one
        by one, more by reading the query's hits once (FTS5 seeks each listed id on its own)."""
        if not ids:
            return set()
        listed = json.dumps(list(ids))
        if len(ids) <= 40:
            sql = ("SELECT value AS id FROM json_each(?) WHERE EXISTS "
                   "(SELECT 1 FROM fts_body WHERE fts_body MATCH ? AND rowid = value)")
            return set(self._ids(sql, (listed, expr)))
        sql = "SELECT rowid AS id FROM fts_body WHERE fts_body MATCH ? AND +rowid IN (SELECT value FROM json_each(?))"
        return set(self._ids(sql, (expr, listed)))

    @staticmethod
    def _split(by_score: dict[int, set[int]], parts: Iterable[tuple[set[int], int]]) -> dict[int, set[int]]:
        """Add each ``(ids, weight)`` to the scores: every score's entities split into those in
        ``ids`` (score + weight) and the rest.  Set operations only (C loops)."""
        for ids, weight in parts:
            split: dict[int, set[int]] = {}
            for score, members in by_score.items():
                for key, part in ((score + weight, members & ids), (score, members - ids)):
                    if part:
                        if key in split:
                            split[key] |= part
                        else:
                            split[key] = part
            by_score = split
        return by_score

    def _scored(self, words: Sequence[str], allowed: set[int] | None) -> dict[int, set[int]]:
        """Every entity holding some of ``words``, by score (see the module docstring): all hit
        entities start at 0 and each field's hits add its weight (:meth:`_split`)."""
        parts: list[tuple[set[int], int]] = []
        for word in words:
            parts += self._head_hits(word, allowed)
            body = self._body_hits(word, allowed)
            if body:
                parts.append((body, WEIGHTS[3][1]))
        by_score = self._split({0: set().union(*(ids for ids, _ in parts))}, parts)
        by_score.pop(0, None)
        return by_score

    def _ranked_by_heads(self, words: Sequence[str], allowed: set[int] | None, cond: str,
                         params: Sequence[Any], limit: int) -> list[tuple[int, int]] | None:
        """:meth:`search`'s best ``(id, score)`` without reading a common word's body hits.

        A word in a short field earns at least 2, one in a body 1 per word.  The
        entities with short-field hits are scored exactly (their bodies looked
        up among them alone) group by group, best short-field score first, until
        ``limit`` of them meeting ``cond`` score ``t`` or more and no later group
        nor a body hit alone could reach ``t``.
        With one word and fewer such entities, they come first and then the
        newest entities whose body holds the word, found by walking the
        entities newest first.

        :returns: the ranking, or None when this shortcut does not apply (the
            bodies alone could rank, or a word too short and common to look up).
        """
        body_w = WEIGHTS[3][1]
        most_from_bodies = body_w * len(words)
        exprs = [self._expression("fts_body", w) for w in words]
        if any(e is None for e in exprs):
            return None
        parts = [p for w in words for p in self._head_hits(w, allowed)]
        groups = self._split({0: set().union(*(ids for ids, _ in parts))}, parts)
        groups.pop(0, None)
        exact: dict[int, set[int]] = {}  # score → the entities meeting ``cond`` scored so far
        floor = None  # the score of the limit-th best of them
        for head_score in sorted(groups, reverse=True):
            if floor is not None and head_score + most_from_bodies < floor:
                break
            meeting = set(self._ids("SELECT e.id FROM entities e WHERE e.id IN (SELECT value FROM json_each(?)) "
                                    f"AND {cond}", (json.dumps(list(groups[head_score])), *params)))
            if not meeting:
                continue
            scored = self._split({head_score: meeting},
                                 [(self._bodies_among(e, meeting), body_w) for e in exprs if e])
            for score, ids in scored.items():
                exact[score] = exact[score] | ids if score in exact else ids
            seen = 0
            for score in sorted(exact, reverse=True):
                seen += len(exact[score])
                if seen >= limit:
                    floor = score
                    break
        if floor is None and len(words) > 1 or floor is not None and most_from_bodies >= floor:
            return None  # entities with body hits alone could be among the best
        candidates: set[int] = set().union(*exact.values())
        ranked = self._best(exact, cond, params, limit)
        if floor is not None or not exprs[0]:
            return ranked
        # one word, fewer than ``limit`` head hits: then the newest of its body hits
        need = limit - len(ranked)
        if allowed is not None:  # the few entities carrying the tags
            rest = self._bodies_among(exprs[0], allowed - candidates)
            return ranked + self._best({body_w: rest}, cond, params, need) if rest else ranked
        # a word in few bodies: reading its (few) hits costs less than checking entities one by one
        common = max(_FEW_BODY_HITS, len(self) // 4)
        hits = self._ids("SELECT rowid AS id FROM fts_body WHERE fts_body MATCH ? LIMIT ?", (exprs[0], common))
        if len(hits) < common:
            return None
        walk = 20 * limit  # the newest entities looked at; a rarer word is found by its hits
        edge = self._db.execute(f"SELECT e.modified_ts, e.path FROM entities e WHERE {cond} "
                                "ORDER BY e.modified_ts DESC, e.path LIMIT 1 OFFSET ?", (*params, walk)).fetchone()
        bound, bound_params = "", []
        if edge is not None:
            bound = " AND (e.modified_ts > ? OR e.modified_ts = ? AND e.path < ?)"
            bound_params = [edge[0], edge[0], edge[1]]
        rows = self._db.execute(
            f"SELECT e.id FROM entities e WHERE {cond}{bound} AND EXISTS (SELECT 1 FROM fts_body "
            "WHERE fts_body MATCH ? AND rowid = e.id) ORDER BY e.modified_ts DESC, e.path LIMIT ?",
            (*params, *bound_params, exprs[0], need + len(candidates))).fetchall()
        more = [eid for (eid,) in rows if eid not in candidates][:need]
        if len(more) < need and edge is not None:
            return None  # a rarer word: not among the newest entities walked
        return ranked + [(eid, body_w) for eid in more]

    def _best(self, by_score: dict[int, set[int]], cond: str, params: Sequence[Any],
              limit: int) -> list[tuple[int, int]]:
        """The ``limit`` best ``(id, score)`` of ``by_score`` whose entity meets ``cond``: by
        score, then newest ``modified``, then path.

        Scores take few values, so the entities are taken score by score, best
        first.  A score held by few entities: those are looked up by id and
        sorted in SQL.  One held by many (a common word's body hits): the
        entities are walked newest first (the ``entities_newest`` index) until
        enough of them hold it, which stops early; given up for the lookup by
        id when the walk grows longer than that would be.
        """
        total = 0
        out: list[tuple[int, int]] = []
        for score in sorted(by_score, reverse=True):
            need = limit - len(out)
            if need <= 0:
                break
            ids = by_score[score]
            picked: list[int] | None = None
            if len(ids) > 64:
                total = total or len(self)
                if len(ids) * len(ids) > need * total:  # a walk of ~need * total / len(ids) rows is shorter
                    picked = self._walk_newest(ids, cond, params, need, len(ids))
            if picked is None:
                picked = [r[0] for r in self._db.execute(
                    f"SELECT e.id FROM entities e WHERE e.id IN (SELECT value FROM json_each(?)) AND {cond} "
                    "ORDER BY e.modified_ts DESC, e.path LIMIT ?", (json.dumps(list(ids)), *params, need))]
            out += [(eid, score) for eid in picked]
        return out

    def _walk_newest(self, members: set[int], cond: str, params: Sequence[Any], need: int,
                     budget: int) -> list[int] | None:
        """The first ``need`` ids in ``members`` of the entities meeting ``cond``, newest first;
        None when more than ``budget`` rows were walked without finding them."""
        cur = self._db.execute(f"SELECT e.id FROM entities e WHERE {cond} ORDER BY e.modified_ts DESC, e.path",
                               params)
        try:
            found: list[int] = []
            for walked, (eid,) in enumerate(cur):
                if eid in members:
                    found.append(eid)
                    if len(found) >= need:
                        break
                elif walked > budget:
                    return None
            return found
        finally:
            cur.close()

    def search(self, words: Sequence[str], *, tags: Sequence[str] = (), type_: str | None = None,
               since: float | None = None, include_sensitive: bool = False,
               limit: int = 8) -> list[tuple[int, Entity]]:
        """Entities ranked for ``words`` (see the module docstring), filtered in SQL.

        :param words: lowercased keywords (none: every entity, newest first).
        :param tags: lowercased tags an entity must all carry.
        :param type_: exact ``type``.
        :param since: POSIX seconds ``modified`` must be at or after.
        :param include_sensitive: also ``sensitivity: sensitive`` entities (trashed ones never).
        :param limit: at most this many.
        :returns: ``(score, entity)`` best first (score 0 without words).
        """
        where = ["e.status <> 'trashed'"]
        params: list[Any] = []
        if not include_sensitive:
            where.append("e.sensitivity <> 'sensitive'")
        if type_ is not None:
            where.append("e.type = ?")
            params.append(type_)
        if since is not None:
            where.append("e.modified_ts >= ?")
            params.append(since)
        cond = " AND ".join(where)
        cols = ", ".join(f"e.{c.strip()}" for c in _COLUMNS.split(","))
        if not words:
            tag_cond = "".join(" AND EXISTS (SELECT 1 FROM tags t WHERE t.tag = ? AND t.id = e.id)"
                               for _ in dict.fromkeys(tags))
            rows = self._db.execute(f"SELECT {cols} FROM entities e WHERE {cond}{tag_cond} "
                                    "ORDER BY e.modified_ts DESC, e.path LIMIT ?",
                                    (*params, *dict.fromkeys(tags), limit)).fetchall()
            return [(0, e) for e in self._full(rows)]
        allowed: set[int] | None = None
        for tag in dict.fromkeys(tags):  # few entities carry a tag: the hits are narrowed to them first
            carrying = set(self._ids("SELECT id FROM tags WHERE tag = ?", (tag,)))
            allowed = carrying if allowed is None else allowed & carrying
        if allowed is not None and not allowed:
            return []
        cleaned = [w for w in dict.fromkeys(_clean_word(w) for w in words) if w]
        best = self._ranked_by_heads(cleaned, allowed, cond, params, limit) if cleaned else []
        if best is None:
            by_score = self._scored(cleaned, allowed)
            best = self._best(by_score, cond, params, limit) if by_score else []
        if not best:
            return []
        found = {r[0]: r for r in self._db.execute(
            f"SELECT {cols} FROM entities e WHERE e.id IN ({','.join('?' * len(best))})", [eid for eid, _ in best])}
        kept = [(eid, score) for eid, score in best if eid in found]
        return list(zip([score for _, score in kept], self._full([found[eid] for eid, _ in kept]), strict=True))

    def listing(self, folder: str = "", tag: str = "", include_sensitive: bool = True,
                limit: int = 500) -> tuple[list[Entity], int]:
        """Entities below ``folder`` carrying ``tag`` (lowercased), newest first, without bodies.

        :returns: ``(at most limit entities, how many match in all)``.
        """
        where = ["e.status <> 'trashed'"]
        params: list[Any] = []
        if folder:
            where.append("substr(e.path, 1, ?) = ?")
            params += [len(folder) + 1, folder + "/"]
        if tag:
            where.append("EXISTS (SELECT 1 FROM tags t WHERE t.tag = ? AND t.id = e.id)")
            params.append(tag)
        if not include_sensitive:
            where.append("e.sensitivity <> 'sensitive'")
        cond = " AND ".join(where)
        total = int(self._db.execute(f"SELECT count(*) FROM entities e WHERE {cond}", params).fetchone()[0])
        cols = ", ".join(f"e.{c.strip()}" for c in _COLUMNS.split(","))
        rows = self._db.execute(f"SELECT {cols} FROM entities e WHERE {cond} ORDER BY e.modified_ts DESC, e.path "
                                "LIMIT ?", (*params, limit)).fetchall()
        return [self._entity(r, body="", links=False) for r in rows], total
