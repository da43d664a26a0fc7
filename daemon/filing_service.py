"""The drop folder in the daemon: watch, wait until stable, file on the worker.

:class:`FilingService` watches ``[filing] drop_dir`` (created on start) with
watchdog, keeps every candidate file until its size and mtime have not
changed for ``quiet_seconds`` and it is not a partial download or open for
writing, then hands it to :meth:`Filer.file <ohsync.engine.filing.filer.Filer.file>`
**on the sync worker's thread** through the ``submit`` callable (the engine
and its state belong to that thread).  Results go to ``on_result``.

What happens after a result:

* ``filed``: the file left the drop folder; done.
* ``not_ready`` / ``failed`` with ``retryable``: watched again and retried
  after a backoff (30 s doubling up to 10 min, at least the server's
  ``Retry-After``).
* ``over_quota``, and ``failed`` with ``needs`` (the failure's one
  classification, ``engine.errors.classify``, says only the person can fix
  it: a login, free space, a permission): held; retried every 10 minutes
  and on :meth:`retry_held` (call it on ``refresh``).
* ``duplicate`` / ``failed`` without ``retryable``: left alone until the
  file changes (a new size or mtime makes it a new candidate).  A symbolic
  link or a FIFO is handed on without waiting for the gate, so the filer
  refuses it with its reason instead of it waiting forever.

A bug while one path is checked becomes a ``failed`` (retryable) result for
that path; one in a whole round is logged and shown as ``error`` in
:meth:`FilingService.status`.  Either way the loop goes on.

``on_result`` is called once per change of a path's outcome (a file that
stays over quota is announced once, not every ten minutes).

The threads are those of :class:`~ohsync.daemon.service_thread.ServiceThread`
and the quiet period (with the backoff holds) that of
:class:`~ohsync.daemon.debounce.Debouncer`, shared with the mirror's
watcher; whether a file is finished is the
:class:`~ohsync.daemon.stability.StabilityGate`'s decision.
"""

from __future__ import annotations

import functools
import logging
import os
import stat
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers.api import BaseObserver

from ..engine.filing.api import MirrorAPI
from ..engine.filing.filer import Filer, FilingResult
from ..engine.names import is_ignored_name, is_partial_name
from .debounce import Debouncer
from .prompt_observer import CHANGE_EVENTS, prompt_observer
from .service_thread import ServiceThread
from .stability import StabilityGate
from .worker_job import run_job

__all__ = ["FilingService", "FilingUnavailable"]

log = logging.getLogger(__name__)

#: ``submit(fn)``: run ``fn()`` soon on the sync worker's thread.
Submit = Callable[[Callable[[], None]], None]

_RETRY_FIRST = 30.0
_RETRY_CAP = 600.0
_QUOTA_RETRY = 600.0


class FilingUnavailable(RuntimeError):
    """Filing cannot run now (the engine is not open yet, or the service is stopped)."""


#: ``(size, mtime_ns)`` of a file as last seen.
Fingerprint = tuple[int, int]


def _is_regular(path: str) -> bool:
    """True when ``path`` itself (not followed) is a regular file."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _fingerprint(path: str | Path) -> Fingerprint | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return (st.st_size, st.st_mtime_ns)


class _Handler(FileSystemEventHandler):
    def __init__(self, service: FilingService) -> None:
        self._service = service

    def on_any_event(self, event: FileSystemEvent) -> None:
        kind = event.event_type
        if kind in ("deleted", "moved"):
            self._service._removed(os.fsdecode(event.src_path))
        if kind == "deleted":
            return
        path = os.fsdecode(event.dest_path if kind == "moved" and event.dest_path else event.src_path)
        if event.is_directory:
            if kind in ("created", "moved"):
                self._service._note_tree(Path(path))
            return
        self._service._note(Path(path))


class FilingService(ServiceThread):
    """Drop-folder filing for the daemon (see the module docstring).

    :param drop_dir: the drop folder (``[filing] drop_dir``, already
        expanded); created by :meth:`start`.
    :param submit: ``submit(fn)`` runs ``fn()`` on the sync worker's thread
        (the daemon's worker must offer this; see the wiring notes in the
        report / :meth:`attach`).
    :param on_result: called with each :class:`FilingResult` worth
        announcing, from the worker thread; must not block.
    :param quiet_seconds: how long size and mtime must stay unchanged.
    :param observer_factory: makes the watchdog observer (tests may pass
        ``PollingObserver``).
    :param tick: seconds between stability checks (default ``quiet/4``,
        at least 0.1).
    :param gate: decides whether a file is finished; the same gate goes into
        every :class:`Filer` made by :meth:`new_filer`.
    """

    event_filter = CHANGE_EVENTS

    def __init__(self, drop_dir: Path, submit: Submit, on_result: Callable[[FilingResult], None], *,
                 quiet_seconds: float = 3.0, observer_factory: Callable[[], BaseObserver] = prompt_observer,
                 tick: float | None = None, gate: StabilityGate | None = None) -> None:
        super().__init__("ohsync-filing", observer_factory, observer_name="ohsync-drop-observer")
        self.drop_dir = Path(drop_dir).expanduser().absolute()
        self.gate = gate or StabilityGate()
        self._submit = submit
        self._on_result = on_result
        self.quiet_seconds = float(quiet_seconds)
        self._tick = tick if tick is not None else max(0.1, self.quiet_seconds / 4)
        self._filer: Filer | None = None  # used on the worker thread only
        self._waiting: Debouncer[str] = Debouncer(self.quiet_seconds)  # quiet period and retry holds
        self._seen: dict[str, Fingerprint | None] = {}  # path -> fingerprint when last touched
        self._attempts: dict[str, int] = {}  # path -> failed attempts in a row (backoff)
        self._in_flight: set[str] = set()
        self._settled: dict[str, Fingerprint | None] = {}  # path -> fingerprint with a final outcome
        self._held: dict[str, FilingResult] = {}  # over quota or needing the person, waiting
        self._refused: dict[str, FilingResult] = {}  # failed for good (a link, a FIFO…), still in the folder
        self._reported: dict[str, tuple[str, str]] = {}  # path -> (status, message) last announced
        self._last: list[dict[str, Any]] = []
        self._error: str | None = None  # the stability loop's last failure, until a round succeeds

    # ----------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Create the drop folder, start watching it, and queue every file
        already in it (files dropped while the daemon was not running).

        :raises OSError: the folder cannot be created or watched.
        """
        self.drop_dir.mkdir(parents=True, exist_ok=True)
        self.start_watching(self.drop_dir, _Handler(self))
        self._note_tree(self.drop_dir)
        log.info("watching the drop folder %s", self.drop_dir)

    def new_filer(self, mirror: MirrorAPI, rules: Iterable[Any], default_dest: str, db_path: Path,
                  **options: Any) -> Filer:
        """A :class:`Filer` for this drop folder whose readiness check is this
        service's :attr:`gate` (so the service and the filer decide alike).

        :param mirror: the mirror filing writes into
            (:class:`~ohsync.engine.filing.api.MirrorAPI`, e.g.
            :func:`ohsync.engine.mirror_api.for_engine` of the session's engine).
        :param rules: the config's ``[filing] rules``.
        :param default_dest: ``[filing] default``.
        :param db_path: the filing database, e.g. ``state_dir/filing.db``.
        :param options: further :class:`Filer` keyword arguments (``now``…).
        :raises RuleError: invalid rules or default destination.
        """
        return Filer(mirror, self.drop_dir, rules, default_dest, db_path, ready=self.gate.not_ready, **options)

    def attach(self, filer: Filer) -> None:
        """Give the service its :class:`Filer` (call on the worker thread, from
        the daemon's ``on_ready(session)``, each time a session opens), then
        finish jobs an earlier run left unfinished.

        A previously attached filer is closed.
        """
        old, self._filer = self._filer, filer
        if old is not None and old is not filer:
            try:
                old.close()
            except Exception:
                log.exception("closing the previous filer failed")
        for result in filer.resume():
            self._handle_result(result)
        self.wake()

    def detach(self) -> None:
        """Forget the filer (the session closed); paths wait for the next :meth:`attach`."""
        filer, self._filer = self._filer, None
        if filer is not None:
            filer.close()

    # ----------------------------------------------------------------- requests

    def file_now(self, paths: Iterable[str | os.PathLike[str]], timeout: float = 600.0) -> list[FilingResult]:
        """File these paths now, on the worker thread, and wait for the results
        (the socket ``file`` method and ``ohsync file PATH…``).

        A folder is filed file by file (hidden files and partial downloads
        inside it are skipped).  Paths must be absolute: the CLI resolves
        them against its own working directory before sending.

        :returns: one result per file, in order.
        :raises FilingUnavailable: the engine is not open (yet), or the
            worker did not answer within ``timeout`` seconds (not started by
            then: cancelled, nothing filed; started: it goes on).
        """
        files = self._expand(paths)

        def job() -> list[FilingResult]:
            filer = self._filer
            if filer is None:
                raise FilingUnavailable("filing is not ready yet: ohsync is still connecting to the server")
            results: list[FilingResult] = []
            for path in files:
                result = filer.file(path)
                results.append(result)
                self._handle_result(result)
            return results

        def timed_out(started: bool) -> FilingUnavailable:
            if not started:
                return FilingUnavailable(f"nothing was filed: ohsync was busy syncing for {timeout:g} s; try again")
            return FilingUnavailable(f"filing did not finish within {timeout:g} s; it goes on in the background")

        if not self.should_keep_running():
            raise FilingUnavailable("ohsync is shutting down")
        try:
            filed: list[FilingResult] = run_job(self._submit, job, timeout, "filing", timed_out=timed_out)
        except FilingUnavailable:
            raise
        except Exception as exc:  # told to the caller in one sentence
            raise FilingUnavailable(f"filing failed: {exc!r}") from exc
        return filed

    def retry_held(self) -> None:
        """Re-check files held for quota or after failures now (call on ``refresh``)."""
        with self.cond:
            for path in list(self._held):
                self._held.pop(path)
                self._settled.pop(path, None)
                self._touch(path, None)
            self._waiting.release_holds()
            self.cond.notify_all()

    def status(self) -> dict[str, Any]:
        """For the status object: ``{"drop_dir", "waiting", "filing", "held":
        [{"path", "status", "message"}], "refused": [{"path", "message"}],
        "last": [result dicts], "error"}`` (``held``: waiting for space or for
        the person, retried; ``refused``: will not be filed as it is, e.g. a
        symbolic link; ``error``: why the last look at the drop folder
        failed, else None)."""
        with self.cond:
            return {
                "drop_dir": str(self.drop_dir),
                "waiting": len(self._waiting),
                "filing": len(self._in_flight),
                "held": [{"path": p, "status": r.status, "message": r.message} for p, r in self._held.items()],
                "refused": [{"path": p, "message": r.message} for p, r in self._refused.items()],
                "last": list(self._last),
                "error": self._error,
            }

    # ----------------------------------------------------------------- watching

    def _expand(self, paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
        out: list[Path] = []
        for raw in paths:
            path = Path(raw).expanduser()
            if not path.is_absolute():
                path = path.absolute()
            if path.is_dir() and not path.is_symlink():
                for root, dirs, names in os.walk(path):
                    dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                    out.extend(Path(root) / n for n in sorted(names) if not is_ignored_name(n))
            else:
                out.append(path)
        return out

    def _wanted(self, path: Path) -> bool:
        try:
            rel = path.relative_to(self.drop_dir)
        except ValueError:
            return False
        parts = rel.parts
        if not parts or any(p.startswith(".") for p in parts[:-1]):
            return False
        return not is_ignored_name(parts[-1])

    def _touch(self, key: str, fingerprint: Fingerprint | None, *, until: float | None = None) -> None:
        """(Re)start ``key``'s quiet period, remembering its fingerprint now
        (call with the lock); ``until`` also holds it back until then."""
        self._seen[key] = fingerprint
        if until is None:
            self._waiting.touch(key)
        else:
            self._waiting.hold(key, until)

    def _removed(self, key: str) -> None:
        """A path left the drop folder (deleted, moved away): what waited for
        the person about it (held, refused) is no longer in the status.  A
        folder that left takes what waited below it along (one event names
        only the folder)."""
        below = key.rstrip(os.sep) + os.sep
        with self.cond:
            for path in [p for p in (*self._held, *self._refused) if p == key or p.startswith(below)]:
                if not os.path.lexists(path):
                    self._held.pop(path, None)
                    self._refused.pop(path, None)

    def _forget(self, key: str) -> None:
        self._waiting.discard(key)
        self._seen.pop(key, None)
        self._attempts.pop(key, None)

    def _note(self, path: Path) -> None:
        """A file event: (re)start its quiet period."""
        if not self._wanted(path):
            if is_partial_name(path.name):
                log.debug("waiting for %s to finish downloading", path.name)
            return
        key = str(path)
        fingerprint = _fingerprint(key)
        with self.cond:
            self._touch(key, fingerprint)
            self.cond.notify_all()

    def _note_tree(self, folder: Path) -> None:
        """A folder appeared (or the start scan): note every file below it."""
        try:
            for root, dirs, names in os.walk(folder):
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                for name in names:
                    self._note(Path(root) / name)
        except OSError as exc:
            log.warning("cannot list %s: %s", folder, exc)

    def run_loop(self) -> None:
        """The stability thread: every ``tick``, hand files that held still on to the worker."""
        while True:
            with self.cond:
                if not self.should_keep_running():
                    return
                self.cond.wait(timeout=self._tick)
                if not self.should_keep_running():
                    return
                if self._filer is None:
                    continue  # nothing can be filed before the engine is open
                try:
                    due = self._due_paths()
                except Exception as exc:  # a bug must not end the loop silently: later drops are still filed
                    log.exception("checking the drop folder failed")
                    self._error = f"checking the drop folder failed: {exc!r} (see the log)"
                    continue
                self._error = None
            for path in due:
                try:
                    self._submit(functools.partial(self._file_on_worker, path))
                except Exception as exc:  # one failed hand-over must not end the loop (and all later filing)
                    log.exception("handing %s to the worker failed", path)
                    self._fail(path, exc)

    def _due_paths(self) -> list[str]:
        """Paths whose size and mtime held still for the quiet period and that
        the gate finds finished, or that are not regular files (handed on to
        be refused with a reason; call with the lock).  A path whose check
        fails is reported (:meth:`_fail`) and the others go on."""
        due: list[str] = []
        for key in self._waiting.pop_due():
            try:
                if self._is_due(key):
                    self._seen.pop(key, None)
                    self._in_flight.add(key)
                    due.append(key)
            except Exception as exc:  # one file's bug must not end the loop (and all later filing)
                log.exception("checking the dropped file %s failed", key)
                self._fail(key, exc)
        return due

    def _is_due(self, key: str) -> bool:
        """Whether ``key`` is to be filed now; else it is watched again or forgotten (call with the lock)."""
        if key in self._in_flight:
            self._touch(key, self._seen.get(key))  # still being filed: look again later
            return False
        fingerprint = _fingerprint(key)
        if fingerprint is None:
            self._forget(key)
            self._removed(key)  # removed by the person: nothing waits for them any more
            return False
        if fingerprint != self._seen.get(key):
            self._touch(key, fingerprint)  # it changed (or was first seen) during the quiet period
            return False
        if self._settled.get(key) == fingerprint:
            self._forget(key)  # outcome known for exactly this version
            return False
        if not _is_regular(key):
            return True  # a link, a FIFO: the filer refuses it with the reason (never waits for it forever)
        if not self.gate.is_stable(Path(key), 0.0):
            self._touch(key, fingerprint)  # a partial companion beside it, or open for writing: wait more
            return False
        return True

    def _fail(self, key: str, exc: Exception) -> None:
        """A bug while checking or handing on ``key``: logged, told as a
        ``failed`` result (status, notice) and retried after the backoff;
        the loop goes on with the other files."""
        result = FilingResult("failed", key, message=f"{Path(key).name} was not filed: internal error {exc!r} "
                              "(see the log); it is tried again later.", retryable=True)
        self._handle_result(result, finished=key)

    # ----------------------------------------------------------------- on the worker

    def _file_on_worker(self, key: str) -> None:
        """Runs on the worker thread: file one path and handle the result."""
        try:
            filer = self._filer
            if filer is None:
                with self.cond:
                    if key not in self._waiting:
                        self._touch(key, None)
                return
            if not os.path.lexists(key):
                return  # filed meanwhile (resume, `ohsync file`) or removed
            try:
                result = filer.file(Path(key))
            except Exception as exc:  # never let filing kill the worker
                log.exception("filing %s failed", key)
                result = FilingResult("failed", key, message=f"{Path(key).name} was not filed: internal error "
                                      f"{exc!r}", retryable=True)
            self._handle_result(result, finished=key)
        finally:
            with self.cond:
                self._in_flight.discard(key)

    def _handle_result(self, result: FilingResult, *, announce: bool = True, finished: str | None = None) -> None:
        """Record ``result`` (hold, retry, settle) and announce it.

        :param finished: the path whose filing this result ends: it is no
            longer counted as being filed when the result is announced (the
            status taken then shows it done).
        """
        key = result.source
        fingerprint = _fingerprint(key)
        with self.cond:
            if finished is not None:
                self._in_flight.discard(finished)
            now = self._waiting.now()
            self._last = (self._last + [result.as_dict()])[-20:]
            self._refused.pop(key, None)
            if result.status == "filed" or fingerprint is None:
                self._held.pop(key, None)
                self._settled.pop(key, None)
                self._forget(key)
                if fingerprint is not None and self._wanted(Path(key)):
                    # a file still stands there (replaced while it was being filed): a new candidate
                    self._touch(key, fingerprint)
            elif result.status == "over_quota" or (result.status == "failed" and result.needs is not None):
                self._held[key] = result
                self._touch(key, fingerprint, until=now + _QUOTA_RETRY)
            elif result.retryable and self._wanted(Path(key)):
                if result.status == "not_ready":
                    delay = self.quiet_seconds
                else:  # failures in a row back off: 30 s, 60 s, … up to 10 min, at least Retry-After
                    attempts = self._attempts[key] = self._attempts.get(key, 0) + 1
                    delay = max(result.retry_after or 0.0, min(_RETRY_CAP, _RETRY_FIRST * 2 ** (attempts - 1)))
                self._touch(key, fingerprint, until=now + delay)
            else:
                self._settled[key] = fingerprint
                self._held.pop(key, None)
                if result.status == "failed" and self._wanted(Path(key)):
                    # it stays in the drop folder until the person acts (`ohsync file` of a path
                    # elsewhere was answered at once, and no watcher would see it go)
                    self._refused[key] = result
            outcome = (result.status, result.message)
            repeat = self._reported.get(key) == outcome
            self._reported[key] = outcome
            if result.status == "filed":
                self._reported.pop(key, None)
        if announce and not repeat:
            try:
                self._on_result(result)
            except Exception:
                log.exception("the filing result consumer failed")
