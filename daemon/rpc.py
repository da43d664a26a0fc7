"""The old name of :mod:`ohsync.daemon.protocol`, kept so existing imports still work.

New code imports ``ohsync.daemon.protocol``, the one protocol module
(docs/architecture.md §7).
"""

from __future__ import annotations

from ohsync.daemon.protocol import *  # noqa: F401,F403 - re-export
from ohsync.daemon.protocol import INTERNAL_ERROR, PARSE_ERROR, __all__  # noqa: F401
