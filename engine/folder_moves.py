"""Whole-folder moves and renames, carried as one operation.

Before per-file reconciliation, a folder that vanished on one side while a
new folder appeared on the same side with exactly the same files (same
relative names, same content) is taken as a move of the folder: one
server-side move/rename (a local folder move) or one local rename (a remote
folder move).  Anything less certain (a file edited on the way, a file
added or missing, a change on the other side inside the folder) falls back
to the per-file path, which also loses nothing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from .context import MirrorContext
from .history_merge import move_pushes
from .localfs import Fingerprint, LocalFile, hash_file
from .models import RemoteEntry
from .paths import parent_rel
from .state import Base
from .transfer import ensure_remote_dir, remote_written

__all__ = ["FolderMove", "find_folder_moves", "apply_folder_move"]


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
        if not old_files or any(snap.get(p) is None or snap[p].id != bases[p].remote_id
                                for p in old_files.values()):
            continue
        for new in new_here:
            new_files = {k: v for k, v in _below(local, new).items() if not local[v].is_dir}
            if new_files.keys() != old_files.keys():
                continue
            hashed: dict[str, Fingerprint] = {}
            for k in old_files:
                fp = _same_content(ctx, new_files[k], bases[old_files[k]])
                if fp is None:
                    break
                hashed[new_files[k]] = fp
            else:
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
    except OSError:
        return None
    return fp if sha1 == base.sha1 else None


def apply_folder_move(ctx: MirrorContext, move: FolderMove, bases: dict[str, Base]) -> list[str]:
    """Carry one folder move to the other side and move the bases.

    :returns: every rel path the move accounted for (old and new), so the
        per-file pass leaves them alone.
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
    touched: list[str] = []
    with ctx.state.transaction():
        for rel, base in sorted(_below(bases, old).items()):
            src = bases[base]
            dst = f"{new}/{rel}"
            if src.is_dir:
                ctx.state.set_base(Base(dst, True, None, None))
            else:
                # never a stat now: a save since the hash (or the scan) would pass for synced
                fp = move.fingerprints.get(dst) or src.fingerprint()
                ctx.state.set_base(Base(dst, False, src.sha1, src.remote_id, *fp), ctx.state.base_content(src))
                move_pushes(ctx, base, dst)  # a stale overwrite of the moved file is judged against them
            ctx.state.delete_base(base)
            touched += [base, dst]
        ctx.state.set_base(Base(new, True, None, None))
        ctx.state.delete_base(old)
    for rel, path in _below(dict(ctx.snapshot), old).items():
        entry = ctx.snapshot.pop(path)
        ctx.snapshot[f"{new}/{rel}"] = RemoteEntry(f"{new}/{rel}", entry.is_dir, entry.id, entry.size, entry.mtime)
    if old in ctx.snapshot:
        entry = ctx.snapshot.pop(old)
        ctx.snapshot[new] = RemoteEntry(new, True, "", entry.size, entry.mtime)
    return touched + [old, new]
