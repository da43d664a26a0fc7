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
when it holds them (the deleter saw our lines), the delete is mirrored as
before; when the history does not reach
the last listing within :data:`HISTORY_PAGES` pages (a long outage), our
version is kept in ``/.conflict/`` rather than guessed away.  The checks of
one pass share the history pages they read (:class:`CommitPages`).

The last listing's head may itself lack the file: a pass that listed the
delete (or a move away) was killed before it mirrored it, and its head was
recorded.  The version removed is then the one in the newest commit before
that head that still held the file, found by probing back from it
(:data:`LOOK_BACK` commits at most); a file that came after that listing
(ours, uploaded by the pass that listed) is found in the commits since
first.  When none of those held it, ours is kept in ``/.conflict/`` too.
Known limitation: a library whose old revisions were purged (a short
history setting) can get a copy it did not need there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timezone

from ..client.commits import CommitInfo, first_parents
from ..context import MirrorContext
from ..errors import NotFoundError
from ..events import ConflictRecord
from ..nofollow import read_file
from .archive import archive
from .choose import TEXT_LIMIT
from .conflict_names import origin_of
from .resolve import Copy
from .stale import has_pushes, pushes_lacked

__all__ = ["LOOK_BACK", "CommitPages", "deleted_version", "keep_unseen_before_delete"]

log = logging.getLogger(__name__)

#: Commits per history page read to find where the file was deleted.
HISTORY_PAGE = 50
#: History pages read at most (1,000 commits since the last listing): beyond,
#: which version was deleted cannot be told and ours is kept as a copy.
HISTORY_PAGES = 20
#: Commits before the last listing's head searched for the file when that head
#: no longer held it (the listing saw the delete, its pass did not mirror it).
LOOK_BACK = 50
#: Commits after a listing's head that lacked the file probed one by one
#: (newest first) before the gaps double: a file of ours uploaded after that
#: listing and removed since usually lies a commit or two back.
NEWER_PROBES = 8


class CommitPages:
    """The library's commit history, read a page at a time as the delete
    checks of one pass need it and shared by them: each page is read once
    per pass, however many deletes are checked and from however many heads.

    One request per page: ``GET /api2/repos/{id}/history/?page=&per_page=``
    (:data:`HISTORY_PAGE` commits each, :data:`HISTORY_PAGES` pages at most).
    Commits arriving meanwhile shift the pages, so a page may repeat commits
    already read, never skip one.

    :param ctx: the mirror's context (client and library).
    """

    def __init__(self, ctx: MirrorContext) -> None:
        self._ctx = ctx
        self._by_id: dict[str, CommitInfo] = {}
        self._newest: str | None = None
        self._pages = 0
        self._more = True
        self._chains: dict[str, list[str] | None] = {}

    def _next_page(self) -> bool:
        """Read one more page; False when none is left (or :data:`HISTORY_PAGES` were read).

        :raises RemoteError: from the client.
        """
        if not self._more or self._pages >= HISTORY_PAGES:
            return False
        commits, more = self._ctx.client.commit_history(self._ctx.repo_id, page=self._pages + 1,
                                                        per_page=HISTORY_PAGE)
        self._pages += 1
        self._more = more and bool(commits)
        if commits and self._newest is None:
            self._newest = commits[0].id
        self._by_id.update({c.id: c for c in commits})
        return bool(commits)

    def chain_to(self, since: str) -> list[str] | None:
        """The first-parent chain of commit ids from the newest back to
        ``since`` (included, last), or None when the pages do not reach it
        (or the history ends before it).  Remembered per ``since``.

        :raises RemoteError: from the client.
        """
        if since in self._chains:
            return self._chains[since]
        result: list[str] | None = None
        while True:
            chain = first_parents(list(self._by_id.values()), since, self._newest) if self._newest else None
            if chain is not None:
                result = [*(c.id for c in chain), since]
                break
            if not self._next_page():
                break
        self._chains[since] = result
        return result

    def before(self, since: str, count: int | None = None) -> list[str]:
        """Up to ``count`` (default :data:`LOOK_BACK`) commit ids before
        ``since`` on its first-parent line, newest first (fewer where the
        history or the pages end first).

        :raises RemoteError: from the client.
        """
        count = LOOK_BACK if count is None else count
        line: list[str] = []
        at = since
        while len(line) < count:
            commit = self._by_id.get(at)
            if commit is None:
                if self._next_page():
                    continue
                break
            if commit.parent_id is None:
                break  # the library's first commit
            line.append(commit.parent_id)
            at = commit.parent_id
        return line


def deleted_version(ctx: MirrorContext, rel_path: str, since: str | None,
                    pages: CommitPages | None = None) -> bytes | None:
    """The content of ``rel_path`` in the newest commit that still held it,
    among the commits after ``since`` (the head of the last listing, which
    mostly held it) or, when none of those held it, among the
    :data:`LOOK_BACK` commits before; None when that cannot be told.

    Requests: the history pages :class:`CommitPages` has not read yet in
    this pass (``pages``), then about log2(commits) + 1
    ``GET /api2/repos/{id}/file/revision/`` downloads; when ``since``
    itself lacks the file, about 2 × log2(commits back) more downloads.

    :raises RemoteError: from the client, other than a missing revision.
    """
    if not since:
        return None
    pages = CommitPages(ctx) if pages is None else pages
    known = pages.chain_to(since)
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
        # The listing's head lacks it: the file came after that listing (ours, uploaded by the
        # pass that listed, then removed), so the version removed is in a commit since; or the
        # listing saw the delete and its pass was killed before mirroring it: in one before.
        lo, holding = _newest_holding_after(0, hi, held, linear=NEWER_PROBES)
        if holding is None:
            chain = [*chain, *pages.before(since)]
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


def _newest_holding_after(start: int, end: int, held: Callable[[int], bool], *,
                          linear: int = 0) -> tuple[int, int | None]:
    """Probe indexes ``start`` … ``start + linear - 1`` one by one, then on
    with the gaps doubling (``start``, ``start + 2``, ``start + 6`` … when
    ``linear`` is 0; older and older commits, the one before ``start``
    lacks the file), below ``end``, for the first that holds the file.

    :returns: ``(lo, hi)``: the newest holding index lies in ``[lo, hi]``;
        ``hi`` is None when no probe held it.
    """
    miss, step = start - 1, 1
    while miss + 1 < end:
        probe = min(miss + step, end - 1)
        if held(probe):
            return miss + 1, probe
        miss = probe
        if probe - start + 1 >= linear:
            step *= 2
    return start, None


def keep_unseen_before_delete(ctx: MirrorContext, rel_path: str, since: str | None,
                              pages: CommitPages | None = None) -> ConflictRecord | None:
    """Before the server's delete of ``rel_path`` is mirrored: archive our
    version in ``/.conflict/`` when the version the server deleted lacked
    one of our pushes, or when which version it deleted cannot be told
    (see the module docstring).

    :param since: the head of the last listing (the one that still held the file).
    :param pages: the commit history read in this pass (shared by its checks).
    :returns: the conflict record when our version was archived, else None.
    :raises RemoteError: from the client (the delete waits for a later pass).
    :raises OSError: reading the local file failed.
    """
    if not has_pushes(ctx, rel_path):
        return None
    path = ctx.local_path(rel_path)
    if path.is_symlink() or not path.is_file() or path.stat().st_size > TEXT_LIMIT:
        return None
    ours, _ = read_file(ctx.local_root, rel_path)  # the file itself, never a link swapped in since
    pages = CommitPages(ctx) if pages is None else pages
    try:
        deleted = deleted_version(ctx, rel_path, since, pages)
    except NotFoundError:
        return None  # the library's history is gone (or never kept): nothing to tell
    origin = origin_of(ours)
    side = "local" if origin == "remote" else origin
    if deleted is None and since:
        # chain_to is remembered: no request more
        if pages.chain_to(since) is None:
            # too many commits since ohsync last looked (a long outage): whether the
            # deleter had seen our lines cannot be told, so they are kept, not guessed away
            log.info("%s: deleted on the server after more commits than ohsync reads back; ours kept", rel_path)
            reason = "deleted on the server long after ohsync last looked"
        else:
            # no commit since the listing nor LOOK_BACK before it held it (a kill after a
            # listing, then a busy library; or revisions the server no longer keeps)
            log.info("%s: deleted on the server more than %d commits before ohsync's last look; ours kept",
                     rel_path, LOOK_BACK)
            reason = f"deleted on the server more than {LOOK_BACK} commits before ohsync last looked"
        copy = Copy("upload", rel_path, side, f"{reason}; whether that client had seen these lines cannot be told",
                    ("delete",),
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
