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
from daemon_helpers import DaemonProc, isolated_env, read_tree, wait_for, write_config  # noqa: E402,F401
from engine_helpers import sample_library  # noqa: E402

from ohsync.daemon import credentials  # noqa: E402

USER = "user@example.edu.cn"
SAMPLES = {
    "preferences/作息与提醒偏好.md": "\r\n",      # CRLF everywhere
    "knowledge/校园服务入口速查.md": "\n",         # UTF-8 BOM
    "knowledge/哈希表冲突处理.md": "\n",           # frontmatter never closed
    "journal/2026-11.md": "\n",                    # 297 observation lines
}


@pytest.fixture
def stopped_mirror(isolated_env, devserver, tmp_path: Path):
    """A mirror synced once by the daemon, which is then stopped."""
    repo = devserver.create_library(USER, "OH-Memory", from_tree=sample_library(tmp_path / "seed"))
    credentials.save_token(devserver.url, USER, devserver.token_for(USER))
    mirror = tmp_path / "mirror"
    write_config(isolated_env, devserver.url, USER, mirror, poll_interval=1.0)
    first = DaemonProc(isolated_env)
    # synced; the sample's unclosed frontmatter keeps the state at "attention", never "Up to date"
    st = first.wait_state("attention", timeout=90)
    assert [(i["kind"], i["path"]) for i in st["attention"]] == [("damaged", "knowledge/哈希表冲突处理.md")]
    assert first.cli("stop").returncode == 0
    first.wait_exit(60)
    return repo, mirror


def test_concurrent_appends_to_awkward_samples_merge_without_conflict(isolated_env, devserver, stopped_mirror):
    repo, mirror = stopped_mirror
    ours, theirs = {}, {}
    for rel, eol in SAMPLES.items():
        ours[rel] = f"- [desk] 2026-11-30 20:00 桌面端追加 {rel}{eol}".encode()
        theirs[rel] = f"- [phone] 2026-11-30 20:01 手机端追加 {rel}{eol}".encode()
        with open(mirror / rel, "ab") as fh:
            fh.write(ours[rel])
        devserver.put_file(repo, "/" + rel, devserver.read_file(repo, "/" + rel) + theirs[rel])
    daemon = DaemonProc(isolated_env)
    try:
        daemon.wait_state("attention", timeout=90)  # synced; the damaged sample is still named
        tree = devserver.tree(repo)
        assert read_tree(mirror) == tree
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
    finally:
        daemon.stop()


def test_sensitivity_changed_differently_is_a_named_conflict(isolated_env, devserver, stopped_mirror):
    repo, mirror = stopped_mirror
    rel = "preferences/沟通风格偏好.md"
    original = (mirror / rel).read_bytes()
    assert b"sensitivity: normal" in original
    ours = original.replace(b"sensitivity: normal", b"sensitivity: sensitive")
    theirs = original.replace(b"sensitivity: normal", b"sensitivity: private")
    (mirror / rel).write_bytes(ours)
    devserver.put_file(repo, "/" + rel, theirs)
    daemon = DaemonProc(isolated_env)
    try:
        daemon.wait_state("attention", timeout=90)  # synced; the damaged sample is still named
        tree = devserver.tree(repo)
        copies = [p for p in tree if p.startswith("/.conflict/preferences/沟通风格偏好__")]
        assert len(copies) == 1 and tree[copies[0]] == theirs
        assert tree["/" + rel] == ours == (mirror / rel).read_bytes()
        assert (mirror / copies[0].lstrip("/")).read_bytes() == theirs
        r = daemon.cli("conflicts")
        assert r.returncode == 0 and rel in r.stdout and "sensitivity" in r.stdout
        assert daemon.status()["conflicts"] == 1
    finally:
        daemon.stop()
