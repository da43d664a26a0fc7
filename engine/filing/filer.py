"""Drop-folder filing (docs/architecture.md §8): one dropped file → ``/Files/``.

:class:`Filer` files one document at a time as a small, resumable state
machine whose progress lives in a SQLite file of its own (``db_path``, e.g.
``state_dir/filing.db``).  It sees the mirror only through the narrow
:class:`~ohsync.engine.filing.api.MirrorAPI` (the engine's implementation
is :class:`~ohsync.engine.mirror_api.EngineMirror`) and asks the injected
``ready`` check (the daemon's stability gate) whether a file is finished.
Each job goes through these steps, recorded after each one succeeded::

    planned ──upload + read-back──▶ uploaded ──sidecar──▶ sidecar
            ──journal line──▶ journal ──move into mirror──▶ moved ──▶ done

Every step is idempotent and checks the server before acting, so a crash
anywhere resumes on :meth:`Filer.resume` without a second upload, sidecar
or journal line:

* upload: if the destination already holds a file with our content id the
  upload is done; otherwise the file goes up through the engine's one write
  path (:meth:`MirrorAPI.upload_new <ohsync.engine.filing.api.MirrorAPI.upload_new>`:
  large files in chunks, and a resumed job continues from the server's
  ``file-uploaded-bytes``), then the engine's one read-back
  (:meth:`~ohsync.engine.filing.api.MirrorAPI.verify`);
* sidecar: written into the local mirror and pushed by read-merge-write
  (:meth:`~ohsync.engine.filing.api.MirrorAPI.push`); a sidecar already on
  the server with our content counts as done, one with other content is
  left alone;
* journal: the line is appended to the local ``journal/<yyyy-mm>.md`` only
  when it is not there yet, then pushed by read-merge-write (the journal's
  memory-aware union merge keeps lines written elsewhere meanwhile);
* move: the dropped file becomes the mirror's copy, with its base recorded
  (so it is neither uploaded nor downloaded again).

Nothing leaves the drop folder before the read-back verified the upload.
Crash tests stop the pipeline at the named points ``filing.*`` of
:data:`ohsync.engine.crashpoints.POINTS` (``OHSYNC_CRASH_AT``): after the
job is planned, after a non-final chunk, after the upload, after the
read-back, after the sidecar is written and pushed, after the journal line
is written and pushed, after the move, and before the job is marked done.

Before a job is created: partial downloads and busy files are refused
(``not_ready``; the injected ``ready`` check decides), content already
under ``/Files/`` (same sha1 synced, same content id on the server, or a
job in flight) is reported as ``duplicate`` without upload, and the
account's free space is checked (``over_quota``).  Filing runs in the
thread that owns the engine (the daemon's sync worker).

Modules: this one is the pipeline (:class:`Filer`: running the steps,
upload + read-back); :mod:`.plan` planning a job;
:mod:`.jobs` the job database and results; :mod:`.steps` the
steps after the upload; :mod:`.summary` the sidecar text;
:mod:`.journal` the journal line; :mod:`.rules` the
destination rules; :mod:`.api` what filing needs of the engine.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, tzinfo
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

from ..crashpoints import reach
from ..errors import (
    Failure,
    OhsyncError,
    QuotaError,
    RemoteOperationError,
    ServerError,
    classify,
    local_error,
)
from ..events import SyncEvent
from ..ids import BLOCK_SIZE
from ..localfs import stat_fingerprint
from ..models import RemoteEntry
from ..paths import parent_rel, to_remote
from .api import MirrorAPI, ReadyCheck
from .jobs import STEPS, Abandon, FilingJob, FilingResult, JobStore
from .journal import BEIJING, journal_line
from .plan import Planner
from .rules import DEFAULT_DEST, FilingRule, RuleError, parse_dest, parse_rules
from .source import NotAFileError, open_source
from .steps import add_journal_line, move_into_mirror, source_unchanged, write_sidecar
from .summary import sidecar_text, summarize

__all__ = [
    "BEIJING",
    "DEFAULT_CHUNK_SIZE",
    "STEPS",
    "Filer",
    "FilingResult",
    "journal_line",
    "sidecar_text",
    "summarize",
]

log = logging.getLogger("ohsync.filing")

#: Files up to this size go up in one request; larger ones in chunks.
DEFAULT_CHUNK_SIZE = BLOCK_SIZE

# Older names, kept for callers and tests.
_Job = FilingJob
_JobStore = JobStore
_Abandon = Abandon


# --------------------------------------------------------------------------- upload


def _post_chunk(fh: BinaryIO, job: FilingJob, first: int, end: int) -> None:
    """Checkpoint run just before each chunk ``[first, end)`` of a filing
    upload is read and posted: the dropped file must still be the planned
    one (same size and mtime), else the job is re-planned and nothing more
    is sent.  (Name kept from when this module posted chunks itself; tests
    patch it to stop the process between two chunks.)

    :raises Abandon: the dropped file changed during the upload.
    """
    size, mtime_ns = stat_fingerprint(os.fstat(fh.fileno()))[:2]
    if (size, mtime_ns) != (job.size, job.mtime_ns):
        raise Abandon(f"{job.original_name} changed while it was uploaded")


# --------------------------------------------------------------------------- the filer


class Filer:
    """Files dropped documents into the mirror's ``/Files/`` tree.

    Runs in the thread that owns the engine (never concurrently with a
    sync pass).

    :param mirror: the mirror, as filing sees it
        (:class:`~ohsync.engine.filing.api.MirrorAPI`; for a running engine
        :func:`ohsync.engine.mirror_api.for_engine`).
    :param drop_dir: the drop folder (``[filing] drop_dir``); files in it
        match ``dir:`` rules by their subfolder.
    :param rules: :class:`FilingRule` values, or the config's raw
        ``[{match, dest}]`` list (parsed here; RuleError when invalid).
    :param default_dest: destination when no rule matches (``[filing]
        default``, ``/Files/_inbox/``).
    :param db_path: the filing database (created), e.g. ``state_dir/filing.db``.
    :param ready: tells whether a file is finished (not downloading, not
        open for writing): the daemon injects its stability gate
        (:meth:`ohsync.daemon.stability.StabilityGate.not_ready`).
    :param now: returns the current time (aware datetime; converted to
        +08:00); tests pass a fixed clock.
    :param chunk_size: files larger than this (bytes) go up in chunks.
    :param upload_attempts: failures in a row of one chunk before the job
        stops (it is retried later).
    :param sleep: kept for callers; the client's backoff applies between
        upload attempts.
    :param tz: the offset of filing times (sidecar ``filed``, the journal
        line and its month; config ``[memory] time_offset``).
    :param language: ``"zh"`` or ``"en"``: the language of sidecar summaries
        and journal lines (config ``[memory] language``).
    :raises RuleError: invalid rules or default destination.
    """

    def __init__(self, mirror: MirrorAPI, drop_dir: Path, rules: Iterable[FilingRule | Mapping[str, Any]] = (),
                 default_dest: str = DEFAULT_DEST, db_path: Path | None = None, *, ready: ReadyCheck,
                 now: Callable[[], datetime] | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE,
                 upload_attempts: int = 4, sleep: Callable[[float], None] = time.sleep,
                 tz: tzinfo = BEIJING, language: str = "zh") -> None:
        self.mirror = mirror
        self.drop_dir = Path(drop_dir).expanduser().absolute()
        rules = list(rules)
        if all(isinstance(r, FilingRule) for r in rules):
            self.rules: list[FilingRule] = list(rules)  # type: ignore[arg-type]
        else:
            self.rules = parse_rules([r for r in rules if not isinstance(r, FilingRule)])
        self.default_dest = parse_dest(default_dest, what="[filing] default")
        if db_path is None:
            raise ValueError("db_path is required (e.g. state_dir / 'filing.db')")
        self._jobs = _JobStore(Path(db_path))
        self._now = now or (lambda: datetime.now(tz))
        self.language = language
        self.chunk_size = max(1, int(chunk_size))
        self.upload_attempts = max(1, int(upload_attempts))
        self._sleep = sleep
        self._planner = Planner(mirror, self._jobs, self.drop_dir, self.rules, self.default_dest, self._now,
                                ready, tz=tz, language=language)

    #: The method that takes a job from each recorded step to the next.
    _NEXT: ClassVar[dict[str, str]] = {"planned": "_do_upload", "uploaded": "_do_sidecar", "sidecar": "_do_journal",
                                       "journal": "_do_move", "moved": "_do_finish"}

    def close(self) -> None:
        """Close the filing database."""
        self._jobs.close()

    def _remote_path(self, rel: str) -> str:
        return to_remote(self.mirror.remote_root, rel)

    # ------------------------------------------------------------------ public API

    def pending(self) -> list[dict[str, Any]]:
        """Unfinished jobs: ``[{"source", "dest", "step", "note"}]`` (for status)."""
        return [{"source": j.source, "dest": self._remote_path(j.dest_rel), "step": j.step, "note": j.note}
                for j in self._jobs.unfinished()]

    def file(self, path: Path | str) -> FilingResult:
        """File one document now (the ``ohsync file`` command, the socket's
        ``file`` method and the drop-folder service all end here).

        An unfinished job for the same path is resumed instead of starting
        a new one.

        :param path: a regular file, in the drop folder or anywhere else
            outside the mirror.
        :returns: the :class:`FilingResult`; the status says what happened.
            Errors of the server, the network or the local disk become
            ``failed`` results (``retryable`` for transient ones), never
            exceptions.
        """
        source = Path(path).expanduser().absolute()
        job = self._jobs.unfinished_for_source(str(source))
        if job is not None:
            return self._run(job)
        try:
            return self._plan(source)
        except QuotaError as exc:
            return FilingResult("over_quota", str(source), message=f"{source.name} stays in the drop folder: "
                                f"{exc.message}", retryable=False)
        except RuleError as exc:
            return FilingResult("failed", str(source), message=f"{source.name}: {exc}")
        except (OhsyncError, OSError) as exc:
            failure = classify(exc)
            return FilingResult("failed", str(source), message=f"{source.name} was not filed: {failure.message}",
                                **_retry_fields(failure))

    def resume(self) -> list[FilingResult]:
        """Finish every job an earlier run left unfinished (call at start and
        after the server comes back).

        :returns: one result per unfinished job, oldest first.
        """
        return [self._run(job) for job in self._jobs.unfinished()]

    # ------------------------------------------------------------------ planning

    def _plan(self, source: Path) -> FilingResult:
        planned = self._planner.plan(source)
        if isinstance(planned, FilingResult):
            return planned
        reach("filing.planned")
        return self._run(planned)

    def _check_quota(self, size: int, name: str) -> None:
        self._planner.check_quota(size, name)

    def _free_dest(self, folder_rel: str, wanted: str, *, avoid: str | None = None) -> str:
        return self._planner.free_dest(folder_rel, wanted, avoid=avoid)

    # ------------------------------------------------------------------ running

    def _result(self, job: _Job, status: str, message: str, *, retryable: bool = False,
                needs: str | None = None, retry_after: float | None = None) -> FilingResult:
        return FilingResult(status, job.source, dest_rel=job.dest_rel,
                            sidecar_rel=job.sidecar_rel if STEPS.index(job.step) >= STEPS.index("sidecar") else None,
                            message=message, remote_path=self._remote_path(job.dest_rel),
                            retryable=retryable, job_id=job.id, needs=needs, retry_after=retry_after)

    def _run(self, job: _Job) -> FilingResult:
        """Run ``job`` from its step to ``done``; errors become results."""
        name = job.original_name
        try:
            while job.step != "done":
                job = getattr(self, self._NEXT[job.step])(job)
        except Abandon as exc:
            job = self._jobs.get(job.id) or job
            self._jobs.delete(job)
            if Path(job.source).is_file():
                log.info("re-planning %s: %s", job.source, exc)
                return self.file(job.source)
            return FilingResult("failed", job.source, message=f"{name} was not filed: {exc}")
        except QuotaError as exc:
            job = self._jobs.get(job.id) or job
            if job.step == "planned" and not job.upload_started:
                self._jobs.delete(job)
            return self._result(job, "over_quota", f"{name} stays in the drop folder: {exc.message}")
        except (OhsyncError, OSError) as exc:
            job = self._jobs.get(job.id) or job
            failure = classify(exc if isinstance(exc, OhsyncError) else local_error(exc, what="filing"))
            log.warning("filing %s stopped after step %s: %s", job.source, job.step, failure.message)
            self._jobs.update(job, note=failure.message)
            later = "it is retried on the next start or refresh" if failure.permanent else \
                "it is retried automatically"
            return self._result(job, "failed", f"{name} is not filed yet ({failure.title}: {failure.message}); "
                                f"{later}.", **_retry_fields(failure))
        except Exception as exc:  # a bug must not take the sync worker down
            job = self._jobs.get(job.id) or job
            log.exception("filing %s failed after step %s", job.source, job.step)
            self._jobs.update(job, note=repr(exc))
            return self._result(job, "failed", f"{name} is not filed yet (internal error {exc!r}; see the log).",
                                retryable=True)
        where = self._remote_path(job.dest_rel)
        message = f"Filed {name} → {where}"
        if job.note:
            message += f" ({job.note})"
        return self._result(job, "filed", message)

    def _source_unchanged(self, job: _Job) -> bool | None:
        return source_unchanged(job)

    def _remote_entry(self, rel: str) -> RemoteEntry | None:
        return self.mirror.remote_file(rel)

    # -- step 1: upload + read-back ------------------------------------------------

    def _do_upload(self, job: _Job) -> _Job:
        for _ in range(4):
            current = self._remote_entry(job.dest_rel)
            if current is not None:
                if current.id == job.file_id or (job.upload_id is not None and current.id == job.upload_id):
                    # an earlier run uploaded it (and perhaps did not get to record it)
                    self._verify(job, current)
                    return self._uploaded(job, current)
                # someone else's file took the name meanwhile: pick another
                folder = parent_rel(job.dest_rel)
                job = self._jobs.update(job, dest_rel=self._free_dest(folder, job.name, avoid=job.dest_rel),
                                        upload_started=False, upload_id=None)
                continue
            unchanged = self._source_unchanged(job)
            if unchanged is None:
                raise Abandon(f"{job.original_name} disappeared before it was uploaded")
            if not unchanged:
                raise Abandon(f"{job.original_name} changed before it was uploaded")
            self._check_quota(job.size, job.original_name)
            return self._upload(job)
        raise RemoteOperationError(f"could not find a free name for {job.name} in "
                                   f"{self._remote_path(parent_rel(job.dest_rel))}", path=job.dest_rel)

    def _upload(self, job: _Job) -> _Job:
        mirror = self.mirror
        resume = job.upload_started

        def progress(done: int, total: int) -> None:
            mirror.emit(SyncEvent("transfer", job.dest_rel, "up", done=done, total=total))
            if done < total:
                reach("filing.chunk_sent")

        try:  # never through a link swapped in since planning
            fh = open_source(Path(job.source), self.drop_dir, job.drop_rel)
        except NotAFileError as exc:
            raise Abandon(exc.message) from None
        except FileNotFoundError:
            raise Abandon(f"{job.original_name} disappeared before it was uploaded") from None
        with fh:
            if stat_fingerprint(os.fstat(fh.fileno()))[:2] != (job.size, job.mtime_ns):
                raise Abandon(f"{job.original_name} changed before it was uploaded")

            def checkpoint(first: int, end: int) -> None:
                _post_chunk(fh, job, first, end)  # looked up at call time (tests patch it)

            if not job.upload_started:  # from now on a partial upload may be pending on the server
                job = self._jobs.update(job, upload_started=True)
            stored_rel, uploaded_id = mirror.upload_new(job.dest_rel, fh, job.size, resume=resume,
                                                        attempts=self.upload_attempts, chunk_size=self.chunk_size,
                                                        progress=progress, before_chunk=checkpoint)
        reach("filing.uploaded")
        if stored_rel != job.dest_rel:
            # the name was taken between planning and the upload: the server
            # auto-renamed ours.  Keep that name (its sidecar follows it).
            log.info("the server stored %s as %s", job.dest_rel, stored_rel)
            job = self._jobs.update(job, dest_rel=stored_rel)
        job = self._jobs.update(job, upload_id=uploaded_id)
        current = self._remote_entry(job.dest_rel)
        if current is None or current.id != uploaded_id:
            raise ServerError(f"read-back of {self._remote_path(job.dest_rel)} failed: the server does not hold "
                              "what was uploaded", path=job.dest_rel)
        self._verify(job, current)
        return self._uploaded(job, current)

    def _verify(self, job: _Job, current: RemoteEntry) -> None:
        """Read-back (docs/architecture.md §5, step 3) through the engine's
        one verification: the server's ``current`` holds the dropped bytes.
        Our own upload that came out wrong is removed, so a retry starts clean.

        :raises ServerError: it does not.
        """
        if self.mirror.verify(current, sha1=job.sha1, size=job.size, file_id=job.file_id):
            return
        if job.upload_id == current.id:
            with contextlib.suppress(OhsyncError):
                self.mirror.delete_remote(job.dest_rel)
        self._jobs.update(job, upload_started=False, upload_id=None)
        raise ServerError(f"read-back of {self._remote_path(job.dest_rel)} did not match the dropped file",
                          path=job.dest_rel)

    def _uploaded(self, job: _Job, current: RemoteEntry) -> _Job:
        reach("filing.verified")
        return self._jobs.update(job, step="uploaded", upload_id=current.id, note="")

    # -- steps 2-5 (see filing/steps.py) ---------------------------------------------------

    def _do_sidecar(self, job: _Job) -> _Job:
        return write_sidecar(self.mirror, self._jobs, job)

    def _do_journal(self, job: _Job) -> _Job:
        return add_journal_line(self.mirror, self._jobs, job, language=self.language)

    def _do_move(self, job: _Job) -> _Job:
        return move_into_mirror(self.mirror, self._jobs, job, self.drop_dir)

    def _do_finish(self, job: _Job) -> _Job:
        reach("filing.finishing")
        self.mirror.emit(SyncEvent("synced", job.dest_rel, "up", action="file",
                                   message=f"filed from {job.source}"))
        return self._jobs.update(job, step="done")


def _retry_fields(failure: Failure) -> dict[str, Any]:
    """The retry fields of a ``failed`` :class:`FilingResult`, from the one
    classification (``engine.errors.classify``): retried by itself unless it
    needs the person, and then ``needs`` says for what."""
    return {"retryable": not failure.permanent, "needs": failure.needs if failure.permanent else None,
            "retry_after": failure.retry_after}
