"""Opening a dropped file: without following links, checked to be a regular file.

The planner hashes and summarises the dropped file from one descriptor, and
the upload and the move open it the same way, so a symbolic link (or a
FIFO) swapped in for it between a check and the read is refused when it is
opened instead of being followed out of the drop folder.  A file in the
drop folder is reached by walking the drop folder's subfolders with
``O_NOFOLLOW`` (:mod:`ohsync.engine.nofollow`); a file filed from elsewhere
(``ohsync file PATH``) is opened with ``O_NOFOLLOW`` on its own name.
"""

from __future__ import annotations

from pathlib import Path
from typing import BinaryIO

from ..errors import LocalError
from ..nofollow import OutsideMirrorError, open_regular

__all__ = ["NotAFileError", "open_source"]

class NotAFileError(LocalError):
    """The dropped path is not a regular file (a symbolic link, a FIFO, a
    device, or reached through a link): it is never read, moved or filed."""

    title = "Not a regular file"


def _refused(source: Path) -> NotAFileError:
    return NotAFileError(f"{source.name} is not a regular file (a symbolic link, a FIFO or a device, or reached "
                         "through a link); not filed. Put the document itself there to file it", path=str(source))


def open_source(source: Path, drop_dir: Path, drop_rel: str | None) -> BinaryIO:
    """The dropped file opened for reading (binary; the caller closes it).

    :param source: its absolute path.
    :param drop_dir: the drop folder.
    :param drop_rel: its path inside the drop folder, or None for a file
        filed from elsewhere.
    :raises NotAFileError: it (or, in the drop folder, a folder on its way)
        is a symbolic link, or it is not a regular file.
    :raises FileNotFoundError: it is gone; other ``OSError`` as ``open``.
    """
    # in the drop folder every folder on the way is opened without following links; a file
    # filed from elsewhere only its own name (the person named that folder)
    folder, rel = (drop_dir, drop_rel) if drop_rel is not None else (source.parent, source.name)
    try:
        return open_regular(folder, rel)
    except (OutsideMirrorError, IsADirectoryError):
        raise _refused(source) from None
