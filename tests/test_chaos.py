"""The CI chaos profile: 300 seeded actions with faults and kills lose no version.

See ``tests/chaos.py`` for what the run does and how versions are accounted
for; the long profile (10,000 actions) is ``python tests/chaos.py``.
"""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from chaos import Chaos  # noqa: E402
from daemon_helpers import isolated_env  # noqa: E402,F401

SEEDS = [int(s) for s in os.environ.get("OHSYNC_CHAOS_SEEDS", "11,12,13").split(",")]
ACTIONS = int(os.environ.get("OHSYNC_CHAOS_ACTIONS", "300"))


@pytest.mark.timeout(600)
@pytest.mark.parametrize("seed", SEEDS)
def test_chaos_profile_loses_no_version(isolated_env, devserver, tmp_path, seed: int) -> None:
    chaos = Chaos(isolated_env, devserver, tmp_path, seed)
    try:
        stats = chaos.run(ACTIONS)
    finally:
        chaos.close()
    print(stats.summary())
    assert stats.kills >= 3 and stats.faults >= 5, stats.summary()      # the profile really hurt it
    assert stats.written >= ACTIONS // 3, stats.summary()
    # remote changes were found from the commits' own changes too, not only by the walk
    assert devserver.request_count("GET /api/v2.1/repos/{id}/commits/{commit}/") > 0, devserver.requests
    assert not stats.lost, chaos.explain()
