"""Confirm before destroying (issue 12): a file that vanished from one
listing is deleted locally only after the server answers 404 for it
directly, and a listing answered with the id of another folder is never
used.  The faults come from devserver (``omit_name``, ``listing_of``)."""

from __future__ import annotations

import pytest

from engine_helpers import USER, mirrored, read_tree, synced_sample_mirror

TASKS = "tasks/申请 SRT 项目.md"
OTHER = "tasks/数据结构大作业 1 - 哈希表.md"
TASKS_LISTING = r"/dir/\?p=(%2F|/)tasks(&|$)"
ROOT_LISTING = r"/dir/\?p=(%2F|/)(&|$)"


@pytest.fixture
def synced(devserver, tmp_path):
    return synced_sample_mirror(devserver, tmp_path)


def _edit_remotely(devserver, mirror, rel: str) -> bytes:
    data = devserver.read_file(mirror.repo_id, "/" + rel) + "- [note] 手机上加的一行 #phone\n".encode()
    devserver.put_file(mirror.repo_id, "/" + rel, data)
    return data


def test_file_missing_from_one_listing_is_not_deleted_locally(devserver, synced):
    kept = synced.read(OTHER)
    edited = _edit_remotely(devserver, synced, TASKS)  # the folder id really changes
    devserver.inject_fault("GET", TASKS_LISTING, omit_name=OTHER.rsplit("/", 1)[1])
    report = synced.sync()
    assert report.deleted_local == []
    assert synced.read(OTHER) == kept
    assert synced.read(TASKS) == edited  # the rest of the pass went on
    assert synced.state.get_base(OTHER) is not None
    # the next passes agree with the server, without deleting anything either
    assert synced.sync().deleted_local == []
    assert read_tree(synced.root) == mirrored(devserver.tree(synced.repo_id))


def test_a_real_remote_delete_is_confirmed_by_a_404_and_done(devserver, synced):
    devserver.delete_path(synced.repo_id, "/" + OTHER)
    devserver.reset_counters()
    report = synced.sync()
    assert report.deleted_local == [OTHER]
    assert not (synced.root / OTHER).exists()
    assert devserver.request_count("GET /api2/repos/{id}/file/detail/") == 1


def test_a_folder_deleted_on_the_server_is_confirmed_by_one_listing(devserver, synced):
    files = [p for p in devserver.tree(synced.repo_id) if p.startswith("/tasks/")]
    assert len(files) >= 3
    devserver.delete_path(synced.repo_id, "/tasks")
    devserver.reset_counters()
    report = synced.sync()
    assert sorted(report.deleted_local) == sorted(p[1:] for p in files)
    assert not (synced.root / "tasks").exists()
    assert devserver.request_count("GET /api2/repos/{id}/file/detail/") == 0
    assert devserver.request_count(TASKS_LISTING) == 1  # the direct check: 404


def test_root_listing_answered_for_another_folder_is_rejected(devserver, synced):
    synced.engine.ctx.commit_diffs = False  # the walk's listings (a commit's change is asked for by path)
    before = read_tree(synced.root)
    edited = _edit_remotely(devserver, synced, "index.md")
    # three answers: the listing for the commit's change (engine/remote_diffs.py,
    # which then leaves it to the walk), the walk's and the walk's second try
    devserver.inject_fault("GET", ROOT_LISTING, listing_of="/tasks", count=3)
    report = synced.sync()
    assert report.moved == [] and report.deleted_local == [] and report.downloaded == []
    assert read_tree(synced.root) == before  # nothing moved to the root
    assert [path for path, _ in report.errors] == ["/"]
    assert "another folder" in report.errors[0][1]
    # the next pass lists again and settles; no loop
    report = synced.sync()
    assert report.errors == [] and report.moved == [] and report.downloaded == ["index.md"]
    assert synced.read("index.md") == edited
    assert read_tree(synced.root) == mirrored(devserver.tree(synced.repo_id))
    assert synced.sync().transferred == 0


def test_subfolder_listing_answered_for_another_folder_is_rejected(devserver, synced):
    synced.engine.ctx.commit_diffs = False  # the walk's listings, as above
    before = read_tree(synced.root)
    edited = _edit_remotely(devserver, synced, TASKS)
    # three answers, as for the root above
    devserver.inject_fault("GET", TASKS_LISTING, listing_of="/courses", count=3)
    report = synced.sync()
    assert report.moved == [] and report.deleted_local == [] and report.downloaded == []
    assert read_tree(synced.root) == before
    assert [path for path, _ in report.errors] == ["tasks"]
    report = synced.sync()
    assert report.errors == [] and report.downloaded == [TASKS]
    assert synced.read(TASKS) == edited
    assert read_tree(synced.root) == mirrored(devserver.tree(synced.repo_id))


def test_one_wrong_answer_then_a_right_one_is_used_at_once(devserver, synced):
    edited = _edit_remotely(devserver, synced, TASKS)
    devserver.inject_fault("GET", TASKS_LISTING, listing_of="/courses", count=1)
    report = synced.sync()
    assert report.errors == [] and report.downloaded == [TASKS]
    assert synced.read(TASKS) == edited


def test_devserver_listing_faults_through_the_control_api(devserver, synced):
    import httpx

    token = devserver.token_for(USER)
    with httpx.Client(base_url=devserver.url, headers={"Authorization": f"Token {token}"}) as http:
        right = http.get(f"/api2/repos/{synced.repo_id}/dir/", params={"p": "/tasks"})
        courses = http.get(f"/api2/repos/{synced.repo_id}/dir/", params={"p": "/courses"})
        name = OTHER.rsplit("/", 1)[1]
        r = http.post("/_devserver/faults", json={"method": "GET", "path_regex": TASKS_LISTING, "omit_name": name})
        assert r.status_code == 200
        omitted = http.get(f"/api2/repos/{synced.repo_id}/dir/", params={"p": "/tasks"})
        assert omitted.headers["oid"] == right.headers["oid"]
        assert [e["name"] for e in omitted.json()] == [e["name"] for e in right.json() if e["name"] != name]
        http.post("/_devserver/faults", json={"method": "GET", "path_regex": TASKS_LISTING, "listing_of": "/courses"})
        wrong = http.get(f"/api2/repos/{synced.repo_id}/dir/", params={"p": "/tasks"})
        assert wrong.headers["oid"] == courses.headers["oid"] and wrong.json() == courses.json()
        again = http.get(f"/api2/repos/{synced.repo_id}/dir/", params={"p": "/tasks"})
        assert again.json() == right.json()  # each fault was used once
