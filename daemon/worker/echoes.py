"""Echo suppression between the watcher and the sync worker.

Every file the engine writes comes back from the watcher as a changed path.
The engine tells which of the watcher's paths are echoes of its own writes
(``SyncEngine.watched``: the file still has the stat fingerprint recorded
when the engine wrote it): those cost no pass and are not counted as waiting
to upload.  After a cold mirror of 30,000 files that is the difference
between going idle and walking every file a second time.  A real edit moves
the fingerprint, so it is never left out; whatever the engine cannot tell
goes to the pass.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

__all__ = ["awaiting_push", "sort_watched"]

log = logging.getLogger(__name__)


def awaiting_push(engine: Any, paths: Iterable[str]) -> set[str]:
    """The paths that await push (``SyncEngine.awaiting_push``), echoes of our
    own writes left out; all of them when no engine is open or it cannot say.

    :param engine: the open engine, or None.
    :returns: rel paths.
    """
    paths = list(paths)
    check = getattr(engine, "awaiting_push", None)
    if check is None:
        return set(paths)
    try:
        return set(check(paths))
    except Exception:  # only a count: never stop the worker for it
        log.exception("counting the changes waiting to sync failed")
        return set(paths)


def sort_watched(engine: Any, paths: Iterable[str]) -> tuple[set[str], set[str]]:
    """``(to_sync, awaiting)``: the watcher's paths a pass must still look at,
    and those among them that await push (``SyncEngine.watched``).

    :param engine: the open engine, or None (then every path goes to the pass).
    :returns: two sets of rel paths; on any failure to tell, every path is in both.
    """
    paths = list(paths)
    check = getattr(engine, "watched", None)
    if check is None:
        return set(paths), awaiting_push(engine, paths)
    try:
        found = check(paths)
    except Exception:  # a filter only: the pass decides instead
        log.exception("sorting the watcher's paths failed")
        return set(paths), set(paths)
    return set(found.to_sync), set(found.awaiting)
