"""The option table: every key of the config file, its default, type, check and doc.

The dataclasses :class:`Config`, :class:`MirrorConfig`, :class:`SafetyConfig`,
:class:`FilingConfig` and :class:`MemoryConfig` are the tables of the file;
each field declared with :func:`~ohsync.daemon.config.options.option` is a
key of its table (docs/architecture.md §10), with its default, its kind
(type and check), the README's line for it and, for a key the engine needs,
the :class:`~ohsync.engine.context.EngineOptions` field it fills.  Reading
the file (``daemon/config/__init__.py``), the keys each table knows (the
``*_KEYS`` sets: others are kept and reported as warnings), the engine's
options (:meth:`Config.engine_values`) and the README's table
(``daemon/config/readme.py``) all follow from these declarations: a new
option is one field here plus the code that uses it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from ...engine.place import local_offset
from ..protocol import default_socket_path
from .checks import ConfigError, ignore_pattern, remote_folder, text_language, time_offset
from .options import (
    boolean,
    choice,
    engine_values,
    file_path,
    folder_path,
    integer,
    keys,
    option,
    real,
    server_url,
    strings,
    tables,
    text,
)

__all__ = ["APP_NAME", "DEFAULT_LIBRARY", "ConfigError", "MirrorConfig", "SafetyConfig", "FilingConfig",
           "MemoryConfig", "Config", "README_SECTIONS"]

APP_NAME = "ohsync"
DEFAULT_LIBRARY = "OH-Memory"
MIB = 1024 * 1024


@dataclass(frozen=True)
class MirrorConfig:
    """One ``[[mirror]]`` table: a library (or a subtree of it) and a local folder.

    A new per-mirror option is one field here (:func:`option`): it is read
    from each ``[[mirror]]``, listed in the README, and with ``engine=``
    handed to that mirror's engine (``daemon/session.py``).
    """

    library: str | None = option(DEFAULT_LIBRARY, kind=text(),
                                 doc="the library, by name (names need not be unique: `library_id` picks one)")
    library_id: str | None = option(None, kind=text(lower=True, empty=None),
                                    doc="the library, by id (instead of `library`)")
    remote: str = option("/", kind=text(empty="/", check=remote_folder), doc="the subtree of the library it mirrors")
    local: Path = option(kind=folder_path(), factory=lambda: Path.home() / DEFAULT_LIBRARY, shown="`~/OH-Memory`",
                         doc="the folder it mirrors into (each mirror a folder of its own)")
    ignore: tuple[str, ...] = option((), kind=strings(check=ignore_pattern), engine="ignore",
                                     doc="gitignore patterns not synced, beside `.ohsyncignore` in the folder")
    name: str | None = option(None, kind=text(strip=True, empty=None), shown="the library's name",
                              doc="what status, the tray and `--mirror` call it")
    server: str | None = option(None, kind=server_url(empty=None), shown="the top-level `server`",
                                doc="another server for this mirror (its login: `ohsync login --mirror NAME`)")
    username: str | None = option(None, kind=text(strip=True, empty=None), shown="the top-level `username`",
                                  doc="another account for this mirror")

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

    max_delete_files: int = option(50, kind=integer(0, 10**9), engine="max_delete_files",
                                   doc="deletions on one side within 5 minutes are held when there are more "
                                       "than this many, …")
    percent_floor: int = option(10, kind=integer(0, 10**9), engine="percent_floor",
                                doc="… or at least this many that are also …")
    max_delete_percent: float = option(25, kind=real(0, 100), engine="max_delete_percent",
                                       doc="… more than this share (%) of the mirror's files")
    backup_days: int = option(30, kind=integer(1, 36_500), engine="backup_days",
                              doc="days the backups of local files ohsync replaced or removed are kept")


@dataclass(frozen=True)
class FilingConfig:
    """``[filing]``: the drop folder (docs/architecture.md §8)."""

    drop_dir: Path = option(kind=folder_path(), factory=lambda: Path.home() / "OH-Drop", shown="`~/OH-Drop`",
                            doc="the drop folder: a file put there is filed into the mirror")
    mirror: int = option(0, kind=integer(), doc="which `[[mirror]]` it files into (0: the first)")
    default: str = option("/Files/_inbox/", kind=text(), doc="where a file no rule matches goes")
    rules: tuple[Mapping[str, Any], ...] = option((), kind=tables(),
                                                  doc="`{ match, dest }` tables: the first that matches decides")


@dataclass(frozen=True)
class MemoryConfig:
    """``[memory]``: the memory tools (``ohsync mcp``, ``ohsync memory``)."""

    time_offset: str = option(kind=text(check=time_offset), factory=local_offset, engine="time_offset",
                              shown="this computer's",
                              doc="offset (`±HH:MM`) of the times written into memory files, sidecars and "
                                  "journal lines")
    write_timeout: float = option(30.0, kind=real(1, 3600), doc="seconds a memory write waits for the server")
    stamp_edits: bool = option(True, kind=boolean(), engine="stamp_edits",
                               doc="a person's saved edit of an entity gets `modified` and `origin` stamped before "
                                   "its push (the saved version is backed up first)")
    stamp_quiet: float = option(1.0, kind=real(0, 600), engine="stamp_quiet",
                                doc="seconds such a file stays unchanged before it is stamped")
    origin: str = option("desktop", kind=text(strip=True, empty="desktop"), engine="origin",
                         doc="the `origin` of entities written on this computer")
    language: str = option("auto", kind=text(strip=True, lower=True, check=text_language),
                           doc="language of the texts ohsync writes: `zh`, `en`, or `auto` (the locale)")


@dataclass(frozen=True)
class Config:
    """The effective configuration: file values over defaults over nothing.

    :ivar path: the file it came from (it need not exist).
    :ivar state_dir_explicit: True when ``state_dir`` was set in the file.
    :ivar warnings: sentences about unknown keys or ignored tables.
    :ivar settings: what the file sets, key by key (``daemon/config/settings.py``).
    """

    path: Path
    server: str = option("", kind=server_url(), shown="—", doc="the Seafile server (`ohsync login` writes it)")
    username: str = option("", kind=text(strip=True), shown="—", doc="the account (`ohsync login` writes it)")
    poll_interval: float = option(30.0, kind=real(0.1, 86_400), doc="seconds between remote checks")
    state_dir: Path = option(kind=folder_path(), factory=lambda: Path(platformdirs.user_state_dir(APP_NAME)),
                             shown="`~/.local/state/ohsync`", doc="state databases, base copies, backups")
    state_dir_explicit: bool = False
    socket: Path = option(kind=file_path(), factory=default_socket_path,
                          shown="`$XDG_RUNTIME_DIR/ohsync/ohsync.sock`",
                          doc="the daemon's socket (`OHSYNC_SOCKET` overrides it)")
    create_library: bool = option(False, kind=boolean(), doc="create a missing library on the first run")
    mirrors: tuple[MirrorConfig, ...] = field(default_factory=lambda: (MirrorConfig(),))
    safety: SafetyConfig = field(default_factory=SafetyConfig)
    filing: FilingConfig = field(default_factory=FilingConfig)
    memory: MemoryConfig = field(default_factory=MemoryConfig)
    log_dir: Path = option(kind=file_path(),
                           factory=lambda: Path(platformdirs.user_state_dir(APP_NAME)) / "logs",
                           shown="`state_dir/logs`", doc="the folder of `ohsync.log`")
    warnings: tuple[str, ...] = ()
    settings: tuple[tuple[str, str], ...] = ()
    transfers: int = option(4, kind=integer(1, 16), doc="upload requests of new files in flight at once")
    notifications: bool = option(True, kind=boolean(),
                                 doc="use the server's notification service (push) when it runs one")
    push_safety_poll: float = option(300.0, kind=real(1, 86_400),
                                     doc="seconds between remote checks while push works")
    upload_request_mib: int = option(256, kind=integer(8, 4096), engine="upload_max_request",
                                     to_engine=lambda mib: mib * MIB,
                                     doc="MiB one upload request carries at most: a large file up to this size "
                                         "goes up in one request, a larger one in resumable chunks (from 8 MiB, "
                                         "growing up to this size)")
    keyring: str = option("system", kind=choice("system", "file", meaning={
        "system": "the OS keyring", "file": "a file only you can read"}),
        doc="where the token is kept: the OS keyring, or `state_dir/credentials.json` (`0600`)")
    panel_port: int = option(0, kind=integer(-1, 65535),
                             doc="the local page's port on 127.0.0.1 (0: any free port at each start; -1: no page)")

    def account(self, mirror: MirrorConfig | None = None) -> tuple[str, str]:
        """``(server, username)`` that ``mirror`` signs in with: its own keys where it
        sets them, else the top-level ones; ``mirror`` None: the top-level account (the
        one `ohsync login` without ``--mirror`` signs in)."""
        if mirror is None:
            return (self.server, self.username)
        return (mirror.server or self.server, mirror.username or self.username)

    def engine_values(self, mirror: MirrorConfig) -> dict[str, Any]:
        """The ``EngineOptions`` fields the option table fills for ``mirror``:
        ``{field: value}`` (``options.engine_values``)."""
        return engine_values(self, self.safety, self.filing, self.memory, mirror)

    @property
    def credentials_file(self) -> Path:
        """The file store of ``keyring = "file"``: ``state_dir/credentials.json`` (``0600``)."""
        return self.state_dir / "credentials.json"

    @property
    def lock_path(self) -> Path:
        """The single-instance lock: one daemon per state dir."""
        return self.state_dir / "ohsync.lock"

    def mirror_state_dir(self, library_id: str, mirror: MirrorConfig) -> Path:
        """Where the engine keeps the state DB and base blobs of ``mirror`` (of library ``library_id``).

        Keyed by library id and local folder, so pointing a mirror at another
        folder starts a fresh, careful sync instead of reusing wrong bases,
        and every mirror of one config has its own.
        """
        return self.state_dir / "mirrors" / f"{library_id}-{_folder_key(mirror)}"

    def mirror_state_dirs(self, mirror: MirrorConfig) -> list[Path]:
        """The state folders of ``mirror``'s local folder that exist, of
        any library, sorted: where its state is when the library cannot be found (deleted)."""
        return sorted((self.state_dir / "mirrors").glob(f"*-{_folder_key(mirror)}"))


def _folder_key(mirror: MirrorConfig) -> str:
    """The part of a state folder's name that stands for the mirror's local folder."""
    return hashlib.sha1(str(mirror.local).encode("utf-8")).hexdigest()[:8]


#: The tables of the file: the keys each knows (others are kept and reported as warnings).
TOP_KEYS = keys(Config) | {"mirror", "safety", "filing", "memory"}
MIRROR_KEYS = keys(MirrorConfig)
SAFETY_KEYS = keys(SafetyConfig)
FILING_KEYS = keys(FilingConfig)
MEMORY_KEYS = keys(MemoryConfig)

#: ``(table, dataclass)`` in the order of the README's option table.
README_SECTIONS: list[tuple[str, type]] = [("", Config), ("mirror", MirrorConfig), ("safety", SafetyConfig),
                                           ("filing", FilingConfig), ("memory", MemoryConfig)]
