"""New local files written many at a time, with the syncs to disk shared.

:func:`~ohsync.engine.localfs.atomic_write` makes one file durable on its
own: temp file, fsync, rename, fsync of the folder.  A cold mirror writes
tens of thousands of small files, and each fsync waits for its own journal
commit (milliseconds each on an ordinary disk), so most of its time went to
waiting.  :class:`NewFileBatch` keeps the same guarantees for a batch:

1. :meth:`~NewFileBatch.stage` writes each file into a temp file beside its
   target (a name the watcher and the scans ignore) and takes its
   fingerprint; nothing is synced yet;
2. :meth:`~NewFileBatch.commit` fsyncs every temp file (on the transfer pool
   when there is one, so the file system commits them together), then renames
   each onto its target unless the path was taken meanwhile, then fsyncs each
   folder once.

Only after ``commit`` returns may the caller record the files' bases: a base
on disk always names content that is on disk whole, as with
``atomic_write``.  A crash before the renames leaves temp files only (removed
by the next start's cleanup of ``.ohsync-tmp-*``); a crash after some renames
leaves whole files without a base, which the next pass finds identical to
the server's and adopts.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..local_lookups import fsync_dir_best_effort
from ..localfs import Fingerprint, _new_temp, stat_fingerprint
from ..renames import rename_new

__all__ = ["NewFileBatch", "StagedFile"]


@dataclass
class StagedFile:
    """One file of a batch: written into ``tmp``, to be renamed onto ``target``.

    :ivar rel: library-relative path.
    :ivar fp: the written file's fingerprint (size, mtime, inode: kept by the rename).
    :ivar data: the bytes written.
    """

    rel: str
    target: Path
    tmp: Path
    fd: int
    fp: Fingerprint
    data: bytes


class NewFileBatch:
    """Files that do not exist locally yet, written together (module docstring).

    :param executor: runs the fsyncs several at a time (the transfer pool);
        None: one after the other.
    """

    def __init__(self, executor: Executor | None = None) -> None:
        self._executor = executor
        self._staged: list[StagedFile] = []
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._staged)

    @property
    def size(self) -> int:
        """Bytes staged so far."""
        return self._bytes

    def stage(self, rel: str, target: Path, data: bytes, mtime: float | None) -> None:
        """Write ``data`` into a temp file beside ``target`` (its folders made), mtime set.

        :raises OSError: the folder or the temp file could not be made or written
            (nothing is left behind then).
        """
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _new_temp(target.parent)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if mtime is not None and mtime > 0:
                os.utime(fd, (mtime, mtime))
            fp = stat_fingerprint(os.fstat(fd))
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        self._staged.append(StagedFile(rel, target, tmp, fd, fp, data))
        self._bytes += len(data)

    def commit(self, still_wanted: Callable[[StagedFile], bool]) -> tuple[list[StagedFile], dict[str, OSError]]:
        """Make the staged files durable and put them in place.

        :param still_wanted: asked right before each rename; False drops that
            file (the person created the path meanwhile, its folder went away).
        :returns: ``(files now in place, durable, in order; {rel: error} of those
            that failed)``; the batch is empty afterwards.
        """
        staged, self._staged, self._bytes = self._staged, [], 0
        failed: dict[str, OSError] = {}
        synced = self._run(_fsync_close, staged)
        placed: list[StagedFile] = []
        for item, err in zip(staged, synced, strict=True):
            if err is not None:
                failed[item.rel] = err
                item.tmp.unlink(missing_ok=True)
                continue
            try:
                if item.target.exists() or not still_wanted(item):
                    item.tmp.unlink(missing_ok=True)
                    continue
                rename_new(item.tmp, item.target)  # never over a file the person made meanwhile
            except FileExistsError:
                item.tmp.unlink(missing_ok=True)  # the person was faster: the next pass plans it again
                continue
            except OSError as exc:
                failed[item.rel] = exc
                item.tmp.unlink(missing_ok=True)
                continue
            placed.append(item)
        folders = sorted({item.target.parent for item in placed})
        self._run(fsync_dir_best_effort, folders)
        return placed, failed

    def discard(self) -> None:
        """Drop every staged file (temp files removed)."""
        staged, self._staged, self._bytes = self._staged, [], 0
        for item in staged:
            with contextlib.suppress(OSError):
                os.close(item.fd)
            item.tmp.unlink(missing_ok=True)

    def _run(self, fn: Callable[[Any], None], items: Iterable[Any]) -> list[OSError | None]:
        """``fn`` on each item (on the executor when there is one); the OSError of each, or None."""
        items = list(items)

        def one(item: Any) -> OSError | None:
            try:
                fn(item)
            except OSError as exc:
                return exc
            return None

        if self._executor is None or len(items) < 2:
            return [one(i) for i in items]
        return list(self._executor.map(one, items))


def _fsync_close(item: StagedFile) -> None:
    try:
        os.fsync(item.fd)
    finally:
        os.close(item.fd)
