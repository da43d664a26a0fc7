"""Line-based three-way merge (diff3) for text files.

This module owns the plain text merge the engine uses for every text file that
is not a memory entity file, and the line-level diff3 core that
:mod:`ohsync.engine.memory.merge` uses for free body text.  Lines are compared
by their content without the line ending, so a side that only switched between
LF and CRLF does not conflict with an edit on the other side; the merged output
uses *ours'* line-ending style and BOM, and keeps ours' exact bytes for every
line it takes from ours.  Conflicts are reported, never written: the caller
decides what to do with a result that is not clean (docs/architecture.md §5).
"""
from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import merge3

__all__ = [
    "BOM",
    "Diff3Outcome",
    "MergeResult",
    "decode_text",
    "describe_lines",
    "detect_eol",
    "diff3_lines",
    "has_final_newline",
    "join_lines",
    "line_content",
    "merge_final_newline",
    "merge_text",
    "split_lines",
    "trivial_merge",
    "with_eol",
]

BOM = "\ufeff"
"""The byte order mark as a decoded character (``EF BB BF`` in UTF-8)."""

Resolver = Callable[[Sequence[str], Sequence[str], Sequence[str]], "list[str] | None"]


@dataclass(frozen=True)
class MergeResult:
    """Outcome of a three-way merge.

    :ivar content: the merged bytes, or ``None`` when the inputs did not merge
        cleanly (then the engine keeps ours and archives theirs as a conflict copy).
    :ivar conflicts: human-readable descriptions of what could not merge, for
        example ``"frontmatter field 'sensitivity'"`` or ``"lines 12-14"``;
        empty for a clean merge.
    :ivar damaged: for memory files only: why a side could not be parsed
        (``content`` is then ``None``); ``None`` otherwise.
    :ivar partial: for memory files with conflicts only: the bytes the live
        file should hold, i.e. every part that merged plus *ours'* version of
        each conflicting part (theirs' version goes into the conflict copy);
        ``None`` when there is no such file (clean, damaged, or the partial
        result would not read back).
    :ivar details: one sentence per conflicting part, saying what the live
        file kept and what only the conflict copy holds (for the conflict
        record); empty for a clean merge.
    """

    content: bytes | None
    conflicts: list[str] = field(default_factory=list)
    damaged: str | None = None
    partial: bytes | None = None
    details: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        """``True`` when the merge produced content with no conflict and no damage."""
        return self.content is not None and not self.conflicts and self.damaged is None


@dataclass(frozen=True)
class Diff3Outcome:
    """Result of :func:`diff3_lines`.

    :ivar lines: the merged lines (each with its line ending, if any); only
        meaningful when ``conflicts`` is empty.
    :ivar conflicts: ``(start, end)`` index ranges into *ours* (end exclusive)
        of the regions both sides changed differently.
    """

    lines: list[str]
    conflicts: list[tuple[int, int]]


class _Matcher(difflib.SequenceMatcher):  # type: ignore[type-arg]
    """``difflib.SequenceMatcher`` without the "popular line" heuristic.

    With ``autojunk`` on, lines that occur often in files of 200+ lines (blank
    lines, ``---``) could never anchor a match, which makes diff3 report
    conflicts that are not there.
    """

    def __init__(self, isjunk: object = None, a: Sequence[str] = (), b: Sequence[str] = (),
                 autojunk: bool = False) -> None:
        super().__init__(None, a, b, autojunk=False)


def trivial_merge(base: bytes, ours: bytes, theirs: bytes) -> bytes | None:
    """Apply the identities that need no merge at all.

    ``merge(b, x, x) == x``, ``merge(b, b, x) == x`` and ``merge(b, x, b) == x``.

    :returns: the result when one identity applies, else ``None``.
    """
    if ours == theirs or base == theirs:
        return ours
    if base == ours:
        return theirs
    return None


def split_lines(text: str) -> list[str]:
    """Split *text* after every ``"\\n"``, keeping the endings.

    Only ``"\\n"`` ends a line (a lone ``"\\r"``, form feed or U+2028 stays
    inside its line).  The last element has no ending when *text* does not end
    with ``"\\n"``; ``""`` gives ``[]``.
    """
    if not text:
        return []
    parts = text.split("\n")
    lines = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        lines.append(parts[-1])
    return lines


def line_content(line: str) -> str:
    """Return *line* without its line ending (``"\\r\\n"`` or ``"\\n"``)."""
    if line.endswith("\r\n"):
        return line[:-2]
    if line.endswith("\n"):
        return line[:-1]
    return line


def with_eol(line: str, eol: str) -> str:
    """Return *line* with its ending replaced by *eol*; a line without an ending stays without."""
    if not line.endswith("\n"):
        return line
    return line_content(line) + eol


def detect_eol(lines: Sequence[str]) -> str | None:
    """Return the dominant line ending of *lines* (``"\\r\\n"`` or ``"\\n"``), ``None`` if no line has one.

    Ties go to ``"\\n"``.
    """
    crlf = sum(1 for line in lines if line.endswith("\r\n"))
    lf = sum(1 for line in lines if line.endswith("\n")) - crlf
    if not crlf and not lf:
        return None
    return "\r\n" if crlf > lf else "\n"


def has_final_newline(lines: Sequence[str]) -> bool:
    """``True`` when the last line ends with a newline, or there are no lines."""
    return not lines or lines[-1].endswith("\n")


def merge_final_newline(base: Sequence[str], ours: Sequence[str], theirs: Sequence[str]) -> bool:
    """Three-way merge of "the file ends with a newline": ours wins if it changed it, else theirs."""
    b, o, t = has_final_newline(base), has_final_newline(ours), has_final_newline(theirs)
    return o if o != b else t


def join_lines(lines: Sequence[str], eol: str, final_newline: bool) -> str:
    """Join merged *lines* into text.

    A line without an ending that is not the last one (ours' old last line
    followed by lines from theirs) gets *eol*; the last line ends with a
    newline exactly when *final_newline* is true.
    """
    out = [line if line.endswith("\n") else line + eol for line in lines]
    if out and not final_newline:
        out[-1] = line_content(out[-1])
    return "".join(out)


def diff3_lines(base: Sequence[str], ours: Sequence[str], theirs: Sequence[str], *,
                eol: str = "\n", resolve: Resolver | None = None,
                keep: Resolver | None = None) -> Diff3Outcome:
    """Merge three line lists with diff3 (``merge3``).

    Lines are compared without their endings.  Regions unchanged or changed
    only by ours keep ours' lines byte for byte; lines taken from theirs get
    *eol*.  A region both sides changed differently is passed to *resolve*
    (when given) as ``(base_lines, ours_lines, theirs_lines)``; it returns the
    lines to use, or ``None`` to leave it a conflict.  A region left a
    conflict is still recorded in ``conflicts``; when *keep* is given, the
    lines it returns for that region go into ``lines`` (so ``lines`` is a
    usable partial merge), else the region contributes no lines.

    :param base: common ancestor lines (each with its ending, see :func:`split_lines`).
    :param ours: our lines.
    :param theirs: their lines.
    :param eol: line ending for lines taken from theirs.
    :param resolve: optional conflict resolver.
    :param keep: optional filler for regions that stay conflicts.
    :returns: the merged lines and the conflicting regions as ranges into *ours*.
    """
    kb = [line_content(x) for x in base]
    ko = [line_content(x) for x in ours]
    kt = [line_content(x) for x in theirs]
    m3 = merge3.Merge3(kb, ko, kt, sequence_matcher=_Matcher)  # type: ignore[arg-type]
    out: list[str] = []
    conflicts: list[tuple[int, int]] = []
    iz = ia = ib = 0
    for zmatch, zend, amatch, aend, bmatch, bend in m3.find_sync_regions():
        if ia < amatch or ib < bmatch or iz < zmatch:
            if ko[ia:amatch] == kt[ib:bmatch] or kt[ib:bmatch] == kb[iz:zmatch]:
                out.extend(ours[ia:amatch])
            elif ko[ia:amatch] == kb[iz:zmatch]:
                out.extend(with_eol(x, eol) for x in theirs[ib:bmatch])
            else:
                resolved = resolve(base[iz:zmatch], ours[ia:amatch], theirs[ib:bmatch]) if resolve else None
                if resolved is None:
                    conflicts.append((ia, amatch))
                    if keep is not None:
                        out.extend(keep(base[iz:zmatch], ours[ia:amatch], theirs[ib:bmatch]) or [])
                else:
                    out.extend(resolved)
        out.extend(ours[amatch:aend])
        iz, ia, ib = zend, aend, bend
    return Diff3Outcome(out, conflicts)


def describe_lines(start: int, end: int) -> str:
    """Describe the 0-based, end-exclusive range ``[start, end)`` of ours as 1-based line numbers."""
    if end <= start:
        return f"lines after line {start}" if start else "lines at the start"
    if end - start == 1:
        return f"line {start + 1}"
    return f"lines {start + 1}-{end}"


def decode_text(data: bytes) -> tuple[bool, str]:
    """Decode UTF-8 *data*, splitting off a leading BOM.

    :returns: ``(has_bom, text)``.
    :raises UnicodeDecodeError: when *data* is not valid UTF-8.
    """
    text = data.decode("utf-8")
    if text.startswith(BOM):
        return True, text[1:]
    return False, text


def merge_text(base: bytes, ours: bytes, theirs: bytes, *, keep_both_insertions: bool = False) -> MergeResult:
    """Three-way merge of UTF-8 text by lines (diff3).

    The identities ``merge(b, x, x) == x``, ``merge(b, b, x) == x`` and
    ``merge(b, x, b) == x`` are checked first, on raw bytes, for any input.
    Otherwise all three must be valid UTF-8.  *base* may be ``b""`` (a file
    created on both sides).  The output keeps ours' BOM, ours' dominant line
    ending for lines taken from theirs, and ours' bytes for everything else;
    whether it ends with a newline is merged three-way.

    :param keep_both_insertions: lines inserted by both sides at the same
        place (base empty there, e.g. two appends at the end) keep ours then
        theirs instead of conflicting; used for files that must take
        concurrent appends but cannot be parsed.
    :returns: a clean :class:`MergeResult` with the merged bytes, or one with
        ``content=None`` and ``conflicts`` such as ``["lines 12-14"]`` (line
        numbers in ours) or ``["theirs is not valid UTF-8 text"]``.
    """
    trivial = trivial_merge(base, ours, theirs)
    if trivial is not None:
        return MergeResult(trivial, [])
    decoded: dict[str, tuple[bool, str]] = {}
    bad = []
    for name, data in (("base", base), ("ours", ours), ("theirs", theirs)):
        try:
            decoded[name] = decode_text(data)
        except UnicodeDecodeError:
            bad.append(f"{name} is not valid UTF-8 text")
    if bad:
        return MergeResult(None, bad)
    lb, lo, lt = (split_lines(decoded[n][1]) for n in ("base", "ours", "theirs"))
    eol = detect_eol(lo) or detect_eol(lt) or detect_eol(lb) or "\n"
    def both_insertions(b: Sequence[str], o: Sequence[str], t: Sequence[str]) -> list[str] | None:
        return None if b else list(o) + [with_eol(x, eol) for x in t]

    outcome = diff3_lines(lb, lo, lt, eol=eol, resolve=both_insertions if keep_both_insertions else None)
    if outcome.conflicts:
        return MergeResult(None, [describe_lines(s, e) for s, e in outcome.conflicts])
    text = join_lines(outcome.lines, eol, merge_final_newline(lb, lo, lt))
    if decoded["ours"][0]:
        text = BOM + text
    return MergeResult(text.encode("utf-8"), [])
