"""The person's configuration: one TOML file, read with defaults, written back intact.

Owns where the config lives (``--config``, ``OHSYNC_CONFIG``, else
``user_config_dir/config.toml``; docs/architecture.md §3) and
:func:`load_config`, which turns the file into a :class:`Config`.  Unknown
keys are kept and reported as warnings, never errors.  The keys and their
defaults are ``daemon/config/model.py``; the checks of each value,
``daemon/config/checks.py``; reading and rewriting the file (every other key
and comment kept), ``daemon/config/file.py``.  Every name the daemon uses is
importable from here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import platformdirs

from .checks import (
    check_mirrors,
    expand_path,
    filing_mirror,
    folder,
    memory_table,
    mirror_table,
    normalize_server_url,
    number,
    typed,
    unknown_keys,
)
from .file import read_document, update_config
from .model import (
    APP_NAME,
    DEFAULT_LIBRARY,
    DEFAULT_POLL_INTERVAL,
    DEFAULT_PUSH_SAFETY_POLL,
    DEFAULT_TRANSFERS,
    FILING_KEYS,
    KEYRING_CHOICES,
    MIRROR_KEYS,
    SAFETY_KEYS,
    TOP_KEYS,
    Config,
    ConfigError,
    FilingConfig,
    MemoryConfig,
    MirrorConfig,
    SafetyConfig,
)

__all__ = [
    "APP_NAME",
    "DEFAULT_LIBRARY",
    "DEFAULT_POLL_INTERVAL",
    "DEFAULT_PUSH_SAFETY_POLL",
    "DEFAULT_TRANSFERS",
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


def config_path(cli_value: str | os.PathLike[str] | None = None) -> Path:
    """Which config file to use: ``--config``, else ``OHSYNC_CONFIG``, else the default."""
    if cli_value:
        return Path(cli_value).expanduser()
    env = os.environ.get("OHSYNC_CONFIG")
    if env:
        return Path(env).expanduser()
    return Path(platformdirs.user_config_dir(APP_NAME)) / "config.toml"


def load_config(path: Path | None = None) -> Config:
    """Read the config file (missing file = all defaults), and select the token
    store it names (``keyring = "file"``: :func:`ohsync.daemon.credentials.use_file_store`).

    :param path: the file; ``None`` = :func:`config_path`.
    :raises ConfigError: invalid TOML or a value of the wrong type.
    """
    path = path if path is not None else config_path()
    doc = read_document(path)
    warnings = unknown_keys(doc, TOP_KEYS, "", path)
    kw: dict[str, Any] = {"path": path}
    if "server" in doc:
        kw["server"] = normalize_server_url(typed(doc["server"], str, "server", path))
    if "username" in doc:
        kw["username"] = typed(doc["username"], str, "username", path).strip()
    if "poll_interval" in doc:
        kw["poll_interval"] = number(doc["poll_interval"], "poll_interval", path, 0.1, 86_400)
    if "state_dir" in doc:
        kw["state_dir"] = folder(typed(doc["state_dir"], str, "state_dir", path), "state_dir", path)
        kw["state_dir_explicit"] = True
        kw["log_dir"] = kw["state_dir"] / "logs"
    if "log_dir" in doc:
        kw["log_dir"] = expand_path(typed(doc["log_dir"], str, "log_dir", path))
    env_socket = os.environ.get("OHSYNC_SOCKET")
    if env_socket:
        kw["socket"] = Path(env_socket).expanduser()
    elif "socket" in doc:
        kw["socket"] = expand_path(typed(doc["socket"], str, "socket", path))
    if "create_library" in doc:
        kw["create_library"] = typed(doc["create_library"], bool, "create_library", path)
    if "transfers" in doc:
        kw["transfers"] = int(number(typed(doc["transfers"], int, "transfers", path), "transfers", path, 1, 16))
    if "notifications" in doc:
        kw["notifications"] = typed(doc["notifications"], bool, "notifications", path)
    if "push_safety_poll" in doc:
        kw["push_safety_poll"] = number(doc["push_safety_poll"], "push_safety_poll", path, 1, 86_400)
    if "upload_request_mib" in doc:
        kw["upload_request_mib"] = int(number(typed(doc["upload_request_mib"], int, "upload_request_mib", path),
                                              "upload_request_mib", path, 8, 4096))
    if "panel_port" in doc:
        kw["panel_port"] = int(number(typed(doc["panel_port"], int, "panel_port", path), "panel_port", path, -1, 65535))

    raw_mirrors = doc.get("mirror", [])
    if isinstance(raw_mirrors, dict):  # a single [mirror] table instead of [[mirror]]
        raw_mirrors = [raw_mirrors]
    typed(raw_mirrors, list, "mirror", path)
    mirrors = []
    for i, raw in enumerate(raw_mirrors):
        typed(raw, dict, f"mirror[{i}]", path)
        warnings += unknown_keys(raw, MIRROR_KEYS, "mirror.", path)
        mirrors.append(mirror_table(raw, path))
    check_mirrors(mirrors, path)
    if mirrors:
        kw["mirrors"] = tuple(mirrors)

    safety = doc.get("safety", {})
    typed(safety, dict, "safety", path)
    warnings += unknown_keys(safety, SAFETY_KEYS, "safety.", path)
    kw["safety"] = SafetyConfig(
        max_delete_percent=number(safety.get("max_delete_percent", 25), "safety.max_delete_percent", path, 0, 100),
        max_delete_files=int(number(typed(safety.get("max_delete_files", 50), int, "safety.max_delete_files", path),
                                     "safety.max_delete_files", path, 0, 10**9)),
        percent_floor=int(number(typed(safety.get("percent_floor", 10), int, "safety.percent_floor", path),
                                  "safety.percent_floor", path, 0, 10**9)),
        backup_days=int(number(typed(safety.get("backup_days", 30), int, "safety.backup_days", path),
                                "safety.backup_days", path, 1, 36_500)),
    )

    filing = doc.get("filing", {})
    typed(filing, dict, "filing", path)
    warnings += unknown_keys(filing, FILING_KEYS, "filing.", path)
    kw["filing"] = FilingConfig(
        drop_dir=folder(typed(filing.get("drop_dir", "~/OH-Drop"), str, "filing.drop_dir", path),
                         "filing.drop_dir", path),
        mirror=filing_mirror(filing.get("mirror", 0), max(1, len(mirrors)), path),
        default=typed(filing.get("default", "/Files/_inbox/"), str, "filing.default", path),
        rules=tuple(typed(filing.get("rules", []), list, "filing.rules", path)),
    )
    if "keyring" in doc:
        kw["keyring"] = typed(doc["keyring"], str, "keyring", path)
        if kw["keyring"] not in KEYRING_CHOICES:
            raise ConfigError(f"{path}: `keyring` must be \"system\" (the OS keyring) or \"file\" (a file "
                              f"only you can read), not {kw['keyring']!r}.")
    kw["memory"] = memory_table(doc.get("memory", {}), path, warnings)
    kw["warnings"] = tuple(warnings)
    cfg = Config(**kw)
    # the token store follows the config this process reads (daemon/credentials.py)
    from ..credentials import use_file_store

    use_file_store(cfg.credentials_file if cfg.keyring == "file" else None)
    return cfg
