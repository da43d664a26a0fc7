"""The Seafile Web API client: the only package that speaks HTTP to Seafile.

:class:`SeafileClient` (:mod:`.seafile`) is what the rest of ohsync uses;
the modules beside it are its parts (see ``docs/architecture.md``).
"""

from .seafile import SeafileClient

__all__ = ["SeafileClient"]
