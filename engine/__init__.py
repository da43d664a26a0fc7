"""ohsync.engine — see docs/architecture.md §2."""
from __future__ import annotations

import sys

if __name__ != "ohsync.engine":  # pragma: no cover - guards against bare-folder imports
    raise ImportError("import ohsync.engine (pip install -e .), not the bare folder 'engine'")

# httpx's package import tries its command-line tool (``httpx._main``), which
# loads click and pygments whenever they happen to be installed (about 2 MiB
# kept by a daemon that runs all day) and then gives up without ``rich``.
# The engine never uses that tool: mark it absent before httpx is imported.
if "httpx" not in sys.modules:
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
