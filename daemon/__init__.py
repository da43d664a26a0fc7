"""ohsync.daemon — see docs/architecture.md §2."""
from __future__ import annotations

if __name__ != "ohsync.daemon":  # pragma: no cover - guards against bare-folder imports
    raise ImportError("import ohsync.daemon (pip install -e .), not the bare folder 'daemon'")
