"""The mass-delete safety valve counts files; its percentage applies only from a floor on.

Rule (engine/sync/valve.py, README "Safety"): deletes on one side within five
minutes are held when there are more than ``max_delete_files``, or at least
``percent_floor`` that are also more than ``max_delete_percent`` % of the
mirror's files.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from daemon_helpers import isolated_env  # noqa: F401 - fixture
from engine_helpers import USER, make_mirror
from ohsync.daemon.config import load_config
from ohsync.engine.sync.reconcile import Action
from ohsync.engine.sync.valve import DeleteValve, Plan, exceeds


def deletes(n: int, side: str = "remote") -> list[Plan]:
    action = Action.DELETE_REMOTE if side == "remote" else Action.DELETE_LOCAL
    return [Plan(f"notes/n{i:03d}.md", action, None, None, None, None) for i in range(n)]


@pytest.mark.parametrize(("count", "tracked", "held"), [
    (6, 25, False),       # tidying up a small library: 24 %, but under the floor
    (9, 25, False),       # 36 %, still under the floor of 10
    (10, 25, True),       # at the floor and 40 %
    (12, 25, True),
    (10, 100, False),     # at the floor but only 10 %
    (26, 100, True),      # 26 % of 100
    (50, 10_000, False),  # 0.5 %, exactly the absolute limit
    (51, 10_000, True),   # past the absolute limit however big the mirror
    (0, 0, False),
])
def test_exceeds_counts_files_and_the_share_only_from_the_floor(count: int, tracked: int, held: bool) -> None:
    assert exceeds(count, tracked, max_files=50, max_percent=25, floor=10) is held


def test_a_small_library_tidy_up_goes_through_the_valve() -> None:
    valve = DeleteValve(50, 25, clock=lambda: 0.0)
    report = SimpleNamespace(held_deletes=None)
    kept = valve.filter(deletes(6), 25, report)
    assert len(kept) == 6 and report.held_deletes == [] and valve.held() == []


def test_the_floor_counts_over_the_window_and_per_side() -> None:
    now = [0.0]
    valve = DeleteValve(50, 25, clock=lambda: now[0])
    report = SimpleNamespace(held_deletes=None)
    assert len(valve.filter(deletes(6), 25, report)) == 6
    now[0] = 60.0  # still inside the five-minute window: 6 + 4 = 10 of 25 is a mass delete
    assert valve.filter(deletes(4), 25, report) == []
    assert len(valve.held()) == 4 and {side for _, side in valve.held()} == {"remote"}
    # the other side has its own count
    assert len(valve.filter(deletes(6, "local"), 25, report)) == 6
    now[0] = 60.0 + 301  # the window moved on: the first six no longer count
    assert len(valve.filter(deletes(4), 25, report)) == 4 and valve.held() == []


def test_the_absolute_limit_holds_whatever_the_share() -> None:
    valve = DeleteValve(50, 25, clock=lambda: 0.0)
    report = SimpleNamespace(held_deletes=None)
    assert valve.filter(deletes(51), 100_000, report) == []
    assert len(report.held_deletes) == 51
    assert valve.confirm() == 51
    assert len(valve.filter(deletes(51), 100_000, report)) == 51 and valve.held() == []


def test_a_custom_floor_is_honoured() -> None:
    valve = DeleteValve(50, 25, clock=lambda: 0.0, floor=3)
    report = SimpleNamespace(held_deletes=None)
    assert valve.filter(deletes(3), 10, report) == []


def test_engine_carries_out_eight_deletes_of_a_small_library(devserver, tmp_path: Path) -> None:
    """8 notes out of ~30 used to be held (the share alone); now they are ordinary deletes."""
    from engine_helpers import sample_library

    repo = devserver.create_library(USER, "OH-Memory", from_tree=sample_library(tmp_path / "seed"))
    mirror = make_mirror(devserver, repo, tmp_path)
    mirror.sync()
    victims = list((mirror.root / "journal").iterdir()) + list((mirror.root / "courses").rglob("*.md"))
    assert len(victims) == 8
    for path in victims:
        path.unlink()
    report = mirror.sync()
    assert report.held_deletes == [] and len(report.deleted_remote) == 8
    tree = devserver.tree(repo)
    assert all("/" + p.relative_to(mirror.root).as_posix() not in tree for p in victims)
    assert all("/.trash/" + p.relative_to(mirror.root).as_posix() in tree for p in victims)


def test_config_reads_the_floor(isolated_env, tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text('[safety]\npercent_floor = 4\nmax_delete_files = 20\n', encoding="utf-8")
    cfg = load_config(path)
    assert cfg.safety.percent_floor == 4 and cfg.safety.max_delete_files == 20
    assert cfg.warnings == ()
    default = tmp_path / "default.toml"
    default.write_text("", encoding="utf-8")
    assert load_config(default).safety.percent_floor == 10


def test_held_deletes_stay_held_through_a_watcher_pass(devserver, tmp_path: Path) -> None:
    """A watcher pass naming held paths leaves them to the rescan: the held list must not blink empty."""
    from engine_helpers import sample_library

    repo = devserver.create_library(USER, "OH-Memory", from_tree=sample_library(tmp_path / "seed"))
    mirror = make_mirror(devserver, repo, tmp_path)
    mirror.sync()
    victims = [p for d in ("journal", "courses", "tasks", "preferences") for p in (mirror.root / d).rglob("*.md")]
    for path in victims:
        path.unlink()
    assert len(mirror.sync().held_deletes) == len(victims) >= 10
    rels = [p.relative_to(mirror.root).as_posix() for p in victims]
    report = mirror.sync(rels)  # late watcher events for the same deletes
    assert report.rescan and report.deleted_remote == []
    assert sorted(p for p, _ in mirror.engine.held_deletes()) == sorted(rels)


def test_deleting_every_file_of_a_small_mirror_is_held() -> None:
    valve = DeleteValve(50, 25, clock=lambda: 0.0)
    report = SimpleNamespace(held_deletes=None)
    assert valve.filter(deletes(3), 3, report) == [] and len(valve.held()) == 3
    assert valve.confirm() == 3 and len(valve.filter(deletes(3), 3, report)) == 3
    # one file of one, or all but one, is ordinary use
    assert len(valve.filter(deletes(1), 1, report)) == 1
    assert len(valve.filter(deletes(2, "local"), 3, report)) == 2


def test_a_small_mirror_folder_recreated_empty_does_not_empty_the_library(devserver, tmp_path: Path) -> None:
    """`rm -r` of the folder and `mkdir` again (or an empty mount point): the 3 files stay live on the
    server, held until `confirm-deletes`, instead of going to /.trash/ under the count limits."""
    import shutil

    repo = devserver.create_library(USER, "Notes")
    for name in ("a.md", "b.md", "c.txt"):
        devserver.put_file(repo, f"/{name}", f"{name}\n".encode())
    mirror = make_mirror(devserver, repo, tmp_path)
    mirror.sync()
    assert sorted(p.name for p in mirror.root.iterdir()) == ["a.md", "b.md", "c.txt"]
    shutil.rmtree(mirror.root)
    mirror.root.mkdir()
    report = mirror.sync()
    assert sorted(p for p, _ in report.held_deletes) == ["a.md", "b.md", "c.txt"]
    assert report.deleted_remote == []
    tree = devserver.tree(repo)
    assert {"/a.md", "/b.md", "/c.txt"} <= set(tree) and not any(p.startswith("/.trash/") for p in tree)
    # confirmed, they go to /.trash/ as any delete does
    mirror.engine.confirm_deletes()
    mirror.sync()
    tree = devserver.tree(repo)
    assert "/a.md" not in tree and "/.trash/a.md" in tree
