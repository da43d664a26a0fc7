"""ohsync.tray — see docs/architecture.md §2."""
from __future__ import annotations

if __name__ != "ohsync.tray":  # pragma: no cover - guards against bare-folder imports
    raise ImportError("import ohsync.tray (pip install -e .), not the bare folder 'tray'")
