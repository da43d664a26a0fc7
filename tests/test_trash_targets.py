"""``ohsync trash restore --to``: a target the mirror cannot hold is refused before anything is
restored, with the reason (daemon/trash_jobs.py)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from ohsync.daemon.socket.server import InvalidParams
from ohsync.daemon.trash_jobs import trash_job


@pytest.mark.parametrize(("to", "why"), [
    ("a\\b.md", "holds a backslash"),
    ("/abs/outside/escaped.md", "is an absolute path"),
    (".conflict/x.md", "lies in .conflict/"),
    (".trash/x.md", "lies in .trash/"),
    (".conflict_ohsync/x.md", "lies in .conflict/"),
    ("a/../b.md", "not a path the mirror can hold"),
    ("a/\x00.md", "not a path the mirror can hold"),
])
def test_a_target_the_mirror_cannot_hold_is_refused_before_the_job(to: str, why: str) -> None:
    with pytest.raises(InvalidParams, match=why) as refused:
        trash_job("restore", {"path": ".trash/a.md", "to": to}, default_days=30)
    assert "nothing was restored" in str(refused.value)


def test_an_ignored_or_too_long_target_is_refused_on_the_engine_s_thread(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    import ohsync.daemon.trash_jobs as jobs

    monkeypatch.setattr(jobs.trash, "restore_local", lambda *a: pytest.fail("restored"))
    engine = SimpleNamespace(ctx=SimpleNamespace(local_root=tmp_path), is_ignored=lambda rel: rel.startswith("priv"))
    with pytest.raises(InvalidParams, match=r"it is ignored"):
        trash_job("restore", {"path": ".trash/a.md", "to": "private/a.md"}, default_days=30)(engine)
    deep = "/".join(["d" * 200] * 22) + "/a.md"
    with pytest.raises(InvalidParams, match=r"the path is too long for this disk"):
        trash_job("restore", {"path": ".trash/a.md", "to": deep}, default_days=30)(engine)
