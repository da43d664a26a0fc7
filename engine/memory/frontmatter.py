"""Field-by-field three-way merge of memory frontmatter (docs/architecture.md §5).

A field changed on one side takes that side; both sides changing a field to
different values is a conflict, except ``modified`` (the later timestamp
wins), ``origin`` (the value of the side whose ``modified`` is later: where
the last edit was made) and ``tags`` (three-way set merge).  Even with conflicts the merged
lines hold a deterministic pick for every field (ours' value; theirs' when
ours removed the field, since a modification beats a deletion), so the
caller can keep a partial merge live and leave only the other value to the
conflict copy.  Untouched fields keep their exact bytes and order.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any

import yaml
from .format import Frontmatter, FrontmatterField, load_yaml
from ..merge.text import line_content, with_eol

__all__ = ["merge_frontmatter"]

_FLOW_RE = re.compile(r"^(?P<prefix>[^:]+:[ \t]*)\[(?P<inner>.*)\](?P<comment>[ \t]*(?:#.*)?)$")
_BLOCK_ITEM_RE = re.compile(r"^(?P<prefix>[ \t]*-[ \t]+)(?P<item>.*?)[ \t]*$")
_MISSING = object()


def _keys(lines: Sequence[str]) -> list[str]:
    return [line_content(x) for x in lines]



def _same(a: Any, b: Any) -> bool:
    return type(a) is type(b) and a == b


def _as_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, str):
        try:
            return _as_time(datetime.fromisoformat(value.strip()))
        except ValueError:
            return None
    return None


def _later_is_theirs(ours: Any, theirs: Any) -> bool:
    """``True`` when theirs' ``modified`` is strictly later than ours' (ties keep ours)."""
    to, tt = _as_time(ours), _as_time(theirs)
    if to is not None and tt is not None:
        return tt > to
    return str(theirs) > str(ours)


def _dump_scalar(value: Any) -> str:
    return str(yaml.safe_dump([value], default_flow_style=True, allow_unicode=True,
                              width=1 << 30)).strip()[1:-1]


def _flow_tokens(field: FrontmatterField) -> tuple[re.Match[str], list[str]] | None:
    """The raw item tokens of a one-line flow list field, if they re-read as its value."""
    if len(field.lines) != 1 or not isinstance(field.value, list):
        return None
    m = _FLOW_RE.match(line_content(field.lines[0]))
    if not m:
        return None
    tokens, buf, quote = [], "", ""
    for ch in m.group("inner"):
        if quote:
            buf += ch
            quote = "" if ch == quote else quote
        elif ch in "\"'":
            buf, quote = buf + ch, ch
        elif ch == ",":
            tokens.append(buf.strip())
            buf = ""
        else:
            buf += ch
    if buf.strip():
        tokens.append(buf.strip())
    try:
        if [load_yaml(t) for t in tokens] != field.value:
            return None
    except yaml.YAMLError:
        return None
    return m, tokens


def _block_tokens(field: FrontmatterField) -> tuple[str, list[str]] | None:
    """(item prefix, raw item tokens) of a block-style list field, if it is one."""
    first = line_content(field.lines[0])
    if first.split(":", 1)[1].strip() or not isinstance(field.value, list):
        return None
    items = [m for x in field.lines[1:] if (m := _BLOCK_ITEM_RE.match(line_content(x)))]
    if len(items) != len(field.value) or not items:
        return None
    return items[0].group("prefix"), [m.group("item") for m in items]


def _raw_tokens(field: FrontmatterField | None) -> dict[str, str]:
    if field is None:
        return {}
    flow = _flow_tokens(field)
    tokens = flow[1] if flow else (b[1] if (b := _block_tokens(field)) else None)
    if tokens is None:
        return {}
    return {str(v): t for v, t in zip(field.value, tokens)}


def _as_tag_list(value: Any) -> list[Any] | None:
    items = [] if value is None else value if isinstance(value, list) else [value]
    if any(isinstance(x, (list, dict)) for x in items):
        return None
    return items


def _merge_tags(base: FrontmatterField | None, ours: FrontmatterField, theirs: FrontmatterField,
                eol: str) -> list[str] | None:
    """Three-way set merge of a ``tags`` field, rendered in ours' style; ``None`` if not mergeable."""
    bl = _as_tag_list(base.value if base else None)
    ol, tl = _as_tag_list(ours.value), _as_tag_list(theirs.value)
    if bl is None or ol is None or tl is None:
        return None
    bset, oset, tset = {str(x) for x in bl}, {str(x) for x in ol}, {str(x) for x in tl}
    merged: dict[str, Any] = {}
    for x in ol:
        if str(x) in tset or str(x) not in bset:
            merged.setdefault(str(x), x)
    for x in tl:
        if str(x) not in bset and str(x) not in oset:
            merged.setdefault(str(x), x)
    raw = {**_raw_tokens(base), **_raw_tokens(theirs), **_raw_tokens(ours)}
    tokens = [raw.get(k) or _dump_scalar(v) for k, v in merged.items()]
    block = _block_tokens(ours)
    if block and tokens:
        return [line_content(ours.lines[0]) + eol] + [block[0] + t + eol for t in tokens]
    flow = _flow_tokens(ours)
    prefix, comment = (flow[0].group("prefix"), flow[0].group("comment")) if flow \
        else (ours.key + ": ", "")
    extra = [x for x in ours.lines[1:] if not line_content(x).strip()
             or line_content(x).lstrip().startswith("#")] if flow or not block else []
    return [f"{prefix}[{', '.join(tokens)}]{comment}{eol}", *extra]


def _whole_block(base: Sequence[str], ours: Sequence[str], theirs: Sequence[str], eol: str,
                 what: str) -> tuple[list[str], list[str]]:
    kb, ko, kt = _keys(base), _keys(ours), _keys(theirs)
    if ko == kt or kt == kb:
        return list(ours), []
    if ko == kb:
        return [with_eol(x, eol) for x in theirs], []
    return (list(ours) if ours else [with_eol(x, eol) for x in theirs]), [what]


def _show(value: Any) -> str:
    """A frontmatter value as a person reads it in a sentence."""
    if value is _MISSING:
        return "no value (the field was removed)"
    return repr(_dump_scalar(value)) if not isinstance(value, (list, dict)) else repr(value)


def merge_frontmatter(base: Frontmatter | None, ours: Frontmatter | None, theirs: Frontmatter | None,
                       eol: str) -> tuple[list[str], list[str], list[str]]:
    """Merge frontmatter blocks field by field.

    A field both sides changed differently is a conflict; the lines still
    hold a pick for it (ours' value; theirs' when ours removed the field, as
    a modification beats a deletion), so they are a usable partial merge.

    :returns: (lines, conflicts, details): one detail sentence per conflict.
    """
    if ours is None or theirs is None or (base is not None and not base.splittable) \
            or not ours.splittable or not theirs.splittable:
        lines, conflicts = _whole_block(base.lines if base else [], ours.lines if ours else [],
                                        theirs.lines if theirs else [], eol, "frontmatter")
        details = ["the frontmatter block (it cannot be merged field by field): kept this side's "
                   "block; the other side's is in the conflict copy"] if conflicts else []
        return lines, conflicts, details
    bf = {f.key: f for f in base.fields} if base else {}
    of = {f.key: f for f in ours.fields}
    tf = {f.key: f for f in theirs.fields}
    chosen: dict[str, list[str]] = {}
    conflicts = []
    details = []
    for key in [*of, *(k for k in tf if k not in of), *(k for k in bf if k not in of and k not in tf)]:
        bv = bf[key].value if key in bf else _MISSING
        ov = of[key].value if key in of else _MISSING
        tv = tf[key].value if key in tf else _MISSING
        o_changed, t_changed = not _same(ov, bv), not _same(tv, bv)
        if t_changed and not o_changed:
            if key in tf:
                chosen[key] = [with_eol(x, eol) for x in tf[key].lines]
        elif not t_changed or _same(ov, tv):
            if key in of:
                chosen[key] = list(of[key].lines)
        elif key == "modified" and key in of and key in tf:
            chosen[key] = [with_eol(x, eol) for x in tf[key].lines] if _later_is_theirs(ov, tv) \
                else list(of[key].lines)
        elif key == "origin" and key in of and key in tf and "modified" in of and "modified" in tf:
            # where the entity was last changed: the side with the later edit says
            chosen[key] = [with_eol(x, eol) for x in tf[key].lines] \
                if _later_is_theirs(of["modified"].value, tf["modified"].value) else list(of[key].lines)
        elif key == "tags" and key in of and key in tf \
                and (tags := _merge_tags(bf.get(key), of[key], tf[key], eol)) is not None:
            chosen[key] = tags
        else:
            conflicts.append(f"frontmatter field '{key}'")
            if key in of:
                chosen[key] = list(of[key].lines)
                details.append(f"frontmatter field '{key}': kept {_show(ov)}; the other side's "
                               f"{_show(tv)} is in the conflict copy")
            else:
                chosen[key] = [with_eol(x, eol) for x in tf[key].lines]
                details.append(f"frontmatter field '{key}': removed on this side, changed to {_show(tv)} "
                               "on the other; the change is kept (the conflict copy has it too)")
    order = [k for k in of if k in chosen]
    tkeys = list(tf)
    for i, key in enumerate(tkeys):
        if key in chosen and key not in order:
            prev = next((k for k in reversed(tkeys[:i]) if k in order), None)
            order.insert(order.index(prev) + 1 if prev else 0, key)
    lines = [ours.open_line, *ours.preamble, *(x for k in order for x in chosen[k]), ours.close_line]
    return lines, conflicts, details
