"""Turning delete + create pairs into moves, both ways.

A local move shows up as a file gone at its base path and a new file with
the same sha1 elsewhere (whatever the watcher said, and also when an editor
saved through a temp file and a rename); a remote move as a base path gone
from the listing and a new path with the same file id.  Ids and sha1s are
content hashes, not identities, so a pair is only trusted when the content
is unique on both ends and not the empty file; otherwise the delete and the
create stay what they are (which loses nothing, it only costs a transfer).

One remote move is paired without its id: a file with pushes of ours on
record that another writer overwrote from an older read (a stale overwrite,
:mod:`ohsync.engine.merge.stale`) and then moved or renamed.  Its new id is the stale
writer's, so the id pairing misses it, and as a delete here plus a plain
download there our pushed lines would be only in a local backup.  It is
paired when, among the new files of its name (a move, also into a folder
that had one: ``name (1).ext``) or else of its folder (a rename), exactly
one was made from our versions on record and from no other such file's
(:func:`~ohsync.engine.merge.stale.made_from_ours`, a download per
candidate); the local file then moves, keeps its base, and the pass plans
the new path again: a changed remote version with a base, so the stale
overwrite is merged with our pushes.  The same holds for a file whose path
another file took after it moved ("archive and start afresh": renamed, and
a new one made at its name): when what is there now was made from none of
our versions, the local file moves to the one new file made from them, and
the new file at the old path is pulled as such (not merged with our lines).
"""

from __future__ import annotations

import os
import re
from collections import Counter

from ..context import MirrorContext
from ..crashpoints import reach
from ..errors import LocalError, OhsyncError
from ..localfs import LocalFile, hash_file, stat_fingerprint
from ..merge.choose import TEXT_LIMIT
from ..merge.stale import has_pushes, made_from_ours, move_pushes
from ..models import EMPTY_ID, RemoteEntry
from ..paths import parent_rel
from ..renames import rename_new
from ..state import Base
from ..transfer import LocalChanged, ensure_remote_dir, remote_written
from .reconcile import Action
from .valve import Plan

__all__ = ["pair_moves", "move_remote", "move_local", "move_sources", "plan_again", "MAX_CONTENT_CHECKS"]

#: New remote files downloaded at most per pass to pair stale, moved files.
MAX_CONTENT_CHECKS = 8


def move_sources(ctx: MirrorContext, local: dict[str, LocalFile], bases: dict[str, Base],
                 candidates: set[str]) -> set[str]:
    """Base paths outside ``candidates`` that a new local file among them may
    have been moved from: same sha1, and the base file gone from the mirror.

    A watcher can report the two halves of one move in different batches
    (e.g. a file moved into a folder it has not started watching yet: the
    new file comes with the folder's scan, the old path later as a delete),
    so a pass over some paths looks at those bases too and
    :func:`pair_moves` can pair them.

    :param local: the stat results of ``candidates`` (rel path → file).
    :returns: rel paths to add to the pass (possibly empty).
    """
    new = [rel for rel, f in local.items()
           if not f.is_dir and f.fingerprint[0] and rel not in bases and rel not in ctx.snapshot]
    if not new:
        return set()
    by_sha1: dict[str, list[str]] = {}
    for path, base in bases.items():
        if not base.is_dir and base.sha1 and path not in candidates:
            by_sha1.setdefault(base.sha1, []).append(path)
    sizes = {bases[p].size for paths in by_sha1.values() for p in paths}
    found: set[str] = set()
    for rel in new:
        if local[rel].fingerprint[0] not in sizes:
            continue  # no base of that size: not a move, no need to read the file
        try:
            sha1, _, size, _ = hash_file(ctx.local_path(rel))
        except (OSError, LocalError):  # being written: the file goes as it is, nothing lost
            continue
        for path in by_sha1.get(sha1, []) if size else []:
            if not ctx.local_path(path).exists():
                found.add(path)
    return found


def pair_moves(ctx: MirrorContext, plans: list[Plan], unchecked: list[tuple[str, OhsyncError]] | None = None
               ) -> tuple[list[Plan], list[tuple[Plan, Plan]]]:
    """Find moves among the plans.

    :param unchecked: gets ``(path, error)`` for each delete whose check
        download failed (its paths are left out of the plans: report it).
    :returns: ``(plans left, [(delete plan, create plan), …])``; a pair with
        a ``DELETE_REMOTE`` delete is a local move, with ``DELETE_LOCAL`` a
        remote move (:func:`plan_again` names the paths to plan again
        after it).  A remote move that could
        not be checked leaves both its paths out of the plans left.
    :raises: nothing of its own (a failed check download only leaves paths out).
    """
    pairs: list[tuple[Plan, Plan]] = []
    used: set[str] = set()
    # Local moves: base gone locally, remote unchanged; a new local file has its sha1.
    gone_local = {p.base.sha1: p for p in plans if p.action is Action.DELETE_REMOTE and p.base.sha1}
    dup_local = Counter(p.base.sha1 for p in plans if p.action is Action.DELETE_REMOTE)
    new_local = [p for p in plans if p.action is Action.PUSH and p.base is None and p.entry is not None]
    if gone_local and new_local:
        hashes: dict[str, list[Plan]] = {}
        for plan in new_local:
            try:
                sha1, fid, size, _ = hash_file(ctx.local_path(plan.rel))
            except (OSError, LocalError):  # gone or being written: pushed as a new file, nothing lost
                continue
            if size:
                hashes.setdefault(sha1, []).append(plan)
        for sha1, creates in hashes.items():
            delete = gone_local.get(sha1)
            if delete is not None and len(creates) == 1 and dup_local[sha1] == 1:
                pairs.append((delete, creates[0]))
                used |= {delete.rel, creates[0].rel}
    # Remote moves: base gone from the listing, local unchanged; a new remote path has its id.
    ids_now = Counter(e.id for e in ctx.snapshot.values() if not e.is_dir)
    gone_remote = {p.base.remote_id: p for p in plans
                   if p.action is Action.DELETE_LOCAL and p.base.remote_id not in (None, EMPTY_ID)}
    dup_gone = Counter(p.base.remote_id for p in plans if p.action is Action.DELETE_LOCAL)
    for plan in plans:
        if plan.action is not Action.PULL or plan.base is not None or plan.entry is not None:
            continue
        delete = gone_remote.get(plan.remote.id)
        if delete is None or ids_now[plan.remote.id] != 1 or dup_gone[plan.remote.id] != 1:
            continue
        if delete.rel in used or plan.rel in used:
            continue
        pairs.append((delete, plan))
        used |= {delete.rel, plan.rel}
    skip: set[str] = set()
    for delete, create in _overwritten_moves(ctx, plans, used, skip, [] if unchecked is None else unchecked):
        pairs.append((delete, create))
        used |= {delete.rel, create.rel}
    return [p for p in plans if p.rel not in used and p.rel not in skip], pairs


def _name_key(rel: str) -> str:
    """The file's name without the server's clash suffix: a file moved into
    a folder that has one of its name arrives as ``name (1).ext``."""
    name = rel.rsplit("/", 1)[-1]
    return _CLASH.sub(r"\1", name)


#: ``" (n)"`` before the extension (the last dot), as the server adds it on a clash.
_CLASH = re.compile(r" \(\d+\)((?:\.[^.]*)?)$")


def _overwritten_moves(ctx: MirrorContext, plans: list[Plan], used: set[str], skip: set[str],
                       unchecked: list[tuple[str, OhsyncError]]) -> list[tuple[Plan, Plan]]:
    """Remote moves whose content another writer changed (see the module
    docstring): ``(delete plan, create plan)`` pairs among the plans not in
    ``used``.

    A "delete" here is a file gone from the listing, or one whose path now
    holds a file not made from our versions (another file made there after
    ours was moved away: "archive and start afresh"; one more download).
    Its candidates are the new files of its name anywhere (a move; also
    with the server's `` (n)`` clash suffix), else the new files in its
    folder (a rename); each is downloaded once and a pair made when the
    delete's candidates made from our versions are exactly one, which no
    other delete's are made from too.  A delete whose candidate could not
    be downloaded puts it and its candidates in ``skip`` (left for the next
    pass: deleting here before knowing could lose lines) and itself, with
    the error, in ``unchecked``; one whose candidates no longer fit in this
    pass's :data:`MAX_CONTENT_CHECKS` downloads goes in ``skip`` too (the
    checked ones run, so the next pass comes); one with more candidates
    than that stays unpaired.  None of this without a path with pushes on
    record.
    """
    # only a file still here can move along (deleted here too: pulled as it is, a modification beats a deletion)
    deletes = [p for p in plans if (p.action is Action.DELETE_LOCAL or _replaced(p)) and p.rel not in used
               and p.fp is not None and p.base is not None and not p.base.is_dir and has_pushes(ctx, p.rel)]
    if not deletes:
        return []
    # only text small enough to merge: a stale overwrite of anything else is no merge to save
    creates = [p for p in plans if p.action is Action.PULL and p.base is None and p.entry is None
               and p.rel not in used and p.remote is not None and not p.remote.is_dir
               and p.remote.size <= TEXT_LIMIT]
    contents: dict[str, bytes] = {}
    made: dict[str, list[Plan]] = {}  # delete rel -> the candidates made from its versions

    def fetched(group: list[Plan], delete: Plan | None, paths: list[str]) -> bool:
        """Download what is not here yet of ``group``; False when that does not
        fit in the pass or failed: then ``delete`` (if any) and ``paths`` wait."""
        wanted = [c for c in group if c.rel not in contents]
        if len(contents) + len(wanted) > MAX_CONTENT_CHECKS:
            if delete is not None:
                skip.update([delete.rel, *paths])  # checked in a later pass, never deleted unchecked
            return False
        try:
            for plan in wanted:
                contents[plan.rel], _ = ctx.client.download_bytes(ctx.repo_id, ctx.remote_path(plan.rel))
        except OhsyncError as exc:
            if delete is not None:
                skip.update([delete.rel, *paths])
                unchecked.append((delete.rel, exc))
            return False
        return True

    for delete in deletes:
        by_name = [c for c in creates if _name_key(c.rel) == _name_key(delete.rel)]
        named = {c.rel for c in by_name}
        in_folder = [c for c in creates if parent_rel(c.rel) == parent_rel(delete.rel) and c.rel not in named]
        paths = [c.rel for c in by_name + in_folder]
        if not paths:
            continue
        # a path another file took, when what is there now was not made from ours (else an
        # overwrite, merged where it is); not known: pulled or merged as planned
        if delete.action is Action.PULL and (
                not fetched([delete], None, []) or made_from_ours(ctx, delete.rel, contents[delete.rel])):
            continue
        for group in (by_name, in_folder):  # moved (maybe into a clash), else renamed
            if not group or len(group) > MAX_CONTENT_CHECKS:
                continue  # nothing to check, or too many new files to tell which one it became
            if not fetched(group, delete, paths):
                break
            made[delete.rel] = [c for c in group if made_from_ours(ctx, delete.rel, contents[c.rel])]
            if made[delete.rel]:
                break
    claims = Counter(c.rel for matches in made.values() for c in matches)
    pairs: list[tuple[Plan, Plan]] = []
    for delete in deletes:
        matches = made.get(delete.rel, [])
        if len(matches) != 1 or claims[matches[0].rel] != 1:
            continue  # made from none of ours, or not one-to-one: a delete and a create as they are
        if matches[0].rel in skip:
            skip.add(delete.rel)  # its new file waits for another delete's check
        else:
            pairs.append((delete, matches[0]))
    return pairs


def _replaced(plan: Plan) -> bool:
    """A pull of a path whose remote file changed: maybe another file made
    there after ours was moved away (see :func:`_overwritten_moves`)."""
    return (plan.action is Action.PULL and plan.base is not None and plan.remote is not None
            and not plan.remote.is_dir and plan.remote.id != plan.base.remote_id)


def plan_again(old: Plan, new: Plan) -> list[str]:
    """The paths to plan again after a remote move from :func:`pair_moves`
    was carried out (:func:`move_local`): the new one when another writer
    changed its content (merged with the base that moved along), the old
    one when another file was made there (pulled as a new file)."""
    if old.action is Action.DELETE_REMOTE:
        return []
    return ([new.rel] if new.remote.id != old.base.remote_id else []) + \
        ([old.rel] if old.action is Action.PULL else [])


def move_remote(ctx: MirrorContext, old: Plan, new: Plan) -> None:
    """Carry a local move to the server (rename and/or move, no upload)."""
    base: Base = old.base
    current = ctx.client.file_detail(ctx.repo_id, ctx.remote_path(old.rel))
    if current.id != base.remote_id:
        raise LocalChanged(f"{old.rel} changed on the server; not moving it", path=old.rel)
    src = ctx.remote_path(old.rel)
    old_dir, new_dir = parent_rel(old.rel), parent_rel(new.rel)
    new_name = new.rel.rsplit("/", 1)[-1]
    if old_dir != new_dir:
        ensure_remote_dir(ctx, new_dir)
        src = ctx.client.move(ctx.repo_id, src, ctx.remote_path(new_dir))
    if src.rsplit("/", 1)[-1] != new_name:
        src = ctx.client.rename(ctx.repo_id, src, new_name)
    remote_written(ctx, old.rel, new.rel)
    if src != ctx.remote_path(new.rel):
        raise LocalChanged(f"the server stored {new.rel} as {src}; re-planning", path=new.rel)
    ctx.snapshot.pop(old.rel, None)
    ctx.snapshot[new.rel] = RemoteEntry(new.rel, False, current.id, current.size, current.mtime)
    reach("move.remote_done")
    _move_base(ctx, base, new.rel, new.fp)


def move_local(ctx: MirrorContext, old: Plan, new: Plan) -> None:
    """Carry a remote move to the mirror (a local rename, no download)."""
    src, dst = ctx.local_path(old.rel), ctx.local_path(new.rel)
    try:
        fp = stat_fingerprint(os.stat(src))
    except FileNotFoundError as exc:
        raise LocalChanged(f"{old.rel} is gone locally", path=old.rel) from exc
    if fp != old.fp or dst.exists():
        raise LocalChanged(f"{old.rel} changed locally; not moving it", path=old.rel)
    dst.parent.mkdir(parents=True, exist_ok=True)
    try:
        rename_new(src, dst)  # never over a file made there meanwhile
    except FileExistsError:
        raise LocalChanged(f"{new.rel} was created here meanwhile; not moving {old.rel}", path=old.rel) from None
    reach("move.local_done")
    # the fingerprint checked before the rename (which keeps it): a stat of dst now
    # could be of a save that landed in between, which would then pass for synced;
    # the base keeps its remote id: a move whose content changed there is planned again
    _move_base(ctx, old.base, new.rel, fp)


def _move_base(ctx: MirrorContext, base: Base, new_rel: str, fp: tuple[int, int, int] | None,
               remote_id: str | None = None) -> None:
    size, mtime_ns, inode = fp or (base.size, base.mtime_ns, base.inode)
    moved = Base(new_rel, False, base.sha1, remote_id or base.remote_id, size, mtime_ns, inode)
    with ctx.state.transaction():
        ctx.state.set_base(moved, ctx.state.base_content(base))
        ctx.state.delete_base(base.path)
        move_pushes(ctx, base.path, new_rel)
