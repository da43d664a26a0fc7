"""Memory-aware merges end to end: the real daemon, devserver, and the
awkward sample files (CRLF, BOM, unclosed frontmatter, the 300-line journal).
Both sides append while the daemon is stopped; the next start merges them
with no conflict copy.  Two different `sensitivity` values make one conflict
copy and `ohsync conflicts` names the field."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import mirrored, read_tree
from engine_helpers import sample_library

SAMPLES = {
    "preferences/作息与提醒偏好.md": "\r\n",      # CRLF everywhere
    "knowledge/校园服务入口速查.md": "\n",         # UTF-8 BOM
    "knowledge/哈希表冲突处理.md": "\n",           # frontmatter never closed
    "journal/2026-11.md": "\n",                    # 297 observation lines
}


@pytest.fixture
def stopped_mirror(seed_daemon, tmp_path: Path):
    """A mirror synced once by the daemon, which is then stopped; the setup starts the next one."""
    s = seed_daemon(tree=sample_library(tmp_path / "seed"), poll_interval=1.0)
    first = s.start()
    # synced; the sample's unclosed frontmatter keeps the state at "attention", never "Up to date"
    st = first.wait_state("attention", timeout=90)
    assert [(i["kind"], i["path"]) for i in st["attention"]] == [("damaged", "knowledge/哈希表冲突处理.md")]
    assert first.cli("stop").returncode == 0
    first.wait_exit(60)
    return s


def test_concurrent_appends_to_awkward_samples_merge_without_conflict(devserver, stopped_mirror):
    repo, mirror = stopped_mirror.repo_id, stopped_mirror.mirror
    ours, theirs = {}, {}
    for rel, eol in SAMPLES.items():
        ours[rel] = f"- [desk] 2026-11-30 20:00 桌面端追加 {rel}{eol}".encode()
        theirs[rel] = f"- [phone] 2026-11-30 20:01 手机端追加 {rel}{eol}".encode()
        with open(mirror / rel, "ab") as fh:
            fh.write(ours[rel])
        devserver.put_file(repo, "/" + rel, devserver.read_file(repo, "/" + rel) + theirs[rel])
    daemon = stopped_mirror.start(wait="attention")  # synced; the damaged sample is still named
    tree = devserver.tree(repo)
    assert read_tree(mirror) == mirrored(tree)
    for rel in SAMPLES:
        merged = tree["/" + rel]
        assert merged.count(ours[rel]) == 1 and merged.count(theirs[rel]) == 1, rel
    assert tree["/knowledge/校园服务入口速查.md"].startswith(b"\xef\xbb\xbf")
    assert b"\n" not in tree["/preferences/作息与提醒偏好.md"].replace(b"\r\n", b"")
    assert not [p for p in tree if p.startswith("/.conflict/")]
    st = daemon.status()
    assert st["conflicts"] == 0
    damaged = daemon.client().call("damaged")
    assert [d["path"] for d in damaged] == ["knowledge/哈希表冲突处理.md"]


def test_sensitivity_changed_differently_is_a_named_conflict(devserver, stopped_mirror):
    repo, mirror = stopped_mirror.repo_id, stopped_mirror.mirror
    rel = "preferences/沟通风格偏好.md"
    original = (mirror / rel).read_bytes()
    assert b"sensitivity: normal" in original
    ours = original.replace(b"sensitivity: normal", b"sensitivity: sensitive")
    theirs = original.replace(b"sensitivity: normal", b"sensitivity: private")
    (mirror / rel).write_bytes(ours)
    devserver.put_file(repo, "/" + rel, theirs)
    daemon = stopped_mirror.start(wait="attention")  # synced; the damaged sample is still named
    tree = devserver.tree(repo)
    copies = [p for p in tree if p.startswith("/.conflict/preferences/沟通风格偏好__")]
    assert len(copies) == 1 and tree[copies[0]] == theirs
    assert tree["/" + rel] == ours == (mirror / rel).read_bytes()
    assert (mirror / copies[0].lstrip("/")).read_bytes() == theirs
    r = daemon.cli("conflicts")
    assert r.returncode == 0 and rel in r.stdout and "sensitivity" in r.stdout
    assert daemon.status()["conflicts"] == 1
