"""Replay every recorded Seafile transcript against devserver.

One test per scenario file in ``tests/data/seafile-transcripts`` (see
``tests/transcript_replay.py`` for the substitution, capture and
normalisation rules).  Only the README's ``version_dependent`` fields may
differ.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest


def _load_helper():
    name = "ohsync_tests_transcript_replay"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("transcript_replay.py"))
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


replay = _load_helper()
FILES = replay.scenario_files()


def test_transcripts_found():
    """All twelve scenario files are there (a missing data folder must not pass silently)."""
    assert len(FILES) >= 12, f"transcripts not found under {replay.TRANSCRIPTS}"


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_transcript(devserver, path):
    result = replay.replay_file(path, devserver.url, "user@example.edu.cn", "secret")
    assert len(result.steps) == len(replay.load_steps(path))
    assert result.mismatches == [], "\n".join(result.mismatches)
