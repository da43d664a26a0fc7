"""Optional server endpoints: asked once, worked around when absent.

Seafile servers differ in what they answer: the file history
(``GET /api/v2.1/repos/{id}/file/history/``) is missing on some (404, with
the file itself present).  The sync never needs it — it only makes merges
after other writers' overwrites sharper — so its absence is a capability
this module notes once in the mirror's context (``ctx.file_history``), not
a failed file; later passes do not ask again.  (The commit-details endpoint
is noted the same way by :mod:`.remote_diffs`, ``ctx.commit_diffs``.)
"""

from __future__ import annotations

import logging
from typing import Any

from .context import MirrorContext
from .errors import NotFoundError

__all__ = ["file_history"]

log = logging.getLogger(__name__)


def file_history(ctx: MirrorContext, rel_path: str, *, limit: int) -> list[Any] | None:
    """The newest ``limit`` revisions of ``rel_path``, newest first, or None
    when the server has no file-history endpoint (noted: not asked again).

    A 404 is told apart by one ``GET /api2/repos/{id}/file/detail/``: the
    file is there, so the endpoint is what is missing.

    :returns: the client's revisions (``commit_id``, ``file_id``…), or None.
    :raises NotFoundError: the file itself is gone.
    :raises RemoteError: from the client, for any other failure.
    """
    if not ctx.file_history:
        return None
    remote_path = ctx.remote_path(rel_path)
    try:
        revisions: list[Any] = ctx.client.file_history(ctx.repo_id, remote_path, limit=limit)
        return revisions
    except NotFoundError:
        ctx.client.file_detail(ctx.repo_id, remote_path)  # raises NotFoundError when the file is gone
    ctx.file_history = False
    log.info("the server has no file history (404 for %s, which exists); merges after another writer's "
             "overwrite are decided from the kept content from now on", rel_path)
    return None
