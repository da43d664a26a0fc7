"""The config file on disk: read as TOML, written back intact.

:func:`read_document` reads the raw document; :func:`update_config` changes
a few keys while keeping every other key of the file (known or not) and its
comments, through a temp file and a rename, so a crash never leaves half a
config behind.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomlkit
import tomlkit.items

from ..atomic_file import replace_file
from .checks import ConfigError

__all__ = ["read_document", "update_config"]


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


def _set_key(doc: Any, key: str, value: Any) -> None:
    """``doc[key] = value``, updating existing tables in place (their comments stay)."""
    current = doc.get(key)
    if isinstance(value, Mapping) and isinstance(current, (tomlkit.items.Table, tomlkit.items.InlineTable)):
        _update_table(current, value)
    elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        if isinstance(current, tomlkit.items.AoT) and len(current) == len(value):
            for table, new in zip(current, value, strict=True):
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
    try:
        replace_file(path, data, mode=mode, prefix=".config-")
    except OSError as exc:
        raise ConfigError(f"Cannot write {path}: {exc.strerror}.") from exc
