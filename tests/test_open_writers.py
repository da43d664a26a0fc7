"""A file a program is still saving in place is never replaced nor removed.

An editor or a shell redirect that rewrites a note in place (truncate,
write, … write, close) keeps its descriptor on the file's inode.  When
ohsync replaced the file in the middle (a pull, or a merge written back),
the rest of the save went into the inode taken away and reached no one: not
live, not in ``/.conflict/``, not in the backups, not on the server.  Now the
engine asks ``EngineOptions.being_written`` (the daemon's
:class:`~ohsync.daemon.open_files.WriterCheck`) just before it replaces or
removes a local file, leaves such a file alone (listed as skipped, not as an
error) and plans it again on the pass after the program closed it.
"""
from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

import pytest

from breaker_helpers import synced_small
from engine_helpers import make_mirror, mirrored, read_tree
from ohsync.daemon.open_files import WriterCheck, open_for_writing

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="open files are seen in /proc")

BASE = b"# note\none\ntwo\nthree\n"


def _watching(m) -> WriterCheck:
    """The daemon's check, given to the mirror's engine as the daemon gives it."""
    check = WriterCheck()
    m.engine.options.being_written = check
    assert m.engine.ctx.options is m.engine.options
    return check


def _settle(m, passes: int = 4) -> None:
    for _ in range(passes):
        m.sync()
    assert read_tree(m.root) == mirrored(m.server.tree(m.repo_id)), "the two sides differ"


def _unkept(m, rel: str, lines: list[bytes]) -> list[bytes]:
    """Lines neither live in ``rel`` nor in a conflict copy (the mirror, once both sides agree)."""
    tree = read_tree(m.root)
    kept = tree.get("/" + rel, b"") + b"".join(v for k, v in tree.items() if k.startswith("/.conflict/"))
    return [line for line in lines if line not in kept]


@linux_only
def _me() -> str:
    """This process as WriterCheck names a writer."""
    return f"{Path(f'/proc/{os.getpid()}/comm').read_text().strip()} (process {os.getpid()})"


def test_a_remote_edit_waits_while_a_program_writes_the_file_in_place(devserver, tmp_path) -> None:
    m = synced_small(devserver, tmp_path, {"/notes/a.md": BASE})
    _watching(m)
    path = m.root / "notes" / "a.md"
    whole = BASE + b"PERSON-LINE-1 typed in the editor\nPERSON-LINE-2 typed in the editor\n"
    with open(path, "wb") as fh:                     # an in-place save: truncate, write half, … the rest
        fh.write(whole[:len(BASE) + 20])
        fh.flush()
        devserver.put_file(m.repo_id, "/notes/a.md", b"REMOTE-LINE from the phone\n" + BASE)
        report = m.sync()
        assert os.fstat(fh.fileno()).st_ino == os.stat(path).st_ino, "the file was replaced under the writer"
        assert path.read_bytes() == whole[:len(BASE) + 20]
        assert [p for p, _ in report.skipped] == ["notes/a.md"] and not report.errors, report
        # the program is named as a task manager shows it (here: this test's own process)
        assert f"is open for writing in {_me()}" in report.skipped[0][1]
        assert m.engine.skipped() == report.skipped          # what `ohsync status` lists, with the reason
        fh.write(whole[len(BASE) + 20:])
    assert path.read_bytes() == whole
    _settle(m)
    assert _unkept(m, "notes/a.md", [b"PERSON-LINE-1", b"PERSON-LINE-2", b"REMOTE-LINE"]) == [], read_tree(m.root)
    assert m.engine.skipped() == []


@linux_only
def test_a_remote_delete_waits_while_a_program_writes_the_file(devserver, tmp_path) -> None:
    m = synced_small(devserver, tmp_path, {"/notes/a.md": BASE})
    _watching(m)
    path = m.root / "notes" / "a.md"
    with open(path, "ab") as fh:                     # `cat >> note`: open, nothing written yet
        devserver.delete_path(m.repo_id, "/notes/a.md")
        report = m.sync()
        assert path.exists() and [p for p, _ in report.skipped] == ["notes/a.md"], report
        fh.write(b"PERSON-LINE appended\n")
    _settle(m)
    assert m.read("notes/a.md") == BASE + b"PERSON-LINE appended\n"   # modification beats deletion


@linux_only
def test_a_burst_of_pulls_walks_proc_once_and_a_cold_mirror_not_at_all(devserver, tmp_path) -> None:
    files = {f"/docs/f{i:02d}.txt": f"file {i}\n".encode() for i in range(30)}
    m = synced_small(devserver, tmp_path, files)
    check = _watching(m)
    hour_ago = time.time() - 3600
    for rel in files:
        os.utime(m.root / rel.lstrip("/"), (hour_ago, hour_ago))   # saved long ago: no save in progress
    for rel in files:
        devserver.put_file(m.repo_id, rel, b"edited remotely\n")
    report = m.sync()
    assert sorted(report.downloaded) == sorted(r.lstrip("/") for r in files) and not report.skipped
    assert check.walks == 1
    cold = make_mirror(devserver, m.repo_id, tmp_path, "cold")
    cold_check = _watching(cold)
    assert not cold.sync().errors and cold.read("docs/f00.txt") == b"edited remotely\n"
    assert cold_check.walks == 0                    # new files replace nothing: nothing to ask


@linux_only
def test_the_check_sees_a_writer_of_this_process_and_not_a_reader(tmp_path) -> None:
    path = tmp_path / "a.md"
    path.write_bytes(b"x\n")
    check = WriterCheck()
    assert check(path) is False and open_for_writing(path) is False
    with open(path, "rb"):
        assert check(path) is False
    with open(path, "ab"):
        assert check(path) == _me() and open_for_writing(path) is True
    assert check(path) is False                      # closed: the next look walks again
    assert check(tmp_path / "gone.md") is False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="open files are seen in /proc")
def test_the_walk_stats_no_open_file_but_those_of_the_files_name(tmp_path, monkeypatch) -> None:
    """A descriptor on a stalled network mount would hang a stat: the walk reads names only."""
    import ohsync.daemon.open_files as open_files

    path, other = tmp_path / "a.md", tmp_path / "unrelated.log"
    path.write_bytes(b"x\n")
    real_stat, touched = os.stat, []

    def watching_stat(p, *args, **kwargs):
        if re.fullmatch(r"/proc/\d+/fd/\d+", str(p)):
            touched.append(os.readlink(p))
        return real_stat(p, *args, **kwargs)

    monkeypatch.setattr(open_files.os, "stat", watching_stat)
    with open(other, "ab"), open(path, "ab"):
        assert WriterCheck()(path) == _me()
    assert touched and {t.rsplit("/", 1)[-1] for t in touched} == {"a.md"}


def test_where_open_files_cannot_be_seen_a_save_of_a_moment_ago_counts(tmp_path) -> None:
    path = tmp_path / "a.md"
    path.write_bytes(b"x\n")
    mtime = os.stat(path).st_mtime
    now = [mtime + 0.5]
    check = WriterCheck(recent=2.0, clock=lambda: now[0], can_see=lambda: False)
    assert check(path) is True
    now[0] = mtime + 5
    assert check(path) is False
    assert check.walks == 0


def test_the_daemon_gives_its_engine_the_check(isolated_env, devserver, tmp_path) -> None:
    from daemon_helpers import write_config
    from engine_helpers import USER
    from ohsync.daemon.config import load_config
    from ohsync.daemon.session import open_session

    devserver.create_library(USER, "OH-Memory")
    write_config(isolated_env, devserver.url, USER, tmp_path / "mirror")
    cfg = load_config(isolated_env.config)
    session = open_session(cfg, lambda e: None, mirror=cfg.mirrors[0], token=devserver.token_for(USER))
    try:
        assert isinstance(session.engine.ctx.options.being_written, WriterCheck)
    finally:
        session.close()



@linux_only
def test_the_check_never_follows_a_symbolic_link(tmp_path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"x\n")
    link = tmp_path / "link.md"
    link.symlink_to(outside)
    with open(outside, "ab"):
        assert WriterCheck()(link) is False        # the link itself is open nowhere; its target is not looked at


@linux_only
def test_a_file_held_open_is_not_downloaded_again_each_pass(devserver, tmp_path, monkeypatch) -> None:
    m = synced_small(devserver, tmp_path, {"/notes/a.md": BASE})
    _watching(m)
    path = m.root / "notes" / "a.md"
    downloads: list[str] = []
    real = m.client.download_resumable

    def counted(repo_id, remote_path, *args, **kwargs):
        downloads.append(remote_path)
        return real(repo_id, remote_path, *args, **kwargs)

    monkeypatch.setattr(m.client, "download_resumable", counted)
    with open(path, "ab"):                           # held open, nothing written yet
        devserver.put_file(m.repo_id, "/notes/a.md", BASE + b"REMOTE-LINE\n")
        for _ in range(3):
            assert [p for p, _ in m.sync().skipped] == ["notes/a.md"]
        assert downloads == [] and path.read_bytes() == BASE
    m.sync(["notes/a.md"])                           # the pass the close brings
    assert downloads == ["/notes/a.md"] and m.read("notes/a.md") == BASE + b"REMOTE-LINE\n"
