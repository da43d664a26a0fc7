"""A person's saved edit of a memory entity keeps its recency true.

When a memory entity changed on this computer by someone other than ohsync
(a person in Obsidian or an editor) is about to be pushed, :func:`stamp_edit`
sets its frontmatter ``modified`` to now (in the configured offset) and
``origin`` to this computer's origin, so the memory tools' recency ranking
sees the edit.  Only when the file is stable (unchanged for
``stamp_quiet`` seconds, or its save seen complete by the daemon's watcher:
closed after writing or renamed onto, :meth:`SyncEngine.note_saved`; and
unchanged since the sync plan was made), only for memory
entities (a ``*.md`` outside ``Files/`` whose frontmatter parses and names a
``title`` or ``permalink``), and never when the edit itself changed
``modified``.  ``origin`` is left alone when the server's copy changed too:
two sides changing ``origin`` differently would not merge.  The version the
person saved is copied to the backups before it is rewritten.  Only with
``EngineOptions.stamp_edits`` (config ``[memory] stamp_edits``, on by default).
The stamp never makes a merge conflict with a concurrent remote edit of the
same frontmatter: ``modified`` merges to the later time, and ``origin``
follows the side whose ``modified`` is later
(:mod:`.frontmatter`).
"""
from __future__ import annotations

import logging
import os
import time
from datetime import datetime
from typing import Any

from ..context import MirrorContext
from ..local_lookups import stat_or_none
from ..local_replace import LocalChanged, write_over
from ..localfs import stat_fingerprint
from ..place import local_offset
from ..state import Base
from .edit import set_fields, yaml_scalar
from .format import MemoryParseError, parse_memory
from .index import parse_offset
from .merge import is_memory_file

__all__ = ["stamp_edit"]

log = logging.getLogger(__name__)


def _frontmatter(data: bytes | None) -> dict[str, Any] | None:
    if not data:
        return None
    try:
        doc = parse_memory(data)
    except MemoryParseError:
        return None
    if doc.frontmatter is None or not doc.frontmatter.splittable:
        return None
    return doc.frontmatter.data


def stamp_edit(ctx: MirrorContext, rel: str, fp: tuple[int, int, int] | None, base: Base | None,
               *, remote_changed: bool, now: datetime | None = None) -> bool:
    """Stamp ``modified`` (and ``origin``) into a locally edited memory entity before its push.

    :param fp: the local fingerprint the sync plan saw.
    :param base: the path's base (None for a new file).
    :param remote_changed: the server's copy differs from base (``origin`` is then left alone).
    :returns: True when the file was rewritten.
    """
    opts = ctx.options
    if not getattr(opts, "stamp_edits", False) or not is_memory_file(rel) or fp is None:
        return False
    path = ctx.local_path(rel)
    st = stat_or_none(path, follow=True)
    if st is None:
        return False
    quiet = float(getattr(opts, "stamp_quiet", 1.0))
    wait = quiet - (time.time() - st.st_mtime)
    if wait > 0 and rel not in getattr(ctx, "saved", ()):
        time.sleep(min(wait, quiet))  # the editor may still be saving (the watcher did not see it done)
    try:
        with open(path, "rb") as fh:
            if stat_fingerprint(os.fstat(fh.fileno())) != fp:
                return False  # changed since the plan: the next pass handles it
            data = fh.read()
    except OSError:
        return False
    fm = _frontmatter(data)
    if fm is None or not (fm.get("title") or fm.get("permalink")):
        return False  # not a memory entity
    old = _frontmatter(ctx.state.base_content(base)) if base is not None else None
    if old is not None and old.get("modified") != fm.get("modified"):
        return False  # the person set `modified` themselves
    tz = parse_offset(getattr(opts, "time_offset", None) or local_offset())
    when = (now or datetime.now(tz)).astimezone(tz).replace(microsecond=0)
    fields = {"modified": when.isoformat()}
    origin = getattr(opts, "origin", "desktop")
    if not remote_changed and "origin" in fm and fm.get("origin") != origin:
        fields["origin"] = yaml_scalar(origin)
    new = set_fields(data, fields)
    if new == data:
        return False
    try:
        # backed up first (the exact bytes the person saved stay recoverable); a save
        # landing meanwhile stays live and is stamped by a later pass
        write_over(ctx, rel, new, fp)
    except LocalChanged:
        return False
    log.info("stamped %s: modified %s", rel, fields["modified"])
    return True
