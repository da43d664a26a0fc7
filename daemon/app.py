"""The daemon process: wires the threads of docs/architecture.md §6 and runs until told to stop.

Owns the lifecycle: the single-instance lock (``state_dir/ohsync.lock``,
filelock; a second daemon is told who holds it), the socket server and its
method table (``daemon/daemon_methods.py``), one
:class:`~ohsync.daemon.mirror.Mirror` per ``[[mirror]]`` (each with its
worker, watcher, status and state database), the tray on the main thread
when there is a display, and a clean exit on SIGTERM/SIGINT or the
``shutdown`` method: the watchers stop, every worker finishes its current
pass, the socket goes away, the locks are released.

With one mirror, a mirror that cannot run (no login, no library, its folder
synced by another daemon) ends the daemon with its sentence, as always.
With several, that mirror stops with the sentence in its status and the
others go on; the daemon exits only once none can run.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import signal
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

from filelock import FileLock, Timeout

from ..engine.errors import OhsyncError
from . import sd_notify
from .config import Config
from .daemon_methods import Methods
from .mirror import Mirror
from .panel.auth import secret_path
from .panel.server import PanelServer
from .protocol import QUICK_METHODS, Event, combine_status
from .service_thread import Ticker
from .socket.methods import MethodTable
from .socket.server import SocketInUse, SocketServer
from .status import iso_time
from .worker import SessionFactory

__all__ = ["AlreadyRunning", "Daemon", "display_available"]

#: Seconds between two checks that the mirror folder still exists.
ROOT_CHECK_SECONDS = 2.0

log = logging.getLogger(__name__)

#: Seconds between GIL hand-offs while several threads want it (see ``_run_locked``).
SWITCH_INTERVAL = 0.001

#: What :func:`signal.signal` takes and returns: a handler, ``SIG_DFL``/``SIG_IGN``, or ``None``
#: (a handler not installed from Python).
SignalHandler = Callable[[int, FrameType | None], Any] | int | None


class AlreadyRunning(OhsyncError):
    """Another daemon holds the state dir's lock."""

    title = "ohsync is already running"


def display_available() -> bool:
    """True where a tray icon could be shown (macOS, or an X11/Wayland display)."""
    return sys.platform == "darwin" or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def _is_default_socket_dir(directory: Path) -> bool:
    """True for the folders only ohsync uses (docs/architecture.md §3), which may be tightened to 0700."""
    candidates = {Path(tempfile.gettempdir()) / f"ohsync-{os.getuid()}"}
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime:
        candidates.add(Path(runtime) / "ohsync")
    return directory in candidates




class Daemon:
    """One running daemon for one config: its mirrors, the socket, the tray.

    :param cfg: the configuration.
    :param tray: show the tray icon when a display is available.
    :param session_factory: opens the engine (default
        :func:`ohsync.daemon.session.open_session` for each mirror).
    :param install_signals: handle SIGTERM/SIGINT (main thread only).
    :param ready: set once the socket answers (tests, the demo).
    :param stop_after: stop by itself this many seconds after the mirrors
        started (``ohsync demo --seconds``); None: run until told.

    It starts, in this order, the socket server, the local page, each
    mirror and the guard of the mirror folders (a :class:`Ticker`), and
    stops them in the reverse order (``_teardown``): every thread it or its
    parts started is joined before :meth:`run` returns.
    """

    def __init__(
        self,
        cfg: Config,
        *,
        tray: bool = False,
        session_factory: SessionFactory | None = None,
        install_signals: bool = True,
        watcher_quiet: float = 0.7,
        ready: threading.Event | None = None,
        stop_after: float | None = None,
    ) -> None:
        self.cfg = cfg
        self._stop_after = stop_after
        self._stop_at: float | None = None
        self._tray = tray
        self._install_signals = install_signals
        self.ready = ready or threading.Event()
        self._stop = threading.Event()
        self._fatal: BaseException | None = None
        self._fatal_lock = threading.Lock()
        self._failed: set[int] = set()  # mirrors that cannot run (several mirrors)
        self._status_lock = threading.Lock()
        self._last_status: dict[str, Any] | None = None
        self.server = SocketServer(cfg.socket, {}, own_dir=_is_default_socket_dir(cfg.socket.parent))
        # not a daemon thread: a mirror's check is one stat, and the guard is joined before the mirrors stop
        self._guard = Ticker("ohsync-root-guard", ROOT_CHECK_SECONDS, self._guard_roots)
        self.panel: PanelServer | None = None
        self.panel_problem = ""
        alone = len(cfg.mirrors) == 1
        self.mirrors: list[Mirror] = []
        for index in range(len(cfg.mirrors)):
            self.mirrors.append(Mirror(
                cfg, index, publish=self._publish_event, on_status=self._publish_status,
                on_fatal=functools.partial(self._on_fatal, index), session_factory=session_factory,
                exit_on_fatal=alone, watcher_quiet=watcher_quiet))
        self.methods = Methods(self)
        self.server.add_handlers(self.methods.table(), quick=QUICK_METHODS)
        # every answer names the config: the CLI's "another config" note needs no ping of its own
        self.server.stamp_answers(config=str(cfg.path))
        if cfg.panel_port >= 0:
            self.panel = self._make_panel()

    @property
    def filing(self) -> Any:
        """The drop folder's service (of the mirror ``[filing] mirror`` names), or None."""
        return self.mirrors[self.cfg.filing.mirror].filing

    def status_object(self) -> dict[str, Any]:
        """The status object the ``status`` method answers."""
        return combine_status([m.status.status() for m in self.mirrors])

    def _publish_status(self) -> None:
        """A mirror's status changed: push the whole object to subscribers once it differs."""
        if not hasattr(self, "mirrors") or len(self.mirrors) < len(self.cfg.mirrors):
            return  # still building the mirrors
        status = self.status_object()
        with self._status_lock:
            key = {k: v for k, v in status.items()
                   if k not in ("last_poll", "last_scan", "next_scan", "polls", "requests", "clock_offset")}
            if key == self._last_status:
                return
            self._last_status = key
        self._publish_event({"type": Event.STATUS, "status": status})

    def _publish_event(self, event: dict[str, Any]) -> None:
        """One daemon event for the socket's subscribers and the local page's streams."""
        self.server.publish(event)
        panel = getattr(self, "panel", None)
        if panel is not None:
            panel.publish(event)

    def _make_panel(self) -> PanelServer:
        """The local page, answering from the same method table as the socket."""
        table = MethodTable(self.methods.table())

        def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
            return table.answer({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}) or {}

        def health() -> dict[str, Any]:
            from .doctor import exit_code, run_checks

            findings = run_checks(self.cfg)
            return {"ok": exit_code(findings) == 0, "checks": [f.as_dict() for f in findings]}

        return PanelServer(secret_path(self.cfg.socket), self.cfg.panel_port, call,
                           lambda path, mirror: self._conflict_mirror(path, mirror).conflicts.versions(path),
                           lambda path, side, mirror: self._conflict_mirror(path, mirror).conflicts.read(path, side),
                           health)

    def _conflict_mirror(self, path: str, mirror: str | None) -> Mirror:
        """The mirror holding the conflict ``path`` names (``mirror`` picks one by name; see
        :meth:`Methods.conflict_mirror`, which refuses an ambiguous or unknown path)."""
        return self.methods.conflict_mirror(path, {"mirror": mirror} if mirror else {})

    def _on_fatal(self, index: int, exc: BaseException) -> None:
        """A mirror cannot run: alone, the daemon exits with its error; among
        several, it stays stopped with its sentence until none can run."""
        with self._fatal_lock:
            self._failed.add(index)
            if self._fatal is None or index == 0:
                self._fatal = exc
            # a mirror that failed once but synced since (a refresh after the fix) counts as running
            every = all(i in self._failed and m.worker.control.problem is not None
                        for i, m in enumerate(self.mirrors))
        if len(self.mirrors) == 1 or every:
            self.request_stop()
        else:
            log.error("the mirror %s stopped (%s); the other mirrors go on syncing",
                      self.mirrors[index].name, getattr(exc, "message", exc))

    def request_stop(self) -> None:
        """Ask the daemon to exit (any thread)."""
        self._stop.set()

    # ----------------------------------------------------------------- lifecycle

    def _pid_file(self) -> Path:
        return self.cfg.state_dir / "ohsync.pid"

    def _holder(self) -> str:
        try:
            info = json.loads(self._pid_file().read_text(encoding="utf-8"))
            return (f"pid {info.get('pid')} on {info.get('host')}, started {info.get('started')}, "
                    f"socket {info.get('socket')}")
        except (OSError, ValueError):
            return "another process"

    def run(self) -> int:
        """Run until stopped.

        :returns: 0 after a clean stop.
        :raises AlreadyRunning: another daemon uses this state dir.
        :raises OhsyncError: the daemon could not run (no login, no library…).
        """
        self.cfg.state_dir.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.cfg.lock_path), timeout=0)
        try:
            lock.acquire()
        except Timeout:
            raise AlreadyRunning(
                f"Another ohsync daemon uses {self.cfg.state_dir} ({self._holder()}). "
                "Stop it with `ohsync stop` first, or use another state_dir.") from None
        try:
            self._pid_file().write_text(json.dumps({
                "pid": os.getpid(), "host": socket.gethostname(), "started": iso_time(time.time()),
                "socket": str(self.cfg.socket), "config": str(self.cfg.path)}), encoding="utf-8")
            return self._run_locked()
        finally:
            with contextlib.suppress(OSError):
                self._pid_file().unlink()
            lock.release()

    def _run_locked(self) -> int:
        for warning in self.cfg.warnings:
            log.warning("%s", warning)
        # a thread waiting for the GIL asks for it after this long (CPython: 5 ms):
        # shorter, so the socket thread answers quickly while a sync thread runs
        sys.setswitchinterval(SWITCH_INTERVAL)
        try:
            self.server.start()
        except SocketInUse as exc:
            raise AlreadyRunning(f"{exc}. Stop it with `ohsync stop`, or set another `socket`.") from None
        except OSError as exc:
            raise OhsyncError(f"Cannot create the socket {self.cfg.socket}: {exc.strerror}.",
                              title="Socket error") from exc
        log.info("ohsync %s listening on %s (pid %d)", "daemon", self.cfg.socket, os.getpid())
        self._start_panel()
        old_handlers = self._signals()
        try:
            for mirror in self.mirrors:
                mirror.start()
            self.ready.set()
            sd_notify.ready(", ".join(f"{m.name} ↔ {m.local}" for m in self.mirrors))
            self._main_loop()
        finally:
            self._teardown()
            self._restore_signals(old_handlers)
        if self._fatal is not None and (len(self.mirrors) == 1 or self._failed == set(range(len(self.mirrors)))):
            if isinstance(self._fatal, OhsyncError):
                raise self._fatal
            raise OhsyncError(f"The sync worker failed: {self._fatal!r}. See the log.")
        return 0

    def _start_panel(self) -> None:
        """Serve the local page; a port in use costs the page, never the daemon."""
        if self.panel is None:
            self.panel_problem = "the local page is off (panel_port = -1 in the config)"
            return
        try:
            self.panel.start()
        except OSError as exc:
            self.panel_problem = (f"the local page cannot listen on 127.0.0.1:{self.cfg.panel_port} "
                                  f"({exc.strerror or exc}); set another panel_port, or 0 for any free port")
            log.warning("%s", self.panel_problem)
            self.panel = None

    def _guard_roots(self) -> None:
        """Every few seconds (the guard's tick), each mirror checks that its folder
        is still there; and a daemon told to stop after a while stops."""
        for mirror in self.mirrors:
            mirror.check_root()
        if self._stop_at is not None and time.monotonic() >= self._stop_at:
            log.info("stopping after %g s, as asked", self._stop_after)
            self.request_stop()

    def _main_loop(self) -> None:
        if self._stop_after is not None:
            self._stop_at = time.monotonic() + self._stop_after
        self._guard.start_thread()
        if self._tray and display_available():
            self._run_tray()
        while not self._stop.wait(0.5):
            pass

    def _run_tray(self) -> None:
        """Run the tray on this (main) thread; any failure → headless with one log line."""
        try:
            from ..tray.app import run_tray
        except ImportError as exc:
            log.info("no tray icon (%s); running headless", exc)
            return
        except Exception as exc:  # noqa: BLE001 - pystray raises non-ImportErrors without a display
            log.warning("cannot show the tray icon (%s: %s); running headless", type(exc).__name__, exc)
            return
        try:
            run_tray(self.cfg.socket, owns_daemon=True, stop_daemon=self.request_stop, stop_event=self._stop)
        except Exception as exc:  # noqa: BLE001
            log.warning("the tray icon failed (%s: %s); running headless", type(exc).__name__, exc)
            return
        self.request_stop()  # the tray's Quit ends the daemon it owns

    def _signals(self) -> dict[signal.Signals, SignalHandler]:
        if not self._install_signals or threading.current_thread() is not threading.main_thread():
            return {}
        old: dict[signal.Signals, SignalHandler] = {}
        for sig in (signal.SIGTERM, signal.SIGINT):
            old[sig] = signal.signal(sig, lambda signum, frame: self._on_signal(signum))
        return old

    def _on_signal(self, signum: int) -> None:
        if self._stop.is_set():
            log.warning("second %s: exiting now", signal.Signals(signum).name)
            os._exit(130)
        log.info("%s: finishing the current file, then exiting", signal.Signals(signum).name)
        self.request_stop()

    @staticmethod
    def _restore_signals(old: dict[signal.Signals, SignalHandler]) -> None:
        for sig, handler in old.items():
            signal.signal(sig, handler)

    def _teardown(self) -> None:
        """Stop what :meth:`_run_locked` started, in the reverse order, joining every thread."""
        sd_notify.stopping()
        self._guard.stop()
        for mirror in self.mirrors:
            mirror.stop_helpers()
        for mirror in self.mirrors:  # every worker stops after its current file, together
            mirror.worker.request_shutdown()
        deadline = time.monotonic() + 120
        for mirror in self.mirrors:
            if not mirror.worker.shutdown(timeout=max(1.0, deadline - time.monotonic())):
                log.warning("the sync worker of %s did not finish within 120 s; exiting anyway", mirror.name)
        if self.panel is not None:
            self.panel.stop()
        self.server.stop()
        for mirror in self.mirrors:
            mirror.release()
        log.info("ohsync stopped")
