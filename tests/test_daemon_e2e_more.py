"""End to end through the real daemon: drop-folder filing, the mass-delete
valve with `ohsync confirm-deletes`, `ohsync resync`, deletes both ways."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import DEMO_LIBRARY, read_tree, wait_for
from engine_helpers import SAMPLES

# The demo library already holds the sample PDF; a trailing comment makes another document.
PDF_BYTES = (SAMPLES / "Files" / "learn" / "2026-2027-1" / "数据结构" / "第07讲-散列表.pdf"
             ).read_bytes() + b"\n% lecture 07, second printing\n"


@pytest.fixture
def daemon(seed_daemon, tmp_path: Path):
    drop = tmp_path / "drop"
    s = seed_daemon(tree=DEMO_LIBRARY, poll_interval=1.0,
                    filing={"drop_dir": str(drop), "default": "/Files/_inbox/",
                            "rules": [{"match": "*.pdf", "dest": "/Files/lectures/"}]},
                    safety={"max_delete_files": 3, "max_delete_percent": 25})
    proc = s.start(wait="idle")
    proc.repo_id, proc.mirror, proc.drop, proc.srv = s.repo_id, s.mirror, drop, s.srv
    return proc


def test_a_dropped_pdf_is_filed_with_sidecar_and_journal_line(daemon) -> None:
    srv, repo = daemon.srv, daemon.repo_id
    assert daemon.drop.is_dir()  # created on start
    (daemon.drop / "lecture07.pdf").write_bytes(PDF_BYTES)
    wait_for(lambda: "/Files/lectures/lecture07.pdf" in srv.tree(repo), timeout=60, what="the filed PDF")
    wait_for(lambda: "/Files/lectures/lecture07.pdf.md" in srv.tree(repo), timeout=60, what="its sidecar")
    tree = srv.tree(repo)
    assert tree["/Files/lectures/lecture07.pdf"] == PDF_BYTES
    sidecar = tree["/Files/lectures/lecture07.pdf.md"].decode()
    assert "type: file" in sidecar and "source: drop" in sidecar and "original_name: lecture07.pdf" in sidecar
    wait_for(lambda: not (daemon.drop / "lecture07.pdf").exists(), timeout=30, what="the drop folder emptied")
    tree = srv.tree(repo)  # the journal line is written before the drop folder is emptied
    line = "归档 lecture07.pdf → /Files/lectures/lecture07.pdf".encode()
    journal = [k for k, v in tree.items() if k.startswith("/journal/") and v.count(line) == 1]
    assert len(journal) == 1
    wait_for(lambda: (daemon.mirror / "Files/lectures/lecture07.pdf").exists(), timeout=30, what="the local copy")
    daemon.wait_state("idle", timeout=60)
    st = daemon.status()
    assert st["drop_dir"] == str(daemon.drop)
    # `ohsync file` on a duplicate says where it already is and files nothing
    extra = daemon.env.root / "again.pdf"
    extra.write_bytes(PDF_BYTES)
    r = daemon.cli("file", str(extra))
    assert r.returncode == 0, r.stderr
    assert "lectures/lecture07.pdf" in r.stdout
    assert [k for k in srv.tree(repo) if k.startswith("/Files/lectures/")] == [
        "/Files/lectures/lecture07.pdf", "/Files/lectures/lecture07.pdf.md"]


def test_mass_delete_is_held_until_confirm_deletes(daemon) -> None:
    srv, repo = daemon.srv, daemon.repo_id
    before = srv.tree(repo)
    victims = sorted(p for p in daemon.mirror.rglob("*.md") if "Files" not in p.parts)[:5]
    assert daemon.cli("pause").returncode == 0  # the deletes reach the daemon as one batch
    for p in victims:
        p.unlink()
    assert daemon.cli("resume").returncode == 0
    wait_for(lambda: daemon.status()["held_deletes"] == 5, timeout=60, what="held deletes")
    assert srv.tree(repo).items() >= before.items()
    r = daemon.cli("status", "--json")
    assert json.loads(r.stdout)["held_deletes"] == 5
    r = daemon.cli("confirm-deletes", "--list")
    assert r.returncode == 0
    assert all(p.relative_to(daemon.mirror).as_posix() in r.stdout for p in victims)
    r = daemon.cli("confirm-deletes")
    assert r.returncode == 0 and "5" in r.stdout
    rel = [p.relative_to(daemon.mirror).as_posix() for p in victims]
    wait_for(lambda: all("/" + x not in srv.tree(repo) for x in rel), timeout=60, what="the deletes done")
    tree = srv.tree(repo)
    assert all(tree["/.trash/" + x] == before["/" + x] for x in rel)   # soft-deleted, not gone
    wait_for(lambda: daemon.status()["held_deletes"] == 0, timeout=30, what="nothing held")


def test_resync_restores_held_deletes_and_deletes_nothing(daemon) -> None:
    srv, repo = daemon.srv, daemon.repo_id
    before = srv.tree(repo)
    victims = sorted(p for p in daemon.mirror.rglob("*.md") if "Files" not in p.parts)[:5]
    assert daemon.cli("pause").returncode == 0
    for p in victims:
        p.unlink()
    assert daemon.cli("resume").returncode == 0
    wait_for(lambda: daemon.status()["held_deletes"] == 5, timeout=60, what="held deletes")
    r = daemon.cli("resync")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: all(p.exists() for p in victims), timeout=60, what="the files back from the server")
    daemon.wait_state("idle", timeout=60)
    assert srv.tree(repo) == before
    assert read_tree(daemon.mirror) == before
    assert daemon.status()["held_deletes"] == 0
