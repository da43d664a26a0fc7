"""Seafile object ids: blocks, files, directories and commits.

Every id is a 40-char lowercase hex sha1.  The formulas follow
``docs/seafile-api.md`` §6.1, so a file uploaded to devserver gets the
same id as on a real Seafile server (unencrypted library, repo version 1,
fixed 8 MiB blocks):

* block id  = sha1(block bytes)
* file id   = sha1('{"block_ids": ["b1", ...], "size": N, "type": 1, "version": 1}')
  (keys sorted, ``", "``/``": "`` separators); a file with no blocks has the
  zero id ``EMPTY_ID`` unless it was written as an explicit object (a copy
  to another library: ``EXPLICIT_EMPTY_FILE_ID``).
* dir id    = sha1('{"dirents": [...], "type": 3, "version": 1}') with the
  entries ordered by name descending (bytewise); an empty dir has the zero id.
* commit id = sha1 of the commit's root, parent, creator, description and
  ctime (opaque; the first commit of two libraries created by the same user
  in the same second is the same, as on the real server).
"""
from __future__ import annotations

import hashlib
import json
from typing import Any, Iterable

EMPTY_ID = "0" * 40
BLOCK_SIZE = 8 * 1024 * 1024
FILE_MODE = 33188  # 0o100644
DIR_MODE = 16384  # 0o40000 (C core); ids of dirs are opaque anyway
EXPLICIT_EMPTY_FILE_ID = "c5d52a60cac7b22bb1d170f10d7a848a8d9583af"


def sha1_hex(data: bytes) -> str:
    """Return the hex sha1 of ``data``."""
    return hashlib.sha1(data).hexdigest()


def split_blocks(data: bytes, block_size: int = BLOCK_SIZE) -> list[bytes]:
    """Cut ``data`` into fixed-size blocks (the last one shorter)."""
    return [data[i:i + block_size] for i in range(0, len(data), block_size)]


def file_object_json(block_ids: Iterable[str], size: int) -> str:
    """Seafile's JSON text of a file object (what its id hashes)."""
    blocks = ", ".join('"%s"' % b for b in block_ids)
    return '{"block_ids": [%s], "size": %d, "type": 1, "version": 1}' % (blocks, size)


def file_id_for_blocks(block_ids: list[str], size: int, explicit_empty: bool = False) -> str:
    """File id from its block ids and size (bytes).

    Args:
        block_ids: sha1 of each block, in order.
        size: total file size in bytes.
        explicit_empty: hash the empty object instead of returning the zero id.
    """
    if not block_ids and not explicit_empty:
        return EMPTY_ID
    return sha1_hex(file_object_json(block_ids, size).encode())


def file_id(data: bytes, block_size: int = BLOCK_SIZE) -> str:
    """The Seafile file id of ``data`` (fixed-size blocks, default 8 MiB).

    >>> file_id(b"hello\\n")
    '4226e5b3d7da1a4575241f9501f9882aee9b5ea9'
    """
    return file_id_for_blocks([sha1_hex(b) for b in split_blocks(data, block_size)], len(data))


def dirent_dict(entry: dict[str, Any]) -> dict[str, Any]:
    """The serialised form of one directory entry (keys as Seafile writes them)."""
    if entry["mode"] == DIR_MODE:
        return {"id": entry["id"], "mode": entry["mode"], "mtime": entry["mtime"], "name": entry["name"]}
    return {"id": entry["id"], "mode": entry["mode"], "modifier": entry["modifier"],
            "mtime": entry["mtime"], "name": entry["name"], "size": entry["size"]}


def dir_object_json(entries: Iterable[dict[str, Any]]) -> str:
    """Seafile's JSON text of a directory object; entries sorted by name descending."""
    ordered = sorted(entries, key=lambda e: e["name"].encode("utf-8"), reverse=True)
    obj = {"dirents": [dirent_dict(e) for e in ordered], "type": 3, "version": 1}
    return json.dumps(obj, sort_keys=True, ensure_ascii=False)


def dir_id(entries: Iterable[dict[str, Any]]) -> str:
    """Directory id of a list of entries (dicts with id, mode, mtime, name[, modifier, size]).

    An empty directory has the zero id.
    """
    entries = list(entries)
    if not entries:
        return EMPTY_ID
    return sha1_hex(dir_object_json(entries).encode("utf-8"))


def commit_id(root_id: str, parent_id: str | None, creator: str, desc: str, ctime: int) -> str:
    """Opaque commit id (sha1 over root, parent, creator, description, ctime seconds)."""
    h = hashlib.sha1()
    for part in (root_id, parent_id or "", creator, desc, str(int(ctime))):
        h.update(part.encode("utf-8"))
        h.update(b"\0")
    return h.hexdigest()
