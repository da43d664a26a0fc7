"""Is a memory file damaged?  The check behind ``ohsync damaged`` and status.

A memory file is damaged when :func:`~ohsync.engine.memory.format.parse_memory`
refuses it (not UTF-8, a frontmatter block never closed, frontmatter that is
not a YAML mapping) or when it holds a second frontmatter block right after
the first: a tool that prepended its own block, or two copies pasted
together.  The parser reads such a second block as body text, so merges stay
lossless, but the metadata in it is invisible to every reader that takes the
first block: the person has to join the two.  A damaged file still syncs
byte for byte; it is only reported.
"""

from __future__ import annotations

from .format import MemoryDoc, MemoryParseError, load_yaml, parse_memory
from ..merge.text import line_content

__all__ = ["memory_problem"]


def memory_problem(data: bytes) -> str | None:
    """Why the memory file ``data`` is damaged, or None when it is fine.

    :param data: the file's bytes (an empty file is fine).
    :returns: a short reason (``"a second frontmatter block starts on line 4"``).
    """
    if not data:
        return None
    try:
        doc = parse_memory(data, fields=False)  # the verdict needs the block, not its fields
    except MemoryParseError as exc:
        return str(exc)
    return _second_frontmatter(doc)


def _second_frontmatter(doc: MemoryDoc) -> str | None:
    """A ``---`` block holding a YAML mapping right after the first frontmatter."""
    if doc.frontmatter is None:
        return None
    lines = doc.body_lines
    first = next((i for i, line in enumerate(lines) if line_content(line).strip()), None)
    if first is None or line_content(lines[first]).rstrip() != "---":
        return None
    for j in range(first + 1, len(lines)):
        if line_content(lines[j]).rstrip() in ("---", "..."):
            block = "".join(line_content(line) + "\n" for line in lines[first + 1:j])
            try:
                value = load_yaml(block)
            except Exception:  # noqa: BLE001 - not YAML: a horizontal rule and text, not a block
                return None
            if isinstance(value, dict) and value:
                line_no = len(doc.frontmatter.lines) + first + 1
                return (f"a second frontmatter block starts on line {line_no}; readers see only the first: "
                        "join the two into one block")
            return None
    return None
