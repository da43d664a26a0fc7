"""Breaker: a person renames a folder while the phone edits a file inside it.

Seen with two daemons and a Web API writer (the person moving `proj` around
while the others edit): the folder came back at its old name with the
edited files, next to the moved one whose copies lack the edits, and no
conflict notice said so.  Seafile's own client keeps one file, at the new
place, with the edit.
"""

from __future__ import annotations

import os

from breaker_helpers import synced_small


def test_folder_rename_and_remote_edit_inside_keep_one_file(devserver, tmp_path) -> None:
    m = synced_small(devserver, tmp_path, {"/proj/sub/m0.md": b"m0\n", "/proj/t0.txt": b"t0\n",
                                           "/proj/t1.txt": b"t1\n"})
    devserver.put_file(m.repo_id, "/proj/t0.txt", b"t0\nphone edit\n")
    os.rename(m.root / "proj", m.root / "proj2")
    for _ in range(3):
        m.sync()
    tree = {k: v for k, v in devserver.tree(m.repo_id).items() if not k.startswith(("/pad/", "/.trash/"))}
    copies = {k: v for k, v in tree.items() if k.endswith("/t0.txt") and not k.startswith("/.conflict/")}
    assert sorted(copies) == ["/proj2/t0.txt"], f"the file is in {sorted(copies)}"
    assert b"phone edit" in copies["/proj2/t0.txt"]
    assert not (m.root / "proj").exists(), "the folder the person renamed came back"


def test_folder_rename_with_edits_on_both_sides_merges_at_the_new_path(devserver, tmp_path) -> None:
    """The person edits a file in the folder and renames the folder while the
    phone edits the same file: one file, at the new path, holding both edits
    (three-way merge against the moved base); the other files just move."""
    m = synced_small(devserver, tmp_path, {"/proj/sub/m0.md": b"m0\n", "/proj/t0.txt": b"a\nb\nc\nd\ne\n",
                                           "/proj/t1.txt": b"t1\n"})
    devserver.put_file(m.repo_id, "/proj/t0.txt", b"a\nb\nc\nd\ne\nphone edit\n")
    (m.root / "proj" / "t0.txt").write_bytes(b"laptop edit\na\nb\nc\nd\ne\n")  # in place: same file
    os.rename(m.root / "proj", m.root / "proj2")
    for _ in range(3):
        m.sync()
    tree = {k: v for k, v in devserver.tree(m.repo_id).items() if not k.startswith(("/pad/", "/.trash/"))}
    live = {k for k in tree if not k.startswith("/.conflict/")}
    assert sorted(live) == ["/proj2/sub/m0.md", "/proj2/t0.txt", "/proj2/t1.txt"], sorted(live)
    assert tree["/proj2/t0.txt"] == b"laptop edit\na\nb\nc\nd\ne\nphone edit\n"
    assert (m.root / "proj2" / "t0.txt").read_bytes() == tree["/proj2/t0.txt"]
    assert tree["/proj2/t1.txt"] == b"t1\n"
    assert not (m.root / "proj").exists(), "the folder the person renamed came back"


def test_folder_rename_carries_a_file_the_server_added_inside_in_the_same_pass(devserver, tmp_path) -> None:
    """A file the phone added to the folder while it was renamed here comes
    down at the new path in that very pass; the old folder does not come back."""
    m = synced_small(devserver, tmp_path, {"/proj/t0.txt": b"t0\n", "/proj/t1.txt": b"t1\n"})
    devserver.put_file(m.repo_id, "/proj/added.txt", b"from the phone\n")
    os.rename(m.root / "proj", m.root / "proj2")
    rep = m.sync()
    assert rep.errors == []
    assert (m.root / "proj2" / "added.txt").read_bytes() == b"from the phone\n"
    tree = {k for k in devserver.tree(m.repo_id) if not k.startswith(("/pad/", "/.trash/"))}
    assert sorted(tree) == ["/proj2/added.txt", "/proj2/t0.txt", "/proj2/t1.txt"], sorted(tree)
    assert not (m.root / "proj").exists()
