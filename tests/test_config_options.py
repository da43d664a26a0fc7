"""The option table of ``daemon/config/model.py`` is the one place of a config
key's default, type, check and doc: config parsing, the engine's options and
the README's table follow from it (docs/architecture.md §11, "A new mirror
option")."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ohsync.daemon.config import ConfigError, load_config
from ohsync.daemon.config.model import README_SECTIONS, Config, MirrorConfig
from ohsync.daemon.config.options import engine_values, integer, keys, option, options, read_table
from ohsync.daemon.config.readme import readme_block, readme_table, update_readme
from ohsync.engine.context import EngineOptions

REPO = Path(__file__).resolve().parent.parent


def test_the_readme_holds_the_current_option_table() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert readme_block() in readme, ("README.md's option table is stale: run "
                                      ".venv/bin/python -m ohsync.daemon.config.readme")


def test_the_readme_table_has_a_row_per_key_and_rewrites_only_its_block(tmp_path: Path) -> None:
    table = readme_table()
    for where, cls in README_SECTIONS:
        for name in keys(cls):
            prefix = "" if not where else "[[mirror]] " if where == "mirror" else f"[{where}] "
            assert f"| {prefix}`{name}` |" in table
    readme = tmp_path / "README.md"
    readme.write_text(f"before\n\n{readme_block('old')}\n\nafter\n", encoding="utf-8")
    assert update_readme(readme) and not update_readme(readme)
    assert readme.read_text(encoding="utf-8") == f"before\n\n{readme_block()}\n\nafter\n"


def test_every_key_of_the_readmes_example_is_in_the_option_table() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Configuration", 1)[1]
    example = re.search(r"```toml\n(.*?)```", section, re.S)
    assert example, "README.md's Configuration section has no TOML example"
    doc = tomllib.loads(re.sub(r"(?m)^# ", "", example.group(1)))  # the commented keys count too
    tables = {"mirror": MirrorConfig, **{t: c for t, c in README_SECTIONS if t and t != "mirror"}}
    unknown = [k for k in doc if k not in tables and k not in keys(Config)]
    for name, cls in tables.items():
        for table in doc.get(name, []) if name == "mirror" else [doc.get(name, {})]:
            unknown += [f"{name}.{k}" for k in table if k not in keys(cls)]
    assert unknown == [], f"the README's example shows keys the option table does not know: {unknown}"


def test_every_engine_option_names_a_field_of_engine_options() -> None:
    fields = {f.name for f in dataclasses.fields(EngineOptions)}
    named = [spec.engine for _t, cls in README_SECTIONS for _f, spec in options(cls) if spec.engine]
    assert named and set(named) <= fields, set(named) - fields
    assert len(named) == len(set(named)), "two keys fill one EngineOptions field"


def test_the_engine_gets_each_mirrors_values_from_the_table(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("\n".join([
        "upload_request_mib = 16", "[[mirror]]", f'local = "{tmp_path}/a"', 'ignore = ["*.tmp"]',
        "[[mirror]]", f'local = "{tmp_path}/b"', 'library = "B"',
        "[safety]", "max_delete_files = 7", "percent_floor = 3", "max_delete_percent = 12.5", "backup_days = 9",
        "[memory]", 'time_offset = "+02:00"', "stamp_edits = false", "stamp_quiet = 4", 'origin = "lab"']) + "\n",
        encoding="utf-8")
    cfg = load_config(config)
    first = cfg.engine_values(cfg.mirrors[0])
    assert first == {"upload_max_request": 16 * 1024 * 1024, "ignore": ("*.tmp",), "max_delete_files": 7,
                     "percent_floor": 3, "max_delete_percent": 12.5, "backup_days": 9, "time_offset": "+02:00",
                     "stamp_edits": False, "stamp_quiet": 4.0, "origin": "lab"}
    assert cfg.engine_values(cfg.mirrors[1])["ignore"] == ()
    options_ = EngineOptions(**first)  # what daemon/session.py builds, beside backup_dir and library_name
    assert options_.upload_max_request == 16 * 1024 * 1024 and options_.ignore == ("*.tmp",)


@pytest.mark.parametrize("table, cls", [(t, c) for t, c in README_SECTIONS])
def test_every_default_is_a_value_its_own_kind_accepts(table: str, cls: type) -> None:
    for f, spec in options(cls):
        assert spec.doc.strip(), f"{cls.__name__}.{f.name} has no doc"
        factory: Any = f.default_factory
        value = f.default if f.default is not dataclasses.MISSING else factory()
        if value is None:
            continue
        written = str(value) if isinstance(value, Path) else list(value) if isinstance(value, tuple) else value
        assert spec.kind.read(written, f"{table}.{f.name}", Path("config.toml")) == value, f.name


def test_a_new_option_is_one_field_read_checked_documented_and_handed_to_the_engine() -> None:
    @dataclass(frozen=True)
    class Table:
        max_attempts: int = option(4, kind=integer(1, 9), engine="max_attempts", doc="rounds before giving up")

    assert keys(Table) == {"max_attempts"}
    assert read_table(Table, {"max_attempts": 6}, "mirror.", Path("c.toml")) == {"max_attempts": 6}
    assert read_table(Table, {}, "mirror.", Path("c.toml")) == {}
    with pytest.raises(ConfigError, match=r"`mirror.max_attempts` must be a number from 1 to 9"):
        read_table(Table, {"max_attempts": 10}, "mirror.", Path("c.toml"))
    assert engine_values(Table(max_attempts=6)) == {"max_attempts": 6}
    assert ("| [[mirror]] `max_attempts` | whole number, 1 to 9 | `4` "
            "| rounds before giving up (engine: `max_attempts`) |") in readme_table([("mirror", Table)])
