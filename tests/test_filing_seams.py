"""Filing on the engine's seams: the stability gate the daemon injects, and
crash points that the engine only announces (the daemon decides to kill)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ohsync.daemon.crash_at import ENV, install_from_env, killer
from ohsync.daemon.filing_service import FilingService
from ohsync.daemon.stability import StabilityGate
from ohsync.engine import crashpoints
from ohsync.engine.errors import OhsyncError
from ohsync.engine.filing_api import DOWNLOADING, WRITING


@pytest.fixture
def no_hook():
    previous = crashpoints.set_hook(None)
    yield
    crashpoints.set_hook(previous)


# -- crash points -------------------------------------------------------------------------------

def test_reach_without_a_hook_does_nothing(no_hook):
    for point in crashpoints.POINTS:
        crashpoints.reach(point)


def test_the_engine_announces_each_point_to_the_installed_hook(no_hook):
    heard: list[str] = []
    crashpoints.set_hook(heard.append)
    crashpoints.reach("push.uploaded")
    crashpoints.reach("filing.moved")
    assert heard == ["push.uploaded", "filing.moved"]
    assert crashpoints.set_hook(None) is not None


def test_the_daemons_killer_dies_at_the_nth_time_of_its_point_only():
    deaths: list[str] = []
    hook = killer("filing.chunk_sent:2", kill=lambda: deaths.append("dead"))
    hook("filing.uploaded")
    hook("filing.chunk_sent")
    assert deaths == []
    hook("filing.chunk_sent")
    assert deaths == ["dead"]


@pytest.mark.parametrize("spec", ["no.such_point", "push.uploaded:0"])
def test_a_bad_crash_point_is_refused_with_a_sentence(no_hook, spec):
    with pytest.raises(OhsyncError) as info:
        install_from_env({ENV: spec})
    assert ENV in info.value.message


def test_install_from_env_installs_only_when_the_variable_is_set(no_hook):
    assert install_from_env({}) is False and crashpoints.set_hook(None) is None
    assert install_from_env({ENV: "pull.replaced"}) is True
    assert crashpoints.set_hook(None) is not None


# -- the stability gate -----------------------------------------------------------------------------

def test_gate_says_downloading_for_partial_names_and_companions(tmp_path):
    gate = StabilityGate(writers=lambda p: False)
    (tmp_path / "a.pdf.crdownload").write_bytes(b"x")
    (tmp_path / "b.pdf").write_bytes(b"")
    (tmp_path / "b.pdf.part").write_bytes(b"x")
    (tmp_path / "c.pdf").write_bytes(b"x")
    assert gate.not_ready(tmp_path / "a.pdf.crdownload") == DOWNLOADING
    assert gate.not_ready(tmp_path / "b.pdf") == DOWNLOADING
    assert gate.not_ready(tmp_path / "c.pdf") is None


def test_gate_says_writing_when_its_writer_check_sees_a_writer(tmp_path):
    path = tmp_path / "c.pdf"
    path.write_bytes(b"x")
    old = path.stat().st_mtime - 60
    os.utime(path, (old, old))
    busy = {path}
    gate = StabilityGate(writers=lambda p: Path(p) in busy)
    assert gate.not_ready(path) == WRITING and not gate.is_stable(path, 3)
    busy.clear()
    assert gate.not_ready(path) is None and gate.is_stable(path, 3)
    assert not gate.is_stable(path, 3, now=old + 1)  # modified a second ago


def test_the_service_injects_its_own_gate_into_the_filers_it_makes(tmp_path):
    seen: list[Path] = []

    class Gate(StabilityGate):
        def not_ready(self, path: Path) -> str | None:
            seen.append(Path(path))
            return WRITING

    class Mirror:  # only what planning reaches before the gate says no
        class ctx:  # noqa: N801
            local_root = tmp_path / "mirror"

    gate = Gate()
    service = FilingService(tmp_path / "drop", lambda fn: fn(), lambda r: None, gate=gate)
    assert service.gate is gate
    filer = service.new_filer(Mirror(), [], "/Files/_inbox/", tmp_path / "filing.db")
    try:
        dropped = tmp_path / "elsewhere.txt"
        dropped.write_bytes(b"held open by someone\n")
        result = filer.file(dropped)
    finally:
        filer.close()
    assert result.status == "not_ready" and result.retryable and "being written" in result.message
    assert seen == [dropped]
