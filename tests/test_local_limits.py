"""One remote path the local disk cannot hold fails alone: the rest of the pass, and of a
cold mirror's zip, is applied; the path is named; a retry fetches nothing that landed."""

from __future__ import annotations

import errno
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from engine_helpers import USER, make_mirror
from ohsync.engine import local_limits, renames

#: 17 nested folders of 250-byte names: about 4,300 bytes, beyond PATH_MAX (4,096) here
DEEP = "/".join(f"{i:02d}" + "d" * 248 for i in range(17))
ZIP_TASKS = r"zip-task"
FETCHES = r"zip|/files/|download|file/\?"
DOWNLOADS = "GET /seafhttp/files/{token}/{name}"


def _library(devserver, files: int) -> tuple[str, dict[str, bytes]]:
    repo = devserver.create_library(USER, "OH-Memory")
    devserver.put_file(repo, f"/Files/{DEEP}/far.md", b"far away\n")
    devserver.put_file(repo, f"/Files/{DEEP}/farther.md", b"farther\n")
    wanted = {f"Files/n{i:03d}.md": f"note {i}\n".encode() for i in range(files)}
    wanted |= {f"notes/k{i:02d}.md": f"kept {i}\n".encode() for i in range(10)}
    for rel, data in wanted.items():
        devserver.put_file(repo, "/" + rel, data)
    return repo, wanted


def _local_files(root) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _deep_top(root) -> str:
    """The shallowest folder of DEEP that this disk cannot hold."""
    parts = ["Files"] + DEEP.split("/")
    for i in range(2, len(parts) + 1):
        rel = "/".join(parts[:i])
        if len(os.fsencode(str(root / rel))) >= 4096:
            return rel
    raise AssertionError("DEEP fits on this disk")


def test_a_cold_mirror_applies_its_zip_around_a_path_too_long_for_this_disk(devserver, tmp_path) -> None:
    repo, wanted = _library(devserver, 60)
    m = make_mirror(devserver, repo, tmp_path)
    devserver.reset_counters()
    first = m.sync()  # no exception: the path fails alone
    assert devserver.request_count(ZIP_TASKS) >= 1, devserver.requests  # the cold mirror took the zip
    assert _local_files(m.root) == wanted  # every other file of the zip landed
    top = _deep_top(m.root)
    (failure,) = m.engine.failures()  # one failure for the folder, not one per file inside
    assert failure["path"] == top and failure["needs"] == "name" and failure["permanent"], failure
    assert "rename it on the server" in failure["reason"] and "2 files inside" in failure["reason"]
    assert [p for p, _ in first.errors] == [top]
    # the files that landed are synced: a retry fetches none of them, nor the zip
    devserver.reset_counters()
    for _ in range(2):
        assert m.sync().errors == []  # held: no error line, no attempt per pass
    assert devserver.request_count(FETCHES) == 0, devserver.requests
    # the person asks for a retry: the path is looked at again, on its own, without a request
    assert m.engine.release_failures() == 1
    again = m.sync()
    assert [p for p, _ in again.errors] == [top]
    assert devserver.request_count(FETCHES) == 0, devserver.requests
    assert _local_files(m.root) == wanted


def test_new_remote_files_arrive_around_a_path_too_long_for_this_disk(devserver, tmp_path) -> None:
    repo = devserver.create_library(USER, "OH-Memory")
    devserver.put_file(repo, "/notes/old.md", b"old\n")
    m = make_mirror(devserver, repo, tmp_path)
    assert m.sync().errors == []
    devserver.put_file(repo, f"/Files/{DEEP}/far.md", b"far away\n")
    new = {f"Files/new{i}.md": f"new {i}\n".encode() for i in range(6)}
    for rel, data in new.items():
        devserver.put_file(repo, "/" + rel, data)
    rep = m.sync()
    assert _local_files(m.root) == {"notes/old.md": b"old\n"} | new
    assert [p for p, _ in rep.errors] == [_deep_top(m.root)]
    # later remote files keep arriving too
    devserver.put_file(repo, "/notes/later.md", b"later\n")
    assert m.sync().errors == []
    assert m.read("notes/later.md") == b"later\n"


def test_a_name_longer_than_this_disk_allows_is_named_and_the_rest_lands(devserver, tmp_path, monkeypatch) -> None:
    # a disk whose names stop at 143 bytes (eCryptfs), a 200-byte name on the server (Seafile allows 255)
    monkeypatch.setattr(local_limits, "limits", lambda root: (143, 4096))
    repo = devserver.create_library(USER, "OH-Memory")
    long_name = "n" * 197 + ".md"
    devserver.put_file(repo, f"/notes/{long_name}", b"long\n")
    wanted = {f"notes/k{i:02d}.md": f"kept {i}\n".encode() for i in range(20)}
    for rel, data in wanted.items():
        devserver.put_file(repo, "/" + rel, data)
    m = make_mirror(devserver, repo, tmp_path)
    rep = m.sync()
    assert _local_files(m.root) == wanted
    assert [p for p, _ in rep.errors] == [f"notes/{long_name}"]
    assert "too long for this disk (200 bytes; it allows 143)" in rep.errors[0][1]
    devserver.reset_counters()
    assert m.sync().errors == []
    assert devserver.request_count(FETCHES) == 0, devserver.requests


@pytest.mark.parametrize("pool", [False, True])
def test_a_name_this_disk_refuses_fails_alone_in_a_cold_zip(devserver, tmp_path, monkeypatch, pool) -> None:
    # a disk that refuses ':' in names (FAT, NTFS): only writing finds out
    real_replace, real_mkdir, real_open = os.replace, os.mkdir, os.open

    def refusing(real):
        def call(path, *a, **kw):
            target = a[0] if real is real_replace else path
            if ":" in os.path.basename(os.fspath(target)):
                raise OSError(errno.EILSEQ, "Invalid or incomplete multibyte or wide character", target)
            return real(path, *a, **kw)
        return call

    repo = devserver.create_library(USER, "OH-Memory")
    refused = [f"notes/a:b{i}.md" for i in range(5)]
    for rel in refused:
        devserver.put_file(repo, "/" + rel, b"refused here " + rel.encode() + b"\n")
    wanted = {f"notes/k{i:02d}.md": f"kept {i}\n".encode() for i in range(30)}
    for rel, data in wanted.items():
        devserver.put_file(repo, "/" + rel, data)
    m = make_mirror(devserver, repo, tmp_path)
    executor = ThreadPoolExecutor(4) if pool else None
    m.engine.executor = m.engine.ctx.executor = executor
    monkeypatch.setattr(os, "replace", refusing(real_replace))
    monkeypatch.setattr(os, "mkdir", refusing(real_mkdir))
    monkeypatch.setattr(os, "open", refusing(real_open))
    real_flags = renames._rename_flags

    def refusing_rename(src, dst, *a):  # renameat2: the no-replace rename of a new file
        if ":" in os.path.basename(os.fspath(dst)):
            raise OSError(errno.EILSEQ, "Invalid or incomplete multibyte or wide character", dst)
        return real_flags(src, dst, *a)

    monkeypatch.setattr(renames, "_rename_flags", refusing_rename)
    devserver.reset_counters()
    try:
        rep = m.sync()
    finally:
        if executor is not None:
            executor.shutdown(wait=True)
    m.engine.executor = m.engine.ctx.executor = None
    assert _local_files(m.root) == wanted
    assert sorted(p for p, _ in rep.errors) == refused and all("cannot hold the name" in m for _, m in rep.errors)
    # every file came from the zip, the refused one too: none was fetched again one by one
    assert devserver.request_count(ZIP_TASKS) == 1 and devserver.request_count(DOWNLOADS) == 0, devserver.requests
    failures = m.engine.failures()
    assert [f["path"] for f in failures] == refused and all(f["needs"] == "name" and f["permanent"] for f in failures)
    devserver.reset_counters()
    assert m.sync().errors == []
    assert devserver.request_count(FETCHES) == 0, devserver.requests
    # the person asks for a retry: those files alone are fetched again, never the zip of what landed
    m.engine.release_failures()
    assert sorted(p for p, _ in m.sync().errors) == refused
    assert devserver.request_count(ZIP_TASKS) == 0 and devserver.request_count(DOWNLOADS) == 5, devserver.requests


def test_the_daemon_names_the_path_syncs_the_rest_and_never_fetches_the_zip_again(seed_daemon) -> None:
    from daemon_helpers import wait_for

    files = {f"Files/n{i:03d}.md": f"note {i}\n".encode() for i in range(40)}
    setup = seed_daemon(files=files, put={f"/Files/{DEEP}/far.md": b"far away\n"}, poll_interval=1.0)
    srv, mirror = setup.srv, setup.mirror
    srv.reset_counters()
    p = setup.start()
    st = wait_for(lambda: (s := p.status())["failures"] and s, timeout=60, what="the failure in status")
    top = _deep_top(mirror)
    assert [f["path"] for f in st["failures"]] == [top] and st["failures"][0]["needs"] == "name"
    wait_for(lambda: _local_files(mirror) == files, timeout=60, what="every other file")
    assert top.split("/")[-1][:12] in st["message"], st["message"]  # the status names the path, not the mirror
    polls = st["polls"]
    wait_for(lambda: p.status()["polls"] >= polls + 5, timeout=60, what="five more polls")
    assert p.cli("refresh").returncode == 0
    wait_for(lambda: p.status()["polls"] >= polls + 8, timeout=60, what="polls after the refresh")
    assert srv.request_count(ZIP_TASKS) <= 1 and srv.request_count(DOWNLOADS) <= 1, srv.requests
    assert [f["path"] for f in p.status()["failures"]] == [top]


def test_a_server_name_over_255_bytes_is_listed_and_the_rest_of_the_zip_lands(devserver, tmp_path) -> None:
    repo = devserver.create_library(USER, "OH-Memory")
    wanted = {f"notes/k{i:02d}.md": f"kept {i}\n".encode() for i in range(20)}
    for rel, data in wanted.items():
        devserver.put_file(repo, "/" + rel, data)
    devserver.plant_entry(repo, "/notes", "n" * 300 + ".md", b"a name no disk holds\n")
    m = make_mirror(devserver, repo, tmp_path)
    devserver.reset_counters()
    rep = m.sync()
    assert rep.errors == [] and _local_files(m.root) == wanted
    assert devserver.request_count(ZIP_TASKS) == 1 and devserver.request_count(DOWNLOADS) == 0, devserver.requests
    assert any("303 bytes long" in why for _, why in m.engine.skipped()), m.engine.skipped()


def test_a_name_refused_by_a_fat_or_ntfs_disk_needs_the_person() -> None:
    from ohsync.engine.errors import LocalNameError, classify, local_error

    err = local_error(OSError(errno.EINVAL, "Invalid argument"), "notes/a:b.md", what="writing the file")
    assert isinstance(err, LocalNameError) and err.message.startswith("notes/a:b.md: ")
    assert "rename it on the server" in err.message
    failure = classify(err)
    assert (failure.scope, failure.needs, failure.permanent) == ("path", "name", True)


def test_the_limits_are_this_disks(tmp_path) -> None:
    name_max, path_max = local_limits.limits(tmp_path)
    assert (name_max, path_max) == (os.pathconf(tmp_path, "PC_NAME_MAX"), os.pathconf(tmp_path, "PC_PATH_MAX"))
    assert local_limits.path_too_long(tmp_path, tmp_path / "a" / "b.md") is None
    assert "a name in it is too long" in local_limits.path_too_long(tmp_path, tmp_path / ("n" * (name_max + 1)))
    deep = tmp_path.joinpath(*["d" * 200] * (path_max // 200 + 1))
    assert "the path is too long for this disk" in local_limits.path_too_long(tmp_path, deep)


def test_renaming_the_folder_on_the_server_brings_its_files_and_clears_the_failure(devserver, tmp_path) -> None:
    repo, wanted = _library(devserver, 5)
    m = make_mirror(devserver, repo, tmp_path)
    m.sync()
    m.engine.sync([], check_remote=True)
    top = _deep_top(m.root)
    assert [f["path"] for f in m.engine.failures()] == [top]
    # what the failure asks the person to do: shorter names (the two outermost folders)
    first, second = DEEP.split("/")[:2]
    devserver.rename_path(repo, f"/Files/{first}", "a")
    devserver.rename_path(repo, f"/Files/a/{second}", "b")
    rep = m.engine.sync([], check_remote=True)  # a poll, not a full scan
    assert rep.errors == [] and m.engine.failures() == []
    moved = "Files/a/b/" + "/".join(DEEP.split("/")[2:])
    assert m.read(f"{moved}/far.md") == b"far away\n" and m.read(f"{moved}/farther.md") == b"farther\n"
