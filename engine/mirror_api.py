"""The engine side of :class:`~ohsync.engine.filing.api.MirrorAPI`: filing's
narrow view of one running mirror, built on the sync's own stages (one
write path and read-back, :mod:`.write_path`; read-merge-write,
:func:`.transfer.push`).

Every write keeps the engine's view of the server current and stores it,
as a pass would, so a crash right after costs nothing.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from .context import MirrorContext
from .errors import NotFoundError
from .events import SyncEvent
from .ids import sha1_bytes
from .local_replace import LocalChanged, write_over
from .localfs import stat_fingerprint
from .merge.choose import is_text
from .models import RemoteEntry
from .nofollow import OutsideMirrorError, open_regular
from .paths import from_remote, parent_rel
from .regression import hold_push
from .state import Base
from .transfer import ensure_remote_dir, pull, push, remote_written
from .write_path import current_remote, holds_content, send

__all__ = ["EngineMirror", "for_engine"]


def for_engine(engine: Any) -> EngineMirror:
    """The :class:`EngineMirror` of a :class:`~ohsync.engine.sync.engine.SyncEngine`."""
    return EngineMirror(engine.ctx)


class EngineMirror:
    """:class:`~ohsync.engine.filing.api.MirrorAPI` over a mirror's context
    (see there for each method).

    :param ctx: the running mirror's context.
    """

    def __init__(self, ctx: MirrorContext) -> None:
        self._ctx = ctx
        self.local_root: Path = ctx.local_root
        self.remote_root: str = ctx.remote_root

    def _persist(self) -> None:
        self._ctx.state.replace_remote_snapshot(self._ctx.snapshot.values())

    # -- reading ---------------------------------------------------------------------------

    def remote_file(self, rel: str) -> RemoteEntry | None:
        """See :meth:`MirrorAPI.remote_file <ohsync.engine.filing.api.MirrorAPI.remote_file>`."""
        return current_remote(self._ctx, rel)

    def list_folder(self, rel: str) -> list[str]:
        """See :meth:`MirrorAPI.list_folder <ohsync.engine.filing.api.MirrorAPI.list_folder>`."""
        ctx = self._ctx
        try:
            listing = ctx.client.list_dir(ctx.repo_id, ctx.remote_path(rel))
        except NotFoundError:
            return []
        return [e.name for e in listing.entries]

    def known(self, rel: str) -> bool:
        """See :meth:`MirrorAPI.known <ohsync.engine.filing.api.MirrorAPI.known>`."""
        return rel in self._ctx.snapshot

    def find_copy(self, sha1: str, file_id: str, under: str) -> str | None:
        """See :meth:`MirrorAPI.find_copy <ohsync.engine.filing.api.MirrorAPI.find_copy>`."""
        def below(rel: str) -> bool:
            return under == "" or rel.startswith(under + "/")

        for rel, base in sorted(self._ctx.state.all_bases().items()):
            if not base.is_dir and base.sha1 == sha1 and below(rel):
                return rel
        for rel, entry in sorted(self._ctx.snapshot.items()):
            if not entry.is_dir and entry.id == file_id and below(rel):
                return rel
        return None

    def free_space(self) -> int | None:
        """See :meth:`MirrorAPI.free_space <ohsync.engine.filing.api.MirrorAPI.free_space>`."""
        free: int | None = self._ctx.client.account_info().free
        return free

    # -- writing a new document ------------------------------------------------------------------

    def upload_new(self, rel: str, fh: BinaryIO, size: int, *, resume: bool, attempts: int, chunk_size: int,
                   progress: Callable[[int, int], None], before_chunk: Callable[[int, int], None]) -> tuple[str, str]:
        """See :meth:`MirrorAPI.upload_new <ohsync.engine.filing.api.MirrorAPI.upload_new>`."""
        ctx = self._ctx
        folder = parent_rel(rel)
        ensure_remote_dir(ctx, folder)

        def upload(resume: bool) -> Any:
            return send(ctx, rel, fh, size, exists=False, resume=resume, attempts=attempts, chunk_size=chunk_size,
                        progress=progress, before_chunk=before_chunk)

        try:
            result = upload(resume)
        except NotFoundError:
            # the folder vanished (a stale snapshot): create it for real and retry once
            ctx.client.mkdir(ctx.repo_id, ctx.remote_path(folder), parents=True)
            result = upload(False)
        stored = from_remote(ctx.remote_root, result.path) or rel
        return stored, str(result.id)

    def verify(self, entry: RemoteEntry, *, sha1: str, size: int, file_id: str) -> bool:
        """See :meth:`MirrorAPI.verify <ohsync.engine.filing.api.MirrorAPI.verify>`."""
        if not holds_content(self._ctx, entry, sha1=sha1, size=size, file_id=file_id):
            return False
        self._ctx.snapshot[entry.path] = entry
        remote_written(self._ctx, entry.path)
        self._persist()
        return True

    def delete_remote(self, rel: str) -> None:
        """See :meth:`MirrorAPI.delete_remote <ohsync.engine.filing.api.MirrorAPI.delete_remote>`."""
        self._ctx.client.delete(self._ctx.repo_id, self._ctx.remote_path(rel))

    # -- text files in the mirror and the mirror's copy --------------------------------------------

    def pull(self, rel: str) -> bool:
        """See :meth:`MirrorAPI.pull <ohsync.engine.filing.api.MirrorAPI.pull>`."""
        remote = current_remote(self._ctx, rel)
        if remote is None:
            return False
        pull(self._ctx, rel, remote, None)
        return True

    def push(self, rel: str) -> str:
        """See :meth:`MirrorAPI.push <ohsync.engine.filing.api.MirrorAPI.push>`."""
        base = self._ctx.state.get_base(rel)
        hold_push(self._ctx, rel, base)  # a journal merged with a rollback's older version loses newer lines
        outcome = push(self._ctx, rel, base)
        self._persist()
        return outcome.action

    def write_over(self, rel: str, data: bytes, expected: tuple[int, int, int]) -> None:
        """See :meth:`MirrorAPI.write_over <ohsync.engine.filing.api.MirrorAPI.write_over>`
        (:func:`~ohsync.engine.local_replace.write_over`: checked on the very file replaced)."""
        write_over(self._ctx, rel, data, expected)

    def adopt(self, rel: str, *, sha1: str, remote_id: str, size: int) -> None:
        """See :meth:`MirrorAPI.adopt <ohsync.engine.filing.api.MirrorAPI.adopt>`.

        The file is read through one descriptor opened without following
        links; its fingerprint is that very file's, and its bytes (when read:
        ``size`` up to ``readback_full_limit``) must be ``sha1``.

        :raises LocalChanged: the file is gone, a link or a special file now,
            or not the version filed (nothing is recorded: the sync takes it
            as a local file of its own).
        """
        ctx = self._ctx
        data = None
        try:
            with open_regular(ctx.local_root, rel) as fh:
                fp = stat_fingerprint(os.fstat(fh.fileno()))
                if size <= ctx.options.readback_full_limit:
                    data = fh.read()
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError, OutsideMirrorError) as exc:
            raise LocalChanged(f"{rel} changed before it was recorded as synced ({exc})", path=rel) from exc
        if fp[0] != size or (data is not None and sha1_bytes(data) != sha1):
            raise LocalChanged(f"{rel} changed before it was recorded as synced; the sync takes it as a local "
                               "change", path=rel)
        content = data if data is not None and is_text(data) else None
        ctx.state.set_base(Base(rel, False, sha1, remote_id, *fp), content)
        known = ctx.snapshot.get(rel)
        if known is None or known.id != remote_id:
            ctx.snapshot[rel] = RemoteEntry(rel, False, remote_id, size, int(fp[1] // 1_000_000_000))
            remote_written(ctx, rel)
        parts = rel.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            ctx.snapshot.setdefault(sub, RemoteEntry(sub, True, ""))
        self._persist()

    def emit(self, event: SyncEvent) -> None:
        """See :meth:`MirrorAPI.emit <ohsync.engine.filing.api.MirrorAPI.emit>`."""
        self._ctx.emit(event)
