"""Remote change detection: head commit id first, then directory ids.

An unchanged library costs one request (``GET /api2/repos/{id}/``).  When
the head moved, the tree is walked from the mirror's root, listing only the
folders whose directory id differs from the one in the last snapshot
(Seafile's directory ids form a Merkle tree, so an unchanged id means an
unchanged subtree).  Same-size edits are seen because file ids are content
hashes.

A cold scan (no previous snapshot) of a library the server counts at most
:data:`RECURSIVE_MAX_FILES` files in takes the whole tree from one
recursive listing instead of one listing per folder.  Seahub walks that
listing folder by folder, each resolved by path from the head *at that
moment*, so a commit landing during the walk can mix two trees (or answer
an HTML 500 ``Invalid dir id``): the listing is kept only when its ``oid``
is the root the head named and the head is still the same afterwards (one
more ``GET /api2/repos/{id}/``); otherwise, and when it fails, the scan
falls back to the per-folder walk, whose every listing is checked against
the id its parent gave.  The bound exists because seahub answers only once
the whole walk is done, and the walk costs the server time quadratic in the
entries it returns (its contact-e-mail loop runs over every file listed so
far, once per entry): a real Seafile 13 server took 6.6 s for 3,000 files,
so about 12 s for 4,000 and a minute for 10,000, past the client's 30 s
read timeout.  ``file_count`` is computed lazily by the server and may lag
behind the tree: it only picks the listing, never bounds what is taken from
it (the listing's own entries, checked against the head's root, are the
tree).  One that is too low costs at most one slow walk, sent once
(``list_dir``), before the per-folder walk.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Protocol

from .models import DirListing, RemoteEntry, RepoInfo
from .sync.confirm import listing_problem
from .errors import LibraryGoneError, NetworkError, NotFoundError, ProtocolError, ServerError
from .paths import from_remote, name_problem, to_remote

__all__ = ["RECURSIVE_MAX_FILES", "RemoteScan", "scan_remote"]

#: A cold scan lists the tree recursively in one request when the library
#: holds at most this many files (``file_count``; see the module docstring).
RECURSIVE_MAX_FILES = 4000


def _list_root(client: "_Lister", repo_id: str, remote_root: str, oid: str | None,
               recursive: bool = False) -> DirListing:
    """List the mirror's root folder (with every descendant when ``recursive``).

    :raises NotFoundError: widened to the mirror and marked for the person when the
        configured ``remote`` folder does not exist: every pass would fail the same way.
    """
    try:
        if recursive:
            return client.list_dir(repo_id, to_remote(remote_root, ""), recursive=True)
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

    if not force and not prev_snapshot and 0 < info.file_count <= RECURSIVE_MAX_FILES:
        whole, after = _scan_recursive(client, repo_id, remote_root, info)
        if whole is not None:
            return whole
        requests += 1  # the recursive listing, not used: folder by folder instead
        if after is not None:  # the head moved during the walk: walk from the head read after it
            info, requests = after, requests + 1

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


def _scan_recursive(client: _Lister, repo_id: str, remote_root: str,
                    info: RepoInfo) -> tuple[RemoteScan | None, RepoInfo | None]:
    """The whole tree below the mirror's root from one recursive listing.

    :param info: the library's info read for this scan (its head and root).
    :returns: ``(scan, None)`` when the listing is provably of ``info``'s
        head (``scan.requests`` counts the head check and both reads);
        else ``(None, the info read after the listing)``, or ``(None, None)``
        when the listing failed before that (the caller walks per folder).
    :raises RemoteError: other than a server, network or protocol failure of
        the listing itself (a rejected login, a missing library or folder).
    """
    whole_library = remote_root.strip("/") == ""
    try:
        listing = _list_root(client, repo_id, remote_root, None, recursive=True)
    except (ServerError, ProtocolError, NetworkError):
        # "Invalid dir id" (a commit landed during seahub's walk), or a walk slower than the
        # read timeout; a server that cannot be reached fails the walk below as well
        return None, None
    skipped: list[tuple[str, str]] = [(p, r) for p, r in getattr(client, "last_rejected", [])]
    after = client.repo_info(repo_id)
    if after.head_commit_id != info.head_commit_id or listing_problem(
            listing, info.root if whole_library and info.root else None):
        return None, after  # the tree moved during the walk: it may mix two commits
    snapshot: dict[str, RemoteEntry] = {}
    for entry in listing.entries:
        rel = from_remote(remote_root, entry.path)
        if not rel:
            continue
        if rel.rpartition("/")[0] and rel.rpartition("/")[0] not in snapshot:
            continue  # under a folder that was skipped: skipped with it
        problem = name_problem(rel)
        if problem:
            skipped.append((rel, problem))
            continue
        snapshot[rel] = RemoteEntry(rel, entry.is_dir, entry.id, entry.size, entry.mtime)
    return RemoteScan(info.head_commit_id, listing.oid, True, snapshot, skipped, 3, [], info.mtime), None
