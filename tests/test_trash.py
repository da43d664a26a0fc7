"""The library's trash stays on the server (engine/trash.py, ``ohsync trash``): a local delete
frees its space, an old local ``.trash/`` is left alone and named once, restore goes through the
normal write path without replacing anything, purge goes by the recorded trash time."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timedelta, timezone

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import isolated_env, seed_daemon, wait_for  # noqa: F401

BIG = os.urandom(3 * 1024 * 1024)


def _trash(proc, *argv: str) -> list | dict:
    done = proc.cli("trash", *argv, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_local_delete_goes_to_the_servers_trash_and_never_comes_back_down(seed_daemon) -> None:
    setup = seed_daemon(files={"video.bin": BIG, "notes/a.md": b"keep\n"})
    daemon = setup.start(wait="idle")
    assert (setup.mirror / "video.bin").read_bytes() == BIG
    setup.srv.reset_counters()
    (setup.mirror / "video.bin").unlink()
    wait_for(lambda: "/video.bin" not in setup.srv.tree(setup.repo_id), what="the delete on the server")
    assert setup.srv.tree(setup.repo_id)["/.trash/video.bin"] == BIG
    done = daemon.cli("wait")
    assert done.returncode == 0, done.stdout + done.stderr
    daemon.cli("refresh")
    assert daemon.cli("wait").returncode == 0
    assert not (setup.mirror / ".trash").exists()  # nothing came back down
    downloads = setup.srv.request_count(r"/files/|/zip/")  # file-server downloads of any kind
    assert downloads == 0, setup.srv.requests
    listed = _trash(daemon)
    assert [(e["path"], e["original"], e["size"]) for e in listed] == [(".trash/video.bin", "video.bin", len(BIG))]
    assert listed[0]["trashed"]  # ohsync trashed it: the time is known
    done = daemon.cli("trash")
    assert ".trash/video.bin" in done.stdout and "was video.bin" in done.stdout


def test_an_old_local_trash_folder_is_left_alone_and_named_once(seed_daemon) -> None:
    setup = seed_daemon(files={"a.md": b"a\n", ".trash/old.md": b"old\n"})
    setup.mirror.mkdir(parents=True)
    (setup.mirror / ".trash").mkdir()
    (setup.mirror / ".trash" / "mine.md").write_text("only here\n")  # from when the trash was mirrored
    daemon = setup.start(wait="idle")
    assert (setup.mirror / ".trash" / "mine.md").read_text() == "only here\n"  # not deleted
    assert "/.trash/mine.md" not in setup.srv.tree(setup.repo_id)  # not uploaded
    assert not (setup.mirror / ".trash" / "old.md").exists()  # the server's trash not mirrored down
    notes = [a for a in daemon.client().call("activity", {"limit": 200}) if a.get("result") == "note"]
    assert len(notes) == 1 and "no longer synced" in notes[0]["message"] and notes[0]["path"] == ".trash"
    daemon.cli("refresh")
    assert daemon.cli("wait").returncode == 0
    notes = [a for a in daemon.client().call("activity", {"limit": 200}) if a.get("result") == "note"]
    assert len(notes) == 1  # said once


def test_restore_puts_the_file_back_through_the_write_path_and_never_over_a_live_file(seed_daemon) -> None:
    setup = seed_daemon(files={"notes/a.md": b"first\n"})
    daemon = setup.start(wait="idle")
    (setup.mirror / "notes" / "a.md").unlink()
    wait_for(lambda: "/.trash/notes/a.md" in setup.srv.tree(setup.repo_id), what="a.md in the trash")
    assert daemon.cli("wait").returncode == 0
    # a new a.md exists meanwhile: restoring over it is refused, nothing changes
    (setup.mirror / "notes" / "a.md").write_text("second\n")
    wait_for(lambda: setup.srv.tree(setup.repo_id).get("/notes/a.md") == b"second\n", what="the new a.md")
    refused = daemon.cli("trash", "restore", ".trash/notes/a.md")
    assert refused.returncode == 1 and "notes/a.md exists" in refused.stderr and "--to" in refused.stderr
    assert setup.srv.tree(setup.repo_id)["/notes/a.md"] == b"second\n"
    # restored beside it: the server holds it when the command answers, the trash entry is gone
    done = daemon.cli("trash", "restore", "notes/a.md", "--to", "notes/a (restored).md")
    assert done.returncode == 0, done.stderr
    assert "the server holds it" in done.stdout
    tree = setup.srv.tree(setup.repo_id)
    assert tree["/notes/a (restored).md"] == b"first\n" and tree["/notes/a.md"] == b"second\n"
    assert "/.trash/notes/a.md" not in tree
    assert (setup.mirror / "notes" / "a (restored).md").read_text() == "first\n"
    assert _trash(daemon) == []


def test_purge_removes_only_entries_known_to_be_old(seed_daemon) -> None:
    filler = {f"keep/{i}.md": b"%d\n" % i for i in range(20)}  # two deletes stay under the safety valve
    setup = seed_daemon(files={"old.md": b"old\n", "new.md": b"new\n", **filler},
                        put={"/.trash/foreign.md": b"trashed by the web interface\n"})
    daemon = setup.start(wait="idle")
    for name in ("old.md", "new.md"):
        (setup.mirror / name).unlink()
    wait_for(lambda: {"/.trash/old.md", "/.trash/new.md"} <= set(setup.srv.tree(setup.repo_id)),
             what="both in the trash")
    assert daemon.cli("wait").returncode == 0
    daemon.stop()
    # make old.md's recorded trash time 40 days ago (as if trashed then)
    import sqlite3

    (db,) = (setup.env.root / "state" / "mirrors").glob("*/state.sqlite3")
    stamp = (datetime.now(timezone.utc) - timedelta(days=40)).strftime("%Y%m%dT%H%M%SZ")
    with sqlite3.connect(db) as con:
        assert con.execute("UPDATE meta SET value=? WHERE key=?", (stamp, "trashed:.trash/old.md")).rowcount == 1
    daemon = setup.start(wait="idle")
    dry = _trash(daemon, "purge", "--dry-run")
    assert dry["removed"] == [".trash/old.md"] and dry["kept_unknown"] == [".trash/foreign.md"]
    assert "/.trash/old.md" in setup.srv.tree(setup.repo_id)  # a dry run changes nothing
    done = daemon.cli("trash", "purge")
    assert done.returncode == 0, done.stderr
    assert "Removed 1 entry trashed more than 30 days ago" in done.stdout
    assert "whose trash time is not known" in done.stdout
    tree = setup.srv.tree(setup.repo_id)
    assert "/.trash/old.md" not in tree and "/.trash/new.md" in tree and "/.trash/foreign.md" in tree


def test_a_trashed_damaged_memory_file_is_no_longer_listed(seed_daemon) -> None:
    bad = b"---\ntitle: [unclosed\n---\nbody\n"
    setup = seed_daemon(files={"knowledge/broken.md": bad})
    daemon = setup.start(wait=("idle", "attention"))
    wait_for(lambda: daemon.client().call("damaged"), what="the damaged file listed")
    (setup.mirror / "knowledge" / "broken.md").unlink()
    wait_for(lambda: "/.trash/knowledge/broken.md" in setup.srv.tree(setup.repo_id), what="it in the trash")
    wait_for(lambda: daemon.client().call("damaged") == [], what="the damaged list empty")
