"""The daemon process: wires the threads of docs/architecture.md §6 and runs until told to stop.

Owns the lifecycle: the single-instance lock (``state_dir/ohsync.lock``,
filelock; a second daemon is told who holds it), the socket server and its
method table, the sync worker and its scheduler, the watcher (started once
the engine is open), the tray on the main thread when there is a display,
and a clean exit on SIGTERM/SIGINT or the ``shutdown`` method: the watcher
stops, the worker finishes its current pass, the socket goes away, the lock
is released.
"""

from __future__ import annotations

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
from typing import Any

from filelock import FileLock, Timeout

from ohsync.daemon import sd_notify
from ohsync.daemon.config import Config
from ohsync.daemon.filing_service import FilingService, FilingUnavailable
from ohsync.daemon.memory_service import MemoryService
from ohsync.daemon.mirror_lock import MirrorLock
from ohsync.daemon.notifications import PushChannel
from ohsync.daemon.protocol import PROTOCOL, Event, Method
from ohsync.daemon.socket_dir import UnsafeSocketDir
from ohsync.daemon.socket_server import CannotNow, InvalidParams, SocketInUse, SocketServer
from ohsync.daemon.status import StatusModel, iso_time
from ohsync.daemon.watcher import Watcher
from ohsync.daemon.worker import Session, SessionFactory, SyncWorker
from ohsync.engine.errors import OhsyncError
from ohsync.engine.filing import FilingResult
from ohsync.engine.filing_rules import RuleError, parse_dest, parse_rules

__all__ = ["AlreadyRunning", "Daemon", "display_available"]

#: Seconds between two checks that the mirror folder still exists.
ROOT_CHECK_SECONDS = 2.0

log = logging.getLogger(__name__)


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


def _number(params: dict[str, Any], name: str, default: float, lo: float, hi: float) -> float:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not lo <= value <= hi:
        raise InvalidParams(f"`{name}` must be a number from {lo:g} to {hi:g}")
    return float(value)


class Daemon:
    """One running daemon for one config.

    :param cfg: the configuration.
    :param tray: show the tray icon when a display is available.
    :param session_factory: opens the engine (default
        :func:`ohsync.daemon.session.open_session` with ``cfg``).
    :param install_signals: handle SIGTERM/SIGINT (main thread only).
    :param ready: set once the socket answers (tests, the demo).
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
    ) -> None:
        self.cfg = cfg
        self._tray = tray
        self._install_signals = install_signals
        self._watcher_quiet = watcher_quiet
        self.ready = ready or threading.Event()
        self._stop = threading.Event()
        self._fatal: BaseException | None = None
        self._watcher: Watcher | None = None
        self._engine: Any = None
        self._root: Path | None = None
        self._login_token: str | None = None
        self._mirror_lock: MirrorLock | None = None
        if session_factory is None:
            from ohsync.daemon.session import open_session

            def session_factory(on_event: Callable[..., None]) -> Session:
                self._login_token = self._saved_token()
                return open_session(cfg, on_event, token=self._login_token)

            login_changed: Callable[[], bool] = self._login_changed
        else:
            login_changed = lambda: False  # noqa: E731 - a test's factory brings its own login

        self.status = StatusModel(library=cfg.mirror.label, local=str(cfg.mirror.local),
                                  poll_interval=cfg.poll_interval, push_poll_interval=cfg.push_safety_poll)
        self.status.watcher_alive = lambda: self._watcher is not None and self._watcher.is_alive()
        self.server = SocketServer(cfg.socket, self._handlers(), own_dir=_is_default_socket_dir(cfg.socket.parent))
        self.worker = SyncWorker(session_factory, self.status, poll_interval=cfg.poll_interval,
                                 publish=self._publish, on_ready=self._on_ready, login_changed=login_changed,
                                 on_fatal=self._on_fatal, before_pass=self._check_watcher,
                                 push_poll_interval=cfg.push_safety_poll)
        self._push: PushChannel | None = None
        self.status.add_listener(lambda st: self.server.publish({"type": Event.STATUS, "status": st}))
        self.filing, self._filing_problem = self._make_filing_service()
        self.memory = MemoryService(cfg.mirror.local, cfg.memory.time_offset, self.worker.submit, self.status.get,
                                    self._memory_refresh, self.worker.post_dirty,
                                    write_timeout=cfg.memory.write_timeout, origin=cfg.memory.origin)
        self.server.add_handlers(self.memory.handlers())

    def _publish(self, event: dict[str, Any]) -> None:
        """Worker events: the memory index re-reads changed paths, then subscribers hear of them."""
        memory = getattr(self, "memory", None)
        if memory is not None:
            memory.note_event(event)
        self.server.publish(event)

    def _memory_refresh(self, timeout: float) -> tuple[bool, str]:
        """Poll the server now and wait for that pass (``memory.refresh``)."""
        self.worker.refresh()
        return self.worker.wait(timeout)

    def _on_dirty(self, paths: list[str], full_scan: bool = False) -> None:
        """Watcher paths: re-read memory entities at once, then sync them."""
        self.memory.note_paths(paths)
        self.worker.post_dirty(paths, full_scan)

    def _make_filing_service(self) -> tuple[FilingService | None, str]:
        """The drop-folder service, or None with the reason it is off."""
        drop = self.cfg.filing.drop_dir
        mirror = self.cfg.mirror.local
        if drop == mirror or mirror in drop.parents or drop in mirror.parents:
            reason = (f"filing is off: the drop folder {drop} overlaps the mirror {mirror}; "
                      "set another [filing] drop_dir")
            log.error("%s", reason)
            return None, reason
        try:
            parse_rules(list(self.cfg.filing.rules))
            parse_dest(self.cfg.filing.default)
        except RuleError as exc:
            reason = f"filing is off: {exc}"
            log.error("%s", reason)
            return None, reason
        self.status.update(drop_dir=str(drop))
        return FilingService(drop, self.worker.submit, self._on_filed), ""

    def _on_filed(self, result: FilingResult) -> None:
        """Announce a filing outcome (socket event, activity, status)."""
        self.server.publish({"type": Event.FILED, **result.as_dict()})
        self.worker.note_activity(result.source, "file", result.status, result.message)
        if self.filing is not None:
            self.status.update(filing=self.filing.status())

    # ----------------------------------------------------------------- socket methods

    def _handlers(self) -> dict[str, Callable[[dict[str, Any]], Any]]:
        return {
            Method.STATUS: lambda p: self.status.status(),
            Method.REFRESH: self._refresh,
            Method.PAUSE: self._pause,
            Method.RESUME: self._resume,
            Method.CONFLICTS: lambda p: self.worker.conflicts(),
            Method.DAMAGED: lambda p: self.worker.damaged(),
            Method.ACTIVITY: lambda p: self.worker.activity(int(_number(p, "limit", 50, 1, 10_000))),
            Method.WAIT: self._wait,
            Method.SHUTDOWN: self._shutdown,
            Method.PING: lambda p: {"pid": os.getpid(), "protocol": PROTOCOL, "config": str(self.cfg.path)},
            Method.FILE: self._file,
            Method.CONFIRM_DELETES: lambda p: {"confirmed": self.worker.confirm_deletes()},
            Method.HELD_DELETES: lambda p: self.worker.held_deletes(),
            Method.SKIPPED: lambda p: self.worker.skipped(),
            Method.RESYNC: self._resync,
        }

    def _saved_token(self) -> str | None:
        from ohsync.daemon.credentials import load_token

        if not self.cfg.server or not self.cfg.username:
            return None
        return load_token(self.cfg.server, self.cfg.username)

    def _login_changed(self) -> bool:
        """True when the keyring holds another token than the one the server
        just rejected (the person signed in again meanwhile)."""
        try:
            saved = self._saved_token()
        except OhsyncError:
            return False
        return bool(saved) and saved != self._login_token

    def _refresh(self, params: dict[str, Any]) -> dict[str, Any]:
        self.worker.refresh()
        if self.filing is not None:
            self.filing.retry_held()
        return {"queued": True}

    def _resync(self, params: dict[str, Any]) -> dict[str, Any]:
        keep = params.get("keep") if isinstance(params, dict) else None
        if keep not in (None, "newer", "afresh"):
            raise InvalidParams("`keep` must be \"newer\" or \"afresh\"")
        regression = self.status.get("regression")
        self.worker.resync(keep)
        return {"queued": True, "regression": regression,
                "keep": keep or ("newer" if regression else "afresh")}

    def _file(self, params: dict[str, Any]) -> list[dict[str, Any]]:
        paths = params.get("paths")
        if not isinstance(paths, list) or not paths or not all(isinstance(p, str) and os.path.isabs(p) for p in paths):
            raise InvalidParams("`paths` must be a non-empty list of absolute paths")
        folders = [p for p in paths if not os.path.isfile(p)]
        if folders:
            raise InvalidParams(f"not a file: {folders[0]} (documents are filed one by one)")
        if self.filing is None:
            raise CannotNow(self._filing_problem or "filing is not available")
        try:
            results = self.filing.file_now(paths)
        except FilingUnavailable as exc:
            raise CannotNow(str(exc)) from None
        return [r.as_dict() for r in results]

    def _pause(self, params: dict[str, Any]) -> dict[str, Any]:
        self.worker.pause()
        return {"paused": True}

    def _resume(self, params: dict[str, Any]) -> dict[str, Any]:
        self.worker.resume()
        return {"paused": False}

    def _wait(self, params: dict[str, Any]) -> dict[str, Any]:
        timeout = _number(params, "timeout", 30, 0, 86_400)
        synced, message, reasons = self.worker.wait_detail(timeout)
        result: dict[str, Any] = {"synced": synced}
        if message:
            result["message"] = message
        if reasons:
            result["reasons"] = reasons
        return result

    def _shutdown(self, params: dict[str, Any]) -> dict[str, Any]:
        self.request_stop()
        return {"stopping": True}

    # ----------------------------------------------------------------- worker hooks

    def _on_ready(self, session: Session) -> None:
        """The engine is open: remember it, watch its folder, attach filing."""
        self._engine = session.engine
        self._root = Path(getattr(session, "local_root", self.cfg.mirror.local))
        prepare = getattr(session.engine, "prepare_root", None)
        if prepare is not None:
            try:
                prepare()   # a new mirror's folder exists before the first pass: watched from the start
            except OhsyncError as exc:
                log.error("%s", exc.message)   # the first pass reports it (a safety stop)
        self._lock_mirror()
        self.memory.attach(session.engine)
        self._check_watcher()
        self._start_push(session)
        if self.filing is not None and hasattr(session, "library_id"):
            from ohsync.engine.mirror_api import for_engine

            self.filing.attach(self.filing.new_filer(for_engine(session.engine), list(self.cfg.filing.rules),
                                                     self.cfg.filing.default,
                                                     self.cfg.mirror_state_dir(session.library_id) / "filing.db"))
            if not self.filing.is_alive():
                try:
                    self.filing.start()
                except OSError as exc:
                    log.error("cannot watch the drop folder %s (%s); `ohsync file` still works",
                              self.cfg.filing.drop_dir, exc.strerror or exc)
            self.status.update(filing=self.filing.status())

    def _start_push(self, session: Session) -> None:
        """Subscribe to the server's notification service (if it runs one) for this session."""
        if self._push is not None:
            self._push.stop()
            self._push = None
        client, library_id = getattr(session, "client", None), getattr(session, "library_id", None)
        if not self.cfg.notifications or not library_id or not hasattr(client, "notification_ping"):
            return
        self._push = PushChannel(client, library_id, on_update=self.worker.push_update,
                                 on_mode=self.worker.set_push)
        self._push.start()

    def _lock_mirror(self) -> None:
        """Hold the mirror folder's lock (one daemon per folder, whatever its config).

        :raises MirrorInUse: another daemon holds it (the worker stops the daemon).
        """
        if self._mirror_lock is not None or self._root is None or not self._root.is_dir():
            return
        lock = MirrorLock(self._root)
        try:
            lock.acquire()
        except UnsafeSocketDir as exc:
            log.warning("%s A second daemon on %s would not be refused.", exc.message, self._root)
            return
        except OSError as exc:   # e.g. a full /tmp: sync without it, but say so
            log.warning("cannot create the folder lock %s (%s); a second daemon on %s would not be "
                        "refused", lock.path, exc.strerror or exc, self._root)
            return
        self._mirror_lock = lock

    def _check_watcher(self) -> None:
        """Start the watcher, or restart one that died (its folder vanished and came back).

        Called before and after every pass.  The mirror folder is never created
        here: a missing folder is the engine's call (new mirror → create it;
        synced before → a safety stop).
        """
        watcher, root = self._watcher, self._root
        if root is None or self._engine is None or (watcher is not None and watcher.is_alive()):
            return
        if not root.is_dir():
            return
        if watcher is not None:
            log.warning("the file watcher had stopped; restarting it and scanning the folder")
            watcher.stop()
        fresh = Watcher(root, lambda p: self._engine.rel_path(p), self._on_dirty,
                        quiet=self._watcher_quiet, on_restructure=self.worker.note_restructure)
        try:
            fresh.start()
        except OSError as exc:
            log.error("cannot watch %s (%s); local edits are noticed only by the periodic scan",
                      root, exc.strerror or exc)
            fresh.stop()
            return
        self._watcher = fresh
        log.info("watching %s", root)
        self.status.notify()  # subscribers learn that the watcher runs now
        if watcher is not None:
            self.worker.post_dirty([], full_scan=True)

    def _on_fatal(self, exc: BaseException) -> None:
        self._fatal = exc
        self.request_stop()

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
            try:
                self._pid_file().unlink()
            except OSError:
                pass
            lock.release()

    def _run_locked(self) -> int:
        for warning in self.cfg.warnings:
            log.warning("%s", warning)
        try:
            self.server.start()
        except SocketInUse as exc:
            raise AlreadyRunning(f"{exc}. Stop it with `ohsync stop`, or set another `socket`.") from None
        except OSError as exc:
            raise OhsyncError(f"Cannot create the socket {self.cfg.socket}: {exc.strerror}.",
                              title="Socket error") from exc
        log.info("ohsync %s listening on %s (pid %d)", "daemon", self.cfg.socket, os.getpid())
        self.memory.start()
        old_handlers = self._signals()
        try:
            self.worker.start()
            self.ready.set()
            sd_notify.ready(f"{self.cfg.mirror.label} ↔ {self.cfg.mirror.local}")
            self._main_loop()
        finally:
            self._teardown()
            self._restore_signals(old_handlers)
        if self._fatal is not None:
            if isinstance(self._fatal, OhsyncError):
                raise self._fatal
            raise OhsyncError(f"The sync worker failed: {self._fatal!r}. See the log.")
        return 0

    def _guard_root(self) -> None:
        """Notice a mirror folder that vanished (unmounted, moved away) within
        seconds, even when no poll is due for minutes (push mode): one full
        scan then stops syncing with the engine's sentence."""
        reported = False
        while not self._stop.wait(ROOT_CHECK_SECONDS):
            root = self._root
            if root is None:
                continue
            missing = not root.is_dir()
            if missing and not reported:
                log.warning("the mirror folder %s is gone; checking it now", root)
                self.worker.post_dirty([], full_scan=True)
            reported = missing

    def _main_loop(self) -> None:
        threading.Thread(target=self._guard_root, name="ohsync-root-guard", daemon=True).start()
        if self._tray and display_available():
            self._run_tray()
        while not self._stop.wait(0.5):
            pass

    def _run_tray(self) -> None:
        """Run the tray on this (main) thread; any failure → headless with one log line."""
        try:
            from ohsync.tray.app import run_tray
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

    def _signals(self) -> dict[int, Any]:
        if not self._install_signals or threading.current_thread() is not threading.main_thread():
            return {}
        old = {}
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
    def _restore_signals(old: dict[int, Any]) -> None:
        for sig, handler in old.items():
            signal.signal(sig, handler)

    def _teardown(self) -> None:
        sd_notify.stopping()
        self.status.update(phase="stopping")
        if self._watcher is not None:
            self._watcher.stop()
        if self.filing is not None:
            self.filing.stop()
        if self._push is not None:
            self._push.stop()
        if not self.worker.shutdown(timeout=120):
            log.warning("the sync worker did not finish within 120 s; exiting anyway")
        self.server.stop()
        if self._mirror_lock is not None:
            self._mirror_lock.release()
        log.info("ohsync stopped")
