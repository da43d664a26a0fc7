"""Side-by-side differences of two text versions (difflib, the standard library's).

:func:`side_by_side` pairs the lines of the live file and the archived copy
as rows a page can draw in two columns, each row marked ``equal``,
``change``, ``delete`` (only on the live side) or ``insert`` (only on the
other side).  Long runs of equal lines are folded to a few lines of context.
"""

from __future__ import annotations

import difflib
from typing import Any

__all__ = ["side_by_side", "merge_prefill", "CONTEXT", "MAX_LINES"]

#: Equal lines kept around each difference.
CONTEXT = 3
#: Most lines of either version compared (a longer file is compared up to there).
MAX_LINES = 20_000


def _row(kind: str, left_no: int | None, left: str | None, right_no: int | None, right: str | None) -> dict[str, Any]:
    return {"kind": kind, "left_no": left_no, "left": left, "right_no": right_no, "right": right}


def side_by_side(live: str, other: str, *, context: int = CONTEXT) -> dict[str, Any]:
    """The rows of a two-column view of ``live`` (left) against ``other`` (right).

    :param context: equal lines kept before and after each difference; the
        rest becomes one ``skip`` row ``{"kind": "skip", "count": n}``.
    :returns: ``{"rows": [...], "changes": n, "truncated": bool}``; a row is
        ``{"kind", "left_no", "left", "right_no", "right"}`` with 1-based
        line numbers (None where that side has no line).
    """
    a_all, b_all = live.splitlines(), other.splitlines()
    a, b = a_all[:MAX_LINES], b_all[:MAX_LINES]
    rows: list[dict[str, Any]] = []
    changes = 0
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            n = i2 - i1
            if n > 2 * context + 1:
                head = context if rows else 0
                tail = context if i2 < len(a) or j2 < len(b) else 0
                for k in range(head):
                    rows.append(_row("equal", i1 + k + 1, a[i1 + k], j1 + k + 1, b[j1 + k]))
                rows.append({"kind": "skip", "count": n - head - tail})
                for k in range(n - tail, n):
                    rows.append(_row("equal", i1 + k + 1, a[i1 + k], j1 + k + 1, b[j1 + k]))
            else:
                for k in range(n):
                    rows.append(_row("equal", i1 + k + 1, a[i1 + k], j1 + k + 1, b[j1 + k]))
            continue
        changes += 1
        left, right = list(range(i1, i2)), list(range(j1, j2))
        for k in range(max(len(left), len(right))):
            li = left[k] if k < len(left) else None
            ri = right[k] if k < len(right) else None
            kind = "change" if li is not None and ri is not None else ("delete" if ri is None else "insert")
            rows.append(_row(kind, None if li is None else li + 1, None if li is None else a[li],
                             None if ri is None else ri + 1, None if ri is None else b[ri]))
    return {"rows": rows, "changes": changes,
            "truncated": len(a_all) > MAX_LINES or len(b_all) > MAX_LINES}


def merge_prefill(live: str, other: str, live_name: str, other_name: str) -> str:
    """The text an editor starts with to merge by hand: lines both versions
    share once, and each difference as both versions between markers
    (``<<<<<<< live …``, ``=======``, ``>>>>>>> other …``, as ``git`` writes them)."""
    a, b = live.splitlines(keepends=True), other.splitlines(keepends=True)
    if a and not a[-1].endswith(("\n", "\r")):
        a[-1] += "\n"
    if b and not b[-1].endswith(("\n", "\r")):
        b[-1] += "\n"
    out: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            out += a[i1:i2]
        else:
            out.append(f"<<<<<<< live ({live_name})\n")
            out += a[i1:i2]
            out.append("=======\n")
            out += b[j1:j2]
            out.append(f">>>>>>> other ({other_name})\n")
    return "".join(out)
