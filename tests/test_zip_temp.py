"""A cold mirror's whole-library zip is received into a file without a name,
so a daemon killed while it downloads leaves nothing in the temp folder."""

from __future__ import annotations

import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from engine_helpers import USER, make_mirror


def test_the_zip_being_received_has_no_name_in_the_temp_folder(devserver, tmp_path, monkeypatch) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    repo = devserver.create_library(USER, "OH-Memory")
    for i in range(12):
        devserver.put_file(repo, f"/notes/n{i:02d}.md", f"note {i}\n".encode())
    m = make_mirror(devserver, repo, tmp_path)
    seen: list[list[str]] = []
    real = m.client.download_zip

    def download_zip(*args, **kwargs):
        result = real(*args, **kwargs)
        seen.append(sorted(os.listdir(temp)))  # what a kill at this instant would leave behind
        return result

    monkeypatch.setattr(m.client, "download_zip", download_zip)
    assert m.sync().errors == []
    assert seen, "the cold mirror did not take the zip path"
    assert seen == [[]] * len(seen)
    assert sorted(p.name for p in (m.root / "notes").iterdir()) == [f"n{i:02d}.md" for i in range(12)]
