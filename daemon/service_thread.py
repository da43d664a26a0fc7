"""The thread base of every long-lived thread of the daemon and the tray:
one loop thread, started and stopped (joined) by the object that made it,
and for the folder services a watchdog observer feeding it.

Who makes which thread (docs/architecture.md §6, "Threads and their
owners"): the :class:`~ohsync.daemon.app.Daemon` starts the socket's
selector thread, the local page's server thread, each mirror, and its
:class:`Ticker` (the mirror folders' guard), and stops them in the reverse
order; each :class:`~ohsync.daemon.mirror.Mirror` its worker (which makes
its :class:`~ohsync.daemon.scheduler.Scheduler`), watcher, drop-folder
service and push channel; the tray's ``TrayApp`` its UI thread, its
controller's subscription thread and its notifier's.  Work that is not a
loop runs on an executor (``concurrent.futures``) that its owner shuts
down: the socket's request handlers, the memory index's build, the tray's
menu actions, a session's transfers.

:class:`~ohsync.daemon.watcher.Watcher` (the mirror folder) and
:class:`~ohsync.daemon.filing_service.FilingService` (the drop folder) both
are one: the observer's handler notes events under :attr:`ServiceThread.cond`,
the loop (:meth:`ServiceThread.run_loop`) waits on it and hands work on.
Modelled on watchdog's ``BaseThread``: a thread that runs while
:meth:`should_keep_running`, a :meth:`stop` that signals, wakes and joins,
and hooks around the start.  Not a daemon thread unless its owner says
why (``daemon=True`` only for a loop that may block in I/O past the join).

It imports nothing else of ohsync (the tray uses it too; watchdog is named
for types only).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from watchdog.events import FileSystemEvent, FileSystemEventHandler
    from watchdog.observers.api import BaseObserver

__all__ = ["FILTER_FOLLOWS_NO_LINK", "ServiceThread", "Ticker"]

log = logging.getLogger(__name__)

#: The observer attribute that says an event filter on it follows no link
#: (set by :func:`~ohsync.daemon.prompt_observer.prompt_observer`).
FILTER_FOLLOWS_NO_LINK = "filter_follows_no_link"

#: How long :meth:`ServiceThread.stop` waits for each thread.
JOIN_TIMEOUT = 5.0


class ServiceThread:
    """A loop thread, for a folder service plus the observer of its folder.

    :param name: the loop thread's name (the observer is ``<name>-observer``
        unless ``observer_name`` says otherwise).
    :param observer_factory: makes the watchdog observer (tests may pass a
        polling observer); None for a loop without a watched folder.
    :param observer_name: the observer thread's name.
    :param daemon: whether the loop thread is a daemon thread (only where
        its owner cannot always join it: a loop that may block in I/O).
    :param target: the loop's body, for an owner that keeps its loop in a
        method of its own (else a subclass implements :meth:`run_loop`);
        it returns once the owner's own stop signal came.
    """

    #: The watchdog event classes the observer reports (None: all of them);
    #: given, the kernel is asked for those only (the inotify mask).
    event_filter: list[type[FileSystemEvent]] | None = None


    def __init__(self, name: str, observer_factory: Callable[[], BaseObserver] | None = None, *,
                 observer_name: str | None = None, daemon: bool = False,
                 target: Callable[[], object] | None = None) -> None:
        self.thread_name = name
        self.observer_name = observer_name or f"{name}-observer"
        self._observer_factory = observer_factory
        self._daemon = daemon
        self._target = target
        self._observer: BaseObserver | None = None
        self._thread: threading.Thread | None = None
        #: Guards the subclass's pending work; the loop waits on it.
        self.cond = threading.Condition()
        self._stopping = False

    # ----------------------------------------------------------------- for subclasses

    def run_loop(self) -> None:
        """The loop thread's body: wait on :attr:`cond`, act, until
        :meth:`should_keep_running` says no.  Subclasses implement it, or
        the owner passes ``target``."""
        if self._target is None:
            raise NotImplementedError
        self._target()

    def on_thread_start(self) -> None:
        """Called right before the loop thread starts (observer already running)."""

    def should_keep_running(self) -> bool:
        """False once :meth:`stop` was called."""
        return not self._stopping

    def pause(self, seconds: float) -> bool:
        """Wait ``seconds`` or until :meth:`stop`, whichever comes first (on the loop thread).

        :returns: True while the loop is to go on.
        """
        with self.cond:
            self.cond.wait_for(lambda: self._stopping, timeout=seconds)
            return not self._stopping

    def watch(self, folder: Path, handler: FileSystemEventHandler) -> BaseObserver:
        """A started observer of ``folder`` (recursive) calling ``handler``.

        :raises OSError: the folder cannot be watched (missing, inotify limit).
        """
        assert self._observer_factory is not None, "a loop without an observer watches no folder"
        observer = self._observer_factory()
        observer.name = self.observer_name
        # a filter only where the observer says it follows no link with one (prompt_observer.py)
        event_filter = self.event_filter if getattr(observer, FILTER_FOLLOWS_NO_LINK, False) else None
        observer.schedule(handler, str(folder), recursive=True, event_filter=event_filter)
        try:
            observer.start()
        except BaseException:
            observer.stop()
            raise
        return observer

    def replace_observer(self, folder: Path, handler: FileSystemEventHandler) -> bool:
        """Watch ``folder`` afresh with a new observer, then stop the old one
        (call without holding :attr:`cond`).

        :returns: False (the old watch kept) when the new one cannot start.
        """
        old = self._observer
        try:
            self._observer = self.watch(folder, handler)
        except OSError as exc:
            log.warning("cannot watch %s afresh (%s); keeping the current watch", folder, exc.strerror or exc)
            return False
        if old is not None:
            old.stop()
            old.join(timeout=JOIN_TIMEOUT)
        return True

    def stop_observer(self) -> None:
        """Stop watching (the loop thread goes on) until :meth:`replace_observer`
        watches again; what happens meanwhile is not reported (call without
        holding :attr:`cond`)."""
        old, self._observer = self._observer, None
        if old is not None:
            old.stop()
            old.join(timeout=JOIN_TIMEOUT)

    # ----------------------------------------------------------------- lifecycle

    def start_watching(self, folder: Path, handler: FileSystemEventHandler) -> None:
        """Start the observer of ``folder``, then the loop thread.

        :raises OSError: the folder cannot be watched.
        """
        self._observer = self.watch(folder, handler)
        self.start_thread()

    def start_thread(self) -> None:
        """Start the loop thread (after :meth:`on_thread_start`)."""
        self.on_thread_start()
        self._thread = threading.Thread(target=self.run_loop, name=self.thread_name, daemon=self._daemon)
        self._thread.start()

    def wake(self) -> None:
        """Wake the loop (new work, or a changed deadline)."""
        with self.cond:
            self.cond.notify_all()

    def stop(self, timeout: float = JOIN_TIMEOUT) -> None:
        """Signal the loop to stop, wake it, stop the observer and join both
        (each for at most ``timeout`` seconds)."""
        with self.cond:
            self._stopping = True
            self.cond.notify_all()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=timeout)
        if self._thread is not None and self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=timeout)

    def is_alive(self) -> bool:
        """True while both the observer and the loop thread run."""
        return bool(self._observer and self._observer.is_alive() and self.thread_alive())

    def thread_alive(self) -> bool:
        """True while the loop thread runs."""
        return bool(self._thread and self._thread.is_alive())


class Ticker(ServiceThread):
    """A loop thread that calls ``tick()`` every ``every`` seconds until stopped.

    :param name: the thread's name.
    :param every: seconds between two calls (the first comes after ``every``).
    :param tick: the call; an exception is logged and the ticks go on.
    :param daemon: as for :class:`ServiceThread`.
    """

    def __init__(self, name: str, every: float, tick: Callable[[], None], *, daemon: bool = False) -> None:
        super().__init__(name, daemon=daemon)
        self._every = every
        self._tick = tick

    def run_loop(self) -> None:
        """Tick until :meth:`stop`."""
        while self.pause(self._every):
            try:
                self._tick()
            except Exception:  # one failed tick must not end the loop
                log.exception("%s failed", self.thread_name)
