"""When a mirror last carried something across, kept in its state database.

The status's ``last_sync`` is a fact of the running daemon: after a restart
it would be empty for a mirror that synced for months and now cannot open
(its library deleted, its login rejected), which reads as "never worked".
So the worker writes the time into the state database's key/value table
after each pass that carried something across (:func:`record`), and the
mirror reads it back when it starts (:func:`recorded`) — even when its
library cannot be found, from every state folder of its local folder
(``Config.mirror_state_dirs``), read-only.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = ["KEY", "record", "recorded"]

log = logging.getLogger(__name__)

#: The key of the state database's ``meta`` table (Unix time, seconds, as text).
KEY = "daemon.last_sync"


def record(engine: Any, when: float) -> None:
    """Write ``when`` (Unix time) as the engine's last sync into its state database.

    Does nothing for an engine without a state store; never raises (the
    time is only shown): a failure is logged.
    """
    state = getattr(engine, "state", None)
    if state is None or not hasattr(state, "set_meta"):
        return
    try:
        state.set_meta(KEY, f"{when:.3f}")
    except Exception:  # a fact for the status, never a reason to stop syncing
        log.exception("recording the time of the last sync failed")


def recorded(state_dirs: Iterable[Path]) -> float | None:
    """The latest last sync (Unix time) written into the state databases of
    ``state_dirs`` (``<dir>/state.sqlite3``), or None when none holds one.

    The databases are opened read-only and nothing is created; one that
    cannot be read is skipped.
    """
    times = []
    for folder in state_dirs:
        db_path = folder / "state.sqlite3"
        if not db_path.is_file():
            continue
        try:
            db = sqlite3.connect(f"{db_path.as_uri()}?mode=ro", uri=True, timeout=2)
            try:
                row = db.execute("SELECT value FROM meta WHERE key=?", (KEY,)).fetchone()
            finally:
                db.close()
            if row is not None:
                times.append(float(row[0]))
        except (sqlite3.Error, ValueError, TypeError) as exc:
            log.debug("no last sync readable in %s: %s", db_path, exc)
    return max(times, default=None)
