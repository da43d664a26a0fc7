"""The filing database and the values it holds (see :mod:`ohsync.engine.filing.filer`).

One SQLite file (``state_dir/filing.db``), one row per job; a job's
``step`` is the last of :data:`STEPS` it completed, so a restarted daemon
resumes each job where it stopped.  :class:`FilingResult` is what filing a
document came to, as the daemon, the CLI and the tray see it.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

__all__ = ["STEPS", "Abandon", "FilingJob", "FilingResult", "JobStore"]

#: Job steps in order; a job's ``step`` is the last one completed.
STEPS = ("planned", "uploaded", "sidecar", "journal", "moved", "done")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    source TEXT NOT NULL,
    drop_rel TEXT,
    original_name TEXT NOT NULL,
    sha1 TEXT NOT NULL,
    file_id TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    dest_rel TEXT NOT NULL,
    filed_at TEXT NOT NULL,
    summary TEXT NOT NULL DEFAULT '',
    step TEXT NOT NULL,
    upload_id TEXT,
    upload_started INTEGER NOT NULL DEFAULT 0,
    note TEXT NOT NULL DEFAULT '',
    created REAL NOT NULL,
    updated REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_step ON jobs(step);
CREATE INDEX IF NOT EXISTS jobs_source ON jobs(source);
"""





@dataclass(frozen=True)
class FilingResult:
    """What filing one dropped file came to.

    :ivar status: ``"filed"`` (uploaded, verified, sidecar + journal written,
        moved into the mirror), ``"duplicate"`` (same content already under
        ``/Files/``; nothing uploaded, the file stays), ``"over_quota"`` (not
        enough space on the server; the file stays), ``"failed"`` (the
        message says why; a started job is resumed later), ``"not_ready"``
        (a partial download, still being written, or empty: try later).
    :ivar source: the dropped file's local path (as given).
    :ivar dest_rel: mirror-relative path of the filed document
        (``Files/_inbox/x.pdf``); for ``duplicate`` where the content
        already is; else None.
    :ivar sidecar_rel: mirror-relative path of the sidecar, when written.
    :ivar message: one sentence for a person (notice, status, CLI).
    :ivar remote_path: library-absolute path (``/Files/_inbox/x.pdf``) of
        ``dest_rel``, or None.
    :ivar retryable: True when filing the same file later may succeed
        without anyone doing anything (network trouble, busy file).
    :ivar job_id: the job in the filing database (None when no job was made).
    :ivar needs: for a failure only the person can fix (``engine.errors.Failure.needs``:
        ``login``, ``space``, ``permission``…); None otherwise.
    :ivar retry_after: seconds the server asked to wait before a retry (a 429), or None.
    """

    status: str
    source: str
    dest_rel: str | None = None
    sidecar_rel: str | None = None
    message: str = ""
    remote_path: str | None = None
    retryable: bool = False
    job_id: int | None = None
    needs: str | None = None
    retry_after: float | None = None

    @property
    def ok(self) -> bool:
        """True for ``filed``."""
        return self.status == "filed"

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (socket ``file`` result items, ``filed`` events)."""
        return {"status": self.status, "source": self.source, "dest": self.remote_path,
                "dest_rel": self.dest_rel, "sidecar": self.sidecar_rel, "message": self.message,
                "retryable": self.retryable}



@dataclass
class FilingJob:
    """One row of the filing database: a dropped file on its way to ``/Files/``.

    :ivar source: the dropped file's absolute local path.
    :ivar drop_rel: its path relative to the drop folder (None: outside it).
    :ivar sha1/file_id/size/mtime_ns: what was planned (hex sha1, Seafile id,
        bytes, ns): the source must still match before the upload.
    :ivar dest_rel: mirror-relative destination (``Files/_inbox/x.pdf``).
    :ivar filed_at: ISO time with offset (+08:00).
    :ivar step: the last completed step (:data:`STEPS`).
    :ivar upload_id: the id the upload answered (None before).
    :ivar upload_started: a partial upload may be pending on the server.
    :ivar note: the last problem, or what was kept (shown in status).
    """

    id: int
    source: str
    drop_rel: str | None
    original_name: str
    sha1: str
    file_id: str
    size: int
    mtime_ns: int
    dest_rel: str
    filed_at: str
    summary: str
    step: str
    upload_id: str | None = None
    upload_started: bool = False
    note: str = ""

    @property
    def name(self) -> str:
        return self.dest_rel.rsplit("/", 1)[-1]

    @property
    def sidecar_rel(self) -> str:
        return self.dest_rel + ".md"

    @property
    def when(self) -> datetime:
        return datetime.fromisoformat(self.filed_at)



class JobStore:
    """The filing database: one row per job (see the module docstring).

    :param db_path: the SQLite file (created, WAL, ``synchronous=FULL``).
    """


    _COLS = ("id", "source", "drop_rel", "original_name", "sha1", "file_id", "size", "mtime_ns",
             "dest_rel", "filed_at", "summary", "step", "upload_id", "upload_started", "note")

    def __init__(self, db_path: Path) -> None:
        db_path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(db_path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)

    def close(self) -> None:
        self._db.close()

    def _job(self, row: tuple) -> FilingJob:  # type: ignore[type-arg]
        values = dict(zip(self._COLS, row, strict=True))
        values["upload_started"] = bool(values["upload_started"])
        return FilingJob(**values)

    def _select(self, where: str, args: tuple = ()) -> list[FilingJob]:  # type: ignore[type-arg]
        rows = self._db.execute(f"SELECT {','.join(self._COLS)} FROM jobs WHERE {where} ORDER BY id", args)
        return [self._job(r) for r in rows]

    def insert(self, job: FilingJob) -> FilingJob:
        now = time.time()
        cols = [c for c in self._COLS if c != "id"]
        values = [getattr(job, c) for c in cols]
        cur = self._db.execute(
            f"INSERT INTO jobs({','.join(cols)},created,updated) VALUES ({','.join('?' * len(cols))},?,?)",
            (*[int(v) if isinstance(v, bool) else v for v in values], now, now))
        return replace(job, id=int(cur.lastrowid or 0))

    def update(self, job: FilingJob, **fields: Any) -> FilingJob:
        job = replace(job, **fields)
        sets = ",".join(f"{k}=?" for k in fields)
        values = [int(v) if isinstance(v, bool) else v for v in fields.values()]
        self._db.execute(f"UPDATE jobs SET {sets},updated=? WHERE id=?", (*values, time.time(), job.id))
        return job

    def delete(self, job: FilingJob) -> None:
        self._db.execute("DELETE FROM jobs WHERE id=?", (job.id,))

    def get(self, job_id: int) -> FilingJob | None:
        jobs = self._select("id=?", (job_id,))
        return jobs[0] if jobs else None

    def unfinished(self) -> list[FilingJob]:
        return self._select("step<>'done'")

    def unfinished_for_source(self, source: str) -> FilingJob | None:
        jobs = self._select("step<>'done' AND source=?", (source,))
        return jobs[0] if jobs else None

    def unfinished_with_sha1(self, sha1: str) -> FilingJob | None:
        jobs = self._select("step<>'done' AND sha1=?", (sha1,))
        return jobs[0] if jobs else None

    def dest_taken(self, dest_rel: str) -> bool:
        row = self._db.execute("SELECT 1 FROM jobs WHERE step<>'done' AND (dest_rel=? OR dest_rel||'.md'=?)",
                               (dest_rel, dest_rel)).fetchone()
        return row is not None

    def all(self) -> list[FilingJob]:
        return self._select("1=1")


class Abandon(Exception):
    """The job cannot go on as planned (source changed or gone before upload)."""

