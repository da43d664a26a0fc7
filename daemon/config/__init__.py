"""The person's configuration: one TOML file, read with defaults, written back intact.

Owns where the config lives (``--config``, ``OHSYNC_CONFIG``, else
``user_config_dir/config.toml``; docs/architecture.md §3) and
:func:`load_config`, which turns the file into a :class:`Config`.  Unknown
keys are kept and reported as warnings (naming a close known key), never
errors, but for a table under a typo of ``mirror``.  The keys, with their
defaults, kinds and docs, are the option table of ``daemon/config/model.py``
(read with ``daemon/config/options.py`` :func:`read_table`); the checks of
values, ``daemon/config/checks.py``; reading and rewriting the file (every
other key and comment kept), ``daemon/config/file.py``.  Here are only the
checks across keys (overlapping mirrors, ``state_dir`` → ``log_dir``,
``OHSYNC_SOCKET``, ``[filing] mirror``).  Every name the daemon uses is
importable from here.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import platformdirs

from .checks import (
    ConfigError,
    check_mirrors,
    filing_mirror,
    normalize_server_url,
    typed,
    unknown_keys,
)
from .file import read_document, update_config
from .model import (
    APP_NAME,
    DEFAULT_LIBRARY,
    FILING_KEYS,
    MEMORY_KEYS,
    MIRROR_KEYS,
    SAFETY_KEYS,
    TOP_KEYS,
    Config,
    FilingConfig,
    MemoryConfig,
    MirrorConfig,
    SafetyConfig,
)
from .options import read_table
from .settings import file_settings

__all__ = [
    "APP_NAME",
    "DEFAULT_LIBRARY",
    "ConfigError",
    "MirrorConfig",
    "SafetyConfig",
    "FilingConfig",
    "MemoryConfig",
    "Config",
    "config_path",
    "load_config",
    "mirror_table",
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
    warnings = unknown_keys(doc, TOP_KEYS, "", path, decisive=frozenset({"mirror"}))
    kw: dict[str, Any] = {"path": path, **read_table(Config, doc, "", path)}
    if "state_dir" in kw:
        kw["state_dir_explicit"] = True
        kw.setdefault("log_dir", kw["state_dir"] / "logs")  # unless the file sets log_dir
    env_socket = os.environ.get("OHSYNC_SOCKET")
    if env_socket:
        kw["socket"] = Path(env_socket).expanduser()

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

    safety = typed(doc.get("safety", {}), dict, "safety", path)
    warnings += unknown_keys(safety, SAFETY_KEYS, "safety.", path)
    kw["safety"] = SafetyConfig(**read_table(SafetyConfig, safety, "safety.", path))

    filing = typed(doc.get("filing", {}), dict, "filing", path)
    warnings += unknown_keys(filing, FILING_KEYS, "filing.", path)
    kw["filing"] = FilingConfig(**{**read_table(FilingConfig, filing, "filing.", path),
                                   "mirror": filing_mirror(filing.get("mirror", 0), max(1, len(mirrors)), path)})

    memory = typed(doc.get("memory", {}), dict, "memory", path)
    warnings += unknown_keys(memory, MEMORY_KEYS, "memory.", path)
    kw["memory"] = MemoryConfig(**read_table(MemoryConfig, memory, "memory.", path))
    kw["warnings"] = tuple(warnings)
    kw["settings"] = file_settings(doc)
    cfg = Config(**kw)
    # the token store follows the config this process reads (daemon/credentials.py)
    from ..credentials import use_file_store

    use_file_store(cfg.credentials_file if cfg.keyring == "file" else None)
    return cfg


def mirror_table(raw: dict[str, Any], path: Path) -> MirrorConfig:
    """One ``[[mirror]]`` table as a :class:`MirrorConfig` (defaults filled in;
    a table naming only ``library_id`` names no library by name).

    :raises ConfigError: a value of the wrong type, an invalid ignore pattern or remote folder.
    """
    values = read_table(MirrorConfig, raw, "mirror.", path)
    if "library" not in raw and "library_id" in raw:
        values["library"] = None
    return MirrorConfig(**values)
