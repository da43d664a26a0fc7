"""Path spaces and name rules.

Three spaces, never mixed: ``rel_path`` (library-relative inside a mirror,
POSIX, NFC, no leading slash: ``journal/2026-11.md``), ``remote_path``
(absolute in the library: ``/journal/2026-11.md``) and ``local_path`` (a
:class:`pathlib.Path` on this machine).  The name rules live in
:mod:`.names` (``name_problem`` here is
:func:`~ohsync.engine.names.path_problem`).
"""

from __future__ import annotations

import os
import posixpath
import unicodedata
from pathlib import Path, PurePosixPath

from .names import MAX_NAME_BYTES
from .names import path_problem as name_problem

__all__ = [
    "MAX_NAME_BYTES",
    "normalize_rel",
    "to_remote",
    "from_remote",
    "to_local",
    "name_problem",
    "parent_rel",
]


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
