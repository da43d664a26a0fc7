"""The CI chaos profile: five seeds of 300 actions with faults and kills lose no version.

See ``tests/chaos.py`` for what the run does and how versions are accounted
for (a line the person wrote that survives only in a local backup is lost);
the long profile (10,000 actions) is ``python tests/chaos.py``.

The stale-burst seeds (a device overwriting files from old reads, in bursts)
are a test of their own, run for the seeds in ``OHSYNC_CHAOS_STALE_SEEDS``
(default :data:`STALE_SEEDS_DEFAULT`).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from chaos import Chaos
from daemon_helpers import Env, isolated_env, wait_for  # noqa: F401

SEEDS = [int(s) for s in os.environ.get("OHSYNC_CHAOS_SEEDS", "11,12,13,14,15").split(",")]
ACTIONS = int(os.environ.get("OHSYNC_CHAOS_ACTIONS", "300"))
#: The seeds run with the stale-burst device ("" = none).
STALE_SEEDS_DEFAULT = "11,12,13"
STALE_SEEDS = [int(s) for s in os.environ.get("OHSYNC_CHAOS_STALE_SEEDS", STALE_SEEDS_DEFAULT).split(",") if s]


def _run_profile(env: Env, devserver, tmp_path: Path, seed: int, *, stale_bursts: bool) -> None:
    chaos = Chaos(env, devserver, tmp_path, seed, stale_bursts=stale_bursts)
    try:
        stats = chaos.run(ACTIONS)
        diff_reads = _diff_reads_for_one_edit(chaos) if not stale_bursts else 0
    finally:
        chaos.close()
    print(stats.summary())
    # the profile really hurt it (how many faults a seed draws depends on the machine's pace too)
    assert stats.kills >= 3 and stats.faults >= 3, stats.summary()
    assert stats.written >= ACTIONS // 3, stats.summary()
    if stale_bursts:
        assert stats.stale_overwrites >= 3, stats.summary()
    else:
        # after the kills and faults the mirror still finds a remote change from the commit's
        # own changes, not by the walk (during the run a poll may see more than
        # remote_diffs.MAX_COMMITS new commits, a loaded machine polls late, and the walk decides)
        assert diff_reads > 0, devserver.requests
    assert not stats.lost, chaos.explain()


def _diff_reads_for_one_edit(chaos: Chaos) -> int:
    """One remote edit after the run settled: the commit-diff reads made until it is mirrored."""
    key = "GET /api/v2.1/repos/{id}/commits/{commit}/"
    before = chaos.srv.request_count(key)
    chaos.srv.put_file(chaos.repo, "/after-the-run.txt", b"one remote edit\n")
    wait_for(lambda: (chaos.mirror / "after-the-run.txt").is_file(), timeout=60, what="the edit mirrored")
    return int(chaos.srv.request_count(key) - before)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", SEEDS)
def test_chaos_profile_loses_no_version(isolated_env, devserver, tmp_path, seed: int) -> None:
    _run_profile(isolated_env, devserver, tmp_path, seed, stale_bursts=False)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", STALE_SEEDS)
def test_chaos_profile_with_stale_bursts_loses_no_version(isolated_env, devserver, tmp_path, seed: int) -> None:
    _run_profile(isolated_env, devserver, tmp_path, seed, stale_bursts=True)


class _Tree:
    """A server stand-in for the accounting: one fixed library tree."""

    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    def tree(self, repo: str) -> dict[str, bytes]:
        return dict(self.files)


def test_accounting_counts_a_line_of_the_person_kept_only_in_a_local_backup_as_lost(tmp_path) -> None:
    env = Env(root=tmp_path, sock_dir=tmp_path, keyring_file=tmp_path / "k.json", config=tmp_path / "c.toml")
    chaos = Chaos(env, _Tree({"/a.md": b"chaos-1-00001-local\n",
                              "/.conflict/b__remote__20261201T000000Z.md": b"chaos-1-00002-local\n",
                              "/.trash/c.txt": b"chaos-1-00003-local\n"}), tmp_path, 1)
    chaos.repo = "r"
    (tmp_path / "mirror").mkdir()
    (tmp_path / "mirror" / "d.txt").write_bytes(b"chaos-1-00004-remote\n")
    backup = tmp_path / "state" / "backups" / "2026-12-01" / "OH-Memory" / "e.txt"
    backup.parent.mkdir(parents=True)
    backup.write_bytes(b"chaos-1-00001-local\nchaos-1-00005-local\nchaos-1-00006-remote\n")
    for writer in ["local", "local", "local", "remote", "local", "remote", "local"]:
        chaos._marker(writer, "x.txt")
    chaos.account()
    assert chaos.stats.found == 5 and chaos.stats.backup_only == 1, chaos.stats.summary()
    assert chaos.stats.lost == ["chaos-1-00005-local (local, written to x.txt; only in a local backup)",
                                "chaos-1-00007-local (local, written to x.txt; nowhere)"]


def test_accounting_counts_a_backup_only_line_in_a_moved_folder_as_lost(tmp_path) -> None:
    env = Env(root=tmp_path, sock_dir=tmp_path, keyring_file=tmp_path / "k.json", config=tmp_path / "c.toml")
    chaos = Chaos(env, _Tree({"/moved/f3/a.txt": b"chaos-1-00001-local\n"}), tmp_path, 1)
    chaos.repo = "r"
    (tmp_path / "mirror").mkdir()
    backup = tmp_path / "state" / "backups" / "2026-12-01" / "OH-Memory" / "moved" / "f3" / "a.txt"
    backup.parent.mkdir(parents=True)
    backup.write_bytes(b"chaos-1-00001-local\nchaos-1-00002-local\n")
    chaos._marker("local", "moved/f3/a.txt")
    chaos._marker("local", "moved/f3/a.txt")
    chaos.account()
    assert chaos.stats.lost == ["chaos-1-00002-local (local, written to moved/f3/a.txt; only in a local backup)"]
