"""The archive folders (``.conflict/``, ``.trash/``) under a name that works.

A *file* named ``.conflict`` or ``.trash`` (on either side) would make every
conflict copy or soft delete fail, and with it every later pass.  Instead
the folder is used under the first working name (``.conflict_ohsync``,
``.conflict_ohsync-2``, …), the occupying file is left alone, and the mirror
says so once in its notices (the daemon lists them as names that need
the person).
"""

from __future__ import annotations

import functools
import re
import stat
from typing import TYPE_CHECKING

from .local_lookups import stat_or_none

if TYPE_CHECKING:  # the ignore rules use is_under; the context is only named in signatures
    from .context import MirrorContext

__all__ = ["working_dir", "is_under", "drop_settled_notices", "ALT_SUFFIX"]

#: Appended to an archive folder's name when a file occupies the usual one.
ALT_SUFFIX = "_ohsync"  # not "-": ".trash-*" is ignored (desktop trash folders)

_PURPOSE = {".conflict": "conflict copies", ".trash": "deleted files"}


@functools.lru_cache(maxsize=16)
def _alternatives(name: str) -> re.Pattern[str]:
    # compiled once per name: asked for every path of every scan
    return re.compile(re.escape(name) + r"(?:" + re.escape(ALT_SUFFIX) + r"(?:-\d+)?)?$")


def is_under(rel_path: str, name: str) -> bool:
    """True for ``name`` itself, its working alternatives, and paths inside them."""
    return bool(_alternatives(name).match(rel_path.split("/", 1)[0]))


def _occupied(ctx: MirrorContext, rel: str) -> bool:
    remote = ctx.snapshot.get(rel)
    if remote is not None and not remote.is_dir:
        return True
    st = stat_or_none(ctx.local_path(rel), follow=False)
    return st is not None and not stat.S_ISDIR(st.st_mode)


def working_dir(ctx: MirrorContext, name: str) -> str:
    """The folder to use for ``name`` (``.conflict`` or ``.trash``): ``name``
    unless a file (or a link) occupies it on either side, else the first free
    alternative, announced once in ``ctx.notices``."""
    if not _occupied(ctx, name):
        ctx.notices.pop(name, None)
        return name
    n = 1
    while True:
        candidate = f"{name}{ALT_SUFFIX}" + (f"-{n}" if n > 1 else "")
        if not _occupied(ctx, candidate):
            ctx.notices[name] = (f"a file named {name} takes the name of the folder for "
                                 f"{_PURPOSE.get(name, 'archived files')}; they go to {candidate}/ instead. "
                                 f"Rename or move the file {name} to use {name}/ again")
            return candidate
        n += 1


def drop_settled_notices(ctx: MirrorContext) -> None:
    """Forget the notice of an archive folder whose name no file occupies any
    more (the person renamed or moved it): it is used again from the next
    conflict copy or delete on, and the notice must not outlive the cause.
    One ``lstat`` per notice, none when there is none."""
    for name in [n for n in ctx.notices if n in _PURPOSE]:
        if not _occupied(ctx, name):
            del ctx.notices[name]
