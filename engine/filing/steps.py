"""Filing steps after the upload: sidecar, journal line, move into the mirror.

Each function takes a job from one recorded step to the next and returns
it updated in the :class:`~ohsync.engine.filing.jobs.JobStore`; each checks
the server or the mirror first, so running it again after a crash does
nothing twice (see :mod:`ohsync.engine.filing.filer`).  They see the mirror only
through :class:`~ohsync.engine.filing.api.MirrorAPI`; text files are pushed
by its read-merge-write (:meth:`~ohsync.engine.filing.api.MirrorAPI.push`).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from ..crashpoints import reach
from ..errors import LocalError
from ..events import SyncEvent
from ..ids import file_hashes, seafile_file_id
from ..localfs import atomic_write, stat_fingerprint, temp_beside
from ..paths import to_local, to_remote
from .api import MirrorAPI
from .jobs import FilingJob, JobStore
from .journal import append_line, has_line, journal_line, new_journal
from .summary import sidecar_text

__all__ = ["add_journal_line", "move_into_mirror", "record_base", "source_unchanged", "write_sidecar"]

log = logging.getLogger("ohsync.filing")


def source_unchanged(job: FilingJob) -> bool | None:
    """True/False: the dropped file is/is not as planned; None: it is gone."""
    try:
        st = os.stat(job.source)
    except FileNotFoundError:
        return None
    return st.st_size == job.size and st.st_mtime_ns == job.mtime_ns


# -- step 2: sidecar ---------------------------------------------------------------

def write_sidecar(mirror: MirrorAPI, jobs: JobStore, job: FilingJob) -> FilingJob:
    """Step 2: write ``<dest>.md`` into the mirror and push it.

    A sidecar with other content already on the server or in the mirror is
    kept (noted on the job).
    """
    rel = job.sidecar_rel
    content = sidecar_text(name=job.name, sha1=job.sha1, size=job.size, filed=job.when,
                           original_name=job.original_name, summary=job.summary)
    local = to_local(mirror.local_root, rel)
    remote = mirror.remote_file(rel)
    if remote is not None and remote.id != seafile_file_id(content):
        # a sidecar written by someone else (e.g. a summariser) is already there: keep it
        return jobs.update(job, step="sidecar", note=f"kept the existing sidecar {rel}")
    if not local.exists():
        atomic_write(local, content)  # new, or the same bytes the server already holds
    elif local.read_bytes() != content:
        # a sidecar written locally meanwhile (not ours): the sync pushes it
        return jobs.update(job, step="sidecar", note=f"kept the existing sidecar {rel}")
    reach("filing.sidecar_written")
    action = mirror.push(rel)
    reach("filing.sidecar_pushed")
    mirror.emit(SyncEvent("synced", rel, "up", action=action))
    return jobs.update(job, step="sidecar")


# -- step 3: journal line ----------------------------------------------------------

def add_journal_line(mirror: MirrorAPI, jobs: JobStore, job: FilingJob, *, language: str = "zh") -> FilingJob:
    """Step 3: append the job's line to ``journal/<yyyy-mm>.md`` (pulled
    first if only the server has it; created when new) unless it is there,
    then push by read-merge-write.

    The month and the time shown are the job's filing time in the offset it
    was recorded with; ``language`` picks the line's words (``"zh"``, ``"en"``).

    :raises LocalError: the journal is being edited locally; retried later.
    """
    when = job.when
    month = f"{when:%Y-%m}"
    rel = f"journal/{month}.md"
    line = journal_line(job.name, to_remote(mirror.remote_root, job.dest_rel), when, language)
    local = to_local(mirror.local_root, rel)
    if not local.exists():
        mirror.pull(rel)  # read first: never start a second month file
    if not local.exists():
        atomic_write(local, new_journal(month, when, line, language))
    else:
        with open(local, "rb") as fh:
            fp = stat_fingerprint(os.fstat(fh.fileno()))
            data = fh.read()
        if not has_line(data, line):
            try:  # after a backup, and only over the version read (a save meanwhile stays)
                mirror.write_over(rel, append_line(data, line), fp)
            except LocalError:
                raise LocalError(f"{rel} is being edited; the journal line is added later", path=rel) from None
    reach("filing.journal_written")
    action = mirror.push(rel)
    reach("filing.journal_pushed")
    mirror.emit(SyncEvent("synced", rel, "up", action=action))
    if not has_line(local.read_bytes(), line):
        # a merge dropped it: someone deleted this exact line on the server; respect that
        log.warning("the journal line for %s was removed by a merge; not adding it again", job.dest_rel)
    return jobs.update(job, step="journal")


# -- step 4: move into the mirror --------------------------------------------------

def move_into_mirror(mirror: MirrorAPI, jobs: JobStore, job: FilingJob) -> FilingJob:
    """Step 4: move the dropped file to its place in the mirror and record
    its base; a changed or vanished source, or another file at the target,
    is left alone and noted.  A document filed from outside the drop folder
    (``ohsync file PATH``) is copied, never moved: the person's original stays.
    """
    target = to_local(mirror.local_root, job.dest_rel)
    source = Path(job.source)
    keep_source = job.drop_rel is None
    note = ""
    if target.exists():
        same = local_sha1(target) == job.sha1
        if same and source_unchanged(job) and not keep_source:
            source.unlink()  # the move happened (copy done, unlink not): finish it
        elif not same:
            note = f"a different local file stands at {job.dest_rel}; {job.original_name} stays in the drop folder"
    else:
        unchanged = source_unchanged(job)
        if unchanged is None:
            note = f"{job.original_name} was removed from the drop folder; the mirror downloads the filed copy"
        elif not unchanged:
            note = f"{job.original_name} changed after it was uploaded and stays in the drop folder"
        else:
            move_file(source, target, keep_source=keep_source)
            reach("filing.moved")
    if target.exists() and local_sha1(target) == job.sha1:
        record_base(mirror, job)
    return jobs.update(job, step="moved", note=note)


def local_sha1(path: Path) -> str | None:
    """Hex sha1 of a local file, None when unreadable."""
    try:
        with open(path, "rb") as fh:
            return file_hashes(fh)[0]
    except OSError:
        return None


def move_file(source: Path, target: Path, *, keep_source: bool = False) -> None:
    """Rename ``source`` to ``target``; across file systems (or with
    ``keep_source``) copy to a temp file beside the target (fsync) and rename
    it, then remove the source unless it is kept."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if not keep_source:
        try:
            os.rename(source, target)
            return
        except OSError as exc:
            if exc.errno != 18:  # EXDEV
                raise
    with temp_beside(target) as (out, tmp), open(source, "rb") as src:
        while chunk := src.read(1024 * 1024):
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
        st = os.stat(source)
        os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
        out.close()
        os.replace(tmp, target)
    if not keep_source:
        source.unlink()


def record_base(mirror: MirrorAPI, job: FilingJob) -> None:
    """The mirror's copy is the server's: record the base (no upload, no
    download next pass) and the engine's view of the server."""
    mirror.adopt(job.dest_rel, sha1=job.sha1, remote_id=job.upload_id or job.file_id, size=job.size)
