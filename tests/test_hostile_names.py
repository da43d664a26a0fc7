"""Names equal under Unicode normalization are one name (NFD here, NFC on the server)."""

from __future__ import annotations

import os
import sys
import unicodedata

sys.path.insert(0, os.path.dirname(__file__))
from engine_helpers import USER, make_mirror

NFC = unicodedata.normalize("NFC", "notes/Café 日记.md")
NFD = unicodedata.normalize("NFD", "notes/Café 日记.md")
assert NFC != NFD


def _names(folder) -> list[str]:
    return sorted(os.listdir(folder))


def test_nfd_local_file_with_the_servers_content_is_not_downloaded_as_a_twin(devserver, tmp_path) -> None:
    repo = devserver.create_library(USER, "OH-Memory")
    devserver.put_file(repo, "/" + NFC, b"same bytes\n")
    m = make_mirror(devserver, repo, tmp_path)
    m.write(NFD, b"same bytes\n")  # e.g. copied from a Mac
    devserver.reset_counters()
    rep = m.sync()
    assert rep.errors == [] and rep.downloaded == [] and rep.uploaded == []
    assert _names(m.root / "notes") == [NFC.split("/")[1]]  # one file, named as the server names it
    assert m.read(NFC) == b"same bytes\n"
    assert [p for p in devserver.tree(repo)] == ["/" + NFC]
    assert m.sync().errors == []
    # it is the synced file from now on: an edit goes up to the server's name
    m.write(NFC, b"edited\n")
    m.sync()
    assert devserver.tree(repo) == {"/" + NFC: b"edited\n"}


def test_nfd_folder_and_a_watcher_path_are_one_name(devserver, tmp_path) -> None:
    repo = devserver.create_library(USER, "OH-Memory")
    folder_nfc = unicodedata.normalize("NFC", "Résumés")
    devserver.put_file(repo, f"/{folder_nfc}/cv.md", b"cv\n")
    m = make_mirror(devserver, repo, tmp_path)
    m.write(unicodedata.normalize("NFD", folder_nfc) + "/cv.md", b"cv\n")  # the folder, decomposed
    assert m.sync().errors == []
    assert _names(m.root) == [folder_nfc]
    assert set(devserver.tree(repo)) == {f"/{folder_nfc}/cv.md"}
    # a new decomposed file: the watcher reports the NFC rel path
    m.write(NFD, b"new from a mac\n")
    rep = m.sync([NFC])  # what the watcher hands over (rel paths are NFC)
    assert rep.errors == []
    assert _names(m.root / "notes") == [NFC.split("/")[1]]
    assert devserver.tree(repo)["/" + NFC] == b"new from a mac\n"
    assert _names(m.root) == sorted([folder_nfc, "notes"])
