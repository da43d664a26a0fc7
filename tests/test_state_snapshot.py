"""The remote snapshot is written by difference, in the transaction that
records its head: one remote change costs a few rows whatever the size of
the library, and a kill between the snapshot's rows and the head leaves
the old pair, which the next pass completes."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

from engine_helpers import USER, make_mirror, read_tree, mirrored


def _library(devserver, tmp_path: Path, folders: int, per_folder: int) -> str:
    seed = tmp_path / "seed"
    for f in range(folders):
        for i in range(per_folder):
            path = seed / f"folder{f:02}" / f"note{i:03}.md"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"# note {f}/{i}\n")
    return devserver.create_library(USER, "OH-Memory", from_tree=seed)


def _rows_written_by_one_remote_edit(devserver, tmp_path: Path, folders: int) -> int:
    repo = _library(devserver, tmp_path, folders, 20)
    m = make_mirror(devserver, repo, tmp_path)
    try:
        m.sync()
        devserver.put_file(repo, "/folder00/note000.md", b"# note edited on the phone\n")
        before = m.state.total_changes()
        report = m.sync()
        assert report.downloaded == ["folder00/note000.md"]
        written = m.state.total_changes() - before
        # the table still holds exactly the server's listing
        snap = m.state.remote_snapshot()
        files = {p: e.id for p, e in snap.items() if not e.is_dir}
        assert files == {p.lstrip("/"): fid for p, fid in devserver.tree_ids(repo).items()}
        return written
    finally:
        m.state.close()
        m.client.close()


def test_one_remote_change_writes_the_same_few_rows_in_a_small_and_a_large_library(devserver, tmp_path):
    small = _rows_written_by_one_remote_edit(devserver, tmp_path / "small", folders=2)
    large = _rows_written_by_one_remote_edit(devserver, tmp_path / "large", folders=20)   # 400 files
    # the file's row and its folder's in the snapshot, its base, the head and its companions
    # (the head's time row is not rewritten when two commits share a second): a handful of
    # rows whatever the library's size, where a rewrite of the snapshot would be hundreds
    assert small <= 10 and large <= 10, (small, large)


_CRASHING_PASS = textwrap.dedent("""
    import sys
    from pathlib import Path
    from ohsync.daemon.crash_at import install_from_env
    from ohsync.engine.client import SeafileClient
    from ohsync.engine.context import EngineOptions
    from ohsync.engine.state import StateStore
    from ohsync.engine.sync.engine import SyncEngine
    assert install_from_env()  # OHSYNC_CRASH_AT kills this process at the point
    base = Path({base!r})
    state = StateStore(base / "m-state" / "state.db", base / "m-state" / "blobs")
    client = SeafileClient({url!r}, {token!r}, retries=0)
    engine = SyncEngine(client, {repo!r}, base / "m", state,
                        options=EngineOptions(backup_dir=base / "m-state" / "backups"))
    engine.sync()
    print("the crash point was not reached", flush=True)
""")


def _snapshot_and_head(db: Path) -> tuple[dict[str, tuple[int, str]], str | None]:
    conn = sqlite3.connect(db)
    try:
        rows = {r[0]: (r[1], r[2]) for r in conn.execute("SELECT path,is_dir,id FROM remote")}
        head = conn.execute("SELECT value FROM meta WHERE key='head'").fetchone()
        return rows, head[0] if head else None
    finally:
        conn.close()


def test_a_kill_between_the_snapshot_rows_and_the_head_leaves_the_old_pair(devserver, tmp_path):
    repo = _library(devserver, tmp_path, 3, 5)
    m = make_mirror(devserver, repo, tmp_path)
    m.sync()
    m.state.close()
    m.client.close()
    db = tmp_path / "m-state" / "state.db"
    old = _snapshot_and_head(db)
    assert old[1] == devserver.head_commit(repo)

    devserver.put_file(repo, "/folder01/note002.md", b"# edited remotely\n")
    devserver.put_file(repo, "/folder02/new.md", b"# new remotely\n")
    script = _CRASHING_PASS.format(base=str(tmp_path), url=devserver.url, token=devserver.token_for(USER),
                                   repo=repo)
    env = dict(os.environ, OHSYNC_CRASH_AT="remote.snapshot_written")
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, timeout=120)
    assert proc.returncode == -9, proc.stdout + proc.stderr               # killed at the point
    # neither the new rows nor the new head: the pair that was committed together before
    assert _snapshot_and_head(db) == old

    after = make_mirror(devserver, repo, tmp_path)
    try:
        report = after.sync()
        assert sorted(report.downloaded) == ["folder01/note002.md", "folder02/new.md"]
        assert report.conflicts == [] and report.uploaded == []
        assert read_tree(after.root) == mirrored(devserver.tree(repo))
        rows, head = _snapshot_and_head(db)
        assert head == devserver.head_commit(repo)
        assert {p: i for p, (d, i) in rows.items() if not d} == {
            p.lstrip("/"): fid for p, fid in devserver.tree_ids(repo).items()}
    finally:
        after.state.close()
        after.client.close()
