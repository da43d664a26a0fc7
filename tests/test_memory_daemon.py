"""The memory tools end to end: the real daemon, devserver and the sample
library.  Writes through the socket return once the server holds them; a
concurrent append by another client through the Web API survives; soft
deletes land in /.trash/ (or stay in place, marked, when the move fails)."""

from __future__ import annotations

import json
import os
import sys
import unicodedata
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import USER, wait_for, write_config
from engine_helpers import sample_library
from ohsync.daemon.protocol import RpcError
from ohsync.engine.client import SeafileClient

JOURNAL = "journal/2026-11.md"


@pytest.fixture
def running(seed_daemon, tmp_path: Path):
    """A daemon that has synced the sample library once (polls rarely: the test decides)."""
    s = seed_daemon(tree=sample_library(tmp_path / "seed"), poll_interval=120.0)
    # synced; the sample's unclosed frontmatter keeps the state at "attention" (it is named there)
    return s.repo_id, s.mirror, s.start(wait="attention")


def test_the_daemon_builds_the_memory_index_on_the_first_memory_request(running) -> None:
    _repo, _mirror, daemon = running
    rpc = daemon.client(60)
    assert rpc.call("status")["memory_index"] == "not built"  # synced, but nobody asked for memory
    hits = rpc.call("memory.search", {"query": "沟通风格"})["results"]
    assert hits and hits[0]["permalink"] == "comm-style-pref-0e96"
    assert rpc.call("status")["memory_index"] == "ready"


def test_socket_append_and_a_concurrent_web_api_append_both_survive(devserver, running) -> None:
    repo, mirror, daemon = running
    other = SeafileClient(devserver.url, devserver.token_for(USER))
    try:
        theirs_line = "- [phone] 2026-12-01 09:00 手机端记下：明早 8 点去图书馆 #计划\n"
        current = other.download_bytes(repo, "/" + JOURNAL)[0]
        other.update(repo, "/" + JOURNAL, current + theirs_line.encode())  # the daemon has not polled since
    finally:
        other.close()
    result = daemon.client(60).call("memory.append", {
        "permalink": "journal-2026-11-df70", "category": "desk", "text": "桌面端追加：整理了哈希表笔记",
        "timeout": 30})
    assert result["verified"] and result["added"] and result["action"] == "merge"
    on_server = devserver.read_file(repo, "/" + JOURNAL).decode()
    assert on_server.count(theirs_line) == 1
    assert on_server.count(result["appended"] + "\n") == 1
    assert (mirror / JOURNAL).read_text(encoding="utf-8") == on_server
    assert not [p for p in devserver.tree(repo) if p.startswith("/.conflict/")]
    # the index already knows the new line
    hits = daemon.client().call("memory.search", {"query": "整理了哈希表笔记"})["results"]
    assert hits[0]["permalink"] == "journal-2026-11-df70" and "整理了哈希表笔记" in hits[0]["snippet"]
    # the CLI says the same thing, as JSON
    out = daemon.cli("memory", "search", "--json", "整理了哈希表笔记")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["results"][0]["permalink"] == "journal-2026-11-df70"
    out = daemon.cli("memory", "append", "comm-style-pref-0e96", "tone", "少用感叹号", "--context", "CLI")
    assert out.returncode == 0 and "verified on the server" in out.stdout, out.stderr
    assert "- [tone] 少用感叹号 (CLI)" in devserver.read_file(repo, "/preferences/沟通风格偏好.md").decode()
    out = daemon.cli("memory", "read", "comm-style-pref-0e96")
    assert out.returncode == 0 and "- [tone] 少用感叹号 (CLI)" in out.stdout
    out = daemon.cli("memory", "list", "--folder", "preferences")
    assert out.returncode == 0 and "comm-style-pref-0e96" in out.stdout and "沟通风格偏好" in out.stdout
    out = daemon.cli("memory", "append", "comm-style-pref-0e96", "key", "OTP: 123456")
    assert out.returncode == 1 and "verification code" in out.stderr


def test_write_read_after_rename_edit_and_delete_into_trash(devserver, running) -> None:
    repo, mirror, daemon = running
    client = daemon.client(60)
    # written on another device: memory.refresh pulls it and the index knows it at once
    phone = ("---\ntitle: 手机上记的\ntype: note\npermalink: phone-note-1234\ntags: []\n"
             "modified: 2026-12-01T08:00:00+08:00\n---\n\n## Observations\n- [idea] 周末去颐和园\n")
    devserver.put_file(repo, "/knowledge/手机上记的.md", phone.encode())
    assert client.call("memory.search", {"query": "颐和园"})["results"] == []
    refreshed = client.call("memory.refresh", {"timeout": 30})
    assert refreshed["refreshed"] is True
    assert client.call("memory.search", {"query": "颐和园"})["results"][0]["permalink"] == "phone-note-1234"
    made = client.call("memory.write", {
        "title": "图书馆开放时间", "type": "fact",
        "observations": [{"category": "hours", "text": "北馆 8:00 开门", "tags": ["图书馆"]}],
        "relations": [{"rel": "relates_to", "target": "校园服务入口速查"}], "tags": ["校园"]})
    assert made["verified"] and made["path"] == "knowledge/图书馆开放时间.md"
    server_text = devserver.read_file(repo, "/" + made["path"]).decode()
    assert f"permalink: {made['permalink']}" in server_text and "- [hours] 北馆 8:00 开门 #图书馆" in server_text
    # refused: a secret; nothing reaches the server
    with pytest.raises(RpcError) as refused:
        client.call("memory.append", {"permalink": made["permalink"], "category": "key",
                                      "text": "token sk-abcdefghijklmnopqrstuv"})
    assert "refused" in refused.value.message
    assert "sk-" not in devserver.read_file(repo, "/" + made["path"]).decode()
    # a person renames the file: the daemon carries the move, read still finds it
    new_rel = "knowledge/图书馆时间（改）.md"
    os.rename(mirror / made["path"], mirror / new_rel)
    wait_for(lambda: "/" + new_rel in devserver.tree(repo), timeout=30, what="the move reached the server")
    got = client.call("memory.read", {"permalink": made["permalink"]})
    assert got["path"] == new_rel and "北馆 8:00 开门" in got["content"]
    edited = client.call("memory.edit", {"permalink": made["permalink"], "find": "北馆 8:00", "replace": "北馆 7:30"})
    assert edited["verified"] and "北馆 7:30 开门" in devserver.read_file(repo, "/" + new_rel).decode()
    with pytest.raises(RpcError, match="does not occur"):
        client.call("memory.edit", {"permalink": made["permalink"], "find": "北馆 8:00", "replace": "北馆 9:00"})
    gone = client.call("memory.delete", {"permalink": made["permalink"], "reason": "重复了"})
    assert gone["deleted"] == "图书馆开放时间" and not gone["in_place"]
    trashed = devserver.read_file(repo, "/" + gone["trash"]).decode()
    assert gone["trash"] == ".trash/" + new_rel and "status: trashed" in trashed
    assert "/" + new_rel not in devserver.tree(repo) and not (mirror / new_rel).exists()
    hits = client.call("memory.search", {"query": "北馆", "limit": 50})["results"]
    assert made["permalink"] not in [r["permalink"] for r in hits]
    with pytest.raises(RpcError, match="no memory entity"):
        client.call("memory.read", {"permalink": made["permalink"]})


def test_delete_stays_in_place_marked_trashed_when_the_move_fails(devserver, running) -> None:
    repo, mirror, daemon = running
    rel = "tasks/申请 SRT 项目.md"
    devserver.inject_fault("POST", r"/file/", status=500, count=20)  # the move into /.trash/ fails
    gone = daemon.client(90).call("memory.delete", {"permalink": "srt-application-cf84", "timeout": 60})
    assert gone["in_place"] and gone["trash"] is None and "stays in place" in gone["message"]
    text = devserver.read_file(repo, "/" + rel).decode()
    assert "status: trashed" in text and "original_path: tasks/申请 SRT 项目.md" in text
    assert (mirror / rel).read_text(encoding="utf-8") == text
    hits = daemon.client().call("memory.search", {"query": "SRT", "limit": 20})["results"]
    assert "srt-application-cf84" not in [h["permalink"] for h in hits]


def test_cli_memory_without_a_daemon_says_so(isolated_env, tmp_path: Path) -> None:
    write_config(isolated_env, "http://127.0.0.1:9", USER, tmp_path / "mirror")
    import subprocess

    from daemon_helpers import ohsync_cmd

    out = subprocess.run([*ohsync_cmd(), "memory", "search", "x"], env=isolated_env.vars(), capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 3 and "not running" in out.stderr


def test_socket_and_cli_refuse_links_out_of_the_mirror(devserver, running, tmp_path: Path) -> None:
    repo, mirror, daemon = running
    outside = tmp_path / "outside"
    outside.mkdir()
    os.symlink("/etc/passwd", mirror / "knowledge" / "pw.md")
    os.symlink(outside, mirror / "ext")
    client = daemon.client(60)
    with pytest.raises(RpcError, match=r"knowledge/pw\.md is a symbolic link"):
        client.call("memory.read", {"permalink": "knowledge/pw"})
    with pytest.raises(RpcError, match="ext is a symbolic link to a folder"):
        client.call("memory.write", {"title": "Through the link", "folder": "ext/sub",
                                     "observations": [{"category": "fact", "text": "must stay inside"}]})
    hits = client.call("memory.search", {"query": "root", "limit": 100})["results"]
    assert "root:x:0" not in json.dumps(hits) and "knowledge/pw" not in json.dumps(hits)
    out = daemon.cli("memory", "read", "knowledge/pw")
    assert out.returncode == 1 and "knowledge/pw.md is a symbolic link" in out.stderr, out.stderr
    assert "root:x:0" not in out.stdout + out.stderr
    out = daemon.cli("memory", "write", "Via CLI", "--obs", "fact", "x", "--folder", "ext")
    assert out.returncode == 1 and "ext is a symbolic link to a folder" in out.stderr, out.stderr
    assert list(outside.iterdir()) == []
    assert not [p for p in devserver.tree(repo) if p.startswith("/ext") or "pw.md" in p]


def test_one_append_is_one_activity_line(running) -> None:
    _repo, _mirror, daemon = running
    rpc = daemon.client(60)
    before = len(rpc.call("activity", {"limit": 500}))
    result = rpc.call("memory.append", {"permalink": "journal-2026-11-df70", "category": "desk",
                                        "text": "one line, one activity item", "timeout": 30})
    assert result["verified"]
    rpc.call("refresh")
    assert daemon.cli("wait").returncode in (0, 1)  # the pass after it (the sample keeps a damaged file)
    items = [a for a in rpc.call("activity", {"limit": 500})[before:] if a.get("path") == JOURNAL]
    assert [(a["action"], a["result"]) for a in items] == [("upload", "ok")], items


def test_one_local_edit_is_one_activity_line(running) -> None:
    _repo, mirror, daemon = running
    rpc = daemon.client(60)
    before = len(rpc.call("activity", {"limit": 500}))
    with open(mirror / JOURNAL, "a", encoding="utf-8") as fh:
        fh.write("- [desk] typed in the editor\n")
    wait_for(lambda: any(a.get("path") == JOURNAL for a in rpc.call("activity", {"limit": 500})[before:]),
             what="the edit uploaded")
    rpc.call("refresh")
    daemon.cli("wait")
    items = [a for a in rpc.call("activity", {"limit": 500})[before:] if a.get("path") == JOURNAL]
    assert [(a["action"], a["result"]) for a in items] == [("upload", "ok")], items


def test_a_memory_write_moves_the_last_sync(running) -> None:
    """A write the server verified is a sync: ``last sync`` in the status moves with it."""
    import time
    from datetime import datetime

    _repo, _mirror, daemon = running
    rpc = daemon.client(60)
    before = rpc.call("status")["last_sync"]
    time.sleep(1.2)  # why: the status shows whole seconds: the next last sync must differ
    result = rpc.call("memory.append", {"permalink": "journal-2026-11-df70", "category": "desk",
                                        "text": "桌面端追加：last sync 跟着动", "timeout": 30})
    assert result["verified"]
    after = rpc.call("status")["last_sync"]
    assert datetime.fromisoformat(after) > datetime.fromisoformat(before), (before, after)
    assert daemon.cli("status").stdout.count(f"last sync: {after}") == 1


def test_socket_write_composes_a_decomposed_title_and_refuses_bad_input(devserver, running) -> None:
    repo, mirror, daemon = running
    client = daemon.client(60)
    nfd = unicodedata.normalize("NFD", "Café hours")
    made = client.call("memory.write", {"title": nfd, "observations": [{"category": "k", "text": "opens 8:00"}]})
    assert made["verified"] and made["path"] == "knowledge/Café hours.md"
    assert "opens 8:00" in devserver.read_file(repo, "/knowledge/Café hours.md").decode()
    before = devserver.tree(repo)
    for params, field in (({"title": "a\x00b"}, "title"), ({"title": "abs", "folder": "/etc"}, "folder"),
                          ({"title": "ctl\x01"}, "title")):
        with pytest.raises(RpcError) as refused:
            client.call("memory.write", {**params, "observations": [{"category": "k", "text": "v"}]})
        assert f"`{field}`" in refused.value.message and "internal error" not in refused.value.message
    assert devserver.tree(repo) == before
    assert not (mirror / "etc").exists() and not (mirror / "knowledge" / "ctl\x01.md").exists()
