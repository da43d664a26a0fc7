"""Edits of several files of one folder go up as updates read back by one
listing of the folder (engine/update_batch.py): request counts on devserver,
and everything that does not verify (another writer's edit kept by the
server beside ours, the server's damaged copy, a failed update) still ends
as the per-file push would have it."""
from __future__ import annotations

import pytest

from engine_helpers import USER, make_mirror, mirrored, read_tree
from ohsync.engine.errors import RemoteError
from ohsync.engine.ids import seafile_file_id

UPDATES = r"^POST /seafhttp/update-api/"
UPDATE_PATH = r"^/seafhttp/update-api/"
DETAILS = r"^GET /api2/repos/[^/]+/file/detail/"
LISTINGS = r"^GET /api2/repos/[^/]+/dir/"
HISTORIES = r"^GET /api/v2.1/repos/[^/]+/file/history/"


def _note(i: int, line: str = "", first: str = "- a line") -> bytes:
    return f"---\ntitle: note {i}\n---\n\n# Note {i}\n\n{first}\n- b line\n- c line\n{line}".encode()


FOLDERS = {"a": 4, "b/c": 3, "d": 1}


@pytest.fixture
def mirror(devserver, tmp_path):
    repo_id = devserver.create_library(USER, "OH-Memory")
    for folder, n in FOLDERS.items():
        for i in range(n):
            devserver.put_file(repo_id, f"/{folder}/n{i}.md", _note(i))
    m = make_mirror(devserver, repo_id, tmp_path)
    assert m.sync().errors == []
    return m


def _edit_all(m, line: str = "- edited here\n") -> dict[str, bytes]:
    edits = {f"{folder}/n{i}.md": _note(i, line) for folder, n in FOLDERS.items() for i in range(n)}
    for rel, data in edits.items():
        m.write(rel, data)
    return edits


def _watcher_pass(m, devserver, rels):  # -> SyncReport
    devserver.reset_counters()
    return m.engine.sync(sorted(rels), check_remote=False)


def _assert_synced(m, devserver, edits: dict[str, bytes]) -> None:
    server = devserver.tree(m.repo_id)
    for rel, data in edits.items():
        assert server["/" + rel] == data == m.read(rel), rel
        base = m.state.get_base(rel)
        assert base is not None and base.remote_id == seafile_file_id(data), rel
    assert not [p for p in server if "SFConflict" in p or p.startswith("/.conflict/")]
    assert read_tree(m.root) == mirrored(server)


def test_a_burst_costs_one_update_per_file_and_one_listing_per_folder(devserver, mirror):
    edits = _edit_all(mirror)
    report = _watcher_pass(mirror, devserver, edits)
    assert report.errors == [] and sorted(report.uploaded) == sorted(edits)
    assert devserver.request_count(UPDATES) == 8
    assert devserver.request_count(LISTINGS) == 2  # a and b/c; d's one file is read back by its history
    assert devserver.request_count(HISTORIES) == 1 and devserver.request_count(DETAILS) == 0
    assert devserver.request_count() == 12  # and the library's update link, once
    _assert_synced(mirror, devserver, edits)
    # recorded as pushes of ours: the next poll takes our commits as echoes, nothing moves
    again = mirror.sync()
    assert again.errors == [] and again.uploaded == [] and again.downloaded == [] and again.merged == []


def test_an_edit_landing_after_the_listing_is_merged_and_its_sfconflict_removed(devserver, mirror):
    assert mirror.sync().errors == []
    theirs = _note(1, first="- a line, changed by their line")
    devserver.put_file(mirror.repo_id, "/a/n1.md", theirs)  # after the poll, before our updates
    edits = _edit_all(mirror)
    report = _watcher_pass(mirror, devserver, edits)
    assert report.errors == [] and report.conflicts == [] and "a/n1.md" in report.merged
    assert devserver.request_count(r"DELETE /api2/repos/.*SFConflict") == 1  # ours, found in the listing
    assert mirror.state.get_meta("head_honoured") == "1"
    live = devserver.read_file(mirror.repo_id, "/a/n1.md")
    assert b"their line" in live and b"edited here" in live and live == mirror.read("a/n1.md")
    _assert_synced(mirror, devserver, {**edits, "a/n1.md": live})


def test_an_update_stored_with_a_stray_cr_is_sent_again_not_merged(devserver, mirror):
    edits = _edit_all(mirror)
    # the third update is a/n2.md's (sent in order, without a transfer pool)
    devserver.inject_fault("POST", UPDATE_PATH, trailing_cr="n2.md", count=3)
    report = _watcher_pass(mirror, devserver, edits)
    assert report.errors == [] and report.conflicts == [] and report.merged == []
    assert report.upload_retries == ["a/n2.md"]
    _assert_synced(mirror, devserver, edits)


def test_a_failed_update_is_left_to_the_per_file_push_and_the_rest_verifies(devserver, mirror):
    edits = _edit_all(mirror)
    devserver.inject_fault("POST", UPDATE_PATH, status=500, count=1)
    report = _watcher_pass(mirror, devserver, edits)
    assert report.errors == [] and sorted(report.uploaded) == sorted(edits)
    assert devserver.request_count(UPDATES) == 9  # the refused one once more, on its own
    _assert_synced(mirror, devserver, edits)


def test_a_server_failing_every_update_ends_the_pass_and_keeps_the_bases(devserver, mirror):
    edits = _edit_all(mirror)
    before = {rel: mirror.state.get_base(rel) for rel in edits}
    devserver.inject_fault("POST", UPDATE_PATH, status=500, count=100)
    with pytest.raises(RemoteError):
        _watcher_pass(mirror, devserver, edits)
    assert devserver.request_count(UPDATES) < len(edits) + 3  # the sending stopped at the first failure
    assert {rel: mirror.state.get_base(rel) for rel in edits} == before
    devserver.clear_faults()
    assert _watcher_pass(mirror, devserver, edits).errors == []
    _assert_synced(mirror, devserver, edits)


def test_no_batch_while_every_update_is_checked_in_the_file_history(devserver, mirror):
    mirror.engine.options.history_check = True
    edits = _edit_all(mirror)
    report = _watcher_pass(mirror, devserver, edits)
    assert report.errors == [] and sorted(report.uploaded) == sorted(edits)
    assert devserver.request_count(LISTINGS) == 0  # each file its own read-back and history
    assert devserver.request_count("GET /api/v2.1/repos/{id}/file/history/") == 8
    _assert_synced(mirror, devserver, edits)


def test_a_large_share_of_one_folder_is_read_back_in_segments(devserver, mirror, monkeypatch):
    from ohsync.engine import update_batch

    monkeypatch.setattr(update_batch, "SEGMENT_BYTES", 2 * len(_note(0, "- edited here\n")))
    edits = _edit_all(mirror)
    report = _watcher_pass(mirror, devserver, edits)
    assert report.errors == [] and sorted(report.uploaded) == sorted(edits)
    assert devserver.request_count(LISTINGS) == 4  # a: 2 + 2 files, b/c: 2 + 1
    _assert_synced(mirror, devserver, edits)


def test_memory_files_are_stamped_before_their_update(devserver, mirror):
    from dataclasses import replace

    mirror.engine.options = replace(mirror.engine.options, stamp_edits=True, stamp_quiet=0.0)
    mirror.engine.ctx.options = mirror.engine.options
    edits = _edit_all(mirror)
    report = _watcher_pass(mirror, devserver, edits)
    assert report.errors == [] and devserver.request_count(LISTINGS) == 2
    for rel, saved in edits.items():
        local = mirror.read(rel)
        assert b"\nmodified: " in local and b"- edited here" in local and local != saved, rel
    _assert_synced(mirror, devserver, {rel: mirror.read(rel) for rel in edits})
