"""Breaker: merges, conflicts, state loss, trash and conflict folders."""

from __future__ import annotations

import shutil

from breaker_helpers import missing_lines, missing_versions, synced_small
from engine_helpers import make_mirror

MEM = b"""---
title: Alice
type: person
origin: laptop
---

# Alice

## Observations
- [fact] likes tea #drink

## Relations
- knows [[Bob]]
"""


def test_invalid_utf8_md_edited_on_both_sides(devserver, tmp_path):
    base = b"header\n\xff\xfe broken bytes\nline\n"
    m = synced_small(devserver, tmp_path, {"/notes/bin.md": base})
    ours, theirs = base + b"ours \xff\n", base + b"theirs \xfe\n"
    devserver.put_file(m.repo_id, "/notes/bin.md", theirs)
    m.write("notes/bin.md", ours)
    m.sync()
    m.sync()
    assert missing_versions(m, tmp_path, [ours, theirs]) == []


def test_malformed_frontmatter_memory_file_both_sides(devserver, tmp_path):
    base = b"---\ntitle: [unclosed\n---\n\n## Observations\n- [a] one\n"
    m = synced_small(devserver, tmp_path, {"/people/bad.md": base})
    ours = base + b"- [a] ours line\n"
    theirs = base.replace(b"one", b"one changed") + b"- [a] theirs line\n"
    devserver.put_file(m.repo_id, "/people/bad.md", theirs)
    m.write("people/bad.md", ours)
    rep = m.sync()
    m.sync()
    assert missing_lines(m, tmp_path, [b"ours line", b"theirs line", b"one changed"]) == []
    assert [p for p, _ in m.engine.damaged()] == ["people/bad.md"] or rep.conflicts


def test_memory_frontmatter_field_changed_both_sides(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/people/alice.md": MEM})
    ours = MEM.replace(b"title: Alice", b"title: Alice Ours")
    theirs = MEM.replace(b"title: Alice", b"title: Alice Theirs")
    devserver.put_file(m.repo_id, "/people/alice.md", theirs)
    m.write("people/alice.md", ours)
    m.sync()
    m.sync()
    assert missing_lines(m, tmp_path, [b"title: Alice Ours", b"title: Alice Theirs"]) == []


def test_state_db_lost_careful_resync(devserver, tmp_path):
    files = {"/people/alice.md": MEM, "/notes/a.txt": b"one\ntwo\nthree\n", "/bin.dat": b"\x00\x01base"}
    m = synced_small(devserver, tmp_path, files)
    # state lost; meanwhile both sides changed every file differently
    m.state.close()
    shutil.rmtree(tmp_path / "m-state")
    local = {
        "people/alice.md": MEM.replace(b"title: Alice", b"title: Alice L").replace(
            b"likes tea #drink\n", b"likes tea #drink\n- [fact] local obs\n"),
        "notes/a.txt": b"one\ntwo LOCAL\nthree\n",
        "bin.dat": b"\x00\x01local",
    }
    remote = {
        "people/alice.md": MEM.replace(b"title: Alice", b"title: Alice R").replace(
            b"likes tea #drink\n", b"likes tea #drink\n- [fact] remote obs\n"),
        "notes/a.txt": b"one\ntwo REMOTE\nthree\n",
        "bin.dat": b"\x00\x01remote",
    }
    for rel, data in local.items():
        m.write(rel, data)
    for rel, data in remote.items():
        devserver.put_file(m.repo_id, "/" + rel, data)
    m2 = make_mirror(devserver, m.repo_id, tmp_path)
    m2.sync()
    m2.sync()
    assert missing_versions(m2, tmp_path, [local["bin.dat"], remote["bin.dat"]]) == []
    assert missing_lines(m2, tmp_path, [b"two LOCAL", b"two REMOTE", b"title: Alice L", b"title: Alice R",
                                        b"local obs", b"remote obs"]) == []


def test_state_db_lost_file_deleted_locally_is_restored_not_deleted(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/a.txt": b"a\n"})
    m.state.close()
    shutil.rmtree(tmp_path / "m-state")
    (m.root / "a.txt").unlink()
    m2 = make_mirror(devserver, m.repo_id, tmp_path)
    m2.sync()
    assert devserver.read_file(m.repo_id, "/a.txt") == b"a\n"
    assert m2.read("a.txt") == b"a\n"


def test_conflict_copy_edited_on_both_sides(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/n.txt": b"x\n"})
    devserver.put_file(m.repo_id, "/n.txt", b"theirs\n")
    m.write("n.txt", b"ours\n")
    rep = m.sync()
    assert len(rep.conflicts) == 1
    copy = rep.conflicts[0].archived
    devserver.put_file(m.repo_id, "/" + copy, b"copy edited remotely\n")
    m.write(copy, b"copy edited locally\n")
    m.sync()
    m.sync()
    assert missing_versions(m, tmp_path, [b"ours\n", b"copy edited remotely\n", b"copy edited locally\n"]) == []
    # no suffix stacked on a suffix
    tree = devserver.tree(m.repo_id)
    assert not any(p.count("__remote__") > 1 for p in tree)


def test_local_trash_folder_deleted(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/a.txt": b"will be trashed\n"})
    (m.root / "a.txt").unlink()
    m.sync()
    assert devserver.tree(m.repo_id)["/.trash/a.txt"] == b"will be trashed\n"
    m.sync()
    assert not (m.root / ".trash").exists()  # the trash stays on the server
    # a .trash/ folder made here by hand (or left from older versions) and then removed changes nothing there
    (m.root / ".trash").mkdir()
    (m.root / ".trash" / "a.txt").write_bytes(b"a local copy\n")
    m.sync()
    shutil.rmtree(m.root / ".trash")
    m.sync()
    assert devserver.tree(m.repo_id)["/.trash/a.txt"] == b"will be trashed\n"
    assert missing_versions(m, tmp_path, [b"will be trashed\n"]) == []


def test_remote_conflict_folder_deleted_keeps_local_backup(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/n.txt": b"x\n"})
    devserver.put_file(m.repo_id, "/n.txt", b"theirs\n")
    m.write("n.txt", b"ours\n")
    m.sync()
    m.sync()
    devserver.delete_path(m.repo_id, "/.conflict")
    m.sync()
    m.sync()
    assert missing_versions(m, tmp_path, [b"theirs\n", b"ours\n"]) == []


def test_trash_name_taken_twice_same_second(devserver, tmp_path):
    """Delete the same path repeatedly: every deleted version must stay in /.trash/."""
    m = synced_small(devserver, tmp_path, {"/a.txt": b"v0\n"})
    versions = [b"v0\n"]
    for i in range(1, 4):
        (m.root / "a.txt").unlink()
        m.sync()
        data = f"v{i}\n".encode()
        m.write("a.txt", data)
        m.sync()
        versions.append(data)
    (m.root / "a.txt").unlink()
    m.sync()
    m.sync()
    assert missing_versions(m, tmp_path, versions) == []


def test_trash_rename_collides_with_existing_sibling(devserver, tmp_path):
    """The trash rename happens in the source folder: a sibling with that very name must survive."""
    from datetime import datetime, timedelta, timezone
    now = datetime.now(timezone.utc)
    sibs = {f"/n/a__{(now + timedelta(seconds=s)).strftime('%Y%m%dT%H%M%SZ')}.txt": f"sib{s}\n".encode()
            for s in range(0, 8)}
    m = synced_small(devserver, tmp_path, {"/n/a.txt": b"a\n", "/.trash/n/a.txt": b"older trash\n", **sibs})
    (m.root / "n" / "a.txt").unlink()
    m.sync()
    m.sync()
    assert missing_versions(m, tmp_path, [b"a\n", b"older trash\n", *sibs.values()]) == []
    tree = devserver.tree(m.repo_id)
    for p, data in sibs.items():
        assert tree.get(p) == data, f"{p} was renamed/moved by a trash operation"


def test_empty_file_vs_deleted(devserver, tmp_path):
    m = synced_small(devserver, tmp_path, {"/a.txt": b"a content\n", "/b.txt": b"b content\n",
                                           "/e1.txt": b"", "/e2.txt": b""})
    devserver.put_file(m.repo_id, "/a.txt", b"")       # emptied remotely
    (m.root / "b.txt").write_bytes(b"")                # emptied locally
    devserver.delete_path(m.repo_id, "/b.txt")         # and deleted remotely
    (m.root / "a.txt").unlink()                        # deleted locally
    devserver.delete_path(m.repo_id, "/e1.txt")        # empty file deleted remotely …
    devserver.put_file(m.repo_id, "/e3.txt", b"")      # … and another empty one appears
    m.sync()
    m.sync()
    tree = devserver.tree(m.repo_id)
    assert tree.get("/a.txt") == b"" and m.read("a.txt") == b""
    assert tree.get("/b.txt") == b"" and m.read("b.txt") == b""
    assert not (m.root / "e1.txt").exists() and m.read("e3.txt") == b"" and m.read("e2.txt") == b""
