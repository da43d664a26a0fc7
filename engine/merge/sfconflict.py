"""Seafile's own conflict files: ``<stem> (SFConflict <user> <time>).<ext>``.

The server makes one when an update sent with ``head`` finds that the file
changed since that commit (``docs/seafile-api.md`` §5.4): the other
edit stays live and the upload is stored beside it under that name.  Other
Seafile clients (the desktop client, the web editor) make them too.  None of
them stays on either side:

* our own (found by :func:`find_own` after a read-back that failed) is
  deleted once we know its content is still local; the push merges the live
  version into ours and uploads again;
* any other (:func:`fold_foreign`, before a pass plans its files) is merged
  into the file it belongs to when that merges cleanly, else archived in
  ``/.conflict/`` like every other conflict (the resolver decides, situation
  ``SEAFILE_COPY`` of :mod:`ohsync.engine.merge.resolve`); it is never downloaded as a normal
  file into the mirror.  One lacking pushes of ours (its writer read a
  version before them) is merged against the version it was edited from,
  as a stale overwrite of the live file is (:mod:`.stale`).
"""

from __future__ import annotations

import contextlib
import os

from ..backups import backup_file
from ..context import MirrorContext
from ..errors import LocalError, NotFoundError, OhsyncError, classify, local_error
from ..events import SyncEvent, SyncReport
from ..local_replace import LocalChanged, write_over
from ..localfs import stat_fingerprint
from ..nofollow import open_regular
from ..paths import from_remote, parent_rel
from ..remote_dirs import remote_written
from ..special_dirs import is_under
from ..state import Base
from .archive import archive
from .choose import TEXT_LIMIT, merge_versions
from .conflict_names import CONFLICT_DIR, SFCONFLICT
from .resolve import Facts, Situation, decide
from .stale import StaleBase, pushes_lacked, stale_base, stale_note

__all__ = ["SFCONFLICT", "original_of", "find_own", "remove_remote", "fold_foreign"]



def original_of(rel_path: str) -> str | None:
    """The rel path an SFConflict file belongs to, or None for other names
    (``a/notes (SFConflict u@x 2026-12-01-08-02-24).md`` → ``a/notes.md``)."""
    folder, _, name = rel_path.rpartition("/")
    m = SFCONFLICT.match(name)
    if m is None or not m.group("stem"):
        return None
    original = m.group("stem") + (m.group("ext") or "")
    return f"{folder}/{original}" if folder else original


def find_own(ctx: MirrorContext, rel_path: str, uploaded_id: str) -> str | None:
    """After a read-back found another version live: the SFConflict file
    beside ``rel_path`` holding exactly ``uploaded_id`` (our upload), or None.

    One listing of the parent folder (``GET /api2/repos/{id}/dir/``).
    """
    parent = parent_rel(rel_path)
    try:
        listing = ctx.client.list_dir(ctx.repo_id, ctx.remote_path(parent))
    except NotFoundError:
        return None
    for entry in listing.entries:
        rel = from_remote(ctx.remote_root, entry.path)
        if rel and not entry.is_dir and entry.id == uploaded_id and original_of(rel) == rel_path:
            return rel
    return None


def remove_remote(ctx: MirrorContext, rel_path: str) -> None:
    """Delete an SFConflict file on the server (``DELETE …/file/``) and forget it."""

    ctx.client.delete(ctx.repo_id, ctx.remote_path(rel_path))
    ctx.snapshot.pop(rel_path, None)
    remote_written(ctx, rel_path)


def _drop_local(ctx: MirrorContext, rel_path: str) -> None:
    """A local copy of an SFConflict file (an older ohsync pulled it) goes to
    the backups; its base is forgotten."""
    path = ctx.local_path(rel_path)
    if path.is_file():
        if ctx.options.backup_dir is not None:
            backup_file(ctx.local_root, rel_path, ctx.options.backup_dir, ctx.options.library_name)
        os.unlink(path)
    ctx.state.delete_base(rel_path)


def fold_foreign(ctx: MirrorContext, report: SyncReport) -> set[str]:
    """Fold every SFConflict file the snapshot lists (outside ``/.conflict/``)
    into the file it belongs to.

    The file's content is merged with the local version of its path against
    that path's base (or, when it lacks pushes of ours, the version it was
    edited from: :func:`_merge_base`): a clean merge is written locally (the pass then pushes
    it like any local edit) and the SFConflict file is deleted on the server;
    otherwise it is moved into ``/.conflict/`` and recorded as a conflict.

    :returns: the rel paths handled (the caller leaves them out of planning).
    """
    found = sorted(rel for rel, entry in ctx.snapshot.items()
                   if "(SFConflict " in rel and not entry.is_dir and not is_under(rel, CONFLICT_DIR)
                   and original_of(rel))
    for rel in found:
        try:
            _fold_one(ctx, rel, original_of(rel) or "", report)
        except (OhsyncError, OSError) as exc:
            failure = classify(local_error(exc, rel) if isinstance(exc, OSError) else exc)
            if failure.scope != "path":
                raise  # a login, the mirror, an unreachable server: the pass ends
            report.errors.append((rel, failure.message))
    return set(found)


def _fold_one(ctx: MirrorContext, rel: str, original: str, report: SyncReport) -> None:
    entry = ctx.snapshot[rel]
    local = ctx.local_path(original)
    base = ctx.state.get_base(original)
    if not local.is_file() and base is None and original in ctx.snapshot:
        return  # its file is not here yet (a first pass): fold it next pass
    ours: bytes | None = None
    theirs: bytes | None = None
    result = None
    fp = None
    if entry.size <= TEXT_LIMIT and local.is_file():
        theirs, _ = ctx.client.download_bytes(ctx.repo_id, ctx.remote_path(rel))
        with open_regular(ctx.local_root, original) as fh:  # never a link's target
            fp = stat_fingerprint(os.fstat(fh.fileno()))
            ours = fh.read()
        base_content = ctx.state.base_content(base) if base is not None else None
        merge_base, stale, undecided = _merge_base(ctx, rel, original, theirs, base, base_content)
        if not undecided:
            result = merge_versions(original, merge_base, ours, theirs)
    decision = decide(Facts(Situation.SEAFILE_COPY, original, ours=ours, theirs=theirs, merge=result, source=rel))
    if decision.copy is None:
        assert decision.live is not None and ours is not None
        if decision.live != ours:
            try:
                write_over(ctx, original, decision.live, fp)
            except LocalChanged:
                raise LocalError(f"{original} changed while a Seafile conflict file was merged; "
                                 "will try again", path=original) from None
        if decision.drop_source:
            remove_remote(ctx, rel)
        _drop_local(ctx, rel)
        report.merged.append(original)
        note = f"merged the Seafile conflict file {rel.rpartition('/')[2]}"
        ctx.emit(SyncEvent("synced", original, "down", action="merge",
                           message=note if stale is None else f"{note}: {stale_note(stale)}"))
        return
    if decision.live is not None and decision.live != ours:
        # What merged stays live (pushed by the next pass); the whole
        # conflict file is archived below.  A save landing meanwhile stays
        # live instead (the archived copy keeps the other side).
        with contextlib.suppress(LocalChanged):
            write_over(ctx, original, decision.live, fp)
    record = archive(ctx, original, decision.copy, remote=entry)
    _drop_local(ctx, rel)
    report.conflicts.append(record)


def _merge_base(ctx: MirrorContext, rel: str, original: str, theirs: bytes, base: Base | None,
                base_content: bytes | None) -> tuple[bytes | None, StaleBase | None, bool]:
    """The base to merge the SFConflict file ``rel`` (content ``theirs``) with.

    The server made it because its writer's upload named a commit older than
    the live version: often one from before pushes of ours, so theirs lacks
    our lines without having removed them.  Merged against our base, they
    would read as its deletion and leave the live file.  When theirs lacks a
    push of ours on record, the base is the version it was edited from
    (:func:`~ohsync.engine.merge.stale.stale_base`), so our lines stay.

    :returns: ``(base content, the stale judgement or None, undecided)``;
        undecided is True when theirs lacks a push of ours but no base for it
        is found (made on purpose from a version that held ours, or another
        client archived ours): it is not merged, only archived whole.
    :raises RemoteError: from the client (the file history, a revision).
    """
    if base is None or pushes_lacked(ctx, original, theirs) == 0:
        return base_content, None, False
    stale = stale_base(ctx, original, ctx.snapshot[rel].id, theirs, base, base_content)
    if stale is None:
        return base_content, None, True
    return stale.content, stale, False
