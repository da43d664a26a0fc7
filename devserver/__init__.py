"""ohsync.devserver — see docs/architecture.md §2."""
from __future__ import annotations

if __name__ != "ohsync.devserver":  # pragma: no cover - guards against bare-folder imports
    raise ImportError("import ohsync.devserver (pip install -e .), not the bare folder 'devserver'")

from .ids import EMPTY_ID, file_id
from .server import DevServer

__all__ = ["DevServer", "file_id", "EMPTY_ID"]
