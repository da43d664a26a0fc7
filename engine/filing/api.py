"""What filing needs from its surroundings, and nothing more.

Filing (``engine/filing*.py``) sits on the engine, not in it: it sees the
mirror only through :class:`MirrorAPI` (implemented over a running engine
by :class:`ohsync.engine.mirror_api.EngineMirror`; tests pass a fake) and
asks whether a dropped file is finished through a :data:`ReadyCheck` the
daemon injects (:class:`ohsync.daemon.stability.StabilityGate`).
``tests/test_import_rules.py`` checks that no ``engine/filing*.py`` imports
the engine's insides (context, state, transfers, sync, client).

Paths are mirror-relative (``rel``: ``Files/_inbox/x.pdf``) unless named
remote (library-absolute, ``/Files/_inbox/x.pdf``).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Protocol

from ..events import SyncEvent
from ..models import RemoteEntry

__all__ = ["DOWNLOADING", "WRITING", "MirrorAPI", "ReadyCheck"]

#: :data:`ReadyCheck` answer: a partial download or lock file (by name or companion).
DOWNLOADING = "downloading"
#: :data:`ReadyCheck` answer: some process has the file open for writing.
WRITING = "writing"

#: ``ready(path)`` → None when ``path`` may be filed now, else why not
#: (:data:`DOWNLOADING` or :data:`WRITING`).
ReadyCheck = Callable[[Path], "str | None"]


class MirrorAPI(Protocol):
    """The mirror as filing sees it.  Runs in the thread that owns the
    engine (the daemon's sync worker), never during a sync pass.

    :ivar local_root: the local mirror folder.
    :ivar remote_root: the mirrored folder in the library (``/`` for all of it).
    """

    local_root: Path
    remote_root: str

    # -- reading ---------------------------------------------------------------------------

    def remote_file(self, rel: str) -> RemoteEntry | None:
        """The server's entry of file ``rel`` now (``file/detail``), or None when absent.

        :raises RemoteError: the server could not be asked.
        """

    def list_folder(self, rel: str) -> list[str]:
        """Names in the server's folder ``rel`` now; ``[]`` when it does not exist.

        :raises RemoteError: the server could not be asked.
        """

    def known(self, rel: str) -> bool:
        """True when the engine's last view of the server holds ``rel``."""

    def find_copy(self, sha1: str, file_id: str, under: str) -> str | None:
        """A file already synced (local sha1) or on the server (content id)
        with this content, below folder ``under`` (``""``: anywhere); None."""

    def free_space(self) -> int | None:
        """Bytes the account may still store; None when unlimited or unknown.

        :raises RemoteError: the server could not be asked.
        """

    # -- writing a new document ------------------------------------------------------------------

    def upload_new(self, rel: str, fh: BinaryIO, size: int, *, resume: bool, attempts: int, chunk_size: int,
                   progress: Callable[[int, int], None], before_chunk: Callable[[int, int], None]) -> tuple[str, str]:
        """Upload ``size`` bytes of ``fh`` as a new file (never replacing;
        its folder is created first), in chunks above ``chunk_size``,
        through the engine's one write path.

        :param resume: continue a partial upload an earlier run started.
        :param attempts: failures in a row of one chunk before giving up.
        :param progress: ``progress(done_bytes, total_bytes)`` after each chunk.
        :param before_chunk: ``before_chunk(first, end)`` before each chunk;
            raising stops the upload.
        :returns: ``(stored rel, file id)``; the rel differs when the server
            auto-renamed the file because the name was taken meanwhile.
        :raises QuotaError: out of quota.
        :raises RemoteError: anything else from the server.
        """

    def verify(self, entry: RemoteEntry, *, sha1: str, size: int, file_id: str) -> bool:
        """The engine's one read-back of a file just read with
        :meth:`remote_file`: does the server hold exactly the bytes with this
        sha1, size and content id?  When it does, the engine records
        ``entry`` as its view of the server.

        :raises RemoteError: from the server.
        """

    def delete_remote(self, rel: str) -> None:
        """Remove file ``rel`` from the server (our own upload that came out wrong)."""

    # -- text files in the mirror and the mirror's copy --------------------------------------------

    def pull(self, rel: str) -> bool:
        """Download file ``rel`` into the mirror when the server has it.

        :returns: True when it was downloaded.
        """

    def push(self, rel: str) -> str:
        """Push the mirror's file ``rel`` by read-merge-write, as the sync would.

        :returns: what was done: ``upload``, ``merge`` or ``conflict``.
        :raises LocalError: the file changed meanwhile, or writers keep racing.
        :raises RemoteError: from the server.
        :raises HeldByRollback: the library on the server went back to an
            older state (:func:`~ohsync.engine.regression.hold_push`); the
            file stays in the mirror until ``ohsync resync``.
        """

    def write_over(self, rel: str, data: bytes, expected: tuple[int, int, int]) -> None:
        """Replace the mirror's file ``rel`` with ``data`` (after a local backup
        of the version there) if it is still the version with the stat
        fingerprint ``expected`` at the instant it is replaced.

        :raises LocalError: it was saved meanwhile (it is left as it is).
        """

    def adopt(self, rel: str, *, sha1: str, remote_id: str, size: int) -> None:
        """The mirror's file ``rel`` is the server's version ``remote_id``:
        record it as synced (neither uploaded nor downloaded next pass).

        :raises ~ohsync.engine.local_replace.LocalChanged: the file there is no longer that version (gone,
            saved, or a link now: never followed); nothing is recorded.
        """

    def emit(self, event: SyncEvent) -> None:
        """Hand an event to the daemon (activity, progress); never raises."""
