"""Planning a filing job: from a dropped file to a recorded ``planned`` job.

:class:`Planner` refuses what must not be filed yet (partial downloads,
files being written, empty files, files inside the mirror), reports content
already under ``/Files/`` as a duplicate, checks the free space, applies the
rules and picks a destination name that is free everywhere (server, mirror,
snapshot, jobs in flight) together with its sidecar name.
"""

from __future__ import annotations

import logging
import os
import unicodedata
from collections.abc import Callable
from datetime import datetime, tzinfo
from pathlib import Path

from ..errors import QuotaError
from ..ids import file_hashes
from ..localfs import stat_fingerprint
from ..names import path_problem, upload_name_problem
from ..nofollow import symlink_on_the_way
from ..paths import from_remote, normalize_rel, to_local, to_remote
from .api import DOWNLOADING, MirrorAPI, ReadyCheck
from .jobs import FilingJob, FilingResult, JobStore
from .journal import BEIJING
from .rules import FilingRule, choose_rule, render_dest, unique_name
from .source import NotAFileError, open_source
from .summary import SUMMARY_READ, human_size, summarize

__all__ = ["Planner", "QUOTA_MARGIN"]

log = logging.getLogger("ohsync.filing")

#: Bytes kept free beyond the file itself (sidecar, journal line, slack).
QUOTA_MARGIN = 64 * 1024


class Planner:
    """Plans filing jobs for one mirror (see the module docstring).

    :param mirror: the mirror, as filing sees it.
    :param jobs: the filing database (new jobs are inserted there).
    :param drop_dir: the drop folder (``dir:`` rules match its subfolders).
    :param rules: parsed rules, first match wins.
    :param default_dest: the destination when no rule matches.
    :param now: the current time (aware datetime).
    :param ready: tells whether a file is finished (the daemon's stability gate).
    :param tz: the offset filing times are written in.
    :param language: ``"zh"`` or ``"en"``: the language of the sidecar summary.
    """

    def __init__(self, mirror: MirrorAPI, jobs: JobStore, drop_dir: Path, rules: list[FilingRule],
                 default_dest: str, now: Callable[[], datetime], ready: ReadyCheck, *,
                 tz: tzinfo = BEIJING, language: str = "zh") -> None:
        self.mirror, self.jobs, self.drop_dir = mirror, jobs, drop_dir
        self.rules, self.default_dest, self.now = rules, default_dest, now
        self.ready = ready
        self.tz, self.language = tz, language

    def _drop_rel(self, source: Path) -> str | None:
        try:
            rel = source.relative_to(self.drop_dir)
        except ValueError:
            return None
        return normalize_rel(rel.as_posix()) or None

    def plan(self, source: Path) -> FilingJob | FilingResult:
        """Check ``source``, pick its destination and record a ``planned`` job.

        :returns: the new job, or the result saying why there is none
            (``failed``, ``not_ready``, ``duplicate``).
        :raises QuotaError: not enough free space on the server.
        :raises RemoteError: the server could not be asked.
        """
        src = str(source)
        name = unicodedata.normalize("NFC", source.name)
        try:
            source.relative_to(self.mirror.local_root)
            return FilingResult("failed", src, message=f"{name} is already inside the mirror folder; "
                                "only files from outside it can be filed.")
        except ValueError:
            pass
        try:
            st = source.lstat()
        except FileNotFoundError:
            return FilingResult("failed", src, message=f"{name} does not exist (any more).")
        if source.is_symlink() or not source.is_file():
            return FilingResult("failed", src, message=f"{name} is not a regular file (a symbolic link, a FIFO or "
                                "a device); not filed. Only documents themselves are filed: copy the document "
                                "itself into the drop folder and remove this entry.")
        rel = self._drop_rel(source)
        link = symlink_on_the_way(self.drop_dir, rel) if rel is not None else None
        if link is not None:
            # a folder dropped with a link in it (cp -a, an unpacked archive): what lies behind
            # the link is elsewhere on this computer, never filed (nor moved) from there
            return FilingResult("failed", src, message=f"{name} is reached through {link}, a symbolic link in "
                                "the drop folder; only files inside the drop folder itself are filed. Copy the "
                                "file into the drop folder to file it.")
        busy = self.ready(source)
        if busy == DOWNLOADING:
            return FilingResult("not_ready", src, message=f"{name} is still downloading; it is filed "
                                "once the download finished.", retryable=True)
        if st.st_size == 0:
            return FilingResult("failed", src, message=f"{name} is empty; empty files are not filed.")
        if busy is not None:
            return FilingResult("not_ready", src, message=f"{name} is still being written; it is filed once "
                                "it is closed.", retryable=True)
        try:  # one descriptor for the hash and the summary: a link swapped in later is never read
            fh = open_source(source, self.drop_dir, rel)
        except NotAFileError as exc:
            return FilingResult("failed", src, message=exc.message + ".")
        except FileNotFoundError:
            return FilingResult("failed", src, message=f"{name} does not exist (any more).")
        with fh:
            before = stat_fingerprint(os.fstat(fh.fileno()))
            sha1, file_id, size = file_hashes(fh)
            after = stat_fingerprint(os.fstat(fh.fileno()))
            fh.seek(0)
            head = fh.read(SUMMARY_READ)
        if before != after:
            return FilingResult("not_ready", src, message=f"{name} changed while it was read; trying again later.",
                                retryable=True)
        found = self._find_duplicate(sha1, file_id)
        if found is not None:
            where = to_remote(self.mirror.remote_root, found)
            return FilingResult("duplicate", src, dest_rel=found, remote_path=where,
                                message=f"{name} is already filed at {where}; it was not uploaded again "
                                "and stays in the drop folder.")
        when = self.now().astimezone(self.tz).replace(microsecond=0)
        drop_rel = self._drop_rel(source)
        rule = choose_rule(self.rules, name, drop_rel)
        folder, target = render_dest(rule.dest if rule else self.default_dest, name=name, when=when,
                                     drop_rel=drop_rel)
        folder_rel = from_remote(self.mirror.remote_root, folder)
        if folder_rel is None:
            return FilingResult("failed", src, message=f"{name}: the destination {folder} is outside the "
                                f"mirrored folder {self.mirror.remote_root}; check [filing] rules.")
        self.check_quota(size, name)
        dest_rel = self.free_dest(folder_rel, target)
        problem = path_problem(dest_rel + ".md") or upload_name_problem(dest_rel.rsplit("/", 1)[-1])
        if problem:
            return FilingResult("failed", src, message=f"{name} cannot be filed as {dest_rel}: {problem}. "
                                "Rename it in the drop folder.")
        link = symlink_on_the_way(self.mirror.local_root, dest_rel)
        if link is not None:
            # filing writes the document and its sidecar there: never through a link out of the mirror
            return FilingResult("failed", src, message=f"{name} is not filed: {link} in the mirror folder is a "
                                "symbolic link, and ohsync does not write through links. Replace the link with a "
                                f"real folder (or change the [filing] rules); {name} stays in the drop folder.",
                                needs="name")
        job = self.jobs.insert(FilingJob(
            id=0, source=src, drop_rel=drop_rel, original_name=name, sha1=sha1, file_id=file_id, size=size,
            mtime_ns=before[1], dest_rel=dest_rel, filed_at=when.isoformat(timespec="seconds"),
            summary=summarize(head, dest_rel.rsplit("/", 1)[-1], size, self.language), step="planned"))
        log.info("filing %s → %s (rule %s)", src, dest_rel, rule.source if rule else "default")
        return job

    def _files_prefix(self) -> str | None:
        """Rel path of the library's ``/Files`` in this mirror ("" when the
        mirror *is* ``/Files``; None when the mirror does not contain it)."""
        return from_remote(self.mirror.remote_root, "/Files")

    def _find_duplicate(self, sha1: str, file_id: str) -> str | None:
        """Rel path where this content already is under ``/Files/``, or None."""
        prefix = self._files_prefix()
        if prefix is None:
            return None
        found = self.mirror.find_copy(sha1, file_id, prefix)
        if found is not None:
            return found
        job = self.jobs.unfinished_with_sha1(sha1)
        return job.dest_rel if job is not None else None

    def check_quota(self, size: int, name: str) -> None:
        """:raises QuotaError: the account has less than ``size`` + 64 KiB free."""
        free = self.mirror.free_space()
        if free is not None and free < size + QUOTA_MARGIN:
            raise QuotaError(f"the server has {human_size(free)} free and {name} needs "
                             f"{human_size(size)}. Free some space (or ask for more quota), then file it again.",
                             title="Out of quota")

    def free_dest(self, folder_rel: str, wanted: str, *, avoid: str | None = None) -> str:
        """A rel path in ``folder_rel`` whose name and sidecar name are free
        on the server, in the mirror, in the engine's view and among jobs."""
        remote_names = set(self.mirror.list_folder(folder_rel))

        def one_taken(candidate_rel: str) -> bool:
            name = candidate_rel.rsplit("/", 1)[-1]
            return (name in remote_names or self.mirror.known(candidate_rel)
                    or candidate_rel == avoid
                    or os.path.lexists(to_local(self.mirror.local_root, candidate_rel))
                    or self.jobs.dest_taken(candidate_rel))

        def taken(candidate: str) -> bool:
            rel = f"{folder_rel}/{candidate}" if folder_rel else candidate
            return one_taken(rel) or one_taken(rel + ".md")

        name = unique_name(wanted, taken, reserve=3)
        return f"{folder_rel}/{name}" if folder_rel else name
