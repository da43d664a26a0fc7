"""Turn an api2 directory listing answer into a :class:`DirListing`.

``GET /api2/repos/{id}/dir/?p=`` answers a JSON array of entries (or the
JSON string ``"uptodate"`` when the request's ``oid`` is current) and the
folder id in the ``oid`` header.  Recursive listings give every entry a
``parent_dir`` with a quirk: ``/`` for root entries, ``/x/`` (trailing
slash) for entries directly under ``p=/x``, ``/x/y`` (none) deeper.

Hostile or broken names are not trusted: an entry whose name is unsafe
(:func:`ohsync.engine.client.paths.name_problem`), whose ``parent_dir`` is
outside the listed folder or under a folder that was itself rejected or
never listed, or that repeats a path already listed, is dropped and
reported as ``(path, reason)``.  A body of the wrong shape (not an array,
entries without ``type``/``name``/``id``, ids that are not 40 hex) raises
:class:`ProtocolError`: then the whole listing is untrustworthy.
"""

from __future__ import annotations

from typing import Any

import httpx

from ..errors import ProtocolError
from ..models import DirListing, RemoteEntry
from .errors import check_id, parse_json
from .paths import is_within, join_remote, name_problem

__all__ = ["parse_listing"]

_WHAT = "the folder listing"


def parse_listing(
    resp: httpx.Response, folder: str, *, recursive: bool, requested_oid: str | None
) -> tuple[DirListing, list[tuple[str, str]]]:
    """Parse one listing answer.

    :param resp: the 200 answer.
    :param folder: the normalized folder that was listed.
    :param recursive: whether ``recursive=1`` was sent.
    :param requested_oid: the ``oid`` sent, if any.
    :returns: ``(listing, rejected)``; ``rejected`` holds ``(path, reason)``.
    :raises ProtocolError: the answer has the wrong shape.
    """
    body = parse_json(resp.content, what=_WHAT, path=folder)
    header_oid = resp.headers.get("oid")
    if body == "uptodate":
        if not requested_oid:
            raise ProtocolError("The server answered 'uptodate' to a listing without oid.", path=folder)
        oid = header_oid or requested_oid
        return DirListing(path=folder, oid=check_id(oid, what=_WHAT, path=folder), uptodate=True), []
    if not isinstance(body, list):
        raise ProtocolError("The folder listing is not a JSON array.", path=folder)
    oid = check_id(header_oid, what="the listing's oid header", path=folder)

    entries: list[RemoteEntry] = []
    rejected: list[tuple[str, str]] = []
    seen: set[str] = set()
    listed_dirs = {folder}
    for item in body:
        entry_type, name, entry_id = _required(item, folder)
        parent = folder
        if recursive:
            parent_or_reason = _parent_of(item, folder, listed_dirs)
            if parent_or_reason[1]:
                rejected.append((f"{item.get('parent_dir')}/{name}", parent_or_reason[1]))
                continue
            parent = parent_or_reason[0]
        path = join_remote(parent, name) if isinstance(name, str) else f"{parent}/{name!r}"
        problem = name_problem(name)
        if problem is None and path in seen:
            problem = "listed twice"
        if problem:
            rejected.append((path, problem))
            continue
        seen.add(path)
        is_dir = entry_type == "dir"
        if is_dir:
            listed_dirs.add(path)
        entries.append(
            RemoteEntry(
                path=path,
                is_dir=is_dir,
                id=check_id(entry_id, what=_WHAT, path=path),
                size=0 if is_dir else _nonneg_int(item.get("size", 0), path),
                mtime=_nonneg_int(item.get("mtime", 0), path),
            )
        )
    return DirListing(path=folder, oid=oid, entries=tuple(entries)), rejected


def _required(item: Any, folder: str) -> tuple[str, Any, Any]:
    if not isinstance(item, dict):
        raise ProtocolError("An entry of the folder listing is not a JSON object.", path=folder)
    entry_type = item.get("type")
    if entry_type not in ("dir", "file") or "name" not in item or "id" not in item:
        raise ProtocolError("An entry of the folder listing lacks type, name or id.", path=folder)
    return entry_type, item["name"], item["id"]


def _parent_of(item: dict[str, Any], folder: str, listed_dirs: set[str]) -> tuple[str, str]:
    """``(parent path, "")`` from ``parent_dir``, or ``("", reason)``."""
    raw = item.get("parent_dir")
    if not isinstance(raw, str) or not raw.startswith("/"):
        return "", "entry has no valid parent_dir"
    parts = [part for part in raw.split("/") if part]
    for part in parts:
        problem = name_problem(part)
        if problem:
            return "", f"unsafe parent folder: {problem}"
    parent = "/" + "/".join(parts)
    if not is_within(parent, folder):
        return "", f"parent folder is outside the listed folder {folder}"
    if parent not in listed_dirs:
        return "", "parent folder was not listed (or was rejected)"
    return parent, ""


def _nonneg_int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ProtocolError("The folder listing has a non-number size or mtime.", path=path)
    try:
        number = int(float(value)) if isinstance(value, str) else int(value)
    except (ValueError, OverflowError) as exc:
        raise ProtocolError("The folder listing has a non-number size or mtime.", path=path) from exc
    return max(0, number)
