"""What the file history says about writes that crossed ours (docs/architecture.md §5, step 5).

The Web API has no compare-and-swap for other clients: one that read a file,
then uploaded its edit without ``head`` after we wrote ours, replaces our
revision with an edit of the revision *before* it (a blind overwrite).  The
server keeps every revision, so this module looks it up:

* :func:`record_push` remembers, per path, the revision our last verified
  push made and the one it replaced (state meta ``pushed:<path>``);
* :func:`blind_overwrite_base` is asked before a pull: when the pulled
  revision directly follows one of ours in the file's history and lacks
  (part of) our change, it returns the revision before ours as the base to
  merge with, so both sides' additions stay live;
* :func:`overwritten_revision` is the check after a write on servers that
  ignore ``head`` (:attr:`EngineOptions.history_check`): the revision ours
  replaced must be the one we merged with.

Requests: only for paths whose last push was ours and that changed again:
one ``file/history`` (v2.1, ``limit``), one download of the older revision
when its content is no longer kept locally, one download of the new one.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from .capabilities import file_history
from .context import MirrorContext
from .errors import NotFoundError
from .events import SyncEvent, SyncReport
from .ids import sha1_bytes
from .models import RemoteEntry
from .state import Base

__all__ = ["record_push", "blind_overwrite_base", "lacks_change", "merge_back", "overwritten_revision"]

_HISTORY_DEPTH = 5


def _key(rel_path: str) -> str:
    return f"pushed:{rel_path}"


def record_push(ctx: MirrorContext, rel_path: str, new_id: str, replaced_id: str | None,
                replaced_content: bytes | None) -> None:
    """After a verified push: ``new_id`` is ours, it replaced ``replaced_id``
    (None: the file was new).  The replaced content is kept as a base blob
    (content-addressed) so a later merge-back needs no download."""
    if replaced_id is None or replaced_id == new_id:
        ctx.state.set_meta(_key(rel_path), None)  # new file, or an update that changed nothing
        return
    sha1 = ctx.state.keep_blob(replaced_content) if replaced_content is not None else None
    ctx.state.set_meta(_key(rel_path), json.dumps({"ours": new_id, "replaced": replaced_id, "sha1": sha1}))


def _pushed(ctx: MirrorContext, rel_path: str) -> dict[str, Any] | None:
    raw = ctx.state.get_meta(_key(rel_path))
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def blind_overwrite_base(ctx: MirrorContext, rel_path: str, remote: RemoteEntry,
                         base: Base | None) -> tuple[Base, bytes] | None:
    """Is the remote revision a blind overwrite of our last push?

    True when the base is the revision our last push made, the file's
    history shows the remote revision directly after ours and ours directly
    after the one it replaced, and merging (that older revision, ours, the
    remote one) gives something other than the remote revision (it lacks
    part of our change).

    :returns: ``(older base, its content)`` to merge with, or None (pull as usual).
    :raises RemoteError: from the client.
    """
    pushed = _pushed(ctx, rel_path)
    if pushed is None or base is None or remote.id == base.remote_id:
        return None
    if base.remote_id != pushed.get("ours"):
        ctx.state.set_meta(_key(rel_path), None)  # agreed on a later revision since
        return None
    ours = ctx.state.base_content(base)
    if ours is None:
        return None  # binary or large: nothing to merge
    try:
        revisions = file_history(ctx, rel_path, limit=_HISTORY_DEPTH)
    except NotFoundError:
        return None
    if revisions is None:
        return None  # a server without file history: pulled (merged) as usual
    ids = [r.file_id for r in revisions]
    if len(ids) < 3 or ids[0] != remote.id or ids[1] != pushed["ours"] or ids[2] != pushed["replaced"]:
        return None
    older = ctx.state.base_content(Base(rel_path, False, pushed.get("sha1"), pushed["replaced"], has_blob=True)) \
        if pushed.get("sha1") else None
    if older is None:
        try:
            older = ctx.client.download_revision(ctx.repo_id, ctx.remote_path(rel_path), revisions[2].commit_id)
        except NotFoundError:
            return None  # no older revisions served: pulled (merged) as usual
    theirs, theirs_id = ctx.client.download_bytes(ctx.repo_id, ctx.remote_path(rel_path))
    if theirs_id != remote.id:
        return None  # changed again meanwhile: the next pass looks again
    if not lacks_change(older, ours, theirs):
        return None  # the new revision holds (some of) our change: it was based on ours
    return Base(rel_path, False, sha1_bytes(older), pushed["replaced"]), older


def lacks_change(older: bytes, ours: bytes, theirs: bytes) -> bool:
    """True when ``theirs`` shows none of the change ``older`` → ``ours``:
    no line ours added is in it, every line ours removed still is (blank
    lines do not count).  Then ``theirs`` was made from ``older``, not from
    ours.  Any trace of our change means it was made from ours (edited,
    maybe partly undone, on purpose): that is pulled as usual."""
    a, b, t = older.splitlines(), ours.splitlines(), theirs.splitlines()
    present = set(t)
    signals = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        for line in b[j1:j2]:
            if line.strip():
                if line in present and line not in a:
                    return False  # a line we added is there
                signals += 1
        for line in a[i1:i2]:
            if line.strip() and line not in b:
                if line not in present:
                    return False  # a line we removed is gone there too
                signals += 1
    return signals > 0 and theirs != older


def merge_back(ctx: MirrorContext, rel_path: str, remote: RemoteEntry, base: Base | None,
               report: SyncReport) -> bool:
    """Before pulling (or merging) ``rel_path``: if the remote revision blindly
    overwrote our last push, push a merge against the revision before ours
    (local edits included) and say so in activity.

    :returns: True when done that way; False: the caller goes on as planned.
    :raises RemoteError, LocalError: as :func:`~ohsync.engine.transfer.push`.
    """
    from .transfer import push

    older = blind_overwrite_base(ctx, rel_path, remote, base)
    if older is None:
        return False
    outcome = push(ctx, rel_path, older[0], base_content=older[1])
    report.merged.append(rel_path)
    report.uploaded.append(rel_path)
    if outcome.conflict is not None:
        report.conflicts.append(outcome.conflict)
    ctx.emit(SyncEvent("synced", rel_path, "up", action="merge",
                       message="another client had written over our last upload from the version before it; "
                               "merged both edits"))
    return True


def overwritten_revision(ctx: MirrorContext, rel_path: str, new_id: str,
                         merged_with: str | None) -> tuple[str, str] | None:
    """After a verified update on a server that may ignore ``head``: the
    ``(commit id, file id)`` of a revision ours replaced without having
    merged it, or None when the revision before ours is ``merged_with``.

    One request: ``GET /api/v2.1/repos/{id}/file/history/?limit=2`` (none,
    and None, on a server without it: :mod:`.capabilities`).
    """
    if new_id == merged_with:
        return None  # the update changed nothing: no commit, nothing replaced
    revisions = file_history(ctx, rel_path, limit=2)
    if not revisions or revisions[0].file_id != new_id or len(revisions) < 2:
        return None
    before = revisions[1]
    if before.file_id in (merged_with, new_id):
        return None
    return before.commit_id, before.file_id
