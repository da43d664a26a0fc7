"""Desktop notifications: what to announce, when, and how to send it.

Three layers:

* :class:`Announcer` (pure) turns daemon events and successive status
  objects into :class:`Notice` values: one per new conflict (once per
  conflict, naming the file), one per completed filing, one when login
  becomes necessary, one when a mirror stops, one per distinct error.
* :class:`Notifier` debounces: notices that arrive close together are sent as
  one summary (:func:`summarize`), in a thread named ``ohsync-tray-notify``
  that :meth:`Notifier.close` joins (and the sender's own threads with it).
* senders: :func:`freedesktop_sender` talks to ``org.freedesktop.Notifications``
  over the session bus with jeepney (Linux; a conflict notice's
  **Open ohsync…** button opens the daemon's local page); :func:`pystray_sender`
  uses pystray's ``Icon.notify`` (macOS, Windows, or no jeepney; no buttons).
"""

from __future__ import annotations

import collections
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from ..daemon.service_thread import ServiceThread

__all__ = [
    "PAGE_ACTION",
    "Notice",
    "Announcer",
    "Notifier",
    "Sender",
    "summarize",
    "freedesktop_sender",
    "pystray_sender",
    "default_sender",
]

log = logging.getLogger(__name__)

#: ``send(title, body)``, or ``send(title, body, (label, callback))`` for a
#: notice with a button (the senders here take both); may raise, the notifier
#: logs and carries on.
Sender = Callable[..., None]
#: The button of a conflict notice (when the notifier has ``open_page``).
PAGE_ACTION = "Open ohsync…"
#: Seconds a notice's button is listened for.
ACTION_WAIT = 600.0
#: Seconds between two looks, while listening for a button, whether the tray is closing.
ACTION_SLICE = 0.5
#: Notices whose buttons are listened for at once.
BUTTON_THREADS = 8

APP_NAME = "ohsync"
MAX_SUMMARY_LINES = 5


@dataclass(frozen=True)
class Notice:
    """One thing worth telling the person.

    :ivar kind: ``conflict``, ``filed``, ``login``, ``stopped`` or ``error``.
    """

    kind: str
    title: str
    body: str = ""


def _name(path: Any) -> str:
    text = str(path or "").rstrip("/")
    return text.rsplit("/", 1)[-1] or text


class Announcer:
    """Decides which events deserve a notice; remembers what it already said."""

    def __init__(self) -> None:
        self._seen_conflicts: set[tuple[str, str]] = set()
        self._seeded = False
        self._state: str | None = None
        self._stopped_mirrors: set[str] = set()
        self._errors: set[str] = set()

    @staticmethod
    def _conflict_key(conflict: dict[str, Any]) -> tuple[str, str]:
        return str(conflict.get("path") or ""), str(conflict.get("archived") or "")

    def _conflict_notice(self, conflict: dict[str, Any]) -> Notice | None:
        key = self._conflict_key(conflict)
        if key in self._seen_conflicts:
            return None
        self._seen_conflicts.add(key)
        path = conflict.get("path") or conflict.get("archived")
        body = "Both versions were kept: yours stays in place"
        if conflict.get("archived"):
            body += f", the other is in {conflict['archived']}"
        return Notice("conflict", f"Conflict in {_name(path)}", body + ".")

    def on_conflicts(self, conflicts: Iterable[dict[str, Any]]) -> list[Notice]:
        """The ``conflicts`` list after (re)connecting.

        The first list ever seen is what was already waiting when the tray
        started: it is remembered silently (the badge shows it).  Later lists
        announce only conflicts not seen before (e.g. while disconnected).
        """
        if not self._seeded:
            self._seeded = True
            self._seen_conflicts.update(self._conflict_key(c) for c in conflicts)
            return []
        return [n for n in map(self._conflict_notice, conflicts) if n is not None]

    def on_event(self, event: dict[str, Any]) -> list[Notice]:
        """A ``subscribe`` event (``status`` events go to :meth:`on_status`)."""
        kind = event.get("type")
        if kind == "status":
            from .menu_model import status_from_event
            return self.on_status(status_from_event(event))
        if kind == "conflict":
            notice = self._conflict_notice(event)
            return [notice] if notice else []
        if kind == "filed":
            return self._filed_notices(event)
        if kind == "error":
            message = str(event.get("message") or "").strip()
            if not message or message in self._errors:
                return []
            self._errors.add(message)
            if event.get("kind") == "held_deletes":  # the mass-delete safety valve held deletions
                return [Notice("stopped", "Deletions held", message)]
            path = event.get("path")
            return [Notice("error", f"Problem with {_name(path)}" if path else "ohsync problem", message)]
        return []

    def _filed_notices(self, event: dict[str, Any]) -> list[Notice]:
        """A filing outcome (``FilingResult.as_dict()``): ``status`` says how it went.

        ``filed`` → "Filed x"; ``duplicate`` → "Already filed"; ``failed`` /
        ``over_quota`` → "Could not file x" (once per file and message: held
        files are retried); ``not_ready`` (still downloading) → nothing.
        """
        status = str(event.get("status") or "filed")
        name = event.get("name") or _name(event.get("source") or event.get("path"))
        message = str(event.get("message") or "").strip()
        if status == "filed":
            dest = event.get("dest") or event.get("remote_path") or event.get("destination") or ""
            return [Notice("filed", f"Filed {name}", f"{name} → {dest}" if dest else str(name))]
        if status == "not_ready":
            return []
        key = f"filing:{event.get('source')}:{status}:{message}"
        if key in self._errors:
            return []
        self._errors.add(key)
        if status == "duplicate":
            return [Notice("filed", f"{name} is already filed", message or "The same file is already in /Files/.")]
        return [Notice("error", f"Could not file {name}", message or status.replace("_", " "))]

    def on_status(self, status: dict[str, Any] | None) -> list[Notice]:
        """A new status object (``None``: the daemon went away)."""
        notices: list[Notice] = []
        if status is None:
            self._state = None
            return notices
        state = status.get("state")
        if state == "auth_required" and self._state != "auth_required":
            notices.append(Notice("login", "Login needed",
                                  "ohsync cannot reach your library. Run: ohsync login"))
        self._state = str(state)
        stopped = {str(m.get("name") or m.get("library") or m.get("local") or "?"): str(m.get("message") or "")
                   for m in status.get("mirrors") or () if isinstance(m, dict) and m.get("state") == "stopped"}
        if state == "stopped" and not stopped:
            stopped = {"ohsync": str(status.get("message") or "")}
        for library, message in stopped.items():
            if library not in self._stopped_mirrors:
                notices.append(Notice("stopped", f"{library} stopped syncing",
                                      message or "A safety check stopped this folder. See ohsync status."))
        self._stopped_mirrors = set(stopped)
        return notices


def summarize(notices: list[Notice]) -> Notice:
    """One notice standing for several (a single one is returned unchanged)."""
    if len(notices) == 1:
        return notices[0]
    kinds = {n.kind for n in notices}

    def lines(items: list[str]) -> str:
        shown = items[:MAX_SUMMARY_LINES]
        if len(items) > MAX_SUMMARY_LINES:
            shown.append(f"… and {len(items) - MAX_SUMMARY_LINES} more")
        return "\n".join(shown)

    if kinds == {"conflict"}:
        names = [n.title.removeprefix("Conflict in ") for n in notices]
        return Notice("conflict", f"{len(notices)} conflicts",
                      lines(names) + "\nBoth versions of each were kept.")
    if kinds == {"filed"}:
        return Notice("filed", f"Filed {len(notices)} files", lines([n.body for n in notices]))
    return Notice("summary", f"ohsync: {len(notices)} updates", lines([n.title for n in notices]))


class Notifier:
    """Debounced delivery: a burst of notices becomes one summary.

    A batch opens with its first notice and is sent once ``quiet`` seconds
    pass without another, or ``max_wait`` seconds after it opened.

    :param send: the sender (``send(title, body)``).
    :param open_page: when given, a conflict notice gets a button
        (:data:`PAGE_ACTION`) that calls it (``send(title, body, (label, open_page))``).
    """

    def __init__(self, send: Sender, *, quiet: float = 1.5, max_wait: float = 5.0,
                 clock: Callable[[], float] = time.monotonic,
                 open_page: Callable[[], Any] | None = None) -> None:
        self._send = send
        self._open_page = open_page
        self._quiet, self._max_wait, self._clock = quiet, max_wait, clock
        self._cond = threading.Condition()
        self._batch: list[Notice] = []
        self._first = self._last = 0.0
        self._closed = False
        # a daemon thread: close() joins it, but a desktop's notification call (pystray's
        # Icon.notify) has no timeout and must not hold the tray's exit
        self._thread = ServiceThread("ohsync-tray-notify", target=self._run, daemon=True)
        self._thread.start_thread()

    def post(self, notice: Notice) -> None:
        """Queue one notice (never blocks on the desktop)."""
        with self._cond:
            if self._closed:
                return
            now = self._clock()
            if not self._batch:
                self._first = now
            self._last = now
            self._batch.append(notice)
            self._cond.notify()

    def post_all(self, notices: Iterable[Notice]) -> None:
        for notice in notices:
            self.post(notice)

    def close(self, *, flush: bool = True) -> None:
        """Stop the thread, sending what is queued first if ``flush``; then close
        the sender (a sender with a ``close()`` stops listening for buttons)."""
        with self._cond:
            if not flush:
                self._batch.clear()
            self._closed = True
            self._cond.notify()
        self._thread.stop(timeout=10)
        close = getattr(self._send, "close", None)
        if callable(close):
            close()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._batch and not self._closed:
                    self._cond.wait()
                if not self._batch and self._closed:
                    return
                while not self._closed:
                    now = self._clock()
                    due = min(self._last + self._quiet, self._first + self._max_wait)
                    if now >= due:
                        break
                    self._cond.wait(due - now)
                batch, self._batch = self._batch, []
            notice = summarize(batch)
            try:
                if self._open_page is not None and notice.kind == "conflict":
                    self._send(notice.title, notice.body, (PAGE_ACTION, self._open_page))
                else:
                    self._send(notice.title, notice.body)
            except Exception as exc:  # noqa: BLE001 - a missing notification service must not kill the tray
                log.warning("could not show notification %r: %s", notice.title, exc)


# --- senders --------------------------------------------------------------------

def freedesktop_sender(app_name: str = APP_NAME, *, timeout_ms: int = 8000) -> Sender:
    """A sender for ``org.freedesktop.Notifications`` on the session bus (jeepney).

    A notice with a button keeps its connection open while the button is
    listened for (up to :data:`ACTION_WAIT` s), on the sender's executor;
    the sender's ``close()`` ends those waits within :data:`ACTION_SLICE` s.

    :raises ImportError: jeepney is not installed.
    """
    return _FreedesktopSender(app_name, timeout_ms)


class _FreedesktopSender:
    """The sender of :func:`freedesktop_sender`: callable, and closed with its notifier."""

    def __init__(self, app_name: str, timeout_ms: int) -> None:
        from jeepney import DBusAddress

        self._app_name, self._timeout_ms = app_name, timeout_ms
        self._address = DBusAddress("/org/freedesktop/Notifications", bus_name="org.freedesktop.Notifications",
                                    interface="org.freedesktop.Notifications")
        self._closing = threading.Event()
        self._lock = threading.Lock()
        self._buttons: ThreadPoolExecutor | None = None  # made at the first notice with a button

    def __call__(self, title: str, body: str, action: tuple[str, Callable[[], Any]] | None = None) -> None:
        from jeepney import MatchRule, message_bus, new_method_call
        from jeepney.io.blocking import open_dbus_connection
        from jeepney.wrappers import unwrap_msg

        buttons = ["default", action[0]] if action is not None else []
        msg = new_method_call(self._address, "Notify", "susssasa{sv}i",
                              (self._app_name, 0, "", title, body, buttons, {}, self._timeout_ms))
        if action is None:
            with open_dbus_connection(bus="SESSION") as conn:
                unwrap_msg(conn.send_and_get_reply(msg, timeout=5))
            return
        # the button's signal comes to this connection: it stays open while the button is listened for
        conn = open_dbus_connection(bus="SESSION")
        try:
            rule = MatchRule(type="signal", interface=self._address.interface, path=self._address.object_path)
            queue: collections.deque[Any] = collections.deque(maxlen=32)
            conn.filter(rule, queue=queue)  # registered at once; the connection goes with the wait
            unwrap_msg(conn.send_and_get_reply(message_bus.AddMatch(rule), timeout=5))
            notice_id = unwrap_msg(conn.send_and_get_reply(msg, timeout=5))[0]
            with self._lock:
                if self._closing.is_set():
                    raise RuntimeError("the notifier is closed")
                if self._buttons is None:
                    self._buttons = ThreadPoolExecutor(max_workers=BUTTON_THREADS,
                                                       thread_name_prefix="ohsync-tray-notice-button")
                self._buttons.submit(_await_button, conn, queue, notice_id, action[1], self._closing)
        except BaseException:
            conn.close()
            raise

    def close(self) -> None:
        """Stop listening for buttons; joins the waits."""
        self._closing.set()
        with self._lock:
            buttons, self._buttons = self._buttons, None
        if buttons is not None:
            buttons.shutdown(wait=True, cancel_futures=True)


def _await_button(conn: Any, queue: Any, notice_id: int, callback: Callable[[], Any],
                  closing: threading.Event) -> None:
    """Call ``callback`` when notice ``notice_id``'s button is pressed; end when it is
    closed, after :data:`ACTION_WAIT` seconds, or once ``closing`` is set."""
    deadline = time.monotonic() + ACTION_WAIT
    try:
        while (left := deadline - time.monotonic()) > 0 and not closing.is_set():
            try:
                msg = conn.recv_until_filtered(queue, timeout=min(left, ACTION_SLICE))
            except TimeoutError:
                continue
            from jeepney import HeaderFields

            member = msg.header.fields.get(HeaderFields.member)
            if not msg.body or msg.body[0] != notice_id:
                continue
            if member == "ActionInvoked":
                try:
                    callback()
                except Exception as exc:  # noqa: BLE001 - a button must not kill the tray
                    log.warning("the notice's button failed: %s", exc)
                return
            if member == "NotificationClosed":
                return
    except OSError as exc:
        log.debug("stopped listening for a notice's button: %s", exc)
    finally:
        conn.close()


def pystray_sender(icon: Any) -> Sender:
    """A sender through pystray's ``Icon.notify`` (message, title)."""

    def send(title: str, body: str, action: Any = None) -> None:  # pystray shows no buttons
        icon.notify(body or title, title)

    return send


def default_sender(icon: Any) -> Sender:
    """freedesktop via jeepney where there is a session bus, else pystray."""
    if sys.platform.startswith("linux") and os.environ.get("DBUS_SESSION_BUS_ADDRESS"):
        try:
            return freedesktop_sender()
        except ImportError:
            log.info("jeepney is not installed; notifications go through pystray")
    return pystray_sender(icon)
