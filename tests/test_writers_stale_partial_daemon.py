"""End to end with the real daemon: a phone app's stale save (its edit of an
old read, uploaded without ``head``) that shares one change with what the
daemon pushed — the same box ticked, or ``modified:`` bumped as every memory
writer does — keeps the person's new task and the agent's appended
observation live (tests/test_writers_stale_partial.py has the engine's cases).
"""
from __future__ import annotations

from pathlib import Path

import pytest

from daemon_helpers import wait_for
from engine_helpers import sample_library

TODO = b"# Todo\n\n- [ ] call mom\n- [ ] read chapter 3\n- [ ] water the plants\n"
OURS = b"# Todo\n\n- [x] call mom\n- [ ] read chapter 3\n- [ ] water the plants\n- [ ] OUR NEW TASK buy milk\n"
THEIRS = b"# Todo\n\n- [x] call mom\n- [ ] read chapter 3\n- [ ] water the plants\n"


def test_daemon_keeps_the_persons_task_after_a_stale_phone_upload(seed_daemon, devserver, isolated_env):
    s = seed_daemon(files={"lists/todo.md": TODO, **{f"pad/p{i}.txt": b"pad\n" for i in range(12)}},
                    poll_interval=1.0)
    proc = s.start(wait="idle")
    path = s.mirror / "lists" / "todo.md"
    assert path.read_bytes() == TODO
    path.write_bytes(OURS)
    wait_for(lambda: devserver.read_file(s.repo_id, "/lists/todo.md") == OURS, timeout=60, what="pushed")
    proc.wait_state("idle", timeout=60)
    devserver.put_file(s.repo_id, "/lists/todo.md", THEIRS)      # the phone's stale overwrite
    wait_for(lambda: path.read_bytes() != OURS or devserver.read_file(s.repo_id, "/lists/todo.md") != THEIRS,
             timeout=60, what="the daemon reacted")
    proc.wait_state("idle", "attention", timeout=60)
    live_local = path.read_bytes()
    tree = devserver.tree(s.repo_id)
    conflict = b"".join(v for k, v in tree.items() if k.startswith("/.conflict/"))
    backups = [p for p in (isolated_env.root / "state" / "backups").rglob("*")
               if p.is_file() and b"OUR NEW TASK" in p.read_bytes()]
    assert b"OUR NEW TASK" in tree["/lists/todo.md"] + conflict and b"OUR NEW TASK" in live_local + conflict, (
        f"live local={live_local!r} live remote={tree['/lists/todo.md']!r} conflict={conflict!r} "
        f"backups holding the task={[str(p) for p in backups]}")


REL = "preferences/沟通风格偏好.md"
PERMALINK = "comm-style-pref-0e96"


@pytest.mark.parametrize("bump_modified", [False, True], ids=["control-no-bump", "phone-bumps-modified"])
def test_agent_append_survives_a_stale_phone_save(seed_daemon, devserver, isolated_env, tmp_path: Path,
                                                 bump_modified: bool):
    s = seed_daemon(tree=sample_library(tmp_path / "seed"), poll_interval=1.0)
    daemon = s.start(wait="attention")       # the sample's damaged file keeps it at "attention"
    phone_read = devserver.read_file(s.repo_id, "/" + REL)    # the phone reads the entity now

    result = daemon.client(60).call("memory.append", {
        "permalink": PERMALINK, "category": "agent", "text": "AGENT OBSERVATION 用户喜欢表格", "timeout": 30})
    assert result["verified"] and result["added"]
    assert "AGENT OBSERVATION".encode() in devserver.read_file(s.repo_id, "/" + REL)

    phone = phone_read
    if bump_modified:
        phone = phone.replace(b"modified: 2026-10-18T23:05:00+08:00", b"modified: 2026-12-03T08:00:00+08:00")
    line = "- [phone] PHONE OBSERVATION 手机记下 #手机\n"
    phone = phone.replace(b"## Observations\n", ("## Observations\n" + line).encode())
    assert phone != phone_read
    devserver.put_file(s.repo_id, "/" + REL, phone)        # plain overwrite, no head: a stale writer

    path = s.mirror / REL
    wait_for(lambda: b"PHONE OBSERVATION" in path.read_bytes(), timeout=60, what="the phone's line pulled/merged")
    daemon.wait_state("idle", "attention", timeout=60)
    live_local, live_remote = path.read_bytes(), devserver.read_file(s.repo_id, "/" + REL)
    tree = devserver.tree(s.repo_id)
    conflict = b"".join(v for k, v in tree.items() if k.startswith("/.conflict/"))
    backups = [str(p) for p in (isolated_env.root / "state" / "backups").rglob("*")
               if p.is_file() and b"AGENT OBSERVATION" in p.read_bytes()]
    assert b"AGENT OBSERVATION" in live_remote + conflict and b"AGENT OBSERVATION" in live_local + conflict, (
        f"\nlive local:\n{live_local.decode()}\nlive remote:\n{live_remote.decode()}\n"
        f"conflict copies: {conflict!r}\nbackups holding the agent's line: {backups}")
