"""One memory file read as the memory tools see it: an :class:`Entity`.

An entity is a memory file (``*.md`` outside ``Files/``, ``.conflict/`` and
other dot-folders, see :func:`is_indexed`) parsed with
:mod:`ohsync.engine.memory.format`.  Files whose frontmatter does not parse
are still read by their file name and raw text (``damaged`` says why), so a
person's notes never vanish from search because of one bad line.  The index
(:mod:`ohsync.engine.memory.index`) stores what this module reads.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any

from .format import MemoryParseError, iter_code_mask, load_yaml, parse_relation
from .merge import is_memory_file
from ..merge.text import BOM

__all__ = ["Entity", "is_indexed", "parse_entity", "parse_offset", "to_timestamp", "FULLWIDTH",
           "title_from_filename", "title_keys"]

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


def title_keys(entity: Entity) -> set[str]:
    """The lowercased names a ``[[link]]`` finds ``entity`` by: its title and its file name's title."""
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
    :func:`~ohsync.engine.memory.format.parse_memory` reports.

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
