"""One ``[[mirror]]`` at run time: its worker, watcher, push channel, filing, memory tools and status.

A :class:`Mirror` owns everything that belongs to one library ↔ folder pair:

* its :class:`~ohsync.daemon.worker.SyncWorker` (the thread that owns its
  engine and its state database, ``Config.mirror_state_dir``) and the
  control state in it;
* its :class:`~ohsync.daemon.status.StatusModel` (the read model of its
  facts, one item of the status object's ``mirrors``);
* the :class:`~ohsync.daemon.watcher.Watcher` of its folder (started once
  the engine is open, restarted when its folder comes back), the folder's
  :class:`~ohsync.daemon.mirror_lock.MirrorLock`, its
  :class:`~ohsync.daemon.notifications.PushChannel`;
* its :class:`~ohsync.daemon.memory_service.MemoryService` and, for the
  mirror named by ``[filing] mirror``, the drop folder's
  :class:`~ohsync.daemon.filing_service.FilingService`.

The daemon (``daemon/app.py``) holds a list of them and only routes: one
mirror that cannot run (folder gone, library deleted, login refused) is
stopped with its sentence while the others go on syncing.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..engine.errors import OhsyncError
from ..engine.filing.filer import FilingResult
from ..engine.filing.rules import RuleError, parse_dest, parse_rules
from . import last_sync
from .config import Config, MirrorConfig
from .conflict_service import ConflictService
from .filing_service import FilingService
from .memory_service import MemoryService
from .mirror_lock import MirrorLock
from .notifications import PushChannel
from .protocol import Event
from .socket.dir import UnsafeSocketDir
from .status import StatusModel
from .watcher import Watcher
from .worker import Session, SessionFactory, SyncWorker

__all__ = ["Mirror"]

log = logging.getLogger(__name__)


class Mirror:
    """One mirror's threads and facts (see the module docstring).

    :param cfg: the whole configuration (server, login, safety, filing…).
    :param index: which ``[[mirror]]`` (0 = the first).
    :param publish: sends an event to socket subscribers (any thread); the
        mirror adds ``"mirror": name``.
    :param on_status: called whenever this mirror's status object changes.
    :param on_fatal: called with the error when this mirror cannot run.
    :param session_factory: opens the engine (default
        :func:`ohsync.daemon.session.open_session` for this mirror).
    :param exit_on_fatal: the daemon exits when this mirror cannot run
        (True for a daemon of one mirror, as before several were possible).
    :param watcher_quiet: the watcher's debounce, seconds.
    """

    def __init__(self, cfg: Config, index: int, *, publish: Callable[[dict[str, Any]], None],
                 on_status: Callable[[], None], on_fatal: Callable[[BaseException], None],
                 session_factory: SessionFactory | None = None, exit_on_fatal: bool = True,
                 watcher_quiet: float = 0.7) -> None:
        self.cfg = cfg
        self.index = index
        self.config: MirrorConfig = cfg.mirrors[index]
        self.name = self.config.label
        self.local = self.config.local
        self._publish_out = publish
        self._watcher_quiet = watcher_quiet
        self._watcher: Watcher | None = None
        self._engine: Any = None
        self._root: Path | None = None
        self._login_token: str | None = None
        self._mirror_lock: MirrorLock | None = None
        self._push: PushChannel | None = None
        # the worker thread starts helpers while stop_helpers may run: none starts after the stop
        self._helpers_lock = threading.RLock()
        self._stopping = False
        self._root_missing = False
        self.library_id: str | None = self.config.library_id
        if session_factory is None:
            from .session import open_session

            def session_factory(on_event: Callable[..., None]) -> Session:
                self._login_token = self._saved_token()
                return open_session(cfg, on_event, mirror=self.config, token=self._login_token)

            login_changed: Callable[[], bool] = self._login_changed
        else:
            login_changed = lambda: False  # noqa: E731 - a test's factory brings its own login

        self.status = StatusModel(library=self.config.library or self.config.label, local=str(self.local),
                                  name=self.name, poll_interval=cfg.poll_interval,
                                  push_poll_interval=cfg.push_safety_poll,
                                  last_sync=last_sync.recorded(cfg.mirror_state_dirs(self.config)))
        self.status.watcher_alive = lambda: self._watcher is not None and self._watcher.is_alive()
        self.worker = SyncWorker(session_factory, self.status, poll_interval=cfg.poll_interval,
                                 publish=self._publish, on_ready=self._on_ready, login_changed=login_changed,
                                 on_fatal=on_fatal, before_pass=self._check_watcher,
                                 push_poll_interval=cfg.push_safety_poll, exit_on_fatal=exit_on_fatal,
                                 login_command=self._login_command())
        self.status.add_listener(lambda st: on_status())
        self.filing: FilingService | None = None
        self.filing_problem = f"the drop folder files into the mirror {cfg.mirrors[cfg.filing.mirror].label}"
        if index == cfg.filing.mirror:
            self.filing, self.filing_problem = self._make_filing_service()
        if self.filing is not None:
            self.status.filing_now = self.filing.status  # a removed document leaves the status at once
        self.memory = MemoryService(self.local, cfg.memory.time_offset, self.worker.submit,
                                    self.worker.control_fact, self._memory_refresh, self.worker.post_dirty,
                                    write_timeout=cfg.memory.write_timeout, origin=cfg.memory.origin,
                                    on_state=lambda state: self.status.update(memory_index=state),
                                    index_path=self._memory_index_path, on_carried=self.worker.note_carried)
        self.conflicts = ConflictService(self.worker.submit, lambda: self._engine, self.worker.conflicts,
                                         self.worker.facts.refresh)

    @property
    def engine(self) -> Any:
        """The open engine (None until the worker opened the mirror)."""
        return self._engine

    def __repr__(self) -> str:
        return f"Mirror({self.name!r}, {str(self.local)!r})"

    # ----------------------------------------------------------------- naming

    def answers_to(self, selector: str) -> bool:
        """True when ``selector`` names this mirror: its ``name``, its library's
        name or id, or its folder (``~`` expanded, symlinks followed)."""
        if selector in (self.name, self.config.library, self.status.get("library")):
            return True
        if self.library_id and selector.lower() == self.library_id:
            return True
        try:
            return Path(selector).expanduser().resolve() == self.local.resolve()
        except (OSError, RuntimeError):
            return False

    # ----------------------------------------------------------------- events

    def _publish(self, event: dict[str, Any]) -> None:
        """Worker events: the memory index re-reads changed paths, then subscribers hear of them."""
        memory = getattr(self, "memory", None)
        if memory is not None:
            memory.note_event(event)
        self._publish_out({**event, "mirror": self.name})

    def _memory_index_path(self) -> Path | None:
        """The memory index file in this mirror's state folder (None while no folder is known yet:
        the index is then held in memory until the next start)."""
        if self.library_id:
            return self.cfg.mirror_state_dir(self.library_id, self.config) / "memory-index.sqlite3"
        known = self.cfg.mirror_state_dirs(self.config)
        return known[-1] / "memory-index.sqlite3" if known else None

    def _memory_refresh(self, timeout: float) -> tuple[bool, str]:
        """Poll the server now and wait for that pass (``memory.refresh``)."""
        self.worker.refresh()
        return self.worker.wait(timeout)

    def _on_dirty(self, paths: list[str], full_scan: bool = False) -> None:
        """Watcher paths: re-read memory entities at once, then sync them."""
        self.memory.note_paths(paths)
        self.worker.post_dirty(paths, full_scan)

    # ----------------------------------------------------------------- filing

    def _make_filing_service(self) -> tuple[FilingService | None, str]:
        """The drop-folder service, or None with the reason it is off."""
        drop = self.cfg.filing.drop_dir
        for mirror in self.cfg.mirrors:
            folder = mirror.local
            if drop == folder or folder in drop.parents or drop in folder.parents:
                reason = (f"filing is off: the drop folder {drop} overlaps the mirror {folder}; "
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
        self._publish_out({"type": Event.FILED, **result.as_dict(), "mirror": self.name})
        self.worker.note_activity(result.source, "file", result.status, result.message)
        if result.status == "filed":  # uploaded and verified: the last sync is now
            self.worker.note_carried()
        if self.filing is not None:
            self.status.update(filing=self.filing.status())

    # ----------------------------------------------------------------- login

    def _login_command(self) -> str:
        """``ohsync login``, or ``ohsync login --mirror NAME`` for a mirror with an account of its own."""
        if self.config.server or self.config.username:
            name = self.name if not any(c.isspace() for c in self.name) else f'"{self.name}"'
            return f"ohsync login --mirror {name}"
        return "ohsync login"

    def _saved_token(self) -> str | None:
        from .credentials import load_token

        server, username = self.cfg.account(self.config)
        if not server or not username:
            return None
        return load_token(server, username)

    def _login_changed(self) -> bool:
        """True when the keyring holds another token than the one the server
        just rejected (the person signed in again meanwhile)."""
        try:
            saved = self._saved_token()
        except OhsyncError:
            return False
        return bool(saved) and saved != self._login_token

    # ----------------------------------------------------------------- worker hooks (worker thread)

    def _on_ready(self, session: Session) -> None:
        """The engine is open: remember it, watch its folder, attach filing."""
        self._engine = session.engine
        self._root = Path(getattr(session, "local_root", self.local))
        self.library_id = getattr(session, "library_id", None) or self.library_id
        prepare = getattr(session.engine, "prepare_root", None)
        if prepare is not None:
            try:
                prepare()   # a new mirror's folder exists before the first pass: watched from the start
            except OhsyncError as exc:
                log.error("%s", exc.message)   # the first pass reports it (a safety stop)
        self._lock_mirror()
        self.memory.attach(session.engine)
        ctx = getattr(session.engine, "ctx", None)
        if ctx is not None:
            ctx.on_bulk_writes = self._bulk_writes
        self._check_watcher()
        self._start_push(session)
        if self.filing is not None and hasattr(session, "library_id"):
            from ..engine.memory.index import parse_offset
            from ..engine.mirror_api import for_engine
            from ..engine.place import text_language

            self.filing.attach(self.filing.new_filer(
                for_engine(session.engine), list(self.cfg.filing.rules), self.cfg.filing.default,
                self.cfg.mirror_state_dir(session.library_id, self.config) / "filing.db",
                tz=parse_offset(self.cfg.memory.time_offset), language=text_language(self.cfg.memory.language)))
            with self._helpers_lock:
                if not self._stopping and not self.filing.is_alive():
                    try:
                        self.filing.start()
                    except OSError as exc:
                        log.error("cannot watch the drop folder %s (%s); `ohsync file` still works",
                                  self.cfg.filing.drop_dir, exc.strerror or exc)
            self.status.update(filing=self.filing.status())

    def _start_push(self, session: Session) -> None:
        """Subscribe to the server's notification service (if it runs one) for this session."""
        with self._helpers_lock:
            if not self._stopping:
                self._start_push_locked(session)

    def _start_push_locked(self, session: Session) -> None:
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

        :raises MirrorInUse: another daemon holds it (the worker stops this mirror).
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
        with self._helpers_lock:
            if not self._stopping:
                self._check_watcher_locked()

    def _check_watcher_locked(self) -> None:
        watcher, root = self._watcher, self._root
        if root is None or self._engine is None or (watcher is not None and watcher.is_alive()):
            return
        if not root.is_dir():
            return
        if watcher is not None:
            log.warning("the file watcher had stopped; restarting it and scanning the folder")
            watcher.stop()
        fresh = Watcher(root, lambda p: self._engine.rel_path(p), self._on_dirty,
                        quiet=self._watcher_quiet, on_restructure=self.worker.note_restructure,
                        own_folder=self._own_folder, forget_own_folders=self._forget_own_folders,
                        on_saved=self.worker.post_saved)
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

    def _bulk_writes(self, started: bool) -> None:
        """The engine starts (True) or ends writing many new files of its own
        (a cold mirror's archive): stop watching meanwhile, then watch afresh
        and scan (sync worker thread)."""
        watcher = self._watcher
        if watcher is None:
            return
        if started:
            log.info("writing many files from the server at once: not watching %s until they are in place",
                     self._root)
            watcher.pause_events()
        else:
            watcher.resume_events()
            log.info("watching %s again; scanning it for what changed meanwhile", self._root)

    def _own_folder(self, local_path: str) -> bool:
        """A folder the open engine created itself (its watcher event is an echo)."""
        check = getattr(self._engine, "own_folder", None)
        return bool(check(local_path)) if check is not None else False

    def _forget_own_folders(self) -> None:
        forget = getattr(self._engine, "forget_own_folders", None)
        if forget is not None:
            forget()

    # ----------------------------------------------------------------- lifecycle

    def check_root(self) -> None:
        """Notice a mirror folder that vanished (unmounted, moved away) within
        seconds, even when no poll is due for minutes (push mode): one full
        scan then stops this mirror with the engine's sentence.  Called every
        few seconds by the daemon's guard thread."""
        root = self._root
        if root is None:
            return
        missing = not root.is_dir()
        if missing and not self._root_missing:
            log.warning("the mirror folder %s is gone; checking it now", root)
            self.worker.post_dirty([], full_scan=True)
        self._root_missing = missing

    def start(self) -> None:
        """Start the worker (it opens the engine, then the watcher starts)."""
        self.memory.start()
        self.worker.start()

    def stop_helpers(self) -> None:
        """Stop the threads that feed the worker (watcher, drop folder, push channel);
        none of them starts again afterwards."""
        self.status.update(phase="stopping")
        with self._helpers_lock:
            self._stopping = True
        if self._watcher is not None:
            self._watcher.stop()
        if self.filing is not None:
            self.filing.stop()
        if self._push is not None:
            self._push.stop()

    def release(self) -> None:
        """After the worker stopped: join the memory index's build, let go of the folder lock."""
        self.memory.stop()
        if self._mirror_lock is not None:
            self._mirror_lock.release()
