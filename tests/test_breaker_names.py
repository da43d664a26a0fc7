"""Breaker: type changes, case/Unicode twins, illegal names, symlinks."""

from __future__ import annotations

import contextlib
import os
import shutil
import unicodedata

from breaker_helpers import missing_versions, synced_small


def test_local_file_replaced_by_folder(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/a.md": b"file version\n"})
    (m.root / "a.md").unlink()
    (m.root / "a.md").mkdir()
    (m.root / "a.md" / "inner.txt").write_bytes(b"inner\n")
    m.sync()  # must not raise
    m.sync()
    assert missing_versions(m, tmp_path, [b"file version\n", b"inner\n"]) == []


def test_remote_file_replaced_by_folder(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/a.md": b"file version\n"})
    devserver.delete_path(m.repo_id, "/a.md")
    devserver.put_file(m.repo_id, "/a.md/inner.txt", b"inner\n")
    m.sync()
    m.sync()
    assert missing_versions(m, tmp_path, [b"file version\n", b"inner\n"]) == []


def test_local_folder_replaced_by_file(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/d/x.txt": b"x in folder\n"})
    shutil.rmtree(m.root / "d")
    (m.root / "d").write_bytes(b"now a file\n")
    m.sync()
    m.sync()
    assert missing_versions(m, tmp_path, [b"x in folder\n", b"now a file\n"]) == []


def test_remote_folder_replaced_by_file_with_local_edit(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/d/x.txt": b"x in folder\n"})
    devserver.delete_path(m.repo_id, "/d")
    devserver.put_file(m.repo_id, "/d", b"remote file d\n")
    m.write("d/x.txt", b"x edited locally\n")
    m.sync()
    m.sync()
    assert missing_versions(m, tmp_path, [b"remote file d\n", b"x edited locally\n"]) == []


def test_case_only_rename_local(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/Note.md": b"note body\n"})
    os.rename(m.root / "Note.md", m.root / "note.md")
    rep = m.sync()
    assert rep.errors == []
    tree = devserver.tree(m.repo_id)
    assert tree.get("/note.md") == b"note body\n"
    assert "/Note.md" not in tree


def test_case_only_rename_remote_with_local_edit(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/Note.md": b"note body\n"})
    devserver.rename_path(m.repo_id, "/Note.md", "note.md")
    m.write("Note.md", b"note body edited locally\n")
    m.sync()
    m.sync()
    assert missing_versions(m, tmp_path, [b"note body\n", b"note body edited locally\n"]) == []


NFC = unicodedata.normalize("NFC", "café.md")
NFD = unicodedata.normalize("NFD", "café.md")


def test_nfc_nfd_twins_locally(devserver, tmp_path):
    """Two local files whose names differ only in Unicode normalisation
    (possible on Linux; the server stores NFC, so only one can exist there)."""
    m = synced_small(devserver, tmp_path, {})
    (m.root / NFC).write_bytes(b"nfc version\n")
    (m.root / NFD).write_bytes(b"nfd version\n")
    rep = m.sync()
    rep2 = m.sync()
    devserver.put_file(m.repo_id, "/" + NFC, b"remote edit\n")
    rep3 = m.sync()
    assert missing_versions(m, tmp_path, [b"nfc version\n", b"nfd version\n", b"remote edit\n"]) == []
    reported = {p for r in (rep, rep2, rep3) for p, _ in r.errors + r.skipped} | {p for p, _ in m.engine.skipped()}
    assert reported & {NFC, NFD}, "one twin silently not synced"


def test_nfd_name_only_local_reaches_server_or_is_reported(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {})
    (m.root / NFD).write_bytes(b"nfd local\n")
    rep = m.sync()
    tree = devserver.tree(m.repo_id)
    uploaded = b"nfd local\n" in tree.values()
    reported = any(p in (NFC, NFD) for p, _ in rep.errors + rep.skipped) or \
        any(p in (NFC, NFD) for p, _ in m.engine.skipped())
    assert uploaded or reported, (rep.errors, rep.skipped)


def test_nfd_name_only_on_server_reaches_mirror_or_is_reported(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {})
    devserver.put_file(m.repo_id, "/" + NFD, b"nfd remote\n")
    rep = m.sync()
    local = [p.read_bytes() for p in m.root.iterdir() if p.is_file()]
    reported = any(p in (NFC, NFD) for p, _ in rep.errors + rep.skipped + m.engine.skipped())
    assert b"nfd remote\n" in local or reported
    # and the next pass must not delete it on the server
    m.sync()
    assert b"nfd remote\n" in devserver.tree(m.repo_id).values()


def test_remote_backslash_and_long_names_are_skipped_and_reported(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {})
    long = "x" * 250 + "é" * 5 + ".md"  # > 255 bytes
    devserver.put_file(m.repo_id, "/back\\slash.txt", b"bs\n")
    devserver.put_file(m.repo_id, "/" + long, b"long\n")  # devserver stores what another client wrote, as is
    rep = m.sync()
    assert rep.errors == []
    skipped = {p.lstrip("/") for p, _ in m.engine.skipped()}
    assert "back\\slash.txt" in skipped
    assert long in skipped
    m.sync()
    tree = devserver.tree(m.repo_id)
    assert tree["/back\\slash.txt"] == b"bs\n"


def test_symlinked_folder_pointing_outside_is_not_written_through(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/d/x.txt": b"x\n"})
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_bytes(b"outside precious\n")
    shutil.rmtree(m.root / "d")
    os.symlink(outside, m.root / "d")
    devserver.put_file(m.repo_id, "/d/new.txt", b"new remote file\n")
    m.sync()
    m.sync()
    assert sorted(p.name for p in outside.iterdir()) == ["precious.txt"], \
        "the engine wrote through a symlink to a folder outside the mirror"
    assert (outside / "precious.txt").read_bytes() == b"outside precious\n"
    assert missing_versions(m, tmp_path, [b"x\n", b"new remote file\n"]) == []


def test_symlinked_folder_outside_dirty_path_delete(devserver, tmp_path):
    """A watcher event for d/x.txt while d is a symlink to an outside folder that
    holds an x.txt with base content: a remote delete must not delete outside."""
    m = synced_small(devserver, tmp_path, {"/d/x.txt": b"x\n"})
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.move(str(m.root / "d" / "x.txt"), outside / "x.txt")
    shutil.rmtree(m.root / "d")
    os.symlink(outside, m.root / "d")
    devserver.delete_path(m.repo_id, "/d/x.txt")
    m.sync(["d/x.txt"])
    assert (outside / "x.txt").exists(), "deleted a file outside the mirror through a symlink"


def test_symlink_file_inside_mirror_is_skipped(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/a.md": b"a\n"})
    os.symlink(m.root / "a.md", m.root / "link.md")
    os.symlink("/etc/hostname", m.root / "out.md")
    rep = m.sync()
    assert rep.errors == []
    tree = devserver.tree(m.repo_id)
    assert "/link.md" not in tree and "/out.md" not in tree
    assert {"link.md", "out.md"} <= {p for p, _ in m.engine.skipped()}


def test_bad_ohsyncignore_from_the_server_is_a_clear_error(devserver, tmp_path):
    """.ohsyncignore syncs like any file: another device can put an invalid pattern there."""
    from ohsync.engine.errors import OhsyncError
    m = synced_small(devserver, tmp_path, {"/a.md": b"a\n"})
    devserver.put_file(m.repo_id, "/.ohsyncignore", b"!\n")
    m.sync()
    m.write("a.md", b"a edited\n")
    with contextlib.suppress(OhsyncError):  # a typed error with a message is fine
        m.sync()
    # any other exception type (a traceback in the daemon) fails the test
