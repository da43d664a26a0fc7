"""The memory tools inside the daemon: socket methods ``memory.search`` … ``memory.refresh``.

Owns the mirror's :class:`~ohsync.engine.memory.index.MemoryIndex`, an
SQLite file in the mirror's state folder (``memory-index.sqlite3``), opened
on the first ``memory.*`` request, not when the daemon starts (a daemon
nobody asks for memory reads nothing).  The first open reads every memory
file; later starts re-read only the files whose size or mtime changed while
the daemon was off.  From then on it is kept current from the paths the
daemon reports: sync events, watcher events, its own writes.  The
:class:`~ohsync.engine.memory.tools.MemoryTools` answer over it.  Reads
answer on the socket thread under one lock (the index's one SQLite
connection is used by one thread at a time).  Writes run as jobs on the sync
worker, the thread that owns the engine, through
:func:`ohsync.engine.memory.writes.apply_write` (read-merge-write with
read-back verification), and the socket call returns once the server holds
the new version, or with the reason it does not, within the caller's
``timeout``.
"""
from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from ..engine.errors import OhsyncError
from ..engine.ignore import IGNORE_FILE, IgnoreRules
from ..engine.local_lookups import stat_or_none
from ..engine.memory.edit import MemoryToolError
from ..engine.memory.index import MemoryIndex, parse_offset
from ..engine.memory.tools import MemoryTools
from ..engine.nofollow import OutsideMirrorError, read_file
from ..engine.regression import HeldByRollback
from .protocol import MEMORY_METHODS, Method
from .service_thread import ServiceThread
from .socket.server import CannotNow, InvalidParams
from .worker_job import run_job

__all__ = ["MemoryService", "METHODS"]

log = logging.getLogger(__name__)

#: The socket methods this service answers.
METHODS = MEMORY_METHODS

_BLOCKING = {"paused", "auth_required", "stopped"}


class MemoryService:
    """The memory tools of one daemon.

    :param root: the mirror folder.
    :param time_offset: ``±HH:MM`` written into times (config ``[memory] time_offset``).
    :param submit: runs a function on the sync worker (``SyncWorker.submit``).
    :param status: ``status(name)`` reads a fact of the status model.
    :param refresh: ``refresh(timeout) -> (synced, message)``: poll the server and wait.
    :param post_dirty: tells the worker a path needs syncing (after a failed push).
    :param write_timeout: default seconds a write waits for the server.
    :param origin: the ``origin`` of entities written here.
    :param on_state: told the index's state whenever it changes:
        ``"not built"`` (until the first ``memory.*`` request), ``"building"``,
        ``"ready"`` (status field ``memory_index``).
    :param index_path: ``index_path()`` is the index file, asked when the
        index is opened (None, or no callable: the index is held in memory).
    :param on_carried: called (on the worker) after a write the server verified,
        so the status's ``last sync`` moves (``SyncWorker.note_carried``).
    """

    def __init__(self, root: Path, time_offset: str, submit: Callable[[Callable[[], None]], None],
                 status: Callable[[str], Any], refresh: Callable[[float], tuple[bool, str]],
                 post_dirty: Callable[[list[str]], None], *, write_timeout: float = 30.0,
                 origin: str = "desktop", on_state: Callable[[str], None] | None = None,
                 index_path: Callable[[], Path | None] | None = None,
                 on_carried: Callable[[], None] | None = None) -> None:
        tz = parse_offset(time_offset)
        self._on_carried = on_carried or (lambda: None)
        #: the mirror's ignore rules: the engine's once attached (with the ``ignore`` setting), until then the
        #: defaults and ``.ohsyncignore``; ignored files are not indexed, written, read or listed
        self._rules = IgnoreRules((), root)
        self._rules_seen = self._ignore_file_stamp(root)
        self.index = self._new_index(root, tz)  # empty until :meth:`rebuild` opens the index file
        self._index_path = index_path or (lambda: None)
        self.tools = MemoryTools(self.index, tz, origin=origin)
        self._lock = threading.RLock()
        self._submit = submit
        self._status = status
        self._refresh = refresh
        self._post_dirty = post_dirty
        self._timeout = write_timeout
        self._engine: Any = None
        self._ready = threading.Event()
        self._building = False
        self._requested = False  # a build was started (lazily, by the first memory.* request)
        self._missed: set[str] = set()  # paths that changed while the index was being built
        self._ready_wait = 25.0
        self._builds: list[ServiceThread] = []  # index builds in the background (:meth:`stop` joins them)
        self._stopped = False
        self._on_state = on_state or (lambda state: None)
        self._on_state("not built")

    # ----------------------------------------------------------------- wiring

    def _ignored(self, rel: str) -> bool:
        return self._rules.match(rel)

    def _new_index(self, root: Path, tz: Any, db_path: Path | None = None) -> MemoryIndex:
        index = MemoryIndex(root, tz, db_path=db_path)
        index.ignored = self._ignored
        return index

    @staticmethod
    def _ignore_file_stamp(root: Path) -> tuple[int, int] | None:
        st = stat_or_none(root / IGNORE_FILE, follow=True)
        return None if st is None else (st.st_mtime_ns, st.st_size)

    def _follow_ignore_rules(self) -> None:
        """Re-read the ignore rules when ``.ohsyncignore`` changed, and the index with them (a path no longer
        ignored is read again); call with the lock held, the index ready."""
        stamp = self._ignore_file_stamp(self.index.root)
        if stamp == self._rules_seen:
            return
        self._rules_seen = stamp
        self._rules.reload()
        try:
            self.index.update([""])
        except OSError as exc:
            log.warning("memory index: cannot re-read %s after the ignore rules changed: %s", self.index.root, exc)

    def start(self) -> None:
        """The daemon is up.  The index is built on the first ``memory.*``
        request (:meth:`ensure_index`), not here."""

    def stop(self, timeout: float = 30.0) -> None:
        """No more background builds; wait up to ``timeout`` s for one under way
        (it only reads the mirror's files into the index)."""
        with self._lock:
            self._stopped = True  # no build starts from now on
            builds, self._builds = self._builds, []
        for build in builds:
            build.stop(timeout)

    @property
    def built(self) -> bool:
        """The index has been read from the mirror (by a request or :meth:`rebuild`)."""
        return self._ready.is_set()

    def ensure_index(self) -> None:
        """Start building the index in the background unless that has begun
        (a large library takes seconds); reads wait for it, changes seen
        meanwhile are applied after it."""
        with self._lock:
            if self._requested:
                return
            self._requested = True
            self._build_in_background()

    def rebuild(self) -> int:
        """Open the index file and bring it up to date with the mirror (a
        full read when it is new, of another version or damaged; otherwise
        only the files changed since it was written).

        :returns: the number of entities.
        """
        with self._lock:
            self._requested = True
            self._building = True
            self._missed.clear()
            old = self.index
        self._on_state("building")
        started = time.monotonic()
        try:
            path = self._index_path()
        except OSError:
            path = None
        fresh: MemoryIndex | None = None
        count = changed = 0
        try:
            fresh = self._new_index(old.root, old.tz, db_path=path)
            if fresh.root.is_dir():
                count, changed = fresh.load()
        except (OSError, sqlite3.Error) as exc:
            log.warning("memory index: cannot read %s into %s: %s", old.root, path, exc)
            if fresh is not None:
                fresh.close()
            fresh = self._new_index(old.root, old.tz)  # in memory: searches work, the next start tries the file again
            try:
                count = changed = fresh.rebuild() if fresh.root.is_dir() else 0
            except OSError:
                count = changed = 0
        finally:
            with self._lock:
                self._building = False
                if fresh is not None:
                    fresh.update(sorted(self._missed))
                    self.index = fresh
                    self.tools.index = fresh
                self._missed.clear()
            if fresh is not old:
                old.close()
            self._on_state("ready")
            self._ready.set()
        log.info("memory index: %d entities in %s (%d file(s) read, %.2f s)", count, old.root, changed,
                 time.monotonic() - started)
        return count

    def attach(self, engine: Any) -> None:
        """The engine is open (called on the worker thread from the daemon's ``on_ready``); its ignore
        rules (with the ``ignore`` setting) apply from now on."""
        self._engine = engine
        rules = getattr(engine, "ignore", None)
        if isinstance(rules, IgnoreRules):
            with self._lock:
                self._rules = rules
                if self._ready.is_set() and not self._building:
                    try:
                        self.index.drop_ignored()
                    except sqlite3.DatabaseError as exc:
                        self._damaged(exc)

    def note_paths(self, rel_paths: Iterable[str]) -> None:
        """These library paths changed (sync events, the watcher): re-read them."""
        paths = [p for p in rel_paths if isinstance(p, str)]
        if not paths:
            return
        with self._lock:
            if not self._requested:
                return  # not built yet: the build reads every file anyway
            if self._building:
                self._missed.update(paths)
                return
            try:
                self.index.update(paths)
            except OSError as exc:  # the mirror folder went away: the next start rebuilds
                log.warning("memory index: cannot re-read %s: %s", paths[0], exc)
            except sqlite3.DatabaseError as exc:
                self._damaged(exc)

    def _wait_ready(self) -> None:
        self.ensure_index()
        if not self._ready.wait(self._ready_wait):
            raise CannotNow("the memory index is still being built (a large library takes a few seconds); "
                            "try again in a moment")
        with self._lock:
            try:
                self._follow_ignore_rules()
            except sqlite3.DatabaseError as exc:
                self._damaged(exc)

    def note_event(self, event: dict[str, Any]) -> None:
        """A daemon event (``{"type": "synced"|"conflict", "path": …}``): re-read its path."""
        if event.get("type") in ("synced", "conflict") and isinstance(event.get("path"), str):
            self.note_paths([event["path"]])

    def handlers(self) -> dict[str, Callable[[dict[str, Any]], Any]]:
        """The socket method table of this service."""
        return {
            Method.MEMORY_SEARCH: lambda p: self._read("search", p, ("query", "tags", "type", "since",
                                                                      "include_sensitive", "limit")),
            Method.MEMORY_READ: lambda p: self._read("read", p, ("permalink",)),
            Method.MEMORY_LIST: lambda p: self._read("list", p, ("folder", "tag", "include_sensitive", "limit")),
            Method.MEMORY_WRITE: self.write,
            Method.MEMORY_APPEND: self.append,
            Method.MEMORY_EDIT: self.edit,
            Method.MEMORY_DELETE: self.delete,
            Method.MEMORY_REFRESH: self.refresh,
        }

    # ----------------------------------------------------------------- reads

    def _read(self, method: str, params: dict[str, Any], names: tuple[str, ...]) -> Any:
        kwargs = _pick(params, names)
        self._wait_ready()
        with self._lock:
            try:
                return getattr(self.tools, method)(**kwargs)
            except MemoryToolError as exc:
                raise InvalidParams(str(exc)) from None
            except sqlite3.DatabaseError as exc:
                self._damaged(exc)
        raise CannotNow("the memory index was damaged and is being rebuilt from the files; try again in a moment")

    def _damaged(self, exc: sqlite3.DatabaseError) -> None:
        """The index file broke while in use: rebuild it from the files in the background
        (call with the lock held)."""
        log.warning("memory index %s: %s; rebuilding it from the files", self.index.db_path, exc)
        self._ready.clear()
        self.index.close()
        if self.index.db_path is not None:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{self.index.db_path}{suffix}").unlink(missing_ok=True)
        self.index = self._new_index(self.index.root, self.index.tz)
        self.tools.index = self.index
        self._build_in_background()

    def _build_in_background(self) -> None:
        """Run :meth:`rebuild` on a thread of this service's (call with the lock held)."""
        if self._stopped:
            return
        self._builds = [b for b in self._builds if b.thread_alive()]
        build = ServiceThread("ohsync-memory-index", target=self.rebuild)
        self._builds.append(build)
        build.start_thread()

    # ----------------------------------------------------------------- writes

    def write(self, params: dict[str, Any]) -> dict[str, Any]:
        """``memory.write``: create an entity; see :meth:`MemoryTools.plan_write`."""
        kwargs = _pick(params, ("title", "observations", "relations", "tags", "type", "folder", "sensitivity"))
        self._wait_ready()
        with self._lock:
            try:
                plan = self.tools.plan_write(**kwargs)
            except MemoryToolError as exc:
                raise InvalidParams(str(exc)) from None

        def planner(data: bytes | None) -> Any:
            with self._lock:
                return self.tools.plan_write(**kwargs)
        return self._run(plan.path, planner, params, create=True)

    def append(self, params: dict[str, Any]) -> dict[str, Any]:
        """``memory.append``: one more observation; see :meth:`MemoryTools.plan_append`."""
        kw = _pick(params, ("category", "text", "context"))
        return self._change(params, lambda e, data: self.tools.plan_append(e, data, **kw))

    def edit(self, params: dict[str, Any]) -> dict[str, Any]:
        """``memory.edit``: literal find/replace; see :meth:`MemoryTools.plan_edit`."""
        kw = _pick(params, ("find", "replace"))
        return self._change(params, lambda e, data: self.tools.plan_edit(e, data, **kw))

    def delete(self, params: dict[str, Any]) -> dict[str, Any]:
        """``memory.delete``: soft delete into ``/.trash/`` (``status: trashed`` in place if the move fails)."""
        kw = _pick(params, ("reason",))
        return self._change(params, lambda e, data: self.tools.plan_trash(e, data, **kw), trash=True)

    def refresh(self, params: dict[str, Any]) -> dict[str, Any]:
        """``memory.refresh``: check the server now and wait for that pass."""
        timeout = self._timeout_of(params)
        self.ensure_index()
        synced, message = self._refresh(timeout)
        self._wait_ready()
        with self._lock:
            count = len(self.index)
        result: dict[str, Any] = {"refreshed": synced, "entities": count}
        if message:
            result["message"] = message
        return result

    def _change(self, params: dict[str, Any], plan_fn: Callable[[Any, bytes], Any], *,
                trash: bool = False) -> dict[str, Any]:
        self._wait_ready()
        with self._lock:
            try:
                entity = self.tools.entity(params.get("permalink"))
            except MemoryToolError as exc:
                raise InvalidParams(str(exc)) from None
        rel = entity.path

        def planner(data: bytes | None) -> Any:
            with self._lock:
                self.index.update([rel])
                current = self.index.get(rel) or entity
                return plan_fn(current, data or b"")
        # check the request before queueing it (bad params fail at once)
        try:
            current = read_file(self.index.root, rel)[0]
        except OutsideMirrorError as exc:
            raise InvalidParams(f"refused: {exc}") from None
        except OSError:
            current = b""
        with self._lock:
            try:
                plan_fn(entity, current)
            except MemoryToolError as exc:
                raise InvalidParams(str(exc)) from None
        return self._run(rel, planner, params, trash=trash)

    def _timeout_of(self, params: dict[str, Any]) -> float:
        value = params.get("timeout", self._timeout)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 3600:
            raise InvalidParams("`timeout` must be a number of seconds from 0 to 3600")
        return float(value)

    def _run(self, rel: str, planner: Callable[[bytes | None], Any], params: dict[str, Any], *,
             create: bool = False, trash: bool = False) -> dict[str, Any]:
        """Run one write on the worker and wait for the server's answer."""
        from ..engine.memory.writes import apply_write, trash_entity

        timeout = self._timeout_of(params)
        if self._status("paused"):
            raise CannotNow("syncing is paused, so nothing was written; run `ohsync resume` first")
        problem = self._status("problem")
        retry_at = self._status("retry_at")
        if problem in _BLOCKING or problem == "offline" or (
                problem == "error" and retry_at is not None and retry_at > time.time()):
            message = self._status("problem_message") or problem
            raise CannotNow(f"nothing was written: {message}")
        wrote = threading.Event()  # the new bytes reached the mirror

        def run() -> dict[str, Any]:
            try:
                engine = self._engine
                if engine is None:
                    raise CannotNow("ohsync is still connecting to the server; nothing was written")
                if trash:
                    written = trash_entity(engine, rel, planner, on_written=wrote.set)
                else:
                    written = apply_write(engine, rel, planner, create=create, on_written=wrote.set)
                self._on_carried()  # verified on the server: the last sync is now
                return written
            except BaseException:
                if wrote.is_set():
                    self._post_dirty([rel])  # in the mirror, not on the server: the next pass pushes it
                raise
            finally:
                self.note_paths([rel])

        def timed_out(started: bool) -> CannotNow:
            if not started or not wrote.is_set():
                return CannotNow(f"nothing was written yet: ohsync was busy syncing for {timeout:g} s; "
                                 "try again" + (" (the write still runs)" if started else ""))
            return CannotNow(f"saved in the mirror ({rel}), but the server did not confirm it within {timeout:g} s; "
                             "it is pushed in the background (see `ohsync status`)")

        try:
            result: dict[str, Any] = run_job(self._submit, run, timeout, f"the write of {rel}", timed_out=timed_out)
        except MemoryToolError as exc:
            raise InvalidParams(str(exc)) from None
        except CannotNow:
            raise
        except HeldByRollback as exc:
            raise CannotNow(str(exc)) from None
        except OhsyncError as exc:
            if wrote.is_set():
                raise CannotNow(f"saved in the mirror, but not on the server yet: {exc}; it is pushed on "
                                "the next sync pass") from None
            raise CannotNow(f"nothing was written: {exc}") from None
        except Exception as exc:  # any other failure is told, with the log
            log.error("memory write of %s failed", rel, exc_info=exc)
            raise CannotNow(f"the write of {rel} failed: internal error {exc!r}; see the log") from None
        return result


#: Parameters a memory method cannot do without (-32602 names them, never a TypeError).
_REQUIRED = {"permalink", "title", "observations", "category", "text", "find", "replace"}


def _pick(params: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """The known parameters present in ``params`` (unknown ones are refused,
    missing required ones named).

    :raises InvalidParams: an unknown parameter, or a required one missing.
    """
    unknown = sorted(set(params) - set(names) - {"timeout", "permalink"})
    if unknown:
        raise InvalidParams(f"unknown parameter(s): {', '.join(unknown)}; expected {', '.join(names)}")
    missing = [k for k in names if k in _REQUIRED and k not in params]
    if missing:
        raise InvalidParams(f"missing parameter(s): {', '.join(missing)}")
    return {k: params[k] for k in names if k in params}
