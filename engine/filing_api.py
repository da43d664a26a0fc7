"""What filing needs from its surroundings, and nothing more.

Filing (``engine/filing*.py``) sits on the engine, not in it.  It sees the
mirror only through :class:`MirrorAPI` (implemented over a running engine
by :class:`ohsync.engine.mirror_api.EngineMirror`; tests pass a fake), and
asks whether a dropped file is finished through a :data:`ReadyCheck` that
the daemon injects (:class:`ohsync.daemon.stability.StabilityGate`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

__all__ = ["DOWNLOADING", "WRITING", "ReadyCheck"]

#: :data:`ReadyCheck` answer: a partial download or lock file (by name or companion).
DOWNLOADING = "downloading"
#: :data:`ReadyCheck` answer: some process has the file open for writing.
WRITING = "writing"

#: ``ready(path)`` → None when ``path`` may be filed now, else why not
#: (:data:`DOWNLOADING` or :data:`WRITING`).
ReadyCheck = Callable[[Path], "str | None"]
