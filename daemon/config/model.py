"""The shape of the configuration: its keys, their defaults and the values they become.

The dataclasses :class:`Config`, :class:`MirrorConfig`, :class:`SafetyConfig`,
:class:`FilingConfig` and :class:`MemoryConfig` hold the keys of
docs/architecture.md §10 with their defaults; the ``*_KEYS`` sets name the
keys each table knows (others are kept and reported as warnings).  Reading
the file is ``daemon/config/__init__.py``; checking its values,
``daemon/config/checks.py``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from ...engine.errors import OhsyncError
from ...engine.place import local_offset
from ..protocol import default_socket_path

__all__ = ["APP_NAME", "DEFAULT_LIBRARY", "ConfigError", "MirrorConfig", "SafetyConfig", "FilingConfig",
           "MemoryConfig", "Config"]

APP_NAME = "ohsync"
DEFAULT_LIBRARY = "OH-Memory"
DEFAULT_POLL_INTERVAL = 30.0
DEFAULT_TRANSFERS = 4
DEFAULT_PUSH_SAFETY_POLL = 300.0
#: MiB one upload request carries at most (``upload_request_mib``)
DEFAULT_UPLOAD_REQUEST_MIB = 256

TOP_KEYS = {"server", "username", "poll_interval", "state_dir", "socket", "create_library",
             "mirror", "safety", "filing", "log_dir", "memory", "transfers", "notifications",
             "push_safety_poll", "upload_request_mib", "keyring", "panel_port"}
#: Where the login token is kept: the OS keyring, or a file only the user can read.
KEYRING_CHOICES = ("system", "file")
MIRROR_KEYS = {"name", "library", "library_id", "remote", "local", "ignore", "server", "username"}
SAFETY_KEYS = {"max_delete_percent", "max_delete_files", "percent_floor", "backup_days"}
FILING_KEYS = {"drop_dir", "mirror", "default", "rules"}
MEMORY_KEYS = {"time_offset", "write_timeout", "stamp_edits", "stamp_quiet", "origin", "language"}


class ConfigError(OhsyncError):
    """The config file cannot be read or holds a value of the wrong type."""

    title = "Configuration error"


@dataclass(frozen=True)
class MirrorConfig:
    """One ``[[mirror]]`` table: a library (or a subtree of it) and a local folder.

    A new per-mirror option is a field here, a key in ``MIRROR_KEYS`` and a
    line in :func:`mirror_table`; it reaches the engine in ``daemon/session.py``.

    :ivar name: what status, CLI and tray call this mirror (``name``; default
        :attr:`label`); ``--mirror`` accepts it, the library or the folder.
    :ivar server: this mirror's server when it is not the top-level one
        (another account; its token is saved by ``ohsync login --mirror NAME``).
    :ivar username: this mirror's account when it is not the top-level one.
    """

    library: str | None = DEFAULT_LIBRARY
    library_id: str | None = None
    remote: str = "/"
    local: Path = field(default_factory=lambda: Path.home() / DEFAULT_LIBRARY)
    ignore: tuple[str, ...] = ()
    name: str | None = None
    server: str | None = None
    username: str | None = None

    @property
    def label(self) -> str:
        """What to call the mirror in messages: its ``name``, else the library's name, else its id."""
        return self.name or self.library or self.library_id or DEFAULT_LIBRARY


@dataclass(frozen=True)
class SafetyConfig:
    """``[safety]``: thresholds of the delete safety valve and backup retention.

    Deletes on one side within five minutes are held when there are more
    than ``max_delete_files``, or at least ``percent_floor`` that are more
    than ``max_delete_percent`` % of the mirror's files.
    """

    max_delete_percent: float = 25
    max_delete_files: int = 50
    percent_floor: int = 10
    backup_days: int = 30


@dataclass(frozen=True)
class FilingConfig:
    """``[filing]``: the drop folder (docs/architecture.md §8)."""

    drop_dir: Path = field(default_factory=lambda: Path.home() / "OH-Drop")
    mirror: int = 0
    default: str = "/Files/_inbox/"
    rules: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class MemoryConfig:
    """``[memory]``: the memory tools (``ohsync mcp``, ``ohsync memory``).

    :ivar time_offset: offset of the times written into memory files and
        filed documents' sidecars and journal lines (``±HH:MM``; default: the
        computer's own offset when the config is read).
    :ivar write_timeout: seconds a write waits for the server by default.
    :ivar stamp_edits: a person's saved edit of a memory entity gets
        ``modified`` (and ``origin: desktop``) stamped before it is pushed
        (on by default; the saved version goes to the backups first, and the
        stamp merges with any concurrent remote edit of the frontmatter).
    :ivar stamp_quiet: seconds a file must stay unchanged before it is stamped.
    :ivar origin: the ``origin`` written by this computer.
    :ivar language: ``auto`` (the locale: Chinese for ``zh*``, else English),
        ``zh`` or ``en``: the language of the texts ohsync writes (sidecar
        summaries, journal lines).
    """

    time_offset: str = field(default_factory=local_offset)
    write_timeout: float = 30.0
    stamp_edits: bool = True
    stamp_quiet: float = 1.0
    origin: str = "desktop"
    language: str = "auto"


@dataclass(frozen=True)
class Config:
    """The effective configuration: file values over defaults over nothing.

    :ivar path: the file it came from (it need not exist).
    :ivar state_dir_explicit: True when ``state_dir`` was set in the file.
    :ivar log_dir: the folder of ``ohsync.log``: ``state_dir/logs`` unless the
        file sets ``log_dir``.
    :ivar warnings: sentences about unknown keys or ignored tables.
    """

    path: Path
    server: str = ""
    username: str = ""
    poll_interval: float = DEFAULT_POLL_INTERVAL
    state_dir: Path = field(default_factory=lambda: Path(platformdirs.user_state_dir(APP_NAME)))
    state_dir_explicit: bool = False
    socket: Path = field(default_factory=default_socket_path)
    create_library: bool = False
    mirrors: tuple[MirrorConfig, ...] = field(default_factory=lambda: (MirrorConfig(),))
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    filing: FilingConfig = field(default_factory=FilingConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    log_dir: Path = field(default_factory=lambda: Path(platformdirs.user_state_dir(APP_NAME)) / "logs")
    warnings: tuple[str, ...] = ()
    #: upload requests of new files in flight at once
    transfers: int = DEFAULT_TRANSFERS
    #: use the server's notification service (push) when it has one
    notifications: bool = True
    #: seconds between polls while push notifications arrive
    push_safety_poll: float = DEFAULT_PUSH_SAFETY_POLL
    #: MiB one upload request carries at most: a large file up to this size goes
    #: up in one streamed request, a larger one in resumable chunks growing up to it
    upload_request_mib: int = DEFAULT_UPLOAD_REQUEST_MIB
    #: where the token is kept: "system" (the OS keyring) or "file" (:attr:`credentials_file`)
    keyring: str = "system"
    #: TCP port of the local page on 127.0.0.1 (0: any free port at each start; -1: no page)
    panel_port: int = 0

    @property
    def mirror(self) -> MirrorConfig:
        """The first mirror (the one the status object's top level describes)."""
        return self.mirrors[0]

    def account(self, mirror: MirrorConfig | None = None) -> tuple[str, str]:
        """``(server, username)`` that ``mirror`` (default: the first) signs in
        with: its own keys where it sets them, else the top-level ones."""
        mirror = mirror or self.mirror
        return (mirror.server or self.server, mirror.username or self.username)

    @property
    def credentials_file(self) -> Path:
        """The file store of ``keyring = "file"``: ``state_dir/credentials.json`` (``0600``)."""
        return self.state_dir / "credentials.json"

    @property
    def lock_path(self) -> Path:
        """The single-instance lock: one daemon per state dir."""
        return self.state_dir / "ohsync.lock"

    def mirror_state_dir(self, library_id: str, mirror: MirrorConfig | None = None) -> Path:
        """Where the engine keeps the state DB and base blobs of ``mirror`` (default: the first).

        Keyed by library id and local folder, so pointing a mirror at another
        folder starts a fresh, careful sync instead of reusing wrong bases,
        and every mirror of one config has its own.
        """
        return self.state_dir / "mirrors" / f"{library_id}-{_folder_key(mirror or self.mirror)}"

    def mirror_state_dirs(self, mirror: MirrorConfig | None = None) -> list[Path]:
        """The state folders of ``mirror``'s local folder (default: the first's) that exist, of
        any library, sorted: where its state is when the library cannot be found (deleted)."""
        return sorted((self.state_dir / "mirrors").glob(f"*-{_folder_key(mirror or self.mirror)}"))


def _folder_key(mirror: MirrorConfig) -> str:
    """The part of a state folder's name that stands for the mirror's local folder."""
    return hashlib.sha1(str(mirror.local).encode("utf-8")).hexdigest()[:8]
