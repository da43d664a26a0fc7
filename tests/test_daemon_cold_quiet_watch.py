"""The daemon stops watching while a cold mirror's archive is written (every
file written would be an echo event), then watches again and scans: an edit
made after it is pushed as ever."""
from __future__ import annotations

from daemon_helpers import seed_daemon, wait_for  # noqa: F401
from ohsync.engine.sync.bulk import QUIET_WATCH_FILES


def test_a_cold_mirror_is_written_unwatched_then_watched_again(seed_daemon, devserver) -> None:
    files = {f"notes/f{i // 100}/n{i}.md": f"note {i}\n".encode() for i in range(QUIET_WATCH_FILES + 20)}
    s = seed_daemon(files=files, poll_interval=30.0)
    daemon = s.start(wait="idle", timeout=120)
    log = (s.env.root / "state" / "logs" / "ohsync.log").read_text(encoding="utf-8")
    assert "not watching" in log and "watching" in log.split("not watching", 1)[1]
    assert len(list((s.mirror / "notes").rglob("*.md"))) == len(files)
    edited = s.mirror / "notes" / "f0" / "n0.md"
    edited.write_bytes(b"note 0\nedited after the cold mirror\n")
    wait_for(lambda: b"edited after" in devserver.read_file(s.repo_id, "/notes/f0/n0.md"), timeout=20,
             what="the edit pushed by the watcher's event (the poll is 30 s away)")
    daemon.wait_state("idle", timeout=60)
