"""Memory-aware three-way merge for memory entity files (docs/architecture.md §5).

This module owns how two concurrent edits of one memory file become one:

* the identities ``merge(b, x, x) == x``, ``merge(b, b, x) == x`` and
  ``merge(b, x, b) == x`` are applied first, on raw bytes, for any input;
* a side that does not parse (:mod:`ohsync.engine.memory.format`) makes the
  result *damaged*: nothing is written;
* frontmatter merges field by field (:mod:`ohsync.engine.memory.frontmatter`):
  a one-sided change wins, both sides changing a field to different values
  is a conflict, except ``modified`` (the later timestamp wins), ``origin``
  (follows the later ``modified``) and ``tags`` (three-way set merge);
* ``## Observations`` and ``## Relations`` sections merge as a union: an entry
  added on either side is kept once, an entry removed on one side stays
  removed; order is base order, then ours' additions, then theirs';
* everything else in the body merges with diff3; in journal months
  (``journal/YYYY-MM.md``, append-only) overlapping edits are unioned too,
  so concurrent appends always merge.

The merge goes section by section: when one part conflicts (a field, a
body hunk), the result still carries a ``partial`` merge in which every other
part merged, each conflicting part holds ours' version, and every
observation and relation of both sides is present; the caller keeps it live
and archives theirs as the conflict copy.

Untouched bytes stay identical: the output reuses ours' lines, BOM and line
ending style; lines taken from theirs get ours' line ending.
"""
from __future__ import annotations

import re
from collections.abc import Sequence

from ..merge.text import (
    BOM,
    MergeResult,
    describe_lines,
    detect_eol,
    diff3_lines,
    join_lines,
    line_content,
    merge_final_newline,
    merge_text,
    trivial_merge,
    with_eol,
)
from .format import MemoryDoc, MemoryParseError, code_block_ids, parse_memory, parse_observation, parse_relation
from .frontmatter import merge_frontmatter

__all__ = ["is_journal_file", "is_memory_file", "merge_memory", "union_merge_lines"]

_JOURNAL_RE = re.compile(r"^journal/\d{4}-\d{2}\.md$")


def is_memory_file(rel_path: str) -> bool:
    """Tell whether a library path holds a memory entity file.

    :param rel_path: POSIX path relative to the library root, no leading slash.
    :returns: ``True`` for ``*.md`` outside the top-level ``Files/`` and ``.conflict/`` folders.
    """
    parts = rel_path.lstrip("/").split("/")
    return parts[-1].lower().endswith(".md") and len(parts[-1]) > 3 \
        and parts[0] not in ("Files", ".conflict")


def is_journal_file(rel_path: str) -> bool:
    """Tell whether *rel_path* is an append-only journal month (``journal/YYYY-MM.md``)."""
    return bool(_JOURNAL_RE.match(rel_path.lstrip("/")))


# --------------------------------------------------------------------------- union

def _keys(lines: Sequence[str]) -> list[str]:
    return [line_content(x) for x in lines]


def _is_structured(lines: Sequence[str]) -> bool:
    """``True`` when lines hold multi-line structure (indented continuation lines or code fences)."""
    return any(text[:1] in (" ", "\t") and text.strip() for text in _keys(lines)) \
        or any(code_block_ids(list(lines)))


def _union(base: Sequence[str], ours: Sequence[str], theirs: Sequence[str], eol: str) -> list[str]:
    """Per-line union: keep a line on all three sides or added on either; base, ours, theirs order.

    Lines are keyed by their text without ending and their occurrence number,
    so a repeated line (a second blank line) is a line of its own.
    """
    def keyed(lines: Sequence[str]) -> list[tuple[tuple[str, int], str]]:
        seen: dict[str, int] = {}
        out = []
        for line in lines:
            k = line_content(line)
            seen[k] = seen.get(k, 0) + 1
            out.append(((k, seen[k]), line))
        return out

    kb, ko, kt = keyed(base), keyed(ours), keyed(theirs)
    bset, oset, tset = {k for k, _ in kb}, {k for k, _ in ko}, {k for k, _ in kt}
    omap = dict(ko)
    out = [omap[k] for k, _ in kb if k in oset and k in tset]
    out += [x for k, x in ko if k not in bset]
    out += [with_eol(x, eol) for k, x in kt if k not in bset and k not in oset]
    return out


def _is_entry(text: str) -> bool:
    """``True`` for an observation or relation line (its text without ending)."""
    return parse_observation(text) is not None or parse_relation(text) is not None


def _split_blank_edges(lines: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """Split into (leading blank lines, middle, trailing blank lines); all-blank goes to trailing."""
    end = len(lines)
    while end > 0 and not lines[end - 1].strip():
        end -= 1
    start = 0
    while start < end and not lines[start].strip():
        start += 1
    return list(lines[:start]), list(lines[start:end]), list(lines[end:])


def _pick(base: Sequence[str], ours: Sequence[str], theirs: Sequence[str], eol: str) -> list[str]:
    """Three-way pick of a whole run of lines: ours if it changed it, else theirs."""
    if _keys(ours) == _keys(base) and _keys(theirs) != _keys(ours):
        return [with_eol(x, eol) for x in theirs]
    return list(ours)


def union_merge_lines(base: Sequence[str], ours: Sequence[str], theirs: Sequence[str], *,
                      eol: str = "\n", journal: bool = False) -> tuple[list[str], list[tuple[int, int]]]:
    """Merge the content lines of an Observations/Relations section.

    Normally a per-line union: a line is kept if it is on all three sides or
    was added on either side, so a line removed on one side stays removed and
    a line added on both sides is kept once; order is base order, then ours'
    additions, then theirs'.  Leading and trailing blank lines are picked
    three-way as a block.  When a side holds multi-line structure (indented
    continuation lines or a code fence), reordering lines could tear it
    apart, so such a section merges with diff3 instead (lines inserted at the
    same place on both sides are kept, ours first; the same lines changed
    differently conflict), except in journals, which are always unioned.

    :param base: section lines of the base (endings included), ``[]`` if absent.
    :param ours: section lines of ours.
    :param theirs: section lines of theirs.
    :param eol: line ending for lines taken from theirs.
    :param journal: union even structured sections.
    :returns: (merged lines, conflicting ranges in *ours*).  With conflicts
        the lines are a partial merge: each conflicting region holds ours'
        lines followed by the lines theirs added there, so no addition is
        lost.  Ours' lines keep their exact text.
    """
    if not journal and any(_is_structured(x) for x in (base, ours, theirs)):
        def insertions(b: Sequence[str], o: Sequence[str], t: Sequence[str]) -> list[str] | None:
            return None if b else [*o, *(with_eol(x, eol) for x in t)]

        def keep_additions(b: Sequence[str], o: Sequence[str], t: Sequence[str]) -> list[str]:
            # Ours' version of the region, then every line theirs added to it.
            known = set(_keys(b)) | set(_keys(o))
            return [*o, *(with_eol(x, eol) for x in t if line_content(x) not in known)]

        outcome = diff3_lines(base, ours, theirs, eol=eol, resolve=insertions, keep=keep_additions)
        return outcome.lines, outcome.conflicts
    bl, bm, bt = _split_blank_edges(base)
    ol, om, ot = _split_blank_edges(ours)
    tl, tm, tt = _split_blank_edges(theirs)
    return _pick(bl, ol, tl, eol) + _union(bm, om, tm, eol) + _pick(bt, ot, tt, eol), []


# ---------------------------------------------------------------------------- body

def _skeleton(doc: MemoryDoc) -> tuple[list[str], dict[str, list[str]], list[int]]:
    """Body lines with each union section's content replaced by one placeholder line.

    :returns: (skeleton lines, placeholder -> section content lines, 1-based file line per skeleton line).
    """
    skel: list[str] = []
    contents: dict[str, list[str]] = {}
    numbers: list[int] = []
    seen: dict[str, int] = {}
    for s in doc.sections:
        first = s.start + 1
        if s.heading is not None:
            skel.append(s.heading)
            numbers.append(first)
            first += 1
        name = s.union_name
        if name is None:
            skel.extend(s.lines)
            numbers.extend(range(first, first + len(s.lines)))
            continue
        n = seen.get(name, 0)
        seen[name] = n + 1
        key = f"\x00{name}:{n}\x00"
        skel.append(key)
        contents[key] = list(s.lines)
        numbers.append(first)
    return skel, contents, numbers


def _merge_body(base: MemoryDoc, ours: MemoryDoc, theirs: MemoryDoc, eol: str,
                journal: bool) -> tuple[list[str], list[str], list[str], dict[str, list[str]]]:
    """Merge the bodies: diff3 on the skeleton, union inside union sections.

    With conflicts the lines are still a partial merge that keeps every
    addition: a conflicting hunk holds ours' lines and the observation and
    relation lines theirs wrote there (theirs' version goes to the conflict
    copy); a union section that both sides moved appears once;
    one removed on one side and changed on the other stays (at the end).

    :returns: (merged body lines, conflicts, merged skeleton, placeholder -> merged section lines).
    """
    bs, bc, _ = _skeleton(base)
    os_, oc, onum = _skeleton(ours)
    ts, tc, _ = _skeleton(theirs)
    headings = {k: s[s.index(k) - 1] for s in (ts, bs, os_) for k in s
                if k in {*bc, *oc, *tc} and s.index(k) > 0}

    def only_sections(lines: Sequence[str]) -> bool:
        return all(not x.strip() or x in oc or x in tc or (i + 1 < len(lines) and lines[i + 1] in {*oc, *tc})
                   for i, x in enumerate(lines))

    def resolve(b: Sequence[str], o: Sequence[str], t: Sequence[str]) -> list[str] | None:
        if journal:
            return _union(b, o, t, eol)
        if not b and only_sections(o) and only_sections(t):
            # Both sides added union sections at one place (an empty note
            # getting its first entries): the sections merge, nothing conflicts.
            return keep(b, o, t)
        return None

    def keep(b: Sequence[str], o: Sequence[str], t: Sequence[str]) -> list[str]:
        # Ours' hunk, plus any union section theirs' hunk holds (with its
        # heading), so the section's entries stay live; and any observation
        # or relation line theirs wrote there (one outside the sections, both
        # sides rewording it): entries are a union wherever they sit.
        out = list(o)
        for x in t:
            if (x in tc or x in bc) and x not in o and x in headings:
                out += [with_eol(headings[x], eol), x]
        known = set(_keys(b)) | set(_keys(o))
        out += [with_eol(x, eol) for x in t if line_content(x) not in known and _is_entry(line_content(x))]
        return out

    outcome = diff3_lines(bs, os_, ts, eol=eol, resolve=resolve, keep=keep)
    conflicts = []
    for start, end in outcome.conflicts:
        lo = onum[start] if start < len(onum) else (onum[-1] + 1 if onum else 1)
        hi = onum[end - 1] if end > start else lo - 1
        conflicts.append(describe_lines(lo - 1, hi))
    skeleton: list[str] = []
    for x in outcome.lines:
        if (x in bc or x in oc or x in tc) and x in skeleton:
            continue  # a section both sides placed differently: keep the first place
        skeleton.append(x)
    placeholders = [x for x in outcome.lines if x in bc or x in oc or x in tc]
    for key in sorted({*bc, *oc, *tc}):
        name = key.strip("\x00").split(":")[0]
        count = placeholders.count(key)
        if count > 1:
            conflicts.append(f"section '{name}' added on both sides in different places")
        elif count == 0 and any(_keys(c.get(key, [])) != _keys(bc.get(key, [])) for c in (oc, tc)):
            conflicts.append(f"section '{name}' removed on one side and changed on the other")
            # A modification beats a deletion: the section comes back at the end.
            if key in headings:
                skeleton += [with_eol(headings[key], eol), key]  # join_lines ends the line before
    lines: list[str] = []
    merged: dict[str, list[str]] = {}
    for x in skeleton:
        if x not in bc and x not in oc and x not in tc:
            lines.append(x)
            continue
        merged[x], ranges = union_merge_lines(bc.get(x, []), oc.get(x, []), tc.get(x, []),
                                              eol=eol, journal=journal)
        lines.extend(merged[x])
        first = onum[os_.index(x)] - 1 if x in oc else 0
        conflicts.extend(f"section '{x.strip(chr(0)).split(':')[0]}' {describe_lines(first + s, first + e)}"
                         for s, e in ranges)
    return lines, conflicts, skeleton, merged


# --------------------------------------------------------------------------- entry

def _parse_sides(base: bytes, ours: bytes, theirs: bytes) -> tuple[dict[str, MemoryDoc], dict[str, str]]:
    docs: dict[str, MemoryDoc] = {}
    errors: dict[str, str] = {}
    for name, data in (("base", base), ("ours", ours), ("theirs", theirs)):
        try:
            docs[name] = parse_memory(data)
        except MemoryParseError as exc:
            errors[name] = exc.reason
    return docs, errors


def merge_memory(base: bytes, ours: bytes, theirs: bytes, *, rel_path: str = "") -> MergeResult:
    """Three-way merge of a memory entity file.

    :param base: the common ancestor's bytes (``b""`` when the file is new on both sides).
    :param ours: the local bytes.
    :param theirs: the remote bytes.
    :param rel_path: library-relative POSIX path; ``journal/YYYY-MM.md`` turns on
        append-only merging, so overlapping appends are unioned instead of conflicting.
    :returns: a :class:`MergeResult`.  Clean: ``content`` holds the merged bytes
        (ours' BOM and line endings).  A true conflict: ``content=None``,
        ``conflicts`` such as ``["frontmatter field 'sensitivity'", "lines 12-14"]``,
        ``details`` (a sentence per conflict) and ``partial``: the live file
        with every part that merged and ours' version of each conflicting part
        (every observation and relation of both sides included).
        Ours or theirs unparsable (and the identities do not apply):
        ``content=None``, ``conflicts=[]``, ``damaged`` = ``"<side>: <reason>"``.
        Only the base unparsable: falls back to :func:`merge_text`.
    """
    trivial = trivial_merge(base, ours, theirs)
    if trivial is not None:
        return MergeResult(trivial, [])
    docs, errors = _parse_sides(base, ours, theirs)
    side_errors = [f"{n}: {r}" for n, r in errors.items() if n != "base"]
    if side_errors:
        return MergeResult(None, [], damaged="; ".join(side_errors))
    if "base" in errors:
        fallback = merge_text(base, ours, theirs)
        if fallback.content is None:
            return fallback
        try:
            parse_memory(fallback.content)
        except MemoryParseError as exc:
            return MergeResult(None, [f"merged text does not parse: {exc.reason}"])
        return fallback
    b, o, t = docs["base"], docs["ours"], docs["theirs"]
    eol = detect_eol(o.lines) or detect_eol(t.lines) or detect_eol(b.lines) or "\n"
    fm_lines, conflicts, details = merge_frontmatter(b.frontmatter, o.frontmatter, t.frontmatter, eol)
    body_lines, body_conflicts, skeleton, sections = _merge_body(b, o, t, eol, is_journal_file(rel_path))
    conflicts += body_conflicts
    details += [_body_detail(c) for c in body_conflicts]
    text = join_lines(fm_lines + body_lines, eol, merge_final_newline(b.lines, o.lines, t.lines))
    content = ((BOM if o.bom else "") + text).encode("utf-8")
    # Safety valve: never write a file that is damaged or reads differently (for
    # example body lines of theirs that would turn into frontmatter).
    problem = _read_back_problem(content, fm_lines, skeleton, sections)
    if conflicts:
        # Only the conflicting parts are left to the conflict copy: the live
        # file gets everything that merged (when it reads back as merged).
        return MergeResult(None, conflicts, partial=None if problem else content, details=details)
    if problem:
        return MergeResult(None, [problem])
    return MergeResult(content, [])


def _body_detail(conflict: str) -> str:
    """The conflict-record sentence for one body conflict."""
    if conflict.startswith("section "):
        return f"{conflict}: every entry of both sides is kept; the other side's layout is in the conflict copy"
    return f"{conflict}: both sides changed them differently; kept this side's text, the other side's is in " \
           "the conflict copy"


def _read_back_problem(content: bytes, fm_lines: list[str], skeleton: list[str],
                       sections: dict[str, list[str]]) -> str | None:
    """Why merged *content* would not read back with the merged structure (``None``: it does)."""
    try:
        reparsed = parse_memory(content)
    except MemoryParseError as exc:
        return f"merged result does not parse: {exc.reason}"
    def entries(lines: Sequence[str]) -> list[str]:
        # A trailing blank line may go with the final newline; it holds no entry.
        keys = _keys(lines)
        while keys and not keys[-1].strip():
            keys.pop()
        return keys

    rs, rc, _ = _skeleton(reparsed)
    if (reparsed.frontmatter is None) != (not fm_lines) or _keys(rs) != _keys(skeleton) \
            or any(entries(rc.get(k, [])) != entries(v) for k, v in sections.items()):
        return "merged result would not read back with the merged structure"
    return None
