"""The real daemon killed (SIGKILL) at every named crash point, then restarted.

For each point of ``engine/crashpoints.py``: a daemon syncs a library and is
stopped; the change that leads to the point is made while it is down; a
second daemon started with ``OHSYNC_CRASH_AT=<point>`` must die of SIGKILL
(the point was really reached); a third one, without the variable, must
converge: mirror == server (trash and conflict copies included, nothing
ignored), every version still somewhere (mirror, server incl. ``/.trash/``
and ``/.conflict/``, or the backups in the state dir), one conflict copy at
most, and no ``.ohsync-tmp-*`` leftovers.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import DaemonProc, Env, mirrored, read_tree, wait_for
from ohsync.engine.crashpoints import POINTS

FILLER = {f"filler/f{i:02}.md": f"filler {i}\n".encode() for i in range(24)}
DOC_BASE = b"# Doc\n\nline one\nline two\n"
DOC_LOCAL = b"# Doc\n\nline one, edited at the desk\nline two\n"
DOC_REMOTE = b"# Doc\n\nline one\nline two, edited on the phone\n"
PIC_BASE = b"\x89PNG base\x00" * 50
PIC_LOCAL = b"\x89PNG local\x00" * 50
PIC_REMOTE = b"\x89PNG remote\x00" * 50
MOVE_ME = b"a file that only moves\n" * 20
GONE = b"a file that gets deleted\n" * 3


@dataclass
class Scenario:
    point: str
    change: Callable[["Setup"], None]
    must_survive: tuple[bytes, ...]
    check: Callable[["Setup"], None] | None = None
    conflict_copies: int = 0


@dataclass
class Setup:
    env: Env
    srv: object
    repo: str
    mirror: Path

    def put(self, rel: str, data: bytes) -> None:
        self.srv.put_file(self.repo, "/" + rel, data)

    def write(self, rel: str, data: bytes) -> None:
        (self.mirror / rel).parent.mkdir(parents=True, exist_ok=True)
        (self.mirror / rel).write_bytes(data)

    def backups(self) -> list[bytes]:
        root = self.env.root / "state" / "backups"
        return [p.read_bytes() for p in root.rglob("*") if p.is_file()] if root.is_dir() else []


def _remote_edit(s: Setup) -> None:
    s.put("doc.md", DOC_REMOTE)


def _local_edit(s: Setup) -> None:
    s.write("doc.md", DOC_LOCAL)


def _both_edit_binary(s: Setup) -> None:
    s.write("media/pic.bin", PIC_LOCAL)
    s.put("media/pic.bin", PIC_REMOTE)


NEW_FILES = {f"fresh/new{i}.md": f"# New {i}\n\nwritten while the daemon was down\n".encode() for i in range(6)}


def _local_new_files(s: Setup) -> None:
    for rel, data in NEW_FILES.items():
        s.write(rel, data)


def _check_new_files(s: Setup) -> None:
    tree = s.srv.tree(s.repo)
    for rel, data in NEW_FILES.items():
        assert tree["/" + rel] == data


def _local_move(s: Setup) -> None:
    (s.mirror / "moved").mkdir()
    os.rename(s.mirror / "dir" / "move-me.txt", s.mirror / "moved" / "renamed.txt")


def _remote_move(s: Setup) -> None:
    s.srv.mkdir(s.repo, "/moved")
    s.srv.move_path(s.repo, "/dir/move-me.txt", "/moved")
    s.srv.rename_path(s.repo, "/moved/move-me.txt", "renamed.txt")


def _local_delete(s: Setup) -> None:
    (s.mirror / "gone.txt").unlink()


def _remote_delete(s: Setup) -> None:
    s.srv.delete_path(s.repo, "/gone.txt")


def _check_pulled(s: Setup) -> None:
    assert (s.mirror / "doc.md").read_bytes() == DOC_REMOTE
    assert DOC_BASE in s.backups()           # the overwritten local version was backed up


def _check_pushed(s: Setup) -> None:
    assert s.srv.read_file(s.repo, "/doc.md") == DOC_LOCAL


def _check_conflict(s: Setup) -> None:
    assert s.srv.read_file(s.repo, "/media/pic.bin") == PIC_LOCAL   # the local version wins the path


def _check_moved(s: Setup) -> None:
    tree = s.srv.tree(s.repo)
    assert tree["/moved/renamed.txt"] == MOVE_ME and "/dir/move-me.txt" not in tree
    assert not any(k.startswith("/.trash") for k in tree)            # a move is not a delete
    # carried as a move: no content went up or down after the first sync
    assert s.srv.request_count(r"POST /seafhttp/(upload|update)") == 0, s.srv.faults.lines
    assert s.srv.request_count(r"GET /seafhttp/files/") == 0, s.srv.faults.lines


def _check_trashed(s: Setup) -> None:
    tree = s.srv.tree(s.repo)
    assert "/gone.txt" not in tree and tree["/.trash/gone.txt"] == GONE
    assert [k for k in tree if k.startswith("/.trash/")] == ["/.trash/gone.txt"]   # trashed once


def _check_deleted_locally(s: Setup) -> None:
    assert not (s.mirror / "gone.txt").exists()
    assert GONE in s.backups()


SCENARIOS = [
    Scenario("remote.snapshot_written", _remote_edit, (DOC_REMOTE, DOC_BASE), _check_pulled),
    Scenario("pull.downloaded", _remote_edit, (DOC_REMOTE, DOC_BASE), _check_pulled),
    Scenario("replace.ready", _remote_edit, (DOC_REMOTE, DOC_BASE), _check_pulled),
    Scenario("replace.exchanged", _remote_edit, (DOC_REMOTE, DOC_BASE), _check_pulled),
    Scenario("pull.replaced", _remote_edit, (DOC_REMOTE, DOC_BASE), _check_pulled),
    Scenario("push.uploaded", _local_edit, (DOC_LOCAL,), _check_pushed),
    Scenario("push.verified", _local_edit, (DOC_LOCAL,), _check_pushed),
    Scenario("batch.uploaded", _local_new_files, tuple(NEW_FILES.values()), _check_new_files),
    Scenario("batch.verified", _local_new_files, tuple(NEW_FILES.values()), _check_new_files),
    Scenario("conflict.archived_remote", _both_edit_binary, (PIC_LOCAL, PIC_REMOTE), _check_conflict, 1),
    Scenario("conflict.archived", _both_edit_binary, (PIC_LOCAL, PIC_REMOTE), _check_conflict, 1),
    Scenario("move.remote_done", _local_move, (MOVE_ME,), _check_moved),
    Scenario("move.local_done", _remote_move, (MOVE_ME,), _check_moved),
    Scenario("delete.remote_trashed", _local_delete, (GONE,), _check_trashed),
    Scenario("delete.local_backed_up", _remote_delete, (GONE,), _check_deleted_locally),
]


def test_every_sync_crash_point_has_a_scenario() -> None:
    # the drop-folder filing points (``filing.*``) are covered by the filing tests
    assert sorted(s.point for s in SCENARIOS) == sorted(p for p in POINTS if not p.startswith("filing."))


@pytest.fixture
def setup(seed_daemon):
    s = seed_daemon(files={**FILLER, "doc.md": DOC_BASE, "media/pic.bin": PIC_BASE, "dir/move-me.txt": MOVE_ME,
                           "gone.txt": GONE}, poll_interval=1.0)
    return Setup(s.env, s.srv, s.repo_id, s.mirror)


def _converged(s: Setup) -> bool:
    return read_tree(s.mirror) == mirrored(s.srv.tree(s.repo))


@pytest.mark.parametrize("sc", SCENARIOS, ids=lambda sc: sc.point)
def test_killed_at_crash_point_converges_without_loss(setup: Setup, sc: Scenario) -> None:
    s = setup
    first = DaemonProc(s.env)
    try:
        first.wait_state("idle", timeout=90)
        wait_for(lambda: _converged(s), timeout=60, what="the first sync")
    finally:
        first.stop()
    assert first.proc.returncode == 0

    sc.change(s)
    s.srv.reset_counters()
    crashing = DaemonProc(s.env, extra_env={"OHSYNC_CRASH_AT": sc.point})
    try:
        code = crashing.proc.wait(timeout=90)
    except subprocess.TimeoutExpired:
        crashing.stop()
        raise AssertionError(f"{sc.point} was never reached:\n{crashing.output()[-3000:]}") from None
    crashing.log.close()
    assert code == -9, f"expected SIGKILL at {sc.point}, got {code}:\n{crashing.output()[-3000:]}"

    after = DaemonProc(s.env)
    # an archived conflict copy needs the person: the daemon says "attention", never "Up to date"
    settled = ("attention",) if sc.conflict_copies else ("idle",)
    try:
        after.wait_state(*settled, timeout=90)
        try:
            wait_for(lambda: _converged(s), timeout=60, what="convergence after the restart")
        except AssertionError:
            local, server = read_tree(s.mirror), mirrored(s.srv.tree(s.repo))
            diff = sorted(k for k in set(local) | set(server) if local.get(k) != server.get(k))
            raise AssertionError(f"no convergence after a crash at {sc.point}; differing paths "
                                 f"(local-only, server-only or different): {diff}") from None
        after.wait_state(*settled, timeout=60)
        assert after.client().call("wait", {"timeout": 60}) == {"synced": True}
        st = after.status()
    finally:
        after.stop()

    local, server = read_tree(s.mirror), s.srv.tree(s.repo)
    assert local == mirrored(server)                                     # nothing ignored; the trash stays there
    assert not [p for p in s.mirror.rglob("*") if p.name.startswith(".ohsync-tmp-")]
    everywhere = set(local.values()) | set(server.values()) | set(s.backups())
    for version in sc.must_survive:
        assert version in everywhere, f"a version was lost at {sc.point}: {version[:40]!r}"
    copies = [k for k in server if k.startswith("/.conflict/")]
    assert len(copies) == sc.conflict_copies, copies                     # no duplicate conflict copies
    if sc.conflict_copies:
        assert server[copies[0]] == PIC_REMOTE
        assert len(st["conflicts"]) == 1 if isinstance(st["conflicts"], list) else st["conflicts"] == 1
    assert not [k for k in server if " (1)" in k]                        # no auto-renamed duplicates
    for rel, data in FILLER.items():
        assert server["/" + rel] == data
    if sc.check is not None:
        sc.check(s)
