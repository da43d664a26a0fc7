"""A cold mirror's archive is written with the daemon told before and after
(``ctx.on_bulk_writes``), so it can stop watching its own writes and scan once
instead; a small pull says nothing, and a failing hook fails nothing."""
from __future__ import annotations

import pytest

from engine_helpers import USER, make_mirror
from ohsync.engine.sync import bulk

FILES = {f"/notes/n{i}.md": f"note {i}\n".encode() for i in range(6)}


def _library(devserver, tmp_path):
    seed = tmp_path / "seed"
    for path, data in FILES.items():
        (seed / path.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
        (seed / path.lstrip("/")).write_bytes(data)
    return devserver.create_library(USER, "OH-Memory", from_tree=seed)


def test_the_hook_brackets_the_writing_of_the_archive(devserver, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk, "QUIET_WATCH_FILES", 3)
    m = make_mirror(devserver, _library(devserver, tmp_path), tmp_path)
    calls: list[tuple[bool, int]] = []
    m.engine.ctx.on_bulk_writes = lambda started: calls.append(
        (started, len(list((m.root / "notes").glob("*.md"))) if (m.root / "notes").is_dir() else 0))
    report = m.sync()
    assert report.errors == []
    assert calls == [(True, 0), (False, len(FILES))]  # told before the first file, after the last


def test_a_pull_below_the_threshold_says_nothing(devserver, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk, "QUIET_WATCH_FILES", len(FILES) + 1)
    m = make_mirror(devserver, _library(devserver, tmp_path), tmp_path)
    calls: list[bool] = []
    m.engine.ctx.on_bulk_writes = calls.append
    assert m.sync().errors == []
    assert calls == [] and len(list((m.root / "notes").glob("*.md"))) == len(FILES)


def test_a_failing_hook_fails_nothing(devserver, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk, "QUIET_WATCH_FILES", 3)
    m = make_mirror(devserver, _library(devserver, tmp_path), tmp_path)

    def hook(started: bool) -> None:
        raise RuntimeError("the watcher is gone")

    m.engine.ctx.on_bulk_writes = hook
    assert m.sync().errors == []
    for path, data in FILES.items():
        assert (m.root / path.lstrip("/")).read_bytes() == data
