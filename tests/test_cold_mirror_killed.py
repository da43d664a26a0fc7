"""A cold mirror killed (SIGKILL) while it writes the zip's files, then run again.

The zip path writes new files in batches (``engine/sync/new_files.py``): temp
files first, one round of fsyncs, the renames, then the batch's bases in one
transaction.  Killed at any moment of that, the next pass must converge:
every file whole and equal to the server's, no conflict copy, no error, no
temp file left, and a base for every file (a further pass fetches nothing).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from engine_helpers import USER, make_mirror, mirrored, read_tree

from ohsync.engine.ids import sha1_bytes

_PASS = textwrap.dedent("""
    from pathlib import Path
    from ohsync.engine.client import SeafileClient
    from ohsync.engine.context import EngineOptions
    from ohsync.engine.state import StateStore
    from ohsync.engine.sync.engine import SyncEngine
    base = Path({base!r})
    state = StateStore(base / "m-state" / "state.db", base / "m-state" / "blobs")
    client = SeafileClient({url!r}, {token!r}, retries=0)
    engine = SyncEngine(client, {repo!r}, base / "m", state,
                        options=EngineOptions(backup_dir=base / "m-state" / "backups", library_name="OH-Memory"))
    print("start", flush=True)
    engine.sync()
    print("finished", flush=True)
""")

FILES = {f"notes/d{i % 12:02d}/n{i:04d}.md": f"# Note {i}\n\nline {i} of a cold mirror\n".encode() * (1 + i % 5)
         for i in range(1500)}


def _local_count(root) -> int:  # noqa: ANN001
    if not root.exists():
        return 0
    return sum(1 for _, _, files in os.walk(root) for f in files if not f.startswith(".ohsync-tmp-"))


def test_a_cold_mirror_killed_while_writing_converges_without_loss(devserver, tmp_path):
    repo = devserver.create_library(USER, "OH-Memory")
    for rel, data in FILES.items():
        devserver.put_file(repo, "/" + rel, data)
    script = _PASS.format(base=str(tmp_path), url=devserver.url, token=devserver.token_for(USER), repo=repo)
    root = tmp_path / "m"
    killed_at = []
    for threshold in (150, 700, 1200):  # at three points of the writing, each time from where it stopped
        proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
        assert proc.stdout is not None and proc.stdout.readline() == b"start\n"
        deadline = time.monotonic() + 120
        while _local_count(root) < threshold and time.monotonic() < deadline:
            try:
                proc.wait(0.005)  # the pass ended before the threshold: nothing left to interrupt
                break
            except subprocess.TimeoutExpired:
                pass
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        killed_at.append(_local_count(root))
    assert killed_at[0] < len(FILES), killed_at  # at least the first kill fell inside the writing
    m = make_mirror(devserver, repo, tmp_path)
    report = m.sync()
    assert report.conflicts == [] and report.errors == [], (report.conflicts, report.errors)
    tree = devserver.tree(repo)
    assert read_tree(root) == mirrored(tree) == {"/" + rel: data for rel, data in FILES.items()}
    assert not any(p.startswith("/.conflict") for p in tree)
    assert not list(root.rglob(".ohsync-tmp-*"))
    for rel, data in FILES.items():  # every file has its base, naming its content
        base = m.state.get_base(rel)
        assert base is not None and base.sha1 == sha1_bytes(data), rel
    devserver.reset_counters()
    again = m.sync()
    assert again.downloaded == [] and again.uploaded == [] and again.errors == []
    assert devserver.request_count(r"GET /seafhttp/(files|zip)/") == 0, devserver.requests
