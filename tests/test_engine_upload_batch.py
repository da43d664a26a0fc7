"""New local files go up several per request (engine/upload_batch.py).

Counts come from devserver's request counters; every test also checks that
each file is recorded as synced only when the server holds exactly its
bytes, and that faults in the middle of a batch lose nothing.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import pytest

from engine_helpers import USER, make_mirror, read_tree, mirrored
from ohsync.engine.ids import seafile_file_id
from ohsync.engine.models import UploadResult
from ohsync.engine.sync.reconcile import Action
from ohsync.engine.upload_batch import BATCH_FILES, _Item, _pair
from ohsync.engine.sync.valve import Plan

UPLOADS = r"^POST /seafhttp/upload-api/"
LINKS = r"^GET /api2/repos/[^/]+/upload-link/"
# faults and hooks match the path alone (no method prefix)
UPLOAD_PATH = r"^/seafhttp/upload-api/"
LINK_PATH = r"/upload-link/$"


def note(i: int, folder: str = "notes") -> tuple[str, bytes]:
    return f"{folder}/n{i:04}.md", f"---\ntitle: note {i}\n---\n\n# Note {i}\n\n- line of {folder}\n".encode()


@pytest.fixture
def mirror(devserver, tmp_path):
    repo_id = devserver.create_library(USER, "OH-Memory")
    m = make_mirror(devserver, repo_id, tmp_path)
    m.sync()
    return m


def write_notes(m, count: int, folders=("notes", "tasks", "knowledge/deep")) -> dict[str, bytes]:
    files = {}
    for i in range(count):
        rel, data = note(i, folders[i % len(folders)])
        m.write(rel, data)
        files[rel] = data
    return files


def assert_synced(m, devserver, files: dict[str, bytes]) -> None:
    server = devserver.tree(m.repo_id)
    for rel, data in files.items():
        assert server["/" + rel] == data
        base = m.state.get_base(rel)
        assert base is not None and base.remote_id == seafile_file_id(data)
    assert read_tree(m.root) == server
    assert not [p for p in server if " (1)" in p]


def test_new_files_cost_at_most_1_2_requests_each(devserver, mirror):
    files = write_notes(mirror, 300)
    devserver.reset_counters()
    report = mirror.sync()
    requests = devserver.request_count()
    assert sorted(report.uploaded) == sorted(files)
    assert requests <= 1.2 * len(files), devserver.requests
    assert_synced(mirror, devserver, files)
    # several files per POST, one link for every folder (relative_path creates them: no mkdir),
    # one recursive listing for the read-back, no 404 pre-check, no download read-back
    assert devserver.request_count(UPLOADS) <= sum(math.ceil(100 / BATCH_FILES) for _ in range(3))
    assert devserver.request_count(LINKS) == 1
    assert devserver.request_count(r"^POST /api2/repos/[^/]+/dir/") == 0
    assert devserver.request_count(r"^GET /api2/repos/[^/]+/dir/\?.*recursive=1") == 1
    assert devserver.request_count(r"file/detail/") == 0
    assert devserver.request_count(r"^GET /seafhttp/files/") == 0
    assert devserver.request_count(r"^GET /api2/repos/[^/]+/file/\?") == 0
    # nothing left to do
    devserver.reset_counters()
    again = mirror.sync()
    assert not again.uploaded and not again.downloaded and not again.errors


def test_parallel_uploads_through_an_executor(devserver, mirror):
    files = write_notes(mirror, 400, folders=("a", "b", "c", "d"))
    devserver.reset_counters()
    with ThreadPoolExecutor(max_workers=4) as pool:
        mirror.engine.executor = pool
        report = mirror.sync()
    assert sorted(report.uploaded) == sorted(files) and not report.errors
    assert devserver.request_count() <= 1.2 * len(files), devserver.requests
    assert_synced(mirror, devserver, files)
    assert mirror.client.request_count >= devserver.request_count()  # counted across threads


def test_one_new_file_is_one_upload_and_one_file_detail(devserver, mirror):
    mirror.write("notes/one.md", b"one\n")
    mirror.sync()  # creates the folder and fetches its upload link
    mirror.write("notes/two.md", b"two\n")
    devserver.reset_counters()
    mirror.sync(["notes/two.md"])
    # the link is reused; no 404 pre-check; read back by one file detail, no download
    assert devserver.request_count(LINKS) == 0
    assert devserver.request_count(UPLOADS) == 1
    assert devserver.request_count(r"file/detail/") == 1
    assert devserver.request_count(r"^GET /seafhttp/files/") == 0
    assert devserver.read_file(mirror.repo_id, "/notes/two.md") == b"two\n"


def test_an_expired_link_is_replaced(devserver, mirror):
    first = write_notes(mirror, 10, folders=("notes",))
    mirror.sync()
    devserver.expire_links()
    rel, data = note(99)
    mirror.write(rel, data)
    devserver.reset_counters()
    report = mirror.sync()
    assert report.uploaded == [rel] and not report.errors
    assert devserver.request_count(LINKS) == 1
    assert devserver.request_count(UPLOADS) == 2  # refused with the old link, sent with the new one
    assert_synced(mirror, devserver, {**first, rel: data})


@pytest.mark.parametrize("fault", [
    {"status": 500, "after_processing": True},
    {"drop": True, "after_processing": True},
    {"status": 502},
    {"drop": True},
    {"drop_after_bytes": 3000},
], ids=["5xx-after-apply", "drop-after-apply", "5xx-before", "drop-before", "drop-mid-body"])
def test_a_fault_in_the_middle_of_a_batch_loses_nothing(devserver, mirror, fault):
    files = write_notes(mirror, 3 * BATCH_FILES, folders=("notes",))
    # the second upload request fails; the first went through
    devserver.after_request("POST", UPLOAD_PATH, lambda srv: srv.inject_fault("POST", UPLOAD_PATH, **fault))
    report = mirror.sync()  # one failed request does not end the pass: the rest goes one by one
    first_batch = sorted(files)[:BATCH_FILES]
    for rel in first_batch:  # verified and recorded by the batch
        assert mirror.state.get_base(rel) is not None
    assert report.conflicts == []
    assert not [p for p in files if mirror.state.get_base(p) is None and p not in {e for e, _ in report.errors}]
    devserver.clear_faults()
    mirror.sync()
    mirror.sync()
    assert_synced(mirror, devserver, files)


def test_a_name_taken_meanwhile_is_merged_not_duplicated(devserver, mirror):
    files = write_notes(mirror, 5, folders=("notes",))
    mirror.write("notes/n0001.md", b"# Note 1\n\n- written here\n")
    files["notes/n0001.md"] = b"# Note 1\n\n- written here\n"
    theirs = b"# Note 1\n\n- written on the phone\n"
    # another client creates the same path right after our link was handed out
    devserver.after_request("GET", LINK_PATH, lambda srv: srv.put_file(mirror.repo_id, "/notes/n0001.md", theirs))
    mirror.sync()
    mirror.sync()
    server = devserver.tree(mirror.repo_id)
    assert not [p for p in server if " (1)" in p]              # our auto-renamed copy was removed
    # both versions live: merged, or theirs archived as a conflict copy
    assert b"written here" in server["/notes/n0001.md"]
    assert [p for p, data in server.items() if b"written on the phone" in data], server.keys()
    assert read_tree(mirror.root) == server
    for rel in files:
        if rel != "notes/n0001.md":
            assert server["/" + rel] == files[rel]


def test_a_file_changed_after_it_was_read_is_uploaded_again(devserver, mirror):
    mirror.write("notes/a.md", b"first\n")
    mirror.write("notes/b.md", b"other\n")

    def edit(srv):  # the person saves again while the batch is on the wire
        mirror.write("notes/a.md", b"second, longer\n")
    devserver.after_request("POST", UPLOAD_PATH, edit)
    mirror.sync()
    mirror.sync()
    assert devserver.read_file(mirror.repo_id, "/notes/a.md") == b"second, longer\n"
    assert read_tree(mirror.root) == mirrored(devserver.tree(mirror.repo_id))


def test_devserver_takes_several_file_parts_in_one_commit(devserver, mirror):
    import httpx
    link = mirror.client.upload_link(mirror.repo_id, "/")
    head = devserver.head_commit(mirror.repo_id)
    results = mirror.client.upload_files(mirror.repo_id, "/", [("m2.txt", b"two\n"), ("m1.txt", b"one\n")])
    assert [r.path for r in results] == ["/m2.txt", "/m1.txt"]  # request order (Go file server)
    assert [c["description"] for c in devserver.history(mirror.repo_id)][0].startswith('Added "m2.txt" and 1 more')
    assert devserver.history(mirror.repo_id)[1]["commit_id"] == head  # one commit for both
    again = mirror.client.upload_files(mirror.repo_id, "/", [("m1.txt", b"new\n")])
    assert again[0].path == "/m1 (1).txt"  # never replaced
    assert mirror.client.upload_link(mirror.repo_id, "/") == link  # one link served every POST
    assert isinstance(link, httpx.URL)


def _item(name: str, data: bytes) -> _Item:
    plan = Plan(f"d/{name}", Action.PUSH, None, None, None, None)
    return _Item(plan, name, data, (len(data), 0, 0), seafile_file_id(data))


def test_answers_are_paired_in_either_server_order():
    class Ctx:
        @staticmethod
        def remote_path(rel: str) -> str:
            return "/" + rel

    a, b, c = _item("a.md", b"a\n"), _item("b.md", b"b\n"), _item("c.md", b"a\n")
    answers = [UploadResult("/d/a.md", a.fid, 2), UploadResult("/d/b (1).md", b.fid, 2), UploadResult("/d/c.md", c.fid, 2)]
    assert [(i.name, r.path) for i, r in _pair([a, b, c], answers, Ctx())] == [
        ("a.md", "/d/a.md"), ("b.md", "/d/b (1).md"), ("c.md", "/d/c.md")]
    # the C file server answers in reverse order
    assert [(i.name, r.path) for i, r in _pair([a, b, c], answers[::-1], Ctx())] == [
        ("a.md", "/d/a.md"), ("b.md", "/d/b (1).md"), ("c.md", "/d/c.md")]
    # equal contents: the names decide
    x, y = _item("x.md", b"same\n"), _item("y.md", b"same\n")
    same = [UploadResult("/d/y.md", y.fid, 5), UploadResult("/d/x.md", x.fid, 5)]
    assert [(i.name, r.path) for i, r in _pair([x, y], same, Ctx())] == [("x.md", "/d/x.md"), ("y.md", "/d/y.md")]
    # ids that match neither order (another id formula): no pairing, nothing deleted
    assert _pair([a, b], [UploadResult("/d/a.md", "1" * 40, 2), UploadResult("/d/b.md", "2" * 40, 2)], Ctx()) == []


def test_over_quota_names_each_file_that_does_not_fit(devserver, mirror):
    mirror.write("notes/small.md", b"small\n")
    mirror.sync()
    used = 6
    devserver.set_quota(USER, used + 2000)
    small = {f"notes/s{i}.md": b"s" * 100 for i in range(5)}
    for rel, data in small.items():
        mirror.write(rel, data)
    mirror.write("notes/big.md", b"b" * 5000)
    report = mirror.sync()
    failed = {rel for rel, _ in report.errors}
    assert failed == {"notes/big.md"}, report.errors
    for rel, data in small.items():
        assert devserver.read_file(mirror.repo_id, "/" + rel) == data
    assert mirror.state.get_base("notes/big.md") is None


MKDIRS = r"^POST /api2/repos/[^/]+/dir/"
RECURSIVE = r"^GET /api2/repos/[^/]+/dir/\?.*recursive=1"


def test_one_link_serves_every_folder_through_relative_path(devserver, mirror):
    """The link of the root, with ``relative_path``, creates nested folders; a link stays bound to its folder."""
    from ohsync.engine.errors import RemoteOperationError
    results = mirror.client.upload_files(mirror.repo_id, "/a/b/c", [("x.md", b"x\n"), ("y.md", b"y\n")], under="/")
    assert sorted(r.path for r in results) == ["/a/b/c/x.md", "/a/b/c/y.md"]
    assert devserver.read_file(mirror.repo_id, "/a/b/c/x.md") == b"x\n"
    again = mirror.client.upload_files(mirror.repo_id, "/a/d", [("z.md", b"z\n")], under="/a")
    assert again[0].path == "/a/d/z.md"
    assert devserver.request_count(LINKS) == 2  # one for "/", one for "/a"
    assert devserver.request_count(MKDIRS) == 0
    with pytest.raises(ValueError):
        mirror.client.upload_files(mirror.repo_id, "/other", [("z.md", b"z\n")], under="/a")
    with pytest.raises(RemoteOperationError):
        mirror.client.upload_files(mirror.repo_id, '/a/q"uote', [("z.md", b"z\n")], under="/")


def test_cold_upload_of_many_folders_costs_one_link_and_one_read_back(devserver, mirror):
    folders = [f"top{i}/mid{j}/leaf{k}" for i in range(3) for j in range(3) for k in range(2)]
    files = write_notes(mirror, 180, folders=tuple(folders))
    devserver.reset_counters()
    report = mirror.sync()
    assert sorted(report.uploaded) == sorted(files) and not report.errors
    assert_synced(mirror, devserver, files)
    assert devserver.request_count(LINKS) == 1
    assert devserver.request_count(MKDIRS) == 0
    assert devserver.request_count(RECURSIVE) == 1
    assert devserver.request_count(UPLOADS) == len(folders)
    # the folders the uploads created are synced folders: the next pass has nothing to do
    for folder in {f.rsplit("/", i)[0] for f in folders for i in range(3)}:
        base = mirror.state.get_base(folder)
        assert base is not None and base.is_dir, folder
    devserver.reset_counters()
    again = mirror.sync()
    assert not again.uploaded and not again.downloaded and not again.errors
    assert devserver.request_count(MKDIRS) == 0


def test_a_failing_recursive_listing_falls_back_to_one_listing_per_folder(devserver, mirror):
    files = write_notes(mirror, 30)
    devserver.reset_counters()
    devserver.inject_fault("GET", r"recursive=1", status=500, count=20)
    report = mirror.sync()
    assert sorted(report.uploaded) == sorted(files) and not report.errors
    assert_synced(mirror, devserver, files)
    assert devserver.request_count(r"^GET /api2/repos/[^/]+/dir/\?p=%2F(notes|tasks|knowledge%2Fdeep)(&|$)") == 3
