"""Remote change detection from the commits themselves, before any tree walk.

When the head moved, the history is read anyway (``GET /api2/repos/{id}/history/``,
newest first, with parent ids: the rollback check of :mod:`.regression`).
When the new head's first-parent chain reaches the head the snapshot was
scanned at within that one page, in a few commits and without a merge, what
each commit changed (``GET /api/v2.1/repos/{id}/commits/{commit_id}/``,
seafile-web-api.md §2.6) names every path that can differ, so instead of
walking down from the root only the folders holding those paths are listed,
once each, for their entries' current ids.  Commits of our own uploads
(echoes) need no listing at all: see :func:`_echo`; one that the read-back
named as ours and that describes itself as that one file's change is not
even asked about (:func:`_own_changes`).

Anything unusual takes the walk (:func:`~ohsync.engine.remote_scan.scan_remote`):
a merge commit (api2 history lists them; an update based on an older head
makes one), more than :data:`MAX_COMMITS` commits, a history that does not
reach the old head on its first page (trimmed, rolled back, very busy), a
folder created, removed or renamed, a change of the mirror's root or of a
name that cannot be mirrored, a changed file no longer there, an error.  A
file's rename (or move) is its removal from one path and its creation at
the other, as a walk would see it.

The snapshot stays one a later walk can trust: every folder above a changed
path keeps its entry but loses its directory id (``""``), and the root's
id is not recorded, so the next walk lists them again instead of taking
their old subtree as unchanged.
"""

from __future__ import annotations

import logging
import unicodedata
from dataclasses import dataclass
from typing import Any

from .client.commits import CommitChange, CommitInfo, first_parents
from .context import MirrorContext
from .errors import LibraryGoneError, NotFoundError, OhsyncError, RemoteOperationError
from .models import RemoteEntry, RepoInfo
from .paths import from_remote, name_problem, parent_rel
from .regression import PER_PAGE, head_descends, last_seen, load
from .remote_scan import RemoteScan

__all__ = ["MAX_COMMITS", "MAX_FOLDERS", "Since", "chain_since", "history_since", "scan_by_diffs", "incremental"]

log = logging.getLogger(__name__)

#: Commits since the snapshot's head read one by one at most; more take the walk.
MAX_COMMITS = 16
#: Folders listed at most for the changed paths; more take the walk.
MAX_FOLDERS = 8
#: The changes a commit may name for the diff path (anything else: the walk).
FILE_OPS = frozenset({"new", "modified", "removed"})


@dataclass
class Since:
    """What one read of the history says about the commits after an old head.

    :ivar head: the new head the answer is about.
    :ivar descends: True/False/None as :func:`~ohsync.engine.regression.head_descends`.
    :ivar chain: the commits after the old head up to ``head``, oldest first;
        None when the first page does not show them all as one line of
        ordinary commits (at most :data:`MAX_COMMITS`).
    :ivar old_root: the old head's root directory id when the page shows
        it, else ``""`` (lets :func:`scan_by_diffs` catch an empty answer
        for a commit whose root changed).
    """

    head: str
    descends: bool | None
    chain: list[CommitInfo] | None
    old_root: str = ""


def chain_since(commits: list[CommitInfo], old_head: str, new_head: str) -> list[CommitInfo] | None:
    """The commits after ``old_head`` up to ``new_head`` (oldest first), by
    first parents through ``commits`` (one history page, any order).

    :returns: None when a commit on the way is missing from ``commits``, is
        a merge, is the library's first commit, or the chain is longer than
        :data:`MAX_COMMITS`; ``[]`` when the heads are equal.
    """
    chain = first_parents(commits, old_head, new_head, limit=MAX_COMMITS, merges=False)
    return None if chain is None else chain[::-1]


def history_since(client: Any, repo_id: str, old_head: str, old_ctime: int, new_head: str) -> Since:
    """Read the history once for both questions: does ``new_head`` descend
    from ``old_head``, and which commits lie between.

    :raises RemoteError: from the client.
    """
    commits, more = client.commit_history(repo_id, page=1, per_page=PER_PAGE)
    chain = chain_since(commits, old_head, new_head)
    if chain is not None:
        return Since(new_head, True, chain, next((c.root_id for c in commits if c.id == old_head), ""))
    return Since(new_head, head_descends(client, repo_id, old_head, old_ctime, new_head, first=(commits, more)),
                 None)


def incremental(ctx: MirrorContext, info: RepoInfo, skipped: list[tuple[str, str]]) -> tuple[RemoteScan | None,
                                                                                             Since | None]:
    """Try the diff path for a head that moved (see the module docstring).

    :param info: the library info read for this pass.
    :param skipped: the names the last scan could not mirror (kept as they are).
    :returns: ``(scan or None, since or None)``: the scan when the diff path
        worked (else the caller walks), and what the history said (for the
        rollback check) when it was read.
    :raises RemoteError: from the history read (the caller keeps the old
        snapshot, as for a walk); LibraryGoneError.
    """
    state = ctx.state
    prev_head = state.get_meta("head")
    new_head = info.head_commit_id
    last, ctime = last_seen(state)
    if not prev_head or not new_head or new_head == prev_head or last != prev_head or load(state) is not None:
        return None, None
    since = history_since(ctx.client, ctx.repo_id, prev_head, ctime, new_head)
    if not since.chain or not ctx.commit_diffs:
        return None, since
    scan = scan_by_diffs(ctx, info, since.chain, skipped, old_root=since.old_root)
    return scan, since


def _changes(ctx: MirrorContext, chain: list[CommitInfo], old_root: str = "") -> dict[str, list[str]] | None:
    """rel path → the ops of every commit in ``chain`` that touched it, or
    None when the diff path cannot tell (see the module docstring).

    :param old_root: the root directory id before ``chain`` (``""``: unknown).
    """
    touched: dict[str, list[str]] = {}
    prev_root = old_root
    own = {c.id: found for c in chain if (found := _own_changes(ctx, c)) is not None}
    asked = [c for c in chain if c.id not in own]
    # several commits: asked for at once on the transfer pool (reads only; idle during a scan)
    futures = {c.id: ctx.executor.submit(ctx.client.commit_changes, ctx.repo_id, c.id) for c in asked} \
        if ctx.executor is not None and len(asked) > 1 else None
    for commit in chain:
        try:
            if commit.id in own:
                changes = own[commit.id]
            elif futures is not None:
                changes = futures[commit.id].result()
            else:
                changes = ctx.client.commit_changes(ctx.repo_id, commit.id)
        except LibraryGoneError:
            raise
        except (NotFoundError, RemoteOperationError) as exc:
            # a server without the endpoint (404), or one that refuses it (a library
            # shared with a folder permission: 403): walk from now on
            log.info("the server does not say what commit %s changed (%s); walking the tree from now on",
                     commit.id[:12], exc)
            ctx.commit_diffs = False
            return None
        except OhsyncError as exc:
            log.info("reading what commit %s changed failed (%s); walking the tree instead", commit.id[:12], exc)
            return None
        if not changes and prev_root and commit.root_id and commit.root_id != prev_root:
            # the tree changed, yet the server names no change: it cannot be believed
            log.info("commit %s changed the tree but names no change; walking the tree instead", commit.id[:12])
            return None
        prev_root = commit.root_id
        for change in changes:
            rel = from_remote(ctx.remote_root, change.path)
            new_rel = from_remote(ctx.remote_root, change.new_path) if change.new_path else None
            root = "/" + ctx.remote_root.strip("/")
            above_root = root != "/" and root.startswith(change.path.rstrip("/") + "/")
            if rel is None and new_rel is None and not above_root:
                continue  # outside the mirrored folder
            if above_root or rel == "" or new_rel == "":
                return None
            if not unicodedata.is_normalized("NFC", change.path + change.new_path):
                return None  # a name the rel path (NFC) does not spell as the server does: the walk tells
            if change.op == "renamed":
                # a file moved: gone from one path, new at the other (a folder's rename: the walk)
                if rel is not None:
                    known = ctx.snapshot.get(rel)
                    if rel not in touched and (known is None or known.is_dir):
                        return None
                    ops = [(rel, "removed")]
                else:
                    ops = []
                ops += [(new_rel, "new")] if new_rel is not None else []
            elif change.op in FILE_OPS and rel and new_rel is None:
                ops = [(rel, change.op)]
            else:
                return None
            for path, op in ops:
                if name_problem(path):
                    return None
                touched.setdefault(path, []).append(op)
    return touched


def _own_changes(ctx: MirrorContext, commit: CommitInfo) -> list[CommitChange] | None:
    """What ``commit`` changed, told without asking, when it is the commit of
    one of our verified updates and says so itself; else None.

    The read-back named the commit that introduced our version of a path
    (``ctx.own_commits``: from the file's history, so that path changed in it).
    When the commit also describes itself as the change of one file of that
    name (``Modified "<name>"``, not a merge), that one file is the path:
    its whole change is the update of it, whoever made it.
    """
    rels = set(ctx.own_commits.get(commit.id, ()))
    if len(rels) != 1 or commit.second_parent_id:
        return None
    (rel,) = rels
    if commit.desc.strip().rstrip(".") != f'Modified "{rel.rpartition("/")[2]}"':
        return None
    return [CommitChange("modified", ctx.remote_path(rel))]


def _echo(ctx: MirrorContext, rel: str, ops: list[str], snapshot: dict[str, RemoteEntry]) -> bool:
    """True when the commits that touched ``rel`` are our own verified uploads
    and the snapshot holds what the last of them stored.

    Each verified upload of ours (:meth:`MirrorContext.wrote`) either made a
    commit touching ``rel``, or found our very bytes there already, which
    another commit touching ``rel`` (after our read) put there.  So when the
    commits touching ``rel`` are exactly as many as our verified uploads,
    none of them came after our last read-back: ``rel`` holds its bytes.
    """
    ours = ctx.written.get(rel)
    known = snapshot.get(rel)
    return (bool(ours) and len(ops) == len(ours or ()) and all(op in ("new", "modified") for op in ops)
            and known is not None and not known.is_dir and known.id == (ours or [""])[-1])


def scan_by_diffs(ctx: MirrorContext, info: RepoInfo, chain: list[CommitInfo],
                  skipped: list[tuple[str, str]], *, old_root: str = "") -> RemoteScan | None:
    """The remote scan for a head that moved by ``chain`` (oldest first),
    built from the commits' changes and a listing of each folder holding a
    changed path that is not an echo of our own uploads.

    :param old_root: the library's root directory id at the old head (``""``:
        unknown); a commit that changed the root yet names no change takes the walk.
    :returns: the scan (``rejected`` empty, ``root_oid`` ``""``: unknown),
        or None when the walk must decide (also after any failed request).
    :raises LibraryGoneError: the library is gone.
    """
    before = getattr(ctx.client, "request_count", 0)
    touched = _changes(ctx, chain, old_root)
    if touched is None:
        return None
    snapshot = ctx.snapshot
    folders: dict[str, list[str]] = {}
    for rel, ops in touched.items():
        folder = parent_rel(rel)
        parent = snapshot.get(folder) if folder else None
        known = snapshot.get(rel)
        if (folder and (parent is None or not parent.is_dir)) or (known is not None and known.is_dir):
            return None  # in a folder the snapshot does not know, or a folder the snapshot has as a file
        if not _echo(ctx, rel, ops, snapshot):
            folders.setdefault(folder, []).append(rel)
    if len(folders) > MAX_FOLDERS:
        return None
    updates: dict[str, RemoteEntry | None] = {}
    for folder, all_rels in sorted(folders.items()):
        rels = []
        for rel in all_rels:
            if touched[rel][-1] == "removed":
                updates[rel] = None  # confirm.confirm_vanished asks the server before any local delete
            else:
                rels.append(rel)
        if not rels:
            continue
        if len(rels) == 1:
            # one path: its own detail, smaller than the folder's listing and
            # never an answer for another folder; a 404 is the server's word
            try:
                entry = ctx.client.file_detail(ctx.repo_id, ctx.remote_path(rels[0]))
            except LibraryGoneError:
                raise
            except NotFoundError:
                # created or changed, yet not there: removed since, or a folder now: the walk tells
                return None
            except OhsyncError as exc:
                log.info("reading %s failed (%s); walking the tree instead", rels[0], exc)
                return None  # one file's trouble must not fail the scan: the walk does not ask for it
            else:
                updates[rels[0]] = RemoteEntry(rels[0], False, entry.id, entry.size, entry.mtime)
            continue
        listed = _listed(ctx, info, folder, rels, touched)
        if listed is None:
            return None
        updates.update(listed)
    new = dict(snapshot)
    changed = False
    for rel, entry in updates.items():
        if new.get(rel) != entry:
            changed = True
            if entry is None:
                new.pop(rel, None)
            else:
                new[rel] = entry
    for rel in touched:
        folder = parent_rel(rel)
        while folder:
            known = new.get(folder)
            if known is not None and known.is_dir and known.id:
                new[folder] = RemoteEntry(folder, True, "", known.size, known.mtime)
                changed = True
            folder = parent_rel(folder)
    requests = 1 + getattr(ctx.client, "request_count", 0) - before
    log.debug("head %s: %d commits, %d paths changed, %d folders listed", info.head_commit_id[:12], len(chain),
              len(touched), len(folders))
    return RemoteScan(info.head_commit_id, "", changed, new if changed else snapshot, list(skipped), requests,
                      head_mtime=info.mtime)


def _listed(ctx: MirrorContext, info: RepoInfo, folder: str, rels: list[str],
            touched: dict[str, list[str]]) -> dict[str, RemoteEntry | None] | None:
    """The entries of ``rels`` (files of ``folder``) from one listing of it,
    None (absent) for those not listed; None when the walk must decide.

    """
    try:
        listing = ctx.client.list_dir(ctx.repo_id, ctx.remote_path(folder))
    except LibraryGoneError:
        raise
    except OhsyncError as exc:
        log.info("listing %s failed (%s); walking the tree instead", folder or "/", exc)
        return None  # gone since (a 404), or trouble: the walk sorts it out
    rejected = {from_remote(ctx.remote_root, path) for path, _ in getattr(ctx.client, "last_rejected", [])}
    if rejected & set(rels):
        return None
    if not folder and ctx.remote_root.strip("/") == "" and info.root and listing.oid != info.root:
        return None  # another root than the head's: a commit since, or an answer for another folder
    entries = {from_remote(ctx.remote_root, e.path): e for e in listing.entries}
    out: dict[str, RemoteEntry | None] = {}
    for rel in rels:
        entry = entries.get(rel)
        if entry is not None and entry.is_dir:
            return None  # a file replaced by a folder since
        if entry is None and touched[rel][-1] != "removed":
            # created or changed, yet not listed: removed since, or the answer
            # is for another folder (confirm.listing_problem): the walk tells
            return None
        out[rel] = None if entry is None else RemoteEntry(rel, False, entry.id, entry.size, entry.mtime)
    return out
