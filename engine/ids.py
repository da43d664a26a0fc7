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

__all__ = ["BLOCK_SIZE", "ContentHasher", "sha1_bytes", "sha1_file", "seafile_file_id", "file_hashes"]

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


class ContentHasher:
    """The sha1 and the Seafile file id of bytes fed in order, computed as
    they stream past (a download being written, an upload being sent), so
    no second read of the file is needed.

    :param keep: also keep the bytes while they total at most this many
        (a small file's content for its base), else keep nothing.
    :param blocks: also compute the per-block sha1s behind :meth:`file_id`.
        A download passes False: the server names the version it sends
        (the link's ``oid``), so the second hash would only cost CPU while
        the bytes arrive.
    """

    def __init__(self, keep: int = 0, *, blocks: bool = True) -> None:
        self._keep = keep
        self.blocks = blocks
        self.reset()

    def reset(self) -> None:
        """Forget everything fed so far (a transfer that starts over)."""
        self._whole = hashlib.sha1()
        self._block = hashlib.sha1()
        self._block_ids: list[str] = []
        self._in_block = 0
        self.size = 0
        self._kept: bytearray | None = bytearray() if self._keep > 0 else None

    def update(self, data: bytes | bytearray | memoryview) -> None:
        """Feed the next bytes of the stream."""
        self.update_whole(data)
        self.update_blocks(data)

    def update_whole(self, data: bytes | bytearray | memoryview) -> None:
        """Feed the next bytes to the whole-file sha1 (and the kept bytes).

        With :meth:`update_blocks` this is :meth:`update` in two halves that
        may run on two threads at once (each half in stream order): hashlib
        releases the interpreter while it hashes more than 2 KiB.
        """
        view = memoryview(data).cast("B")
        self.size += len(view)
        self._whole.update(view)
        if self._kept is not None:
            if len(self._kept) + len(view) <= self._keep:
                self._kept += view
            else:
                self._kept = None

    def update_blocks(self, data: bytes | bytearray | memoryview) -> None:
        """Feed the next bytes to the per-block sha1s (see :meth:`update_whole`);
        nothing without ``blocks``."""
        if not self.blocks:
            return
        view = memoryview(data).cast("B")
        while len(view):
            take = min(len(view), BLOCK_SIZE - self._in_block)
            self._block.update(view[:take])
            self._in_block += take
            view = view[take:]
            if self._in_block == BLOCK_SIZE:
                self._block_ids.append(self._block.hexdigest())
                self._block, self._in_block = hashlib.sha1(), 0

    def sha1(self) -> str:
        """Hex sha1 of everything fed."""
        return self._whole.hexdigest()

    def file_id(self) -> str:
        """The Seafile file id of everything fed (40 hex).

        :raises ValueError: the hasher was made without ``blocks``.
        """
        if not self.blocks:
            raise ValueError("this hasher computes no block ids")
        blocks = self._block_ids + ([self._block.hexdigest()] if self._in_block else [])
        return _id_from_blocks(blocks, self.size)

    def kept(self) -> bytes | None:
        """The bytes fed, when they total at most ``keep``; else None."""
        return bytes(self._kept) if self._kept is not None else None


def file_hashes(fh: BinaryIO) -> tuple[str, str, int]:
    """Stream a file once: ``(sha1, seafile_file_id, size_bytes)``.

    Memory use is bounded by the read size, not the file size.
    """
    hasher = ContentHasher()
    while True:
        chunk = fh.read(_READ)
        if not chunk:
            break
        hasher.update(chunk)
    return hasher.sha1(), hasher.file_id(), hasher.size


def sha1_file(fh: BinaryIO) -> str:
    """Hex sha1 of an open binary file, streamed."""
    return file_hashes(fh)[0]
