"""Checking the values of the config file: each key's type and range, each table's keys.

Every check raises :class:`~ohsync.daemon.config.model.ConfigError` with a
sentence naming the file, the key and what it must be; unknown keys become
warnings (:func:`unknown_keys`).  ``daemon/config/__init__.py`` :func:`load_config`
applies them to the document.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...engine.client.paths import normalize_remote_path
from ...engine.ignore import pattern_problem
from .model import DEFAULT_LIBRARY, MEMORY_KEYS, ConfigError, MemoryConfig, MirrorConfig

__all__ = ["normalize_server_url", "typed", "unknown_keys", "expand_path", "folder", "number", "mirror_table",
           "check_mirrors", "filing_mirror", "memory_table"]


def normalize_server_url(url: str) -> str:
    """``cloud.example.org/`` → ``https://cloud.example.org``: the form used as keyring key.

    :raises ConfigError: not an http(s) address, or a port outside 1–65535.
    """
    url = url.strip()
    if url and "://" not in url:
        url = "https://" + url
    scheme = url.split("://", 1)[0].lower()
    if url and (scheme not in ("http", "https") or not url.split("://", 1)[1].strip("/")):
        raise ConfigError(f"The server address {url!r} is not a web address: it must look like "
                          "https://cloud.example.edu (http:// only for a server on this computer).")
    if url:
        from urllib.parse import urlsplit

        try:
            port = urlsplit(url).port
        except ValueError:  # not a number, or over 65535
            port = -1
        if port is not None and not 1 <= port <= 65535:
            written = url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[-1]
            raise ConfigError(f"The server address {url!r} has an invalid port ({written}): a port is a number "
                              "from 1 to 65535, e.g. https://cloud.example.edu:8443 (or no port for the usual one).")
    return url.rstrip("/")


def typed(value: Any, types: type | tuple[type, ...], key: str, path: Path) -> Any:
    """``value`` when it is one of ``types`` (a bool only where bool is named).

    :param key: the dotted key, named in the message; ``path``: the config file.
    :raises ConfigError: the value has another type.
    """
    if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
        raise ConfigError(f"{path}: `{key}` has the wrong type ({value!r}).")
    if not isinstance(value, types):
        raise ConfigError(f"{path}: `{key}` has the wrong type ({value!r}).")
    return value


def unknown_keys(table: Mapping[str, Any], known: set[str], where: str, path: Path) -> list[str]:
    """One warning per key of ``table`` not in ``known`` (``where``: the table's prefix, ``"mirror."``)."""
    return [f"{path}: unknown key `{where}{k}` (kept, but ignored)" for k in table if k not in known]


def expand_path(value: str) -> Path:
    """``value`` with ``~`` and ``$VARS`` expanded."""
    return Path(os.path.expanduser(os.path.expandvars(value)))


def folder(value: str, key: str, path: Path) -> Path:
    """An absolute folder (``~`` and ``$VARS`` expanded); relative or empty is refused,
    since it would depend on the daemon's working directory.

    :raises ConfigError: naming ``key``.
    """
    result = expand_path(value)
    if not value.strip() or not result.is_absolute():
        raise ConfigError(f"{path}: `{key}` must be an absolute folder (such as \"~/OH-Memory\"), "
                          f"not {value!r}.")
    return result


def number(value: Any, key: str, path: Path, lo: float, hi: float) -> float:
    """A finite number in ``[lo, hi]``.

    :raises ConfigError: not a number, or out of range.
    """
    result = float(typed(value, (int, float), key, path))
    if not math.isfinite(result) or not lo <= result <= hi:
        raise ConfigError(f"{path}: `{key}` must be a number from {lo:g} to {hi:g}, not {value!r}.")
    return result


def mirror_table(raw: Mapping[str, Any], path: Path) -> MirrorConfig:
    """One ``[[mirror]]`` table as a :class:`MirrorConfig` (defaults filled in).

    :raises ConfigError: a value of the wrong type, an invalid ignore pattern or remote folder.
    """
    library = raw.get("library")
    library_id = raw.get("library_id")
    name = raw.get("name")
    if name is not None:
        name = typed(name, str, "mirror.name", path).strip() or None
    server = raw.get("server")
    if server is not None:
        server = normalize_server_url(typed(server, str, "mirror.server", path)) or None
    username = raw.get("username")
    if username is not None:
        username = typed(username, str, "mirror.username", path).strip() or None
    if library is not None:
        typed(library, str, "mirror.library", path)
    if library_id is not None:
        typed(library_id, str, "mirror.library_id", path)
    if library is None and library_id is None:
        library = DEFAULT_LIBRARY
    ignore = raw.get("ignore", [])
    typed(ignore, list, "mirror.ignore", path)
    for pattern in ignore:
        problem = pattern_problem(str(pattern))
        if problem is not None:
            raise ConfigError(f"{path}: `mirror.ignore` pattern {pattern!r} is not valid gitignore syntax "
                              f"({problem}).")
    remote = typed(raw.get("remote", "/"), str, "mirror.remote", path) or "/"
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
        local=folder(typed(raw.get("local", f"~/{DEFAULT_LIBRARY}"), str, "mirror.local", path),
                      "mirror.local", path),
        ignore=tuple(str(p) for p in ignore),
        name=name,
        server=server,
        username=username,
    )


def overlap(a: Path, b: Path) -> bool:
    """True when one folder is the other or lies inside it (as written, or once symlinks are followed)."""
    for x, y in ((a, b), (Path(os.path.realpath(a)), Path(os.path.realpath(b)))):
        if x == y or x in y.parents or y in x.parents:
            return True
    return False


def check_mirrors(mirrors: list[MirrorConfig], path: Path) -> None:
    """Two mirrors on one folder (or one inside the other) would sync each
    other's files: refused, as are two mirrors answering to the same name.

    :raises ConfigError: naming both tables and what to change.
    """
    for i, a in enumerate(mirrors):
        for j in range(i):
            b = mirrors[j]
            if overlap(a.local, b.local):
                same = os.path.realpath(a.local) == os.path.realpath(b.local)
                how = "the same folder" if same else "folders inside each other"
                raise ConfigError(
                    f"{path}: [[mirror]] tables {j + 1} ({b.label}) and {i + 1} ({a.label}) use {how} "
                    f"({b.local} and {a.local}); each mirror needs a folder of its own: change `local` "
                    "of one of them.")
            if a.name and a.name == b.name:
                raise ConfigError(f"{path}: [[mirror]] tables {j + 1} and {i + 1} are both named {a.name!r}; "
                                  "give each mirror its own `name`.")


def filing_mirror(value: Any, count: int, path: Path) -> int:
    """``[filing] mirror``: which ``[[mirror]]`` (0 = the first) the drop folder files into."""
    index = int(typed(value, int, "filing.mirror", path))
    if not 0 <= index < count:
        raise ConfigError(f"{path}: `filing.mirror` is {index}, but there {'is' if count == 1 else 'are'} "
                          f"{count} [[mirror]] table{'s' if count != 1 else ''} (0 is the first).")
    return index


def memory_table(raw: Any, path: Path, warnings: list[str]) -> MemoryConfig:
    """The ``[memory]`` table."""
    from ...engine.memory.index import parse_offset
    from ...engine.place import local_offset, text_language

    typed(raw, dict, "memory", path)
    warnings += unknown_keys(raw, MEMORY_KEYS, "memory.", path)
    offset = typed(raw.get("time_offset", local_offset()), str, "memory.time_offset", path)
    try:
        parse_offset(offset)
    except ValueError as exc:
        raise ConfigError(f"{path}: `memory.time_offset`: {exc}.") from None
    origin = typed(raw.get("origin", "desktop"), str, "memory.origin", path).strip() or "desktop"
    language = typed(raw.get("language", "auto"), str, "memory.language", path).strip().lower()
    try:
        text_language(language)
    except ValueError as exc:
        raise ConfigError(f"{path}: `memory.language`: {exc}.") from None
    return MemoryConfig(
        time_offset=offset,
        write_timeout=number(raw.get("write_timeout", 30), "memory.write_timeout", path, 1, 3600),
        stamp_edits=typed(raw.get("stamp_edits", True), bool, "memory.stamp_edits", path),
        stamp_quiet=number(raw.get("stamp_quiet", 1), "memory.stamp_quiet", path, 0, 600),
        origin=origin,
        language=language,
    )
