"""``OHSYNC_CRASH_AT``: kill the daemon at a named engine crash point (tests).

The engine only announces its crash points
(:func:`ohsync.engine.crashpoints.reach`); this module is the process-side
decision.  ``OHSYNC_CRASH_AT=<name>`` (or ``<name>:<n>`` for the n-th time
the point is reached) makes the daemon send itself SIGKILL there, as a
power cut or an OOM kill would.  Without the variable no hook is installed.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Mapping

from ..engine.crashpoints import POINTS, CrashHook, set_hook
from ..engine.errors import OhsyncError

__all__ = ["ENV", "install_from_env", "killer"]

#: The environment variable naming the crash point.
ENV = "OHSYNC_CRASH_AT"


def killer(spec: str, kill: Callable[[], None] | None = None) -> CrashHook:
    """A hook that calls ``kill`` the n-th time the point of ``spec`` is reached.

    :param spec: ``<name>`` or ``<name>:<n>`` (n ≥ 1, default 1).
    :param kill: what dying means (default: SIGKILL to this process).
    :raises ValueError: the name is not one of the engine's points, or n is
        not a positive number.
    """
    target, _, nth = spec.partition(":")
    if target not in POINTS:
        raise ValueError(f"{ENV}={spec!r}: unknown crash point (known: {', '.join(POINTS)})")
    times = int(nth or 1)
    if times < 1:
        raise ValueError(f"{ENV}={spec!r}: the count must be 1 or more")
    die = kill or (lambda: os.kill(os.getpid(), signal.SIGKILL))
    seen = 0

    def hook(name: str) -> None:
        nonlocal seen
        if name != target:
            return
        seen += 1
        if seen >= times:
            die()

    return hook


def install_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """Install the killing hook when ``OHSYNC_CRASH_AT`` is set.

    :returns: True when a hook was installed.
    :raises OhsyncError: the variable names no known point (see :func:`killer`).
    """
    spec = (os.environ if environ is None else environ).get(ENV, "")
    if not spec:
        return False
    try:
        set_hook(killer(spec))
    except ValueError as exc:
        raise OhsyncError(str(exc), title="Bad crash point") from None
    return True
