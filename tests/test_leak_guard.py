"""The leak guard of tests/conftest.py fails a test that leaves a thread (a
daemon thread too) or a child process running, kills the process, and lets a
test marked ``leaves_running`` pass (run in a separate pytest with the same
conftest)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

CONFTEST = Path(__file__).with_name("conftest.py")

INNER = '''
import subprocess, threading, pytest

STOP = threading.Event()

def test_clean():
    t = threading.Thread(target=lambda: None)
    t.start()
    t.join()

def test_leaks_a_thread():
    threading.Thread(target=STOP.wait, name="leaky-worker").start()

def test_leaks_a_process(tmp_path):
    proc = subprocess.Popen(["sleep", "60"])
    (tmp_path.parent.parent / "pid").write_text(str(proc.pid))

def test_leaks_a_daemon_thread():
    threading.Thread(target=STOP.wait, name="leaky-daemon", daemon=True).start()

@pytest.mark.leaves_running("the thread is stopped by the next test")
def test_marked():
    threading.Thread(target=STOP.wait, name="marked-worker").start()

def test_stop_all():
    STOP.set()
'''


def test_the_guard_fails_leaks_and_kills_left_processes(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(CONFTEST.read_text(encoding="utf-8"), encoding="utf-8")
    for name in ("daemon_helpers.py", "engine_helpers.py"):  # the conftest registers their fixtures
        helpers = CONFTEST.with_name(name)
        (tmp_path / helpers.name).write_text(helpers.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "test_inner.py").write_text(INNER, encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:randomly", "-p", "no:cacheprovider", "-q", "-rA",
         "--basetemp", str(tmp_path / "base"), str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, timeout=120).stdout
    assert "ERROR test_inner.py::test_leaks_a_thread" in out, out
    assert "thread 'leaky-worker'" in out
    assert "ERROR test_inner.py::test_leaks_a_daemon_thread" in out
    assert "thread 'leaky-daemon' (Thread, daemon)" in out
    assert "ERROR test_inner.py::test_leaks_a_process" in out
    assert "sleep 60" in out
    for name in ("test_clean", "test_marked", "test_stop_all"):
        assert f"PASSED test_inner.py::{name}" in out, out
    assert "marked-worker" not in out
    pid = int((tmp_path / "pid").read_text())
    assert not Path(f"/proc/{pid}").exists() \
        or Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in "ZX"
