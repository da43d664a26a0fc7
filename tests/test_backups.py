"""Local backups (``engine/backups.py``) never block the sync and never follow a link.

A name near the file system's 255-byte limit backed up twice in a day, a
backup folder deep enough to pass ``PATH_MAX``: both updates arrive and both
backups are kept, their names shortened.  A link swapped in for the file
being backed up is never read; a link planted in the backup folder is never
written through.  A backup that cannot be written says so, naming the backup
folder, and the file stays as it was.
"""

from __future__ import annotations

import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

import ohsync.engine.local_replace as local_replace
from engine_helpers import USER, make_mirror
from ohsync.engine.backups import backup_file
from ohsync.engine.ignore import TEMP_PREFIX
from ohsync.engine.nofollow import OutsideMirrorError

#: 84 three-byte characters and ``.md``: 255 bytes, the longest name the disk holds
LONG = "数" * 84 + ".md"
SECRET = b"secret line from outside the mirror\n"


def _mirror(devserver, tmp_path: Path, files: dict[str, bytes]):
    repo = devserver.create_library(USER, "OH-Memory")
    for rel, data in files.items():
        devserver.put_file(repo, "/" + rel, data)
    m = make_mirror(devserver, repo, tmp_path)
    assert m.sync().errors == []
    return m


def _backup_dir(m) -> Path:
    return m.engine.options.backup_dir


def _backups(root: Path) -> dict[str, bytes]:
    """Every regular file below ``root`` (links not followed), by path relative to it."""
    found = {}
    for folder, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                with open(path, "rb") as fh:
                    found[os.path.relpath(path, root)] = fh.read()
    return found


def _today() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%d")


def _temp_files(root: Path) -> list[str]:
    return [p.name for p in root.rglob(f"{TEMP_PREFIX}*")]


def test_a_long_named_file_updated_twice_in_a_day_gets_both_updates_and_both_backups(devserver, tmp_path) -> None:
    rel = f"notes/{LONG}"
    m = _mirror(devserver, tmp_path, {rel: b"version 1\n"})
    for version in (b"version 2\n", b"version 3\n"):
        devserver.put_file(m.repo_id, "/" + rel, version)
        report = m.sync()
        assert report.errors == [], report.errors
        assert m.read(rel) == version
    kept = _backups(_backup_dir(m))
    assert sorted(kept.values()) == [b"version 1\n", b"version 2\n"], kept
    for path in kept:
        name = os.path.basename(path)
        assert len(name.encode()) <= 255, name
        assert name.startswith("数" * 40) and name.endswith(".md"), name  # still recognisable
    assert m.sync().errors == [] and m.engine.failures() == []


def test_two_long_names_backed_up_the_same_second_keep_apart(tmp_path) -> None:
    root, backups = tmp_path / "m", tmp_path / "backups"
    root.mkdir()
    first, second = "数" * 84 + ".md", "数" * 83 + "字.md"  # the same start, both 255 bytes
    for name in (first, second):
        (root / name).write_bytes(name.encode())
    paths = [backup_file(root, name, backups, "OH-Memory") for name in (first, second, first, second)]
    assert len(set(paths)) == 4
    contents = sorted(p.read_bytes() for p in paths if p is not None)
    assert contents == sorted([first.encode(), first.encode(), second.encode(), second.encode()])
    shortened = [p.name for p in paths[2:] if p is not None]
    assert len(set(shortened)) == 2 and all(len(n.encode()) <= 255 for n in shortened)


def test_a_backup_deeper_than_path_max_still_lets_the_update_arrive(devserver, tmp_path) -> None:
    deep = "/".join(f"{i}" + "d" * 239 for i in range(8))
    rel = f"Files/{deep}/deep.md"
    m = _mirror(devserver, tmp_path, {rel: b"version 1\n"})
    backups = tmp_path.joinpath(*(f"{i}" + "b" * 239 for i in range(10)), "backups")
    m.engine.options.backup_dir = backups
    full = backups / _today() / "OH-Memory" / rel
    assert len(os.fsencode(str(full))) >= 4096  # what a backup at its usual place would need
    devserver.put_file(m.repo_id, "/" + rel, b"version 2\n")
    report = m.sync()
    assert report.errors == [], report.errors
    assert m.read(rel) == b"version 2\n"
    kept = _backups(backups)
    assert list(kept.values()) == [b"version 1\n"], kept
    (path,) = kept
    assert len(os.fsencode(str(backups / path))) < 4096
    assert path.endswith("/" + "/".join(deep.split("/")[-2:]) + "/deep.md"), path  # its last folders kept


def test_a_link_swapped_in_for_the_file_being_backed_up_is_never_read(devserver, tmp_path, monkeypatch) -> None:
    rel = "notes/a.md"
    m = _mirror(devserver, tmp_path, {rel: b"version 1\n"})
    secret = tmp_path / "outside.md"
    secret.write_bytes(SECRET)
    target = m.root / rel
    real = local_replace.backup_file
    swapped = []

    def swap_then_back_up(*args, **kwargs):
        if not swapped:  # after the caller's stat: the file becomes a link
            os.replace(target, tmp_path / "kept.md")
            os.symlink(secret, target)
            swapped.append(rel)
        return real(*args, **kwargs)

    monkeypatch.setattr(local_replace, "backup_file", swap_then_back_up)
    devserver.put_file(m.repo_id, "/" + rel, b"version 2\n")
    report = m.sync()
    assert swapped
    assert not any(SECRET in data for data in _backups(_backup_dir(m)).values())
    assert [p for p, _ in report.errors] == [rel] and "symbolic link" in report.errors[0][1], report.errors
    assert target.is_symlink() and secret.read_bytes() == SECRET  # the link was not replaced either
    assert _temp_files(m.root) == []


def test_a_link_or_a_fifo_is_refused_when_backed_up(tmp_path) -> None:
    root, backups = tmp_path / "m", tmp_path / "backups"
    root.mkdir()
    secret = tmp_path / "outside.md"
    secret.write_bytes(SECRET)
    os.symlink(secret, root / "link.md")
    os.mkfifo(root / "pipe.md")
    for name in ("link.md", "pipe.md"):
        with pytest.raises(OutsideMirrorError):
            backup_file(root, name, backups, "OH-Memory")
    assert _backups(backups) == {}


def test_links_planted_in_the_backup_folder_are_never_written_through(devserver, tmp_path) -> None:
    m = _mirror(devserver, tmp_path, {"notes/a.md": b"a 1\n", "papers/b.md": b"b 1\n"})
    outside = tmp_path / "outside"
    outside.mkdir()
    day = _backup_dir(m) / _today() / "OH-Memory"
    (day / "papers").mkdir(parents=True)
    os.symlink(outside, day / "notes")                  # a folder of the backup a link
    os.symlink(outside / "b.md", day / "papers" / "b.md")  # the backup's own name a dangling link
    devserver.put_file(m.repo_id, "/notes/a.md", b"a 2\n")
    devserver.put_file(m.repo_id, "/papers/b.md", b"b 2\n")
    report = m.sync()
    assert report.errors == [], report.errors
    assert m.read("notes/a.md") == b"a 2\n" and m.read("papers/b.md") == b"b 2\n"
    assert list(outside.iterdir()) == []
    kept = _backups(_backup_dir(m))
    assert sorted(kept.values()) == [b"a 1\n", b"b 1\n"], kept
    assert all(not os.path.islink(_backup_dir(m) / p) for p in kept)


def test_a_backup_that_cannot_be_written_says_so_and_the_file_stays(devserver, tmp_path) -> None:
    rel = "notes/a.md"
    m = _mirror(devserver, tmp_path, {rel: b"version 1\n"})
    blocked = tmp_path / "blocked"
    blocked.write_bytes(b"a file where the backup folder should be\n")
    m.engine.options.backup_dir = blocked
    devserver.put_file(m.repo_id, "/" + rel, b"version 2\n")
    report = m.sync()
    [(path, message)] = report.errors
    assert path == rel and f"its backup could not be written in {blocked}" in message, message
    assert "only after backing it up" in message and "rename it on the server" not in message, message
    assert m.read(rel) == b"version 1\n"  # not replaced without its backup
    assert _temp_files(m.root) == []
    blocked.unlink()  # the person clears the way
    assert m.engine.release_failures() == 1
    assert m.sync().errors == []
    assert m.read(rel) == b"version 2\n"
    assert list(_backups(blocked).values()) == [b"version 1\n"]
