"""Moving one file: pull, and push by read-merge-write with read-back.

``pull`` downloads into a temp file beside the target, re-checks that the
local file did not change since the plan was made, backs the old version
up and renames.  ``push`` follows docs/architecture.md §5: read the current remote entry;
unchanged since base ⇒ upload; else fetch theirs, merge base/ours/theirs,
write the merge locally first, upload; then read back (the id must be the
one the upload returned and the content hash of the bytes sent; only when
the server's id is not that hash is the file downloaded again and compared
by sha1).  A mismatch means another writer slipped in: go round again.
What happens when both sides changed it is the resolver's decision
(:mod:`ohsync.engine.merge.resolve`); this module carries it out.
"""

from __future__ import annotations

import logging
import os
import random
import stat
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from .capabilities import file_history
from .context import MirrorContext
from .crashpoints import reach
from .errors import LocalError, NotFoundError, ProtocolError, ServerError
from .events import ConflictRecord, SyncEvent, SyncReport
from .ids import ContentHasher, seafile_file_id, sha1_bytes
from .local_replace import LocalChanged, install, write_over
from .localfs import stat_fingerprint, temp_beside
from .merge.archive import archive
from .merge.choose import is_text, merge_versions
from .merge.conflict_names import origin_of
from .merge.resolve import FIGHT_LIMIT, FIGHT_WINDOW, Copy, Facts, Outcome, Situation, decide
from .merge.sfconflict import find_own, remove_remote
from .merge.stale import (
    HISTORY_DEPTH,
    StaleBase,
    has_pushes,
    overwritten_revision,
    record_push,
    replaced_index,
    stale_base,
    stale_note,
)
from .models import RemoteEntry
from .nofollow import OutsideMirrorError, open_regular
from .paths import parent_rel
from .regression import hold_merge
from .remote_dirs import ensure_remote_dir, remote_written
from .state import Base
from .write_path import adopt_damaged, current_remote, damaged_upload, read_back_with_history, send

__all__ = ["PushOutcome", "LocalChanged", "WritersFighting", "fighting", "lift_fight_pauses", "pull", "push", "adopt",
           "ensure_remote_dir", "current_remote", "remote_written", "head_for", "merge_back", "listed_head"]

log = logging.getLogger(__name__)




class WritersFighting(LocalError):
    """A path keeps conflicting (two writers fighting): it is left alone for a while."""

    title = "Path paused"


#: State key: ISO 8601 UTC time of the person's last ``refresh``; conflicts
#: before it no longer count towards a pause (kept across restarts).
FIGHTS_FROM = "fights_from"


def _fights_since(ctx: MirrorContext) -> str:
    """ISO 8601 UTC time from which a path's conflicts count towards a pause:
    :data:`FIGHT_WINDOW` back, or the person's last ``refresh`` if later."""
    since = (datetime.now(timezone.utc) - FIGHT_WINDOW).isoformat(timespec="seconds")
    lifted = ctx.state.get_meta(FIGHTS_FROM)
    return max(since, lifted) if lifted else since


def fighting(ctx: MirrorContext, rel_path: str) -> bool:
    """Whether ``rel_path`` conflicted :data:`FIGHT_LIMIT` times recently
    (:func:`_fights_since`), so a merge that does not come out clean leaves
    it alone.  A state query, no request."""
    return ctx.state.conflicts_since(rel_path, _fights_since(ctx)) >= FIGHT_LIMIT


def lift_fight_pauses(ctx: MirrorContext) -> None:
    """The person settled the files and asked for a ``refresh``: conflicts
    recorded until now no longer count towards a pause, also after a restart."""
    ctx.state.set_meta(FIGHTS_FROM, (datetime.now(timezone.utc) + timedelta(seconds=1)).isoformat(timespec="seconds"))


@dataclass
class PushOutcome:
    """What :func:`push` did.

    :ivar action: ``upload``, ``merge`` or ``conflict``.
    :ivar conflict: the conflict record when a version was archived.
    """

    action: str
    conflict: ConflictRecord | None = None


def _read_local(ctx: MirrorContext, rel_path: str) -> tuple[bytes, tuple[int, int, int]]:
    """The bytes of the local file ``rel_path`` and the fingerprint of the very file read.

    Opened without following a link in any folder below the mirror root or
    as the file itself, and never waiting on a FIFO
    (:func:`~ohsync.engine.nofollow.open_regular`): a link or a non-file
    renamed over the name since the plan is the local file having changed,
    and its target is never read (nor sent).

    :raises LocalChanged: the file is gone, is now a link, a folder or not a
        regular file, or was written while it was read (re-plan the path).
    """
    try:
        with open_regular(ctx.local_root, rel_path) as fh:
            before = stat_fingerprint(os.fstat(fh.fileno()))
            data = fh.read()
            after = stat_fingerprint(os.fstat(fh.fileno()))
    except (FileNotFoundError, NotADirectoryError) as exc:
        raise LocalChanged(f"{rel_path} disappeared while syncing", path=rel_path) from exc
    except IsADirectoryError as exc:
        raise LocalChanged(f"{rel_path} was replaced by a folder while syncing; re-planning", path=rel_path) from exc
    except OutsideMirrorError as exc:
        raise LocalChanged(f"{rel_path} changed while syncing and is not read: {exc}", path=rel_path) from exc
    if before != after:
        raise LocalChanged(f"{rel_path} is being written; will retry", path=rel_path)
    return data, after


def _record_base(ctx: MirrorContext, rel_path: str, data: bytes, remote_id: str,
                 fingerprint: tuple[int, int, int]) -> None:
    base = Base(rel_path, False, sha1_bytes(data), remote_id, *fingerprint)
    ctx.state.set_base(base, data if is_text(data) else None)


def _local_unchanged(ctx: MirrorContext, rel_path: str, expected: tuple[int, int, int] | None) -> bool:
    """Re-stat: is the local file still what the plan saw (None = absent)?"""
    try:
        st = os.stat(ctx.local_path(rel_path), follow_symlinks=False)
    except FileNotFoundError:
        return expected is None
    return stat.S_ISREG(st.st_mode) and stat_fingerprint(st) == expected  # a link there: changed


def _replace_local(ctx: MirrorContext, rel_path: str, data: bytes, expected: tuple[int, int, int] | None,
                   mtime: float | None = None) -> tuple[int, int, int]:
    """Back up and atomically replace a local file, unless it changed meanwhile
    (:func:`~ohsync.engine.local_replace.write_over`: checked on the very file replaced)."""
    return write_over(ctx, rel_path, data, expected, mtime)


def _replace_crossed(ctx: MirrorContext, rel_path: str, merged: bytes, expected: tuple[int, int, int] | None,
                     unseen: bytes) -> tuple[int, int, int]:
    """Write ``merged`` (ours with ``unseen``, a version our verified upload
    replaced on a server that ignored ``head``) over the local file, as
    :func:`_replace_local`.

    When it cannot be written now (saved meanwhile, or a program still holds
    it open: :class:`~ohsync.engine.local_replace.LocalChanged`), ``unseen``
    is live nowhere (our upload replaced it), so it is kept in
    ``/.conflict/`` first, with a notice, and the error goes on to the caller.

    :returns: the written file's fingerprint.
    :raises LocalChanged: the local file could not be replaced (``unseen`` archived).
    :raises OSError: as :func:`_replace_local`.
    """
    try:
        return _replace_local(ctx, rel_path, merged, expected)
    except LocalChanged:
        origin = origin_of(unseen)
        copy = Copy("upload", rel_path, origin,
                    "another client's version that our upload replaced (the server ignored head); "
                    "it could not be merged here while the file was being saved", ("crossed",),
                    announce="another client's version our upload replaced was kept as {stored}")
        archive(ctx, rel_path, copy, theirs=unseen, when=datetime.now(timezone.utc))
        raise


def folder_vanished(ctx: MirrorContext, rel_path: str) -> bool:
    """Did the local folder of ``rel_path`` vanish during this pass?

    True when the pass was asked to stop (the daemon saw a local folder
    moved or deleted) and the file's folder is gone although files in it
    were synced: writing the file now would create the folder again under
    its old name (a renamed folder split in two).  A folder that was already
    gone when the pass began is re-created (a remote edit beats a local
    delete), and one that never held a synced file is simply new.
    """
    if not ctx.stopping():
        return False
    parent = parent_rel(rel_path)
    while parent:
        if ctx.local_path(parent).is_dir():
            return False
        if ctx.state.has_bases_under(parent):
            return True
        parent = parent_rel(parent)
    return False


def pull(ctx: MirrorContext, rel_path: str, remote: RemoteEntry,
         expected: tuple[int, int, int] | None) -> None:
    """Download ``rel_path`` over the local file.

    :param expected: the local fingerprint the plan saw (None: absent).
    :raises LocalChanged: the local file changed meanwhile, or its folder
        was moved or deleted here meanwhile (re-plan).
    :raises RemoteError: from the client.
    """
    target = ctx.local_path(rel_path)
    if folder_vanished(ctx, rel_path):
        raise LocalChanged(f"{parent_rel(rel_path)} was moved or deleted here meanwhile; re-planning",
                           path=rel_path)
    with temp_beside(target) as (fh, tmp):
        def progress(done: int, total: int) -> None:
            ctx.emit(SyncEvent("transfer", rel_path, "down", done=done, total=total))
        # hashed on the transfer pool while it streams in: no second read of the file;
        # the link's oid names the version, so no block ids
        hasher = ContentHasher(keep=ctx.options.readback_full_limit * 4, blocks=False)
        file_id = ctx.client.download_resumable(ctx.repo_id, ctx.remote_path(rel_path), fh,
                                                progress=progress, hasher=hasher, hash_pool=ctx.executor)
        fh.flush()
        os.fsync(fh.fileno())
        sha1, size, text = hasher.sha1(), hasher.size, hasher.kept()
        fh.close()
        if remote.mtime > 0:
            os.utime(tmp, (remote.mtime, remote.mtime))
        # the downloaded file's own fingerprint (a rename keeps it): a stat of the
        # target after the rename could be of a save that landed in between
        fp = stat_fingerprint(os.stat(tmp))
        reach("pull.downloaded")
        if not _local_unchanged(ctx, rel_path, expected):
            raise LocalChanged(f"{rel_path} changed while downloading; re-planning", path=rel_path)
    # outside the temp file's block: an error there never removes what the exchange took away
    install(ctx, rel_path, tmp, expected)
    reach("pull.replaced")
    base = Base(rel_path, False, sha1, file_id or remote.id, *fp)
    ctx.state.set_base(base, text if text is not None and is_text(text) else None)
    ctx.snapshot[rel_path] = RemoteEntry(rel_path, False, file_id or remote.id, size, remote.mtime)


def merge_back(ctx: MirrorContext, rel_path: str, remote: RemoteEntry, base: Base | None,
               report: SyncReport) -> bool:
    """Before pulling ``rel_path`` (local file unchanged): if the remote
    revision is a stale overwrite of our pushes, merge our change into it and
    push the result instead (:func:`push` says so in
    activity).

    Costs nothing for a path without a push of ours on record; else one
    download of the remote revision (and the history when it lacks ours).

    :returns: True when done that way; False: the caller pulls as planned.
    :raises RemoteError, LocalError: as :func:`push`.
    """
    if base is None or not has_pushes(ctx, rel_path):
        return False
    base_content = ctx.state.base_content(base)
    if base_content is None:
        return False  # binary or large: nothing to merge
    theirs, theirs_id = ctx.client.download_bytes(ctx.repo_id, ctx.remote_path(rel_path))
    stale = stale_base(ctx, rel_path, theirs_id, theirs, base, base_content)
    if stale is None:
        return False
    outcome = push(ctx, rel_path, base, stale=stale)
    report.merged.append(rel_path)
    report.uploaded.append(rel_path)
    if outcome.conflict is not None:
        report.conflicts.append(outcome.conflict)
    return True


def adopt(ctx: MirrorContext, rel_path: str, remote_id: str, *, edited: Base | None = None) -> None:
    """Both sides hold the same bytes: record them as the base, move nothing.

    :param edited: the base the local file was edited from, when it changed
        here since (a plan that found both sides changed): the server holding
        exactly our edit is most likely a push of ours that was never
        recorded (the daemon killed after the upload, or the upload's answer
        lost), so it is recorded as one (:func:`_replaced_revision`).
    :raises LocalChanged: the local file no longer holds ``remote_id``'s
        bytes (saved since it was hashed): recording it would take that save
        for synced, never to be uploaded, and a later download would replace it.
    """
    data, fp = _read_local(ctx, rel_path)
    if seafile_file_id(data) != remote_id:
        raise LocalChanged(f"{rel_path} was saved while syncing; re-planning", path=rel_path)
    had = ctx.state.base_content(edited) if edited is not None else None
    replaced = _replaced_revision(ctx, rel_path, remote_id, edited, had)
    with ctx.state.transaction():
        if replaced is not None:
            record_push(ctx, rel_path, remote_id, *replaced, data, had)
        _record_base(ctx, rel_path, data, remote_id, fp)


def _replaced_revision(ctx: MirrorContext, rel_path: str, remote_id: str, base: Base | None,
                       base_content: bytes | None) -> tuple[str, bytes | None] | None:
    """The server holds our local bytes ``remote_id`` although ``base``
    says otherwise: most likely an upload of ours left off the record (a
    kill, a lost answer), to be recorded as a push (:func:`record_push`) so
    that another client's later upload of a version from before it (a stale
    or blind overwrite) is merged back, not pulled over the person's lines
    (:mod:`ohsync.engine.merge.stale`).  This returns ``(file id, content)``
    of the revision that upload replaced: ``base`` unless another writer's
    version came in between (we merged it into the upload).  Its lines are
    then that writer's, not ours; counted as ours, that writer's next
    overwrite, holding them and lacking only our line, would pass for one
    made from ours and be pulled over the person's line.  None: nothing to
    record (no base: a new file nobody can have read an older version of).

    ``GET /api/v2.1/repos/{id}/file/history/`` (:data:`~.merge.stale.HISTORY_DEPTH`
    revisions) and, when the replaced revision is not ``base``, one ``GET
    …/file/revision/``; ``base`` (no request more) on a server without file
    history or when ``remote_id`` is not found in it.

    :raises RemoteError: from the client's download (the caller's pass
        retries later); a file gone meanwhile (404) or a history the server
        fails to read (5xx, a malformed answer) reads as ``base``.
    """
    if base is None or base.is_dir or base.remote_id in (None, remote_id):
        return None
    fallback = (base.remote_id, base_content)
    try:
        revisions = file_history(ctx, rel_path, limit=HISTORY_DEPTH) or []
    except NotFoundError:
        return fallback
    except (ServerError, ProtocolError) as exc:  # as for a server without the history: cannot tell
        log.info("%s: which version our unrecorded upload replaced could not be read (%s)", rel_path, exc)
        return fallback
    ids = [r.file_id for r in revisions]
    at = replaced_index(ids, ids.index(remote_id)) if remote_id in ids else None
    if at is None or ids[at] == base.remote_id:
        return fallback
    try:
        content = ctx.client.download_revision(ctx.repo_id, ctx.remote_path(rel_path), revisions[at].commit_id)
    except NotFoundError:
        return fallback
    return ids[at], content


def head_for(ctx: MirrorContext, rel_path: str, *, fresh: bool = False) -> tuple[str | None, bool]:
    """The library commit an update of ``rel_path`` is based on: the head the
    pass read first, unless we wrote ``rel_path`` since (or ``fresh``): then
    ``GET /api2/repos/{id}/`` once more.  Read *before* the file is read, so
    the version merged with is at least as new as that commit's.

    :returns: ``(head commit id or None, whether it was read just now)``.
    """
    if not fresh and ctx.head and rel_path not in ctx.head_stale:
        return ctx.head, False
    ctx.set_head(ctx.client.repo_info(ctx.repo_id).head_commit_id or None, listed=False)
    ctx.head_stale.clear()
    return ctx.head, True


def _upload(ctx: MirrorContext, rel_path: str, data: bytes, exists: bool, head: str | None = None) -> str:
    """Upload ``data`` to ``rel_path`` (an update based on commit ``head``);
    returns the new file id."""
    remote_path = ctx.remote_path(rel_path)
    ctx.emit(SyncEvent("transfer", rel_path, "up", done=0, total=len(data)))
    if not exists:
        ensure_remote_dir(ctx, parent_rel(rel_path))
    result = send(ctx, rel_path, data, len(data), exists=exists, head=head)
    remote_written(ctx, rel_path)
    if not exists and result.path != remote_path:
        # Someone created the path since we looked: the server stored
        # ours under an auto-renamed name.  Remove that stray copy (its
        # bytes are still local) and go round again to merge.
        ctx.client.delete(ctx.repo_id, result.path)
        raise _Raced()
    ctx.emit(SyncEvent("transfer", rel_path, "up", done=len(data), total=len(data)))
    return str(result.id)


class _Raced(Exception):
    """The remote changed between our read and our write."""


#: Seconds the head a scan listed the snapshot with (``ctx.listed_head``)
#: vouches for it.  A push of a path the snapshot shows unchanged since its
#: base (or absent, for a new file), and that we did not write since that
#: listing (:meth:`~ohsync.engine.context.MirrorContext.listed_head_for`),
#: takes the remote entry from the snapshot instead of reading
#: ``file/detail`` first, and its update carries that head: a save costs the
#: update and the read-back.  Safe at any age because of the head: an edit
#: that landed after it stays live on the server and ours becomes an
#: SFConflict file, which the read-back finds (a new file is uploaded
#: without replace, so a name taken meanwhile is auto-renamed and caught the
#: same way); a merge reads the file first as before.  On a server that
#: ignored ``head`` the window in which another writer's edit could be
#: replaced unseen is the time since that listing (at most a poll interval
#: while the daemon polls) instead of one round trip.
LISTING_TRUST = float("inf")

#: State meta key: the server was seen keeping a concurrent edit for an update with ``head``.
HEAD_HONOURED = "head_honoured"


def listed_head(ctx: MirrorContext, rel_path: str, base: Base | None) -> str | None:
    """The head an update of ``rel_path`` may carry without reading the file
    first (see :data:`LISTING_TRUST`): the snapshot's, when the snapshot shows
    the path as its base (absent, for a new file) and nothing of ours was
    written there since that listing; when our own verified write is all that
    changed it since, the commit that write is known by
    (:meth:`~ohsync.engine.context.MirrorContext.written_head_for`); else None."""
    known = ctx.snapshot.get(rel_path)
    unchanged = (known is None and base is None) or (
        known is not None and base is not None and not known.is_dir and known.id == base.remote_id)
    if not unchanged or ctx.head_age() >= LISTING_TRUST:
        return None
    head = ctx.listed_head_for(rel_path)
    if head is None and known is not None:
        head = ctx.written_head_for(rel_path, known.id)  # saved again before the next listing
    return head


def _check_history(ctx: MirrorContext, action: str, *, riding: bool = False) -> bool:
    """Whether to read the file's history after a verified update (see
    :attr:`EngineOptions.history_check`).

    :param riding: the read-back reads the file's history anyway (``push``):
        the check costs no request of its own, so by default it is made
        after plain updates too, until the server was seen honouring ``head``.
    """
    if ctx.options.history_check is not None:
        return ctx.options.history_check
    return (riding or action != "upload") and ctx.state.get_meta(HEAD_HONOURED) != "1"


def push(ctx: MirrorContext, rel_path: str, base: Base | None, *,
         stale: StaleBase | None = None) -> PushOutcome:
    """Read-merge-write of one local file (docs/architecture.md §5).

    Updates carry ``head`` (:func:`head_for`), so the server never overwrites
    an edit that landed after our read: it keeps that edit live and stores
    ours as an SFConflict file, which the read-back finds
    (:func:`~ohsync.engine.merge.sfconflict.find_own`), deletes, and the next round
    merges the live version in.

    A remote version that lacks pushes of ours (a stale overwrite,
    :func:`~ohsync.engine.merge.stale.stale_base`) is merged with the
    version our oldest lacked push replaced, so our change goes into it; the
    activity line says so.

    :param base: the path's base (None for a new file).
    :param stale: the judgement :func:`~ohsync.engine.merge.stale.merge_back`
        already made of the remote version (saves a second one).
    :returns: what was done.
    :raises LocalChanged: the local file changed meanwhile (re-plan later).
    :raises RemoteError: from the client; base does not advance.
    :raises LocalError: attempts exhausted (another writer keeps racing).
    :raises HeldByRollback: the library went back to an older state and the
        server's version differs from the base: nothing is merged or
        written until ``ohsync resync`` (:func:`~ohsync.engine.regression.keep_newer`).
    """
    action = "upload"
    conflict: ConflictRecord | None = None
    base_content = ctx.state.base_content(base) if base is not None else None
    had = base_content  # the version we edited: what a record of this push says we had
    agreed = True  # base is still the version both sides last agreed on (not one read in this push)
    merged_stale: StaleBase | None = None
    for attempt in range(ctx.options.max_attempts):
        if attempt:
            time.sleep(random.uniform(0.05, 0.3) * attempt)  # jitter against a racing writer
        ours, fp = _read_local(ctx, rel_path)
        known = ctx.snapshot.get(rel_path)
        listed = listed_head(ctx, rel_path, base) if attempt == 0 else None
        head: str | None
        if listed is not None:
            head, fetched, remote = listed, False, known  # as listed at that head, the base: see LISTING_TRUST
        else:
            head, fetched = head_for(ctx, rel_path, fresh=attempt > 0)
            remote = current_remote(ctx, rel_path)
        if not fetched and remote is not None and (known is None or known.id != remote.id):
            # Changed since the listing: the head we hold may be older than
            # the version we are about to merge with.
            head, _ = head_for(ctx, rel_path, fresh=True)
            remote = current_remote(ctx, rel_path)
        ours_id = seafile_file_id(ours)
        if remote is not None and remote.id == ours_id:
            # already there: an upload of ours whose record was lost (a kill, a lost answer)
            replaced = _replaced_revision(ctx, rel_path, remote.id, base, base_content)
            with ctx.state.transaction():
                if replaced is not None:
                    record_push(ctx, rel_path, remote.id, *replaced, ours, had)
                _record_base(ctx, rel_path, ours, remote.id, fp)
            ctx.snapshot[rel_path] = remote
            return PushOutcome(action, conflict)
        content = ours
        read_content = base_content
        if remote is not None and (base is None or remote.id != base.remote_id):
            if agreed:
                hold_merge(ctx, rel_path)  # a rollback's older version must not be merged into ours
            theirs, theirs_id = ctx.client.download_bytes(ctx.repo_id, ctx.remote_path(rel_path))
            read_content = theirs
            merge_base = base_content
            if agreed:
                found = stale if stale is not None and stale.theirs_id == theirs_id else \
                    stale_base(ctx, rel_path, theirs_id, theirs, base, base_content)
                if found is not None:
                    merge_base, merged_stale = found.content, found
            result = merge_versions(rel_path, merge_base, ours, theirs)
            if result.damaged:
                ctx.state.set_issue("damaged", rel_path, result.damaged)
            decision = decide(Facts(Situation.EDIT, rel_path, ours=ours, theirs=theirs, merge=result,
                                    recent_conflicts=ctx.state.conflicts_since(rel_path, _fights_since(ctx))))
            if decision.outcome is Outcome.PAUSED:
                raise WritersFighting(
                    f"{rel_path} conflicted {FIGHT_LIMIT} times within {FIGHT_WINDOW.seconds // 60} minutes "
                    "(two writers keep changing it); it is left alone on both sides for now. Settle the "
                    "file, then run `ohsync refresh`.", path=rel_path)
            if decision.copy is None:
                assert decision.live is not None  # merged (or theirs won): the bytes to keep
                content = decision.live
                action = "merge"
                if content != ours:
                    fp = _replace_local(ctx, rel_path, content, fp)
            else:
                if decision.live is not None:
                    # Every part that merged stays live; only the conflicting
                    # parts' other version is left to the conflict copy.
                    content = decision.live
                    if content != ours:
                        fp = _replace_local(ctx, rel_path, content, fp)
                conflict = archive(ctx, rel_path, decision.copy, theirs=theirs)
                action = "conflict"
            base_content = theirs  # theirs is now accounted for
            base = Base(rel_path, False, sha1_bytes(theirs), theirs_id)
            agreed = False
            # Merging and archiving took requests and time: if yet another
            # version arrived meanwhile, merge that one too before writing.
            latest = current_remote(ctx, rel_path)
            if latest is None or latest.id != theirs_id:
                continue
        try:
            new_id = _upload(ctx, rel_path, content, exists=remote is not None, head=head)
        except _Raced:
            continue
        except NotFoundError:
            if listed is None:
                raise
            continue  # deleted since the listing: the next round looks it up
        reach("push.uploaded")
        check = remote is not None and _check_history(ctx, action, riding=True)
        verified, revisions = read_back_with_history(ctx, rel_path, new_id, sha1=sha1_bytes(content),
                                                     size=len(content), file_id=seafile_file_id(content),
                                                     limit=2 if check else 1)
        if verified is not None:
            reach("push.verified")
            if check and remote is not None:
                crossed = overwritten_revision(ctx, rel_path, new_id, remote.id, revisions)
                if crossed is not None:
                    # The server ignored head and ours replaced a version we
                    # never saw: merge it in and write again.
                    unseen = ctx.client.download_revision(ctx.repo_id, ctx.remote_path(rel_path), crossed[0])
                    older = stale_base(ctx, rel_path, crossed[1], unseen, base, read_content)
                    if older is not None:
                        merged_stale = older
                    result = merge_versions(rel_path, read_content if older is None else older.content,
                                            content, unseen)
                    crossing = decide(Facts(Situation.EDIT, rel_path, ours=content, theirs=unseen, merge=result))
                    if crossing.copy is None:
                        assert crossing.live is not None
                        fp = _replace_crossed(ctx, rel_path, crossing.live, fp, unseen)
                        base = Base(rel_path, False, sha1_bytes(content), new_id)
                        base_content, action = content, "merge"
                        agreed = False
                        ctx.snapshot[rel_path] = RemoteEntry(rel_path, False, new_id, len(content))
                        continue
                    conflict = archive(ctx, rel_path, crossing.copy, theirs=unseen)
                    action = "conflict"
                    if crossing.live is not None and crossing.live != content:
                        # What merged stays live; write that and upload it.
                        fp = _replace_local(ctx, rel_path, crossing.live, fp)
                        base, base_content = Base(rel_path, False, sha1_bytes(content), new_id), content
                        agreed = False
                        ctx.snapshot[rel_path] = RemoteEntry(rel_path, False, new_id, len(content))
                        continue
            with ctx.state.transaction():  # both or neither: a base without its push record would let a
                # stale overwrite of it be pulled over the person's lines (a kill in between)
                record_push(ctx, rel_path, new_id, remote.id if remote is not None else None, read_content,
                            content, had)
                _record_base(ctx, rel_path, content, new_id, fp)
            if merged_stale is not None:
                ctx.emit(SyncEvent("synced", rel_path, "up", action="merge", message=stale_note(merged_stale)))
            return PushOutcome(action, conflict)
        own = find_own(ctx, rel_path, new_id) if remote is not None else None
        if own is not None:
            # The server kept an edit that landed after our read; ours is
            # still local, so its SFConflict copy goes and the next round
            # merges the live version in.
            remove_remote(ctx, own)
            ctx.state.set_meta(HEAD_HONOURED, "1")
            ctx.emit(SyncEvent("synced", rel_path, "up", action="merge",
                               message="another edit landed while uploading; merging it"))
        elif (copy := damaged_upload(ctx, rel_path, content, new_id)) is not None:
            # The server stored our upload wrong (e.g. a stray trailing \r): a failed
            # upload, sent again on top of what it holds; never merged as theirs.
            base, base_content, agreed = adopt_damaged(ctx, rel_path, copy), copy.content, False
        # Another writer slipped in between upload and read-back.  The base
        # stays the last agreed version: their write may not contain ours,
        # and merging against it again keeps both.
    raise LocalError(f"{rel_path}: another writer kept changing it; will try again later",
                     title="Busy file", path=rel_path)
