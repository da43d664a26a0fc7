"""Request bodies of a chunked upload (:mod:`.client.chunked`): a slice of
the file streamed as httpx sends it, or a slice of a chunk buffer.

httpx reads a multipart file part with ``seek``/``tell`` (its length) and
``read`` (64 KiB at a time, from offset 0 again if it must resend), so both
are small seekable raw files.
"""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from typing import Any, BinaryIO

from .errors import LocalError, local_error
from .ids import ContentHasher

__all__ = ["BufferBody", "FileSlice", "read_chunk"]


class _RawSlice(io.RawIOBase):
    """A read-only, seekable raw file of ``size`` bytes (subclasses fill ``_fill``)."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size, self._pos = size, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self.size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def readinto(self, b: Any) -> int:
        n = max(0, min(len(b), self.size - self._pos))
        if n:
            n = self._fill(memoryview(b).cast("B")[:n], self._pos)
        self._pos += n
        return n

    def _fill(self, out: memoryview, pos: int) -> int:
        raise NotImplementedError


class BufferBody(_RawSlice):
    """A slice of the chunk buffer (chunks in flight read and hash each
    chunk before it is handed to a pool thread)."""

    def __init__(self, view: memoryview) -> None:
        super().__init__(len(view))
        self._view = view

    def _fill(self, out: memoryview, pos: int) -> int:
        out[:] = self._view[pos:pos + len(out)]
        return len(out)


class FileSlice(_RawSlice):
    """Bytes ``[start, end)`` of ``fh``, read only as httpx sends them, so no
    chunk is held in memory and any chunk size costs the same memory.

    Every byte read at the hasher's end (``hasher.size``) is fed to it: the
    file is hashed while it is sent, in order, and bytes sent again (a
    resend from offset 0, a retried chunk) are not fed twice.  With no
    ``hasher`` (another thread hashes the file) nothing is fed.

    :param lock: serialises ``seek`` + ``read`` on the shared ``fh``.
    :param on_read: called with the file offset read up to after each read
        (bytes handed to the connection: for display, not confirmed).
    :raises LocalError: (from reads) ``fh`` ended early or could not be read.
    """

    def __init__(self, fh: BinaryIO, start: int, end: int, hasher: ContentHasher | None, target: str,
                 lock: threading.Lock, on_read: Callable[[int], None] | None = None) -> None:
        super().__init__(end - start)
        self._fh, self._start, self._hasher, self._target, self._lock = fh, start, hasher, target, lock
        self._on_read = on_read

    def _fill(self, out: memoryview, pos: int) -> int:
        at = self._start + pos
        try:
            with self._lock:
                self._fh.seek(at)
                got = self._fh.readinto(out)  # type: ignore[attr-defined]
        except OSError as exc:
            raise local_error(exc, self._target, what="reading the file to upload") from exc
        if not got:
            raise LocalError(f"The file for {self._target} became shorter while uploading.", path=self._target)
        fed = -1 if self._hasher is None else self._hasher.size
        if self._hasher is not None and at <= fed < at + got:
            self._hasher.update(out[fed - at:got])
        if self._on_read is not None:
            self._on_read(at + got)
        return int(got)


def read_chunk(fh: BinaryIO, offset: int, view: memoryview, target: str) -> BufferBody:
    """Fill ``view`` with the bytes of ``fh`` at ``offset``; a body reading it.

    :raises LocalError: ``fh`` ended early or could not be read.
    """
    got = 0
    try:
        fh.seek(offset)
        while got < len(view):
            n = fh.readinto(view[got:])  # type: ignore[attr-defined]
            if not n:
                break
            got += n
    except OSError as exc:
        raise local_error(exc, target, what="reading the file to upload") from exc
    if got != len(view):
        raise LocalError(f"The file for {target} became shorter while uploading.", path=target)
    return BufferBody(view)
