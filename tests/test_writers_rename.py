"""seahub 12's rename answer (``Location`` without the slash before the new
name) and large-file conflicts archived in ``/.conflict/<dir>/`` like all
others, listed by ``ohsync conflicts``."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from ohsync.engine.client import SeafileClient

sys.path.insert(0, str(Path(__file__).parent))
from engine_helpers import USER, make_mirror  # noqa: E402


@pytest.fixture
def rid(devserver):
    return devserver.create_library(USER, "OH-Memory")


@pytest.mark.parametrize("version", [12, 13])
def test_rename_takes_the_final_name_and_joins_it_to_the_parent(devserver, rid, version):
    devserver.seahub_version = version
    devserver.put_file(rid, "/sub/deeper/a.txt", b"a\n")
    devserver.put_file(rid, "/sub/deeper/taken.txt", b"t\n")
    devserver.put_file(rid, "/top.txt", b"x\n")
    client = SeafileClient(devserver.url, devserver.token_for(USER), retries=0)
    assert client.rename(rid, "/sub/deeper/a.txt", "b.txt") == "/sub/deeper/b.txt"
    assert client.rename(rid, "/sub/deeper/b.txt", "taken.txt") == "/sub/deeper/taken (1).txt"
    assert client.rename(rid, "/top.txt", "top2.txt") == "/top2.txt"
    assert devserver.read_file(rid, "/sub/deeper/taken (1).txt") == b"a\n"


def test_large_file_edited_on_both_sides_is_archived_in_conflict_folder(devserver, rid, tmp_path, monkeypatch):
    import ohsync.engine.sync.run as sync_mod

    monkeypatch.setattr(sync_mod, "LARGE_FILE", 64 * 1024)
    devserver.seahub_version = 12
    base = os.urandom(100 * 1024)
    devserver.put_file(rid, "/Files/bin/blob.bin", base)
    mirror = make_mirror(devserver, rid, tmp_path)
    mirror.sync()
    theirs, ours = os.urandom(100 * 1024), os.urandom(100 * 1024)
    devserver.put_file(rid, "/Files/bin/blob.bin", theirs)
    mirror.write("Files/bin/blob.bin", ours)
    report = mirror.sync()
    assert report.errors == []
    tree = devserver.tree(rid)
    assert tree["/Files/bin/blob.bin"] == ours
    assert [p for p in tree if p.startswith("/Files/bin/") and p != "/Files/bin/blob.bin"] == []
    archived = [p for p in tree if p.startswith("/.conflict/Files/bin/blob__remote__")]
    assert len(archived) == 1 and tree[archived[0]] == theirs
    assert (mirror.root / archived[0].lstrip("/")).read_bytes() == theirs
    assert [(c.path, "/" + c.archived) for c in mirror.engine.conflicts()] == [("Files/bin/blob.bin", archived[0])]
    assert mirror.sync().errors == []  # settled: the next pass has nothing to fix
    assert devserver.tree(rid) == tree
