"""Filing steps after the upload: sidecar, journal line, move into the mirror.

Each function takes a job from one recorded step to the next and returns
it updated in the :class:`~ohsync.engine.filing.jobs.JobStore`; each checks
the server or the mirror first, so running it again after a crash does
nothing twice (see :mod:`ohsync.engine.filing.filer`).  They see the mirror only
through :class:`~ohsync.engine.filing.api.MirrorAPI`; text files are pushed
by its read-merge-write (:meth:`~ohsync.engine.filing.api.MirrorAPI.push`).

Every read and write in the mirror goes through :mod:`ohsync.engine.nofollow`
(folders walked with ``O_NOFOLLOW``, non-blocking opens, regular files only):
a symbolic link anywhere below the mirror root, or a FIFO, stops the step
with :class:`~ohsync.engine.nofollow.OutsideMirrorError` naming it, which
needs the person (the job waits, the dropped file stays in the drop folder).
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from contextlib import suppress
from pathlib import Path

from ..crashpoints import reach
from ..errors import LocalError
from ..events import SyncEvent
from ..ids import file_hashes, seafile_file_id
from ..ignore import TEMP_PREFIX
from ..localfs import stat_fingerprint
from ..nofollow import FileChanged, entry_stat, open_regular, parent_folder, read_file, write_file
from ..paths import to_remote
from ..renames import rename_new
from .api import MirrorAPI
from .jobs import FilingJob, JobStore
from .journal import append_line, has_line, journal_line, new_journal
from .source import open_source
from .summary import sidecar_text

__all__ = ["add_journal_line", "move_into_mirror", "move_file", "record_base", "source_unchanged", "write_sidecar"]

log = logging.getLogger("ohsync.filing")


def source_unchanged(job: FilingJob) -> bool | None:
    """True/False: the dropped file is/is not as planned (a link or anything
    but a regular file standing there now is "not"); None: it is gone."""
    try:
        st = os.lstat(job.source)
    except FileNotFoundError:
        return None
    return stat.S_ISREG(st.st_mode) and st.st_size == job.size and st.st_mtime_ns == job.mtime_ns


# -- step 2: sidecar ---------------------------------------------------------------

def write_sidecar(mirror: MirrorAPI, jobs: JobStore, job: FilingJob) -> FilingJob:
    """Step 2: write ``<dest>.md`` into the mirror and push it.

    A sidecar with other content already on the server or in the mirror is
    kept (noted on the job).

    :raises OutsideMirrorError: the sidecar or a folder on its way is a
        symbolic link, or not a regular file.
    """
    rel = job.sidecar_rel
    content = sidecar_text(name=job.name, sha1=job.sha1, size=job.size, filed=job.when,
                           original_name=job.original_name, summary=job.summary)
    root = mirror.local_root
    remote = mirror.remote_file(rel)
    if remote is not None and remote.id != seafile_file_id(content):
        # a sidecar written by someone else (e.g. a summariser) is already there: keep it
        return jobs.update(job, step="sidecar", note=f"kept the existing sidecar {rel}")
    if entry_stat(root, rel) is None:
        with suppress(FileChanged):  # new, or the same bytes the server holds; a file written meanwhile is kept
            write_file(root, rel, content, expected=None)
    if read_file(root, rel)[0] != content:
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

    :raises OutsideMirrorError: the journal (or ``journal/``) is a symbolic
        link, or the journal is not a regular file (a FIFO); it is never
        opened through it.
    :raises LocalError: the journal is being edited locally; retried later.
    """
    when = job.when
    month = f"{when:%Y-%m}"
    rel = f"journal/{month}.md"
    root = mirror.local_root
    line = journal_line(job.name, to_remote(mirror.remote_root, job.dest_rel), when, language)
    if entry_stat(root, rel) is None:
        mirror.pull(rel)  # read first: never start a second month file
    if entry_stat(root, rel) is None:
        try:
            write_file(root, rel, new_journal(month, when, line, language), expected=None)
        except FileChanged:
            raise LocalError(f"{rel} was created meanwhile; the journal line is added later", path=rel) from None
    else:
        data, st = read_file(root, rel)
        if not has_line(data, line):
            try:  # after a backup, and only over the version read (a save meanwhile stays)
                mirror.write_over(rel, append_line(data, line), stat_fingerprint(st))
            except LocalError as exc:
                if exc.needs is not None:
                    raise  # not an edit: a link or a refusal the person must see as it is
                raise LocalError(f"{rel} is being edited; the journal line is added later", path=rel) from None
    reach("filing.journal_written")
    action = mirror.push(rel)
    reach("filing.journal_pushed")
    mirror.emit(SyncEvent("synced", rel, "up", action=action))
    if not has_line(read_file(root, rel)[0], line):
        # a merge dropped it: someone deleted this exact line on the server; respect that
        log.warning("the journal line for %s was removed by a merge; not adding it again", job.dest_rel)
    return jobs.update(job, step="journal")


# -- step 4: move into the mirror --------------------------------------------------

def move_into_mirror(mirror: MirrorAPI, jobs: JobStore, job: FilingJob, drop_dir: Path) -> FilingJob:
    """Step 4: move the dropped file to its place in the mirror and record
    its base; a changed or vanished source, or another file at the target,
    is left alone and noted.  A document filed from outside the drop folder
    (``ohsync file PATH``) is copied, never moved: the person's original stays.

    :param drop_dir: the drop folder (the source is reached below it without following links).
    :raises OutsideMirrorError: the target or a folder on its way is a
        symbolic link (nothing is moved).
    """
    root = mirror.local_root
    source = Path(job.source)
    keep_source = job.drop_rel is None
    note = ""
    if entry_stat(root, job.dest_rel) is not None:
        same = local_sha1(root, job.dest_rel) == job.sha1
        if same and source_unchanged(job) and not keep_source:
            assert job.drop_rel is not None  # kept otherwise
            _remove_source(drop_dir, job.drop_rel)  # the move happened (copy done, unlink not): finish it
        elif not same:
            note = f"a different local file stands at {job.dest_rel}; {job.original_name} stays in the drop folder"
    else:
        unchanged = source_unchanged(job)
        if unchanged is None:
            note = f"{job.original_name} was removed from the drop folder; the mirror downloads the filed copy"
        elif not unchanged:
            note = f"{job.original_name} changed after it was uploaded and stays in the drop folder"
        else:
            move_file(source, root, job.dest_rel, drop_dir=drop_dir, drop_rel=job.drop_rel)
            reach("filing.moved")
    if local_sha1(root, job.dest_rel) == job.sha1:
        record_base(mirror, job)
    return jobs.update(job, step="moved", note=note)


def local_sha1(root: Path, rel: str) -> str | None:
    """Hex sha1 of the mirror's regular file ``rel``, None when it is missing
    or unreadable (a link or a FIFO there counts as unreadable)."""
    try:
        with open_regular(root, rel) as fh:
            return file_hashes(fh)[0]
    except (OSError, LocalError):
        return None


def _remove_source(drop_dir: Path, drop_rel: str) -> None:
    """Remove the dropped file, relative to its folder in the drop folder (no link followed)."""
    with parent_folder(drop_dir, drop_rel) as (sfd, name):
        os.unlink(name, dir_fd=sfd)


def move_file(source: Path, root: Path, rel: str, *, drop_dir: Path, drop_rel: str | None) -> None:
    """Put the dropped ``source`` at the mirror's ``rel`` (below ``root``),
    never replacing a file there and never through a link: the target's
    folders are opened (made) without following links, a dropped file is
    renamed relative to its folder's descriptor; across file systems (or
    for a file from elsewhere) it is copied from a descriptor opened without
    following links to a temp file beside the target (fsync) that is
    renamed into place, then a dropped source is removed.

    :param drop_dir: the drop folder; ``drop_rel`` the source's path in it
        (None: a file from elsewhere, copied and kept).
    :raises OutsideMirrorError: a folder on the target's way is a symbolic link.
    :raises NotAFileError: the source is no longer a regular file.
    :raises FileExistsError: something stands at the target now.
    """
    with parent_folder(root, rel, create=True) as (dfd, name):
        if drop_rel is not None:
            with parent_folder(drop_dir, drop_rel) as (sfd, src_name):
                try:  # never over a file that appeared at the target meanwhile
                    rename_new(src_name, name, src_dir_fd=sfd, dir_fd=dfd)
                    return
                except OSError as exc:
                    if exc.errno != errno.EXDEV:
                        raise
        with open_source(source, drop_dir, drop_rel) as src:
            st = os.fstat(src.fileno())
            tmp = f"{TEMP_PREFIX}{os.urandom(6).hex()}"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0),
                         0o666, dir_fd=dfd)
            try:
                with os.fdopen(fd, "wb") as out:
                    while chunk := src.read(1024 * 1024):
                        out.write(chunk)
                    out.flush()
                    os.fsync(out.fileno())
                    os.utime(out.fileno(), ns=(st.st_atime_ns, st.st_mtime_ns))
                rename_new(tmp, name, dir_fd=dfd)
            except BaseException:
                with suppress(OSError):
                    os.unlink(tmp, dir_fd=dfd)
                raise
    if drop_rel is not None:
        _remove_source(drop_dir, drop_rel)


def record_base(mirror: MirrorAPI, job: FilingJob) -> None:
    """The mirror's copy is the server's: record the base (no upload, no
    download next pass) and the engine's view of the server."""
    mirror.adopt(job.dest_rel, sha1=job.sha1, remote_id=job.upload_id or job.file_id, size=job.size)
