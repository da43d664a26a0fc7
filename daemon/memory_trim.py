"""Give the memory of a big pass back to the system.

A cold mirror or a full scan of a large library builds lists and dicts of
tens of thousands of entries; once the pass is over Python frees them, but
the C allocator keeps the pages, so an idle daemon would go on holding its
peak.  :func:`release_memory` runs a full garbage collection (cycles left by
the pass) and, on glibc, ``malloc_trim(0)``, which hands free heap pages back
to the kernel.  It costs a few tens of milliseconds at 30,000 files, so the
worker calls it only after passes worth it (:func:`worth_releasing`).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import logging
import sys
from collections.abc import Callable

__all__ = ["can_trim", "release_memory", "worth_releasing", "BIG_PASS", "BIG_PASS_SECONDS"]

log = logging.getLogger(__name__)

#: Paths carried across in one pass from which the pass counts as big.
BIG_PASS = 200

_trim: Callable[[int], int] | None = None
_looked = False


def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None (another libc, another system)."""
    global _trim, _looked
    if not _looked:
        _looked = True
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                fn = libc.malloc_trim
                fn.argtypes, fn.restype = [ctypes.c_size_t], ctypes.c_int
                _trim = fn
            except (OSError, AttributeError):  # musl and others have no malloc_trim
                _trim = None
    return _trim


def can_trim() -> bool:
    """True where ``malloc_trim`` exists (glibc): free heap pages can be handed back."""
    return _malloc_trim() is not None


#: Seconds of pass from which the pass counts as big (it read every base of a large mirror).
BIG_PASS_SECONDS = 1.0


def worth_releasing(*, full_scan: bool, carried: int, dirty: int = 0, seconds: float = 0.0) -> bool:
    """A pass that scanned the whole folder, carried or looked at :data:`BIG_PASS`
    paths or more, or took :data:`BIG_PASS_SECONDS` or longer.

    :param full_scan: the pass walked the whole local folder.
    :param carried: paths uploaded, downloaded, merged, moved or deleted in it.
    :param dirty: local paths it was asked to look at (e.g. the watcher's echo of a cold mirror).
    :param seconds: its wall time.
    """
    return full_scan or carried >= BIG_PASS or dirty >= BIG_PASS or seconds >= BIG_PASS_SECONDS


def release_memory() -> bool:
    """Collect garbage, then return free heap pages to the kernel (glibc only).

    :returns: True when ``malloc_trim`` ran and released something.
    """
    gc.collect()
    trim = _malloc_trim()
    if trim is None:
        return False
    try:
        return bool(trim(0))
    except OSError as exc:  # pragma: no cover - a libc that refuses
        log.debug("malloc_trim failed: %s", exc)
        return False
