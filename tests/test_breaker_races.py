"""Breaker: concurrent writers and local edits during a pass, moves racing edits."""

from __future__ import annotations

import os
import shutil

import pytest

from breaker_helpers import missing_lines, missing_versions, synced_small


def test_folder_deleted_locally_while_remote_adds_file_in_it_mid_pass(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/d/x.txt": b"x\n"})
    shutil.rmtree(m.root / "d")

    def late_writer(srv):
        srv.put_file(m.repo_id, "/d/late.txt", b"written by the phone during the pass\n")

    devserver.after_request("POST", r"/file/", late_writer, count=1)  # the trash move of d/x.txt
    m.sync()
    m.sync()
    assert missing_versions(m, tmp_path, [b"x\n", b"written by the phone during the pass\n"]) == []


def test_local_edit_while_download_in_flight(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/a.md": b"base\n"})
    devserver.put_file(m.repo_id, "/a.md", b"base\nremote line\n")

    def editor_saves(srv):  # the editor saves via temp file + rename while we download
        tmp = m.root / ".a.md.tmp123"
        tmp.write_bytes(b"base\nlocal line\n")
        os.replace(tmp, m.root / "a.md")

    devserver.after_request("GET", r"/files/", editor_saves, count=1)
    m.sync()
    m.sync()
    m.sync()
    assert missing_lines(m, tmp_path, [b"remote line", b"local line"]) == []


def test_local_edit_while_upload_in_flight(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/a.md": b"base\n"})
    m.write("a.md", b"base\nfirst local\n")

    def editor_saves(srv):
        (m.root / "a.md").write_bytes(b"base\nfirst local\nsecond local\n")

    devserver.after_request("POST", r"/(upload|update)-api/", editor_saves, count=1)
    m.sync(["a.md"])
    m.sync(["a.md"])
    assert devserver.read_file(m.repo_id, "/a.md") == b"base\nfirst local\nsecond local\n"


def test_vim_backup_then_write_during_pass(devserver, tmp_path):
    """vim (backupcopy=no): rename a.md -> a.md~, write new a.md; happens while we upload."""
    m = synced_small(devserver, tmp_path, {"/a.md": b"base\n"})
    m.write("a.md", b"base\nedit 1\n")

    def vim_save(srv):
        os.rename(m.root / "a.md", m.root / "a.md~")
        (m.root / "a.md").write_bytes(b"base\nedit 1\nedit 2\n")
        os.unlink(m.root / "a.md~")

    devserver.after_request("GET", r"/file/detail/|/file/history/", vim_save, count=1)  # the read-back
    m.sync(["a.md"])
    m.sync(["a.md", "a.md~"])
    m.sync()
    assert devserver.read_file(m.repo_id, "/a.md") == b"base\nedit 1\nedit 2\n" == m.read("a.md")


def test_delete_and_recreate_during_remote_delete(devserver, tmp_path):
    """Remote deleted the file; locally it is deleted + recreated with new bytes while we plan."""
    m = synced_small(devserver, tmp_path, {"/a.md": b"base\n"})
    devserver.delete_path(m.repo_id, "/a.md")

    fired = []

    def recreate(srv):
        fired.append(True)
        (m.root / "a.md").unlink()
        (m.root / "a.md").write_bytes(b"recreated locally\n")

    # while the pass reads the server (a listing, or what the commit changed)
    devserver.after_request("GET", r"/api2/repos/[^/]+/dir/|/commits/[0-9a-f]{40}/", recreate, count=1)
    m.sync()
    m.sync()
    assert fired, "the pass read neither a listing nor the commit: the race never happened"
    assert missing_versions(m, tmp_path, [b"recreated locally\n"]) == []


@pytest.mark.parametrize("unlink", [True, False], ids=["recreated", "rewritten"])
def test_local_write_between_gone_check_and_local_delete(devserver, tmp_path, unlink):
    """Remote deleted the file; the local file gets new bytes right after the server
    answered that it is gone (the last request before the local delete)."""
    m = synced_small(devserver, tmp_path, {"/a.md": b"base\n"})
    devserver.delete_path(m.repo_id, "/a.md")
    fired = []

    def write(srv):
        fired.append(True)
        if unlink:
            (m.root / "a.md").unlink()
        (m.root / "a.md").write_bytes(b"written locally\n")

    devserver.after_request("GET", r"/file/detail/", write, count=1)
    m.sync()
    m.sync()
    assert fired, "the pass did not ask whether the file is gone before deleting it here"
    assert missing_versions(m, tmp_path, [b"written locally\n"]) == []


def test_remote_move_plus_local_edit(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/a/n.md": b"base\n"})
    devserver.mkdir(m.repo_id, "/b")
    devserver.move_path(m.repo_id, "/a/n.md", "/b")
    m.write("a/n.md", b"base\nlocal edit\n")
    m.sync()
    m.sync()
    assert missing_versions(m, tmp_path, [b"base\nlocal edit\n"]) == []


def test_local_move_plus_remote_edit(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/a/n.md": b"base\n"})
    (m.root / "b").mkdir()
    os.rename(m.root / "a/n.md", m.root / "b/n.md")
    devserver.put_file(m.repo_id, "/a/n.md", b"base\nremote edit\n")
    m.sync()
    m.sync()
    assert missing_versions(m, tmp_path, [b"base\n", b"base\nremote edit\n"]) == []


def test_local_move_into_folder_holding_same_name(devserver, tmp_path):
    """d/x.md -> e/y.md where e/x.md exists: the server-side move must not clobber e/x.md."""
    m = synced_small(devserver, tmp_path, {"/d/x.md": b"moving file\n", "/e/x.md": b"bystander\n"})
    os.rename(m.root / "d/x.md", m.root / "e/y.md")
    m.sync()
    m.sync()
    tree = devserver.tree(m.repo_id)
    assert tree.get("/e/x.md") == b"bystander\n" and tree.get("/e/y.md") == b"moving file\n"
    assert "/d/x.md" not in tree


def test_remote_move_onto_untracked_local_file(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/a.md": b"moved remotely\n"})
    devserver.rename_path(m.repo_id, "/a.md", "b.md")
    m.write("b.md", b"new local b\n")
    m.sync()
    m.sync()
    assert missing_versions(m, tmp_path, [b"moved remotely\n", b"new local b\n"]) == []


def test_racing_writer_from_stale_version(devserver, tmp_path):
    """A second device blindly overwrites after each of our uploads, always from the original."""
    orig = b"line 0\n"
    m = synced_small(devserver, tmp_path, {"/notes/r.txt": orig})
    m.write("notes/r.txt", orig + b"ours\n")
    n = {"i": 0}

    def writer(srv):
        n["i"] += 1
        srv.put_file(m.repo_id, "/notes/r.txt", orig + f"theirs {n['i']}\n".encode())

    devserver.after_request("POST", r"/(upload|update)-api/", writer, count=3)
    m.sync()
    m.sync()
    m.sync()
    lines = [b"ours"] + [f"theirs {i}".encode() for i in range(1, n["i"] + 1)]
    assert missing_lines(m, tmp_path, lines) == []


def test_write_between_merge_read_and_upload_is_not_clobbered(devserver, tmp_path):
    """Another device writes while we download 'theirs' for a merge (before our upload)."""
    orig = b"a\nb\nc\nd\ne\nf\n"
    m = synced_small(devserver, tmp_path, {"/notes/r.txt": orig})
    devserver.put_file(m.repo_id, "/notes/r.txt", orig.replace(b"f\n", b"f theirs1\n"))
    m.write("notes/r.txt", orig.replace(b"a\n", b"a ours\n"))

    def writer(srv):
        srv.put_file(m.repo_id, "/notes/r.txt", orig.replace(b"c\n", b"c theirs2\n"))

    devserver.after_request("GET", r"/files/", writer, count=1)  # the download of theirs1
    m.sync()
    m.sync()
    m.sync()
    assert missing_lines(m, tmp_path, [b"a ours", b"f theirs1", b"c theirs2"]) == []


def test_write_during_conflict_copy_upload_is_not_clobbered(devserver, tmp_path):
    orig = b"one\n"
    m = synced_small(devserver, tmp_path, {"/notes/r.txt": orig})
    devserver.put_file(m.repo_id, "/notes/r.txt", b"theirs1\n")
    m.write("notes/r.txt", b"ours\n")

    def writer(srv):
        srv.put_file(m.repo_id, "/notes/r.txt", b"theirs2\n")

    devserver.after_request("POST", r"/upload-api/", writer, count=1)  # the conflict-copy upload
    m.sync()
    m.sync()
    m.sync()
    assert missing_versions(m, tmp_path, [b"ours\n", b"theirs1\n", b"theirs2\n"]) == []
