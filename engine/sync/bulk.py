"""Cold mirror: files absent locally fetched by the cheapest path.

Two paths, chosen per batch by estimated time (:func:`choose_path`):

* **zip**: Seafile's folder zip task (``zip-task`` + one progress query +
  one ``/zip/`` stream, plus one upload link the first time to learn the
  file server's address: about 4 requests whatever the number of files),
  but it carries every file under the zipped top-level folders, wanted or
  not;
* **per file**: a ``reuse=1`` link and a download per file (2 requests
  each), :data:`DOWNLOADS_IN_FLIGHT` at a time on the engine's transfer
  pool (one after the other without one), each hashed while it streams into
  a temp file beside its target; moved into place here, on the caller's
  thread.

The rule: with ``r`` = :data:`REQUEST_SECONDS` per request and ``B`` =
:data:`LINK_BYTES_PER_SECOND`, zip costs ``4·r + zipped bytes / B`` and per
file ``⌈n / in flight⌉ · 2·r + wanted bytes / B``; the cheaper one is taken
(per file on a tie, and always for one file).  With the pool, the zip wins
from about 9 small files on; without it, from 3.  Every file taken from the
archive is verified against its listed id before it is adopted; anything
missing, different or failing falls back to the per-file path, and whatever
that does not finish goes to the ordinary pull.  A name or path this disk
refuses fails alone (``refused``): the rest of the archive is applied, and
that file is not fetched again by the other paths.
"""

from __future__ import annotations

import errno
import logging
import math
import os
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from pathlib import Path
from typing import Any

from ..context import MirrorContext
from ..errors import LocalError, RemoteError
from ..events import SyncEvent
from ..ids import ContentHasher, seafile_file_id, sha1_bytes
from ..local_replace import LocalChanged, install
from ..localfs import stat_fingerprint, temp_beside
from ..merge.choose import is_text
from ..models import RemoteEntry
from ..state import Base
from ..transfer import folder_vanished
from .new_files import NewFileBatch

__all__ = ["BULK_MAX_FILE", "DOWNLOADS_IN_FLIGHT", "LINK_BYTES_PER_SECOND", "QUIET_WATCH_FILES", "REQUEST_SECONDS",
           "bulk_pull", "choose_path"]

#: Larger files never go through the zip (they are fetched one by one, resumable).
BULK_MAX_FILE = 4 * 1024 * 1024
#: Downloads at most at once on the engine's transfer pool.
DOWNLOADS_IN_FLIGHT = 4
#: Assumed seconds per request (a round trip to a server across a network).
REQUEST_SECONDS = 0.05
#: Assumed link speed, bytes per second.
LINK_BYTES_PER_SECOND = 10 * 1024 * 1024
#: Requests of the zip path (zip task, progress query, stream, file-server address).
_ZIP_REQUESTS = 4
#: Files (and bytes) of the zip path written and synced to disk together, then recorded.
BATCH_FILES = 200
BATCH_BYTES = 32 * 1024 * 1024
#: Files of one archive from which the writing is announced to ``ctx.on_bulk_writes``
#: (the daemon then stops watching until they are in place, and scans instead).
QUIET_WATCH_FILES = 500
#: Write failures that every further file would meet too (a full or read-only disk).
_WHOLE_DISK = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS})

log = logging.getLogger(__name__)


def choose_path(wanted: int, wanted_bytes: int, zipped_bytes: int, in_flight: int) -> str:
    """``"zip"`` or ``"files"``: the cheaper path by the rule of the module docstring.

    :param wanted: files to fetch; ``wanted_bytes`` their total size.
    :param zipped_bytes: bytes the zip would carry (every file under the
        zipped top-level folders).
    :param in_flight: downloads at once on the per-file path (1 without a pool).
    """
    if wanted < 2:
        return "files"
    zip_time = _ZIP_REQUESTS * REQUEST_SECONDS + zipped_bytes / LINK_BYTES_PER_SECOND
    files_time = math.ceil(wanted / max(1, in_flight)) * 2 * REQUEST_SECONDS + wanted_bytes / LINK_BYTES_PER_SECOND
    return "zip" if zip_time < files_time else "files"


def bulk_pull(ctx: MirrorContext, entries: Iterable[RemoteEntry],
              should_stop: Callable[[], bool] | None = None,
              refused: dict[str, OSError] | None = None,
              on_written: Callable[[str, bytes], None] | None = None) -> set[str]:
    """Fetch files that are absent locally by the cheapest path (module docstring).

    :param entries: remote files (rel paths) with no local file and no base.
    :param should_stop: asked between two files written; True ends the
        writing there (the rest waits for the next pass).
    :param refused: filled with the rel paths whose name or path this disk
        refused when written (``ENAMETOOLONG``, ``EILSEQ``, ``EINVAL``) and
        the error of each: fetching them again cannot help, so they are
        neither retried here nor returned (the caller reports them).
    :param on_written: called ``(rel path, content)`` for each file the zip
        path wrote, right after its base and in the same transaction, so the
        caller can look at it without reading it back.
    :returns: the rel paths written and recorded as synced; the caller pulls
        the rest one by one.  Never raises for server trouble: a failing zip
        task means per-file downloads, a failing download the ordinary pull.
    """
    refused = refused if refused is not None else {}
    files = {e.path: e for e in entries if not e.is_dir}
    if not files:
        return set()
    in_flight = DOWNLOADS_IN_FLIGHT if ctx.executor is not None else 1
    done: set[str] = set()
    zippable = {p: e for p, e in files.items() if 0 < e.size <= BULK_MAX_FILE}
    if zippable and hasattr(ctx.client, "download_zip"):
        tops = sorted({p.split("/", 1)[0] for p in zippable})
        zipped = sum(e.size for p, e in ctx.snapshot.items() if not e.is_dir and p.split("/", 1)[0] in tops)
        wanted_bytes = sum(e.size for e in zippable.values())
        if choose_path(len(zippable), wanted_bytes, max(zipped, wanted_bytes), in_flight) == "zip":
            done = _zip_pull(ctx, zippable, tops, should_stop, refused, on_written)
    rest = [e for p, e in sorted(files.items()) if p not in done and p not in refused]
    if ctx.executor is not None and len(rest) > 1 and not (should_stop is not None and should_stop()):
        done |= _parallel_pull(ctx, rest, should_stop, refused)
    return done


def _name_refused(exc: OSError) -> bool:
    """True when ``exc`` says this disk cannot hold the name or path (no retry helps)."""
    return exc.errno in (errno.ENAMETOOLONG, errno.EILSEQ, errno.EINVAL)


def _zip_pull(ctx: MirrorContext, wanted: dict[str, RemoteEntry], tops: list[str],
              should_stop: Callable[[], bool] | None, refused: dict[str, OSError],
              on_written: Callable[[str, bytes], None] | None = None) -> set[str]:
    """The zip path: the rel paths written from one archive of ``tops``, in batches
    (:class:`~ohsync.engine.sync.new_files.NewFileBatch`: one round of fsyncs per batch,
    the bases of a batch recorded in one transaction once its files are durable)."""
    done: set[str] = set()
    try:
        # a file without a name (O_TMPFILE on Linux, unlinked at once elsewhere): a daemon
        # killed mid-download leaves no whole-library zip behind in the temp folder
        zip_file = tempfile.TemporaryFile(prefix=".ohsync-zip-", suffix=".zip")  # noqa: SIM115 - `with` below
    except OSError:
        return set()
    with zip_file as fh:
        try:
            ctx.client.download_zip(ctx.repo_id, ctx.remote_path(""), tops, fh)
        except (RemoteError, LocalError):  # e.g. a full temp disk: file by file instead
            return set()
        fh.seek(0)
        try:
            archive = zipfile.ZipFile(fh)
        except zipfile.BadZipFile:
            return set()
        names = {_member_name(info): info for info in archive.infolist() if not info.is_dir()}
        batch = NewFileBatch(ctx.executor)
        quiet = len(wanted) >= QUIET_WATCH_FILES and _bulk_writes(ctx, True)
        try:
            for rel, entry in wanted.items():
                if should_stop is not None and should_stop():
                    break
                info = names.get(rel)
                if info is None or info.file_size != entry.size:
                    continue
                try:
                    data = archive.read(info)
                except (zipfile.BadZipFile, OSError, ValueError):
                    continue
                if seafile_file_id(data) != entry.id:
                    continue  # not provably the listed version: fetch it one by one
                target = ctx.local_path(rel)
                try:
                    if target.exists() or folder_vanished(ctx, rel):
                        continue  # the person was faster: the next pass plans it again
                    batch.stage(rel, target, data, entry.mtime or None)
                except OSError as exc:
                    if exc.errno in _WHOLE_DISK:
                        break  # the disk is full: the rest go one by one, each failure on its own path
                    if _name_refused(exc):
                        refused[rel] = exc  # a name this disk refuses: fails alone, fetched no more
                    continue
                if len(batch) >= BATCH_FILES or batch.size >= BATCH_BYTES:
                    _record(ctx, batch, wanted, done, on_written, refused)
            _record(ctx, batch, wanted, done, on_written, refused)
        except BaseException:
            batch.discard()  # what is not in place yet is fetched again by the next pass
            raise
        finally:
            if quiet:
                _bulk_writes(ctx, False)
    return done


def _member_name(info: zipfile.ZipInfo) -> str:
    """The name of a zip member as the library has it.

    Seafile's names are UTF-8, but the C file server marks them so (the
    UTF-8 flag, general purpose bit 11) only where its host has the
    en_US.UTF-8 locale; :mod:`zipfile` reads an unflagged name as cp437, so
    no name outside ASCII would match the listing.  An unflagged name is
    read again as UTF-8 (cp437 gives back its bytes), kept as it is where
    it is not UTF-8.
    """
    if info.flag_bits & 0x800:
        return info.filename
    try:
        return info.filename.encode("cp437").decode("utf-8")
    except UnicodeError:
        return info.filename


def _bulk_writes(ctx: MirrorContext, started: bool) -> bool:
    """Tell ``ctx.on_bulk_writes`` that the writing of an archive starts (True)
    or is over (False); True when it was told.  Its failure is logged, never
    the pull's."""
    if ctx.on_bulk_writes is None:
        return False
    try:
        ctx.on_bulk_writes(started)
    except Exception:
        log.exception("the hook around the writing of an archive failed")
    return True


def _record(ctx: MirrorContext, batch: NewFileBatch, wanted: dict[str, RemoteEntry], done: set[str],
            on_written: Callable[[str, bytes], None] | None, refused: dict[str, OSError]) -> None:
    """Put the batch's files in place (durable), then record their bases in one transaction.
    A name the disk refused on the rename goes into ``refused``."""
    if not len(batch):
        return
    placed, failed = batch.commit(lambda item: not folder_vanished(ctx, item.rel))
    # any other failure is left for the ordinary pull, which reports it on its own path
    refused.update({rel: exc for rel, exc in failed.items() if _name_refused(exc)})
    with ctx.state.transaction():
        for item in placed:
            entry = wanted[item.rel]
            base = Base(item.rel, False, sha1_bytes(item.data), entry.id, *item.fp)
            ctx.state.set_base(base, item.data if is_text(item.data) else None)
            if on_written is not None:
                on_written(item.rel, item.data)
    for item in placed:
        done.add(item.rel)
    if placed:  # the progress once per batch: a status change per file cost more than the file
        ctx.emit(SyncEvent("transfer", placed[-1].rel, "down", done=len(done), total=len(wanted)))


def _parallel_pull(ctx: MirrorContext, entries: list[RemoteEntry],
                   should_stop: Callable[[], bool] | None, refused: dict[str, OSError]) -> set[str]:
    """The per-file path on the transfer pool: each file streams into a temp
    file beside its target (hashed as it comes); the temp files are moved
    into place here, in order, and recorded.  A file that fails is left for
    the ordinary pull (which reports it)."""
    done: set[str] = set()
    queue = list(reversed(entries))
    pending: dict[Future[Any], RemoteEntry] = {}
    try:
        while queue or pending:
            while queue and len(pending) < DOWNLOADS_IN_FLIGHT and not (should_stop is not None and should_stop()):
                entry = queue.pop()
                try:
                    if ctx.local_path(entry.path).exists() or folder_vanished(ctx, entry.path):
                        continue
                    if not _folder_ready(ctx, entry.path):
                        continue  # left to the ordinary pull, which knows a folder moved away
                except OSError as exc:
                    if _name_refused(exc):
                        refused[entry.path] = exc
                    continue  # else the ordinary pull reports it, on its own
                pending[ctx.executor.submit(_fetch, ctx, entry)] = entry
            if not pending:
                break
            ready, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in ready:
                entry = pending.pop(future)
                if future.exception() is None and _install(ctx, entry, *future.result(), refused=refused):
                    done.add(entry.path)
                    ctx.emit(SyncEvent("transfer", entry.path, "down", done=len(done), total=len(entries)))
    finally:
        for future in list(pending):  # stopped early: let them finish, then drop their temp files
            if future.exception() is None:
                _drop(future.result()[0])
    return done


def _folder_ready(ctx: MirrorContext, rel_path: str) -> bool:
    """Create the local folder of ``rel_path`` for a download on the pool,
    unless it held synced files and is gone (renamed or deleted while the
    pass runs, before the daemon could say so): writing there would create
    the folder again under its old name and split a renamed folder in two.

    :returns: True when the folder exists now.
    """
    parent = ctx.local_path(rel_path).parent
    if parent.is_dir():
        return True
    folder = rel_path.rsplit("/", 1)[0] if "/" in rel_path else ""
    while folder and not ctx.local_path(folder).is_dir():
        if ctx.state.has_bases_under(folder):
            return False
        folder = folder.rsplit("/", 1)[0] if "/" in folder else ""
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return True


def _fetch(ctx: MirrorContext, entry: RemoteEntry) -> tuple[Path, str, ContentHasher]:
    """On a pool thread: download ``entry`` into a temp file beside its target.

    :returns: ``(temp path, file id, hasher fed with the content)``.
    """
    hasher = ContentHasher(keep=ctx.options.readback_full_limit * 4, blocks=False)  # the link's oid names it
    with temp_beside(ctx.local_path(entry.path), make_parents=False) as (fh, tmp):
        file_id = ctx.client.download_resumable(ctx.repo_id, ctx.remote_path(entry.path), fh, hasher=hasher)
    return tmp, str(file_id or entry.id), hasher


def _install(ctx: MirrorContext, entry: RemoteEntry, tmp: Path, file_id: str, hasher: ContentHasher, *,
             refused: dict[str, OSError]) -> bool:
    """Move a fetched file into place unless the path was taken meanwhile; record it.
    A name this disk refuses goes into ``refused``."""
    target = ctx.local_path(entry.path)
    try:
        if target.exists() or folder_vanished(ctx, entry.path):
            _drop(tmp)  # the person was faster: the next pass plans it again
            return False
        if entry.mtime > 0:
            os.utime(tmp, (entry.mtime, entry.mtime))
        fp = stat_fingerprint(os.stat(tmp))  # the fetched file's own (see localfs.atomic_write)
        install(ctx, entry.path, tmp, None)  # never over a file made meanwhile
    except LocalChanged:
        return False
    except OSError as exc:
        if _name_refused(exc):
            refused[entry.path] = exc
        _drop(tmp)
        return False
    text = hasher.kept()
    ctx.state.set_base(Base(entry.path, False, hasher.sha1(), file_id, *fp),
                       text if text is not None and is_text(text) else None)
    ctx.snapshot[entry.path] = RemoteEntry(entry.path, False, file_id, hasher.size, entry.mtime)
    return True


def _drop(tmp: Path) -> None:
    tmp.unlink(missing_ok=True)
