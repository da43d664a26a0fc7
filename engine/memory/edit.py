"""Byte-level edits of memory entity files for the memory tools.

Pure functions from bytes to bytes: render a new entity
(:func:`render_entity`), add one observation (:func:`append_observation`),
a literal find/replace (:func:`replace_once`) and frontmatter stamps
(:func:`set_fields`).  Every edit keeps the rest of the file byte for byte
(line endings, BOM, key order, quoting) so that the merge of docs/architecture.md §5 sees
only the lines that really changed.  Errors are :class:`MemoryToolError`
with a sentence meant for the caller (an agent or a person).
"""
from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..merge.text import BOM, line_content, split_lines
from ..names import MAX_NAME_BYTES
from .format import MemoryParseError, load_yaml, parse_memory
from .index import FULLWIDTH

__all__ = ["MemoryToolError", "entity_filename", "slugify", "make_permalink", "render_entity",
           "observation_line", "relation_line", "append_observation", "replace_once", "set_fields",
           "yaml_scalar", "journal_text"]

_DATE_PREFIX = re.compile(r"^\d{4}-\d{2}-\d{2}")


class MemoryToolError(ValueError):
    """A memory tool call cannot be done; ``str(exc)`` is the sentence to show."""


def entity_filename(title: str) -> str:
    """File name of an entity: the title with ``/ : * ? " < > |`` as full-width forms, plus ``.md``.

    :raises MemoryToolError: empty title, a line break, or a name over 255 bytes.
    """
    clean = title.strip()
    if not clean:
        raise MemoryToolError("the title is empty; give the entity a short title")
    if "\n" in clean or "\r" in clean:
        raise MemoryToolError("the title must be one line")
    name = "".join(FULLWIDTH.get(c, c) for c in clean) + ".md"
    if name.startswith("."):
        name = "．" + name[1:]  # a leading dot would make it a hidden file
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise MemoryToolError(f"the title is too long for a file name ({len(name.encode('utf-8'))} bytes with "
                              "'.md'; at most 255): shorten it")
    return name


def slugify(title: str, fallback: str) -> str:
    """The readable part of a permalink: lowercase ASCII words joined by ``-`` (≤ 40 chars)."""
    words = re.findall(r"[a-z0-9]+", title.lower())
    slug = "-".join(words)[:40].strip("-")
    return slug or re.sub(r"[^a-z0-9]+", "-", fallback.lower()).strip("-") or "note"


def make_permalink(title: str, kind: str, taken: Callable[[str], bool]) -> str:
    """``slug-hash``: :func:`slugify` plus the first 4 hex digits of sha1(title),
    longer (6, 8, … 40) while ``taken(permalink)`` says it is in use."""
    slug = slugify(title, kind)
    digest = hashlib.sha1(title.strip().encode("utf-8")).hexdigest()
    for n in (4, 6, 8, 12, 40):
        candidate = f"{slug}-{digest[:n]}"
        if not taken(candidate):
            return candidate
    raise MemoryToolError(f"no free permalink for {title!r}")


def yaml_scalar(value: Any) -> str:
    """``value`` as a one-line YAML scalar: plain when YAML reads it back as the
    same string, else double-quoted."""
    text = str(value)
    if text and "\n" not in text and text == text.strip():
        try:
            if load_yaml(f"k: {text}\n") == {"k": text}:
                return text
        except Exception:  # noqa: BLE001, S110 - any YAML error means: quote it
            pass
    return json.dumps(text, ensure_ascii=False)


def _one_line(value: Any, what: str) -> str:
    if not isinstance(value, str):
        raise MemoryToolError(f"{what} must be text")
    text = value.strip()
    if "\n" in text or "\r" in text:
        raise MemoryToolError(f"{what} must be one line (one fact per observation)")
    return text


def _tag(tag: Any) -> str:
    text = _one_line(str(tag) if isinstance(tag, int) else tag, "a tag").lstrip("#")
    text = re.sub(r"\s+", "_", text)
    if not text or re.search(r"[#()\[\]]", text):
        raise MemoryToolError(f"the tag {tag!r} cannot be written (no spaces, #, brackets or parentheses)")
    return text


def observation_line(category: Any, text: Any, tags: Sequence[Any] | None = None, context: Any = None) -> str:
    """``- [category] text #tag (context)`` (no line ending).

    :raises MemoryToolError: empty or multi-line parts, brackets in the category.
    """
    cat = _one_line(category, "the category")
    if not cat or re.search(r"[\[\]]", cat) or cat in ("x", "X"):
        raise MemoryToolError(f"the category {category!r} cannot be used (one word, no brackets, not 'x')")
    body = _one_line(text, "the observation text")
    if not body:
        raise MemoryToolError("the observation text is empty")
    for tag in tags or ():
        t = _tag(tag)
        if not re.search(rf"(?<!\S)#{re.escape(t)}(?!\S)", body):
            body += f" #{t}"
    if context is not None and str(context).strip():
        ctx = _one_line(context, "the context")
        if "(" in ctx or ")" in ctx:
            raise MemoryToolError("the context cannot contain parentheses")
        body += f" ({ctx})"
    return f"- [{cat}] {body}"


def relation_line(rel: Any, target: Any, context: Any = None) -> str:
    """``- rel [[target]] (context)``; a multi-word relation type is quoted.

    :raises MemoryToolError: empty parts, brackets or quotes where they break the line.
    """
    kind = _one_line(rel, "the relation type")
    goal = _one_line(target, "the relation target")
    if not kind or '"' in kind or re.search(r"[\[\]]", kind):
        raise MemoryToolError(f"the relation type {rel!r} cannot be used")
    if not goal or re.search(r"[\[\]|]", goal):
        raise MemoryToolError(f"the relation target {target!r} cannot be used (a title, no brackets)")
    if re.search(r"\s", kind):
        kind = f'"{kind}"'
    line = f"- {kind} [[{goal}]]"
    if context is not None and str(context).strip():
        ctx = _one_line(context, "the relation context")
        line += f" ({ctx})"
    return line


def render_entity(*, title: str, permalink: str, type_: str, tags: Sequence[str], created: datetime,
                  origin: str, sensitivity: str, observations: Sequence[Mapping[str, Any]],
                  relations: Sequence[Mapping[str, Any]] = ()) -> bytes:
    """A new entity file (LF endings, UTF-8, no BOM).

    :param observations: ``{"category", "text", "tags"?, "context"?}`` each.
    :param relations: ``{"rel", "target", "context"?}`` each.
    :raises MemoryToolError: a part cannot be written, or the result would not
        read back as written.
    """
    when = created.isoformat(timespec="seconds")
    obs_lines = [observation_line(o.get("category"), o.get("text"), o.get("tags"), o.get("context"))
                 for o in observations]
    rel_lines = [relation_line(r.get("rel"), r.get("target"), r.get("context")) for r in relations]
    lines = ["---", f"title: {yaml_scalar(title.strip())}", f"type: {yaml_scalar(type_)}",
             f"permalink: {permalink}", "tags: [" + ", ".join(yaml_scalar(_tag(t)) for t in tags) + "]",
             f"created: {when}", f"modified: {when}", f"origin: {yaml_scalar(origin)}",
             f"sensitivity: {sensitivity}", "---", "", f"# {title.strip()}", "", "## Observations", *obs_lines]
    if rel_lines:
        lines += ["", "## Relations", *rel_lines]
    data = ("\n".join(lines) + "\n").encode("utf-8")
    doc = parse_memory(data)
    fm = doc.frontmatter.data if doc.frontmatter else {}
    if str(fm.get("title")) != title.strip() or len(doc.observations) != len(obs_lines) \
            or len(doc.relations) != len(rel_lines):
        raise MemoryToolError("the entity would not read back as written; simplify the title or observations")
    return data


def _decode(data: bytes) -> tuple[bool, list[str]]:
    text = data.decode("utf-8")
    bom = text.startswith(BOM)
    return bom, split_lines(text[1:] if bom else text)


def _encode(bom: bool, lines: Sequence[str]) -> bytes:
    return ((BOM if bom else "") + "".join(lines)).encode("utf-8")


def append_observation(data: bytes, line: str) -> tuple[bytes, bool]:
    """Add one observation line at the end of the ``## Observations`` section
    (a new section at the end of the file when there is none).

    :param line: from :func:`observation_line` (no line ending).
    :returns: ``(new bytes, added)``; ``added`` is False when exactly this
        line is already there (the bytes are unchanged then).
    :raises MemoryToolError: the file does not parse.
    """
    try:
        doc = parse_memory(data)
    except MemoryParseError as exc:
        raise MemoryToolError(f"the file does not parse ({exc.reason}); fix it by hand first") from None
    if any(o.line.strip() == line for o in doc.observations):
        return data, False
    bom, lines = _decode(data)
    eol = doc.eol
    section = next((s for s in doc.sections if s.union_name == "Observations"), None)
    if section is not None:
        last = max((i for i, x in enumerate(section.lines) if line_content(x).strip()), default=-1)
        at = section.start + 1 + last + 1
        new = [line + eol]
    else:
        at = len(lines)
        new = ([eol] if lines and line_content(lines[-1]).strip() else []) + ["## Observations" + eol, line + eol]
        if not lines:
            new = new[1:] if new and new[0] == eol else new
    if at > 0 and at == len(lines) and line_content(lines[-1]) == lines[-1]:
        lines[-1] += eol  # the last line had no ending
    lines[at:at] = new
    return _encode(bom, lines), True


def replace_once(data: bytes, find: str, replace: str) -> bytes:
    """Replace the one occurrence of ``find`` (literal text).

    :raises MemoryToolError: ``find`` is empty, absent, or occurs more than once; the file is not UTF-8.
    """
    if not find:
        raise MemoryToolError("`find` is empty; give the exact text to replace")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MemoryToolError(f"the file is not UTF-8 text (byte {exc.start:,} cannot be read); nothing was "
                              "changed: save it as UTF-8 in an editor first") from None
    count = text.count(find)
    if count == 0:
        raise MemoryToolError("`find` does not occur in the entity; read it first and copy the text exactly")
    if count > 1:
        raise MemoryToolError(f"`find` occurs {count} times; include more of the surrounding text so it "
                              "matches once")
    return text.replace(find, replace, 1).encode("utf-8")


def set_fields(data: bytes, values: Mapping[str, str]) -> bytes:
    """Set top-level frontmatter fields to already-rendered one-line values.

    A field that exists is replaced in place (its continuation lines too); a
    new one goes before the closing ``---``.  A file without frontmatter, or
    with one this parser cannot split, is returned unchanged.
    """
    try:
        doc = parse_memory(data)
    except MemoryParseError:
        return data
    fm = doc.frontmatter
    if fm is None or not fm.splittable:
        return data
    bom, lines = _decode(data)
    eol = doc.eol
    out = [fm.open_line, *fm.preamble]
    pending = dict(values)
    for field in fm.fields:
        if field.key in pending:
            out.append(f"{field.key}: {pending.pop(field.key)}{eol}")
        else:
            out.extend(field.lines)
    out.extend(f"{k}: {v}{eol}" for k, v in pending.items())
    out.append(fm.close_line)
    n = len(fm.lines)
    return _encode(bom, out + lines[n:])


def journal_text(text: str, when: datetime) -> str:
    """Journal lines start with ``YYYY-MM-DD HH:MM``; add it when the text has no date."""
    return text if _DATE_PREFIX.match(text.strip()) else f"{when:%Y-%m-%d %H:%M} {text.strip()}"
