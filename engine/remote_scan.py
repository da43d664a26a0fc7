"""Remote change detection: head commit id first, then directory ids.

An unchanged library costs one request (``GET /api2/repos/{id}/``).  When
the head moved, the tree is walked from the mirror's root, listing only the
folders whose directory id differs from the one in the last snapshot
(Seafile's directory ids form a Merkle tree, so an unchanged id means an
unchanged subtree).  Same-size edits are seen because file ids are content
hashes.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Protocol

from .models import DirListing, RemoteEntry, RepoInfo
from .confirm import listing_problem
from .errors import LibraryGoneError, NotFoundError
from .paths import from_remote, name_problem, to_remote

__all__ = ["RemoteScan", "scan_remote"]


def _list_root(client: "_Lister", repo_id: str, remote_root: str, oid: str | None) -> DirListing:
    """List the mirror's root folder.

    :raises NotFoundError: widened to the mirror and marked for the person when the
        configured ``remote`` folder does not exist: every pass would fail the same way.
    """
    try:
        return client.list_dir(repo_id, to_remote(remote_root, ""), oid=oid)
    except LibraryGoneError:
        raise
    except NotFoundError as exc:
        folder = to_remote(remote_root, "")
        exc.scope = "mirror"
        exc.behaviour = "needs_person"
        exc.message = (f"The folder {folder} that this mirror syncs (`remote`) does not exist in the "
                       "library. Create it in Seafile's web page or fix `remote` of this [[mirror]], then "
                       "run `ohsync refresh`; nothing was changed here.")
        exc.args = (exc.message,)
        raise


class _Lister(Protocol):
    def repo_info(self, repo_id: str) -> RepoInfo: ...
    def list_dir(self, repo_id: str, path: str, *, oid: str | None = None,
                 recursive: bool = False) -> DirListing: ...


@dataclass
class RemoteScan:
    """The outcome of :func:`scan_remote`.

    :ivar head: the library's head commit id now.
    :ivar root_oid: the directory id of the mirror's remote root.
    :ivar changed: False when nothing below the root can have changed
        (``snapshot`` is then the previous one, untouched).
    :ivar snapshot: every entry below the root, keyed by rel path (the
        entries' ``path`` is the rel path too).
    :ivar skipped: ``(rel path, reason)`` for names that cannot be mirrored.
    :ivar requests: listing requests made (the head check included).
    :ivar rejected: ``(rel folder, reason)`` for listings answered with the
        id of another folder (twice): such a folder keeps its previous
        subtree and entry, and the caller must not remember ``head`` or
        ``root_oid`` of this scan, so the next pass lists it again.
    :ivar head_mtime: the head commit's time (Unix seconds, server clock; 0 if unknown).
    """

    head: str
    root_oid: str
    changed: bool
    snapshot: dict[str, RemoteEntry]
    skipped: list[tuple[str, str]] = field(default_factory=list)
    requests: int = 0
    rejected: list[tuple[str, str]] = field(default_factory=list)
    head_mtime: int = 0


def scan_remote(client: _Lister, repo_id: str, remote_root: str, *, prev_head: str | None,
                prev_root_oid: str | None, prev_snapshot: dict[str, RemoteEntry],
                force: bool = False, info: RepoInfo | None = None) -> RemoteScan:
    """Find what changed on the server since the previous scan.

    :param prev_head: head commit id of the previous scan (None: never scanned).
    :param prev_root_oid: directory id of the mirror root at that time.
    :param prev_snapshot: the previous snapshot (rel path → entry).
    :param force: list every folder, ignoring cached ids.
    :param info: the library's info already read for this scan
        (``GET /api2/repos/{id}/``); None = read it now.
    :raises RemoteError: from the client (the caller keeps the old snapshot).
    """
    if info is None:
        info = client.repo_info(repo_id)
    requests = 1
    if not force and prev_head is not None and info.head_commit_id == prev_head:
        return RemoteScan(prev_head, prev_root_oid or "", False, prev_snapshot, requests=requests,
                          head_mtime=info.mtime)
    whole_library = remote_root.strip("/") == ""
    if not force and whole_library and info.root and info.root == prev_root_oid:
        # A commit that did not change the tree (e.g. a library rename).
        return RemoteScan(info.head_commit_id, info.root, False, prev_snapshot, requests=requests,
                          head_mtime=info.mtime)

    children: dict[str, list[RemoteEntry]] = defaultdict(list)
    for entry in prev_snapshot.values():
        children[entry.path.rpartition("/")[0]].append(entry)

    expected_root = info.root if whole_library and info.root else None
    listing = _list_root(client, repo_id, remote_root, None if force else prev_root_oid)
    requests += 1
    if not listing.uptodate and listing_problem(listing, expected_root):
        # Perhaps a commit landed in between: read the head again, list again.
        info = client.repo_info(repo_id)
        expected_root = info.root if whole_library and info.root else None
        listing = _list_root(client, repo_id, remote_root, None)
        requests += 2
        problem = listing_problem(listing, expected_root)
        if problem:
            return RemoteScan(prev_head or "", prev_root_oid or "", False, prev_snapshot, requests=requests,
                              rejected=[("", problem)])
    if listing.uptodate:
        return RemoteScan(info.head_commit_id, listing.oid, False, prev_snapshot, requests=requests,
                          head_mtime=info.mtime)

    snapshot: dict[str, RemoteEntry] = {}
    skipped: list[tuple[str, str]] = [(p, r) for p, r in getattr(client, "last_rejected", [])]
    rejected: list[tuple[str, str]] = []

    def copy_subtree(rel_dir: str) -> None:
        for child in children.get(rel_dir, ()):
            snapshot[child.path] = child
            if child.is_dir:
                copy_subtree(child.path)

    pending = [listing]
    while pending:
        current = pending.pop()
        for entry in current.entries:
            rel = from_remote(remote_root, entry.path)
            if not rel:
                continue
            problem = name_problem(rel)
            if problem:
                skipped.append((rel, problem))
                continue
            local_entry = RemoteEntry(rel, entry.is_dir, entry.id, entry.size, entry.mtime)
            snapshot[rel] = local_entry
            if not entry.is_dir:
                continue
            prev = prev_snapshot.get(rel)
            if not force and prev is not None and prev.is_dir and prev.id == entry.id:
                copy_subtree(rel)
                continue
            child = client.list_dir(repo_id, entry.path)
            requests += 1
            if listing_problem(child, entry.id):
                child = client.list_dir(repo_id, entry.path)  # once more: a commit may have landed
                requests += 1
            problem = listing_problem(child, entry.id)
            if problem:
                # Never trust it: the folder keeps what the last good scan saw.
                rejected.append((rel, problem))
                if prev is not None and prev.is_dir:
                    snapshot[rel] = prev
                    copy_subtree(rel)
                else:
                    del snapshot[rel]
                continue
            pending.append(child)
            skipped.extend(getattr(client, "last_rejected", []))
    return RemoteScan(info.head_commit_id, listing.oid, True, snapshot, skipped, requests, rejected, info.mtime)
