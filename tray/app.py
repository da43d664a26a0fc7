"""The tray application: a client of the daemon's socket with a pystray icon.

:class:`TrayController` owns the connection (a ``subscribe`` stream in the
thread ``ohsync-tray-subscribe`` that reconnects with backoff when the daemon
restarts), the last status and conflict list, and the actions behind the
menu, run on its small executor (``ohsync-tray-action``) so the menu never
waits; it knows nothing about pystray.  :class:`TrayApp` draws the controller's
:class:`~ohsync.tray.menu_model.TrayView` into a pystray icon from the thread
``ohsync-tray-ui`` (coalesced, and re-drawn every 30 s so "synced 2 min ago"
ages).  Each owner starts its threads and joins them when it stops (threads
on the base of ``daemon/service_thread.py``, which imports nothing else of
ohsync).  :func:`run_tray` is the entry point for ``ohsync run`` (in-process,
``owns_daemon=True``) and ``ohsync tray`` (``owns_daemon=False``).

Nothing here imports ``ohsync.engine``: the socket protocol is the only
contract (docs/architecture.md §7).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import webbrowser
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..daemon.protocol import DaemonNotRunning, Event, Method, RpcClient, RpcError, default_socket_path, tray_pid_file
from ..daemon.service_thread import ServiceThread
from . import desktop, icons, menu_model, start_report
from .menu_model import Action, MenuEntry, TrayView
from .notifier import Announcer, Notice, Notifier, default_sender

__all__ = ["TrayApp", "TrayController", "default_start_command", "run_tray", "to_pystray_menu"]

log = logging.getLogger(__name__)

ICON_SIZE = 64
TICK_SECONDS = 30.0
MIN_REDRAW_SECONDS = 0.3
BACKOFF_START, BACKOFF_MAX = 0.5, 5.0
#: How long "Starting…" is shown after the Start item before giving up.
START_TIMEOUT = 30.0
#: Menu actions that may run at once (a Start waits up to START_TIMEOUT; a socket call up to 10 s).
ACTION_THREADS = 4
SYSTEMD_UNIT = "ohsync.service"


def default_start_command(config: str | os.PathLike[str] | None = None) -> list[str]:
    """How the Start item starts the daemon.

    The systemd user unit when it is installed (``systemctl --user start
    ohsync.service``: the daemon then outlives the session's tray and is
    restarted by systemd), else ``ohsync run --no-tray`` with this
    interpreter (the tray stays a separate process, as with ``ohsync tray``).

    :param config: the config file to pass as ``--config`` (default: the
        daemon's own lookup, ``$OHSYNC_CONFIG`` or the user config dir).
    """
    if config is None and shutil.which("systemctl"):
        try:
            found = subprocess.run(["systemctl", "--user", "cat", SYSTEMD_UNIT], stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=5, check=False)
            if found.returncode == 0:
                return ["systemctl", "--user", "start", SYSTEMD_UNIT]
        except (OSError, subprocess.SubprocessError):
            pass
    command = [sys.executable, "-m", "ohsync.daemon.cli"]
    if config is not None:
        command += ["--config", os.fspath(config)]
    return command + ["run", "--no-tray"]


class _SubscribeClient(RpcClient):
    """An :class:`RpcClient` whose ``subscribe`` socket can be closed from another thread."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        super().__init__(path, timeout=10.0)
        self._sock: socket.socket | None = None

    def _connect(self) -> socket.socket:
        sock = super()._connect()
        self._sock = sock
        return sock

    def close(self) -> None:
        sock = self._sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class TrayController:
    """Connection, state and actions of the tray; no UI toolkit.

    :param socket_path: the daemon's socket (``None``: the default path).
    :param owns_daemon: the daemon runs in this process; when its stream ends
        after having been live, ``on_daemon_gone`` is called.
    :param on_change: called (from any thread) whenever the view changed.
    :param notify: receives notices to show (already de-duplicated).
    :param start_command: the command behind the Start item (offered while
        no daemon answers); ``None``: :func:`default_start_command`.
    :param browser: opens an address in the browser (default :func:`webbrowser.open`).
    """

    def __init__(self, socket_path: str | os.PathLike[str] | None = None, *, owns_daemon: bool = False,
                 on_change: Callable[[], None] = lambda: None,
                 notify: Callable[[list[Notice]], None] = lambda notices: None,
                 on_daemon_gone: Callable[[], None] = lambda: None,
                 on_quit: Callable[[], None] = lambda: None,
                 opener: Callable[[str], None] = desktop.open_path,
                 clock: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
                 start_command: list[str] | None = None,
                 browser: Callable[[str], bool] | None = None) -> None:
        self.socket_path = Path(socket_path) if socket_path is not None else None
        self.owns_daemon = owns_daemon
        self._on_change, self._notify = on_change, notify
        self._on_daemon_gone, self._on_quit = on_daemon_gone, on_quit
        self._opener, self._clock = opener, clock
        self._start_command = start_command
        self._browser = browser or (lambda url: webbrowser.open(url, new=2))
        self._start_pending: float | None = None  # monotonic time of the last Start click
        self._lock = threading.Lock()
        self._status: dict[str, Any] | None = None
        self._conflicts: tuple[dict[str, Any], ...] | None = None
        self._progress = menu_model.SyncProgress()
        self._progress_now: tuple[int, int] | None = None
        self._ever_connected = False
        self._announcer = Announcer()
        self._stop = threading.Event()
        self._wake = threading.Event()  # cut a reconnect backoff short (after Start)
        self._client: _SubscribeClient | None = None
        self._thread: ServiceThread | None = None
        # made at the first action; stop() shuts it down (every action ends within its socket timeout)
        self._actions: ThreadPoolExecutor | None = None
        self._children: list[subprocess.Popen[bytes]] = []  # daemons the Start item started
        self.connected = threading.Event()  # set while the stream is live (tests wait on it)

    # --- state ----------------------------------------------------------------

    def view(self) -> TrayView:
        """What the menu and icon show right now."""
        with self._lock:
            start_pending = (self._start_pending is not None
                             and time.monotonic() - self._start_pending < START_TIMEOUT)
            return TrayView(status=self._status, conflicts=self._conflicts, now=self._clock(),
                            progress=self._progress_now, owns_daemon=self.owns_daemon,
                            socket=str(self.socket_path or default_socket_path()),
                            starting=(self.owns_daemon and not self._ever_connected) or start_pending)

    def _set_status(self, status: dict[str, Any] | None) -> list[Notice]:
        with self._lock:
            self._status = status
            self._progress_now = self._progress.update(status)
            if status is None:
                self._conflicts = None
        return self._announcer.on_status(status)

    def _rpc(self) -> RpcClient:
        return RpcClient(self.socket_path, timeout=10.0)

    def _fetch_conflicts(self) -> list[Notice]:
        try:
            answer = self._rpc().call(Method.CONFLICTS)
        except (DaemonNotRunning, RpcError, ConnectionError, OSError, ValueError) as exc:
            log.info("could not list conflicts: %s", exc)
            return []
        conflicts = tuple(c for c in answer if isinstance(c, dict)) if isinstance(answer, list) else ()
        with self._lock:
            self._conflicts = conflicts
        return self._announcer.on_conflicts(conflicts)

    # --- the subscription -----------------------------------------------------

    def start(self) -> None:
        """Start following the daemon (returns at once)."""
        # not a daemon thread: stop() closes its socket, which ends the stream it reads
        self._thread = ServiceThread("ohsync-tray-subscribe", target=self._follow)
        self._thread.start_thread()

    def reap(self) -> None:
        """Collect the exit status of daemons the Start item started that have ended (their
        process entries would otherwise stay as zombies for as long as the tray runs)."""
        with self._lock:
            self._children = [proc for proc in self._children if proc.poll() is None]

    def stop(self) -> None:
        """Stop following and acting; joins the subscription thread and the actions under way."""
        self.reap()
        self._stop.set()
        self._wake.set()
        client = self._client
        if client is not None:
            client.close()
        if self._thread is not None:
            self._thread.stop(timeout=5)
        with self._lock:
            actions, self._actions = self._actions, None
        if actions is not None:  # a Start under way sees the stop within 0.2 s; a call ends within its timeout
            actions.shutdown(wait=True, cancel_futures=True)

    def _in_background(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the controller's action executor (the menu must never wait)."""
        with self._lock:
            if self._stop.is_set():
                return
            if self._actions is None:
                self._actions = ThreadPoolExecutor(max_workers=ACTION_THREADS, thread_name_prefix="ohsync-tray-action")
            self._actions.submit(self._logged, fn, *args)

    @staticmethod
    def _logged(fn: Callable[..., Any], *args: Any) -> None:
        try:
            fn(*args)
        except Exception:  # an action's bug must not pass silently (the executor would keep it in its future)
            log.exception("a tray action failed")

    def _follow(self) -> None:
        delay = BACKOFF_START
        while not self._stop.is_set():
            client = self._client = _SubscribeClient(self.socket_path)
            live = False
            try:
                for event in client.subscribe():
                    if self._stop.is_set():
                        break
                    if event.get("type") == "subscribed":
                        live, delay = True, BACKOFF_START
                        self._on_connected()
                    else:
                        self._on_event(event)
            except DaemonNotRunning as exc:
                log.debug("%s", exc)
            except Exception:  # a bad line or a bug must not end the tray's connection loop
                log.exception("subscription to the daemon failed")
            finally:
                client.close()
                self._client = None
            if self._stop.is_set():
                break
            self.reap()
            if live:
                log.info("the ohsync daemon went away")
                self.connected.clear()
                self._notify(self._set_status(None))
                self._on_change()
                if self.owns_daemon:
                    self._on_daemon_gone()
                    break
            if self._wake.wait(delay):
                self._wake.clear()
                delay = BACKOFF_START
            else:
                delay = min(delay * 2, BACKOFF_MAX)

    def _on_connected(self) -> None:
        try:
            status = self._rpc().call(Method.STATUS)
        except (DaemonNotRunning, RpcError, ConnectionError, OSError, ValueError) as exc:
            log.info("could not read status: %s", exc)
            return
        with self._lock:
            self._ever_connected = True
            self._start_pending = None
        notices = self._set_status(status if isinstance(status, dict) else None)
        notices += self._fetch_conflicts()
        self.connected.set()
        self._notify(notices)
        self._on_change()

    def _on_event(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        notices: list[Notice] = []
        if kind == Event.STATUS:
            status = menu_model.status_from_event(event)
            notices += self._set_status(status)
            with self._lock:
                known = len(self._conflicts) if self._conflicts is not None else None
            if known != status.get("conflicts"):
                notices += self._fetch_conflicts()
        else:
            notices += self._announcer.on_event(event)
            if kind == Event.CONFLICT:
                notices += self._fetch_conflicts()
        self._notify(notices)
        self._on_change()

    # --- actions --------------------------------------------------------------

    def perform(self, action: Action) -> None:
        """Run a menu action; socket calls go to the action executor so the UI never waits."""
        if action.kind == "quit":
            self._on_quit()
        elif action.kind == "stop_and_quit":
            self.call(Method.SHUTDOWN)
            self._on_quit()
        elif action.kind == "open":
            desktop.open_paths(action.paths, action.fallback, opener=self._opener)
        elif action.kind == Method.PANEL:
            self._in_background(self.open_panel)
        elif action.kind == "start":
            self._in_background(self.start_daemon)
        elif action.kind in (Method.REFRESH, Method.PAUSE, Method.RESUME):
            self._in_background(self.call, action.kind)
        else:
            log.warning("unknown tray action %r", action.kind)

    def open_panel(self) -> bool:
        """The "Open ohsync…" item: ask the daemon for its local page's address
        (socket method ``panel``) and open it in the browser; a failure becomes
        a notice.  :returns: True when a browser was asked to open it."""
        try:
            found = self._rpc().call(Method.PANEL)
            url = str(found["url"])
        except (DaemonNotRunning, RpcError, ConnectionError, OSError, ValueError, KeyError, TypeError) as exc:
            self._notify([Notice("error", "Cannot open the ohsync page", str(getattr(exc, "message", exc)))])
            return False
        if not self._browser(url):
            self._notify([Notice("error", "Cannot open the ohsync page",
                                 "No browser could be started; run `ohsync panel --url` and open the address.")])
            return False
        return True

    def start_daemon(self) -> bool:
        """The Start item: start the daemon, show "Starting…" until it answers.

        Blocks until the daemon answers, its command fails, or
        :data:`START_TIMEOUT` passes (call it from a thread).  A failure
        becomes a notice.  :returns: True when the daemon answered.
        """
        with self._lock:
            if self._status is not None or (self._start_pending is not None
                                            and time.monotonic() - self._start_pending < START_TIMEOUT):
                return self._status is not None  # running, or a start is already under way
            self._start_pending = time.monotonic()
        self._on_change()
        command = self._start_command or default_start_command()
        log.info("starting the daemon: %s", " ".join(command))
        problem = ""
        proc: subprocess.Popen[bytes] | None = None  # the daemon's process once it started
        capture = start_report.open_capture()  # what the daemon prints when it gives up
        try:
            # its own session: the daemon must outlive this tray; it logs to its own log file
            child = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=capture, start_new_session=True, close_fds=True,
                                     env={**os.environ, **start_report.CAPTURE_ENV})
        except OSError as exc:
            problem = f"{command[0]}: {exc.strerror or exc}"
        else:
            proc = child
            with self._lock:
                self._children.append(child)
        self._wake.set()  # reconnect now rather than after the backoff
        deadline = time.monotonic() + START_TIMEOUT
        while proc is not None and not self._stop.is_set() and time.monotonic() < deadline:
            if self.connected.wait(0.2):
                return True
            code = proc.poll()
            if code is not None and code != 0:
                shown = " ".join(["ohsync", *command[3:]] if command[0] == sys.executable else command)
                problem = f"`{shown}` exited with code {code}" + self._start_cause(command, capture)
                break
            if code == 0 and command[0] == sys.executable:
                problem = "The daemon exited at once" + self._start_cause(command, capture)
                break
            self._wake.set()
        if not self.connected.is_set() and not problem and proc is not None:
            said = self._start_cause(command, capture, hint=False)  # still running, but not answering
            problem = f"No answer on its socket after {START_TIMEOUT:g} s{said}" if said else ""
        capture.close()  # the daemon keeps its own descriptor
        if self.connected.is_set():
            return True
        with self._lock:
            self._start_pending = None
        if not self._stop.is_set():
            log.warning("could not start the daemon: %s", problem or "no answer on its socket")
            self._notify([Notice("error", "Could not start ohsync",
                                 problem or f"No answer on its socket after {START_TIMEOUT:g} s.")])
            self._on_change()
        return False

    @staticmethod
    def _start_cause(command: list[str], capture: Any, *, hint: bool = True) -> str:
        """``": <the daemon's last words>"`` for a failed start (its stderr, or the
        systemd unit's last journal line), else a hint where to look."""
        said = start_report.last_line(capture)
        if command[0] == "systemctl":
            journal = start_report.journal_last_line(SYSTEMD_UNIT)
            said = f"{said} — the service logged: {journal}" if said and journal else (journal or said)
        if said:
            return f": {said}"
        return ". Run `ohsync run` in a terminal to see why." if hint else ""

    def call(self, method: str) -> Any:
        """One socket call; failures become a notice instead of an exception."""
        try:
            return self._rpc().call(method)
        except (DaemonNotRunning, RpcError, ConnectionError, OSError, ValueError) as exc:
            log.warning("%s failed: %s", method, exc)
            self._notify([Notice("error", f"Could not {method}", str(exc))])
            return None


def to_pystray_menu(pystray: Any, entries: tuple[MenuEntry, ...], perform: Callable[[Action], None]) -> Any:
    """Map model entries to a ``pystray.Menu``."""

    def item(entry: MenuEntry) -> Any:
        if entry.is_separator:
            return pystray.Menu.SEPARATOR
        if entry.children is not None:
            return pystray.MenuItem(entry.text, pystray.Menu(*map(item, entry.children)),
                                    enabled=entry.enabled)
        callback = None
        if entry.action is not None:
            action = entry.action

            def callback(icon: Any, menu_item: Any) -> None:
                perform(action)

        return pystray.MenuItem(entry.text, callback, enabled=entry.enabled and callback is not None,
                                default=entry.default)

    return pystray.Menu(*map(item, entries))


class TrayApp:
    """The pystray icon drawn from a :class:`TrayController`."""

    def __init__(self, pystray: Any, socket_path: str | os.PathLike[str] | None, *, owns_daemon: bool,
                 stop_event: threading.Event | None = None, start_command: list[str] | None = None) -> None:
        self.pystray = pystray
        self.quit_requested = False
        self._stop = stop_event or threading.Event()
        self._dirty = threading.Event()
        self._drawn: tuple[Any, ...] | None = None
        self.controller = TrayController(socket_path, owns_daemon=owns_daemon, on_change=self._dirty.set,
                                         notify=self._post, on_daemon_gone=self._stop.set,
                                         on_quit=self.quit, start_command=start_command)
        view = self.controller.view()
        state, badge = menu_model.icon_state(view.status, starting=view.starting)
        self.icon = pystray.Icon("ohsync", icons.icon_for(state, badge, ICON_SIZE), menu_model.tooltip(view),
                                 to_pystray_menu(pystray, menu_model.build_menu(view), self.controller.perform))
        self.notifier = Notifier(default_sender(self.icon), open_page=self.controller.open_panel)
        # not a daemon thread: it waits only on its events, and run() joins it
        self._ui = ServiceThread("ohsync-tray-ui", target=self._ui_loop)

    def _post(self, notices: list[Notice]) -> None:
        self.notifier.post_all(notices)

    def quit(self) -> None:
        """Menu "Quit": leave the loop; :func:`run_tray` stops the daemon if it owns it."""
        self.quit_requested = True
        self._stop.set()
        self._dirty.set()

    def render(self) -> None:
        """Push the controller's view into the icon, if anything visible changed."""
        view = self.controller.view()
        entries = menu_model.build_menu(view)
        state, badge = menu_model.icon_state(view.status, starting=view.starting)
        title = menu_model.tooltip(view)
        drawn = (entries, state, badge, title)
        if drawn == self._drawn:
            return
        previous, self._drawn = self._drawn, drawn
        if previous is None or previous[1:3] != (state, badge):
            self.icon.icon = icons.icon_for(state, badge, ICON_SIZE)
        self.icon.title = title
        if previous is None or previous[0] != entries:
            self.icon.menu = to_pystray_menu(self.pystray, entries, self.controller.perform)

    def _ui_loop(self) -> None:
        while not self._stop.is_set():
            self._dirty.wait(TICK_SECONDS)
            if self._stop.is_set():
                break
            self._dirty.clear()
            try:
                self.render()
            except Exception:
                log.exception("could not update the tray icon")
            self._stop.wait(MIN_REDRAW_SECONDS)  # coalesce bursts of events
        self.icon.stop()

    def _setup(self, icon: Any) -> None:
        icon.visible = True
        self.controller.start()
        self._ui.start_thread()
        self._dirty.set()
        log.info("tray icon ready (pystray backend %s)", type(icon).__module__)

    def run(self) -> None:
        """Block in pystray's loop until Quit, ``stop_event`` or (owns_daemon) the daemon ends."""
        _keep_sigint_handler()
        try:
            self.icon.run(setup=self._setup)
        except Exception:
            if not self._stop.is_set():
                raise
            # pystray's GTK backends close their last notification at exit and
            # raise when no notification service is on the bus; harmless here.
            log.debug("pystray raised while stopping", exc_info=True)
        finally:  # stopped in the reverse order of their start: the UI thread, the controller, the notifier
            self._stop.set()
            self._dirty.set()
            self._ui.stop()
            self.controller.stop()
            self.notifier.close(flush=False)


def _keep_sigint_handler() -> None:
    """pystray's GTK backends reset SIGINT to SIG_DFL; keep a handler the daemon installed."""
    previous = signal.getsignal(signal.SIGINT)
    if not callable(previous) or previous is signal.default_int_handler:
        return
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        from gi.repository import GLib
    except ImportError:
        return

    def restore() -> bool:
        signal.signal(signal.SIGINT, previous)
        return False

    GLib.idle_add(restore)


def _announce_pid(socket_path: str | os.PathLike[str] | None) -> Path | None:
    """Write this tray's pid where ``ohsync stop`` looks (:func:`tray_pid_file`)."""
    path = tray_pid_file(socket_path)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(f"{os.getpid()}\n", encoding="ascii")
        os.replace(tmp, path)
    except OSError as exc:  # `ohsync stop` then cannot find this tray; it still works
        log.warning("could not write %s: %s", path, exc)
        return None
    return path


def _withdraw_pid(path: Path) -> None:
    """Remove the pid file if it is still this process's (a newer tray may have replaced it)."""
    try:
        if path.read_text(encoding="ascii").strip() == str(os.getpid()):
            path.unlink()
    except OSError:  # gone already
        pass


def run_tray(socket_path: str | os.PathLike[str] | None = None, *, owns_daemon: bool,
             stop_daemon: Callable[[], None] | None = None, stop_event: threading.Event | None = None,
             backend: str | None = None, start_command: list[str] | None = None) -> None:
    """Show the tray icon and block in its loop (call from the main thread).

    :param socket_path: the daemon's socket (``None``: the default path).
    :param owns_daemon: the tray was started by the daemon (in-process):
        Quit stops the daemon (``stop_daemon()``, else the ``shutdown``
        method), and the tray returns when the daemon's stream ends.
        ``False`` (``ohsync tray``): Quit only closes the tray.
    :param stop_event: set it from any thread to close the tray.
    :param backend: force a pystray backend (default: chosen per platform).
    :param start_command: what the Start item runs while no daemon answers
        (``owns_daemon=False`` only; default: :func:`default_start_command`).
    :raises TrayUnavailable: no display, PyGObject missing, pystray failed
        (the message says what to install).
    """
    pystray = desktop.load_pystray(backend)
    app = TrayApp(pystray, socket_path, owns_daemon=owns_daemon, stop_event=stop_event,
                  start_command=start_command)
    pid_file = None if owns_daemon else _announce_pid(socket_path)
    try:
        app.run()
    finally:
        if pid_file is not None:
            _withdraw_pid(pid_file)
    if app.quit_requested and owns_daemon:
        if stop_daemon is not None:
            stop_daemon()
        else:
            try:
                RpcClient(socket_path, timeout=5.0).call(Method.SHUTDOWN)
            except (DaemonNotRunning, RpcError, ConnectionError, OSError) as exc:
                log.info("shutdown: %s", exc)
