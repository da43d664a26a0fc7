"""Run the daemon on the C library's allocator, so that an idle daemon gives
the memory of its big passes back.

CPython's own small-object allocator (pymalloc) takes memory in 1 MiB arenas
and returns an arena only once every object in it is gone.  A cold mirror or
a full scan of a large library fills dozens of arenas with short-lived
objects; the few that outlive the pass (log records, caches, the next
pass's first objects) are scattered over them, so the arenas stay.  Measured
on a 30,000-file library (``bench/LOAD.md``): 57 arenas resident after the
cold mirror for 18 MiB of live objects.  glibc's ``malloc`` has no arenas of
that kind, and ``malloc_trim`` (``daemon/memory_trim.py``) hands every free
page back, wherever it lies: the idle daemon holds 68 MiB instead of 89, for
about 2 % more CPU during the cold mirror.

The allocator is chosen when the interpreter starts (``PYTHONMALLOC``), so
``ohsync run`` started as its own process replaces itself once with the same
command line and ``PYTHONMALLOC=malloc`` (same process id: a service
manager or the tray sees no difference).  A ``PYTHONMALLOC`` already set is
left alone (``PYTHONMALLOC=pymalloc ohsync run`` keeps CPython's allocator),
and so are systems without glibc's ``malloc_trim``, frozen builds and a
daemon started inside another program (tests, the demo).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys

from .memory_trim import can_trim

__all__ = ["ENV", "wanted", "use_system_malloc"]

log = logging.getLogger(__name__)

#: The interpreter's allocator switch (read once at start).
ENV = "PYTHONMALLOC"


def wanted(environ: dict[str, str] | os._Environ[str] | None = None) -> bool:
    """True when this process should restart on the C allocator: no
    ``PYTHONMALLOC`` yet, glibc's ``malloc_trim`` present, not a frozen build.

    :param environ: the environment to judge (default ``os.environ``).
    """
    env = os.environ if environ is None else environ
    return ENV not in env and can_trim() and not getattr(sys, "frozen", False) and bool(sys.orig_argv)


def use_system_malloc() -> None:
    """Replace this process by the same command line on glibc's ``malloc``
    when :func:`wanted`; returns only when it does not (then nothing changed).

    Call it first thing in a process started for the daemon alone, before
    threads, locks or sockets exist (``exec`` keeps open descriptors).

    :raises: nothing; a failed ``exec`` is logged and the daemon goes on as it is.
    """
    if not wanted():
        return
    env = dict(os.environ)
    env[ENV] = "malloc"
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed or gone: nothing to lose
            stream.flush()
    try:
        os.execve(sys.executable, list(sys.orig_argv), env)
    except OSError as exc:  # e.g. the interpreter was replaced on disk: run as we are
        log.warning("could not restart on the system allocator (%s); idle memory stays higher", exc)
