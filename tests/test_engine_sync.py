"""The engine against devserver: cold starts, edits both ways, merges,
conflicts, read-back verification and the cost of an idle pass."""

from __future__ import annotations

import os

import httpx
import pytest

from engine_helpers import USER, make_mirror, mirrored, read_tree, sample_library

JOURNAL = "journal/2026-11.md"


@pytest.fixture
def library(devserver, tmp_path):
    """A devserver library seeded with the sample OH-Memory tree (Files/ inside)."""
    tree = sample_library(tmp_path / "seed")
    repo_id = devserver.create_library(USER, "OH-Memory", from_tree=tree)
    return repo_id, tree


@pytest.fixture
def synced(devserver, library, tmp_path):
    """A mirror that finished its first pass over the sample library."""
    repo_id, _ = library
    mirror = make_mirror(devserver, repo_id, tmp_path)
    mirror.sync()
    return mirror


def test_cold_start_makes_mirror_byte_identical(devserver, library, tmp_path):
    repo_id, tree = library
    mirror = make_mirror(devserver, repo_id, tmp_path)
    report = mirror.sync()
    assert read_tree(mirror.root) == mirrored(devserver.tree(repo_id)) == mirrored(read_tree(tree))
    assert report.errors == []
    # the awkward ones really are there, byte for byte
    local = read_tree(mirror.root)
    assert local["/tasks/待办速记.md"] == b""
    assert local["/knowledge/校园服务入口速查.md"].startswith(b"\xef\xbb\xbf")
    assert b"\r\n" in local["/preferences/作息与提醒偏好.md"]
    assert local["/Files/learn/2026-2027-1/数据结构/作业1.docx"][:4] == b"PK\x03\x04"
    assert "/Files/_inbox/.gitkeep" in local


def test_local_tree_pushed_into_empty_library(devserver, tmp_path):
    repo_id = devserver.create_library(USER, "OH-Memory")
    mirror = make_mirror(devserver, repo_id, tmp_path)
    sample_library(mirror.root)
    report = mirror.sync()
    assert report.errors == []
    # the sample's local .trash/ is left alone, not uploaded: the trash stays on the server
    assert devserver.tree(repo_id) == mirrored(read_tree(mirror.root))
    assert "/Files/learn/2026-2027-1" in {d.rstrip("/") for d in devserver.dirs(repo_id)}


def test_second_pass_over_unchanged_mirror_costs_one_request(devserver, synced):
    devserver.reset_counters()
    report = synced.sync()
    assert devserver.request_count() == 1 == report.requests
    assert report.transferred == 0 and not report.remote_changed


def test_local_edit_is_on_server_after_one_pass(devserver, synced):
    line = "- [study] 2026-11-30 21:10 复习了开放寻址 #数据结构\n"
    synced.write(JOURNAL, synced.read(JOURNAL) + line.encode())
    report = synced.sync([JOURNAL])
    assert report.uploaded == [JOURNAL]
    assert devserver.read_file(synced.repo_id, "/" + JOURNAL) == synced.read(JOURNAL)
    base = synced.state.get_base(JOURNAL)
    assert base is not None and base.remote_id == synced.client.file_detail(synced.repo_id, "/" + JOURNAL).id


def test_write_slipping_in_before_read_back_is_detected_and_merged(devserver, synced):
    repo = synced.repo_id
    original = synced.read(JOURNAL)
    ours = original + "- [study] 2026-11-30 22:00 ours #a\n".encode()
    theirs_line = "- [phone] 2026-11-30 22:01 theirs #b\n".encode()

    def second_writer(srv):  # another device rewrites the file from the old version
        srv.put_file(repo, "/" + JOURNAL, original + theirs_line)

    devserver.after_request("POST", r"/update-api/", second_writer, count=1)
    synced.write(JOURNAL, ours)
    report = synced.sync([JOURNAL])
    final = devserver.read_file(repo, "/" + JOURNAL)
    assert b"ours #a" in final and b"theirs #b" in final
    assert synced.read(JOURNAL) == final
    assert report.conflicts == []


def test_remote_edit_by_another_client_is_local_after_one_pass(devserver, synced):
    repo = synced.repo_id
    token = devserver.token_for(USER)
    new = synced.read(JOURNAL) + "- [bot] 2026-11-30 23:00 from the cloud bot #bot\n".encode()
    with httpx.Client(base_url=devserver.url, headers={"Authorization": f"Token {token}"}) as http:
        link = http.get(f"/api2/repos/{repo}/update-link/", params={"p": "/journal"}).json()
        r = http.post(link, files={"file": ("2026-11.md", new)},
                      data={"target_file": "/" + JOURNAL})
        assert r.status_code == 200
    report = synced.sync()
    assert report.downloaded == [JOURNAL]
    assert synced.read(JOURNAL) == new
    # echo suppression: the watcher's event for our own write changes nothing
    devserver.reset_counters()
    again = synced.sync([JOURNAL])
    assert again.transferred == 0
    assert devserver.request_count("POST") == 0


def test_edits_in_different_places_merge_without_conflict_copy(devserver, synced):
    repo, path = synced.repo_id, "courses/数据结构（2026 秋）.md"
    lines = synced.read(path).split(b"\n")
    theirs = b"\n".join([lines[0], lines[1].replace(b"title:", b"title:"), *lines[2:]])
    theirs = theirs.replace(b"\n## Relations", "\n- [exam] 期末考试 1 月 10 日 #考试\n\n## Relations".encode(), 1)
    devserver.put_file(repo, "/" + path, theirs)
    ours = synced.read(path).replace("# 数据结构（2026 秋）".encode(),
                                     "# 数据结构（2026 秋）\n\n课程主页已收藏。".encode(), 1)
    assert ours != synced.read(path)
    synced.write(path, ours)
    report = synced.sync()
    merged = synced.read(path)
    assert "期末考试 1 月 10 日".encode() in merged and "课程主页已收藏".encode() in merged
    assert devserver.read_file(repo, "/" + path) == merged
    assert report.conflicts == []
    assert not any(p.startswith("/.conflict/") for p in devserver.tree(repo))


def test_same_line_changed_on_both_sides_archives_remote_version(devserver, synced):
    repo, path = synced.repo_id, "Files/im/2026-11/群聊记录_数据结构互助小组_2026-11-18.txt"
    original = synced.read(path)
    first = original.split(b"\n", 1)[0]
    ours = original.replace(first, first + " (ours)".encode(), 1)
    theirs = original.replace(first, first + " (theirs)".encode(), 1)
    devserver.put_file(repo, "/" + path, theirs)
    synced.write(path, ours)
    report = synced.sync()
    assert len(report.conflicts) == 1
    record = report.conflicts[0]
    assert record.archived.startswith(".conflict/Files/im/2026-11/群聊记录_数据结构互助小组_2026-11-18__remote__")
    assert record.archived.endswith(".txt")
    assert synced.read(path) == ours == devserver.read_file(repo, "/" + path)
    assert synced.read(record.archived) == theirs == devserver.read_file(repo, "/" + record.archived)
    assert [c.path for c in synced.engine.conflicts()] == [path]
    # the archive is an ordinary synced file: the next pass moves nothing
    assert synced.sync().transferred == 0


def test_new_file_on_both_sides_with_same_bytes_is_adopted(devserver, synced):
    repo, path = synced.repo_id, "knowledge/新笔记.md"
    body = "---\ntitle: 新笔记\ntype: note\n---\n\n## Observations\n- [x] y\n".encode()
    devserver.put_file(repo, "/" + path, body)
    synced.write(path, body)
    devserver.reset_counters()
    report = synced.sync()
    assert report.transferred == 0
    assert devserver.request_count("POST") == 0
    assert synced.state.get_base(path) is not None


def test_deletes_propagate_both_ways_softly(devserver, synced, tmp_path):
    repo = synced.repo_id
    index = synced.read("index.md")
    srt = devserver.read_file(repo, "/tasks/申请 SRT 项目.md")
    (synced.root / "index.md").unlink()
    devserver.delete_path(repo, "/tasks/申请 SRT 项目.md")
    report = synced.sync()
    assert report.deleted_remote == ["index.md"] and report.deleted_local == ["tasks/申请 SRT 项目.md"]
    tree = devserver.tree(repo)
    assert "/index.md" not in tree and tree["/.trash/index.md"] == index   # soft delete on the server
    assert not (synced.root / "tasks/申请 SRT 项目.md").exists()
    backups = list((tmp_path / "m-state" / "backups").rglob("申请 SRT 项目.md"))
    assert [b.read_bytes() for b in backups] == [srt]                      # backup before the local delete
    synced.sync()
    assert read_tree(synced.root) == mirrored(devserver.tree(repo))                   # the trash stays on the server


def test_modification_beats_deletion_on_either_side(devserver, synced):
    repo = synced.repo_id
    (synced.root / "index.md").unlink()
    devserver.put_file(repo, "/index.md", b"edited on the phone\n")
    devserver.delete_path(repo, "/" + JOURNAL)
    synced.write(JOURNAL, synced.read(JOURNAL) + b"- [x] 2026-11-30 12:00 edited locally\n")
    report = synced.sync()
    assert synced.read("index.md") == b"edited on the phone\n"
    assert devserver.read_file(repo, "/" + JOURNAL) == synced.read(JOURNAL)
    assert report.deleted_local == [] and report.deleted_remote == []


def test_mass_delete_is_held_until_confirmed(devserver, synced):
    repo = synced.repo_id
    before = devserver.tree(repo)
    # 14 notes: past the valve's floor (10) and more than 25 % of the mirror
    victims = [p for d in ("journal", "courses", "tasks", "preferences") for p in (synced.root / d).rglob("*.md")]
    assert len(victims) == 14
    for path in victims:
        path.unlink()
    synced.write("knowledge/new.md", b"still syncs\n")
    report = synced.sync()
    assert len(report.held_deletes) == 14 and report.deleted_remote == []
    assert devserver.tree(repo).items() >= before.items()          # nothing deleted on the server
    assert devserver.read_file(repo, "/knowledge/new.md") == b"still syncs\n"
    assert len(synced.engine.held_deletes()) == 14
    assert synced.engine.confirm_deletes() == 14
    report = synced.sync()
    assert len(report.deleted_remote) == 14 and report.held_deletes == []
    assert "/.trash/journal/2026-11.md" in devserver.tree(repo)


def test_emptied_local_folder_deletes_the_remote_folder(devserver, synced):
    repo = synced.repo_id
    for path in (synced.root / "journal").iterdir():
        path.unlink()
    (synced.root / "journal").rmdir()
    synced.engine.valve.max_files = 100
    synced.engine.valve.max_percent = 100
    report = synced.sync()
    assert sorted(report.deleted_remote) == ["journal/2026-09.md", "journal/2026-10.md", "journal/2026-11.md"]
    assert "/journal" not in {d.rstrip("/") for d in devserver.dirs(repo)}


def test_crash_after_upload_before_base_is_adopted_not_reuploaded(devserver, synced):
    repo = synced.repo_id
    new = synced.read(JOURNAL) + b"- [x] 2026-11-30 23:59 crash test\n"
    synced.write(JOURNAL, new)
    devserver.put_file(repo, "/" + JOURNAL, new)  # the upload landed, then the process died
    devserver.reset_counters()
    report = synced.sync()
    assert report.transferred == 0 and report.conflicts == []
    assert devserver.request_count("POST") == 0


def test_local_rename_and_move_become_server_side_moves(devserver, synced):
    repo = synced.repo_id
    pdf = "Files/learn/2026-2027-1/数据结构/第07讲-散列表.pdf"
    content = synced.read(pdf)
    (synced.root / "Files/_inbox").mkdir(exist_ok=True)
    os.rename(synced.root / pdf, synced.root / "Files/_inbox/散列表.pdf")
    os.rename(synced.root / "index.md", synced.root / "首页.md")
    devserver.reset_counters()
    report = synced.sync()
    assert sorted(report.moved) == sorted([(pdf, "Files/_inbox/散列表.pdf"), ("index.md", "首页.md")])
    tree = devserver.tree(repo)
    assert tree["/Files/_inbox/散列表.pdf"] == content and "/" + pdf not in tree
    assert devserver.request_count("upload-api") == 0 and devserver.request_count("update-api") == 0
    assert synced.sync().transferred == 0


def test_move_is_paired_when_the_watcher_names_only_the_new_path(devserver, synced):
    # a file moved into a folder not yet watched: the new path comes first, the old one later
    repo = synced.repo_id
    content = synced.read("index.md")
    trash_before = {k for k in devserver.tree(repo) if k.startswith("/.trash/")}
    (synced.root / "moved").mkdir()
    os.rename(synced.root / "index.md", synced.root / "moved/index.md")
    devserver.reset_counters()
    report = synced.sync(["moved", "moved/index.md"])
    assert report.moved == [("index.md", "moved/index.md")]
    tree = devserver.tree(repo)
    assert tree["/moved/index.md"] == content and "/index.md" not in tree
    assert {k for k in tree if k.startswith("/.trash/")} == trash_before   # a move, not a delete
    assert devserver.request_count("upload-api") == 0
    assert synced.sync(["index.md"]).transferred == 0


def test_remote_move_becomes_local_rename_without_download(devserver, synced):
    repo = synced.repo_id
    path = "knowledge/校园服务入口速查.md"
    content = synced.read(path)
    client = synced.client
    client.move(repo, "/" + path, "/preferences")
    devserver.reset_counters()
    report = synced.sync()
    assert report.moved == [(path, "preferences/校园服务入口速查.md")]
    assert synced.read("preferences/校园服务入口速查.md") == content
    assert not (synced.root / path).exists()
    assert devserver.request_count("/files/") == 0  # nothing downloaded


def test_large_file_streams_up_in_chunks_and_a_conflict_is_moved_aside(devserver, synced):
    repo = synced.repo_id
    big = os.urandom(6 * 1024 * 1024) + b"tail"
    synced.write("Files/videos/lecture.mp4", big)
    synced.engine.options.upload_chunk = synced.engine.options.upload_max_request = 2 * 1024 * 1024
    devserver.reset_counters()
    synced.sync()
    assert devserver.read_file(repo, "/Files/videos/lecture.mp4") == big
    assert devserver.request_count(r"POST /seafhttp/upload-api/") == 4  # 2 MiB chunks
    # both sides change it: the remote version is archived, ours keeps the path
    theirs = big[:-4] + b"THEIRS"
    devserver.put_file(repo, "/Files/videos/lecture.mp4", theirs)
    ours = big[:-4] + b"OURS"
    synced.write("Files/videos/lecture.mp4", ours)
    report = synced.sync()
    assert len(report.conflicts) == 1
    archived = report.conflicts[0].archived
    assert devserver.read_file(repo, "/Files/videos/lecture.mp4") == ours
    assert devserver.read_file(repo, "/" + archived) == theirs == synced.read(archived)


def test_large_file_edit_updates_in_chunks(devserver, synced):
    repo = synced.repo_id
    synced.engine.options.upload_chunk = synced.engine.options.upload_max_request = 2 * 1024 * 1024
    synced.write("Files/data.bin", os.urandom(5 * 1024 * 1024))
    synced.sync()
    edited = os.urandom(5 * 1024 * 1024 + 7)
    synced.write("Files/data.bin", edited)
    devserver.reset_counters()
    report = synced.sync()
    assert report.uploaded == ["Files/data.bin"] and report.conflicts == []
    assert devserver.read_file(repo, "/Files/data.bin") == edited
    assert devserver.request_count(r"POST /seafhttp/update-api/") == 3


def test_folder_replaced_by_a_file_locally(devserver, synced):
    repo = synced.repo_id
    folder = synced.root / "journal"
    months = {p.name: p.read_bytes() for p in folder.iterdir()}
    for p in folder.iterdir():
        p.unlink()
    folder.rmdir()
    folder.write_bytes(b"journal is a file now\n")
    synced.engine.valve.max_files = synced.engine.valve.max_percent = 100
    synced.sync()
    tree = devserver.tree(repo)
    assert tree["/journal"] == b"journal is a file now\n"
    assert all(tree[f"/.trash/journal/{name}"] == data for name, data in months.items())
    synced.sync()
    assert read_tree(synced.root) == mirrored(devserver.tree(repo))


def test_folder_replaced_by_a_file_on_the_server(devserver, synced, tmp_path):
    repo = synced.repo_id
    months = {p.name: p.read_bytes() for p in (synced.root / "journal").iterdir()}
    devserver.delete_path(repo, "/journal")
    devserver.put_file(repo, "/journal", b"journal is a file on the server\n")
    synced.engine.valve.max_files = synced.engine.valve.max_percent = 100
    synced.sync()
    assert synced.read("journal") == b"journal is a file on the server\n"
    backups = {p.name: p.read_bytes() for p in (tmp_path / "m-state" / "backups").rglob("*.md")}
    assert all(backups[name] == data for name, data in months.items())
    assert read_tree(synced.root) == mirrored(devserver.tree(repo))


def test_local_names_seafile_cannot_take_are_skipped_and_reported(devserver, synced):
    import unicodedata
    nfd = unicodedata.normalize("NFD", "Résumé.md")
    synced.write(nfd, b"decomposed name\n")
    synced.write("notes/back\\slash.md", b"a backslash\n")
    os.symlink("/etc/hostname", synced.root / "outside-link")
    report = synced.sync()
    skipped = dict(synced.engine.skipped())
    assert "notes/back\\slash.md" in skipped and "outside-link" in skipped
    tree = devserver.tree(synced.repo_id)
    assert not any("slash" in p or "outside" in p for p in tree)
    assert report.errors == []
    # a decomposed (NFD) name is the server's composed name, not a name to skip (test_hostile_names.py)
    nfc = unicodedata.normalize("NFC", nfd)
    assert tree["/" + nfc] == b"decomposed name\n" and (synced.root / nfc).read_bytes() == b"decomposed name\n"


def test_case_only_twins_on_a_case_insensitive_disk_are_skipped(devserver, synced):
    repo = synced.repo_id
    devserver.put_file(repo, "/knowledge/Hash.md", b"upper\n")
    devserver.put_file(repo, "/knowledge/hash.md", b"lower\n")
    synced.engine._case_insensitive = True  # as on macOS or Windows; this disk is case-sensitive
    report = synced.sync()
    skipped = dict(synced.engine.skipped())
    assert "differs only by letter case" in skipped["knowledge/hash.md"]
    assert synced.read("knowledge/Hash.md") == b"upper\n"
    assert not (synced.root / "knowledge/hash.md").exists()
    assert "knowledge/hash.md" not in report.downloaded
    assert devserver.read_file(repo, "/knowledge/hash.md") == b"lower\n"  # nothing lost on the server


def test_writers_fighting_over_a_path_pause_it_after_a_few_conflicts(devserver, synced):
    repo, path = synced.repo_id, "Files/im/2026-11/群聊记录_数据结构互助小组_2026-11-18.txt"
    original = synced.read(path)
    first = original.split(b"\n", 1)[0]
    for round_no in range(5):
        devserver.put_file(repo, "/" + path, original.replace(first, first + f" theirs {round_no}".encode(), 1))
        synced.write(path, original.replace(first, first + f" ours {round_no}".encode(), 1))
        report = synced.sync()
    copies = [p for p in devserver.tree(repo) if p.startswith("/.conflict/")]
    assert len(copies) == 3                                   # then the path was paused
    assert any("two writers" in reason for _, reason in report.skipped)
    assert b"theirs 4" in devserver.read_file(repo, "/" + path)  # nothing overwritten while paused
    assert b"ours 4" in synced.read(path)


def test_a_poll_pass_applies_remote_edits_deletes_and_new_folders(devserver, synced):
    """The daemon's polls pass no local paths: remote changes must still land."""
    repo = synced.repo_id
    devserver.put_file(repo, "/index.md", b"edited on the phone\n")
    devserver.delete_path(repo, "/tasks/申请 SRT 项目.md")
    devserver.mkdir(repo, "/projects/empty")
    report = synced.sync([])
    assert synced.read("index.md") == b"edited on the phone\n"
    assert not (synced.root / "tasks/申请 SRT 项目.md").exists()
    assert (synced.root / "projects/empty").is_dir()
    assert report.deleted_local == ["tasks/申请 SRT 项目.md"] and report.errors == []
    assert read_tree(synced.root) == mirrored(devserver.tree(repo))
    # and nothing comes back on the next full scan
    again = synced.sync()
    assert again.uploaded == [] and "/tasks/申请 SRT 项目.md" not in devserver.tree(repo)


def test_local_deletes_seen_by_the_watcher_wait_for_a_full_scan(devserver, synced):
    (synced.root / "index.md").unlink()
    report = synced.sync(["index.md"])
    assert report.rescan and report.deleted_remote == []
    assert "/index.md" in devserver.tree(synced.repo_id)
    report = synced.sync()
    assert report.deleted_remote == ["index.md"]
    assert "/.trash/index.md" in devserver.tree(synced.repo_id)


def test_deleting_the_conflict_copy_settles_the_conflict(devserver, synced):
    repo, path = synced.repo_id, "Files/im/2026-11/群聊记录_数据结构互助小组_2026-11-18.txt"
    original = synced.read(path)
    first = original.split(b"\n", 1)[0]
    devserver.put_file(repo, "/" + path, original.replace(first, first + b" theirs", 1))
    synced.write(path, original.replace(first, first + b" ours", 1))
    archived = synced.sync().conflicts[0].archived
    assert len(synced.engine.conflicts()) == 1
    synced.engine.valve.max_files = synced.engine.valve.max_percent = 100
    (synced.root / archived).unlink()
    synced.sync()
    assert "/" + archived not in devserver.tree(repo)
    assert devserver.tree(repo)["/.trash/" + archived] == original.replace(first, first + b" theirs", 1)
    assert synced.engine.conflicts() == []
