"""The person's own place: the time offset defaults to the computer's (from
``TZ``), the config still overrides it; the texts ohsync writes follow the
locale (Chinese for ``zh*``, English otherwise) unless ``[memory] language``
says otherwise."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from ohsync.daemon.config import ConfigError, load_config
from ohsync.engine.filing.journal import journal_line, new_journal
from ohsync.engine.filing.summary import summarize
from ohsync.engine.place import local_offset, text_language

WINTER = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc).timestamp()
SUMMER = datetime(2026, 7, 1, 12, 0, tzinfo=timezone.utc).timestamp()


@pytest.fixture
def tz_env(monkeypatch: pytest.MonkeyPatch):
    def use(name: str) -> None:
        monkeypatch.setenv("TZ", name)
        time.tzset()
    yield use
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(("zone", "winter", "summer"), [
    ("Asia/Shanghai", "+08:00", "+08:00"), ("UTC", "+00:00", "+00:00"),
    ("America/New_York", "-05:00", "-04:00"), ("Asia/Kolkata", "+05:30", "+05:30"),
    ("Europe/Berlin", "+01:00", "+02:00"),
])
def test_the_local_offset_follows_tz(tz_env, zone: str, winter: str, summer: str) -> None:
    tz_env(zone)
    assert (local_offset(WINTER), local_offset(SUMMER)) == (winter, summer)


def test_the_config_defaults_to_the_local_offset_and_still_overrides_it(tz_env, tmp_path: Path) -> None:
    tz_env("Asia/Kolkata")
    assert load_config(tmp_path / "missing.toml").memory.time_offset == "+05:30"
    tz_env("UTC")
    assert load_config(tmp_path / "missing.toml").memory.time_offset == "+00:00"
    path = tmp_path / "config.toml"
    path.write_text('[memory]\ntime_offset = "+08:00"\n', encoding="utf-8")
    assert load_config(path).memory.time_offset == "+08:00"


@pytest.mark.parametrize(("env", "language"), [
    ({"LANG": "zh_CN.UTF-8"}, "zh"), ({"LANG": "zh_TW.UTF-8"}, "zh"), ({"LANG": "de_DE.UTF-8"}, "en"),
    ({"LANG": "C.UTF-8"}, "en"), ({}, "en"), ({"LANG": "zh_CN.UTF-8", "LC_ALL": "en_US.UTF-8"}, "en"),
    ({"LANG": "en_GB.UTF-8", "LC_MESSAGES": "zh_CN.UTF-8"}, "zh"),
])
def test_the_language_follows_the_locale(env: dict, language: str) -> None:
    assert text_language("auto", env) == language


def test_the_language_key_chooses_and_is_checked(tmp_path: Path) -> None:
    assert text_language("zh", {"LANG": "en_US.UTF-8"}) == "zh"
    assert text_language("en", {"LANG": "zh_CN.UTF-8"}) == "en"
    path = tmp_path / "config.toml"
    path.write_text('[memory]\nlanguage = "zh"\n', encoding="utf-8")
    assert load_config(path).memory.language == "zh"
    path.write_text('[memory]\nlanguage = "fr"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="language"):
        load_config(path)


def test_the_texts_ohsync_writes_in_each_language(tmp_path: Path) -> None:
    when = datetime(2026, 11, 30, 9, 12, tzinfo=timezone(timedelta(hours=-5)))
    assert journal_line("a.pdf", "/Files/a.pdf", when, "zh") == \
        "- [file] 2026-11-30 09:12 归档 a.pdf → /Files/a.pdf #附件"
    assert journal_line("a.pdf", "/Files/a.pdf", when, "en") == \
        "- [file] 2026-11-30 09:12 filed a.pdf → /Files/a.pdf #attachment"
    assert "tags: [日志, 2026]" in new_journal("2026-11", when, "x", "zh").decode()
    assert "tags: [journal, 2026]" in new_journal("2026-11", when, "x", "en").decode()
    doc = tmp_path / "slides.pptx"
    doc.write_bytes(b"\x00" * 2048)
    assert summarize(doc, "slides.pptx", 2048, "zh") == "PowerPoint 演示文稿，2.0 KB；由 ohsync 从投递文件夹归档。"
    assert summarize(doc, "slides.pptx", 2048, "en") == \
        "PowerPoint presentation, 2.0 KB; filed by ohsync from the drop folder."
