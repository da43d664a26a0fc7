"""``ohsync run`` started as its own process restarts once on glibc's
``malloc`` (same process id), so ``malloc_trim`` can hand an idle daemon's
memory back; an explicit ``PYTHONMALLOC`` is kept, and a daemon started
inside another program (here: pytest) never replaces that program."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from ohsync.daemon import allocator
from ohsync.daemon.cli.main import main
from ohsync.daemon.memory_trim import can_trim

DEMO = Path(__file__).resolve().parent / "data" / "samples" / "OH-Memory"

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not can_trim(),
                                reason="the allocator switch is for glibc systems only")


def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode(errors="replace").split("=", 1) for item in raw if b"=" in item)


def _cmdline(pid: int) -> list[str]:
    return [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]


def test_ohsync_run_restarts_itself_on_the_system_allocator(seed_daemon, monkeypatch) -> None:
    monkeypatch.delenv("PYTHONMALLOC", raising=False)
    s = seed_daemon(tree=DEMO, poll_interval=600.0)
    daemon = s.start(wait=("idle", "attention"), timeout=120)
    pid = daemon.proc.pid
    assert _environ(pid).get("PYTHONMALLOC") == "malloc"  # the same process, after its exec
    assert _cmdline(pid)[-3:] == ["ohsync.daemon.cli", "run", "--no-tray"]  # with the same command line
    status = daemon.status()
    assert status["state"] in ("idle", "attention") and daemon.proc.poll() is None
    assert s.converged()


def test_an_explicit_pythonmalloc_is_kept(seed_daemon) -> None:
    s = seed_daemon(tree=DEMO, poll_interval=600.0)
    daemon = s.start(wait=("idle", "attention"), timeout=120, extra_env={"PYTHONMALLOC": "pymalloc"})
    assert _environ(daemon.proc.pid).get("PYTHONMALLOC") == "pymalloc"
    assert s.converged()


def test_when_the_switch_is_wanted(monkeypatch) -> None:
    assert allocator.wanted({}) is True
    assert allocator.wanted({"PYTHONMALLOC": "pymalloc"}) is False
    assert allocator.wanted({"PYTHONMALLOC": ""}) is False  # set at all: the person's choice
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    assert allocator.wanted({}) is False


def test_a_run_called_inside_another_program_does_not_replace_it(monkeypatch, isolated_env) -> None:
    monkeypatch.delenv("PYTHONMALLOC", raising=False)
    called: list[object] = []
    monkeypatch.setattr(os, "execve", lambda *a: called.append(a))
    assert main(["run", "--no-tray"]) == 1  # no login here: it refuses, in this process
    assert called == []
    allocator.use_system_malloc()  # asked directly, it would exec the same command line
    assert called and called[0][1] == list(sys.orig_argv) and called[0][2]["PYTHONMALLOC"] == "malloc"
