"""Stale overwrites: other writers' uploads made from a version older than
ours (docs/architecture.md §5, step 5).

The Web API has no compare-and-swap for other clients: one that read a file,
then uploaded its edit without ``head`` after we wrote ours, replaces our
revision with an edit of an *older* one (a stale, or blind, overwrite),
however many of our revisions came in between; a read-modify-write bot does
it again and again from the same old read (a burst).  This module makes sure
such an overwrite never takes our change out of the live file:

* :func:`record_push` keeps, per path, a bounded record of our verified
  pushes (state meta ``pushed:<path>``): the id we wrote and the id it
  replaced, with both contents kept as blobs (content-addressed);
* :func:`stale_base` is asked before merging a remote revision: from the kept
  contents alone it finds the pushes of ours the revision lacks (none of the
  lines a push added are in it, or at most half: a stale writer that made
  one of the same changes still lacks the rest), newest first, up to the newest
  push whose change it holds; their oldest's replaced version, less the lines that
  push merged in and the revision lacks, is the base to merge
  with, so *our* change (what ours replaced → ours, for every push the stale
  writer lacks) goes into the newest remote version and the newest remote
  writer's content stays too.  It reads the file history (one
  ``file/history`` request, only when something is lacking) to tell a
  deliberate removal from a stale overwrite: a revision made from a version
  that held our change (the one the remote revision replaced, or our base)
  carries that version's own lines.  Without history (404) the base alone
  serves;
* a revision that lacks our newest push while a conflict copy of the path
  holds exactly that push (:func:`archived_elsewhere`) is no stale
  overwrite: another client met our upload, could not merge it and kept its
  own edit live; the file converges on that version, our pushes on record
  are forgotten and the conflict is recorded here too
  (:func:`accept_archived`);
* the pull-side entry, :func:`~ohsync.engine.transfer.merge_back`: a stale
  overwrite of a path whose local file did not change is merged and pushed
  instead of pulled;
* :func:`overwritten_revision` is the check after a write on servers that
  ignore ``head`` (:attr:`EngineOptions.history_check`).

Where a deliberate removal of our lines and a stale overwrite cannot be told
apart, the lines are kept and the activity line says so.
"""

from __future__ import annotations

import difflib
import json
import logging
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from ..capabilities import file_history
from ..context import MirrorContext
from ..errors import NotFoundError, ProtocolError, ServerError
from ..events import ConflictRecord, SyncEvent
from ..ids import sha1_bytes
from ..state import Base
from .archive import copies_of

__all__ = ["StaleBase", "record_push", "move_pushes", "has_pushes", "pushes_lacked", "made_from_ours", "stale_base",
           "push_evidence",
           "overwritten_revision", "stale_note", "archived_elsewhere", "accept_archived", "ARCHIVED_ELSEWHERE",
           "MAX_PUSHES", "HISTORY_DEPTH", "replaced_index"]

log = logging.getLogger(__name__)

#: Verified pushes remembered per path (each with two kept blobs).
MAX_PUSHES = 16

#: Revisions of the file history read to find what a stale revision replaced.
HISTORY_DEPTH = 20


#: Seafile's id of an empty file: what a push of a new file replaced.
EMPTY_FILE_ID = "0" * 40


def _key(rel_path: str) -> str:
    return f"pushed:{rel_path}"


@dataclass(frozen=True)
class _Push:
    """One verified push of ours: ``ours`` (file id) replaced ``replaced``;
    their contents are kept as blobs under these sha1s (None: not kept), and
    so is ``had``: the version we had agreed on before (what we edited)."""

    ours: str
    ours_sha1: str | None
    replaced: str
    replaced_sha1: str | None
    had_sha1: str | None = None


@dataclass(frozen=True)
class StaleBase:
    """What a stale revision lacks of ours, and the base to merge it with.

    :ivar theirs_id: the remote revision judged (file id).
    :ivar base: the version our oldest lacked push replaced (as a base).
    :ivar content: that version's bytes.
    :ivar lacked: how many of our pushes the remote revision lacks.
    :ivar from_history: the file history was read for the judgement.
    """

    theirs_id: str
    base: Base
    content: bytes
    lacked: int
    from_history: bool


def _load(ctx: MirrorContext, rel_path: str) -> list[_Push]:
    raw = ctx.state.get_meta(_key(rel_path))
    try:
        value = json.loads(raw) if raw else []
    except ValueError:
        return []
    if isinstance(value, dict):  # the one-push record of earlier versions
        value = [{"ours": value.get("ours"), "replaced": value.get("replaced"),
                  "replaced_sha1": value.get("sha1")}]
    out: list[_Push] = []
    for item in value if isinstance(value, list) else []:
        if isinstance(item, dict) and isinstance(item.get("ours"), str) and isinstance(item.get("replaced"), str):
            out.append(_Push(item["ours"], item.get("ours_sha1"), item["replaced"], item.get("replaced_sha1"),
                             item.get("had_sha1")))
    return out


def record_push(ctx: MirrorContext, rel_path: str, new_id: str, replaced_id: str | None,
                replaced_content: bytes | None, content: bytes | None = None, had: bytes | None = None) -> None:
    """After a verified push: ``new_id`` (holding ``content``) is ours, it
    replaced ``replaced_id`` (holding ``replaced_content``; None: the file
    was new, which starts the record afresh with a push measured from an
    empty file, or made anew after a delete on the server, a push measured
    from ``had`` added to the earlier ones; either way a later overwrite
    from an older read still counts as stale); ``had`` is the version we
    had agreed on before it (the base we edited).  The contents are kept as blobs, so judging a later stale
    overwrite needs no download; the oldest pushes beyond
    :data:`MAX_PUSHES` are forgotten."""
    if replaced_id is None:
        if had is None:
            ctx.state.set_meta(_key(rel_path), None)  # a new file: nothing earlier counts
        # else a file deleted (or moved away) on the server while we changed it, made anew:
        # our earlier pushes stay on record, so an overwrite made from a version before them
        # still lacks them (else their lines would read as its deletion). Our change is
        # measured from the version we had edited, or from nothing for a new file.
        replaced_id, replaced_content = EMPTY_FILE_ID, had if had is not None else b""
        had = replaced_content
    if replaced_id == new_id:
        return  # an update that changed nothing
    pushes = _load(ctx, rel_path)
    keep = ctx.state.keep_blob
    pushes.append(_Push(new_id, keep(content) if content is not None else None, replaced_id,
                        keep(replaced_content) if replaced_content is not None else None,
                        keep(had) if had is not None else None))
    rows = [{"ours": p.ours, "ours_sha1": p.ours_sha1, "replaced": p.replaced, "replaced_sha1": p.replaced_sha1,
             "had_sha1": p.had_sha1} for p in pushes[-MAX_PUSHES:]]
    ctx.state.set_meta(_key(rel_path), json.dumps(rows))


def move_pushes(ctx: MirrorContext, old: str, new: str) -> None:
    """The file at ``old`` was moved or renamed to ``new`` (on either side):
    its record of our pushes goes with it, replacing whatever ``new`` had (a
    file gone from there before), so a stale overwrite of the moved file is
    still judged against our pushes (without it, what the stale writer lacks
    of ours would read as its deletion).  Call it with the move of the base,
    in the same transaction."""
    if old != new:
        ctx.state.set_meta(_key(new), ctx.state.get_meta(_key(old)))
        ctx.state.set_meta(_key(old), None)


#: Share of a file's distinct non-blank lines that must come from our versions
#: on record, or of one such version's lines it must keep, for
#: :func:`made_from_ours`.
MADE_FROM_OURS = 2 / 3


def made_from_ours(ctx: MirrorContext, rel_path: str, data: bytes) -> bool:
    """Was ``data`` (another path's content) made from a version of
    ``rel_path`` on our push record (what we pushed there, what our pushes
    replaced, what we had edited)?

    Yes when most of its distinct non-blank lines (:data:`MADE_FROM_OURS`)
    are lines of those versions, one at least a line of its text
    (:func:`_text_lines`), or when it keeps most of one version's lines,
    two at least of its text (however much later writers added).  A memory
    file made from the same template shares its frontmatter and headings,
    often most of a short file, and none of its observations.  No request
    (the kept blobs)."""
    theirs = {ln for ln in _lines(data) if ln.strip()}
    if not theirs:
        return False
    text = _text_lines(data)
    ours: set[bytes] = set()
    kept_most = False
    for push in _load(ctx, rel_path):
        for sha1 in (push.ours_sha1, push.replaced_sha1, push.had_sha1):
            blob = _blob(ctx, sha1)
            if blob is None:
                continue
            version = {ln for ln in _lines(blob) if ln.strip()}
            ours |= version
            kept = version & theirs
            kept_most = kept_most or (len(kept) >= MADE_FROM_OURS * len(version) and len(kept & text) >= 2)
    shared = theirs & ours
    return kept_most or (len(shared) >= MADE_FROM_OURS * len(theirs) and bool(shared & text))


def _text_lines(data: bytes) -> set[bytes]:
    """The non-blank lines of ``data`` outside a leading frontmatter block
    (``---`` … ``---``) that are not Markdown headings: what was written in
    the file rather than the shape every file of its kind has."""
    lines = _lines(data)
    start = 0
    if lines and lines[0].strip() == b"---":
        end = next((i for i in range(1, len(lines)) if lines[i].strip() in (b"---", b"...")), None)
        start = 0 if end is None else end + 1
    return {ln for ln in lines[start:] if ln.strip() and not _HEADING.match(ln)}


#: A Markdown (ATX) heading line.
_HEADING = re.compile(rb"\s{0,3}#{1,6}(\s|$)")


def has_pushes(ctx: MirrorContext, rel_path: str) -> bool:
    """True when a verified push of ours to ``rel_path`` is on record."""
    return bool(_load(ctx, rel_path))


def pushes_lacked(ctx: MirrorContext, rel_path: str, theirs: bytes) -> int:
    """How many of our newest pushes to ``rel_path`` on record ``theirs``
    (another version's bytes) lacks: 0 when it holds the newest one's change
    or nothing can be told (see :func:`push_evidence`)."""
    return _lacked(ctx, _load(ctx, rel_path), theirs)[0]


def _blob(ctx: MirrorContext, sha1: str | None) -> bytes | None:
    if not sha1:
        return None
    return ctx.state.base_content(Base("", False, sha1, "", has_blob=True))


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines()


def push_evidence(older: bytes, ours: bytes, theirs: bytes, earlier: frozenset[bytes] = frozenset(),
                  first: frozenset[bytes] | None = None, had: frozenset[bytes] | None = None) -> bool | None:
    """Does ``theirs`` hold the change ``older`` → ``ours`` (one push of ours)?

    True when it has most of the lines ours added (a later edit of ours may
    have rewritten a few), or, for a push that added nothing, every line ours
    removed is gone from it too; False when it has at most half of the
    lines ours added, or still has a line ours removed (made from an older
    version, or our change only in part: a stale writer that made one of the
    same changes, such as a bumped ``modified:`` or the same finished task
    deleted, still lacks the rest); None when it cannot tell.  Taking a
    partial match for "lacks" merges our change back in: at worst a line the
    other writer removed on purpose is live again, never a line of ours gone.

    :param earlier: lines of every earlier version on record (earlier
        pushes of ours and what they replaced): a line ours adds that is
        among them was put back by a merge, not written by us, and its
        presence is no evidence (its absence still is: ours had it).
    :param first: lines of the oldest version on record (None: ``older``);
        a line ours removed that came later than that may never have been
        in a version older than ours, so its absence is no evidence.
    :param had: lines of the version we had edited (None: ``older``): a
        line ours dropped that we never had (the other side's, archived in
        a conflict copy) is no removal of ours.
    Blank lines never count.
    """
    a, b = _lines(older), _lines(ours)
    present, before, after = set(_lines(theirs)), set(a), set(b)
    kept = missing = 0          # lines ours added that theirs has / lacks
    gone = still = False        # lines ours removed that theirs lacks too / still has
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        for line in b[j1:j2]:
            if line.strip() and line not in before:
                if line not in present:
                    missing += 1
                elif line not in earlier:
                    kept += 1
        for line in a[i1:i2]:
            if line.strip() and line not in after:
                if line in present:
                    still = True
                elif (first is None or line in first) and (had is None or line in had):
                    gone = True
    if kept > missing:
        return True
    if missing or still:
        return False
    return True if gone else None


def _lacked(ctx: MirrorContext, pushes: list[_Push], theirs: bytes) -> tuple[int, _Push | None, bytes | None]:
    """How many of ``pushes`` (newest last) ``theirs`` lacks, newest first up
    to the newest one whose change it holds; the oldest lacked push and the
    content it replaced.  Only the newest pushes whose contents are kept
    count (binary, large, or an earlier version's record end the run)."""
    kept: list[tuple[bytes, bytes]] = []
    hads: list[frozenset[bytes] | None] = []
    for push in reversed(pushes):
        older, ours = _blob(ctx, push.replaced_sha1), _blob(ctx, push.ours_sha1)
        if older is None or ours is None:
            break
        kept.insert(0, (older, ours))
        had = _blob(ctx, push.had_sha1)
        hads.insert(0, frozenset(_lines(had)) if had is not None else None)
    pushes = pushes[len(pushes) - len(kept):]
    if not kept:
        return 0, None, None
    first = frozenset(_lines(kept[0][0]))
    count, oldest, content = 0, None, None
    for k in range(len(kept) - 1, -1, -1):
        older, ours = kept[k]
        earlier: set[bytes] = set()
        for r, o in kept[:k]:
            earlier.update(_lines(r))
            earlier.update(_lines(o))
        verdict = push_evidence(older, ours, theirs, frozenset(earlier), first, hads[k])
        if verdict is True:
            break
        if verdict is False:
            count += 1
            oldest, content = pushes[k], older
    return count, oldest, content


def _made_from(version: bytes, theirs: bytes, ours_lines: set[bytes]) -> bool:
    """Does ``theirs`` carry lines of ``version`` that none of our recorded
    versions has (that version's own lines, so it was made from it)?"""
    own = {ln for ln in _lines(version) if ln.strip() and ln not in ours_lines}
    return bool(own & set(_lines(theirs)))


def replaced_index(ids: list[str], at: int) -> int | None:
    """In a file history's ids (newest first), the index of the revision
    that ``ids[at]`` replaced: the first after it with another id (Seafile
    lists a rename or move of the file again with the same id), or None when
    the history read ends first."""
    file_id = ids[at]
    while at < len(ids) and ids[at] == file_id:
        at += 1
    return at if at < len(ids) else None


def _predecessor(ctx: MirrorContext, rel_path: str, theirs_id: str, known: dict[str, bytes]
                 ) -> tuple[bool, bytes | None, bytes | None]:
    """``(history read, content of the revision theirs replaced, content of
    the revision that one replaced)`` (each None when unknown) from ``GET
    /api/v2.1/repos/{id}/file/history/`` and up to two ``GET
    …/file/revision/`` downloads; (False, None, None) without history (404,
    noted once by :mod:`.capabilities`) or when the file is gone."""
    try:
        revisions = file_history(ctx, rel_path, limit=HISTORY_DEPTH)
    except NotFoundError:
        return False, None, None
    if revisions is None:
        return False, None, None
    ids = [r.file_id for r in revisions]
    if theirs_id not in ids:
        return True, None, None
    at = ids.index(theirs_id)

    def content(i: int | None) -> bytes | None:
        if i is None:
            return None
        if revisions[i].file_id in known:
            return known[revisions[i].file_id]
        try:
            data: bytes = ctx.client.download_revision(ctx.repo_id, ctx.remote_path(rel_path), revisions[i].commit_id)
        except NotFoundError:
            return None
        return data

    before_at = replaced_index(ids, at)
    before = content(before_at)
    return True, before, content(replaced_index(ids, before_at)) if before_at is not None and before is not None \
        else None


def stale_base(ctx: MirrorContext, rel_path: str, theirs_id: str, theirs: bytes, base: Base | None,
               base_content: bytes | None) -> StaleBase | None:
    """Is the remote revision ``theirs`` (id ``theirs_id``) a stale overwrite
    that lacks pushes of ours?

    :param base: the path's base (the version both sides last agreed on).
    :param base_content: its content, when kept.
    :returns: the base to merge ``theirs`` with, or None: it holds our
        change (or was made on purpose from a version that held it), or
        nothing of ours is on record: merge or pull as usual.
    :raises RemoteError: from the client (history, a revision download).
    """
    pushes = _load(ctx, rel_path)
    if not pushes or base is None:
        return None
    count, oldest, older = _lacked(ctx, pushes, theirs)
    if oldest is None or older is None:
        return None
    copy = archived_elsewhere(ctx, rel_path, pushes)
    if copy is not None:
        # Another client met our newest upload, found it did not merge with
        # its own edit, archived it and kept its edit live: theirs was made
        # knowing ours, which stays in /.conflict/. Merging ours back would
        # make a conflict copy of theirs in turn, and so on (two clients
        # fighting); the file converges on theirs instead.
        accept_archived(ctx, rel_path, copy)
        return None
    known: dict[str, bytes] = {}
    ours_lines: set[bytes] = set()
    for push in pushes:
        for fid, sha1 in ((push.ours, push.ours_sha1), (push.replaced, push.replaced_sha1)):
            data = _blob(ctx, sha1)
            if data is not None:
                known[fid] = data
                ours_lines.update(_lines(data))
    # A revision made from a version that held our change, carrying that
    # version's own lines, removed ours on purpose: first our base (no
    # request), then the revision it replaced in the file history.
    held = [base_content] if base_content is not None and _lacked(ctx, pushes, base_content)[0] == 0 else []
    if any(_made_from(v, theirs, ours_lines) for v in held):
        return None
    from_history, before, inherited = _predecessor(ctx, rel_path, theirs_id, known)
    # the lines that revision only took over from the one before it are not its own: a bot
    # rewriting from one old read carries its earlier lines, which our upload had merged in
    # (an upload of ours left off the record by a kill is such a revision)
    taken_over = ours_lines | set(_lines(inherited)) if inherited is not None else ours_lines
    if before is not None and _lacked(ctx, pushes, before)[0] == 0 and _made_from(before, theirs, taken_over):
        return None
    if oldest is pushes[0] and len(pushes) >= MAX_PUSHES:
        # It lacks even the oldest push on record, and older ones were forgotten: what it was made
        # from is not known, so merge from what ours and theirs share (every line either side
        # has beyond that counts as added, none as removed: nothing of ours is dropped).
        newest = _blob(ctx, pushes[-1].ours_sha1)
        if newest is not None:
            older = _shared_lines(newest, theirs)
    older = _without_merged_in(older, _blob(ctx, oldest.had_sha1), theirs)
    return StaleBase(theirs_id, Base(rel_path, False, sha1_bytes(older), oldest.replaced), older, count,
                     from_history)


def archived_elsewhere(ctx: MirrorContext, rel_path: str, pushes: list[_Push] | None = None) -> str | None:
    """The conflict copy of ``rel_path`` that another client made of our
    newest push on record (its file id is that push's), or None.

    Such a copy means that client read our upload, could not merge it with
    its own edit, archived ours and kept its edit live (one conflict, with
    its notice there). Copies this mirror recorded itself do not count.
    No request: the listing (``ctx.snapshot``) and the state.
    """
    pushes = _load(ctx, rel_path) if pushes is None else pushes
    if not pushes:
        return None
    newest = pushes[-1].ours
    ours = {c.archived for c in ctx.state.conflicts()}
    return next((path for path, fid in sorted(copies_of(ctx, rel_path).items())
                 if fid == newest and path not in ours), None)


def accept_archived(ctx: MirrorContext, rel_path: str, copy: str) -> None:
    """Our change to ``rel_path`` was archived as ``copy`` by another client
    (:func:`archived_elsewhere`): forget our pushes on record (nothing of
    them is lost: they are in the copy) and record the conflict here too,
    with its notice, so the person at this mirror learns where their
    version went and can settle it (``ohsync resolve``)."""
    ctx.state.set_meta(_key(rel_path), None)
    record = ConflictRecord(rel_path, copy, datetime.now(timezone.utc).isoformat(timespec="seconds"),
                            ARCHIVED_ELSEWHERE, ("content",))
    if ctx.state.add_conflict(record):
        ctx.emit(SyncEvent("conflict", rel_path, action=copy,
                           message=f"another client kept its version live; ours is archived as {copy}"))


#: The conflict record's reason when another client archived our version.
ARCHIVED_ELSEWHERE = ("both sides changed it in ways that do not merge; another client kept its version live "
                      "and archived this one")


def _without_merged_in(older: bytes, had: bytes | None, theirs: bytes) -> bytes:
    """``older`` (what our oldest lacked push replaced) without the lines it
    has beyond ``had`` (the version that push was edited from) that
    ``theirs`` lacks.

    Those lines came into the file between our read and our write (a remote
    writer's, or a push of ours the state never recorded: killed after the
    upload), and our push merged them in. A stale writer that lacks our push
    read a version from before it and may never have seen them either: as
    the base's lines they would read as its deletion and leave the live
    file. Left out of the base, ours keeps them. ``had`` None (not kept):
    ``older`` as it is."""
    if had is None:
        return older
    keep = set(_lines(had)) | set(_lines(theirs))
    return b"".join(line for line in older.splitlines(keepends=True) if line.rstrip(b"\r\n") in keep)


def _shared_lines(a: bytes, b: bytes) -> bytes:
    """The lines ``a`` and ``b`` have in common, in order (a base from which each adds its own)."""
    la, lb = a.splitlines(keepends=True), b.splitlines(keepends=True)
    matcher = difflib.SequenceMatcher(a=la, b=lb, autojunk=False)
    return b"".join(line for block in matcher.get_matching_blocks() for line in la[block.a:block.a + block.size])


def stale_note(stale: StaleBase) -> str:
    """The activity line of a merged stale overwrite (says that lines were kept)."""
    uploads = "our last upload" if stale.lacked == 1 else f"{stale.lacked} of our uploads"
    return (f"another client wrote over {uploads} with an edit of an older version; merged both, keeping our "
            "lines (if it removed them on purpose, remove them again)")


def overwritten_revision(ctx: MirrorContext, rel_path: str, new_id: str, merged_with: str | None,
                         revisions: list[Any] | None = None) -> tuple[str, str] | None:
    """After a verified update on a server that may ignore ``head``: the
    ``(commit id, file id)`` of a revision ours replaced without having
    merged it, or None when the revision before ours is ``merged_with`` (or
    the server keeps no file history: 404).

    One request: ``GET /api/v2.1/repos/{id}/file/history/?limit=2`` (none,
    and None, on a server without it: :mod:`.capabilities`), or none when
    ``revisions`` are the two newest, read with the read-back; None too
    when the server fails to read the history (5xx, a malformed answer).
    """
    if new_id == merged_with:
        return None  # the update changed nothing: no commit, nothing replaced
    if revisions is None:
        try:
            revisions = file_history(ctx, rel_path, limit=2)
        except NotFoundError:
            return None
        except (ServerError, ProtocolError) as exc:  # as for a server without the history: cannot tell
            log.info("%s: the check of what our update replaced could not be made (%s)", rel_path, exc)
            return None
    if not revisions or revisions[0].file_id != new_id or len(revisions) < 2:
        return None
    before = revisions[1]
    if before.file_id in (merged_with, new_id):
        return None
    return before.commit_id, before.file_id
