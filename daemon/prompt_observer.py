"""A watchdog observer that reports a rename without waiting half a second.

watchdog's inotify backend (``InotifyBuffer``) holds every ``IN_MOVED_FROM``
event for ``delay`` seconds (0.5) to pair it with the ``IN_MOVED_TO`` that
follows, and since its queue is first in, first out, every event behind it
waits as long: an editor's atomic save (a temp file renamed onto the note)
would reach the watcher half a second late.  The kernel queues both halves
of a rename together, so they nearly always arrive in one read and are
paired at once; the hold matters only when a read falls between them, and
then the other half is already queued.  :func:`prompt_observer` makes the
same observer with a hold of :data:`MOVE_PAIRING_DELAY` seconds.  An
unpaired half is still reported (as a deletion and a creation), so nothing
is lost when the hold is too short, only the rename is seen as two events.

Its emitter also keeps ``IN_DONT_FOLLOW`` in the inotify mask that an
``event_filter`` makes: watchdog builds that mask from the event types alone
and leaves the flag out, and then a symbolic link to a folder, met when a
new folder is watched, has its *target* watched: changes elsewhere on the
computer would come in as paths of the watched folder.

On systems without inotify, or a watchdog whose inotify backend is laid out
otherwise, it is watchdog's default ``Observer``.  Each observer made here
says in :data:`FILTER_FOLLOWS_NO_LINK` whether an event filter is safe on
it; a stock inotify observer is watched unfiltered (its full mask keeps the
flag).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
)
from watchdog.observers import Observer
from watchdog.observers.api import DEFAULT_OBSERVER_TIMEOUT, BaseObserver

from .service_thread import FILTER_FOLLOWS_NO_LINK

__all__ = ["CHANGE_EVENTS", "FILTER_FOLLOWS_NO_LINK", "MOVE_PAIRING_DELAY", "prompt_observer"]

log = logging.getLogger(__name__)

#: What a folder service watches for (``ServiceThread.event_filter``): changes
#: and a close after writing; not a file or folder opened or closed after
#: reading, which every reader of the folder causes (our own scans and
#: checks, an editor, an indexer) and the watchers ignore: left out of the
#: inotify mask, the kernel never queues them and watchdog never parses them.
CHANGE_EVENTS: list[type[FileSystemEvent]] = [
    FileCreatedEvent, DirCreatedEvent, FileModifiedEvent, DirModifiedEvent, FileDeletedEvent, DirDeletedEvent,
    FileMovedEvent, DirMovedEvent, FileClosedEvent]

#: Seconds the inotify backend holds an ``IN_MOVED_FROM`` for its pair (watchdog's own: 0.5).
MOVE_PAIRING_DELAY = 0.05


def _prompt_factory() -> Callable[[], BaseObserver] | None:
    """The factory of an inotify observer with the short hold, or None."""
    try:
        from watchdog.observers.inotify import InotifyEmitter
        from watchdog.observers.inotify_buffer import InotifyBuffer
        from watchdog.observers.inotify_c import InotifyConstants
    except ImportError:  # not Linux: watchdog's own observer
        return None
    if not isinstance(getattr(InotifyBuffer, "delay", None), (int, float)) or not callable(
            getattr(InotifyEmitter, "get_event_mask_from_filter", None)):
        log.debug("watchdog's inotify backend has no pairing delay to shorten; using its own observer")
        return None

    class _PromptBuffer(InotifyBuffer):
        delay = MOVE_PAIRING_DELAY

    class _PromptEmitter(InotifyEmitter):
        def get_event_mask_from_filter(self) -> int | None:
            mask = super().get_event_mask_from_filter()
            return None if mask is None else mask | InotifyConstants.IN_DONT_FOLLOW  # never through a link

        def on_thread_start(self) -> None:  # watchdog's, with the short-hold buffer
            path = os.fsencode(self.watch.path)
            self._inotify = _PromptBuffer(path, recursive=self.watch.is_recursive,
                                          event_mask=self.get_event_mask_from_filter())

    def make() -> BaseObserver:
        return BaseObserver(_PromptEmitter, timeout=DEFAULT_OBSERVER_TIMEOUT)

    return make


_FACTORY = _prompt_factory()


def prompt_observer() -> BaseObserver:
    """A new, unstarted observer: inotify with a :data:`MOVE_PAIRING_DELAY`
    hold where available, else watchdog's default ``Observer``; its
    :data:`FILTER_FOLLOWS_NO_LINK` attribute tells ``ServiceThread.watch``
    whether it may be given an event filter."""
    if _FACTORY is not None:
        observer = _FACTORY()
        safe = True
    else:
        observer = Observer()
        try:
            from watchdog.observers.inotify import InotifyObserver
        except ImportError:  # not inotify: the filter only sorts events, no mask follows a link
            safe = True
        else:
            safe = not isinstance(observer, InotifyObserver)
    setattr(observer, FILTER_FOLLOWS_NO_LINK, safe)
    return observer
