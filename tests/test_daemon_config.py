"""Config: defaults, the keys of docs/architecture.md §10, unknown keys kept and warned about."""

from __future__ import annotations

import os
import sys
import tomllib
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import isolated_env  # noqa: F401
from ohsync.daemon.config import (
    ConfigError,
    config_path,
    load_config,
    normalize_server_url,
    update_config,
)


def test_missing_file_gives_defaults(isolated_env, tmp_path: Path) -> None:
    cfg = load_config(tmp_path / "nope.toml")
    assert cfg.server == "" and cfg.username == ""
    assert cfg.poll_interval == 30
    assert cfg.create_library is False
    assert cfg.mirrors[0].library == "OH-Memory" and cfg.mirrors[0].remote == "/"
    assert cfg.mirrors[0].local == Path.home() / "OH-Memory"
    assert cfg.safety.max_delete_percent == 25 and cfg.safety.max_delete_files == 50
    assert cfg.safety.backup_days == 30
    assert cfg.socket == isolated_env.socket  # $XDG_RUNTIME_DIR/ohsync/ohsync.sock
    assert cfg.warnings == ()


def test_all_keys_read(isolated_env, tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(f'''
server = "cloud.example.org/"
username = "u@example.edu.cn"
poll_interval = 5
state_dir = "{tmp_path}/state"
socket = "{tmp_path}/s.sock"
create_library = true
[[mirror]]
library_id = "4F0C0000-0000-0000-0000-000000000000"
remote = "/sub"
local = "{tmp_path}/mirror"
ignore = [".obsidian/workspace*.json"]
[safety]
max_delete_percent = 10
max_delete_files = 3
backup_days = 7
[filing]
drop_dir = "{tmp_path}/drop"
default = "/Files/x/"
rules = [{{ match = "*.pdf", dest = "/Files/pdf/" }}]
''', encoding="utf-8")
    cfg = load_config(path)
    assert cfg.server == "https://cloud.example.org"
    assert cfg.poll_interval == 5.0
    assert cfg.state_dir == tmp_path / "state" and cfg.state_dir_explicit
    assert cfg.log_dir == tmp_path / "state" / "logs"
    assert cfg.socket == tmp_path / "s.sock"
    assert cfg.create_library is True
    assert cfg.mirrors[0].library_id == "4f0c0000-0000-0000-0000-000000000000"
    assert cfg.mirrors[0].remote == "/sub" and cfg.mirrors[0].local == tmp_path / "mirror"
    assert cfg.mirrors[0].ignore == (".obsidian/workspace*.json",)
    assert cfg.safety.max_delete_files == 3 and cfg.safety.backup_days == 7
    assert cfg.filing.default == "/Files/x/" and cfg.filing.rules[0]["dest"] == "/Files/pdf/"
    assert cfg.warnings == ()


def test_round_trip_keeps_unknown_keys(isolated_env, tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('''
poll_interval = 12
future_key = "keep me"
[[mirror]]
library = "Notes"
colour = "blue"
[plugin]
x = [1, 2]
''', encoding="utf-8")
    cfg = load_config(path)
    assert any("future_key" in w for w in cfg.warnings)
    assert any("mirror.colour" in w for w in cfg.warnings)
    assert any("plugin" in w for w in cfg.warnings)
    update_config(path, {"server": "https://s.example", "username": "me@example.edu.cn"})
    doc = tomllib.loads(path.read_text(encoding="utf-8"))
    assert doc["server"] == "https://s.example" and doc["username"] == "me@example.edu.cn"
    assert doc["future_key"] == "keep me"
    assert doc["poll_interval"] == 12
    assert doc["mirror"] == [{"library": "Notes", "colour": "blue"}]
    assert doc["plugin"] == {"x": [1, 2]}
    assert load_config(path).mirrors[0].library == "Notes"


def test_update_creates_private_file(isolated_env, tmp_path: Path) -> None:
    path = tmp_path / "new" / "config.toml"
    update_config(path, {"server": "https://s"})
    assert oct(path.stat().st_mode & 0o777) == oct(0o600)
    assert not [p for p in path.parent.iterdir() if p.name.startswith(".config-")]


def test_bad_values_are_clear_errors(isolated_env, tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('poll_interval = "30s"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"`poll_interval` has the wrong type \('30s'\): it must be a number"):
        load_config(path)
    path.write_text('server = \n', encoding="utf-8")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(path)
    path.write_text('create_library = 1\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="`create_library` has the wrong type .*: it must be true or false"):
        load_config(path)


def test_several_mirrors_each_with_its_folder_and_state(isolated_env, tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(f'[[mirror]]\nlibrary = "A"\nlocal = "{tmp_path}/a"\n'
                    f'[[mirror]]\nlibrary = "B"\nname = "docs"\nlocal = "{tmp_path}/b"\n', encoding="utf-8")
    cfg = load_config(path)
    assert [m.library for m in cfg.mirrors] == ["A", "B"]
    assert cfg.mirrors[0].library == "A" and [m.label for m in cfg.mirrors] == ["A", "docs"]
    assert not cfg.warnings
    assert cfg.mirror_state_dir("id1", cfg.mirrors[0]) != cfg.mirror_state_dir("id1", cfg.mirrors[1])
    assert not hasattr(cfg, "mirror")  # no "the first mirror" shortcut: each caller names its mirror


def test_the_account_of_a_mirror_and_the_top_level_one(isolated_env, tmp_path: Path) -> None:
    """``account(mirror)``: the mirror's own keys over the top-level ones; ``account()``: the top-level
    account even when the first mirror signs in elsewhere (what `ohsync login` without --mirror uses)."""
    path = tmp_path / "c.toml"
    path.write_text('server = "https://a.example"\nusername = "me@a"\n'
                    f'[[mirror]]\nlibrary = "A"\nlocal = "{tmp_path}/a"\nserver = "https://b.example"\n'
                    f'[[mirror]]\nlibrary = "B"\nlocal = "{tmp_path}/b"\n', encoding="utf-8")
    cfg = load_config(path)
    assert cfg.account() == ("https://a.example", "me@a")
    assert cfg.account(cfg.mirrors[0]) == ("https://b.example", "me@a")
    assert cfg.account(cfg.mirrors[1]) == ("https://a.example", "me@a")


@pytest.mark.parametrize("second", ["a", "a/inner"])
def test_two_mirrors_on_one_folder_are_a_config_error(isolated_env, tmp_path: Path, second: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(f'[[mirror]]\nlibrary = "A"\nlocal = "{tmp_path}/a"\n'
                    f'[[mirror]]\nlibrary = "B"\nlocal = "{tmp_path}/{second}"\n', encoding="utf-8")
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert "tables 1 (A) and 2 (B)" in e.value.message and "change `local`" in e.value.message


def test_a_symlink_to_another_mirrors_folder_is_the_same_folder(isolated_env, tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "a")
    path = tmp_path / "c.toml"
    path.write_text(f'[[mirror]]\nlibrary = "A"\nlocal = "{tmp_path}/a"\n'
                    f'[[mirror]]\nlibrary = "B"\nlocal = "{tmp_path}/link"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="the same folder"):
        load_config(path)


def test_default_folders_of_two_mirrors_collide(isolated_env, tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[[mirror]]\nlibrary = "A"\n[[mirror]]\nlibrary = "B"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="the same folder"):
        load_config(path)


def test_filing_mirror_must_name_a_mirror(isolated_env, tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text(f'[[mirror]]\nlocal = "{tmp_path}/a"\n[filing]\nmirror = 1\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="`filing.mirror` is 1, but there is 1 \\[\\[mirror\\]\\] table"):
        load_config(path)


def test_env_overrides(isolated_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OHSYNC_CONFIG", str(tmp_path / "env.toml"))
    assert config_path() == tmp_path / "env.toml"
    assert config_path(str(tmp_path / "cli.toml")) == tmp_path / "cli.toml"
    (tmp_path / "env.toml").write_text(f'socket = "{tmp_path}/cfg.sock"\n', encoding="utf-8")
    assert load_config().socket == tmp_path / "cfg.sock"
    monkeypatch.setenv("OHSYNC_SOCKET", str(tmp_path / "env.sock"))
    assert load_config().socket == tmp_path / "env.sock"


def test_normalize_server_url() -> None:
    assert normalize_server_url("cloud.tsinghua.edu.cn/") == "https://cloud.tsinghua.edu.cn"
    assert normalize_server_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000"


def test_a_remote_outside_the_library_is_a_config_error(isolated_env, tmp_path: Path) -> None:
    """`remote = "../x"` used to load, then fail every sync pass as an internal error."""
    path = tmp_path / "c.toml"
    for remote in ("../knowledge", "/Files/./x"):
        path.write_text(f'[[mirror]]\nlibrary = "OH-Memory"\nremote = "{remote}"\n', encoding="utf-8")
        with pytest.raises(ConfigError, match=r"`mirror.remote` .* is not a folder of the library") as info:
            load_config(path)
        assert "Internal" not in str(info.value)
    path.write_text('[[mirror]]\nlibrary = "OH-Memory"\nremote = "Files/"\n', encoding="utf-8")
    assert load_config(path).mirrors[0].remote == "Files/"


def test_upload_request_mib_is_read_and_bounded(isolated_env, tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    assert load_config(path).upload_request_mib == 256
    path.write_text("upload_request_mib = 64\n", encoding="utf-8")
    cfg = load_config(path)
    assert cfg.upload_request_mib == 64 and cfg.warnings == ()
    for bad in ("4", "100000", '"big"'):
        path.write_text(f"upload_request_mib = {bad}\n", encoding="utf-8")
        with pytest.raises(ConfigError, match="upload_request_mib"):
            load_config(path)


def test_panel_port_is_read_and_bounded(isolated_env, tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    assert load_config(path).panel_port == 0  # any free port
    path.write_text("panel_port = 8765\n", encoding="utf-8")
    cfg = load_config(path)
    assert cfg.panel_port == 8765 and cfg.warnings == ()
    for bad in ("-2", "70000", '"8765"'):
        path.write_text(f"panel_port = {bad}\n", encoding="utf-8")
        with pytest.raises(ConfigError, match="panel_port"):
            load_config(path)


def test_an_unknown_key_close_to_a_known_one_names_it(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[safety]\nmax_delete_file = 3\n[plugin]\nx = 1\n', encoding="utf-8")
    warnings = load_config(path).warnings
    assert any("`safety.max_delete_file` (kept, but ignored): did you mean `safety.max_delete_files`?" in w
               for w in warnings)
    assert any("`plugin` (kept, but ignored)" in w and "did you mean" not in w for w in warnings)


def test_a_typo_of_the_mirror_table_stops_run_and_doctor(isolated_env, tmp_path: Path, capsys) -> None:
    """`[[mirrors]]` would quietly mirror the default library into the default folder: an error."""
    from ohsync.daemon.cli.main import main
    from ohsync.daemon.config import ConfigError

    path = tmp_path / "c.toml"
    path.write_text(f'[[mirrors]]\nlibrary = "Notes"\nlocal = "{tmp_path / "Notes"}"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="unknown table `mirrors`: did you mean `mirror`?"):
        load_config(path)
    assert main(["--config", str(path), "doctor"]) == 1
    assert "did you mean `mirror`?" in capsys.readouterr().out
    assert main(["--config", str(path), "run", "--no-tray"]) != 0
    assert "did you mean `mirror`?" in capsys.readouterr().err
    assert not (isolated_env.root / "home" / "OH-Memory").exists()
