"""Replace a small file of the daemon's own (config, file keyring) so that a crash never leaves half of it.

The data goes to a temp file in the same folder, is flushed to disk, gets
its mode, and is renamed over the file: a reader sees the old file or the
new one, never a mix.  Mirror files are written by the engine
(``engine/localfs.py``), not here.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

__all__ = ["replace_file"]


def replace_file(path: Path, data: bytes, *, mode: int, prefix: str) -> None:
    """Write ``data`` as ``path`` through a temp file named ``prefix…`` beside it.

    :param mode: the file's permission bits (e.g. ``0o600``), set before the rename.
    :raises OSError: the temp file cannot be written or renamed (it is removed).
    """
    fd, tmp = tempfile.mkstemp(prefix=prefix, dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
