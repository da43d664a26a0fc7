"""Replacing or removing a local file only if it still is the version the plan saw.

A re-check of the file's fingerprint followed by a rename leaves a window: a
save of the person's that lands between the two is replaced, and survives
only in the backup taken of it (or nowhere, when it landed after the
backup).  Here the check is made on the very file the rename took away:

* :func:`install` backs the live file up, then *exchanges* the new version
  (a temp file beside the target) with it in one rename (Linux
  ``renameat2(RENAME_EXCHANGE)``, macOS ``renameatx_np(RENAME_SWAP)``).  The
  file now under the temp name is exactly what was live at that instant; only
  when it is the version the plan saw is it removed.  Otherwise the two are
  exchanged back, so the save is live again, and the caller re-plans
  (:class:`LocalChanged`).  A file the plan saw absent is put in
  place by a rename that never replaces (``RENAME_NOREPLACE``, else a hard
  link).
* :func:`remove` renames the file away first and checks what it took; a
  version other than the plan's goes back.
* A save that lands in the instant between the two exchanges (made on top
  of our version) is archived in ``.conflict/`` with a notice, never dropped.
* A file a program is still saving in place (``EngineOptions.being_written``:
  open for writing) is neither replaced nor removed (:class:`BeingWritten`):
  the program's descriptor would go on writing into the file taken away,
  and the rest of the save would reach no one.  A later pass, once it is
  closed, plans the path again and merges as usual.

* From the exchange (or the rename away) until the check, the temp name may
  hold a person's only copy; a :func:`~.temp_marks.mark_ours` mark beside it (a
  link to our version) tells a later start so, and :func:`recover_taken`
  keeps such a version when the process was killed in between.

The two renames are :mod:`.renames`.  Where the filesystem can do no
exchange, the check is made just before the rename, as before (a window of
one stat).  Nothing here removes a version of the person's: an error in the
middle leaves the temp file for the caller, never removes it.
"""

from __future__ import annotations

import errno
import os
import stat
from contextlib import suppress
from datetime import datetime, timezone
from pathlib import Path

from .backups import backup_file
from .context import MirrorContext
from .crashpoints import reach
from .errors import LocalError
from .events import ConflictRecord, SyncEvent
from .ignore import TEMP_PREFIX
from .local_lookups import fsync_dir_best_effort
from .localfs import Fingerprint, TakenTemp, fill_temp, hash_file, new_temp, stat_fingerprint
from .merge.conflict_names import CONFLICT_DIR, conflict_copy_path
from .nofollow import OutsideMirrorError
from .paths import normalize_rel
from .renames import exchange, rename_new
from .special_dirs import working_dir
from .temp_marks import mark_ours, unmark

__all__ = ["LocalChanged", "BeingWritten", "refuse_if_written", "install", "write_over", "remove", "keep_crossed",
           "recover_taken"]


class LocalChanged(LocalError):
    """The local file changed after the plan was made: re-plan the path."""

    title = "File changed meanwhile"


class BeingWritten(LocalChanged):
    """A program is still saving the local file: it is left as it is, and the
    path waits for a pass after the program closed it."""

    title = "File being written"


def refuse_if_written(ctx: MirrorContext, rel_path: str) -> None:
    """Refuse to replace or remove the local file ``rel_path`` while a program
    is saving it (``ctx.options.being_written``).

    Ask only for an existing file about to be replaced or removed (never for
    the new files of a cold mirror: the daemon's check looks at every process).

    :raises BeingWritten: it is being written; leave it for a later pass.
    """
    check = ctx.options.being_written
    writer = check(ctx.local_path(rel_path)) if check is not None else False
    if writer:
        who = writer if isinstance(writer, str) else "another program"
        raise BeingWritten(f"{rel_path} is open for writing in {who}; it syncs once that program closes it",
                           path=rel_path)


def _fp(path: Path) -> Fingerprint | None:
    """The fingerprint of the regular file at ``path`` (not followed), or None."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    return stat_fingerprint(st) if stat.S_ISREG(st.st_mode) else None


def _backup(ctx: MirrorContext, rel_path: str, source: Path) -> None:
    """Back up the regular file at ``source`` (``rel_path``'s version).

    :raises LocalChanged: a link or a special file stands there now (never followed).
    :raises BackupError: the backup could not be written (the file is to stay as it is).
    """
    if ctx.options.backup_dir is not None and _fp(source) is not None:
        try:
            backup_file(ctx.local_root, rel_path, ctx.options.backup_dir, ctx.options.library_name, source=source)
        except OutsideMirrorError as exc:  # swapped in since the stat above
            raise LocalChanged(f"{rel_path} changed while syncing ({exc}); re-planning", path=rel_path) from exc


def install(ctx: MirrorContext, rel_path: str, tmp: Path, expected: Fingerprint | None, *,
            backup: bool = True) -> None:
    """Put the temp file ``tmp`` (closed, beside the target) at ``rel_path``
    if the local file is still the one the plan saw at the instant it is
    replaced.

    :param expected: the fingerprint the plan saw (None: no file there).
    :param backup: copy the version about to be replaced to the backups
        first (taken before the exchange, so a kill at any point leaves it).
    :raises BeingWritten: a program is saving the file: it stays, ``tmp``
        is removed; the path waits for a later pass.
    :raises BackupError: its backup could not be written: it stays, ``tmp`` is removed.
    :raises LocalChanged: the file changed (or appeared, or went) meanwhile:
        it is as the person left it, and ``tmp`` is removed; re-plan.
    :raises OSError: a rename failed; ``tmp`` is left for the caller (it may
        hold the version that was live: it is never removed then).
    """
    target = ctx.local_path(rel_path)
    if _fp(target) != expected and (expected is not None or os.path.lexists(target)):
        os.unlink(tmp)  # changed already (the exchange below catches a save in the last instant)
        raise LocalChanged(f"{rel_path} changed while syncing; re-planning", path=rel_path)
    if expected is None:
        reach("replace.ready")
        try:
            rename_new(tmp, target)
        except FileExistsError:
            os.unlink(tmp)
            raise LocalChanged(f"{rel_path} was created here meanwhile; re-planning", path=rel_path) from None
        return
    try:
        refuse_if_written(ctx, rel_path)
        if backup:
            _backup(ctx, rel_path, target)
    except (OSError, LocalError):  # a program writing it, a link swapped in, the backup not written
        os.unlink(tmp)  # nothing was exchanged yet: the temp file is only ours
        raise
    reach("replace.ready")
    ours = _fp(tmp)
    mark_ours(tmp)   # from the exchange on, ``tmp`` may hold a person's only copy: kept after a kill
    try:
        swapped = exchange(tmp, target)
    except FileNotFoundError:
        if os.path.lexists(target):
            raise
        os.unlink(tmp)
        unmark(tmp)
        raise LocalChanged(f"{rel_path} was removed here meanwhile; re-planning", path=rel_path) from None
    if not swapped:
        # a filesystem that cannot exchange names: check, then rename (the window of one check)
        if _fp(target) != expected:
            os.unlink(tmp)
            unmark(tmp)
            raise LocalChanged(f"{rel_path} changed while syncing; re-planning", path=rel_path)
        os.replace(tmp, target)
        unmark(tmp)
        return
    reach("replace.exchanged")
    if _fp(tmp) == expected:   # ``tmp`` holds exactly what was live at the exchange: the plan's version
        os.unlink(tmp)
        unmark(tmp)
        return
    _swap_back(ctx, rel_path, tmp, ours)
    unmark(tmp)   # only after the version taken is live again or archived
    raise LocalChanged(f"{rel_path} was saved while syncing; re-planning", path=rel_path)


def _swap_back(ctx: MirrorContext, rel_path: str, tmp: Path, ours: Fingerprint | None) -> None:
    """The version at ``tmp`` (the person's, taken by the exchange) goes live
    again; ours is dropped."""
    target = ctx.local_path(rel_path)
    try:
        back = exchange(tmp, target)
    except FileNotFoundError:   # the target went meanwhile: the person's version takes the name again
        try:
            rename_new(tmp, target)
        except FileExistsError:
            keep_crossed(ctx, rel_path, tmp)
        return
    if not back:   # cannot happen after an exchange that worked on this filesystem
        raise OSError(errno.ENOTSUP, "cannot exchange the names back", os.fspath(tmp))
    if _fp(tmp) == ours:
        os.unlink(tmp)
        return
    keep_crossed(ctx, rel_path, tmp)  # saved again, over ours, in the instant it was live


def keep_crossed(ctx: MirrorContext, rel_path: str, path: Path) -> None:
    """Archive a local version of ``rel_path`` that a second save left at
    ``path`` in ``.conflict/`` (a new local file: the next pass uploads it)
    and record the conflict, with a notice."""
    _archive(ctx, rel_path, path, "it was saved twice while ohsync replaced it; the first save is live, the second "
                                  "is archived",
             "{rel} was saved twice while it was synced; the second save was archived as {copy}")


def _archive(ctx: MirrorContext, rel_path: str, path: Path, reason: str, notice: str) -> str:
    """Move the local version at ``path`` to a free conflict copy of
    ``rel_path``, record the conflict with ``reason`` and emit ``notice``
    (``{rel}`` and ``{copy}`` filled in).

    :returns: the conflict copy's rel path.
    """
    now = datetime.now(timezone.utc)
    copy_rel = conflict_copy_path(rel_path, "local", lambda p: os.path.lexists(ctx.local_path(p)) or p in ctx.snapshot,
                                  now, working_dir(ctx, CONFLICT_DIR))
    dest = ctx.local_path(copy_rel)
    dest.parent.mkdir(parents=True, exist_ok=True)
    rename_new(path, dest)
    unmark(path)   # archived: no longer a temp file to settle
    ctx.state.add_conflict(ConflictRecord(rel_path, copy_rel, now.isoformat(timespec="seconds"), reason))
    ctx.emit(SyncEvent("conflict", rel_path, action=copy_rel, message=notice.format(rel=rel_path, copy=copy_rel)))
    return copy_rel


def recover_taken(ctx: MirrorContext, taken: TakenTemp, known: set[str]) -> str | None:
    """Settle a version a killed process took away from a live name
    (:func:`~.localfs.clean_temp_files`): it is removed when its content is
    one of ``known`` (the sha1 of a synced version), else archived in
    ``.conflict/`` as a local conflict copy of the file it was taken from
    (the next pass uploads it), with a notice.  Its mark goes last, so a
    kill in the middle leaves it for the next start.

    :param known: hex sha1s of versions the server has (the bases).
    :returns: the conflict copy's rel path, or None (removed, or left as it
        is because it could not be read now: the next start looks again).
    """
    try:
        sha1 = hash_file(taken.path, root=ctx.local_root)[0]
    except (OSError, LocalError):
        return None
    copy_rel = None
    if sha1 in known:
        os.unlink(taken.path)
    else:
        rel_path = _live_name(ctx, taken)
        copy_rel = _archive(ctx, rel_path, taken.path,
                            "it was saved while ohsync replaced it and ohsync was stopped in between; the save is "
                            "archived",
                            "{rel} was saved while it was synced and ohsync was stopped in between; that save was "
                            "kept as {copy}")
    with suppress(FileNotFoundError):
        os.unlink(taken.mark)
    return copy_rel


def _live_name(ctx: MirrorContext, taken: TakenTemp) -> str:
    """The rel path the version at ``taken`` was taken from: the file beside
    it that is our version (its mark's inode), else a made-up name there."""
    folder = taken.path.parent
    rel_folder = folder.relative_to(ctx.local_root).as_posix() if folder != ctx.local_root else ""
    name = "recovered file"
    if taken.ours_inode is not None:
        with suppress(OSError), os.scandir(folder) as entries:
            for entry in entries:
                if entry.inode() == taken.ours_inode and not entry.name.startswith(TEMP_PREFIX):
                    name = entry.name
                    break
    return normalize_rel(f"{rel_folder}/{name}" if rel_folder else name)


def write_over(ctx: MirrorContext, rel_path: str, data: bytes, expected: Fingerprint | None,
               mtime: float | None = None, *, backup: bool = True) -> Fingerprint:
    """Write ``data`` to ``rel_path`` (:func:`~ohsync.engine.localfs.fill_temp`, :func:`install`).

    :param expected: the fingerprint the plan saw (None: no file there).
    :param mtime: the written file's mtime (seconds), or now.
    :returns: the written file's fingerprint (its own, taken before the rename).
    :raises BeingWritten: a program is saving the file (it is left as it is).
    :raises LocalChanged: the file changed meanwhile (it is left as it is).
    :raises BackupError: its backup could not be written (it is left as it is).
    :raises OSError: writing or renaming failed.
    """
    target = ctx.local_path(rel_path)
    tmp, fp = fill_temp(target, data, mtime)
    install(ctx, rel_path, tmp, expected, backup=backup)  # an error there never removes tmp
    fsync_dir_best_effort(target.parent)
    return fp


def remove(ctx: MirrorContext, rel_path: str, expected: Fingerprint, *, backup: bool = True) -> None:
    """Remove the local file at ``rel_path`` if it is still the one the plan saw.

    After the backup, it is renamed away to a temp name (atomic): what was
    taken is then checked and removed, or renamed back when it is another
    version (a save that landed meanwhile).

    :raises FileNotFoundError: no file there.
    :raises BeingWritten: a program is saving the file (it stays).
    :raises LocalChanged: the file changed meanwhile (it stays).
    :raises BackupError: its backup could not be written (it stays).
    :raises OSError: other failures (a version taken away stays under its
        temp name, never removed).
    """
    target = ctx.local_path(rel_path)
    now = _fp(target)
    if now != expected:
        if now is None and not os.path.lexists(target):
            raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), os.fspath(target))
        raise LocalChanged(f"{rel_path} changed locally; keeping it", path=rel_path)
    refuse_if_written(ctx, rel_path)
    if backup:
        _backup(ctx, rel_path, target)
    reach("delete.local_backed_up")
    hold = new_temp(target.parent)
    mark_ours(hold)   # from the rename on, ``hold`` may hold a person's only copy: kept after a kill
    try:
        os.rename(target, hold)
    except OSError:
        os.unlink(hold)
        unmark(hold)
        raise
    if _fp(hold) == expected:
        os.unlink(hold)
        unmark(hold)
        return
    try:
        rename_new(hold, target)
    except FileExistsError:   # a new file took the name meanwhile: keep both
        keep_crossed(ctx, rel_path, hold)
    unmark(hold)
    raise LocalChanged(f"{rel_path} changed locally; keeping it", path=rel_path)
