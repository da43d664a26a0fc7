"""The README's option table, made from the option table of ``daemon/config/model.py``.

``.venv/bin/python -m ohsync.daemon.config.readme [README.md]`` rewrites the
block between the README's markers; ``tests/test_config_options.py`` fails
while that copy is stale.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
from dataclasses import MISSING
from pathlib import Path
from typing import Any

from .model import README_SECTIONS
from .options import Spec, options

__all__ = ["README_BEGIN", "README_END", "readme_table", "readme_block", "update_readme"]

#: The README's markers around the generated table.
README_BEGIN = "<!-- options: generated from daemon/config/model.py by `python -m ohsync.daemon.config.readme` -->"
README_END = "<!-- /options -->"


def _shown(f: dataclasses.Field[Any], spec: Spec) -> str:
    """The default as a TOML value (or the option's ``shown`` sentence)."""
    if spec.shown is not None:
        return spec.shown
    factory: Any = f.default_factory
    value = f.default if f.default is not MISSING else factory()
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and math.isfinite(value) and value == int(value):
        return f"`{int(value)}`"
    if isinstance(value, (int, float)):
        return f"`{value}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, tuple) and not value:
        return "`[]`"
    if value is None:
        return "—"
    raise ValueError(f"the option {f.name} needs `shown` for its default {value!r}")


def readme_table(sections: list[tuple[str, type]] = README_SECTIONS) -> str:
    """The README's option table: one row per key of each ``(table, dataclass)``
    (``table``: ``""`` top level, ``"mirror"`` for ``[[mirror]]``, else ``[name]``)."""
    rows = ["| key | type | default | what it does |", "|---|---|---|---|"]
    for table, cls in sections:
        where = "" if not table else "[[mirror]] " if table == "mirror" else f"[{table}] "
        for f, spec in options(cls):
            doc = spec.doc + (f" (engine: `{spec.engine}`)" if spec.engine else "")
            rows.append(f"| {where}`{f.name}` | {spec.kind.name} | {_shown(f, spec)} | {doc} |")
    return "\n".join(rows)


def readme_block(table: str | None = None) -> str:
    """The README's block (markers included) for ``table`` (default: :func:`readme_table`)."""
    return f"{README_BEGIN}\n{readme_table() if table is None else table}\n{README_END}"


def update_readme(readme: Path, table: str | None = None) -> bool:
    """Put ``table`` (default: :func:`readme_table`) between the README's markers.

    :returns: True when the file changed.
    :raises ValueError: the markers are missing.
    """
    text = readme.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(README_BEGIN) + r".*?" + re.escape(README_END), re.S)
    if not pattern.search(text):
        raise ValueError(f"{readme} has no option table markers ({README_BEGIN} … {README_END})")
    block = readme_block(table)
    new = pattern.sub(lambda m: block, text, count=1)
    if new == text:
        return False
    readme.write_text(new, encoding="utf-8")
    return True


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[2] / "README.md"
    print(f"{target}: option table {'rewritten' if update_readme(target) else 'already current'}")
