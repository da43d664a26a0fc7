"""The person's configuration: one TOML file, read with defaults, written back intact.

Owns where the config lives (``--config``, ``OHSYNC_CONFIG``, else
``user_config_dir/config.toml``; docs/architecture.md §3), the keys of
docs/architecture.md §10 with their defaults, and :func:`update_config`,
which changes a few keys while keeping every other key of the file (known
or not).  Unknown keys are kept and reported as warnings, never errors.
Writes go through a temp file and a rename, so a crash never leaves half a
config behind.
"""

from __future__ import annotations

import hashlib
import math
import os
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from ohsync.engine.client_paths import normalize_remote_path
from ohsync.engine.ignore import pattern_problem
import tomlkit
import tomlkit.items

from ohsync.daemon.protocol import default_socket_path
from ohsync.engine.errors import OhsyncError

__all__ = [
    "APP_NAME",
    "ConfigError",
    "MirrorConfig",
    "SafetyConfig",
    "FilingConfig",
    "MemoryConfig",
    "Config",
    "config_path",
    "load_config",
    "read_document",
    "update_config",
    "normalize_server_url",
]

APP_NAME = "ohsync"
DEFAULT_LIBRARY = "OH-Memory"
DEFAULT_POLL_INTERVAL = 30.0
DEFAULT_TRANSFERS = 4
DEFAULT_PUSH_SAFETY_POLL = 300.0
#: MiB one upload request carries at most (``upload_request_mib``)
DEFAULT_UPLOAD_REQUEST_MIB = 256

_TOP_KEYS = {"server", "username", "poll_interval", "state_dir", "socket", "create_library",
             "mirror", "safety", "filing", "log_dir", "memory", "transfers", "notifications",
             "push_safety_poll", "upload_request_mib"}
_MIRROR_KEYS = {"name", "library", "library_id", "remote", "local", "ignore", "server", "username"}
_SAFETY_KEYS = {"max_delete_percent", "max_delete_files", "percent_floor", "backup_days"}
_FILING_KEYS = {"drop_dir", "mirror", "default", "rules"}
_MEMORY_KEYS = {"time_offset", "write_timeout", "stamp_edits", "stamp_quiet", "origin"}


class ConfigError(OhsyncError):
    """The config file cannot be read or holds a value of the wrong type."""

    title = "Configuration error"


@dataclass(frozen=True)
class MirrorConfig:
    """One ``[[mirror]]`` table: a library (or a subtree of it) and a local folder.

    A new per-mirror option is a field here, a key in ``_MIRROR_KEYS`` and a
    line in :func:`_mirror`; it reaches the engine in ``daemon/session.py``.

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

    :ivar time_offset: offset of the times written into memory files (``±HH:MM``).
    :ivar write_timeout: seconds a write waits for the server by default.
    :ivar stamp_edits: a person's saved edit of a memory entity gets
        ``modified`` (and ``origin: desktop``) stamped before it is pushed
        (off by default: it rewrites the file the person just saved; the
        saved version goes to the backups first).
    :ivar stamp_quiet: seconds a file must stay unchanged before it is stamped.
    :ivar origin: the ``origin`` written by this computer.
    """

    time_offset: str = "+08:00"
    write_timeout: float = 30.0
    stamp_edits: bool = False
    stamp_quiet: float = 1.0
    origin: str = "desktop"


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
    def lock_path(self) -> Path:
        """The single-instance lock: one daemon per state dir."""
        return self.state_dir / "ohsync.lock"

    def mirror_state_dir(self, library_id: str, mirror: MirrorConfig | None = None) -> Path:
        """Where the engine keeps the state DB and base blobs of ``mirror`` (default: the first).

        Keyed by library id and local folder, so pointing a mirror at another
        folder starts a fresh, careful sync instead of reusing wrong bases,
        and every mirror of one config has its own.
        """
        local = (mirror or self.mirror).local
        local_key = hashlib.sha1(str(local).encode("utf-8")).hexdigest()[:8]
        return self.state_dir / "mirrors" / f"{library_id}-{local_key}"


def config_path(cli_value: str | os.PathLike[str] | None = None) -> Path:
    """Which config file to use: ``--config``, else ``OHSYNC_CONFIG``, else the default."""
    if cli_value:
        return Path(cli_value).expanduser()
    env = os.environ.get("OHSYNC_CONFIG")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def read_document(path: Path) -> dict[str, Any]:
    """The raw TOML document (empty when the file does not exist).

    :raises ConfigError: unreadable file or invalid TOML.
    """
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        return {}
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML ({exc}). Fix the file or move it away.") from exc
    except OSError as exc:
        raise ConfigError(f"Cannot read {path}: {exc.strerror}.") from exc


def normalize_server_url(url: str) -> str:
    """``cloud.example.org/`` → ``https://cloud.example.org``: the form used as keyring key.

    :raises ConfigError: not an http(s) address.
    """
    url = url.strip()
    if url and "://" not in url:
        url = "https://" + url
    scheme = url.split("://", 1)[0].lower()
    if url and (scheme not in ("http", "https") or not url.split("://", 1)[1].strip("/")):
        raise ConfigError(f"The server address {url!r} is not a web address: it must look like "
                          "https://cloud.example.edu (http:// only for a server on this computer).")
    return url.rstrip("/")


def _typed(value: Any, types: type | tuple[type, ...], key: str, path: Path) -> Any:
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise ConfigError(f"{path}: `{key}` has the wrong type ({value!r}).")
    if not isinstance(value, types):
        raise ConfigError(f"{path}: `{key}` has the wrong type ({value!r}).")
    return value


def _unknown(table: Mapping[str, Any], known: set[str], where: str, path: Path) -> list[str]:
    return [f"{path}: unknown key `{where}{k}` (kept, but ignored)" for k in table if k not in known]


def _path(value: str) -> Path:
    return Path(os.path.expanduser(os.path.expandvars(value)))


def _folder(value: str, key: str, path: Path) -> Path:
    """An absolute folder (``~`` and ``$VARS`` expanded); relative or empty is refused,
    since it would depend on the daemon's working directory."""
    folder = _path(value)
    if not value.strip() or not folder.is_absolute():
        raise ConfigError(f"{path}: `{key}` must be an absolute folder (such as \"~/OH-Memory\"), "
                          f"not {value!r}.")
    return folder


def _number(value: Any, key: str, path: Path, lo: float, hi: float) -> float:
    """A finite number in ``[lo, hi]``."""
    number = float(_typed(value, (int, float), key, path))
    if not math.isfinite(number) or not lo <= number <= hi:
        raise ConfigError(f"{path}: `{key}` must be a number from {lo:g} to {hi:g}, not {value!r}.")
    return number


def _mirror(raw: Mapping[str, Any], path: Path) -> MirrorConfig:
    library = raw.get("library")
    library_id = raw.get("library_id")
    name = raw.get("name")
    if name is not None:
        name = _typed(name, str, "mirror.name", path).strip() or None
    server = raw.get("server")
    if server is not None:
        server = normalize_server_url(_typed(server, str, "mirror.server", path)) or None
    username = raw.get("username")
    if username is not None:
        username = _typed(username, str, "mirror.username", path).strip() or None
    if library is not None:
        _typed(library, str, "mirror.library", path)
    if library_id is not None:
        _typed(library_id, str, "mirror.library_id", path)
    if library is None and library_id is None:
        library = DEFAULT_LIBRARY
    ignore = raw.get("ignore", [])
    _typed(ignore, list, "mirror.ignore", path)
    for pattern in ignore:
        problem = pattern_problem(str(pattern))
        if problem is not None:
            raise ConfigError(f"{path}: `mirror.ignore` pattern {pattern!r} is not valid gitignore syntax "
                              f"({problem}).")
    remote = _typed(raw.get("remote", "/"), str, "mirror.remote", path) or "/"
    try:
        normalize_remote_path(remote)
    except ValueError as exc:  # else every sync pass fails with an internal error
        raise ConfigError(f"{path}: `mirror.remote` {remote!r} is not a folder of the library "
                          f"({str(exc).rsplit(': ', 1)[-1]}); write it from the library's top, "
                          "such as \"/Files\".") from None
    return MirrorConfig(
        library=library,
        library_id=library_id.lower() if library_id else None,
        remote=remote,
        local=_folder(_typed(raw.get("local", f"~/{DEFAULT_LIBRARY}"), str, "mirror.local", path),
                      "mirror.local", path),
        ignore=tuple(str(p) for p in ignore),
        name=name,
        server=server,
        username=username,
    )


def _overlap(a: Path, b: Path) -> bool:
    """True when one folder is the other or lies inside it (as written, or once symlinks are followed)."""
    for x, y in ((a, b), (Path(os.path.realpath(a)), Path(os.path.realpath(b)))):
        if x == y or x in y.parents or y in x.parents:
            return True
    return False


def _check_mirrors(mirrors: list[MirrorConfig], path: Path) -> None:
    """Two mirrors on one folder (or one inside the other) would sync each
    other's files: refused, as are two mirrors answering to the same name.

    :raises ConfigError: naming both tables and what to change.
    """
    for i, a in enumerate(mirrors):
        for j in range(i):
            b = mirrors[j]
            if _overlap(a.local, b.local):
                same = os.path.realpath(a.local) == os.path.realpath(b.local)
                how = "the same folder" if same else "folders inside each other"
                raise ConfigError(
                    f"{path}: [[mirror]] tables {j + 1} ({b.label}) and {i + 1} ({a.label}) use {how} "
                    f"({b.local} and {a.local}); each mirror needs a folder of its own: change `local` "
                    "of one of them.")
            if a.name and a.name == b.name:
                raise ConfigError(f"{path}: [[mirror]] tables {j + 1} and {i + 1} are both named {a.name!r}; "
                                  "give each mirror its own `name`.")


def load_config(path: Path | None = None) -> Config:
    """Read the config file (missing file = all defaults).

    :param path: the file; ``None`` = :func:`config_path`.
    :raises ConfigError: invalid TOML or a value of the wrong type.
    """
    path = path if path is not None else config_path()
    doc = read_document(path)
    warnings = _unknown(doc, _TOP_KEYS, "", path)
    kw: dict[str, Any] = {"path": path}
    if "server" in doc:
        kw["server"] = normalize_server_url(_typed(doc["server"], str, "server", path))
    if "username" in doc:
        kw["username"] = _typed(doc["username"], str, "username", path).strip()
    if "poll_interval" in doc:
        kw["poll_interval"] = _number(doc["poll_interval"], "poll_interval", path, 0.1, 86_400)
    if "state_dir" in doc:
        kw["state_dir"] = _folder(_typed(doc["state_dir"], str, "state_dir", path), "state_dir", path)
        kw["state_dir_explicit"] = True
        kw["log_dir"] = kw["state_dir"] / "logs"
    if "log_dir" in doc:
        kw["log_dir"] = _path(_typed(doc["log_dir"], str, "log_dir", path))
    env_socket = os.environ.get("OHSYNC_SOCKET")
    if env_socket:
        kw["socket"] = Path(env_socket).expanduser()
    elif "socket" in doc:
        kw["socket"] = _path(_typed(doc["socket"], str, "socket", path))
    if "create_library" in doc:
        kw["create_library"] = _typed(doc["create_library"], bool, "create_library", path)
    if "transfers" in doc:
        kw["transfers"] = int(_number(_typed(doc["transfers"], int, "transfers", path), "transfers", path, 1, 16))
    if "notifications" in doc:
        kw["notifications"] = _typed(doc["notifications"], bool, "notifications", path)
    if "push_safety_poll" in doc:
        kw["push_safety_poll"] = _number(doc["push_safety_poll"], "push_safety_poll", path, 1, 86_400)
    if "upload_request_mib" in doc:
        kw["upload_request_mib"] = int(_number(_typed(doc["upload_request_mib"], int, "upload_request_mib", path),
                                               "upload_request_mib", path, 8, 4096))

    raw_mirrors = doc.get("mirror", [])
    if isinstance(raw_mirrors, dict):  # a single [mirror] table instead of [[mirror]]
        raw_mirrors = [raw_mirrors]
    _typed(raw_mirrors, list, "mirror", path)
    mirrors = []
    for i, raw in enumerate(raw_mirrors):
        _typed(raw, dict, f"mirror[{i}]", path)
        warnings += _unknown(raw, _MIRROR_KEYS, "mirror.", path)
        mirrors.append(_mirror(raw, path))
    _check_mirrors(mirrors, path)
    if mirrors:
        kw["mirrors"] = tuple(mirrors)

    safety = doc.get("safety", {})
    _typed(safety, dict, "safety", path)
    warnings += _unknown(safety, _SAFETY_KEYS, "safety.", path)
    kw["safety"] = SafetyConfig(
        max_delete_percent=_number(safety.get("max_delete_percent", 25), "safety.max_delete_percent", path, 0, 100),
        max_delete_files=int(_number(_typed(safety.get("max_delete_files", 50), int, "safety.max_delete_files", path),
                                     "safety.max_delete_files", path, 0, 10**9)),
        percent_floor=int(_number(_typed(safety.get("percent_floor", 10), int, "safety.percent_floor", path),
                                  "safety.percent_floor", path, 0, 10**9)),
        backup_days=int(_number(_typed(safety.get("backup_days", 30), int, "safety.backup_days", path),
                                "safety.backup_days", path, 1, 36_500)),
    )

    filing = doc.get("filing", {})
    _typed(filing, dict, "filing", path)
    warnings += _unknown(filing, _FILING_KEYS, "filing.", path)
    kw["filing"] = FilingConfig(
        drop_dir=_folder(_typed(filing.get("drop_dir", "~/OH-Drop"), str, "filing.drop_dir", path),
                         "filing.drop_dir", path),
        mirror=_filing_mirror(filing.get("mirror", 0), max(1, len(mirrors)), path),
        default=_typed(filing.get("default", "/Files/_inbox/"), str, "filing.default", path),
        rules=tuple(_typed(filing.get("rules", []), list, "filing.rules", path)),
    )
    kw["memory"] = _memory(doc.get("memory", {}), path, warnings)
    kw["warnings"] = tuple(warnings)
    return Config(**kw)


def _filing_mirror(value: Any, count: int, path: Path) -> int:
    """``[filing] mirror``: which ``[[mirror]]`` (0 = the first) the drop folder files into."""
    index = int(_typed(value, int, "filing.mirror", path))
    if not 0 <= index < count:
        raise ConfigError(f"{path}: `filing.mirror` is {index}, but there {'is' if count == 1 else 'are'} "
                          f"{count} [[mirror]] table{'s' if count != 1 else ''} (0 is the first).")
    return index


def _memory(raw: Any, path: Path, warnings: list[str]) -> MemoryConfig:
    """The ``[memory]`` table."""
    from ohsync.engine.memory_index import parse_offset

    _typed(raw, dict, "memory", path)
    warnings += _unknown(raw, _MEMORY_KEYS, "memory.", path)
    offset = _typed(raw.get("time_offset", "+08:00"), str, "memory.time_offset", path)
    try:
        parse_offset(offset)
    except ValueError as exc:
        raise ConfigError(f"{path}: `memory.time_offset`: {exc}.") from None
    origin = _typed(raw.get("origin", "desktop"), str, "memory.origin", path).strip() or "desktop"
    return MemoryConfig(
        time_offset=offset,
        write_timeout=_number(raw.get("write_timeout", 30), "memory.write_timeout", path, 1, 3600),
        stamp_edits=_typed(raw.get("stamp_edits", False), bool, "memory.stamp_edits", path),
        stamp_quiet=_number(raw.get("stamp_quiet", 1), "memory.stamp_quiet", path, 0, 600),
        origin=origin,
    )


def _set_key(doc: Any, key: str, value: Any) -> None:
    """``doc[key] = value``, updating existing tables in place (their comments stay)."""
    current = doc.get(key)
    if isinstance(value, Mapping) and isinstance(current, (tomlkit.items.Table, tomlkit.items.InlineTable)):
        _update_table(current, value)
    elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        if isinstance(current, tomlkit.items.AoT) and len(current) == len(value):
            for table, new in zip(current, value):
                _update_table(table, new)
            return
        tables = tomlkit.aot()
        for v in value:
            tables.append(tomlkit.item(dict(v)))
        doc[key] = tables
    else:
        doc[key] = value


def _update_table(table: Any, value: Mapping[str, Any]) -> None:
    for old in [k for k in table if k not in value]:
        del table[old]
    for k, v in value.items():
        if table.get(k) != v:
            table[k] = v


def update_config(path: Path, values: Mapping[str, Any]) -> None:
    """Set top-level keys in the config file, keeping every other key and the comments.

    The file is edited with tomlkit, so what the person wrote stays as it
    was; a table value (``filing``) updates that table in place; a list of
    tables (``mirror``) is written as ``[[mirror]]`` tables, so another one
    can be appended by hand as the README shows.  The file is replaced
    atomically and created ``0600`` with its folder when missing.

    :raises ConfigError: the existing file is invalid or cannot be written.
    """
    read_document(path)  # the same sentence as loading for an unreadable or invalid file
    try:
        doc = tomlkit.parse(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        doc = tomlkit.document()
    for key, value in values.items():
        _set_key(doc, key, value)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = tomlkit.dumps(doc).encode("utf-8")
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o600
    fd, tmp = tempfile.mkstemp(prefix=".config-", suffix=".toml", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise ConfigError(f"Cannot write {path}: {exc.strerror}.") from exc
