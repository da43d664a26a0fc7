"""``ohsync resolve PATH --keep live|other`` end to end against devserver: the
server's content afterwards, the archived copy gone, 0 conflicts, the
replaced live version kept in ``/.trash/``."""

from __future__ import annotations

import json
import subprocess

import httpx
import tomli_w

from daemon_helpers import isolated_env, ohsync_cmd, seed_daemon, wait_for  # noqa: F401
from panel_helpers import LOCAL, REL, REMOTE, make_conflict


def _settled(c) -> None:
    wait_for(lambda: c.status()["conflicts"] == 0, timeout=30, what="0 conflicts")
    assert c.server(c.archived) is None  # gone from /.conflict/ on the server
    assert not (c.setup.mirror / c.archived).exists()  # and from the mirror


def test_keep_live_deletes_the_archived_copy_on_both_sides(seed_daemon) -> None:
    c = make_conflict(seed_daemon)
    r = c.daemon.cli("resolve", REL, "--keep", "live", "--json")
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["verified"] is True and answer["keep"] == "live"
    assert c.server(REL) == LOCAL and (c.setup.mirror / REL).read_bytes() == LOCAL
    _settled(c)
    # the other version was deleted the way every deletion is: into /.trash/
    assert c.server(answer["trashed"]) == REMOTE


def test_take_other_makes_it_live_and_keeps_the_replaced_version(seed_daemon) -> None:
    c = make_conflict(seed_daemon)
    # PATH may be the archived copy, as a path in the mirror
    r = c.daemon.cli("resolve", str(c.setup.mirror / c.archived), "--keep", "other", "--json")
    assert r.returncode == 0, r.stderr
    answer = json.loads(r.stdout)
    assert answer["verified"] is True
    assert c.server(REL) == REMOTE and (c.setup.mirror / REL).read_bytes() == REMOTE
    _settled(c)
    assert answer["replaced"].startswith(".trash/")
    assert c.server(answer["replaced"]) == LOCAL  # the replaced live version is archived, not dropped
    assert not (c.setup.mirror / answer["replaced"]).exists()  # the trash stays on the server
    assert not (c.setup.mirror / ".trash").exists()
    trashed = json.loads(c.daemon.cli("trash", "--json").stdout)
    assert [e["trashed"] is not None for e in trashed if e["path"] == answer["replaced"]] == [True]
    c.daemon.wait_state("idle", timeout=60)


def test_resolve_refuses_what_is_not_a_conflict(seed_daemon) -> None:
    c = make_conflict(seed_daemon)
    r = c.daemon.cli("resolve", "notes/keep.md", "--keep", "other")
    assert r.returncode == 1
    assert "no open conflict for notes/keep.md" in r.stderr and "Traceback" not in r.stderr
    assert c.status()["conflicts"] == 1


def test_ohsync_panel_opens_the_browser_at_the_address_with_its_secret(seed_daemon, isolated_env) -> None:
    setup = seed_daemon(files={"a.txt": b"a\n"})
    d = setup.start(wait="idle")
    seen = isolated_env.root / "browser-got.txt"
    browser = isolated_env.root / "fake-browser"
    browser.write_text(f"#!/bin/sh\nprintf '%s' \"$1\" > {seen}\n")
    browser.chmod(0o755)
    r = d.cli("panel", "--url")
    assert r.returncode == 0, r.stderr
    url = r.stdout.strip()
    secret = (isolated_env.socket.parent / "ohsync-panel.secret").read_text().strip()
    assert url.startswith("http://127.0.0.1:") and url.endswith("/auth#" + secret)
    env = {**isolated_env.vars(), "BROWSER": str(browser)}
    r = subprocess.run([*ohsync_cmd(), "panel"], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "Opened the ohsync page (http://127.0.0.1:" in r.stdout and secret not in r.stdout
    assert wait_for(lambda: seen.exists() and seen.read_text(), timeout=10) == url
    d.stop()
    r = d.cli("resolve", "a.txt", "--keep", "live")
    assert r.returncode == 3 and "not running" in r.stderr


def test_with_two_mirrors_the_conflict_is_found_in_its_own(seed_daemon, tmp_path) -> None:
    first = seed_daemon(files={"a.txt": b"a\n"}, config=False)
    docs = seed_daemon(library="Docs", put={"/readme.txt": b"one\ntwo\n"}, config=False)
    mem, docs_dir = tmp_path / "OH-Memory", tmp_path / "Docs"
    first.env.config.write_text(tomli_w.dumps({
        "server": first.srv.url, "username": "user@example.edu.cn", "poll_interval": 1.0,
        "state_dir": str(first.env.root / "state"),
        "mirror": [{"library": "OH-Memory", "local": str(mem)}, {"library": "Docs", "local": str(docs_dir)}]}))
    d = first.start()
    wait_for(lambda: [m["state"] for m in d.status()["mirrors"]] == ["idle", "idle"], timeout=90, what="both idle")
    assert d.cli("pause").returncode == 0
    (docs_dir / "readme.txt").write_bytes(b"one\nmine\n")
    first.srv.put_file(docs.repo_id, "/readme.txt", b"one\ntheirs\n")
    assert d.cli("resume").returncode == 0
    items = wait_for(lambda: json.loads(d.cli("conflicts", "--json").stdout), timeout=90, what="the conflict")
    assert [(c["path"], c["mirror"]) for c in items] == [("readme.txt", "Docs")]
    wait_for(lambda: (docs_dir / items[0]["archived"]).exists(), timeout=60, what="the archived copy")
    # the page names the mirror and shows the versions of that mirror's files
    url = d.cli("panel", "--url").stdout.strip()
    origin, secret = url.split("/auth#")
    with httpx.Client(base_url=origin, timeout=30) as page:
        login = page.post("/api/session", json={"secret": secret}, headers={"Origin": origin})
        assert login.status_code == 200
        page.headers["X-Ohsync-Session"] = login.json()["token"]
        assert page.get("/api/state").json()["conflicts"][0]["mirror"] == "Docs"
        shown = page.get("/api/conflict", params={"path": items[0]["archived"], "mirror": "Docs"}).json()
        assert shown["live"]["text"] == "one\nmine\n" and shown["other"]["text"] == "one\ntheirs\n"
    # no --mirror needed: the path names a conflict of one mirror only
    r = d.cli("resolve", str(docs_dir / "readme.txt"), "--keep", "other", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["mirror"] == "Docs"
    assert first.srv.tree(docs.repo_id)["/readme.txt"] == b"one\ntheirs\n"
    wait_for(lambda: d.status()["mirrors"][1]["conflicts"] == 0, timeout=30, what="0 conflicts in Docs")


def test_restore_puts_files_deleted_on_the_server_back(seed_daemon) -> None:
    files = {f"notes/n{i}.txt": f"note {i}\n".encode() for i in range(4)}
    setup = seed_daemon(files=files, safety={"max_delete_files": 2})
    d = setup.start(wait="idle")
    for rel in list(files)[:3]:  # deleted on the server: held before the mirror's copies go
        setup.srv.delete_path(setup.repo_id, "/" + rel)
    assert d.cli("refresh").returncode == 0
    held = wait_for(lambda: d.client().call("held_deletes"), timeout=60, what="the held deletions")
    assert sorted(h["path"] for h in held) == sorted(list(files)[:3]) and {h["side"] for h in held} == {"local"}
    # each held item says which command brings its file back, and that command exists
    reasons = [i["reason"] for i in d.status()["attention"] if i["kind"] == "held_delete"]
    assert reasons and all("`ohsync restore-deletes`" in r for r in reasons)
    r = d.cli("restore-deletes")
    assert r.returncode == 0, r.stderr
    assert "Restored 3 file(s)" in r.stdout
    tree = setup.srv.tree(setup.repo_id)
    assert all(tree["/" + rel] == data for rel, data in files.items())  # back on the server, as they were
    wait_for(lambda: d.status()["held_deletes"] == 0, timeout=60, what="nothing held")
    assert all((setup.mirror / rel).read_bytes() == data for rel, data in files.items())
