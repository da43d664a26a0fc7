"""Content ids: local sha1 and the id Seafile would give the same bytes.

Seafile's file id (repo version 1) is the sha1 of a small JSON naming the
sha1 of each 8 MiB block (``docs/seafile-api.md`` §6.1).  Computing it locally
lets the engine tell "remote equals my local bytes" without a download.  A
mismatch proves nothing (desktop clients cut blocks differently above
6 MiB), so it is only ever used as a shortcut to equality.
"""

from __future__ import annotations

import hashlib
from typing import BinaryIO

__all__ = ["BLOCK_SIZE", "sha1_bytes", "sha1_file", "seafile_file_id", "file_hashes"]

#: Seafile's default fixed block size for Web API uploads, bytes.
BLOCK_SIZE = 8 * 1024 * 1024
_READ = 1024 * 1024


def sha1_bytes(data: bytes) -> str:
    """Hex sha1 of ``data``."""
    return hashlib.sha1(data).hexdigest()


def _id_from_blocks(block_ids: list[str], size: int) -> str:
    if size == 0:
        return "0" * 40
    text = '{"block_ids": [%s], "size": %d, "type": 1, "version": 1}' % (
        ", ".join('"%s"' % b for b in block_ids), size)
    return hashlib.sha1(text.encode("ascii")).hexdigest()


def seafile_file_id(data: bytes) -> str:
    """The file id a Web API upload of ``data`` gets on the server (40 hex)."""
    blocks = [sha1_bytes(data[i:i + BLOCK_SIZE]) for i in range(0, len(data), BLOCK_SIZE)]
    return _id_from_blocks(blocks, len(data))


def file_hashes(fh: BinaryIO) -> tuple[str, str, int]:
    """Stream a file once: ``(sha1, seafile_file_id, size_bytes)``.

    Memory use is bounded by the read size, not the file size.
    """
    whole = hashlib.sha1()
    block = hashlib.sha1()
    block_ids: list[str] = []
    in_block = 0
    size = 0
    while True:
        chunk = fh.read(_READ)
        if not chunk:
            break
        size += len(chunk)
        whole.update(chunk)
        while chunk:
            take = min(len(chunk), BLOCK_SIZE - in_block)
            block.update(chunk[:take])
            in_block += take
            chunk = chunk[take:]
            if in_block == BLOCK_SIZE:
                block_ids.append(block.hexdigest())
                block, in_block = hashlib.sha1(), 0
    if in_block:
        block_ids.append(block.hexdigest())
    return whole.hexdigest(), _id_from_blocks(block_ids, size), size


def sha1_file(fh: BinaryIO) -> str:
    """Hex sha1 of an open binary file, streamed."""
    return file_hashes(fh)[0]
