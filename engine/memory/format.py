"""Lossless parser for memory entity files (markdown with YAML frontmatter).

This module owns the memory file format (docs/architecture.md §5,
tests/data/samples/README.md): an optional UTF-8 BOM, optional YAML
frontmatter between ``---`` lines, then a markdown body split into sections
at ATX headings.  ``## Observations`` lines
are ``- [category] text #tag (context)``, ``## Relations`` lines are
``- relation_type [[Target]] (context)`` (multi-word types quoted), and every
other ``[[wikilink]]`` outside code is an implicit link.

Parsing never normalises anything: a :class:`MemoryDoc` keeps the exact text
of every line (line endings included), so ``doc.to_bytes() == data`` for every
input that parses.  Input that cannot be parsed (invalid UTF-8, a frontmatter
block that is never closed, frontmatter that is not a YAML mapping) raises
:class:`MemoryParseError` with a human-readable reason.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import yaml
from ..merge.text import BOM, detect_eol, line_content, split_lines

__all__ = [
    "Frontmatter",
    "FrontmatterField",
    "MemoryDoc",
    "MemoryParseError",
    "Observation",
    "Relation",
    "Section",
    "code_block_ids",
    "iter_code_mask",
    "load_yaml",
    "parse_memory",
    "parse_observation",
    "parse_relation",
    "union_section_name",
]

_KEY_RE = re.compile(r"^([A-Za-z0-9_][^:\s]*(?:[ \t]+[^:\s]+)*)[ \t]*:(?:[ \t]|$)")
_HEADING_RE = re.compile(r"^(#{1,6})(?:[ \t]+(.*?))?[ \t]*#*[ \t]*$")
_FENCE_RE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_OBS_RE = re.compile(r"^[-*+][ \t]+\[(?P<cat>[^\[\]]+)\][ \t]+(?P<rest>\S.*)$")
_REL_RE = re.compile(
    r"""^[-*+][ \t]+(?P<type>"[^"]+"|'[^']+'|[^\s"'\[\]]+)[ \t]+\[\[(?P<target>[^\[\]]+)\]\]"""
    r"""(?:[ \t]+\((?P<ctx>.*)\))?[ \t]*$"""
)
_TAG_RE = re.compile(r"(?<!\S)#([^\s#()\[\]]+)")
_LINK_RE = re.compile(r"\[\[([^\[\]]+)\]\]")
_CODE_SPAN_RE = re.compile(r"(`+)(.+?)\1")
_UNION_SECTIONS = {"observations": "Observations", "relations": "Relations"}
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when available: ~10x faster


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` with the libyaml loader when PyYAML has it.

    :raises yaml.YAMLError: when *text* is not valid YAML.
    """
    return yaml.load(text, Loader=_LOADER)


class MemoryParseError(ValueError):
    """A memory file could not be parsed.

    :ivar reason: human-readable reason, e.g. ``"frontmatter opened on line 1 is never closed"``.
    :ivar line: 1-based line number the reason refers to, when known.
    """

    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.line = line


@dataclass(frozen=True)
class Observation:
    """One ``- [category] text #tag (context)`` line.

    :ivar category: the text between the brackets.
    :ivar text: the rest of the line without the trailing ``(context)``; tags stay in it.
    :ivar tags: the ``#tag`` words, in order, without ``#``.
    :ivar context: the trailing parenthesised context without the parentheses, or ``None``.
    :ivar line: the line's exact text without its line ending.
    """

    category: str
    text: str
    tags: tuple[str, ...]
    context: str | None
    line: str


@dataclass(frozen=True)
class Relation:
    """One ``- relation_type [[Target]] (context)`` line.

    :ivar relation_type: the type, unquoted (``"is refined by"`` → ``is refined by``).
    :ivar target: the link target (a note title).
    :ivar context: the trailing parenthesised context, or ``None``.
    :ivar line: the line's exact text without its line ending.
    """

    relation_type: str
    target: str
    context: str | None
    line: str


@dataclass(frozen=True)
class FrontmatterField:
    """One top-level frontmatter key with the exact lines that hold it.

    :ivar key: the key.
    :ivar lines: the key line plus continuation lines (indented lines, list
        items, comments, blank lines up to the next key), endings included.
    :ivar value: the value as YAML reads it.
    """

    key: str
    lines: tuple[str, ...]
    value: Any


@dataclass(frozen=True)
class Frontmatter:
    """The frontmatter block.

    :ivar open_line: the opening ``---`` line.
    :ivar preamble: lines before the first key (comments, blank lines).
    :ivar fields: the top-level fields in file order; empty when not splittable.
    :ivar close_line: the closing ``---`` (or ``...``) line.
    :ivar data: the whole block as YAML reads it (a dict).
    :ivar splittable: ``False`` when the block cannot be merged field by field
        (duplicate keys, anchors across fields, keys this parser does not
        recognise); then ``fields`` is empty and ``body_lines`` holds everything.
    :ivar body_lines: all lines between the delimiters.
    """

    open_line: str
    preamble: tuple[str, ...]
    fields: tuple[FrontmatterField, ...]
    close_line: str
    data: dict[str, Any]
    splittable: bool
    body_lines: tuple[str, ...]

    @property
    def lines(self) -> tuple[str, ...]:
        """All lines of the block, delimiters included, exactly as in the file."""
        return (self.open_line, *self.body_lines, self.close_line)


@dataclass(frozen=True)
class Section:
    """A run of body lines starting at an ATX heading (or the body start).

    :ivar heading: the heading line (with ending), ``None`` for the text before the first heading.
    :ivar level: heading level 1-6, ``0`` without heading.
    :ivar title: heading text, ``""`` without heading.
    :ivar lines: the lines after the heading up to the next heading, endings included.
    :ivar start: 0-based index of the section's first line in the file.
    """

    heading: str | None
    level: int
    title: str
    lines: tuple[str, ...]
    start: int

    @property
    def union_name(self) -> str | None:
        """``"Observations"`` / ``"Relations"`` for a level-2 union section, else ``None``."""
        return union_section_name(self.level, self.title)


@dataclass(frozen=True)
class MemoryDoc:
    """A parsed memory file; :meth:`to_bytes` gives back the exact input.

    :ivar bom: the file starts with a UTF-8 BOM.
    :ivar frontmatter: the frontmatter, or ``None`` when the file has none.
    :ivar sections: the body split at headings (the first may have no heading).
    :ivar eol: dominant line ending (``"\\n"`` when the file has no line ending).
    """

    bom: bool
    frontmatter: Frontmatter | None
    sections: tuple[Section, ...]
    eol: str

    @property
    def body_lines(self) -> list[str]:
        """All body lines (after the frontmatter), endings included."""
        out: list[str] = []
        for s in self.sections:
            if s.heading is not None:
                out.append(s.heading)
            out.extend(s.lines)
        return out

    @property
    def lines(self) -> list[str]:
        """All lines of the file after the BOM."""
        fm = list(self.frontmatter.lines) if self.frontmatter else []
        return fm + self.body_lines

    def to_bytes(self) -> bytes:
        """Serialise back to bytes; identical to the parsed input."""
        return ((BOM if self.bom else "") + "".join(self.lines)).encode("utf-8")

    @property
    def observations(self) -> list[Observation]:
        """Observation lines anywhere in the body outside code blocks (task items excluded)."""
        body = self.body_lines
        return [o for i, line in _iter_prose(body) if (o := parse_observation(line_content(line)))]

    @property
    def relations(self) -> list[Relation]:
        """Relation lines anywhere in the body outside code blocks."""
        body = self.body_lines
        return [r for i, line in _iter_prose(body) if (r := parse_relation(line_content(line)))]

    @property
    def wikilinks(self) -> list[str]:
        """Implicit ``[[links]]`` outside code and outside relation lines, in order.

        ``[[Target|alias]]`` yields ``Target``; ``[[A#B]]`` is kept whole.
        """
        links: list[str] = []
        for _, line in _iter_prose(self.body_lines):
            text = line_content(line)
            if parse_relation(text):
                continue
            text = _CODE_SPAN_RE.sub("", text)
            links.extend(m.group(1).split("|", 1)[0].strip() for m in _LINK_RE.finditer(text))
        return links


def union_section_name(level: int, title: str) -> str | None:
    """Return ``"Observations"`` or ``"Relations"`` when a heading opens a union section, else ``None``."""
    if level != 2:
        return None
    return _UNION_SECTIONS.get(title.strip().lower())


def code_block_ids(lines: list[str]) -> list[int]:
    """Number the fenced code blocks of *lines*.

    :returns: per line, ``0`` outside code, else the 1-based number of the
        fenced block it belongs to (its fence lines included).
    """
    ids: list[int] = []
    fence: str | None = None
    block = 0
    for line in lines:
        text = line_content(line)
        m = _FENCE_RE.match(text)
        if fence is None:
            if m:
                fence = m.group(1)
                block += 1
                ids.append(block)
            else:
                ids.append(0)
            continue
        ids.append(block)
        if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not text[m.end():].strip():
            fence = None
    return ids


def iter_code_mask(lines: list[str]) -> list[bool]:
    """Return, per line, whether it belongs to a fenced code block (fence lines included)."""
    return [i != 0 for i in code_block_ids(lines)]


def _iter_prose(lines: list[str]) -> Iterator[tuple[int, str]]:
    for i, (line, code) in enumerate(zip(lines, iter_code_mask(lines))):
        if not code:
            yield i, line


def _split_context(rest: str) -> tuple[str, str | None]:
    """Split a trailing balanced ``(context)`` (preceded by whitespace) off *rest*."""
    s = rest.rstrip()
    if not s.endswith(")"):
        return rest.strip(), None
    depth = 0
    for i in range(len(s) - 1, -1, -1):
        if s[i] == ")":
            depth += 1
        elif s[i] == "(":
            depth -= 1
            if depth == 0:
                if i > 0 and s[i - 1] in " \t":
                    return s[:i].strip(), s[i + 1:-1]
                return rest.strip(), None
    return rest.strip(), None


def parse_observation(line: str) -> Observation | None:
    """Parse one line (without ending) as an observation.

    Task-list items (``- [ ] x``, ``- [x] x``), markdown links
    (``- [text](url)``) and indented lines are not observations.

    :returns: the :class:`Observation`, or ``None`` when the line is not one.
    """
    m = _OBS_RE.match(line)
    if not m:
        return None
    category = m.group("cat")
    if not category.strip() or category in ("x", "X"):
        return None
    rest = m.group("rest")
    text, context = _split_context(rest)
    tags = tuple(_TAG_RE.findall(_CODE_SPAN_RE.sub("", text)))
    return Observation(category.strip(), text, tags, context, line)


def parse_relation(line: str) -> Relation | None:
    """Parse one line (without ending) as a relation ``- type [[Target]] (context)``.

    :returns: the :class:`Relation`, or ``None`` when the line is not one.
    """
    m = _REL_RE.match(line)
    if not m:
        return None
    rtype = m.group("type")
    if rtype[0] in "\"'":
        rtype = rtype[1:-1]
    return Relation(rtype, m.group("target").strip(), m.group("ctx"), line)


def _split_frontmatter(open_line: str, inner: list[str], close_line: str, first_line: int, *,
                       fields: bool = True) -> Frontmatter:
    """Build a :class:`Frontmatter`, validating the YAML and (``fields``) splitting it into fields."""
    text = "".join(line_content(x) + "\n" for x in inner)
    try:
        data = load_yaml(text) if text.strip() else {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = first_line + 1 + mark.line if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise MemoryParseError(f"frontmatter is not valid YAML: {problem}"
                               + (f" (line {line})" if line else ""), line) from exc
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise MemoryParseError(f"frontmatter is not a mapping (it is a {type(data).__name__})", first_line)
    if not fields:
        return Frontmatter(open_line, (), (), close_line, data, False, tuple(inner))
    preamble: list[str] = []
    chunks: list[tuple[str, list[str]]] = []
    for line in inner:
        m = _KEY_RE.match(line_content(line))
        if m and not line[0].isspace():
            chunks.append((m.group(1), [line]))
        elif chunks:
            chunks[-1][1].append(line)
        else:
            preamble.append(line)
    split: list[FrontmatterField] = []
    splittable = not any(line_content(x).strip() and not line_content(x).lstrip().startswith("#")
                         for x in preamble)
    keys = [k for k, _ in chunks]
    if len(set(keys)) != len(keys) or set(keys) != {str(k) for k in data}:
        splittable = False
    for key, lines in chunks if splittable else ():
        try:
            value = load_yaml("".join(line_content(x) + "\n" for x in lines))
        except yaml.YAMLError:
            splittable = False
            break
        if not isinstance(value, dict) or len(value) != 1 or str(next(iter(value))) != key:
            splittable = False
            break
        v = next(iter(value.values()))
        if v != data.get(key, data.get(next(iter(value)))):
            splittable = False
            break
        split.append(FrontmatterField(key, tuple(lines), v))
    if not splittable:
        split = []
        preamble = []
    return Frontmatter(open_line, tuple(preamble), tuple(split), close_line, data, splittable,
                       tuple(inner))


def _split_sections(lines: list[str], offset: int) -> tuple[Section, ...]:
    sections: list[Section] = []
    heading: str | None = None
    level, title, start = 0, "", offset
    buf: list[str] = []
    for i, (line, code) in enumerate(zip(lines, iter_code_mask(lines))):
        m = None if code else _HEADING_RE.match(line_content(line))
        if m:
            if heading is not None or buf:
                sections.append(Section(heading, level, title, tuple(buf), start))
            heading, level, title, start, buf = line, len(m.group(1)), (m.group(2) or ""), offset + i, []
        else:
            buf.append(line)
    if heading is not None or buf:
        sections.append(Section(heading, level, title, tuple(buf), start))
    return tuple(sections)


def parse_memory(data: bytes, *, fields: bool = True) -> MemoryDoc:
    """Parse a memory file.

    A file that does not start with a ``---`` line (after an optional BOM) has
    no frontmatter and is all body; an empty file is a valid, empty document.

    :param data: the file's bytes.
    :param fields: False: the frontmatter is not split into its fields
        (``fields`` empty, ``splittable`` False), which spares one YAML read
        per field; for a check of the file (``memory_check``), not for an edit.
    :returns: the parsed :class:`MemoryDoc` (``to_bytes()`` returns *data*).
    :raises MemoryParseError: when *data* is not UTF-8, the frontmatter is
        never closed, is not valid YAML, or is not a mapping.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MemoryParseError(f"not valid UTF-8 (byte {exc.start})") from exc
    bom = text.startswith(BOM)
    if bom:
        text = text[1:]
    lines = split_lines(text)
    eol = detect_eol(lines) or "\n"
    frontmatter: Frontmatter | None = None
    body_start = 0
    if lines and line_content(lines[0]).rstrip() == "---":
        for j in range(1, len(lines)):
            if line_content(lines[j]).rstrip() in ("---", "..."):
                frontmatter = _split_frontmatter(lines[0], lines[1:j], lines[j], 1, fields=fields)
                body_start = j + 1
                break
        else:
            raise MemoryParseError("frontmatter opened on line 1 is never closed", 1)
    return MemoryDoc(bom, frontmatter, _split_sections(lines[body_start:], body_start), eol)
