"""An ignored junk file never keeps a folder deleted on the server alive."""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from engine_helpers import USER, make_mirror


def test_ds_store_does_not_recreate_a_folder_deleted_on_the_server(devserver, tmp_path) -> None:
    repo = devserver.create_library(USER, "OH-Memory")
    devserver.put_file(repo, "/keep/k.md", b"keep\n")
    devserver.put_file(repo, "/Trip/day1.md", b"day one\n")
    devserver.put_file(repo, "/Trip/photos/p.txt", b"photo notes\n")
    m = make_mirror(devserver, repo, tmp_path)
    assert m.sync().errors == []
    (m.root / "Trip" / ".DS_Store").write_bytes(b"\0junk")
    (m.root / "Trip" / "photos" / ".DS_Store").write_bytes(b"\0junk")
    assert m.sync().errors == []
    devserver.delete_path(repo, "/Trip")
    m.engine.valve.max_files = m.engine.valve.max_percent = 100
    for _ in range(4):  # pass after pass, full scans and polls
        rep = m.sync()
        assert rep.errors == [], rep.errors
        assert not any(p.startswith("/Trip") for p in devserver.tree(repo)), devserver.tree(repo)
        assert not any(d.strip("/").startswith("Trip") for d in devserver.dirs(repo)), devserver.dirs(repo)
    # the synced content was backed up and removed here; the junk stays local only
    assert not (m.root / "Trip" / "day1.md").exists()
    assert not (m.root / "Trip" / "photos" / "p.txt").exists()
    backups = [p.name for p in (tmp_path / "m-state" / "backups").rglob("*") if p.is_file()]
    assert "day1.md" in backups and "p.txt" in backups
    assert (m.root / "Trip" / ".DS_Store").exists()
    assert devserver.tree(repo) == {"/keep/k.md": b"keep\n"}
    # a real new file in that folder is a new folder again
    m.write("Trip/day2.md", b"day two\n")
    m.sync()
    assert devserver.tree(repo)["/Trip/day2.md"] == b"day two\n"
    assert not any("photos" in d for d in devserver.dirs(repo))  # holds only junk: stays local
    assert "/Trip/.DS_Store" not in devserver.tree(repo)
