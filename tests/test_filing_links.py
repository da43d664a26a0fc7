"""Filing never reads or writes through a symbolic link (or a FIFO).

Inside the mirror: a link as the destination folder, as ``journal/`` or as
the month's journal file, or a FIFO there, stops the job with a message
naming it; nothing outside is written or uploaded, the dropped file stays
in the drop folder and the job waits for the person (``needs``), it is not
retried in a loop.  In the drop folder: the dropped file is hashed,
summarised and uploaded through descriptors opened without following links,
so a link swapped in for it between two of those is never read.
"""

from __future__ import annotations

import os
import shutil
import threading
from datetime import datetime
from pathlib import Path

import pytest

import ohsync.engine.filing.plan as plan_module
import ohsync.engine.filing.steps as steps_module
from ohsync.engine.filing.filer import Filer
from ohsync.engine.ids import sha1_bytes
from test_filing import CST, PDF, UPLOADS, Crash, env  # noqa: F401  (env: the fixture)

DECEMBER = datetime(2026, 12, 1, 8, 5, tzinfo=CST)
SECRET = b"secret line from outside the mirror\n"


def outside_dir(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir(exist_ok=True)
    return out


def assert_waits_for_the_person(result, source: Path, data: bytes) -> None:
    assert result.status == "failed", result.message
    assert result.needs is not None and not result.retryable, result
    assert source.read_bytes() == data  # still in the drop folder


def _stop_before(monkeypatch, env, step: str, source) -> None:
    """File ``source`` until the filer's ``step``, where it is killed (``Crash``); the patch is undone."""
    def crash(self, job):
        raise Crash(f"before {step}")

    monkeypatch.setattr(Filer, step, crash)
    with pytest.raises(Crash):
        env.filer().file(source)
    monkeypatch.undo()


def test_a_linked_destination_folder_is_refused_before_anything_is_uploaded(env, tmp_path):
    out = outside_dir(tmp_path) / "dl"
    out.mkdir()
    folder = env.mirror.root / "Files" / "downloads" / "2026-11"
    if folder.exists():
        shutil.rmtree(folder)
    os.symlink(out, folder)
    data = PDF.read_bytes()
    source = env.drop_file("report.pdf", data)
    result = env.filer().file(source)
    assert_waits_for_the_person(result, source, data)
    assert "Files/downloads/2026-11" in result.message and "symbolic link" in result.message
    assert list(out.iterdir()) == []
    assert env.copies(data) == []


def test_a_destination_folder_turned_into_a_link_after_the_upload_is_never_written_through(env, tmp_path,
                                                                                            monkeypatch):
    folder = env.mirror.root / "Files" / "downloads" / "2026-11"
    data = PDF.read_bytes()
    source = env.drop_file("report.pdf", data)

    _stop_before(monkeypatch, env, "_do_sidecar", source)  # uploaded, then killed
    out = outside_dir(tmp_path) / "dl"
    out.mkdir()
    if folder.exists():
        shutil.rmtree(folder)
    os.symlink(out, folder)

    [result] = env.filer().resume()
    assert_waits_for_the_person(result, source, data)
    assert "Files/downloads/2026-11" in result.message and "symbolic link" in result.message
    assert list(out.iterdir()) == []
    assert "/Files/downloads/2026-11/report.pdf.md" not in env.server.tree(env.repo_id)

    folder.unlink()  # the person puts a real folder back: the job goes on
    [result] = env.filer().resume()
    assert result.status == "filed", result.message
    assert (folder / "report.pdf").read_bytes() == data and not source.exists()


def test_a_linked_journal_folder_is_neither_written_nor_uploaded(env, tmp_path):
    journal = env.mirror.root / "journal"
    out = outside_dir(tmp_path) / "journal"
    shutil.move(journal, out)
    (out / "2026-12.md").write_bytes(SECRET)
    os.symlink(out, journal)
    source = env.drop_file("note2.txt", b"a note\n")
    result = env.filer(now=DECEMBER).file(source)
    assert_waits_for_the_person(result, source, b"a note\n")
    assert "journal" in result.message and "symbolic link" in result.message
    assert (out / "2026-12.md").read_bytes() == SECRET
    assert not any(SECRET in content for content in env.server.tree(env.repo_id).values())


def test_a_linked_journal_file_is_named_as_a_link_not_as_being_edited(env, tmp_path):
    secret = outside_dir(tmp_path) / "diary.md"
    secret.write_bytes(SECRET)
    os.symlink(secret, env.mirror.root / "journal" / "2026-12.md")
    source = env.drop_file("note2.txt", b"a note\n")
    result = env.filer(now=DECEMBER).file(source)
    assert_waits_for_the_person(result, source, b"a note\n")
    assert "journal/2026-12.md is a symbolic link" in result.message
    assert "being edited" not in result.message
    assert secret.read_bytes() == SECRET
    assert not any(SECRET in content for content in env.server.tree(env.repo_id).values())


def test_a_fifo_as_the_journal_file_is_refused_without_hanging(env):
    fifo = env.mirror.root / "journal" / "2026-12.md"
    os.mkfifo(fifo)
    source = env.drop_file("note2.txt", b"a note\n")
    box: list = []
    worker = threading.Thread(target=lambda: box.append(env.filer(now=DECEMBER).file(source)), daemon=True)
    worker.start()
    worker.join(20)
    if not box:  # unblock the hung open so the test run ends
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        worker.join(5)
        pytest.fail("filing hung on the FIFO")
    [result] = box
    assert_waits_for_the_person(result, source, b"a note\n")
    assert "journal/2026-12.md: named pipe (FIFO), not a regular file" in result.message


def test_a_link_swapped_in_for_the_dropped_file_while_it_is_planned_is_never_read(env, tmp_path, monkeypatch):
    secret = outside_dir(tmp_path) / "k"
    secret.write_bytes(SECRET)
    source = env.drop_file("invoice.txt", b"Innocent invoice text\n")
    aside = env.drop / ".aside"
    real_hashes, real_summarize = plan_module.file_hashes, plan_module.summarize

    def hashes_then_swap(fh):
        out = real_hashes(fh)
        os.rename(source, aside)  # the file is hashed: a link takes its place
        os.symlink(secret, source)
        return out

    def summarize_then_swap_back(*args, **kw):
        out = real_summarize(*args, **kw)
        os.unlink(source)
        os.rename(aside, source)
        return out

    monkeypatch.setattr(plan_module, "file_hashes", hashes_then_swap)
    monkeypatch.setattr(plan_module, "summarize", summarize_then_swap_back)
    result = env.filer().file(source)
    monkeypatch.undo()
    assert result.status == "filed", result.message
    sidecar = env.server.read_file(env.repo_id, "/Files/_inbox/invoice.txt.md")
    assert b"Innocent invoice text" in sidecar and b"secret" not in sidecar
    assert not any(SECRET in content for content in env.server.tree(env.repo_id).values())


def test_a_link_swapped_in_for_the_dropped_file_before_the_upload_is_not_uploaded(env, tmp_path, monkeypatch):
    data = b"Innocent invoice text\n"
    source = env.drop_file("invoice.txt", data)
    secret = outside_dir(tmp_path) / "k"
    secret.write_bytes(b"S" * (len(data) - 1) + b"\n")  # same size

    _stop_before(monkeypatch, env, "_do_upload", source)  # planned, then killed
    st = source.stat()
    os.utime(secret, ns=(st.st_atime_ns, st.st_mtime_ns))  # same mtime too
    kept = env.drop / ".kept"
    os.rename(source, kept)
    os.symlink(secret, source)
    env.server.reset_counters()

    [result] = env.filer().resume()
    assert result.status == "failed" and "not a regular file" in result.message, result.message
    assert env.server.request_count(UPLOADS) == 0
    assert source.is_symlink() and secret.read_bytes().startswith(b"SSS")


def test_a_link_in_the_drop_folder_is_refused_with_a_reason(env, tmp_path):
    target = outside_dir(tmp_path) / "k"
    target.write_bytes(SECRET)
    link = env.drop / "link.txt"
    os.symlink(target, link)
    fifo = env.drop / "pipe.txt"
    os.mkfifo(fifo)
    filer = env.filer()
    for path in (link, fifo):
        result = filer.file(path)
        assert result.status == "failed" and not result.retryable
        assert "not a regular file" in result.message and "not filed" in result.message
    assert link.is_symlink() and target.read_bytes() == SECRET
    assert filer.pending() == [] and not any(SECRET in c for c in env.server.tree(env.repo_id).values())



def test_a_link_swapped_in_for_the_filed_copy_is_not_recorded_as_synced(env, tmp_path, monkeypatch):
    secret = outside_dir(tmp_path) / "k"
    secret.write_bytes(SECRET)
    data = b"Innocent invoice text\n"
    source = env.drop_file("invoice.txt", data)
    rel = "Files/_inbox/invoice.txt"
    target, kept = env.mirror.root / rel, outside_dir(tmp_path) / "kept.txt"
    real = steps_module.record_base

    def swap_then_record(mirror, job):
        os.rename(target, kept)  # moved into the mirror: a link takes its place
        os.symlink(secret, target)
        return real(mirror, job)

    monkeypatch.setattr(steps_module, "record_base", swap_then_record)
    result = env.filer().file(source)
    monkeypatch.undo()
    assert result.status == "failed" and result.retryable, result
    assert "changed before it was recorded as synced" in result.message and "symbolic link" in result.message
    assert env.mirror.state.get_base(rel) is None  # the outside bytes are nobody's base

    target.unlink()  # the filed copy is back: the job ends
    os.rename(kept, target)
    [result] = env.filer().resume()
    assert result.status == "filed", result.message
    base = env.mirror.state.get_base(rel)
    assert base is not None and base.sha1 == sha1_bytes(data)
    assert env.mirror.state.base_content(base) == data
