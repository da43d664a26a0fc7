"""Odd entries in the drop folder never stop filing or wait forever.

A name at the file system's length limit (its ``.part`` companion cannot
exist), a symbolic link, a FIFO, or a bug while one file is looked at: that
entry gets a result with its reason (status, notice), the stability
thread keeps running and the other files are filed.
"""

from __future__ import annotations

import os
from pathlib import Path

from daemon_helpers import wait_for
from ohsync.daemon.filing_service import FilingService
from ohsync.daemon.stability import StabilityGate
from ohsync.engine.filing.filer import FilingResult
from ohsync.engine.names import has_partial_sibling
from test_filing import WorkerThread, env  # noqa: F401  (env: the fixture)

LONG = "课" * 83 + ".txt"  # 253 bytes: ``LONG + ".part"`` is too long for the file system


def test_a_name_at_the_length_limit_has_no_partial_companion(tmp_path):
    (tmp_path / LONG).write_bytes(b"x\n")
    assert not has_partial_sibling(tmp_path / LONG)


def by_name(results: list[FilingResult]) -> dict[str, FilingResult]:
    return {Path(r.source).name: r for r in results}


def run_service(env, results, gate=None):
    worker = WorkerThread()
    service = FilingService(env.drop, worker.submit, results.append, quiet_seconds=0.3, gate=gate)
    service.start()
    worker.call(lambda: service.attach(env.filer()))
    return service, worker


def test_a_long_name_a_link_and_a_fifo_are_reported_and_later_drops_still_filed(env, tmp_path):
    results: list[FilingResult] = []
    service, worker = run_service(env, results)
    try:
        (env.drop / LONG).write_bytes(b"x\n")
        target = tmp_path / "elsewhere.txt"
        target.write_bytes(b"not for filing\n")
        os.symlink(target, env.drop / "link.txt")
        os.mkfifo(env.drop / "pipe.txt")
        wait_for(lambda: {LONG, "link.txt", "pipe.txt"} <= set(by_name(results)), what="all three reported")
        (env.drop / "after.txt").write_bytes(b"dropped after\n")
        wait_for(lambda: "after.txt" in by_name(results), what="after.txt filed")
        assert service.thread_alive()
        got = by_name(results)
        assert got["after.txt"].status == "filed", got["after.txt"].message
        assert got[LONG].status == "filed", got[LONG].message  # filed under a shortened name
        for name in ("link.txt", "pipe.txt"):
            assert got[name].status == "failed" and "not a regular file" in got[name].message
            assert "not filed" in got[name].message
        listed = {Path(r["source"]).name: r["message"] for r in service.status()["last"]}
        assert "not a regular file" in listed["link.txt"]
        assert service.status()["error"] is None
        # both stay in the status until the person removes them
        refused = {Path(r["path"]).name: r["message"] for r in service.status()["refused"]}
        assert set(refused) == {"link.txt", "pipe.txt"} and "copy the document itself" in refused["link.txt"]
        (env.drop / "link.txt").unlink()
        wait_for(lambda: [Path(r["path"]).name for r in service.status()["refused"]] == ["pipe.txt"],
                 what="the removed link leaves the status")
    finally:
        service.stop()
        worker.stop()
    assert target.read_bytes() == b"not for filing\n"


class BrokenGate(StabilityGate):
    """A gate with a bug for one file name."""

    def is_stable(self, path, quiet_seconds=3.0, *, now=None):
        if Path(path).name == "bad.txt":
            raise RuntimeError("a bug in the gate")
        return super().is_stable(path, quiet_seconds, now=now)


def test_a_bug_while_one_file_is_checked_is_reported_and_the_others_are_filed(env):
    results: list[FilingResult] = []
    service, worker = run_service(env, results, gate=BrokenGate())
    try:
        (env.drop / "bad.txt").write_bytes(b"bad\n")
        (env.drop / "good.txt").write_bytes(b"good\n")
        wait_for(lambda: {"bad.txt", "good.txt"} <= set(by_name(results)), what="both reported")
        got = by_name(results)
        assert got["good.txt"].status == "filed", got["good.txt"].message
        assert got["bad.txt"].status == "failed" and "a bug in the gate" in got["bad.txt"].message
        assert got["bad.txt"].retryable and (env.drop / "bad.txt").exists()
        (env.drop / "later.txt").write_bytes(b"later\n")
        wait_for(lambda: "later.txt" in by_name(results), what="later.txt filed")
        assert by_name(results)["later.txt"].status == "filed" and service.thread_alive()
    finally:
        service.stop()
        worker.stop()


def test_the_status_taken_when_a_result_is_announced_shows_the_file_no_longer_being_filed(env):
    seen: list[int] = []
    results: list[FilingResult] = []
    service: FilingService | None = None

    def on_result(result: FilingResult) -> None:
        results.append(result)
        assert service is not None
        seen.append(service.status()["filing"])  # as the daemon's status update does

    worker = WorkerThread()
    service = FilingService(env.drop, worker.submit, on_result, quiet_seconds=0.3)
    service.start()
    try:
        worker.call(lambda: service.attach(env.filer()))
        (env.drop / "one.txt").write_bytes(b"one\n")
        wait_for(lambda: results, what="one.txt filed")
        assert results[0].status == "filed" and seen == [0]
    finally:
        service.stop()
        worker.stop()
