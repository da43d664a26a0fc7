"""The daemon's events for the page's live view (server-sent events).

:class:`EventHub` takes every event the daemon publishes (the same
``{"type": …}`` objects the socket's subscribers get: ``status``,
``synced``, ``conflict``, ``error``, ``filed``) and hands each to every open
``/api/events`` stream.  A stream that does not keep up loses its oldest
events (the next ``status`` event carries the whole state anyway).
"""

from __future__ import annotations

import contextlib
import queue
import threading
from typing import Any

__all__ = ["EventHub", "CLOSED"]

#: Put into a stream's queue when the page's server stops.
CLOSED: dict[str, Any] = {"type": "closed"}
_BACKLOG = 256


class EventHub:
    """Fan-out of daemon events to the open streams (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._streams: list[queue.Queue[dict[str, Any]]] = []
        self._closed = False

    def publish(self, event: dict[str, Any]) -> None:
        """Hand ``event`` to every open stream (any thread; never blocks)."""
        with self._lock:
            streams = list(self._streams)
        for q in streams:
            while True:
                try:
                    q.put_nowait(event)
                    break
                except queue.Full:
                    with contextlib.suppress(queue.Empty):
                        q.get_nowait()  # drop the oldest

    def open(self) -> queue.Queue[dict[str, Any]]:
        """A new stream's queue (:data:`CLOSED` arrives at once when the hub is closed)."""
        q: queue.Queue[dict[str, Any]] = queue.Queue(_BACKLOG)
        with self._lock:
            if self._closed:
                q.put_nowait(CLOSED)
            else:
                self._streams.append(q)
        return q

    def close_stream(self, q: queue.Queue[dict[str, Any]]) -> None:
        """Forget a stream (its client went away)."""
        with self._lock:
            if q in self._streams:
                self._streams.remove(q)

    def close(self) -> None:
        """End every stream (the page's server stops)."""
        with self._lock:
            self._closed = True
            streams, self._streams = self._streams, []
        for q in streams:
            try:
                q.put_nowait(CLOSED)
            except queue.Full:
                try:
                    q.get_nowait()
                    q.put_nowait(CLOSED)
                except (queue.Empty, queue.Full):
                    pass

    @property
    def streams(self) -> int:
        """How many streams are open."""
        with self._lock:
            return len(self._streams)
