"""Updates that cannot overwrite: every update carries ``head``; an edit that
lands between our read and our write stays live on the server (which stores
ours as an SFConflict file), and the engine merges the two and removes the
SFConflict file.  SFConflict files made by other Seafile clients are folded
into their path or archived in ``/.conflict/``; none stays on either side."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ohsync.engine.merge.sfconflict import original_of

sys.path.insert(0, str(Path(__file__).parent))
from engine_helpers import USER, make_mirror

MEMORY = ("---\ntitle: Journal\ntype: note\n---\n# Journal\n\n## Observations\n"
          "- [note] first line #seed\n")


def sfconflict_paths(paths) -> list[str]:
    return [p for p in paths if "SFConflict" in p]


@pytest.fixture
def rid(devserver):
    return devserver.create_library(USER, "OH-Memory")


def synced_mirror(devserver, rid, tmp_path, name="m", **options):
    devserver.put_file(rid, "/notes/journal.md", MEMORY.encode())
    mirror = make_mirror(devserver, rid, tmp_path, name)
    if options:
        mirror.engine.options.__dict__.update(options)
    mirror.sync()
    assert mirror.read("notes/journal.md") == MEMORY.encode()
    return mirror


def test_sfconflict_names_map_back_to_their_file():
    assert original_of("a/notes (SFConflict u@x.cn 2026-12-01-08-02-24).md") == "a/notes.md"
    assert original_of("README (SFConflict u@x.cn 2026-12-01-08-02-24)") == "README"
    assert original_of("r.tar (SFConflict u@x 2026-12-01-08-02-24).gz") == "r.tar.gz"
    assert original_of("a/notes (SFConflict copy).md") is None
    assert original_of("notes.md") is None


def _local_edit_raced_by_another_writer(devserver, rid, mirror):
    """A local line is pushed while another client's line lands right after
    our read, before our update; returns the pass's report."""
    theirs = MEMORY + "- [note] remote line #phone\n"

    def other_client_writes(srv):
        srv.put_file(rid, "/notes/journal.md", theirs.encode())
    devserver.after_request("GET", r"/update-link/", other_client_writes)
    mirror.write("notes/journal.md", (MEMORY + "- [note] local line #desk\n").encode())
    return mirror.sync(["notes/journal.md"])


def test_edit_landing_between_read_and_update_stays_live_and_is_merged(devserver, rid, tmp_path):
    mirror = synced_mirror(devserver, rid, tmp_path)
    report = _local_edit_raced_by_another_writer(devserver, rid, mirror)
    assert report.errors == []
    live = devserver.read_file(rid, "/notes/journal.md").decode()
    assert "local line" in live and "remote line" in live and "first line" in live
    assert mirror.read("notes/journal.md").decode() == live
    assert sfconflict_paths(devserver.tree(rid)) == []
    assert sfconflict_paths(str(p) for p in mirror.root.rglob("*")) == []
    # the update carried head; the server stored ours as an SFConflict file, which went
    assert devserver.request_count(r"update-api/.*head=[0-9a-f]{40}") >= 2
    assert devserver.request_count(r"DELETE /api2/repos/.*SFConflict") == 1


def test_update_carries_the_pass_head_without_extra_requests(devserver, rid, tmp_path):
    mirror = synced_mirror(devserver, rid, tmp_path)
    mirror.write("notes/journal.md", (MEMORY + "- [note] one more #desk\n").encode())
    devserver.reset_counters()
    mirror.sync(["notes/journal.md"])  # a pass that checks the server first
    assert devserver.request_count(r"update-api/.*head=") == 1
    assert devserver.request_count("GET /api2/repos/{id}/") == 1  # the pass's own head check only
    mirror.write("notes/journal.md", (MEMORY + "- [note] one more #desk\n- [note] again #desk\n").encode())
    devserver.reset_counters()
    ours = devserver.head_commit(rid)  # the commit of our first save
    mirror.engine.sync(["notes/journal.md"], check_remote=False)  # a watcher pass: we wrote since
    assert devserver.request_count("GET /api2/repos/{id}/") == 0  # no fresh head: our save's commit
    assert devserver.request_count(f"update-api/.*head={ours}") == 1
    assert sfconflict_paths(devserver.tree(rid)) == []


def test_foreign_sfconflict_file_that_merges_is_folded_into_its_path(devserver, rid, tmp_path):
    mirror = synced_mirror(devserver, rid, tmp_path)
    name = "/notes/journal (SFConflict bob@example.edu.cn 2026-12-01-08-02-24).md"
    devserver.put_file(rid, name, (MEMORY + "- [note] from the web editor #web\n").encode())
    devserver.put_file(rid, "/notes/journal.md", (MEMORY + "- [note] live edit #phone\n").encode())
    report = mirror.sync()
    assert report.errors == []
    live = devserver.read_file(rid, "/notes/journal.md").decode()
    assert "from the web editor" in live and "live edit" in live
    assert mirror.read("notes/journal.md").decode() == live
    assert sfconflict_paths(devserver.tree(rid)) == []
    assert sfconflict_paths(str(p) for p in mirror.root.rglob("*")) == []
    assert mirror.engine.conflicts() == []


def test_foreign_sfconflict_file_that_does_not_merge_goes_to_conflict_folder(devserver, rid, tmp_path):
    devserver.put_file(rid, "/Files/pic.bin", b"\x00\x01 ours")
    mirror = make_mirror(devserver, rid, tmp_path)
    mirror.sync()
    name = "/Files/pic (SFConflict bob@example.edu.cn 2026-12-01-08-02-24).bin"
    devserver.put_file(rid, name, b"\x00\x02 theirs")
    report = mirror.sync()
    assert report.errors == []
    tree = devserver.tree(rid)
    assert sfconflict_paths(tree) == [] and sfconflict_paths(str(p) for p in mirror.root.rglob("*")) == []
    archived = [p for p in tree if p.startswith("/.conflict/Files/pic__bob__")]
    assert len(archived) == 1 and tree[archived[0]] == b"\x00\x02 theirs"
    assert (mirror.root / archived[0].lstrip("/")).read_bytes() == b"\x00\x02 theirs"
    assert tree["/Files/pic.bin"] == b"\x00\x01 ours"
    assert [c.path for c in mirror.engine.conflicts()] == ["Files/pic.bin"]


def test_server_ignoring_head_is_caught_by_the_history_check(devserver, rid, tmp_path):
    devserver.honour_head = False
    mirror = synced_mirror(devserver, rid, tmp_path, history_check=True)
    report = _local_edit_raced_by_another_writer(devserver, rid, mirror)
    assert report.errors == []
    live = devserver.read_file(rid, "/notes/journal.md").decode()
    assert "local line" in live and "remote line" in live
    assert mirror.read("notes/journal.md").decode() == live


def test_merging_push_checks_history_by_default_until_head_is_seen_honoured(devserver, rid, tmp_path):
    devserver.honour_head = False
    mirror = synced_mirror(devserver, rid, tmp_path)  # history_check left at its default (auto)
    devserver.put_file(rid, "/notes/journal.md", (MEMORY + "- [note] phone edit #phone\n").encode())
    late = MEMORY + "- [note] phone edit #phone\n- [note] late bot line #bot\n"
    devserver.after_request("GET", r"/update-link/",
                            lambda srv: srv.put_file(rid, "/notes/journal.md", late.encode()))
    mirror.write("notes/journal.md", (MEMORY + "- [note] local line #desk\n").encode())
    assert mirror.sync(["notes/journal.md"]).errors == []  # a merging push, then the window is hit
    live = devserver.read_file(rid, "/notes/journal.md").decode()
    for line in ("local line", "phone edit", "late bot line"):
        assert line in live, line
    assert devserver.request_count("GET /api/v2.1/repos/{id}/file/history/") >= 1


def test_plain_push_on_a_server_ignoring_head_merges_the_edit_it_replaced(devserver, rid, tmp_path):
    """A save sent at the last poll's head, unread, on a server that ignores
    ``head``, replaces an edit made since that poll: the read-back (the
    file's history, two revisions) shows the version it replaced, which is
    merged in and sent again: both lines stay live."""
    devserver.honour_head = False
    mirror = synced_mirror(devserver, rid, tmp_path)  # history_check left at its default
    devserver.put_file(rid, "/notes/journal.md", (MEMORY + "- [note] phone edit after the poll #phone\n").encode())
    mirror.write("notes/journal.md", (MEMORY + "- [note] local line #desk\n").encode())
    devserver.reset_counters()
    report = mirror.engine.sync(["notes/journal.md"], check_remote=False)  # a watcher pass: no poll first
    assert report.errors == []
    live = devserver.read_file(rid, "/notes/journal.md").decode()
    assert "phone edit after the poll" in live and "local line" in live
    assert mirror.read("notes/journal.md").decode() == live
    assert devserver.request_count(r"file/history/\?.*limit=1") == 0  # every read-back also checked


def test_plain_push_checks_what_it_replaced_until_sfconflict_switches_the_check_off(devserver, rid, tmp_path):
    mirror = synced_mirror(devserver, rid, tmp_path)
    mirror.write("notes/journal.md", (MEMORY + "- [note] a #desk\n").encode())
    devserver.reset_counters()
    mirror.sync(["notes/journal.md"])
    # the read-back reads two revisions: ours, and the one it replaced (no request of its own)
    assert devserver.request_count(r"file/history/\?.*limit=2") == 1
    assert devserver.request_count("GET /api/v2.1/repos/{id}/file/history/") == 1
    # the update link is cached since the first push: the other writer lands
    # right after the pass read the history (after its head, before the update)
    devserver.after_request("GET", r"^/api2/repos/[0-9a-f-]{36}/history/$", lambda srv: srv.put_file(
        rid, "/notes/journal.md", (MEMORY + "- [note] a #desk\n- [note] b #phone\n").encode()))
    mirror.write("notes/journal.md", (MEMORY + "- [note] a #desk\n- [note] c #desk\n").encode())
    devserver.reset_counters()
    assert mirror.sync(["notes/journal.md"]).errors == []
    assert mirror.state.get_meta("head_honoured") == "1"
    devserver.reset_counters()
    mirror.write("notes/journal.md", mirror.read("notes/journal.md") + b"- [note] d #desk\n")
    assert mirror.sync(["notes/journal.md"]).errors == []
    assert devserver.request_count(r"file/history/\?.*limit=2") == 0  # the check is off now
    assert devserver.request_count(r"file/history/\?.*limit=1") == 1  # the read-back alone


def test_an_edit_our_upload_replaced_is_kept_when_the_merge_cannot_be_written_here(devserver, rid, tmp_path):
    """As above, but the merged version cannot be written here (a program holds
    the file open for writing): the phone's version, which our upload replaced,
    is live nowhere, so it is kept in /.conflict/ before the pass goes on."""
    devserver.honour_head = False
    mirror = synced_mirror(devserver, rid, tmp_path)
    devserver.put_file(rid, "/notes/journal.md", (MEMORY + "- [note] phone edit after the poll #phone\n").encode())
    mirror.write("notes/journal.md", (MEMORY + "- [note] local line #desk\n").encode())
    # the program's save begins once our upload is sent: the merge waits for it
    devserver.after_request("POST", r"^/seafhttp/update-api/", lambda srv: setattr(
        mirror.engine.options, "being_written", lambda path: True))
    report = mirror.engine.sync(["notes/journal.md"], check_remote=False)
    assert [p for p, _ in report.skipped] == ["notes/journal.md"] and report.errors == []
    tree = devserver.tree(rid)
    kept = b"".join(v for k, v in tree.items() if k.startswith("/.conflict/notes/journal"))
    assert b"phone edit after the poll" in kept  # not only in the server's file history
    assert b"local line" in tree["/notes/journal.md"] and b"local line" in mirror.read("notes/journal.md")
    mirror.engine.options.being_written = None  # the program closed the file
    assert mirror.sync().errors == []
    assert mirror.read("notes/journal.md") == devserver.read_file(rid, "/notes/journal.md")
