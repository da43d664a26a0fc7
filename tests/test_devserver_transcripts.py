"""Replay every recorded Seafile transcript against devserver.

One test per scenario file in ``tests/data/seafile-transcripts`` (see
``tests/transcript_replay.py`` for the substitution, capture and
normalisation rules).  Only the README's ``version_dependent`` fields may
differ.
"""
from __future__ import annotations

import pytest

import transcript_replay as replay  # tests/ is on the path (pyproject pythonpath)

FILES = replay.scenario_files()


def test_transcripts_found():
    """All twelve scenario files are there (a missing data folder must not pass silently)."""
    assert len(FILES) >= 12, f"transcripts not found under {replay.TRANSCRIPTS}"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_transcript(devserver, path):
    result = replay.replay_file(path, devserver.url, "user@example.edu.cn", "secret")
    assert len(result.steps) == len(replay.load_steps(path))
    assert result.mismatches == [], "\n".join(result.mismatches)
