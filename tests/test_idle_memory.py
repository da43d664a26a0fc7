"""An idle daemon's memory: the real ``ohsync run --no-tray`` on a generated
3,000-file library does not grow across full passes with nothing to do, and
it does not read the memory tools' index until a ``memory.*`` request asks."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import wait_for

GENERATOR = Path(__file__).resolve().parent / "data" / "samples" / "make_scale_library.py"
FILES = 3000


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS in /proc/<pid>/status")


def test_idle_rss_does_not_grow_across_full_passes(seed_daemon, tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(GENERATOR), str(tmp_path / "gen"), "--files", str(FILES), "--seed", "3"],
                   check=True, capture_output=True, timeout=300)
    s = seed_daemon(tree=tmp_path / "gen" / "OH-Memory", poll_interval=600.0,
                    filing={"drop_dir": str(tmp_path / "drop")})
    daemon = s.start(wait=("idle", "attention"), timeout=240)
    try:
        rpc = daemon.client(60)
        rss: list[int] = []
        for _ in range(10):
            before = rpc.call("status")["last_scan"]
            time.sleep(1.1)  # why: last_scan has one-second resolution: the next one must differ
            rpc.call("refresh")  # a full local scan and a poll; nothing changed on either side
            wait_for(lambda before=before: (st := rpc.call("status"))["last_scan"] != before
                     and st["state"] in ("idle", "attention") and not st["pending_up"],
                     timeout=120, what="the full pass")
            rss.append(_rss_kib(daemon.proc.pid))
        status = rpc.call("status")
    finally:
        daemon.stop()
    # it did mirror the library (1 % is in the trash, which stays on the server)
    assert len(list((tmp_path / "mirror").rglob("*.md"))) >= FILES * 0.98
    assert status["memory_index"] == "not built"  # nobody asked for memory: no index was read
    # after the first passes settle the allocator, further passes add nothing that stays: a leak
    # raises every later reading, while a transient peak (an arena not yet returned) raises one,
    # so the lowest of the last three is compared with the lowest of passes 2-4
    growth = min(rss[-3:]) - min(rss[1:4])
    assert growth < 3 * 1024, f"RSS grew by {growth} KiB over {len(rss) - 4} idle full passes: {rss}"
