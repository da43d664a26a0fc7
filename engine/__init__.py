"""ohsync.engine — see docs/architecture.md §2."""
from __future__ import annotations

if __name__ != "ohsync.engine":  # pragma: no cover - guards against bare-folder imports
    raise ImportError("import ohsync.engine (pip install -e .), not the bare folder 'engine'")
