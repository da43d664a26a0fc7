"""A remote delete of a file we pushed to: was the deleted version ours?

Another writer may overwrite a file from a version older than our pushes (a
stale writer) and then delete it, both before a pass of ours sees the
overwrite.  The pass then sees only a delete of a file unchanged here;
mirroring it would leave the lines we pushed, which the deleting writer
never saw, only in the local backup.  So before such a delete is mirrored
the version the server deleted is read back from the library's commits: the
newest commit since the last listing that still holds the file (a binary
search over the first-parent chain, ``GET …/file/revision/`` per probe).
When it lacks one of our recorded pushes (:func:`~.stale.pushes_lacked`), our
version is archived in ``/.conflict/`` with a notice and the delete goes on;
when it holds them (the deleter saw our lines), or the server keeps no
revisions, the delete is mirrored as before; when the history does not reach
the last listing within :data:`HISTORY_PAGES` pages (a long outage), our
version is kept in ``/.conflict/`` rather than guessed away.

The last listing's head may itself lack the file: a pass that listed the
delete (or a move away) was killed before it mirrored it, and its head was
recorded.  The version removed is then the one in the newest commit before
that head that still held the file, found by probing back from it
(:data:`LOOK_BACK` commits at most).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timezone

from ..client.commits import CommitInfo, first_parents
from ..context import MirrorContext
from ..errors import NotFoundError
from ..events import ConflictRecord
from .archive import archive
from .choose import TEXT_LIMIT
from .conflict_names import origin_of
from .resolve import Copy
from .stale import has_pushes, pushes_lacked

__all__ = ["LOOK_BACK", "commit_chain", "commits_before", "deleted_version", "keep_unseen_before_delete"]

log = logging.getLogger(__name__)

#: Commits per history page read to find where the file was deleted.
HISTORY_PAGE = 50
#: History pages read at most (1,000 commits since the last listing): beyond,
#: which version was deleted cannot be told and ours is kept as a copy.
HISTORY_PAGES = 20
#: Commits before the last listing's head searched for the file when that head
#: no longer held it (the listing saw the delete, its pass did not mirror it).
LOOK_BACK = 50


def commit_chain(ctx: MirrorContext, since: str) -> list[str] | None:
    """The first-parent chain of commit ids from the newest back to ``since``
    (included, last), or None when :data:`HISTORY_PAGES` pages of the
    history do not reach it (or the history ends before it).

    One request per page: ``GET /api2/repos/{id}/history/?page=&per_page=``.

    :raises RemoteError: from the client.
    """
    commits: list[CommitInfo] = []
    for page in range(1, HISTORY_PAGES + 1):
        more_commits, more = ctx.client.commit_history(ctx.repo_id, page=page, per_page=HISTORY_PAGE)
        commits += more_commits
        chain = first_parents(commits, since, commits[0].id) if commits else None
        if chain is not None:
            return [*(c.id for c in chain), since]
        if not more or not more_commits:
            return None
    return None


def commits_before(ctx: MirrorContext, since: str, count: int = LOOK_BACK) -> list[str]:
    """Up to ``count`` commit ids before ``since`` on its first-parent
    line, newest first (fewer where the history ends or
    :data:`HISTORY_PAGES` pages end first).

    One request per page: ``GET /api2/repos/{id}/history/?page=&per_page=``.

    :raises RemoteError: from the client.
    """
    by_id: dict[str, CommitInfo] = {}
    for page in range(1, HISTORY_PAGES + 1):
        more_commits, more = ctx.client.commit_history(ctx.repo_id, page=page, per_page=HISTORY_PAGE)
        by_id.update({c.id: c for c in more_commits})
        line: list[str] = []
        at = by_id.get(since)
        while at is not None and at.parent_id is not None and len(line) < count:
            line.append(at.parent_id)
            at = by_id.get(at.parent_id)
        # complete: enough commits, the first commit reached, or no page left to read
        if len(line) >= count or (at is not None and at.parent_id is None) or not more or not more_commits:
            return line
    return line


def deleted_version(ctx: MirrorContext, rel_path: str, since: str | None,
                    chains: dict[str, list[str] | None] | None = None) -> bytes | None:
    """The content of ``rel_path`` in the newest commit that still held it,
    among the commits after ``since`` (the head of the last listing, which
    held it) or, when ``since`` itself lacks it, among the :data:`LOOK_BACK`
    commits before; None when that cannot be told.

    Requests: :func:`commit_chain` (once per ``since`` with the ``chains``
    cache of one pass), then about log2(commits) + 1
    ``GET /api2/repos/{id}/file/revision/`` downloads; when ``since``
    itself lacks the file, :func:`commits_before` and about
    2 × log2(commits back) more downloads.

    :raises RemoteError: from the client, other than a missing revision.
    """
    if not since:
        return None
    chains = {} if chains is None else chains
    if since not in chains:
        chains[since] = commit_chain(ctx, since)
    known = chains[since]
    if known is None:
        return None  # the last listing's head is not on this page
    chain: list[str] = known
    remote = ctx.remote_path(rel_path)
    found: dict[int, bytes] = {}

    def held(i: int) -> bool:
        try:
            found[i] = ctx.client.download_revision(ctx.repo_id, remote, chain[i])
        except NotFoundError:
            return False
        return True

    lo, hi = 0, len(chain) - 1  # the newest index that holds it lies in [lo, hi]
    if not held(hi):
        # the listing's head lacks it already (its pass was killed before the delete was
        # mirrored): the version removed is in the newest commit before it that held it
        chain = [*chain, *commits_before(ctx, since)]
        lo, holding = _newest_holding_after(len(known), len(chain), held)
        if holding is None:
            return None  # not in the commits before it either: nothing to tell
        hi = holding
    while lo < hi:
        mid = (lo + hi) // 2
        if held(mid):
            hi = mid
        else:
            lo = mid + 1
    return found[hi]


def _newest_holding_after(start: int, end: int, held: Callable[[int], bool]) -> tuple[int, int | None]:
    """Probe indexes ``start``, ``start + 2``, ``start + 6``, ``start + 14`` …
    (older and older commits, the gaps doubling; the one before ``start``
    lacks the file) below ``end`` for the first that holds the file.

    :returns: ``(lo, hi)``: the newest holding index lies in ``[lo, hi]``;
        ``hi`` is None when no probe held it.
    """
    miss, step = start - 1, 1
    while miss + 1 < end:
        probe = min(miss + step, end - 1)
        if held(probe):
            return miss + 1, probe
        miss, step = probe, step * 2
    return start, None


def keep_unseen_before_delete(ctx: MirrorContext, rel_path: str, since: str | None,
                              chains: dict[str, list[str] | None] | None = None) -> ConflictRecord | None:
    """Before the server's delete of ``rel_path`` is mirrored: archive our
    version in ``/.conflict/`` when the version the server deleted lacked
    one of our pushes (see the module docstring).

    :param since: the head of the last listing (the one that still held the file).
    :param chains: the commit chains read in this pass, by ``since`` (filled in).
    :returns: the conflict record when our version was archived, else None.
    :raises RemoteError: from the client (the delete waits for a later pass).
    :raises OSError: reading the local file failed.
    """
    if not has_pushes(ctx, rel_path):
        return None
    path = ctx.local_path(rel_path)
    if path.is_symlink() or not path.is_file() or path.stat().st_size > TEXT_LIMIT:
        return None
    ours = path.read_bytes()
    chains = {} if chains is None else chains
    try:
        deleted = deleted_version(ctx, rel_path, since, chains)
    except NotFoundError:
        return None  # the library's history is gone (or never kept): nothing to tell
    origin = origin_of(ours)
    side = "local" if origin == "remote" else origin
    if deleted is None and since and since in chains and chains[since] is None:
        # too many commits since ohsync last looked (a long outage): whether the
        # deleter had seen our lines cannot be told, so they are kept, not guessed away
        log.info("%s: deleted on the server after more commits than ohsync reads back; ours kept", rel_path)
        copy = Copy("upload", rel_path, side, "deleted on the server long after ohsync last looked; whether "
                    "that client had seen these lines cannot be told", ("delete",),
                    announce="deleted on the server; ours was kept as {stored} (delete it if that is fine)")
        return archive(ctx, rel_path, copy, theirs=ours, when=datetime.now(timezone.utc))
    if deleted is None:
        log.info("%s: deleted on the server; which version was deleted cannot be told", rel_path)
        return None
    if ours == deleted or not pushes_lacked(ctx, rel_path, deleted):
        return None
    reason = ("deleted on the server by a client that had not seen these lines "
              "(it had written over our version from an older one)")
    copy = Copy("upload", rel_path, side, reason, ("delete",),
                announce="deleted on the server from an older version; ours was kept as {stored}")
    return archive(ctx, rel_path, copy, theirs=ours, when=datetime.now(timezone.utc))
