"""Path spaces and name rules.

Three spaces, never mixed: ``rel_path`` (library-relative inside a mirror,
POSIX, NFC, no leading slash: ``journal/2026-11.md``), ``remote_path``
(absolute in the library: ``/journal/2026-11.md``) and ``local_path`` (a
:class:`pathlib.Path` on this machine).
"""

from __future__ import annotations

import os
import posixpath
import unicodedata
from pathlib import Path, PurePosixPath

__all__ = [
    "MAX_NAME_BYTES",
    "normalize_rel",
    "to_remote",
    "from_remote",
    "to_local",
    "name_problem",
    "parent_rel",
]

#: Longest file name, in UTF-8 bytes, Seafile and common file systems accept.
MAX_NAME_BYTES = 255


def normalize_rel(rel_path: str) -> str:
    """NFC, ``/``-separated, no leading/trailing slash, no ``.`` parts."""
    rel = unicodedata.normalize("NFC", rel_path.replace(os.sep, "/"))
    parts = [p for p in rel.split("/") if p not in ("", ".")]
    return "/".join(parts)


def to_remote(remote_root: str, rel_path: str) -> str:
    """Join a mirror's remote root and a rel path into a remote path."""
    root = "/" + remote_root.strip("/")
    return posixpath.join(root, rel_path) if rel_path else root


def from_remote(remote_root: str, remote_path: str) -> str | None:
    """The rel path of ``remote_path``, or None when it is outside the root."""
    root = "/" + remote_root.strip("/")
    path = "/" + remote_path.strip("/")
    if root == "/":
        return normalize_rel(path)
    if path == root:
        return ""
    if not path.startswith(root + "/"):
        return None
    return normalize_rel(path[len(root) + 1:])


def to_local(local_root: Path, rel_path: str) -> Path:
    """The local path of a rel path (checked by :func:`name_problem` first)."""
    return local_root.joinpath(*PurePosixPath(rel_path).parts) if rel_path else local_root


def parent_rel(rel_path: str) -> str:
    """The parent folder's rel path (``""`` for the root)."""
    return rel_path.rsplit("/", 1)[0] if "/" in rel_path else ""


def name_problem(rel_path: str) -> str | None:
    """Why ``rel_path`` cannot exist on both sides, or None when it can.

    Checks each component for ``.``/``..``, empty parts, NUL, ``/`` or
    ``\\`` (Seafile refuses backslashes in folder names), control
    characters and names over 255 UTF-8 bytes.
    """
    if rel_path.startswith("/") or not rel_path:
        return "absolute or empty path"
    for part in rel_path.split("/"):
        if part in ("", ".", ".."):
            return f"'{part}' is not a valid name"
        if "\x00" in part or "\\" in part:
            return f"'{part}' contains a character Seafile does not accept"
        if any(ord(c) < 32 for c in part):
            return f"'{part}' contains a control character"
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            return f"name longer than {MAX_NAME_BYTES} bytes"
    return None
