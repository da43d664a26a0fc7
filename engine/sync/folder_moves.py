"""Whole-folder moves and renames, carried as one operation.

Before per-file reconciliation, a folder that vanished on one side while a
new folder appeared on the same side with exactly the same files (same
relative names, same content) is taken as a move of the folder: one
server-side move/rename (a local folder move) or one local rename (a remote
folder move).

A local folder move is also carried when the server changed files inside the
old folder since the base (an edit from another device), and when a file
in it was edited here in place (same inode; at least one file must still
hold its base's bytes): the server-side move takes the server's versions
along, and the bases move with the folder, so those files then go through
the per-file pass at their new paths (a download, or a three-way merge when
both sides edited).  The folder never comes back at its old name.  Anything
less certain (a file added, missing or deleted on the server) falls back to
the per-file path, which also loses nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..context import MirrorContext
from ..errors import LocalError
from ..localfs import Fingerprint, LocalFile, hash_file
from ..merge.stale import move_pushes
from ..models import RemoteEntry
from ..paths import parent_rel
from ..state import Base
from ..transfer import ensure_remote_dir, remote_written

__all__ = ["FolderMove", "FolderMoveDone", "find_folder_moves", "apply_folder_move"]


@dataclass(frozen=True)
class FolderMove:
    """``old`` became ``new``; ``local_side`` says where it happened.

    ``fingerprints``: for a local move, the new rel path of each file → the
    fingerprint it had when it was hashed (the one that goes with its base's
    sha1); a remote move keeps the bases' fingerprints (the local files were
    checked to hold them).
    """

    old: str
    new: str
    local_side: bool
    fingerprints: dict[str, Fingerprint] = field(default_factory=dict)


@dataclass(frozen=True)
class FolderMoveDone:
    """What :func:`apply_folder_move` did, for the per-file pass.

    ``settled``: rel paths (old and new) the move fully accounted for;
    ``again``: new rel paths that still need the per-file pass (a file the
    server or this side changed since the base, a file the server added).
    """

    settled: frozenset[str]
    again: frozenset[str]


def _below(paths: object, folder: str) -> dict[str, str]:
    """Relative name under ``folder`` → full path, for ``paths`` below it."""
    prefix = folder + "/"
    return {p[len(prefix):]: p for p in paths if p.startswith(prefix)}  # type: ignore[attr-defined]


def _topmost(folders: list[str]) -> list[str]:
    chosen = set(folders)
    return [f for f in folders if not any(f.startswith(o + "/") for o in chosen if o != f)]


def find_folder_moves(ctx: MirrorContext, local: dict[str, LocalFile], bases: dict[str, Base]) -> list[FolderMove]:
    """Folder moves visible in this pass (see the module docstring)."""
    snap = ctx.snapshot
    base_dirs = [p for p, b in bases.items() if b.is_dir]
    moves: list[FolderMove] = []
    # moved here: old folder gone locally, still unchanged on the server
    gone_here = _topmost([d for d in base_dirs if d not in local and d in snap and snap[d].is_dir])
    # (any new folder, not only topmost ones: the target may sit in new parents)
    new_here = sorted(p for p, e in local.items() if e.is_dir and p not in bases and p not in snap)
    for old in gone_here:
        old_files = {k: v for k, v in _below(bases, old).items() if not bases[v].is_dir}
        # a server-side edit inside is carried along by the server's move; a delete is not
        if not old_files or any(snap.get(p) is None or snap[p].is_dir for p in old_files.values()):
            continue
        for new in new_here:
            new_files = {k: v for k, v in _below(local, new).items() if not local[v].is_dir}
            if new_files.keys() != old_files.keys():
                continue
            hashed: dict[str, Fingerprint] = {}
            for k in old_files:
                base = bases[old_files[k]]
                fp = _same_content(ctx, new_files[k], base)
                if fp is not None:
                    hashed[new_files[k]] = fp
                elif not base.inode or local[new_files[k]].fingerprint[2] != base.inode:
                    break  # neither its bytes nor the file itself (edited in place): not this folder
            else:
                if not hashed:
                    continue  # every file edited: too little to go on (inodes are reused)
                moves.append(FolderMove(old, new, True, hashed))
                new_here.remove(new)
                break
    # moved on the server: old folder gone remotely, unchanged here
    gone_there = _topmost([d for d in base_dirs if d not in snap and d in local and local[d].is_dir])
    new_there = sorted(p for p, e in snap.items() if e.is_dir and p not in bases and p not in local)
    for old in gone_there:
        old_files = {k: v for k, v in _below(bases, old).items() if not bases[v].is_dir}
        if not old_files or any(local.get(p) is None or local[p].fingerprint != bases[p].fingerprint()
                                for p in old_files.values()):
            continue
        for new in new_there:
            new_files = {k: v for k, v in _below(snap, new).items() if not snap[v].is_dir}
            if new_files.keys() == old_files.keys() and all(
                    snap[new_files[k]].id == bases[old_files[k]].remote_id for k in old_files):
                moves.append(FolderMove(old, new, False))
                new_there.remove(new)
                break
    return moves


def _same_content(ctx: MirrorContext, rel: str, base: Base) -> Fingerprint | None:
    """The fingerprint of the local file ``rel`` when it holds ``base``'s bytes, else None."""
    try:
        sha1, _, _, fp = hash_file(ctx.local_path(rel))
    except (OSError, LocalError):  # gone or being written: not the base's bytes as far as we can tell
        return None
    return fp if sha1 == base.sha1 else None


def apply_folder_move(ctx: MirrorContext, move: FolderMove, bases: dict[str, Base]) -> FolderMoveDone:
    """Carry one folder move to the other side and move the bases.

    A local move goes to the server as one folder move and/or rename
    (``/api2/repos/{id}/file/`` operations of the Seafile client); a remote
    move is one local rename.  ``bases`` (rel path → base, as the pass loaded
    them) and the listing snapshot are updated to the new paths, so the
    per-file pass can plan the files the move did not settle.

    :returns: which paths the move settled and which new paths still need
        the per-file pass (:class:`FolderMoveDone`).
    :raises RemoteError, OSError: the move did not happen (nothing recorded).
    """
    old, new = move.old, move.new
    if move.local_side:
        ensure_remote_dir(ctx, parent_rel(new))
        path = ctx.remote_path(old)
        if parent_rel(old) != parent_rel(new):
            path = ctx.client.move(ctx.repo_id, path, ctx.remote_path(parent_rel(new)), is_dir=True)
        if path.rsplit("/", 1)[-1] != new.rsplit("/", 1)[-1]:
            path = ctx.client.rename(ctx.repo_id, path, new.rsplit("/", 1)[-1], is_dir=True)
        if path != ctx.remote_path(new):
            raise OSError(f"the server stored the folder as {path}")
        remote_written(ctx, old + "/", new + "/")
    else:
        target = ctx.local_path(new)
        if target.exists():
            raise OSError(f"{new} already exists here")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.rename(ctx.local_path(old), target)
    settled: set[str] = {old, new}
    again: set[str] = set()
    moved: dict[str, Base] = {}
    with ctx.state.transaction():
        for rel, base in sorted(_below(bases, old).items()):
            src = bases[base]
            dst = f"{new}/{rel}"
            if src.is_dir:
                moved[dst] = Base(dst, True, None, None)
                ctx.state.set_base(moved[dst])
            else:
                # never a stat now: a save since the hash (or the scan) would pass for synced;
                # a file edited here keeps the old fingerprint, so the pass sees it changed
                fp = move.fingerprints.get(dst) or src.fingerprint()
                moved[dst] = Base(dst, False, src.sha1, src.remote_id, *fp)
                ctx.state.set_base(moved[dst], ctx.state.base_content(src))
                move_pushes(ctx, base, dst)  # a stale overwrite of the moved file is judged against them
                listed = ctx.snapshot.get(base)
                if move.local_side and (dst not in move.fingerprints or listed is None
                                        or listed.id != src.remote_id):
                    again.add(dst)  # changed since the base on a side: the per-file pass merges it
            ctx.state.delete_base(base)
            settled |= {base, dst}
        moved[new] = Base(new, True, None, None)
        ctx.state.set_base(moved[new])
        ctx.state.delete_base(old)
    for path in [p for p in bases if p == old or p.startswith(old + "/")]:
        del bases[path]
    for path in moved:  # as stored (whether its content was kept)
        bases[path] = ctx.state.get_base(path) or moved[path]
    for rel, path in _below(dict(ctx.snapshot), old).items():
        entry = ctx.snapshot.pop(path)
        ctx.snapshot[f"{new}/{rel}"] = RemoteEntry(f"{new}/{rel}", entry.is_dir, entry.id, entry.size, entry.mtime)
        if f"{new}/{rel}" not in settled and not entry.is_dir:
            again.add(f"{new}/{rel}")  # added on the server meanwhile, carried by the move
    if old in ctx.snapshot:
        entry = ctx.snapshot.pop(old)
        ctx.snapshot[new] = RemoteEntry(new, True, "", entry.size, entry.mtime)
    return FolderMoveDone(frozenset(settled - again), frozenset(again))
