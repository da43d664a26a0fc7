"""The earlier in-memory memory index (rebuilt at every start), kept only so that
``bench/memory_search.py`` can measure it beside the SQLite FTS5 index of
``engine/memory_index.py``.  Not part of the product.

An in-memory index of the memory entities of a mirror folder.

The memory tools (``memory_search``, ``memory_read``, …) answer from this
index instead of reading the tree on every call.  It is a cache: built once
from the files (:meth:`MemoryIndex.rebuild`), then kept current by
:meth:`MemoryIndex.update` with the paths the daemon saw change (sync events,
watcher events, its own writes).  Nothing here runs a thread; the caller
serialises access.

An entity is a memory file (``*.md`` outside ``Files/``, ``.conflict/`` and
other dot-folders, see :func:`is_indexed`) parsed with
:mod:`ohsync.engine.memory_format`.  Files whose frontmatter does not parse
are still indexed by their file name and raw text (``damaged`` says why), so
a person's notes never vanish from search because of one bad line.
"""
from __future__ import annotations

import os
import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from ohsync.engine.memory_format import MemoryParseError, iter_code_mask, load_yaml, parse_relation
from ohsync.engine.memory_merge import is_memory_file
from ohsync.engine.text_merge import BOM

__all__ = ["Columns", "Entity", "MemoryIndex", "is_indexed", "parse_entity", "parse_offset", "to_timestamp",
           "FULLWIDTH", "title_from_filename"]

_CLOSE_RE = re.compile(r"^(?:---|\.\.\.)[ \t]*\r?$\n?", re.MULTILINE)
_LINK_RE = re.compile(r"\[\[([^\[\]]+)\]\]")
_CODE_SPAN_RE = re.compile(r"(`+)(.+?)\1")

#: Characters a file name cannot hold and the full-width forms that stand for them.
FULLWIDTH = {"/": "／", ":": "：", "*": "＊", "?": "？", '"': "＂", "<": "＜", ">": "＞", "|": "｜"}
_FROM_FULLWIDTH = {v: k for k, v in FULLWIDTH.items()}


def parse_offset(text: str) -> timezone:
    """``"+08:00"`` → a fixed :class:`~datetime.timezone`.

    :raises ValueError: not of the form ``±HH:MM``.
    """
    s = text.strip()
    if len(s) != 6 or s[0] not in "+-" or s[3] != ":" or not (s[1:3] + s[4:]).isdigit():
        raise ValueError(f"a time offset looks like +08:00, not {text!r}")
    hours, minutes = int(s[1:3]), int(s[4:])
    if hours > 14 or minutes > 59:
        raise ValueError(f"a time offset looks like +08:00, not {text!r}")
    delta = timedelta(hours=hours, minutes=minutes)
    return timezone(-delta if s[0] == "-" else delta)


def to_timestamp(value: Any, tz: timezone) -> float | None:
    """A frontmatter time (datetime, date or ISO string) as POSIX seconds.

    Times without an offset are read in ``tz``; a date is its midnight.

    :returns: seconds, or None when ``value`` is not a time.
    """
    if isinstance(value, str):
        text = value.strip()
        try:
            value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            try:
                value = date.fromisoformat(text)
            except ValueError:
                return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=tz)
        return float(value.timestamp())
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=tz).timestamp()
    return None


def _time_text(value: Any) -> str:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return "" if value is None else str(value)


def _tags(value: Any) -> tuple[str, ...]:
    """Frontmatter tags as strings (YAML reads ``2026`` as an int; ``"a, b"`` is two tags)."""
    if value is None:
        return ()
    if isinstance(value, (list, tuple, set)):
        items = [str(v).strip() for v in value if v is not None]
    else:
        items = [t.strip() for t in str(value).replace("，", ",").split(",")]
    return tuple(t.lstrip("#") for t in items if t.strip("# "))


def title_from_filename(name: str) -> str:
    """The title a file name stands for: ``线性代数： 期中复习要点.md`` → ``线性代数: 期中复习要点``."""
    stem = name[:-3] if name.lower().endswith(".md") else name
    return "".join(_FROM_FULLWIDTH.get(c, c) for c in stem)


def is_indexed(rel_path: str) -> bool:
    """True for paths the index holds: memory files outside dot-folders (``.trash``, ``.obsidian``…)."""
    parts = rel_path.split("/")
    return is_memory_file(rel_path) and not any(p.startswith(".") for p in parts)


@dataclass(frozen=True)
class Entity:
    """One memory file as the tools see it.

    :ivar path: library-relative path (``courses/数据结构（2026 秋）.md``).
    :ivar permalink: the frontmatter ``permalink``; files without one get
        their path without ``.md``.
    :ivar title: the frontmatter ``title``, else the file name's title.
    :ivar type: the frontmatter ``type`` (``""`` when absent).
    :ivar tags: the frontmatter tags, as strings (observation ``#tags`` are body text).
    :ivar created/modified: the frontmatter times as written (ISO 8601), ``""`` when absent.
    :ivar modified_ts: ``modified`` in POSIX seconds (the file's mtime when absent).
    :ivar sensitivity: ``normal`` or ``sensitive``.
    :ivar status: the frontmatter ``status`` (``trashed`` for soft-deleted notes), else ``""``.
    :ivar body: the text after the frontmatter, without a leading ``# <title>`` heading.
    :ivar links: ``(relation type, target title)`` of relation lines, then
        ``("links_to", target)`` for other ``[[wikilinks]]``, without repeats.
    :ivar size: the file's size in bytes.
    :ivar damaged: why the file does not parse, or ``None``.
    """

    path: str
    permalink: str
    title: str
    type: str
    tags: tuple[str, ...]
    created: str
    modified: str
    modified_ts: float
    sensitivity: str
    status: str
    body: str
    links: tuple[tuple[str, str], ...]
    size: int
    damaged: str | None = None
    # lowercased copies for case-insensitive matching (shared with the originals when equal)
    title_l: str = ""
    permalink_l: str = ""
    tags_l: tuple[str, ...] = ()

    @property
    def folder(self) -> str:
        """The entity's folder (``courses/2026-2027-1``; ``""`` at the top)."""
        return self.path.rpartition("/")[0]


def _title_keys(entity: Entity) -> set[str]:
    return {entity.title_l, _lower(title_from_filename(entity.path.rpartition("/")[2]))}


def _lower(text: str) -> str:
    low = text.lower()
    return text if low == text else low


def _without_title_heading(body: str, title: str) -> str:
    """The body without its ``# <title>`` heading (the title is scored on its own)."""
    head, sep, rest = body.lstrip("\r\n").partition("\n")
    if head.rstrip("\r").strip() == f"# {title}":
        return rest
    return body


def _split(data: bytes) -> tuple[dict[str, Any], str]:
    """Frontmatter (read as YAML once) and body text, with the failures
    :func:`~ohsync.engine.memory_format.parse_memory` reports.

    The index needs no lossless field split, so this is the fast path of the
    same format: one YAML load per file instead of one per field.

    :raises MemoryParseError: not UTF-8, frontmatter never closed, not YAML, not a mapping.
    """
    try:
        text = data.decode("utf-8").removeprefix(BOM)
    except UnicodeDecodeError as exc:
        raise MemoryParseError(f"not valid UTF-8 (byte {exc.start})") from exc
    first, sep, rest = text.partition("\n")
    if first.rstrip("\r").rstrip() != "---":
        return {}, text
    m = _CLOSE_RE.search(rest)
    if m is None:
        raise MemoryParseError("frontmatter opened on line 1 is never closed", 1)
    inner = rest[:m.start()]
    try:
        fm = load_yaml(inner) if inner.strip() else {}
    except Exception as exc:  # noqa: BLE001 - yaml.YAMLError and its kin
        raise MemoryParseError(f"frontmatter is not valid YAML: {exc}") from None
    if fm is None:
        fm = {}
    if not isinstance(fm, dict):
        raise MemoryParseError(f"frontmatter is not a mapping (it is a {type(fm).__name__})", 1)
    return fm, rest[m.end():]


def _links(body: str) -> list[tuple[str, str]]:
    """Relation lines, then other ``[[wikilinks]]``, outside fenced code."""
    lines = body.splitlines()
    relations: list[tuple[str, str]] = []
    links: list[tuple[str, str]] = []
    if "[[" not in body:
        return []
    for line, code in zip(lines, iter_code_mask(lines)):
        if code or "[[" not in line:
            continue
        rel = parse_relation(line)
        if rel is not None:
            relations.append((rel.relation_type, rel.target))
            continue
        line = _CODE_SPAN_RE.sub("", line)
        links.extend(("links_to", m.group(1).split("|", 1)[0].strip()) for m in _LINK_RE.finditer(line))
    return relations + links


def _salvage(text: str) -> tuple[dict[str, Any], str]:
    """Fields of a frontmatter that does not parse as a whole (never closed,
    one bad line): each ``key: value`` line at the top read on its own.

    :returns: ``(fields, the text after them)``.
    """
    lines = text.splitlines(keepends=True)
    fields: dict[str, Any] = {}
    if not lines or lines[0].strip() != "---":
        return fields, text
    end = 1
    for end in range(1, len(lines)):
        line = lines[end]
        if not line.strip() or line.startswith("#") or line.strip() in ("---", "..."):
            break
        key, sep, _ = line.partition(":")
        if sep and key.strip() and not line[0].isspace():
            try:
                value = load_yaml(line)
            except Exception:  # noqa: BLE001 - one bad line: skip it
                continue
            if isinstance(value, dict):
                fields.update({str(k): v for k, v in value.items()})
    else:
        end = len(lines)
    if end < len(lines) and lines[end].strip() in ("---", "..."):
        end += 1
    return fields, "".join(lines[end:])


def parse_entity(rel_path: str, data: bytes, mtime: float, tz: timezone) -> Entity:
    """Read one memory file into an :class:`Entity` (never raises for bad content).

    :param rel_path: library-relative path.
    :param data: the file's bytes.
    :param mtime: the file's mtime (used when ``modified`` is missing).
    :param tz: offset for times written without one.
    """
    damaged = None
    try:
        fm, body = _split(data)
    except MemoryParseError as exc:
        damaged = exc.reason
        fm, body = _salvage(data.decode("utf-8", errors="replace").removeprefix(BOM))
    links = _links(body)
    name = rel_path.rpartition("/")[2]
    title = str(fm.get("title") or "").strip() or title_from_filename(name)
    body = _without_title_heading(body, title)
    permalink = str(fm.get("permalink") or "").strip() or rel_path[:-3]
    all_tags = tuple(dict.fromkeys(_tags(fm.get("tags"))))
    modified_ts = to_timestamp(fm.get("modified"), tz)
    unique_links = tuple(dict.fromkeys(links))   # first occurrence of each, in order
    return Entity(
        path=rel_path, permalink=permalink, title=title, type=str(fm.get("type") or ""),
        tags=all_tags, created=_time_text(fm.get("created")), modified=_time_text(fm.get("modified")),
        modified_ts=modified_ts if modified_ts is not None else mtime,
        sensitivity=str(fm.get("sensitivity") or "normal").strip().lower(),
        status=str(fm.get("status") or "").strip().lower(), body=body, links=unique_links,
        size=len(data), damaged=damaged, title_l=_lower(title), permalink_l=_lower(permalink),
        tags_l=tuple(_lower(t) for t in all_tags))


class Columns:
    """Every entity's lowercased title, permalink, tags and body, each field
    joined into one string, so that a keyword is found in all entities with
    a few C-speed ``str.find`` calls instead of a Python loop per entity.

    :ivar entities: the entities, newest ``modified`` first (the corpus order).
    """

    FIELDS = ("title", "permalink", "tags", "body")

    def __init__(self, entities: list[Entity]) -> None:
        self.entities = entities
        self._fields: list[tuple[str, list[int], list[int]]] = []
        getters = (lambda e: e.title_l, lambda e: e.permalink_l, lambda e: "\x01".join(e.tags_l),
                   lambda e: _lower(e.body))  # the body's lowercase copy lives only here
        for get in getters:
            parts = [get(e).replace("\x00", " ") for e in entities]
            nexts, pos = [], 0  # nexts[k]: where entity k+1 starts
            starts = []
            for part in parts:
                starts.append(pos)
                pos += len(part) + 1
                nexts.append(pos)
            self._fields.append(("\x00".join(parts), starts, nexts))

    def hits(self, field: int, word: str) -> list[int]:
        """Positions (in :attr:`entities`) whose field ``field`` contains ``word``, each once.

        :param field: index into :attr:`FIELDS`.
        :param word: lowercased, without ``\\x00``/``\\x01``.
        """
        corpus, starts, nexts = self._fields[field]
        find = corpus.find
        out: list[int] = []
        append = out.append
        i = find(word)
        while i >= 0:
            k = bisect_right(starts, i) - 1
            append(k)
            i = find(word, nexts[k])
        return out


class MemoryIndex:
    """Every memory entity of one mirror folder, by path, permalink and title.

    :param root: the mirror folder.
    :param tz: offset for frontmatter times written without one.
    """

    def __init__(self, root: Path, tz: timezone | None = None) -> None:
        self.root = Path(root)
        self.tz = tz or timezone(timedelta(hours=8))
        self._by_path: dict[str, Entity] = {}
        self._by_permalink: dict[str, str] = {}
        # every indexed path per permalink, in load order: a duplicate takes over in O(1)
        self._permalink_paths: dict[str, dict[str, None]] = {}
        self._by_title: dict[str, set[str]] = {}  # lowercased title and file-name title → paths
        self._columns: Columns | None = None  # search corpora of a past state ...
        self._stale: set[str] = set()  # ... and the paths changed since (scored one by one)

    # -- building -------------------------------------------------------------------

    def rebuild(self) -> int:
        """Forget everything and read every memory file under the root.

        :returns: the number of entities indexed.
        """
        self._by_path.clear()
        self._by_permalink.clear()
        self._permalink_paths.clear()
        self._by_title.clear()
        self._columns = None
        self._stale.clear()
        for rel in self._walk(""):
            self._load(rel)
        return len(self._by_path)

    def update(self, rel_paths: Iterable[str]) -> None:
        """Re-read these paths (files or folders) after they changed.

        A missing path drops its entity and everything indexed below it; a
        folder is re-read file by file.  Only the named paths are touched.
        """
        for rel in rel_paths:
            rel = rel.strip("/")
            local = self.root / rel if rel else self.root
            if rel and local.is_file():
                self._drop(rel)
                self._load(rel)
                continue
            prefix = rel + "/" if rel else ""
            for known in [p for p in self._by_path if p == rel or p.startswith(prefix)]:
                self._drop(known)
            if local.is_dir():
                for sub in self._walk(rel):
                    self._load(sub)

    def _walk(self, rel_dir: str) -> Iterator[str]:
        top = self.root / rel_dir if rel_dir else self.root
        for folder, dirs, names in os.walk(top):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            rel_folder = Path(folder).relative_to(self.root).as_posix()
            rel_folder = "" if rel_folder == "." else rel_folder + "/"
            for name in names:
                rel = rel_folder + name
                if is_indexed(rel):
                    yield rel

    def _load(self, rel: str) -> None:
        if not is_indexed(rel):
            return
        path = self.root / rel
        try:
            with open(path, "rb") as fh:
                st = os.fstat(fh.fileno())
                data = fh.read()
        except OSError:
            return
        entity = parse_entity(rel, data, st.st_mtime, self.tz)
        self._stale.add(rel)
        self._by_path[rel] = entity
        self._permalink_paths.setdefault(entity.permalink, {})[rel] = None
        for key in _title_keys(entity):
            self._by_title.setdefault(key, set()).add(rel)
        other = self._by_permalink.get(entity.permalink)
        if other is not None and other != rel and not (self.root / other).is_file():
            self._drop(other)  # the file was renamed or moved: the old path is stale
        if other is None or other == rel or other not in self._by_path:
            self._by_permalink[entity.permalink] = rel

    def _drop(self, rel: str) -> None:
        entity = self._by_path.pop(rel, None)
        if entity is None:
            return
        self._stale.add(rel)
        for key in _title_keys(entity):
            paths = self._by_title.get(key)
            if paths is not None:
                paths.discard(rel)
                if not paths:
                    del self._by_title[key]
        same = self._permalink_paths.get(entity.permalink, {})
        same.pop(rel, None)
        if not same:
            self._permalink_paths.pop(entity.permalink, None)
        if self._by_permalink.get(entity.permalink) == rel:
            del self._by_permalink[entity.permalink]
            if same:  # a duplicate permalink takes over
                self._by_permalink[entity.permalink] = next(iter(same))

    # -- queries --------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._by_path)

    def entities(self) -> Iterator[Entity]:
        """Every entity, in no particular order."""
        return iter(list(self._by_path.values()))

    def columns(self) -> Columns:
        """Search corpora of the entities (rebuilt once many paths changed;
        until then the changed ones are in :meth:`stale`)."""
        if self._columns is None or len(self._stale) > max(256, len(self._by_path) // 20):
            self._columns = Columns(sorted(self._by_path.values(), key=lambda e: (-e.modified_ts, e.path)))
            self._stale.clear()
        return self._columns

    def stale(self) -> tuple[set[str], list[Entity]]:
        """What changed since :meth:`columns` was built: the paths (their corpus
        entries are out of date) and the current entities at those paths."""
        paths = set(self._stale)
        return paths, [self._by_path[p] for p in sorted(paths) if p in self._by_path]

    def get(self, rel_path: str) -> Entity | None:
        """The entity at a path, or None."""
        return self._by_path.get(rel_path)

    def by_permalink(self, permalink: str) -> Entity | None:
        """The entity with this permalink, checking that its file still exists.

        A stale entry (the file was moved without an event naming it) is
        dropped and None returned.
        """
        rel = self._by_permalink.get(permalink.strip())
        if rel is None:
            return None
        if not (self.root / rel).is_file():
            self._drop(rel)
            return self.by_permalink(permalink) if permalink.strip() in self._by_permalink else None
        return self._by_path.get(rel)

    def resolve_link(self, target: str) -> Entity | None:
        """The entity a ``[[target]]`` names: by title (case-insensitive), else by file name, else permalink."""
        want = _lower(target.split("|", 1)[0].split("#", 1)[0].strip())
        if not want:
            return None
        paths = self._by_title.get(want)
        if paths:
            entities = sorted((self._by_path[p] for p in paths), key=lambda e: (e.title_l != want, e.path))
            return entities[0]
        rel = self._by_permalink.get(target.strip())
        return self._by_path.get(rel) if rel else None

    def has_permalink(self, permalink: str) -> bool:
        """True when some entity uses this permalink."""
        return permalink in self._by_permalink
