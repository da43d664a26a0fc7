"""What every stage of one mirror's sync needs: client, ids, roots, state.

Kept in one small value so the stages (``transfer``, ``sync``) take one
argument instead of eight.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .events import SyncEvent
from .models import RemoteEntry
from .paths import to_local, to_remote
from .state import StateStore

__all__ = ["EngineOptions", "MirrorContext"]


@dataclass
class EngineOptions:
    """Tunables of one mirror.

    :ivar backup_dir: where overwritten/removed local files are copied
        first (``state_dir/backups``); None disables backups (tests only).
    :ivar library_name: the library's name, used in backup paths.
    :ivar ignore: extra gitignore-style patterns (config ``ignore``).
    :ivar readback_full_limit: files up to this many bytes are downloaded
        again after an upload and compared by sha1 (DESIGN §5 step 3).
    :ivar max_attempts: read-merge-write rounds before giving up on a path.
    :ivar upload_chunk: bytes per request of a chunked upload.
    :ivar backup_days: backups older than this many days are pruned.
    :ivar max_delete_files/max_delete_percent/percent_floor: the mass-delete
        safety valve: deletes on one side are held beyond ``max_delete_files``,
        or from ``percent_floor`` on beyond ``max_delete_percent`` % of the
        mirror (``valve.exceeds``).
    """

    backup_dir: Path | None = None
    library_name: str = "OH-Memory"
    ignore: tuple[str, ...] = ()
    readback_full_limit: int = 1024 * 1024
    max_attempts: int = 4
    max_delete_files: int = 50
    upload_chunk: int = 8 * 1024 * 1024
    backup_days: int = 30
    max_delete_percent: float = 25.0
    percent_floor: int = 10


@dataclass
class MirrorContext:
    """The shared context of one mirror's sync stages.

    :ivar snapshot: the current remote listing by rel path, kept up to date
        by the stages as they write.
    """

    client: Any
    repo_id: str
    remote_root: str
    local_root: Path
    state: StateStore
    options: EngineOptions
    on_event: Callable[[SyncEvent], None] | None = None
    snapshot: dict[str, RemoteEntry] = field(default_factory=dict)

    def remote_path(self, rel_path: str) -> str:
        """The remote path of a rel path."""
        return to_remote(self.remote_root, rel_path)

    def local_path(self, rel_path: str) -> Path:
        """The local path of a rel path."""
        return to_local(self.local_root, rel_path)

    def emit(self, event: SyncEvent) -> None:
        """Hand an event to the caller; its failures never break a sync."""
        if self.on_event is not None:
            try:
                self.on_event(event)
            except Exception:  # noqa: BLE001 - a display bug must not stop syncing
                pass
