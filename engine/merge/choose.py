"""Which merge applies to a path: memory-aware, plain diff3, or none.

Memory entity files (``*.md`` outside ``Files/``) merge by meaning
(``memory/merge.py``), other text merges line-wise with diff3
(:mod:`.text`), and binaries or text without a usable base do not merge:
the caller archives the remote version as a conflict copy.
"""

from __future__ import annotations

from ..memory.merge import is_memory_file, merge_memory
from .text import MergeResult, merge_text

__all__ = ["MergeResult", "TEXT_LIMIT", "is_text", "merge_versions"]

#: Largest file (bytes) whose base content is kept and that merges as text.
TEXT_LIMIT = 4 * 1024 * 1024


def is_text(data: bytes) -> bool:
    """True for content small enough to merge that is valid UTF-8 without NUL."""
    if len(data) > TEXT_LIMIT or b"\x00" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def merge_versions(rel_path: str, base: bytes | None, ours: bytes, theirs: bytes) -> MergeResult:
    """Three-way merge of one path.

    :param base: the last agreed content; None when none is kept (a file
        new on both sides merges against an empty base).
    :returns: a clean result with the merged bytes, or a result whose
        ``conflicts`` say what could not merge.
    """
    if ours == theirs:
        return MergeResult(ours, [])
    if base is not None and base == theirs:
        return MergeResult(ours, [])
    if base is not None and base == ours:
        return MergeResult(theirs, [])
    if not (is_text(ours) and is_text(theirs) and (base is None or is_text(base))):
        return MergeResult(None, ["binary or non-UTF-8 content"])
    if is_memory_file(rel_path):
        result = merge_memory(base or b"", ours, theirs, rel_path=rel_path)
        if result.damaged is None:
            return result
        # A memory file that does not parse is never re-serialised; its
        # bytes still merge line-wise, and appends on both sides are kept.
        text = merge_text(base or b"", ours, theirs, keep_both_insertions=True)
        return MergeResult(text.content, text.conflicts, damaged=result.damaged)
    return merge_text(base or b"", ours, theirs)
