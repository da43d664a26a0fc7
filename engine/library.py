"""Find the configured library on the server, and probe the mirror's file system.

Used by the daemon's session when it opens a mirror (``resolve_library``)
and by the engine (``probe_case_insensitive``).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from .errors import LibraryNotFound
from .models import RepoInfo

__all__ = ["resolve_library", "probe_case_insensitive"]


def probe_case_insensitive(folder: Path) -> bool:
    """True when ``folder``'s file system treats ``A`` and ``a`` as one name."""
    try:
        fd, name = tempfile.mkstemp(dir=folder, prefix=".ohsync-tmp-CaseProbe")
    except OSError:
        return False
    os.close(fd)
    try:
        return os.path.exists(os.path.join(folder, os.path.basename(name).lower()))
    finally:
        os.unlink(name)


def resolve_library(client: Any, *, name: str | None = None, library_id: str | None = None,
                    create: bool = False) -> RepoInfo:
    """Find the configured library (``GET /api2/repos/``), optionally creating it.

    :raises LibraryNotFound: no library with that id/name (and ``create`` is
        False), or the name is ambiguous.
    :raises RemoteError: from the client.
    """
    repos: list[RepoInfo] = client.list_repos()
    if library_id:
        for repo in repos:
            if repo.id == library_id:
                return repo
        raise LibraryNotFound(f"No library with id {library_id} is visible to this account.")
    matches = [r for r in repos if r.name == name]
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        ids = ", ".join(r.id for r in matches)
        ambiguous = LibraryNotFound(f"Several libraries are named '{name}' ({ids}). "
                                    "Set `library_id` in the [[mirror]] section to pick one.")
        ambiguous.ambiguous = True
        raise ambiguous
    if create and name:
        created: RepoInfo = client.create_repo(name)
        return created
    raise LibraryNotFound(f"The library '{name}' does not exist on the server.")
