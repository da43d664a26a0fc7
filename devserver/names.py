"""Path canonicalisation, name validation and auto-rename rules of Seafile.

Look-ups are byte-exact (no Unicode normalisation); writes store NFC
(``docs/seafile-api.md`` §6.3).  Two different auto-rename rules exist:
the fileserver splits at the *last* dot even when it is the first character
(``.env`` -> `` (1).env``), seahub uses ``os.path.splitext`` (``.env (1)``).
"""
from __future__ import annotations

import os
import unicodedata
from typing import Callable

MAX_NAME_BYTES = 255


def nfc(s: str) -> str:
    """NFC-normalise a name or path (what the server stores)."""
    return unicodedata.normalize("NFC", s)


def split_path(p: str | None) -> list[str]:
    """Split a path into its components; empty components are dropped.

    ``None``, ``""`` and ``"/"`` all mean the root (``[]``).
    """
    if not p:
        return []
    return [c for c in p.split("/") if c]


def join_path(parts: list[str]) -> str:
    """``["a", "b"]`` -> ``"/a/b"``; ``[]`` -> ``"/"``."""
    return "/" + "/".join(parts)


def norm_path(p: str | None) -> str:
    """Canonical absolute path without trailing slash (root is ``/``)."""
    return join_path(split_path(p))


def parent_and_name(p: str) -> tuple[str, str]:
    """``"/a/b.txt"`` -> ``("/a", "b.txt")``; the root has name ``""``."""
    parts = split_path(p)
    if not parts:
        return "/", ""
    return join_path(parts[:-1]), parts[-1]


def name_too_long(name: str) -> bool:
    """True when the UTF-8 encoding of ``name`` exceeds 255 bytes."""
    return len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES


def fs_name_invalid(name: str) -> bool:
    """Fileserver name check (``should_ignore_file``): ``..``, ``/``, empty or > 255 bytes."""
    return name in ("", "..") or "/" in name or name_too_long(name)


def seahub_name_invalid(name: str) -> bool:
    """Seahub's ``is_valid_dirent_name`` negated: ``/``, ``\\``, ``.`` and ``..`` are invalid."""
    return name in ("", ".", "..") or "/" in name or "\\" in name


def fs_unique_name(name: str, exists: Callable[[str], bool]) -> str | None:
    """Fileserver auto-rename: ``a.txt`` -> ``a (1).txt`` ... up to 1000, else None."""
    if not exists(name):
        return name
    dot = name.rfind(".")
    stem, ext = (name[:dot], name[dot:]) if dot >= 0 else (name, "")
    for i in range(1, 1001):
        cand = f"{stem} ({i}){ext}"
        if not exists(cand):
            return cand
    return None


def seahub_unique_name(name: str, exists: Callable[[str], bool], is_dir: bool = False) -> str:
    """Seahub auto-rename (``get_no_duplicate_obj_name``): ``splitext`` based; dirs keep the whole name."""
    if not exists(name):
        return name
    stem, ext = (name, "") if is_dir else os.path.splitext(name)
    i = 1
    while True:
        cand = f"{stem} ({i}){ext}"
        if not exists(cand):
            return cand
        i += 1


def listing_key(name: str) -> bytes:
    """Sort key of listings: ASCII case-insensitive compare of the UTF-8 bytes."""
    return name.encode("utf-8", "surrogatepass").lower()
