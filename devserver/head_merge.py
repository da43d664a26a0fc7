"""The ``head`` parameter of the fileserver's update: an update based on an
older commit never overwrites a concurrent edit of the same file.

As seafile-server 12 does it (``docs/seafile-api.md`` §5.4, verified on
a real server): the upload is committed on top of ``head`` and that commit is
merged with the current head.  When the file changed since ``head`` (by
anyone) and the upload differs from both, the newer edit stays live and the
upload is stored beside it as ``<stem> (SFConflict <user> <time>).<ext>``; the
merge commit says ``Added or modified "<conflict name>".`` and has
``second_parent_id`` and ``conflict`` set.  The answer is still the uploaded
content's id.  Identical content makes no conflict file; a file deleted since
``head`` is created again; an unknown ``head`` is an error.
"""
from __future__ import annotations

import re
import time
from typing import Any

from . import ids
from .names import fs_unique_name, nfc, parent_and_name
from .repo_ops import Entries, EntryNotFound, RepoOps, is_dir, now

__all__ = ["HeadUnknown", "conflict_name", "update_at_head"]


class HeadUnknown(Exception):
    """The ``head`` commit is not a commit of the library."""


def conflict_name(name: str, user: str, when: float | None = None) -> str:
    """``notes.md`` -> ``notes (SFConflict user@x 2026-12-01-08-02-24).md``
    (server local time; the extension starts at the last dot)."""
    stamp = time.strftime("%Y-%m-%d-%H-%M-%S", time.localtime(time.time() if when is None else when))
    dot = name.rfind(".")
    if dot <= 0:
        return f"{name} (SFConflict {user} {stamp})"
    return f"{name[:dot]} (SFConflict {user} {stamp}){name[dot:]}"


def update_at_head(ops: RepoOps, repo_id: str, path: str, fid: str, size: int, user: str, head: str,
                   mtime: int | None = None) -> str | None:
    """Update the file at ``path`` to ``fid`` as a change based on commit ``head``.

    :returns: the name of the SFConflict file the upload went to, or None
        when it became (or already was) the live version.
    :raises HeadUnknown: ``head`` is not a commit of this library.
    :raises EntryNotFound: no file at ``path`` now nor at ``head``.
    """
    store = ops.store
    parent, name = parent_and_name(path)
    with store.lock:
        try:
            if not re.fullmatch(r"[0-9a-f]{40}", head):
                raise ValueError(head)
            head_commit = store.read_commit(repo_id, head)
        except (OSError, ValueError) as exc:
            raise HeadUnknown(head) from exc
        then = ops.lookup(repo_id, path, root=head_commit["root_id"])
        base_id = then["id"] if then is not None and not is_dir(then) else None
        live = ops.lookup(repo_id, path)
        if live is None or is_dir(live):
            if base_id is None:
                raise EntryNotFound(path)
            # deleted since head: the update creates it again
            ops.put_files(repo_id, parent, [(name, fid, size)], user, replace=True, mtime=mtime,
                          create_parents=True)
            return None
        if live["id"] in (fid, base_id) or fid == base_id:
            if live["id"] == base_id and fid != base_id:
                ops.update_file(repo_id, path, fid, size, user, mtime=mtime)
            return None  # same content, or ours changed nothing since head: theirs stays
        return _store_conflict(ops, repo_id, parent, name, fid, size, user, head_commit, mtime)


def _store_conflict(ops: RepoOps, repo_id: str, parent: str, name: str, fid: str, size: int, user: str,
                    head_commit: dict[str, Any], mtime: int | None) -> str:
    """Commit ours on top of ``head`` (a side branch), then the merge commit
    that keeps the live version and adds ours as an SFConflict file."""
    store = ops.store
    t = now()
    entry = {"id": fid, "mode": ids.FILE_MODE, "modifier": user, "mtime": t if mtime is None else int(mtime),
             "size": size}

    def put_ours(entries):
        entries[name] = dict(entry, name=name)
        return None, True
    repo = store.repos[repo_id]
    ours_root, _ = ops.rewrite(head_commit["root_id"], parent, put_ours, create_parents=True)
    ours = store.write_commit(repo_id, ours_root, head_commit["commit_id"], user, f'Modified "{name}"',
                              repo.name, "")
    wanted = nfc(conflict_name(name, user, t))

    def add_conflict(entries: Entries) -> tuple[str, bool]:
        final = fs_unique_name(wanted, entries.__contains__) or wanted
        entries[final] = dict(entry, name=final)
        return final, True
    merged_root, final = ops.rewrite(store.root_id(repo_id), parent, add_conflict)
    merge = store.write_commit(repo_id, merged_root, repo.head, user, f'Added or modified "{final}".',
                               repo.name, "", second_parent_id=ours["commit_id"], conflict=True)
    repo.head = merge["commit_id"]
    store.save()
    for cb in list(ops.on_commit):
        cb(repo_id, merge)
    return final
