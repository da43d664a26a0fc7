"""Named crash points: the engine names the exact step it reached.

The engine calls :func:`reach` at each point of :data:`POINTS`.  What
happens there is not the engine's business: by default nothing (one
``None`` check); the process that runs the engine may install a hook with
:func:`set_hook`.  The daemon's ``ohsync run`` installs
:func:`ohsync.daemon.crash_at.install_from_env`'s hook, which kills the
process when ``OHSYNC_CRASH_AT=<name>[:<n>]`` names the point (as a power
cut or an OOM kill would), so crash tests stop a real daemon mid-step.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["POINTS", "CrashHook", "reach", "set_hook"]

#: Every crash point, in the order a sync meets them.
POINTS = (
    "remote.snapshot_written",  # the listing's changed rows are written, its head not yet (one transaction)
    "pull.downloaded",        # the new version is in a temp file beside the target
    "pull.replaced",          # the target was replaced, base not yet recorded
    "push.uploaded",          # the server has our version, not yet read back
    "push.verified",          # read back, base not yet recorded
    "batch.uploaded",         # a batch of new files is on the server, not yet read back
    "batch.verified",         # a folder of new files was read back, bases not yet recorded
    "conflict.archived_remote",  # the conflict copy is on the server, not yet local
    "conflict.archived",      # the conflict copy is on both sides, ours not yet uploaded
    "move.remote_done",       # a local move was carried out on the server, base not moved
    "move.local_done",        # a remote move was carried out locally, base not moved
    "delete.remote_trashed",  # the file is in the server's trash, base not forgotten
    "delete.local_backed_up",  # the backup is written, the local file not yet removed
    # drop-folder filing (engine/filing/filer.py, engine/filing/steps.py), in pipeline order:
    "filing.planned",         # the job is recorded, nothing sent yet
    "filing.chunk_sent",      # a non-final chunk of a chunked upload is on the server
    "filing.uploaded",        # the server holds the whole file, the job does not know yet
    "filing.verified",        # read back, step `uploaded` not recorded
    "filing.sidecar_written",  # the sidecar is in the mirror, not pushed
    "filing.sidecar_pushed",  # the sidecar is on the server, step not recorded
    "filing.journal_written",  # the line is in the local journal, not pushed
    "filing.journal_pushed",  # the journal with the line is on the server, step not recorded
    "filing.moved",           # the dropped file is in the mirror, base and step not recorded
    "filing.finishing",       # step `moved` recorded, the job not yet `done`
)

#: ``hook(name)``: called at each crash point the engine reaches.
CrashHook = Callable[[str], None]

_hook: CrashHook | None = None


def set_hook(hook: CrashHook | None) -> CrashHook | None:
    """Install ``hook`` (None removes it) for every later :func:`reach`.

    :returns: the hook installed before (to restore it).
    """
    global _hook
    previous, _hook = _hook, hook
    return previous


def reach(name: str) -> None:
    """Mark that the engine reached crash point ``name`` (one of :data:`POINTS`)."""
    hook = _hook
    if hook is not None:
        hook(name)
