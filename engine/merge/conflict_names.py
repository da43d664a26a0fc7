"""Names of conflict copies (docs/architecture.md §4).

``.conflict/<dir>/<stem>__<origin>__<YYYYMMDDTHHMMSSZ><.ext>`` with ``-2``,
``-3`` before the extension when taken.  A path already inside
``.conflict/`` gets only the number, never a second suffix.  Every name
stays within 255 UTF-8 bytes: the stem is shortened on a character
boundary, never the suffix or the extension.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime, timezone

from ..names import fit_name

__all__ = ["CONFLICT_DIR", "is_conflict_path", "conflict_copy_path", "origin_of"]

CONFLICT_DIR = ".conflict"
_ORIGIN_RE = re.compile(rb"^origin:\s*['\"]?([A-Za-z0-9_-]{1,32})['\"]?\s*$", re.M)


_CONFLICT_TOP = re.compile(re.escape(CONFLICT_DIR) + r"(?:_ohsync(?:-\d+)?)?$")


def is_conflict_path(rel_path: str) -> bool:
    """True for paths inside the ``.conflict/`` folder (or the working name it
    gets when a file occupies ``.conflict``, see ``special_dirs``)."""
    return bool(_CONFLICT_TOP.match(rel_path.split("/", 1)[0]))


def origin_of(content: bytes) -> str:
    """The frontmatter ``origin`` of a memory file, else ``"remote"``."""
    head = content[:4096].lstrip(b"\xef\xbb\xbf")
    if head.startswith(b"---"):
        end = head.find(b"\n---", 3)
        m = _ORIGIN_RE.search(head[:end if end > 0 else len(head)])
        if m:
            return m.group(1).decode("ascii")
    return "remote"


def _split(name: str) -> tuple[str, str]:
    dot = name.rfind(".")
    if dot <= 0:
        return name, ""
    return name[:dot], name[dot:]


def conflict_copy_path(rel_path: str, origin: str, exists: Callable[[str], bool],
                       when: datetime | None = None, folder_name: str = CONFLICT_DIR) -> str:
    """A free rel path for the archived copy of ``rel_path``.

    :param origin: the losing version's origin (``remote``, ``android``…).
    :param exists: tells whether a candidate rel path is taken (either side).
    :param when: the conflict time (UTC now by default).
    :param folder_name: the conflict folder (another name when a file
        occupies ``.conflict``).
    """
    when = when or datetime.now(timezone.utc)
    folder, _, name = rel_path.rpartition("/")
    stem, ext = _split(name)
    if is_conflict_path(rel_path):
        target_dir, tag = folder, ""
    else:
        target_dir = f"{folder_name}/{folder}" if folder else folder_name
        tag = f"__{origin}__{when.strftime('%Y%m%dT%H%M%SZ')}"
    n = 1 if not is_conflict_path(rel_path) else 2
    while True:
        tail = tag + (ext if n == 1 else f"-{n}{ext}")
        candidate = f"{target_dir}/{fit_name(stem, tail)}"
        if not exists(candidate):
            return candidate
        n += 1


#: ``stem (SFConflict user time).ext`` — the time as ``YYYY-MM-DD-HH-MM-SS``.
SFCONFLICT = re.compile(r"^(?P<stem>.*) \(SFConflict (?P<who>[^ ()]+) (?P<when>\d{4}(?:-\d\d){5})\)"
                        r"(?P<ext>\.[^./]*)?$")
