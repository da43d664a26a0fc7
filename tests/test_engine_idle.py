"""An idle poll costs the same for 100 files as for 3,000: one request, no
SQL statement, no walk of the mirror; and a settled mirror still sees every change."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine_helpers import USER, make_mirror


def _tree(root: Path, files: int) -> Path:
    """``files`` small files, 50 per folder, two levels deep."""
    for i in range(files):
        path = root / f"d{i // 500}" / f"e{i // 50}" / f"note-{i}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"note {i}\n", encoding="utf-8")
    return root


class _Counter:
    """Counts SQL statements on a state store and folder walks (scandir/walk/listdir)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, state) -> None:
        self.sql: list[str] = []
        self.walks = 0
        state._db.set_trace_callback(self.sql.append)
        for name in ("scandir", "walk", "listdir"):
            real = getattr(os, name)

            def counted(*a, _real=real, **kw):
                self.walks += 1
                return _real(*a, **kw)

            monkeypatch.setattr(os, name, counted)


def _idle_cost(devserver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, files: int) -> tuple[int, int, int]:
    repo = devserver.create_library(USER, f"Idle-{files}", from_tree=_tree(tmp_path / f"seed-{files}", files))
    m = make_mirror(devserver, repo, tmp_path, f"m{files}")
    assert not m.engine.sync().errors
    assert sum(1 for p in m.root.rglob("*.md")) == files
    m.engine.sync([], check_remote=True)  # the first idle poll settles the mirror
    with monkeypatch.context() as patch:
        counter = _Counter(patch, m.state)
        before = m.client.request_count
        reports = [m.engine.sync([], check_remote=True) for _ in range(3)]
        requests = m.client.request_count - before
    m.state._db.set_trace_callback(None)
    assert all(r.idle for r in reports)
    m.state.close()
    m.client.close()
    return len(counter.sql), counter.walks, requests


def test_idle_poll_cost_independent_of_library_size(devserver, tmp_path, monkeypatch):
    small = _idle_cost(devserver, tmp_path, monkeypatch, 100)
    large = _idle_cost(devserver, tmp_path, monkeypatch, 3000)
    assert small == large
    assert small == (0, 0, 3)  # per poll: no SQL statement, no walk, one request (the head)


def test_settled_mirror_sees_remote_and_local_changes(devserver, tmp_path):
    repo = devserver.create_library(USER, "Idle-changes", from_tree=_tree(tmp_path / "seed", 120))
    m = make_mirror(devserver, repo, tmp_path)
    m.engine.sync()
    m.engine.sync([], check_remote=True)
    assert m.engine.sync([], check_remote=True).idle

    # a remote change: found by the same requests as a pass that never settled (no second head read)
    costs = []
    for settled, name in ((False, "note-61.md"), (True, "note-60.md")):
        if not settled:
            m.engine._settled = None
        else:
            m.engine.sync([], check_remote=True)
            assert m.engine.sync([], check_remote=True).idle
        devserver.put_file(repo, f"/d0/e1/{name}", b"changed on the server\n")
        before = m.client.request_count
        report = m.engine.sync([], check_remote=True)
        assert not report.idle and report.downloaded == [f"d0/e1/{name}"]
        assert m.read(f"d0/e1/{name}") == b"changed on the server\n"
        costs.append(m.client.request_count - before)
    assert costs[0] == costs[1]

    # settles again, then a local edit the watcher names is pushed
    m.engine.sync([], check_remote=True)
    assert m.engine.sync([], check_remote=True).idle
    m.write("d0/e0/note-1.md", b"changed here\n")
    report = m.engine.sync(["d0/e0/note-1.md"])
    assert report.uploaded == ["d0/e0/note-1.md"]
    assert not m.engine.sync([], check_remote=True).idle  # our own write moved the head
    m.engine.sync([], check_remote=True)
    assert m.engine.sync([], check_remote=True).idle

    m.state.close()
    m.client.close()


def test_snapshot_written_only_when_changed(devserver, tmp_path):
    repo = devserver.create_library(USER, "Idle-snapshot", from_tree=_tree(tmp_path / "seed", 60))
    m = make_mirror(devserver, repo, tmp_path)
    m.engine.sync()
    statements: list[str] = []
    m.state._db.set_trace_callback(statements.append)
    m.engine.sync(None)  # a full scan with nothing changed
    writes = [s for s in statements if s.split()[0].upper() in ("INSERT", "DELETE", "UPDATE", "REPLACE")]
    assert writes == []
    devserver.put_file(repo, "/d0/e0/note-3.md", b"new\n")
    statements.clear()
    m.engine.sync([], check_remote=True)
    rows = [s for s in statements if "INTO remote" in s]
    assert 1 <= len(rows) <= 3  # the file and its two folders' new ids, not 60 rows
    assert m.state.remote_snapshot() == m.engine.ctx.snapshot
    m.state._db.set_trace_callback(None)
    m.state.close()
    m.client.close()


def test_a_full_scan_that_finds_nothing_settles_the_mirror(devserver, tmp_path):
    repo = devserver.create_library(USER, "Idle-full", from_tree=_tree(tmp_path / "seed", 120))
    m = make_mirror(devserver, repo, tmp_path)
    m.engine.sync()  # the cold mirror: busy, not settled
    assert not m.engine.sync([], check_remote=True).idle  # the first poll after work compares once more
    assert m.engine.sync([], check_remote=True).idle
    report = m.engine.sync()  # a periodic full scan with the server checked: nothing to do
    assert not report.idle and not report.uploaded and not report.downloaded
    assert m.engine.sync([], check_remote=True).idle  # no second full comparison after it
    # a full scan that did find something does not settle
    m.write("d0/e0/note-2.md", b"changed here\n")
    assert m.engine.sync().uploaded == ["d0/e0/note-2.md"]
    assert not m.engine.sync([], check_remote=True).idle
    m.state.close()
    m.client.close()
