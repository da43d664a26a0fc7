"""Several ``[[mirror]]`` in one real daemon (``ohsync run --no-tray``) against devserver on 127.0.0.1.

Two libraries of one account, each mirrored into its own folder by one
daemon process: edits reach the right library only, status lists both,
pausing one leaves the other syncing, and one mirror that cannot go on
(its folder vanished, its library deleted) shows it while the other stays
in sync.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import tomli_w

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import DEMO_LIBRARY, DaemonProc, isolated_env, mirrored, read_tree, wait_for  # noqa: F401
from ohsync.daemon import credentials

USER = "user@example.edu.cn"


def _config(env: Any, server: str, mirrors: list[dict[str, Any]], **extra: Any) -> None:
    doc: dict[str, Any] = {"server": server, "username": USER, "poll_interval": 1.0,
                           "state_dir": str(env.root / "state"), **extra, "mirror": mirrors}
    env.config.write_text(tomli_w.dumps(doc), encoding="utf-8")


@pytest.fixture
def two(seed_daemon, tmp_path: Path):
    """OH-Memory (the demo tree) and Docs (two files) mirrored by one daemon."""
    s = seed_daemon(tree=DEMO_LIBRARY, config=False)
    docs = seed_daemon(library="Docs", put={"/readme.txt": b"docs library\n", "/plans/q1.txt": b"plan\n"},
                       config=False)
    s.mem_id, s.docs_id, s.mem, s.docs = s.repo_id, docs.repo_id, tmp_path / "OH-Memory", tmp_path / "Docs"
    _config(s.env, s.srv.url, [{"library": "OH-Memory", "local": str(s.mem)},
                               {"library": "Docs", "local": str(s.docs)}],
            filing={"drop_dir": str(tmp_path / "drop")})
    return s


def _mirrors(d: DaemonProc) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in d.status()["mirrors"]}


def _states(d: DaemonProc, **want: str) -> bool:
    mirrors = _mirrors(d)
    return all(mirrors[name]["state"] == state for name, state in want.items())


def _wait_states(d: DaemonProc, timeout: float = 90, **want: str) -> dict[str, dict[str, Any]]:
    try:
        wait_for(lambda: _states(d, **want), timeout=timeout, what=f"mirror states {want}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\nstatus: {d.status()}\n--- daemon output ---\n{d.output()[-4000:]}") from None
    return _mirrors(d)


def test_two_libraries_sync_side_by_side(two) -> None:
    srv = two.srv
    d = two.start()
    mirrors = _wait_states(d, **{"OH-Memory": "idle", "Docs": "idle"})
    assert mirrors["OH-Memory"]["local"] == str(two.mem) and mirrors["Docs"]["local"] == str(two.docs)
    assert read_tree(two.mem) == mirrored(srv.tree(two.mem_id)) == mirrored(read_tree(DEMO_LIBRARY))
    assert read_tree(two.docs) == mirrored(srv.tree(two.docs_id)) == {"/readme.txt": b"docs library\n",
                                                             "/plans/q1.txt": b"plan\n"}
    st = d.status()  # the top level still describes the first mirror, as for one
    assert st["state"] == "idle" and st["mirrors"][0]["name"] == "OH-Memory" and len(st["mirrors"]) == 2

    # a local edit in each folder reaches its own library only
    (two.mem / "notes-e2e.md").write_text("memory side\n", encoding="utf-8")
    (two.docs / "plans" / "q2.txt").write_text("docs side\n", encoding="utf-8")
    wait_for(lambda: srv.file_id(two.mem_id, "/notes-e2e.md") and srv.file_id(two.docs_id, "/plans/q2.txt"),
             timeout=60, what="both edits on the server")
    assert srv.read_file(two.docs_id, "/plans/q2.txt") == b"docs side\n"
    assert srv.file_id(two.docs_id, "/notes-e2e.md") is None and srv.file_id(two.mem_id, "/plans/q2.txt") is None

    # a remote edit of each library reaches its own folder only
    srv.put_file(two.docs_id, "/readme.txt", b"edited on the web\n")
    srv.put_file(two.mem_id, "/from-web.md", b"web\n")
    wait_for(lambda: (two.docs / "readme.txt").read_bytes() == b"edited on the web\n"
             and (two.mem / "from-web.md").exists(), timeout=60, what="both remote edits here")
    assert not (two.docs / "from-web.md").exists()

    # `ohsync wait` with no --mirror waits for both; `ohsync status` prints one block per mirror
    r = d.cli("wait", "--timeout", "60")
    assert r.returncode == 0, r.stderr
    assert read_tree(two.mem) == mirrored(srv.tree(two.mem_id))
    assert read_tree(two.docs) == mirrored(srv.tree(two.docs_id))
    out = d.cli("status").stdout
    assert f"OH-Memory ↔ {two.mem}" in out and f"Docs ↔ {two.docs}" in out
    assert out.count("idle: Up to date") == 2

    # a method that acts on one mirror names the choices when none is given
    r = d.cli("resync")
    assert r.returncode == 1
    assert "name one with --mirror NAME" in r.stderr
    assert f"OH-Memory ({two.mem})" in r.stderr and f"Docs ({two.docs})" in r.stderr
    r = d.cli("conflicts", "--mirror", "nope")
    assert r.returncode == 1 and "no mirror is called 'nope'" in r.stderr
    # a folder names a mirror as well as its library does
    r = d.cli("status", "--json", "--mirror", str(two.docs))
    assert r.returncode == 0 and json.loads(r.stdout)["mirrors"][0]["name"] == "Docs"
    # lists cover every mirror, each item naming its own
    activity = d.client().call("activity", {"limit": 200})
    assert {"OH-Memory", "Docs"} <= {a["mirror"] for a in activity}
    assert any(a["mirror"] == "Docs" and a["path"] == "plans/q2.txt" for a in activity)
    assert "[Docs] " in d.cli("activity", "--limit", "200").stdout
    # the memory tools work on one library: named, or the memory library's mirror by default
    r = d.cli("memory", "search", "哈希表", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["results"]
    r = d.cli("memory", "search", "哈希表", "--mirror", "Docs", "--json")
    assert r.returncode == 0, r.stderr
    assert not json.loads(r.stdout)["results"]
    r = d.cli("memory", "search", "哈希表", "--mirror", "OH-Memory", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["results"]
    # each mirror keeps its own state database
    dbs = sorted((two.env.root / "state" / "mirrors").glob("*/state.sqlite3"))
    assert len(dbs) == 2 and {p.parent.name.rsplit("-", 1)[0] for p in dbs} == {two.mem_id, two.docs_id}


def test_pausing_one_mirror_leaves_the_other_syncing(two) -> None:
    srv = two.srv
    d = two.start()
    _wait_states(d, **{"OH-Memory": "idle", "Docs": "idle"})
    r = d.cli("pause", "--mirror", "Docs")
    assert r.returncode == 0, r.stderr
    _wait_states(d, **{"OH-Memory": "idle", "Docs": "paused"})

    (two.docs / "while-paused.txt").write_text("waits\n", encoding="utf-8")
    (two.mem / "while-paused.md").write_text("goes\n", encoding="utf-8")
    wait_for(lambda: srv.file_id(two.mem_id, "/while-paused.md"), timeout=60, what="the memory edit on the server")
    r = d.cli("wait", "--mirror", "OH-Memory", "--timeout", "60")
    assert r.returncode == 0, r.stderr
    assert srv.file_id(two.docs_id, "/while-paused.txt") is None
    assert _mirrors(d)["Docs"]["state"] == "paused"

    r = d.cli("resume", "--mirror", "Docs")
    assert r.returncode == 0, r.stderr
    wait_for(lambda: srv.file_id(two.docs_id, "/while-paused.txt"), timeout=60, what="the docs edit after resume")
    _wait_states(d, **{"OH-Memory": "idle", "Docs": "idle"})


def test_a_vanished_folder_stops_only_its_mirror(two) -> None:
    srv = two.srv
    d = two.start()
    _wait_states(d, **{"OH-Memory": "idle", "Docs": "idle"})
    shutil.rmtree(two.docs)
    mirrors = _wait_states(d, **{"Docs": "stopped"})
    assert str(two.docs) in mirrors["Docs"]["message"]
    assert mirrors["OH-Memory"]["state"] == "idle"

    (two.mem / "still-syncing.md").write_text("yes\n", encoding="utf-8")
    wait_for(lambda: srv.file_id(two.mem_id, "/still-syncing.md"), timeout=60, what="the other mirror syncing")
    r = d.cli("wait", "--mirror", "OH-Memory", "--timeout", "60")
    assert r.returncode == 0, r.stderr
    # no version of Docs is lost: what the watcher saw deleted before the folder went is in /.trash/
    tree = srv.tree(two.docs_id)
    for name, data in (("readme.txt", b"docs library\n"), ("q1.txt", b"plan\n")):
        assert any(p.rsplit("/", 1)[-1].startswith(name.split(".")[0]) and body == data
                   and (p.startswith("/.trash/") or p in ("/readme.txt", "/plans/q1.txt"))
                   for p, body in tree.items()), (name, sorted(tree))
    r = d.cli("wait", "--timeout", "30")  # both: not synced, and it says which one and why
    assert r.returncode == 1 and "Docs:" in r.stderr
    assert d.proc.poll() is None


def test_a_deleted_library_stops_only_its_mirror(two) -> None:
    srv = two.srv
    d = two.start()
    _wait_states(d, **{"OH-Memory": "idle", "Docs": "idle"})
    token = srv.token_for(USER)
    reply = httpx.delete(f"{srv.url}/api2/repos/{two.docs_id}/", headers={"Authorization": f"Token {token}"})
    assert reply.status_code == 200
    d.cli("refresh", "--mirror", "Docs")
    # the failure policy decides stopped or retried with backoff; either way it is not hidden
    wait_for(lambda: _mirrors(d)["Docs"]["state"] in ("stopped", "error"), timeout=60, what="Docs needs attention")
    mirrors = _mirrors(d)
    assert "not found" in mirrors["Docs"]["message"].lower()
    assert mirrors["OH-Memory"]["state"] == "idle"
    # the local copy of the deleted library stays as it was
    assert (two.docs / "readme.txt").read_bytes() == b"docs library\n"

    (two.mem / "after-delete.md").write_text("still\n", encoding="utf-8")
    wait_for(lambda: srv.file_id(two.mem_id, "/after-delete.md"), timeout=60, what="the other mirror syncing")
    assert d.proc.poll() is None


def test_a_missing_library_at_start_stops_only_its_mirror(seed_daemon, tmp_path: Path) -> None:
    s = seed_daemon(put={"/a.md": b"a\n"}, config=False)
    _config(s.env, s.srv.url, [{"library": "OH-Memory", "local": str(tmp_path / "m")},
                               {"library": "Nowhere", "local": str(tmp_path / "n")}])
    d = s.start()
    mirrors = _wait_states(d, **{"OH-Memory": "idle", "Nowhere": "stopped"})
    assert "Nowhere" in mirrors["Nowhere"]["message"]
    assert (tmp_path / "m" / "a.md").read_bytes() == b"a\n"
    assert d.proc.poll() is None


def test_two_mirrors_on_one_folder_refuse_to_start(isolated_env, devserver, tmp_path: Path) -> None:
    credentials.save_token(devserver.url, USER, devserver.token_for(USER))
    _config(isolated_env, devserver.url, [{"library": "OH-Memory", "local": str(tmp_path / "m")},
                                          {"library": "Docs", "local": str(tmp_path / "m")}])
    d = DaemonProc(isolated_env)
    try:
        assert d.wait_exit(60) == 1
        out = d.output()
        assert "Configuration error" in out and "use the same folder" in out and "Traceback" not in out
    finally:
        d.stop()


def test_a_mirror_of_another_account_signs_in_with_its_own_login(isolated_env, devserver, tmp_path: Path) -> None:
    other = "other@example.edu.cn"
    devserver.add_user(other, "other-password")
    mem_id = devserver.create_library(USER, "OH-Memory")
    theirs = devserver.create_library(other, "Shared notes")
    devserver.put_file(theirs, "/theirs.md", b"theirs\n")
    credentials.save_token(devserver.url, USER, devserver.token_for(USER))
    _config(isolated_env, devserver.url, [
        {"library": "OH-Memory", "local": str(tmp_path / "m")},
        {"library": "Shared notes", "username": other, "local": str(tmp_path / "s")}])
    d = DaemonProc(isolated_env)
    try:
        # no login for the second account yet: that mirror says how to sign in, the first syncs
        mirrors = _wait_states(d, **{"OH-Memory": "idle", "Shared notes": "stopped"})
        assert "ohsync login --mirror" in mirrors["Shared notes"]["message"]
        r = d.cli("login", "--mirror", "Shared notes", "--password-stdin", input="other-password\n")
        assert r.returncode == 0, r.stderr
        assert credentials.load_token(devserver.url, other)
        _wait_states(d, **{"OH-Memory": "idle", "Shared notes": "idle"})
        assert (tmp_path / "s" / "theirs.md").read_bytes() == b"theirs\n"
        (tmp_path / "s" / "mine.md").write_text("from here\n", encoding="utf-8")
        wait_for(lambda: devserver.file_id(theirs, "/mine.md"), timeout=60, what="the edit in the other account")
        assert devserver.file_id(mem_id, "/mine.md") is None
        # the top-level login stays the first account's
        assert f'username = "{USER}"' in isolated_env.config.read_text(encoding="utf-8")
    finally:
        d.stop()
