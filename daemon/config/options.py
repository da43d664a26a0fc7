"""The option table's machinery: one place per config key for its default, type, check and doc.

Every key of the config file is a field of a dataclass of
``daemon/config/model.py`` declared with :func:`option` (as Maestral keeps
its ``DEFAULTS_CONFIG``): the field's default is the key's, its
:class:`Kind` reads and checks the file's value, its ``doc`` is the line
of the README's option table, and ``engine`` names the
:class:`~ohsync.engine.context.EngineOptions` field it fills.  From that
one declaration follow:

* reading the file: :func:`read_table` (``daemon/config/__init__.py``
  applies it to each table), and the keys each table knows (:func:`keys`:
  other keys are kept and reported as warnings);
* the engine's options: :func:`engine_values` (``daemon/session.py``);
* the README's table: ``daemon/config/readme.py``, kept current by
  ``.venv/bin/python -m ohsync.daemon.config.readme`` (``tests/test_config_options.py``
  fails while it is stale).

So a new option is one field of its table's dataclass plus the code that
uses it (docs/architecture.md §11).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any

from .checks import ConfigError, expand_path, folder, normalize_server_url, number, typed

__all__ = ["OPTION", "Kind", "Spec", "option", "options", "keys", "read_table", "engine_values", "boolean",
           "integer", "real", "text", "choice", "folder_path", "file_path", "server_url", "strings", "tables"]

#: The key of an option's :class:`Spec` in its field's ``metadata``.
OPTION = "ohsync.option"

@dataclass(frozen=True)
class Kind:
    """How a key's value is read: ``read(value, dotted key, config file)``.

    :ivar name: the type as the README's table names it (``number, 0.1–86400``).
    :ivar read: the file's value → the field's value.
    :raises ConfigError: (from ``read``) a value of the wrong type or out of
        range, in a sentence naming the file and the key.
    """

    name: str
    read: Callable[[Any, str, Path], Any]


@dataclass(frozen=True)
class Spec:
    """What the option table says of one key (see the module docstring).

    :ivar kind: its type and check.
    :ivar doc: one line for the README's table: what the key does.
    :ivar engine: the ``EngineOptions`` field it fills (None: the daemon's own).
    :ivar to_engine: the value → the engine's (a unit change), when it differs.
    :ivar shown: the default as the README shows it, when it is computed
        (a folder under the home, the computer's offset).
    """

    kind: Kind
    doc: str
    engine: str | None = None
    to_engine: Callable[[Any], Any] | None = None
    shown: str | None = None


def option(default: Any = MISSING, *, kind: Kind, doc: str, factory: Callable[[], Any] | None = None,
           engine: str | None = None, to_engine: Callable[[Any], Any] | None = None,
           shown: str | None = None) -> Any:
    """A dataclass field that is a config key (the field's name is the key).

    :param default: the key's default (or ``factory``, which makes it).
    :param kind: its type and check (:func:`boolean`, :func:`integer` …).
    :param doc: what it does, one line.
    :param engine: the ``EngineOptions`` field it fills; ``to_engine``
        converts the value on the way.
    :param shown: the default as the README shows it (a computed one).
    :returns: a :func:`dataclasses.field`.
    """
    spec = {OPTION: Spec(kind, doc, engine, to_engine, shown)}
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=spec)
    return dataclasses.field(default=default, metadata=spec)


def options(cls: type) -> list[tuple[dataclasses.Field[Any], Spec]]:
    """The fields of the dataclass ``cls`` that are config keys, in their order."""
    return [(f, f.metadata[OPTION]) for f in dataclasses.fields(cls) if OPTION in f.metadata]


def keys(cls: type) -> set[str]:
    """The config keys of the dataclass ``cls``."""
    return {f.name for f, _spec in options(cls)}


def read_table(cls: type, raw: Mapping[str, Any], where: str, path: Path) -> dict[str, Any]:
    """The values of ``cls``'s keys that ``raw`` sets, read and checked (the
    others keep their defaults when ``cls`` is built from them).

    :param where: the table's prefix in messages (``"mirror."``, ``""``).
    :raises ConfigError: a value of the wrong type or out of range.
    """
    return {f.name: spec.kind.read(raw[f.name], where + f.name, path) for f, spec in options(cls) if f.name in raw}


def engine_values(*tables: Any) -> dict[str, Any]:
    """``EngineOptions`` field → value, from the options of the config objects
    ``tables`` (a :class:`~ohsync.daemon.config.model.Config`, its
    ``safety``, ``memory`` and one ``MirrorConfig``) that name an ``engine`` field."""
    values: dict[str, Any] = {}
    for table in tables:
        for f, spec in options(type(table)):
            if spec.engine is not None:
                value = getattr(table, f.name)
                values[spec.engine] = spec.to_engine(value) if spec.to_engine is not None else value
    return values


# ----------------------------------------------------------------- kinds

def boolean() -> Kind:
    """``true`` or ``false``."""
    return Kind("true or false", lambda v, key, path: typed(v, bool, key, path))


def _number(value: float) -> str:
    return f"{int(value):,}" if value == int(value) else f"{value:g}"


def _range(lo: float | None, hi: float | None) -> str:
    if lo is None or hi is None:
        return ""
    return f", {_number(lo)} to {_number(hi)}"


def integer(lo: int | None = None, hi: int | None = None) -> Kind:
    """A whole number (a bool is refused) in ``[lo, hi]`` when bounds are given."""

    def read(v: Any, key: str, path: Path) -> int:
        value = typed(v, int, key, path)
        if lo is not None and hi is not None:
            return int(number(value, key, path, lo, hi))
        return int(value)
    return Kind("whole number" + _range(lo, hi), read)


def real(lo: float, hi: float) -> Kind:
    """A finite number (whole or not) in ``[lo, hi]``."""
    return Kind(f"number{_range(lo, hi)}", lambda v, key, path: number(v, key, path, lo, hi))


#: :func:`text`'s ``empty`` when an empty string is a value like any other.
_AS_IS: Any = object()


def text(*, strip: bool = False, lower: bool = False, empty: Any = _AS_IS,
         check: Callable[[str, str, Path], None] | None = None) -> Kind:
    """A string.

    :param strip: spaces around it removed; ``lower``: lower-cased.
    :param empty: what an empty string becomes (``None``: unset; a string:
        that default); without it an empty string is checked like any other.
    :param check: ``check(value, key, path)`` raises :class:`ConfigError` for a value it refuses.
    """

    def read(v: Any, key: str, path: Path) -> Any:
        value = typed(v, str, key, path)
        value = value.strip() if strip else value
        value = value.lower() if lower else value
        if not value and empty is not _AS_IS:
            return empty
        if check is not None:
            check(value, key, path)
        return value
    return Kind("string", read)


def choice(*choices: str, meaning: Mapping[str, str]) -> Kind:
    """One of ``choices`` (``meaning``: what each is, for the message)."""

    def read(v: Any, key: str, path: Path) -> str:
        value: str = typed(v, str, key, path)
        if value not in choices:
            said = " or ".join(f'"{c}" ({meaning[c]})' for c in choices)
            raise ConfigError(f"{path}: `{key}` must be {said}, not {value!r}.")
        return value
    return Kind(" or ".join(f'"{c}"' for c in choices), read)


def folder_path() -> Kind:
    """An absolute folder (``~`` and ``$VARS`` expanded)."""
    return Kind("absolute folder", lambda v, key, path: folder(typed(v, str, key, path), key, path))


def file_path() -> Kind:
    """A path (``~`` and ``$VARS`` expanded)."""
    return Kind("path", lambda v, key, path: expand_path(typed(v, str, key, path)))


def server_url(*, empty: Any = "") -> Kind:
    """A server's web address, normalised (:func:`normalize_server_url`); empty → ``empty``."""
    return Kind("web address",
                lambda v, key, path: normalize_server_url(typed(v, str, key, path)) or empty)


def strings(check: Callable[[str, str, Path], None] | None = None) -> Kind:
    """A list of strings (each passed to ``check``), as a tuple."""

    def read(v: Any, key: str, path: Path) -> tuple[str, ...]:
        items = [str(item) for item in typed(v, list, key, path)]
        if check is not None:
            for item in items:
                check(item, key, path)
        return tuple(items)
    return Kind("list of strings", read)


def tables() -> Kind:
    """A list of inline tables, as a tuple (each checked by its user)."""
    return Kind("list of tables", lambda v, key, path: tuple(typed(v, list, key, path)))
