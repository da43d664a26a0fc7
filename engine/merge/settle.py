"""Settling a recorded conflict the way the person chose (docs/architecture.md §4).

Three choices, one for each button of the local page and each
``ohsync resolve --keep`` value:

* ``live`` — keep the live file as it is; the archived copy (the other
  version) is deleted on both sides, which moves it into ``/.trash/``
  like any deletion made in the mirror.
* ``other`` — the archived copy's bytes become the live file; ``merged`` —
  the bytes the person wrote (an editor prefilled with both versions)
  become the live file.  Either way the live version they replace is kept
  in ``/.trash/<path>`` (uploaded and read back, never dropped), the new
  bytes are written into the mirror (after a backup) and pushed through
  :func:`~ohsync.engine.transfer.push`, the same read-merge-write with
  read-back every local edit takes, and then the archived copy is deleted
  as for ``live``.

The conflict's record goes once its archived copy is gone from both sides.
Every step re-checks what it acts on; a file that changed since the person
looked (the archived copy edited, the live file saved meanwhile) stops the
resolution with :class:`ResolveRefused` before anything was replaced.

Reads of the two versions never follow a symbolic link nor leave the
mirror (:func:`read_version`).  Call these on the thread that owns the
engine (the daemon's sync worker).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, BinaryIO

from ..context import MirrorContext
from ..errors import OhsyncError
from ..events import ConflictRecord, SyncEvent
from ..ids import file_hashes
from ..local_replace import install, remove, write_over
from ..localfs import stat_fingerprint, temp_beside
from ..nofollow import OutsideMirrorError, open_regular
from ..paths import normalize_rel, parent_rel
from ..regression import HeldByRollback, hold_push
from ..special_dirs import working_dir
from ..state import Base
from ..sync.deletes import TRASH_DIR, delete_remote, trash_path, trashed_key
from ..transfer import LocalChanged, PushOutcome, ensure_remote_dir, push
from ..transfer_large import LARGE_FILE, push_large
from ..write_path import read_back, send
from .conflict_names import _split, is_conflict_path

__all__ = ["KEEP_CHOICES", "ResolveRefused", "Resolution", "Version", "find_conflict", "read_version",
           "resolve_conflict"]

#: The choices of :func:`resolve_conflict`.
KEEP_CHOICES = ("live", "other", "merged")
_CHUNK = 1024 * 1024


class ResolveRefused(OhsyncError):
    """The conflict cannot be settled as asked (nothing was changed)."""

    title = "Conflict not resolved"
    scope = "path"
    behaviour = "needs_person"


@dataclass
class Resolution:
    """What :func:`resolve_conflict` did; every write in it is verified on the server.

    :ivar path: the live file.
    :ivar archived: the archived copy that was settled (now in the trash).
    :ivar keep: ``live``, ``other`` or ``merged``.
    :ivar trashed: where the archived copy went in ``/.trash/`` (None: already gone).
    :ivar replaced: where the replaced live version is kept in ``/.trash/``
        (None for ``live``, or when the live bytes did not change).
    :ivar action: what the push of the live file did (``upload``, ``merge``,
        ``conflict``), or None when it was not written.
    :ivar new_conflict: the archived copy of an edit that landed on the
        server meanwhile and did not merge (a new conflict), or None.
    """

    path: str
    archived: str
    keep: str
    trashed: str | None = None
    replaced: str | None = None
    action: str | None = None
    new_conflict: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The socket's ``resolve`` answer (``verified`` is always True: it answers after read-back)."""
        return {"path": self.path, "archived": self.archived, "keep": self.keep, "verified": True,
                "trashed": self.trashed, "replaced": self.replaced, "action": self.action,
                "new_conflict": self.new_conflict}


def find_conflict(records: list[ConflictRecord], path: str) -> ConflictRecord:
    """The open conflict that ``path`` names: its archived copy, or its live
    file when exactly one conflict of that file is open.

    :param path: a library-relative path (leading ``/`` allowed).
    :raises ResolveRefused: no open conflict has that path, or the live file
        has several (the message lists their archived copies).
    """
    rel = normalize_rel(path.strip().lstrip("/"))
    for record in records:
        if record.archived == rel:
            return record
    live: list[ConflictRecord] = []
    for record in records:
        if record.path == rel and all(r.archived != record.archived for r in live):
            live.append(record)  # each archived copy once, however often it was recorded
    if len(live) == 1:
        return live[0]
    if live:
        copies = ", ".join(r.archived for r in live)
        raise ResolveRefused(f"{rel} has {len(live)} open conflicts; name one of its archived copies: {copies}",
                             path=rel)
    raise ResolveRefused(f"no open conflict for {rel}; `ohsync conflicts` lists them", path=rel)


def _no_links(ctx: MirrorContext, rel: str) -> None:
    """Refuse a path with a symbolic link (or a non-folder) on the way: nothing outside the mirror."""
    current = ctx.local_root
    parts = rel.split("/")
    if not rel or ".." in parts:
        raise ResolveRefused(f"{rel!r} is not a path inside the mirror", path=rel)
    for i, part in enumerate(parts):
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return
        if stat.S_ISLNK(st.st_mode):
            raise ResolveRefused(f"{rel} goes through a symbolic link; ohsync does not follow links", path=rel)
        if i < len(parts) - 1 and not stat.S_ISDIR(st.st_mode):
            raise ResolveRefused(f"{rel}: {'/'.join(parts[:i + 1])} is not a folder", path=rel)


@dataclass(frozen=True)
class Version:
    """One version of a conflict as it is in the mirror.

    :ivar data: its first bytes (all of them when ``complete``).
    :ivar size: bytes; ``mtime``: seconds; ``sha256``: of the whole file (hex).
    """

    data: bytes
    size: int
    mtime: float
    sha256: str
    complete: bool


def _open_file(ctx: MirrorContext, rel: str) -> BinaryIO | None:
    """Open a file of the mirror for reading, never through a link nor waiting
    on a FIFO (:func:`~ohsync.engine.nofollow.open_regular`); None: gone."""
    _no_links(ctx, rel)
    try:
        return open_regular(ctx.local_root, rel)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OutsideMirrorError:
        raise ResolveRefused(f"{rel} is a symbolic link or not a regular file; ohsync does not follow links",
                             path=rel) from None
    except OSError as exc:
        raise ResolveRefused(f"cannot read {rel}: {exc.strerror}", path=rel) from None


def read_version(ctx: MirrorContext, rel: str, limit: int | None = None) -> Version | None:
    """A file in the mirror, read without following a link; hashed whole,
    streamed, keeping at most ``limit`` bytes (None: all).

    :returns: the version, or None when the file is gone.
    :raises ResolveRefused: a link or a non-file on the way, or ``..``.
    """
    rel = normalize_rel(rel)
    fh = _open_file(ctx, rel)
    if fh is None:
        return None
    with fh:
        st = os.fstat(fh.fileno())
        digest = hashlib.sha256()
        kept: list[bytes] = []
        room = limit
        while chunk := fh.read(_CHUNK):
            digest.update(chunk)
            if room is None:
                kept.append(chunk)
            elif room > 0:
                kept.append(chunk[:room])
                room -= len(chunk[:room])
    data = b"".join(kept)
    return Version(data, st.st_size, st.st_mtime, digest.hexdigest(), len(data) == st.st_size)


def _copy_in(ctx: MirrorContext, source: str, rel: str, seen: tuple[int, int, int] | None) -> None:
    """Copy the mirror's file ``source`` over ``rel`` atomically (streamed,
    fsynced, :func:`~ohsync.engine.local_replace.install`: unless ``rel`` is
    no longer the version ``seen``)."""
    fh = _open_file(ctx, source)
    if fh is None:
        raise ResolveRefused(f"{source} is gone", path=source)
    with fh, temp_beside(ctx.local_path(rel)) as (out, tmp):
        shutil.copyfileobj(fh, out, _CHUNK)
        out.flush()
        os.fsync(out.fileno())
    install(ctx, rel, tmp, seen)


def _push(ctx: MirrorContext, rel: str, base: Base | None) -> PushOutcome:
    """Push as a pass would: small files by read-merge-write, large ones streamed."""
    if os.lstat(ctx.local_path(rel)).st_size > LARGE_FILE:  # the push itself refuses a link
        return push_large(ctx, rel, base)
    return push(ctx, rel, base)


def _trash_copy(ctx: MirrorContext, rel: str) -> str | None:
    """Delete the archived copy ``rel`` on both sides: into ``/.trash/`` on the
    server, removed from the mirror after a backup.  Returns its trash path."""
    base = ctx.state.get_base(rel)
    path = ctx.local_path(rel)
    moved: str | None = None
    if base is not None and not base.is_dir:
        try:
            fp = stat_fingerprint(os.lstat(path))
        except FileNotFoundError:
            fp = None
        if fp is not None and fp != base.fingerprint():
            raise ResolveRefused(f"the archived copy {rel} was edited since it was synced; let it sync "
                                 "(or undo the edit), then try again", path=rel)
        try:
            moved = delete_remote(ctx, rel, base)
        except LocalChanged:
            raise ResolveRefused(f"the archived copy {rel} changed on the server; let it sync, then try again",
                                 path=rel) from None
    try:
        fp = stat_fingerprint(os.lstat(path))
    except FileNotFoundError:
        fp = None
    if fp is not None:
        with contextlib.suppress(FileNotFoundError, LocalChanged):
            remove(ctx, rel, fp)   # after a backup; a save landing meanwhile stays
    ctx.state.delete_base(rel)
    return moved


def _keep_replaced(ctx: MirrorContext, rel: str, seen: tuple[int, int, int] | None) -> str:
    """Keep the live version about to be replaced in ``/.trash/<path>`` on the
    server (the trash is not mirrored: nothing is written into the mirror),
    uploaded as a new file and read back; its trash time is recorded for
    ``ohsync trash purge``.

    :param seen: the fingerprint of the live file the person looked at; the
        file is read without following links and must still be that version.
    :raises ResolveRefused: it is gone, a link, not a regular file, or another version.
    """
    top = working_dir(ctx, TRASH_DIR)
    first = trash_path(rel, trash_path(rel, False, folder_name=top) in ctx.snapshot, folder_name=top)
    folder, _, name = first.rpartition("/")
    stem, ext = _split(name)
    target, n = first, 2
    while target in ctx.snapshot:  # the same path replaced twice within one second
        target, n = f"{folder}/{stem}-{n}{ext}", n + 1
    fh = _open_file(ctx, rel)  # the very file checked below is sent, never a link's target
    if fh is None:
        raise ResolveRefused(f"{rel} was removed meanwhile; look at it again, then choose", path=rel)
    with fh:
        if stat_fingerprint(os.fstat(fh.fileno())) != seen:
            raise ResolveRefused(f"{rel} was saved meanwhile; look at it again, then choose", path=rel)
        sha1, file_id, size = file_hashes(fh)
        fh.seek(0)
        ensure_remote_dir(ctx, parent_rel(target))
        content: bytes | BinaryIO = fh.read() if size <= LARGE_FILE else fh
        result = send(ctx, target, content, size, exists=False)
    stored = result.path.lstrip("/")
    if ctx.remote_root.strip("/"):
        stored = result.path[len(ctx.remote_path("")):].lstrip("/")
    if read_back(ctx, stored, result.id, sha1=sha1, size=size, file_id=file_id) is None:
        raise OhsyncError(f"the server did not keep the replaced version of {rel} in the trash as sent; "
                          "nothing was replaced", path=rel)
    ctx.state.set_meta(trashed_key(stored), datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ"))
    return stored


def _write_live(ctx: MirrorContext, rel: str, new: bytes | str, seen: tuple[int, int, int] | None) -> None:
    """Write the chosen version over the live file (``new``: its bytes, or the
    mirror path of the archived copy), unless it was saved since the person looked."""
    path = ctx.local_path(rel)
    try:
        now = stat_fingerprint(os.lstat(path))
    except FileNotFoundError:
        now = None
    if now != seen:
        raise ResolveRefused(f"{rel} was saved meanwhile; look at it again, then choose", path=rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:  # backed up first; a save landing meanwhile stays live (checked on the file replaced)
        if isinstance(new, bytes):
            write_over(ctx, rel, new, seen)
        else:
            _copy_in(ctx, new, rel, seen)
    except LocalChanged:
        raise ResolveRefused(f"{rel} was saved meanwhile; look at it again, then choose", path=rel) from None


def _unchanged(ctx: MirrorContext, rel: str, expected: str | None, which: str) -> None:
    """Refuse when the file no longer holds what the person was shown (``expected``: its SHA-256)."""
    if expected is None:
        return
    found = read_version(ctx, rel, 0)
    if found is None or found.sha256 != expected:
        raise ResolveRefused(f"the {which} ({rel}) changed since it was shown; look at it again, then choose",
                             path=rel)


def resolve_conflict(ctx: MirrorContext, record: ConflictRecord, keep: str, content: bytes | None = None, *,
                     expected_live: str | None = None, expected_other: str | None = None) -> Resolution:
    """Settle one conflict; returns once the server holds the result (read back).

    :param record: the open conflict (from :meth:`StateStore.conflicts`).
    :param keep: ``live`` (the archived copy goes), ``other`` (the archived
        copy becomes live) or ``merged`` (``content`` becomes live).
    :param content: the bytes for ``merged``.
    :param expected_live: the SHA-256 (hex) of the live file as the person
        saw it; another content now refuses (None: not checked).
    :param expected_other: the same for the archived copy.
    :returns: what was done.
    :raises ResolveRefused: a bad choice, a version that changed since, a
        link on the way; nothing was replaced then.
    :raises OhsyncError: from the client or the disk (a step may have
        happened: whatever was replaced is in ``/.trash/`` already, and the
        next pass carries the rest).
    """
    if keep not in KEEP_CHOICES:
        raise ResolveRefused(f"choose how to resolve: {', '.join(KEEP_CHOICES)} (not {keep!r})", path=record.path)
    if keep == "merged" and content is None:
        raise ResolveRefused("merging by hand needs the merged text", path=record.path)
    if is_conflict_path(record.path) or not is_conflict_path(record.archived):
        raise ResolveRefused(f"{record.archived} is not an archived copy of {record.path}", path=record.path)
    result = Resolution(record.path, record.archived, keep)
    _unchanged(ctx, record.path, expected_live, "live file")
    _unchanged(ctx, record.archived, expected_other, "archived copy")
    if keep != "live":
        other = read_version(ctx, record.archived, 0)
        new: bytes | str
        if keep == "other":
            if other is None:
                raise ResolveRefused(f"the archived copy {record.archived} is gone; nothing to take", path=record.path)
            new, new_sha = record.archived, other.sha256
        else:
            assert content is not None
            new, new_sha = content, hashlib.sha256(content).hexdigest()
        _no_links(ctx, record.path)
        try:
            seen: tuple[int, int, int] | None = stat_fingerprint(os.lstat(ctx.local_path(record.path)))
        except FileNotFoundError:
            seen = None
        live = read_version(ctx, record.path, 0)
        if live is None or live.sha256 != new_sha:
            try:  # merged with a rollback's older version, the chosen version would lose its newer lines
                hold_push(ctx, record.path, ctx.state.get_base(record.path))
            except HeldByRollback:
                raise ResolveRefused("the library on the server went back to an older state, so nothing was "
                                     "changed: run `ohsync resync` first (it keeps the newer version from "
                                     "either side), then settle this conflict", path=record.path) from None
            if live is not None:
                result.replaced = _keep_replaced(ctx, record.path, seen)
            _write_live(ctx, record.path, new, seen)
            outcome = _push(ctx, record.path, ctx.state.get_base(record.path))
            result.action = outcome.action
            if outcome.conflict is not None:
                result.new_conflict = outcome.conflict.archived
    result.trashed = _trash_copy(ctx, record.archived)
    ctx.state.forget_conflicts([record.archived])
    ctx.state.replace_remote_snapshot(ctx.snapshot.values())  # as a pass would: a crash now costs nothing
    message = {"live": "kept the live version", "other": "took the other version",
               "merged": "merged by hand"}[keep]
    ctx.emit(SyncEvent("synced", record.path, "up", action="resolve", message=f"conflict resolved: {message}"))
    return result
