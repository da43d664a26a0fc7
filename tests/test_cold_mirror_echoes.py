"""Echo suppression after a cold mirror: the watcher reports every file and
folder the engine just wrote; none of those events costs a second pass, and
a real local edit made during or right after the cold mirror is still pushed.

The daemon runs with ``-v`` so that every pass is logged (``sync pass in``):
the count of passes is what these tests read, together with devserver's
tree.  Polls are a minute apart, so no poll runs inside a test.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import FakeEngine, read_tree, wait_for
from engine_helpers import USER, make_mirror
from ohsync.daemon.watcher import Watcher

#: 5 folders (2 levels) of small files: the zip path for the cold mirror
FILES = {f"notes/d{d}/sub/f{i:02}.md": f"file {i} in d{d}\n".encode() * 4 for d in range(5) for i in range(6)}
FEW = {f"A/f{i:02}.md": f"file {i} in A\n".encode() * 3 for i in range(6)}
FEW.update({f"z/other{i}.txt": f"other {i}\n".encode() for i in range(2)})


def _passes(daemon) -> list[str]:
    return [line for line in daemon.output().splitlines() if "sync pass in" in line]


def _settled(daemon) -> dict:
    return daemon.wait_state("idle", timeout=120)


# ------------------------------------------------------------------ the engine's half


def test_the_files_and_folders_of_a_cold_mirror_are_echoes_and_an_edit_is_not(devserver, tmp_path: Path) -> None:
    repo = devserver.create_library(USER, "OH-Memory")
    for rel, data in FILES.items():
        devserver.put_file(repo, "/" + rel, data)
    m = make_mirror(devserver, repo, tmp_path)
    m.sync()
    written = sorted(FILES)
    folders = sorted({rel.rsplit("/", i)[0] for rel in written for i in (1, 2, 3)} - {""})
    assert folders and all(m.engine.own_folder(str(m.root / f)) for f in folders)
    sorted_paths = m.engine.watched(written + folders)
    assert sorted_paths.echoes == set(written) and sorted_paths.awaiting == set()
    assert sorted_paths.to_sync == set(folders)                       # a folder path: the pass decides
    edited, gone = written[0], written[1]
    m.write(edited, b"edited at the desk\n")
    (m.root / gone).unlink()
    m.write("notes/d0/new.md", b"# new\n")
    again = m.engine.watched([edited, gone, "notes/d0/new.md", "never-existed.md", *written[2:]])
    assert again.awaiting == {edited, gone, "notes/d0/new.md"}
    assert again.to_sync == {edited, gone, "notes/d0/new.md", "never-existed.md"}
    assert again.echoes == set(written[2:])
    # a folder the person made, and ours once it was moved away and back, are not echoes
    (m.root / "mine").mkdir()
    assert not m.engine.own_folder(str(m.root / "mine"))
    os.rename(m.root / "notes" / "d1", tmp_path / "d1-outside")
    m.engine.forget_own_folders()                                      # the watcher saw the move
    os.rename(tmp_path / "d1-outside", m.root / "notes" / "d1")
    assert not m.engine.own_folder(str(m.root / "notes" / "d1"))
    m.state.close()
    m.client.close()


# ------------------------------------------------------------------ the watcher's half


class _Recorder:
    def __init__(self) -> None:
        self.batches: list[tuple[list[str], bool]] = []

    def __call__(self, paths: list[str], full_scan: bool) -> None:
        self.batches.append((paths, full_scan))


def test_a_folder_the_engine_made_asks_for_no_full_scan_and_its_files_are_reported(tmp_path: Path) -> None:
    ours: set[str] = set()
    rec = _Recorder()
    w = Watcher(tmp_path, FakeEngine(tmp_path).rel_path, rec, quiet=0.3, own_folder=lambda p: p in ours)
    w.start()  # returns with the tree watched (watchdog adds its inotify watches in start())
    try:
        made = tmp_path / "made-by-the-engine"
        made.mkdir()
        ours.add(str(made))
        (made / "inside.md").write_bytes(b"x\n")
        wait_for(lambda: any("made-by-the-engine/inside.md" in b for b, _ in rec.batches), timeout=15,
                 what="the file in the engine's folder")
        time.sleep(1.0)  # why: a quiet period over three debounce periods: no full scan may follow
        assert not any(scan for _, scan in rec.batches)
        (tmp_path / "made-by-the-person").mkdir()                      # not ours: a full scan, as before
        wait_for(lambda: any(scan for _, scan in rec.batches), timeout=15, what="a full scan")
    finally:
        w.stop()


def test_a_folder_deleted_or_moved_makes_the_watcher_forget_the_engines_folders(tmp_path: Path) -> None:
    forgotten: list[bool] = []
    rec = _Recorder()
    (tmp_path / "old").mkdir()
    w = Watcher(tmp_path, FakeEngine(tmp_path).rel_path, rec, quiet=0.3, own_folder=lambda p: True,
                forget_own_folders=lambda: forgotten.append(True))
    w.start()  # returns with the tree watched (watchdog adds its inotify watches in start())
    try:
        os.rename(tmp_path / "old", tmp_path / "renamed")
        wait_for(lambda: forgotten and any(scan for _, scan in rec.batches), timeout=15,
                 what="the forget call and the full scan of a move")
    finally:
        w.stop()


# ------------------------------------------------------------------ through the daemon


def test_a_cold_mirror_costs_one_pass_and_goes_idle(seed_daemon, devserver) -> None:
    s = seed_daemon(files=FILES, poll_interval=60.0)
    daemon = s.start("-v")
    _settled(daemon)
    assert s.converged()
    time.sleep(3.0)  # why: a quiet period: the watcher's quiet period (0.7 s) is long over: its echoes were handed on
    passes = _passes(daemon)
    assert len(passes) == 1, passes                                   # no second walk of the files
    st = daemon.status()
    assert st["state"] == "idle" and st["pending_up"] == 0


def test_edits_during_and_right_after_a_cold_mirror_are_pushed(seed_daemon, devserver) -> None:
    s = seed_daemon(files=FEW, poll_interval=60.0)
    # slow downloads (the per-file path for 8 files) so that the test acts in the middle of the pass
    devserver.inject_fault("GET", r"^/seafhttp/files/", latency=0.4, count=len(FEW))
    daemon = s.start("-v")
    first = s.mirror / "A" / "f00.md"
    wait_for(first.is_file, timeout=60, interval=0.02, what="the first downloaded file")
    first.write_bytes(b"edited while the cold mirror runs\n")            # a file the engine just wrote
    (s.mirror / "A" / "during.md").write_bytes(b"# new while it runs\n")  # in a folder the engine made
    _settled(daemon)
    after = s.mirror / "z" / "other1.txt"
    after.write_bytes(b"edited right after\n")
    wait_for(lambda: devserver.tree(s.repo_id).get("/z/other1.txt") == b"edited right after\n", timeout=30,
             what="the edit right after the cold mirror on the server")
    wait_for(lambda: devserver.tree(s.repo_id).get("/A/f00.md") == b"edited while the cold mirror runs\n",
             timeout=30, what="the edit during the cold mirror on the server")
    tree = devserver.tree(s.repo_id)
    assert tree["/A/during.md"] == b"# new while it runs\n"
    assert not [k for k in tree if k.startswith(("/.conflict/", "/.trash/"))]
    wait_for(s.converged, timeout=30, what="convergence")


def test_a_folder_of_the_cold_mirror_moved_away_and_back_is_watched_again(seed_daemon, devserver, tmp_path) -> None:
    s = seed_daemon(files=FEW, poll_interval=60.0)
    daemon = s.start()
    _settled(daemon)
    outside = tmp_path / "outside-A"
    os.rename(s.mirror / "A", outside)                                 # out of the mirror: a delete
    wait_for(lambda: "/A/f00.md" not in devserver.tree(s.repo_id), timeout=30, what="the delete on the server")
    _settled(daemon)
    os.rename(outside, s.mirror / "A")                                 # back, same inodes: moved in
    wait_for(lambda: devserver.tree(s.repo_id).get("/A/f00.md") == FEW["A/f00.md"], timeout=30,
             what="the folder uploaded again")
    _settled(daemon)
    (s.mirror / "A" / "f01.md").write_bytes(b"edited inside the folder moved back\n")
    wait_for(lambda: devserver.tree(s.repo_id).get("/A/f01.md") == b"edited inside the folder moved back\n",
             timeout=20, what="an edit inside it on the server (the watcher sees into it)")
    assert read_tree(s.mirror)["/A/f01.md"] == b"edited inside the folder moved back\n"
