"""What the local disk can hold: name and path lengths of the mirror's file system.

A remote path longer than the local file system allows (``PATH_MAX``,
usually 4,096 bytes for the whole path; ``NAME_MAX``, usually 255 bytes
for one name) can never be written here.  :func:`path_too_long` finds such
paths before anything is asked of the server, so the sync skips them and
names them (``engine/sync/plan.py``) instead of downloading for nothing or
failing the whole pass.  Names the file system refuses for other reasons
(a character a FAT or NTFS disk rejects: ``EILSEQ``, ``EINVAL``) cannot be
known without writing; they fail when written, on their own path
(``engine/errors.py`` ``local_error``).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

__all__ = ["limits", "path_too_long"]

#: Used when the file system does not say (``pathconf`` unsupported).
_DEFAULT_NAME_MAX = 255
_DEFAULT_PATH_MAX = 4096


@lru_cache(maxsize=16)
def limits(root: Path) -> tuple[int, int]:
    """``(name_max, path_max)`` in bytes of the file system holding ``root``.

    ``path_max`` counts the terminating NUL, as ``PATH_MAX`` does: a path
    must be shorter than it.  Read once per root with ``os.pathconf``; the
    usual Linux values when the file system does not answer.
    """
    def ask(name: str, default: int) -> int:
        try:
            value = os.pathconf(root, name)
        except (OSError, ValueError, AttributeError):
            return default
        return value if value > 0 else default
    return ask("PC_NAME_MAX", _DEFAULT_NAME_MAX), ask("PC_PATH_MAX", _DEFAULT_PATH_MAX)


def path_too_long(root: Path, local_path: Path) -> str | None:
    """Why ``local_path`` (inside the mirror ``root``) cannot exist on this disk, or None.

    :param root: the mirror folder (its file system's limits apply).
    :param local_path: the absolute local path of a library path.
    :returns: a sentence naming the limit ("the path is too long for this
        disk (4,361 bytes; it allows 4,095)"), or None when it fits.
    """
    name_max, path_max = limits(root)
    try:
        rel = local_path.relative_to(root)
    except ValueError:
        rel = local_path
    for part in rel.parts:
        size = len(os.fsencode(part))
        if size > name_max:
            return f"a name in it is too long for this disk ({size:,} bytes; it allows {name_max:,})"
    size = len(os.fsencode(str(local_path)))
    if size >= path_max:
        return f"the path is too long for this disk ({size:,} bytes; it allows {path_max - 1:,})"
    return None
