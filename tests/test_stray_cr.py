"""The C fileserver sometimes stores a file of a multi-file upload with one
extra trailing ``\\r`` (docs/seafile-api.md, "Verified on a real server").
The read-back sees it; that is a failed upload of ours, sent again and
counted (``SyncReport.upload_retries``), never another writer's version: no
conflict copy, the server ends up with our bytes.  A version another writer
put there in the same window is still merged or archived as before.

devserver's ``trailing_cr`` fault stores the named file part that way.
"""
from __future__ import annotations

import httpx
import pytest

from devserver_fixtures import c, rid  # noqa: F401 - fixtures
from engine_helpers import USER, make_mirror, mirrored, read_tree
from ohsync.engine.ids import seafile_file_id
from ohsync.engine.models import RemoteEntry
from ohsync.engine.write_path import damaged_copy

UPLOAD_PATH = r"^/seafhttp/upload-api/"
UPDATE_PATH = r"^/seafhttp/update-api/"


def _note(i: int) -> bytes:
    return f"---\ntitle: note {i}\n---\n\n# Note {i}\n\n- a line\n".encode()


@pytest.fixture
def mirror(devserver, tmp_path):
    m = make_mirror(devserver, devserver.create_library(USER, "OH-Memory"), tmp_path)
    m.sync()
    return m


def _conflict_copies(devserver, m) -> list[str]:
    on_server = [p for p in devserver.tree(m.repo_id) if p.startswith("/.conflict/")]
    local = [p for p in read_tree(m.root) if p.startswith("/.conflict/")]
    return on_server + local


def test_the_fault_stores_the_named_part_with_a_stray_cr_and_answers_its_id(devserver, c, rid):  # noqa: F811
    link = c.get(f"/api2/repos/{rid}/upload-link/", params={"p": "/"}).json()
    devserver.inject_fault("POST", UPLOAD_PATH, trailing_cr="b.md")
    files = [("file", ("a.md", b"aaa\n", "application/octet-stream")),
             ("file", ("b.md", b"bbb\n", "application/octet-stream"))]
    resp = httpx.post(link, params={"ret-json": "1"}, data={"parent_dir": "/"}, files=files)
    assert resp.status_code == 200
    assert devserver.read_file(rid, "/a.md") == b"aaa\n"
    assert devserver.read_file(rid, "/b.md") == b"bbb\n\r"
    answered = {r["name"]: r["id"] for r in resp.json()}
    assert answered["b.md"] == seafile_file_id(b"bbb\n\r") == devserver.file_id(rid, "/b.md")


def test_a_batch_file_stored_with_a_stray_cr_is_uploaded_again_not_filed_as_a_conflict(devserver, mirror):
    files = {f"notes/n{i}.md": _note(i) for i in range(6)}
    for rel, data in files.items():
        mirror.write(rel, data)
    devserver.inject_fault("POST", UPLOAD_PATH, trailing_cr="n2.md")
    report = mirror.sync()
    assert report.errors == [] and report.conflicts == []
    assert report.upload_retries == ["notes/n2.md"]
    assert sorted(report.uploaded) == sorted(files)
    assert _conflict_copies(devserver, mirror) == []
    server = devserver.tree(mirror.repo_id)
    assert {p[1:]: d for p, d in server.items()} == files  # our bytes, no stray \r, no extra file
    assert read_tree(mirror.root) == mirrored(server)
    base = mirror.state.get_base("notes/n2.md")
    assert base is not None and base.remote_id == seafile_file_id(files["notes/n2.md"])
    again = mirror.sync()
    assert again.uploaded == [] and again.downloaded == [] and again.errors == [] and again.upload_retries == []


def test_another_writer_in_the_read_back_window_is_still_merged_or_archived(devserver, mirror):
    """Theirs lands at the path between our batch upload and its read-back: the
    read-back mismatch is not ours (no stray-\\r copy, not the id the upload
    answered), so it goes the way it always went: nothing of theirs is lost."""
    files = {f"notes/n{i}.md": _note(i) for i in range(4)}
    for rel, data in files.items():
        mirror.write(rel, data)
    theirs = b"---\ntitle: theirs\n---\n\n# Written elsewhere\n\n- their line\n"
    devserver.after_request("POST", UPLOAD_PATH, lambda srv: srv.put_file(mirror.repo_id, "/notes/n1.md", theirs))
    report = mirror.sync()
    assert report.errors == [] and report.upload_retries == []
    server = devserver.tree(mirror.repo_id)
    kept = [data for path, data in server.items() if path == "/notes/n1.md" or path.startswith("/.conflict/")]
    assert any(b"their line" in data for data in kept)  # theirs is live or in a conflict copy
    assert any(b"# Note 1" in data for data in kept)  # and so is ours
    assert read_tree(mirror.root) == mirrored(server)


def test_an_update_stored_with_a_stray_cr_is_sent_again(devserver, mirror):
    mirror.write("journal.md", _note(1))
    assert mirror.sync().errors == []
    edited = _note(1) + b"- an edit\n"
    mirror.write("journal.md", edited)
    devserver.inject_fault("POST", UPDATE_PATH, trailing_cr="journal.md")
    report = mirror.sync()
    assert report.errors == [] and report.conflicts == [] and report.merged == []
    assert report.upload_retries == ["journal.md"]
    assert devserver.read_file(mirror.repo_id, "/journal.md") == edited
    assert _conflict_copies(devserver, mirror) == []
    assert read_tree(mirror.root) == mirrored(devserver.tree(mirror.repo_id))


def test_an_update_overtaken_by_another_writer_still_merges(devserver, mirror):
    mirror.write("journal.md", b"line one\nline two\nline three\n")
    assert mirror.sync().errors == []
    mirror.write("journal.md", b"line one changed here\nline two\nline three\n")
    devserver.after_request("POST", UPDATE_PATH, lambda srv: srv.put_file(
        mirror.repo_id, "/journal.md", b"line one\nline two\nline three changed there\n"))
    report = mirror.sync()
    assert report.errors == [] and report.upload_retries == []
    assert devserver.read_file(mirror.repo_id, "/journal.md") == \
        b"line one changed here\nline two\nline three changed there\n"


class _Client:
    """Answers the one download :func:`damaged_copy` may ask for."""

    def __init__(self, content: bytes) -> None:
        self.content, self.asked = content, 0

    def download_bytes(self, repo_id: str, path: str) -> tuple[bytes, str]:
        self.asked += 1
        return self.content, seafile_file_id(self.content)


class _Ctx:
    repo_id = "0" * 36

    def __init__(self, content: bytes) -> None:
        self.client = _Client(content)

    @staticmethod
    def remote_path(rel: str) -> str:
        return "/" + rel


def test_the_two_tells_of_our_own_damaged_copy():
    sent = b"ours\n"
    stray = RemoteEntry("a.md", False, seafile_file_id(sent + b"\r"), len(sent) + 1)
    ctx = _Ctx(b"unused")
    copy = damaged_copy(ctx, sent, stray, None)  # type: ignore[arg-type]
    assert copy is not None and copy.content == sent + b"\r" and ctx.client.asked == 0
    other = b"ours, damaged otherwise\n"
    entry = RemoteEntry("a.md", False, seafile_file_id(other), len(other))
    ctx = _Ctx(other)
    copy = damaged_copy(ctx, sent, entry, seafile_file_id(other))  # type: ignore[arg-type]
    assert copy is not None and copy.content == other and ctx.client.asked == 1
    # another writer's version: neither tell
    assert damaged_copy(_Ctx(other), sent, entry, seafile_file_id(sent)) is None  # type: ignore[arg-type]
    assert damaged_copy(_Ctx(other), sent, entry, None) is None  # type: ignore[arg-type]
    # the server holds ours exactly: nothing damaged
    exact = RemoteEntry("a.md", False, seafile_file_id(sent), len(sent))
    assert damaged_copy(_Ctx(sent), sent, exact, seafile_file_id(sent)) is None  # type: ignore[arg-type]


def test_a_repeat_that_fails_is_sent_again_on_top_of_the_copy_not_merged(devserver, mirror):
    """The repeat of the damaged upload fails (a 500 to its update): the per-file
    push of the same pass sends the file again, still based on the server's copy."""
    files = {f"notes/n{i}.md": _note(i) for i in range(3)}
    for rel, data in files.items():
        mirror.write(rel, data)
    devserver.inject_fault("POST", UPLOAD_PATH, trailing_cr="n1.md")
    devserver.inject_fault("POST", UPDATE_PATH, status=500)
    report = mirror.sync()
    assert report.conflicts == [] and report.merged == []
    assert report.upload_retries == ["notes/n1.md"]
    assert _conflict_copies(devserver, mirror) == []
    assert devserver.read_file(mirror.repo_id, "/notes/n1.md") == files["notes/n1.md"]
    assert "notes/n1.md" in report.uploaded and report.errors == []


def test_a_repeat_verified_before_the_batch_failed_is_done_once(devserver, mirror):
    """The damaged upload in folder ``a`` is repeated and verified, then the
    batch of folder ``b`` fails (a 500): the repeated file counts as uploaded
    once, is not pushed again by the per-file path, and its memory entity is
    not stamped as if someone had edited it since."""
    from dataclasses import replace

    mirror.engine.options = replace(mirror.engine.options, stamp_edits=True, stamp_quiet=0.0)
    mirror.engine.ctx.options = mirror.engine.options
    files = {"a/n1.md": _note(1), "a/n2.md": _note(2), "b/n3.md": _note(3)}
    for rel, data in files.items():
        mirror.write(rel, data)
    devserver.inject_fault("POST", UPLOAD_PATH, trailing_cr="n2.md")  # a's batch goes first
    devserver.inject_fault("POST", UPLOAD_PATH, status=500, count=2)  # then b's, and its one resend
    devserver.reset_counters()
    report = mirror.sync()
    assert report.upload_retries == ["a/n2.md"]
    assert report.uploaded.count("a/n2.md") == 1
    assert devserver.read_file(mirror.repo_id, "/a/n2.md") == files["a/n2.md"]
    assert (mirror.root / "a" / "n2.md").read_bytes() == files["a/n2.md"]  # not stamped
    assert devserver.request_count(r"^POST /seafhttp/update-api/") == 1  # the one repeat, no second push
