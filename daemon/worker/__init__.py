"""The sync worker of one mirror: the thread that owns the engine and its state DB.

``worker.py`` is :class:`SyncWorker` (the queue, the loop, one pass);
``requests.py`` what other threads ask of it and the types its callers name;
``recovery.py`` opening the session and the policy after an error;
``facts.py`` the read model socket threads read; ``echoes.py`` echo
suppression between the watcher and the worker.
"""

from __future__ import annotations

from .requests import Control, FatalError, Session, SessionFactory
from .worker import MAX_SCAN_INTERVAL, SCAN_COST_FACTOR, Scheduler, SyncWorker, backoff_delay

__all__ = ["MAX_SCAN_INTERVAL", "SCAN_COST_FACTOR", "Control", "FatalError", "Scheduler", "Session", "SessionFactory",
           "SyncWorker", "backoff_delay"]
