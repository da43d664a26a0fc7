"""Open the sync engine for one configured mirror.

One function's worth of wiring: read the token from the keyring, make the
Seafile client, find (or create, when ``create_library = true``) the library,
open the state store under the state dir and build the :class:`SyncEngine`.
Runs in the sync worker's thread (the state store's SQLite connection belongs
to the thread that opens it).  Missing login or library → :class:`FatalError`
with a sentence saying what to do.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.errors import LibraryNotFound
from ..engine.events import SyncEvent
from .config import Config, MirrorConfig
from .credentials import load_token
from .logs import redact
from .open_files import WriterCheck
from .worker import FatalError

__all__ = ["MirrorSession", "open_session", "no_login_message"]

log = logging.getLogger(__name__)


def no_login_message(cfg: Config, mirror: MirrorConfig | None = None) -> str:
    """The sentence for "there is no saved login" of ``mirror``'s account (None: the top-level one)."""
    server, username = cfg.account(mirror)
    if not server or not username:
        return (f"No server or username in {cfg.path}. Run "
                "`ohsync login --server URL --username EMAIL` first.")
    if mirror is not None and (mirror.server or mirror.username):  # an account of its own
        return (f"No saved login for {username} at {server} (the mirror {mirror.label}). Run "
                f"`ohsync login --mirror {_quoted(mirror.label)}` first.")
    return (f"No saved login for {username} at {server}. Run "
            f"`ohsync login --server {server} --username {username}` first.")


def _quoted(text: str) -> str:
    return f'"{text}"' if any(c.isspace() for c in text) else text


@dataclass
class MirrorSession:
    """An opened mirror: the engine plus what must be closed with it."""

    engine: Any
    client: Any
    state: Any
    library_name: str
    library_id: str
    local_root: Path
    transfers: Any = None

    def close(self) -> None:
        try:
            if self.transfers is not None:
                self.transfers.shutdown(wait=True)
            self.state.close()
        finally:
            self.client.close()


def open_session(
    cfg: Config,
    on_event: Callable[[SyncEvent], None],
    *,
    mirror: MirrorConfig,
    token: str | None = None,
    client_factory: Callable[..., Any] | None = None,
) -> MirrorSession:
    """Open the engine of one mirror.

    :param mirror: which ``[[mirror]]``; its state
        lives in :meth:`Config.mirror_state_dir`.
    :param token: use this token instead of the keyring's (tests, demo).
    :param client_factory: makes the client (default ``SeafileClient``).
    :raises FatalError: no login or no such library (the daemon cannot run).
    :raises KeyringUnavailable: the keyring cannot be read.
    :raises RemoteError: the server failed (the worker retries).
    """
    from ..engine.client import SeafileClient
    from ..engine.state import StateStore
    from ..engine.sync.engine import EngineOptions, SyncEngine, resolve_library

    server, username = cfg.account(mirror)
    if not server or not username:
        raise FatalError(no_login_message(cfg, mirror), title="Not logged in")
    if token is None:
        token = load_token(server, username)
    if not token:
        raise FatalError(no_login_message(cfg, mirror), title="Not logged in")
    redact(token)
    client = (client_factory or SeafileClient)(server, token)
    try:
        try:
            repo = resolve_library(client, name=None if mirror.library_id else mirror.library,
                                   library_id=mirror.library_id, create=cfg.create_library)
        except LibraryNotFound as exc:
            if exc.ambiguous:
                hint = ""  # the message names the setting that picks one
            elif mirror.library_id:
                hint = f" Fix `library_id` in {cfg.path}, or remove it to pick the library by name."
            else:
                hint = (f" Create it in the web interface, fix `library` in {cfg.path}, "
                        "or set `create_library = true` to let ohsync create it.")
            raise FatalError(exc.message + hint, title=exc.title) from exc
        state_dir = cfg.mirror_state_dir(repo.id, mirror)
        state_dir.mkdir(parents=True, exist_ok=True)
        state = StateStore(state_dir / "state.sqlite3", state_dir / "blobs")
        if state.recovered is not None:
            log.warning("%s", state.recovered.sentence(state.db_path))
        try:
            # the options the config's option table gives the engine (daemon/config/model.py, `engine=`)
            # a file a program still holds open for writing is never replaced nor removed (open_files.py)
            options = EngineOptions(backup_dir=cfg.state_dir / "backups", library_name=repo.name,
                                    being_written=WriterCheck(), **cfg.engine_values(mirror))
            # uploads of new files run in this bounded pool (the engine starts no threads)
            transfers = ThreadPoolExecutor(max_workers=max(1, cfg.transfers), thread_name_prefix="ohsync-transfer")
            engine = SyncEngine(client, repo.id, mirror.local, state, remote_root=mirror.remote,
                                options=options, on_event=on_event, executor=transfers)
        except BaseException:
            state.close()
            raise
    except BaseException:
        client.close()
        raise
    log.info("mirroring library %s (%s) %s → %s", repo.name, repo.id, mirror.remote, mirror.local)
    return MirrorSession(engine=engine, client=client, state=state, library_name=repo.name,
                         library_id=repo.id, local_root=mirror.local, transfers=transfers)
