"""Checking the values of the config file: types, ranges, and the checks of single keys.

Every check raises :class:`ConfigError` with a sentence naming the file,
the key and what it must be; unknown keys become warnings
(:func:`unknown_keys`).  The option table (``daemon/config/model.py``, its
kinds in ``daemon/config/options.py``) applies them to each key; the
checks across keys (:func:`check_mirrors`, :func:`filing_mirror`) are
``daemon/config/__init__.py`` :func:`load_config`'s.
"""

from __future__ import annotations

import difflib
import math
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...engine.client.paths import normalize_remote_path
from ...engine.errors import OhsyncError
from ...engine.ignore import pattern_problem

if TYPE_CHECKING:
    from .model import MirrorConfig

__all__ = ["ConfigError", "normalize_server_url", "typed", "unknown_keys", "expand_path", "folder", "number",
           "ignore_pattern", "remote_folder", "time_offset", "text_language", "check_mirrors", "filing_mirror"]


class ConfigError(OhsyncError):
    """The config file cannot be read or holds a value of the wrong type."""

    title = "Configuration error"


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
    wanted = types if isinstance(types, tuple) else (types,)
    if (isinstance(value, bool) and bool not in wanted) or not isinstance(value, types):
        raise ConfigError(f"{path}: `{key}` has the wrong type ({value!r}): it must be {_kinds(wanted)}.")
    return value


#: How a TOML value of each Python type is written, for the messages.
_KIND = {bool: "true or false", int: "a whole number (e.g. 30)", float: "a number (e.g. 30 or 2.5)",
         str: 'a quoted text (e.g. "OH-Memory")', list: "a list in brackets (e.g. [\"a\", \"b\"])",
         dict: "a table"}


def _kinds(types: tuple[type, ...]) -> str:
    """``"a number (e.g. 30 or 2.5)"`` for ``(int, float)``: the widest kind named once."""
    if float in types:
        types = tuple(t for t in types if t is not int)
    return " or ".join(_KIND.get(t, t.__name__) for t in types)


def unknown_keys(table: Mapping[str, Any], known: set[str], where: str, path: Path,
                 decisive: frozenset[str] = frozenset()) -> list[str]:
    """One warning per key of ``table`` not in ``known`` (``where``: the table's prefix, ``"mirror."``),
    with "did you mean `…`?" when a known key is close to it (:func:`difflib.get_close_matches`).

    :param decisive: known keys whose table decides what is mirrored (``mirror``): a table
        or array of tables under a key close to one of them is a typo that would quietly
        mirror the defaults instead, so it is an error.
    :raises ConfigError: such a typo of a ``decisive`` key.
    """
    warnings = []
    for key in table:
        if key in known:
            continue
        close = difflib.get_close_matches(str(key), sorted(known), n=1)
        if not close:
            warnings.append(f"{path}: unknown key `{where}{key}` (kept, but ignored)")
            continue
        value = table[key]
        is_table = isinstance(value, Mapping) or (isinstance(value, list) and any(isinstance(v, Mapping)
                                                                                     for v in value))
        if close[0] in decisive and is_table:
            raise ConfigError(f"{path}: unknown table `{where}{key}`: did you mean `{where}{close[0]}`? As "
                              "written, ohsync would ignore it and mirror the default library and folder. Fix the "
                              "file or move it away.")
        warnings.append(f"{path}: unknown key `{where}{key}` (kept, but ignored): did you mean `{where}{close[0]}`?")
    return warnings


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


def ignore_pattern(pattern: str, key: str, path: Path) -> None:
    """An ignore pattern in gitignore syntax.

    :raises ConfigError: it is not valid.
    """
    problem = pattern_problem(pattern)
    if problem is not None:
        raise ConfigError(f"{path}: `{key}` pattern {pattern!r} is not valid gitignore syntax ({problem}).")


def remote_folder(remote: str, key: str, path: Path) -> None:
    """A folder of the library, written from its top (else every sync pass fails with an internal error).

    :raises ConfigError: not a folder path of the library.
    """
    try:
        normalize_remote_path(remote)
    except ValueError as exc:
        raise ConfigError(f"{path}: `{key}` {remote!r} is not a folder of the library "
                          f"({str(exc).rsplit(': ', 1)[-1]}); write it from the library's top, "
                          "such as \"/Files\".") from None


def time_offset(offset: str, key: str, path: Path) -> None:
    """A UTC offset ``±HH:MM``.

    :raises ConfigError: not one.
    """
    from ...engine.memory.index import parse_offset

    try:
        parse_offset(offset)
    except ValueError as exc:
        raise ConfigError(f"{path}: `{key}`: {exc}.") from None


def text_language(language: str, key: str, path: Path) -> None:
    """``auto``, ``zh`` or ``en``.

    :raises ConfigError: another value.
    """
    from ...engine.place import text_language as check

    try:
        check(language)
    except ValueError as exc:
        raise ConfigError(f"{path}: `{key}`: {exc}.") from None


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
