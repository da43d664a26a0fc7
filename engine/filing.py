"""Drop-folder filing (docs/architecture.md §8): one dropped file → ``/Files/``.

:class:`Filer` files one document at a time as a small, resumable state
machine whose progress lives in a SQLite file of its own (``db_path``, e.g.
``state_dir/filing.db``; the mirror's state database is not touched except
through :class:`~ohsync.engine.state.StateStore`'s public methods).  Each
job goes through these steps, recorded after each one succeeded::

    planned ──upload + read-back──▶ uploaded ──sidecar──▶ sidecar
            ──journal line──▶ journal ──move into mirror──▶ moved ──▶ done

Every step is idempotent and checks the server before acting, so a crash
anywhere resumes on :meth:`Filer.resume` without a second upload, sidecar
or journal line:

* upload: if the destination already holds a file with our content id the
  upload is done; large files go up in chunks through the client's
  :meth:`~ohsync.engine.client_bulk.BulkTransfers.upload_chunked`, and a
  resumed job continues from the server's ``file-uploaded-bytes``;
* sidecar: written into the local mirror and pushed by read-merge-write
  (:func:`~ohsync.engine.transfer.push`); a sidecar already on the server
  with our content counts as done, one with other content is left alone;
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
(``not_ready``; the ``ready`` check the daemon injects decides), content already under ``/Files/`` (same sha1 in state, or
same content id in the remote snapshot, or a job in flight) is reported as
``duplicate`` without upload, and the account's free space is checked
(``over_quota``).  Filing runs in the thread that owns the engine (the
daemon's sync worker).

Modules: this one is the pipeline (:class:`Filer`: planning, running the
steps, upload + read-back); :mod:`.filing_jobs` the job database and
results; :mod:`.filing_steps` the steps after the upload;
:mod:`.filing_summary` the sidecar text; :mod:`.filing_journal` the journal
line; :mod:`.filing_rules` the destination rules.
"""

from __future__ import annotations

import hashlib
import io
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO, ClassVar

from .crashpoints import reach
from .errors import (
    Failure,
    NotFoundError,
    OhsyncError,
    QuotaError,
    RemoteError,
    RemoteOperationError,
    ServerError,
    classify,
    local_error,
)
from .events import SyncEvent
from .filing_jobs import STEPS, Abandon, FilingJob, FilingResult, JobStore
from .filing_journal import BEIJING, journal_line
from .filing_plan import Planner
from .filing_api import ReadyCheck
from .filing_rules import DEFAULT_DEST, FilingRule, RuleError, parse_dest, parse_rules
from .filing_steps import (
    add_journal_line,
    move_into_mirror,
    persist_snapshot,
    remote_entry,
    source_unchanged,
    write_sidecar,
)
from .filing_summary import sidecar_text, summarize
from .ids import BLOCK_SIZE
from .localfs import stat_fingerprint
from .models import RemoteEntry, UploadResult
from .paths import from_remote, parent_rel
from .transfer import ensure_remote_dir, remote_written

__all__ = [
    "BEIJING",
    "STEPS",
    "Filer",
    "FilingResult",
    "journal_line",
    "sidecar_text",
    "summarize",
    "upload_resumable",
]

log = logging.getLogger("ohsync.filing")

#: Files up to this size go up in one request; larger ones in chunks.
DEFAULT_CHUNK_SIZE = BLOCK_SIZE

# Older names, kept for callers and tests.
_Job = FilingJob
_JobStore = JobStore
_Abandon = Abandon


# --------------------------------------------------------------------------- upload


def upload_resumable(client: Any, repo_id: str, remote_path: str, fh: BinaryIO, size: int, *,
                     chunk_size: int = DEFAULT_CHUNK_SIZE, resume: bool = False, attempts: int = 4,
                     progress: Callable[[int, int], None] | None = None,
                     sleep: Callable[[float], None] | None = None,
                     on_start: Callable[[], None] | None = None,
                     before_chunk: Callable[[int, int], None] | None = None) -> UploadResult:
    """Upload a new file (never ``replace``): above ``chunk_size`` in
    resumable chunks, through the client's ``upload_chunked`` (API §4.7).

    A name taken meanwhile is auto-renamed by the server (see the result's
    ``path``).  A client without ``upload_chunked`` gets one ``upload``.

    :param fh: the content, seekable, read from offset 0.
    :param size: bytes in ``fh``.
    :param resume: continue an upload an earlier run started (the server's
        ``file-uploaded-bytes``); False starts at byte 0.
    :param attempts: failures in a row of one chunk before giving up.
    :param progress: ``progress(done_bytes, total_bytes)`` after each chunk.
    :param sleep: unused (the client's backoff applies); kept for callers.
    :param on_start: called once before the first byte is sent (the
        caller records that an upload may be pending on the server).
    :param before_chunk: ``before_chunk(first, end)`` before each chunk.
    :returns: the :class:`UploadResult` of the final chunk.
    :raises QuotaError: the server refused for quota (443/442).
    :raises NetworkError, ServerError: still failing after ``attempts``.
    :raises RemoteError: anything else from the server.
    """
    if on_start is not None:
        on_start()
    if not hasattr(client, "upload_chunked"):
        fh.seek(0)
        result: UploadResult = client.upload(repo_id, remote_path, fh, replace=False)
        if progress is not None:
            progress(size, size)
        return result
    result = client.upload_chunked(repo_id, remote_path, fh, size=size, chunk_size=chunk_size, resume=resume,
                                   attempts=attempts, progress=progress, before_chunk=before_chunk)
    return result


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


class _HashWriter(io.RawIOBase):
    """A write-only sink that hashes what the client downloads into it."""

    def __init__(self) -> None:
        self.sha1 = hashlib.sha1()
        self.size = 0

    def writable(self) -> bool:
        return True

    def write(self, b: Any) -> int:
        self.sha1.update(b)
        self.size += len(b)
        return len(b)



# --------------------------------------------------------------------------- the filer


class Filer:
    """Files dropped documents into the mirror's ``/Files/`` tree.

    Runs in the thread that owns ``engine`` (never concurrently with
    ``engine.sync``).

    :param engine: the mirror's :class:`~ohsync.engine.sync.SyncEngine`
        (its ``ctx`` gives client, library id, roots, state and snapshot).
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
        upload attempts (its ``sleep`` argument).
    :raises RuleError: invalid rules or default destination.
    """

    def __init__(self, engine: Any, drop_dir: Path, rules: Iterable[FilingRule | Mapping[str, Any]] = (),
                 default_dest: str = DEFAULT_DEST, db_path: Path | None = None, *, ready: ReadyCheck,
                 now: Callable[[], datetime] | None = None, chunk_size: int = DEFAULT_CHUNK_SIZE,
                 upload_attempts: int = 4, sleep: Callable[[float], None] = time.sleep) -> None:
        self.engine = engine
        self.ctx = engine.ctx
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
        self._now = now or (lambda: datetime.now(BEIJING))
        self.chunk_size = max(1, int(chunk_size))
        self.upload_attempts = max(1, int(upload_attempts))
        self._sleep = sleep
        self._planner = Planner(self.ctx, self._jobs, self.drop_dir, self.rules, self.default_dest, self._now,
                                ready)

    #: The method that takes a job from each recorded step to the next.
    _NEXT: ClassVar[dict[str, str]] = {"planned": "_do_upload", "uploaded": "_do_sidecar", "sidecar": "_do_journal",
                                       "journal": "_do_move", "moved": "_do_finish"}

    def close(self) -> None:
        """Close the filing database."""
        self._jobs.close()

    # ------------------------------------------------------------------ public API

    def pending(self) -> list[dict[str, Any]]:
        """Unfinished jobs: ``[{"source", "dest", "step", "note"}]`` (for status)."""
        return [{"source": j.source, "dest": self.ctx.remote_path(j.dest_rel), "step": j.step, "note": j.note}
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
                            message=message, remote_path=self.ctx.remote_path(job.dest_rel),
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
        except Exception as exc:  # noqa: BLE001 - a bug must not take the sync worker down
            job = self._jobs.get(job.id) or job
            log.exception("filing %s failed after step %s", job.source, job.step)
            self._jobs.update(job, note=repr(exc))
            return self._result(job, "failed", f"{name} is not filed yet (internal error {exc!r}; see the log).",
                                retryable=True)
        where = self.ctx.remote_path(job.dest_rel)
        message = f"Filed {name} → {where}"
        if job.note:
            message += f" ({job.note})"
        return self._result(job, "filed", message)

    def _source_unchanged(self, job: _Job) -> bool | None:
        return source_unchanged(job)

    def _remote_entry(self, rel: str) -> RemoteEntry | None:
        return remote_entry(self.ctx, rel)

    def _persist_snapshot(self) -> None:
        persist_snapshot(self.ctx)

    # -- step 1: upload + read-back ------------------------------------------------

    def _do_upload(self, job: _Job) -> _Job:
        for _ in range(4):
            current = self._remote_entry(job.dest_rel)
            if current is not None:
                if current.id == job.file_id or (job.upload_id is not None and current.id == job.upload_id):
                    # an earlier run uploaded it (and perhaps did not get to record it)
                    self._verify(job, current.id)
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
                                   f"{self.ctx.remote_path(parent_rel(job.dest_rel))}", path=job.dest_rel)

    def _upload(self, job: _Job) -> _Job:
        ctx = self.ctx
        folder = parent_rel(job.dest_rel)
        ensure_remote_dir(ctx, folder)
        remote_path = ctx.remote_path(job.dest_rel)
        resume = job.upload_started

        def started() -> None:
            nonlocal job
            if not job.upload_started:
                job = self._jobs.update(job, upload_started=True)

        def progress(done: int, total: int) -> None:
            ctx.emit(SyncEvent("transfer", job.dest_rel, "up", done=done, total=total))
            if done < total:
                reach("filing.chunk_sent")

        with open(job.source, "rb") as fh:
            if stat_fingerprint(os.fstat(fh.fileno()))[:2] != (job.size, job.mtime_ns):
                raise Abandon(f"{job.original_name} changed before it was uploaded")
            def checkpoint(first: int, end: int) -> None:
                _post_chunk(fh, job, first, end)  # looked up at call time (tests patch it)

            try:
                result = upload_resumable(ctx.client, ctx.repo_id, remote_path, fh, job.size,
                                          chunk_size=self.chunk_size, resume=resume,
                                          attempts=self.upload_attempts, progress=progress,
                                          on_start=started, before_chunk=checkpoint)
            except NotFoundError:
                # the folder vanished (stale snapshot): create it for real and retry once
                ctx.client.mkdir(ctx.repo_id, ctx.remote_path(folder), parents=True)
                result = upload_resumable(ctx.client, ctx.repo_id, remote_path, fh, job.size,
                                          chunk_size=self.chunk_size, resume=False,
                                          attempts=self.upload_attempts, progress=progress,
                                          on_start=started, before_chunk=checkpoint)
        reach("filing.uploaded")
        stored_rel = from_remote(ctx.remote_root, result.path) or job.dest_rel
        if stored_rel != job.dest_rel:
            # the name was taken between planning and the upload: the server
            # auto-renamed ours.  Keep that name (its sidecar follows it).
            log.info("the server stored %s as %s", job.dest_rel, stored_rel)
            job = self._jobs.update(job, dest_rel=stored_rel)
        job = self._jobs.update(job, upload_id=result.id)
        current = self._remote_entry(job.dest_rel)
        if current is None or current.id != result.id:
            raise ServerError(f"read-back of {remote_path} failed: the server does not hold what was "
                              "uploaded", path=job.dest_rel)
        self._verify(job, result.id)
        return self._uploaded(job, current)

    def _verify(self, job: _Job, remote_id: str) -> None:
        """Read-back (docs/architecture.md §5, step 3): the content behind ``remote_id`` is ours.

        Equal content ids prove it for files up to the full-read limit after
        a download; larger files with an equal id count as verified (the id
        is the hash of the content's block hashes); a differing id means a
        download and sha1 comparison.
        """
        ctx = self.ctx
        full = job.size <= ctx.options.readback_full_limit or remote_id != job.file_id
        if not full:
            return
        sink = _HashWriter()
        ctx.client.download(ctx.repo_id, ctx.remote_path(job.dest_rel), sink)
        if sink.sha1.hexdigest() != job.sha1 or sink.size != job.size:
            if job.upload_id == remote_id:
                try:  # our own upload came out wrong: remove it so a retry starts clean
                    ctx.client.delete(ctx.repo_id, ctx.remote_path(job.dest_rel))
                except RemoteError:
                    pass
            self._jobs.update(job, upload_started=False, upload_id=None)
            raise ServerError(f"read-back of {ctx.remote_path(job.dest_rel)} did not match the dropped file",
                              path=job.dest_rel)

    def _uploaded(self, job: _Job, current: RemoteEntry) -> _Job:
        reach("filing.verified")
        self.ctx.snapshot[job.dest_rel] = current
        remote_written(self.ctx, job.dest_rel)
        self._persist_snapshot()
        return self._jobs.update(job, step="uploaded", upload_id=current.id, note="")

    # -- steps 2-5 (see filing_steps) ---------------------------------------------------

    def _do_sidecar(self, job: _Job) -> _Job:
        return write_sidecar(self.ctx, self._jobs, job)

    def _do_journal(self, job: _Job) -> _Job:
        return add_journal_line(self.ctx, self._jobs, job)

    def _do_move(self, job: _Job) -> _Job:
        return move_into_mirror(self.ctx, self._jobs, job)

    def _do_finish(self, job: _Job) -> _Job:
        reach("filing.finishing")
        self.ctx.emit(SyncEvent("synced", job.dest_rel, "up", action="file",
                                message=f"filed from {job.source}"))
        return self._jobs.update(job, step="done")


def _retry_fields(failure: Failure) -> dict[str, Any]:
    """The retry fields of a ``failed`` :class:`FilingResult`, from the one
    classification (``engine.errors.classify``): retried by itself unless it
    needs the person, and then ``needs`` says for what."""
    return {"retryable": not failure.permanent, "needs": failure.needs if failure.permanent else None,
            "retry_after": failure.retry_after}
