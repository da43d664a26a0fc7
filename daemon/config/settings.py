"""What the config file sets, key by key: to tell whether a running daemon reads older settings.

The daemon keeps these of the file it started with and names them in its
``ping`` answer; ``ohsync doctor`` compares them with the file as it is
now.  They are the file's own values (not defaults), so a comment or a
different environment (``XDG_*``, the time zone) is no change.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["file_settings", "changed_settings"]


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), item, out)
    elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
        for index, item in enumerate(value):  # an array of tables: [[mirror]]
            _flatten(prefix if len(value) == 1 else f"{prefix}[{index}]", item, out)
    else:
        out[prefix] = json.dumps(value, default=str, sort_keys=True, ensure_ascii=False)


def file_settings(doc: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The keys ``doc`` (a parsed TOML document) sets, each with its value as JSON text.

    :returns: ``((dotted key, value), …)`` sorted by key; a key of the n-th of
        several ``[[mirror]]`` tables is ``mirror[n].key``, of a single one ``mirror.key``.
    """
    out: dict[str, str] = {}
    _flatten("", doc, out)
    return tuple(sorted(out.items()))


def changed_settings(theirs: Mapping[str, Any], ours: Mapping[str, str]) -> list[str]:
    """The keys set differently in ``theirs`` (a daemon's answer) and ``ours``: changed, added or removed.

    :returns: the dotted keys, sorted; empty when both set the same.
    """
    return sorted(k for k in set(theirs) | set(ours) if theirs.get(k) != ours.get(k))
