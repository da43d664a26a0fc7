"""Drop-folder filing end to end: the Filer with a real engine against devserver.

Covers issue 8: rules (glob, default, ``dir:``), name clashes, duplicates,
partial downloads, quota, crash-and-resume at every step (exactly one upload,
one sidecar, one journal line), a large file whose connection drops
mid-upload, and the daemon's FilingService (watch, stability, worker thread).
"""

from __future__ import annotations

import os
import queue
import threading
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml

from daemon_helpers import wait_for
from engine_helpers import SAMPLES, USER, make_mirror, mirrored, read_tree, sample_library
from ohsync.daemon.filing_service import FilingService
from ohsync.daemon.stability import StabilityGate
from ohsync.engine.filing.filer import Filer, FilingResult, _JobStore, journal_line
from ohsync.engine.ids import seafile_file_id, sha1_bytes
from ohsync.engine.memory.format import parse_memory
from ohsync.engine.mirror_api import for_engine

CST = timezone(timedelta(hours=8))
NOW = datetime(2026, 11, 30, 9, 12, 34, tzinfo=CST)
PDF_NAME = "第07讲-散列表.pdf"
PDF = SAMPLES / "Files" / "learn" / "2026-2027-1" / "数据结构" / PDF_NAME
HW1 = SAMPLES / "Files" / "learn" / "2026-2027-1" / "数据结构" / "作业1.docx"
RULES = [
    {"match": "dir:数据结构", "dest": "/Files/learn/{term}/数据结构/"},
    {"match": "*.pdf", "dest": "/Files/downloads/{yyyy}-{mm}/"},
]
UPLOADS = r"^POST /seafhttp/upload-api/"
UPDATES = r"^POST /seafhttp/update-api/"


class Crash(BaseException):
    """Stands for the process being killed: nothing catches it."""


class Env:
    """A synced mirror of the sample library, a drop folder and a filing db."""

    def __init__(self, server, repo_id: str, base: Path) -> None:
        self.server, self.repo_id, self.base = server, repo_id, base
        self.mirror = make_mirror(server, repo_id, base)
        self.drop = base / "OH-Drop"
        self.drop.mkdir()
        self.db = base / "state" / "filing.db"
        self.filers: list[Filer] = []

    def filer(self, rules=RULES, now=NOW, **kw) -> Filer:
        kw.setdefault("sleep", lambda s: None)
        kw.setdefault("ready", StabilityGate().not_ready)
        filer = Filer(for_engine(self.mirror.engine), self.drop, rules, "/Files/_inbox/", self.db, now=lambda: now,
                      **kw)
        self.filers.append(filer)
        return filer

    def restart(self) -> None:
        """What a killed and restarted daemon has: new engine, state reopened."""
        for filer in self.filers:
            filer.close()
        self.filers.clear()
        self.mirror.state.close()
        self.mirror.client.close()
        self.mirror = make_mirror(self.server, self.repo_id, self.base)

    def drop_file(self, rel: str, data: bytes) -> Path:
        path = self.drop / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        old = time.time() - 60
        os.utime(path, (old, old))
        return path

    def remote(self, path: str) -> bytes:
        return self.server.read_file(self.repo_id, path)

    def journal_count(self, line: str, month: str = "2026-11") -> int:
        text = self.remote(f"/journal/{month}.md").decode("utf-8")
        return sum(1 for existing in text.splitlines() if existing.strip() == line)

    def copies(self, data: bytes) -> list[str]:
        return sorted(p for p, content in self.server.tree(self.repo_id).items() if content == data)

    def assert_converged(self) -> None:
        """A full engine pass afterwards moves nothing and finds no conflict."""
        report = self.mirror.sync()
        assert report.errors == [] and report.conflicts == []
        assert report.uploaded == [] and report.downloaded == [], (report.uploaded, report.downloaded)
        assert read_tree(self.mirror.root) == mirrored(self.server.tree(self.repo_id))


@pytest.fixture
def env(devserver, tmp_path):
    tree = sample_library(tmp_path / "seed")
    (tree / "Files" / "learn" / "2026-2027-1" / "数据结构" / PDF_NAME).unlink()  # so it can be dropped
    repo_id = devserver.create_library(USER, "OH-Memory", from_tree=tree)
    e = Env(devserver, repo_id, tmp_path)
    assert e.mirror.sync().errors == []
    yield e
    for filer in e.filers:
        filer.close()


def sidecar_of(data: bytes) -> tuple[dict, str]:
    text = data.decode("utf-8")
    assert text.startswith("---\n")
    head, _, body = text[4:].partition("\n---\n")
    return yaml.safe_load(head), body.strip()


# -- the happy paths ------------------------------------------------------------------------

def test_pdf_matched_by_rule_is_filed_with_sidecar_and_journal_line(env):
    pdf = PDF.read_bytes()
    source = env.drop_file(PDF_NAME, pdf)
    env.server.reset_counters()
    result = env.filer().file(source)

    dest = f"/Files/downloads/2026-11/{PDF_NAME}"
    assert result.status == "filed", result.message
    assert result.remote_path == dest and result.dest_rel == dest[1:]
    assert result.sidecar_rel == dest[1:] + ".md"
    assert result.message == f"Filed {PDF_NAME} → {dest}"
    assert env.remote(dest) == pdf
    meta, body = sidecar_of(env.remote(dest + ".md"))
    assert meta == {"title": PDF_NAME, "type": "file", "source": "drop", "sha1": sha1_bytes(pdf),
                    "size": len(pdf), "filed": NOW, "original_name": PDF_NAME}
    assert "\nfiled: 2026-11-30T09:12:34+08:00\n" in env.remote(dest + ".md").decode()
    assert body.splitlines()[0] == "Data Structures (Fall 2026) - Lecture 07: Hashing"
    assert "PDF 文档" in body and "1.5 KB" in body
    line = f"- [file] 2026-11-30 09:12 归档 {PDF_NAME} → {dest} #附件"
    assert line == journal_line(PDF_NAME, dest, NOW)
    journal = env.remote("/journal/2026-11.md").decode()
    assert journal.endswith(line + "\n") and env.journal_count(line) == 1
    assert "- [sleep] 2026-11-30 23:50 睡觉 #睡眠\n" in journal  # the month's lines are all still there
    assert parse_memory(journal.encode()).frontmatter is not None
    # the dropped file moved into the mirror, with a base: neither uploaded nor downloaded again
    assert not source.exists()
    assert (env.mirror.root / dest[1:]).read_bytes() == pdf
    base = env.mirror.state.get_base(dest[1:])
    assert base is not None and base.sha1 == sha1_bytes(pdf) and base.remote_id == seafile_file_id(pdf)
    assert env.server.request_count(UPLOADS) == 2  # the document and its sidecar, once each
    assert env.server.request_count(UPDATES) == 1  # the journal
    env.assert_converged()


def test_unmatched_text_file_goes_to_inbox_with_its_first_line(env):
    source = env.drop_file("notes.txt", "\n\n# 周三组会纪要\n讨论了大作业接口。\n".encode())
    result = env.filer().file(source)
    assert result.status == "filed", result.message
    assert result.remote_path == "/Files/_inbox/notes.txt"
    meta, body = sidecar_of(env.remote("/Files/_inbox/notes.txt.md"))
    assert meta["original_name"] == "notes.txt"
    assert body.splitlines()[0] == "周三组会纪要"
    env.assert_converged()


def test_dir_rule_files_into_the_term_folder(env):
    data = b"PK\x03\x04" + os.urandom(3068)
    source = env.drop_file("数据结构/作业2.docx", data)
    result = env.filer().file(source)
    assert result.status == "filed", result.message
    assert result.remote_path == "/Files/learn/2026-2027-1/数据结构/作业2.docx"
    assert env.remote(result.remote_path) == data
    _, body = sidecar_of(env.remote(result.remote_path + ".md"))
    assert body == "Word 文档，3.0 KB；由 ohsync 从投递文件夹归档。"
    assert not source.exists() and (env.drop / "数据结构").is_dir()  # the category folder stays
    env.assert_converged()


def test_name_clash_gets_a_number_and_the_old_file_is_untouched(env):
    old = HW1.read_bytes()
    new = b"PK\x03\x04 a different homework"
    source = env.drop_file("数据结构/作业1.docx", new)
    result = env.filer().file(source)
    assert result.status == "filed", result.message
    assert result.remote_path == "/Files/learn/2026-2027-1/数据结构/作业1 (1).docx"
    assert result.sidecar_rel == "Files/learn/2026-2027-1/数据结构/作业1 (1).docx.md"
    meta, _ = sidecar_of(env.remote(result.remote_path + ".md"))
    assert meta["title"] == "作业1 (1).docx" and meta["original_name"] == "作业1.docx"
    assert env.remote("/Files/learn/2026-2027-1/数据结构/作业1.docx") == old
    assert journal_line("作业1 (1).docx", result.remote_path, NOW) in env.remote("/journal/2026-11.md").decode()
    env.assert_converged()


def test_name_taken_on_the_server_but_not_yet_synced_is_seen(env):
    env.server.put_file(env.repo_id, "/Files/_inbox/report.txt", b"someone else's report\n")
    source = env.drop_file("report.txt", b"my report\n")
    result = env.filer().file(source)
    assert result.status == "filed", result.message
    assert result.remote_path == "/Files/_inbox/report (1).txt"
    assert env.remote("/Files/_inbox/report.txt") == b"someone else's report\n"
    assert env.mirror.sync().downloaded == ["Files/_inbox/report.txt"]  # theirs arrives as usual
    env.assert_converged()


def test_duplicate_content_is_not_uploaded_again(env):
    source = env.drop_file("DS-HW1-copy.docx", HW1.read_bytes())
    env.server.reset_counters()
    result = env.filer().file(source)
    assert result.status == "duplicate"
    assert result.dest_rel == "Files/learn/2026-2027-1/数据结构/作业1.docx"
    assert "/Files/learn/2026-2027-1/数据结构/作业1.docx" in result.message
    assert source.exists()  # stays in the drop folder
    assert env.server.request_count(UPLOADS) == 0 and env.server.request_count(UPDATES) == 0
    assert env.copies(HW1.read_bytes()) == ["/Files/learn/2026-2027-1/数据结构/作业1.docx"]


def test_second_drop_of_a_just_filed_file_is_a_duplicate(env):
    filer = env.filer()
    assert filer.file(env.drop_file("a.txt", b"same bytes\n")).status == "filed"
    again = filer.file(env.drop_file("b.txt", b"same bytes\n"))
    assert again.status == "duplicate" and again.dest_rel == "Files/_inbox/a.txt"


def test_partial_download_is_not_filed_until_renamed(env):
    pdf = PDF.read_bytes()
    partial = env.drop_file("lecture.pdf.crdownload", pdf)
    filer = env.filer()
    assert not StabilityGate().is_stable(partial, 0)
    result = filer.file(partial)
    assert result.status == "not_ready" and result.retryable
    assert partial.exists() and env.copies(pdf) == []
    # Firefox style: the final name exists (empty) beside a .part file
    final = env.drop_file("lecture.pdf", b"")
    part = env.drop_file("lecture.pdf.part", pdf)
    assert filer.file(final).status == "not_ready"
    part.unlink()
    final.unlink()
    partial.rename(env.drop / "lecture.pdf")
    assert StabilityGate().is_stable(env.drop / "lecture.pdf", 3)
    result = filer.file(env.drop / "lecture.pdf")
    assert result.status == "filed", result.message
    assert env.copies(pdf) == ["/Files/downloads/2026-11/lecture.pdf"]


def test_over_quota_keeps_the_file_and_says_so(env):
    data = os.urandom(200_000)
    source = env.drop_file("big.bin", data)
    usage = env.server.store.usage(USER)
    env.server.set_quota(USER, usage + 100_000)
    env.server.reset_counters()
    filer = env.filer()
    result = filer.file(source)
    assert result.status == "over_quota"
    assert "free" in result.message and "big.bin" in result.message
    assert source.exists() and env.server.request_count(UPLOADS) == 0
    assert filer.pending() == []
    env.server.set_quota(USER, 0)  # unlimited again
    assert filer.file(source).status == "filed"


def test_quota_refused_by_the_file_server_keeps_the_file(env):
    source = env.drop_file("x.bin", os.urandom(1000))
    env.server.inject_fault("POST", "/seafhttp/upload-api/", status=443)
    result = env.filer().file(source)
    assert result.status == "over_quota" and source.exists()
    assert env.copies(source.read_bytes()) == []


def test_failed_read_back_keeps_the_file_in_the_drop_folder(env):
    data = b"read me back\n"
    source = env.drop_file("rb.txt", data)
    env.server.after_request("POST", "/seafhttp/upload-api/",
                             lambda srv: srv.inject_fault("GET", "/file/detail/", status=500, count=10))
    filer = env.filer()
    result = filer.file(source)
    assert result.status == "failed" and result.retryable
    assert source.read_bytes() == data  # nothing left the drop folder
    assert [p["step"] for p in filer.pending()] == ["planned"]
    env.server.clear_faults()
    env.server.reset_counters()
    [again] = filer.resume()
    assert again.status == "filed", again.message
    assert env.server.request_count(UPLOADS) == 1  # only the sidecar: the document was not sent twice
    assert env.copies(data) == ["/Files/_inbox/rb.txt"]
    assert not source.exists()


def test_new_journal_month_is_created_in_the_journal_format(env):
    december = datetime(2026, 12, 1, 8, 5, tzinfo=CST)
    source = env.drop_file("a.txt", b"first of december\n")
    result = env.filer(now=december).file(source)
    assert result.status == "filed", result.message
    doc = parse_memory(env.remote("/journal/2026-12.md"))
    assert doc.frontmatter is not None
    text = env.remote("/journal/2026-12.md").decode()
    assert "title: 2026-12\ntype: journal\npermalink: journal-2026-12-" in text
    assert text.endswith("## Observations\n- [file] 2026-12-01 08:05 归档 a.txt → /Files/_inbox/a.txt #附件\n")
    env.assert_converged()


def test_sidecar_and_journal_line_follow_the_offset_and_language_given(env):
    eastern = timezone(timedelta(hours=-5))
    morning_in_china = datetime(2026, 12, 1, 8, 5, tzinfo=CST)  # still November in New York
    source = env.drop_file("a.txt", b"first line\n")
    result = env.filer(now=morning_in_china, tz=eastern, language="en").file(source)
    assert result.status == "filed", result.message
    sidecar = env.remote("/Files/_inbox/a.txt.md").decode()
    assert "\nfiled: 2026-11-30T19:05:00-05:00\n" in sidecar
    assert sidecar_of(sidecar.encode())[1] == "first line\ntext file, 11 B; filed by ohsync from the drop folder."
    line = "- [file] 2026-11-30 19:05 filed a.txt → /Files/_inbox/a.txt #attachment"
    assert env.journal_count(line, month="2026-11") == 1
    env.assert_converged()


def test_journal_lines_written_elsewhere_meanwhile_are_kept(env):
    theirs = "- [meal] 2026-11-30 12:00 午饭 观畴园 #吃饭"
    current = env.remote("/journal/2026-11.md")
    env.server.put_file(env.repo_id, "/journal/2026-11.md", current + theirs.encode() + b"\n")
    result = env.filer().file(env.drop_file("n.txt", b"n\n"))
    assert result.status == "filed", result.message
    ours = journal_line("n.txt", "/Files/_inbox/n.txt", NOW)
    assert env.journal_count(theirs) == 1 and env.journal_count(ours) == 1
    env.assert_converged()


def test_a_journal_line_the_person_saves_while_the_filing_line_is_written_stays(env):
    # the person's editor saves the journal in the instant the filing line is written into it
    from ohsync.engine.crashpoints import set_hook

    journal = env.mirror.root / "journal" / "2026-11.md"
    mine = "- [note] 2026-11-30 09:12 written at the desk #desk"
    fired: list[str] = []

    def hook(name: str) -> None:
        if name == "replace.ready" and not fired:
            fired.append(name)
            with open(journal, "ab") as fh:
                fh.write(mine.encode() + b"\n")

    filer = env.filer()
    previous = set_hook(hook)
    try:
        result = filer.file(env.drop_file("n.txt", b"n\n"))
    finally:
        set_hook(previous)
    assert fired, "the journal line was never written over the journal"
    assert result.status == "failed" and "is being edited" in result.message, result.message
    assert mine in journal.read_text("utf-8")                   # the save stays live
    assert [r.status for r in filer.resume()] == ["filed"]      # the filing line follows on the next try
    ours = journal_line("n.txt", "/Files/_inbox/n.txt", NOW)
    assert env.journal_count(mine) == 1 and env.journal_count(ours) == 1
    env.assert_converged()


def test_source_changed_before_upload_is_replanned(env, monkeypatch):
    source = env.drop_file("draft.txt", b"v1\n")
    filer = env.filer()
    original = Filer._do_upload

    def edit_then_upload(self, job):
        if source.read_bytes() == b"v1\n":
            source.write_bytes(b"v2 longer\n")
        return original(self, job)

    monkeypatch.setattr(Filer, "_do_upload", edit_then_upload)
    result = filer.file(source)
    assert result.status == "filed", result.message
    assert env.remote("/Files/_inbox/draft.txt") == b"v2 longer\n"
    meta, _ = sidecar_of(env.remote("/Files/_inbox/draft.txt.md"))
    assert meta["sha1"] == sha1_bytes(b"v2 longer\n")


def test_empty_files_and_names_the_server_would_mangle_fail_without_retry(env):
    filer = env.filer()
    empty = filer.file(env.drop_file("empty.txt", b""))
    assert empty.status == "failed" and not empty.retryable and "empty" in empty.message
    quoted = filer.file(env.drop_file('say "hi".txt', b"hi\n"))
    assert quoted.status == "failed" and not quoted.retryable and "Rename it" in quoted.message
    assert filer.pending() == [] and env.copies(b"hi\n") == []


def test_files_inside_the_mirror_are_refused(env):
    inside = env.mirror.root / "Files" / "_inbox" / "x.txt"
    inside.write_bytes(b"x")
    result = env.filer().file(inside)
    assert result.status == "failed" and "inside the mirror" in result.message
    assert inside.exists()


def test_a_file_reached_through_a_link_in_the_drop_folder_is_left_where_it_is(env, tmp_path):
    # a folder dropped with a link in it (cp -a): what the link points at is elsewhere on the computer
    elsewhere = tmp_path / "Documents"
    elsewhere.mkdir()
    private = elsewhere / "tax-return.pdf"
    private.write_bytes(b"%PDF private\n")
    (env.drop / "new").mkdir()
    os.symlink(elsewhere, env.drop / "new" / "docs")
    result = env.filer().file(env.drop / "new" / "docs" / "tax-return.pdf")
    assert result.status == "failed" and not result.retryable
    assert "symbolic link" in result.message and "new/docs" in result.message
    assert private.read_bytes() == b"%PDF private\n"  # not moved into the mirror, not uploaded
    assert env.copies(b"%PDF private\n") == []


# -- crash anywhere, resume once ---------------------------------------------------------------

STEP_RECORDS = {"_do_upload": "uploaded", "_do_sidecar": "sidecar", "_do_journal": "journal",
                "_do_move": "moved", "_do_finish": "done"}
STEP_METHODS = list(STEP_RECORDS)


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("method", STEP_METHODS)
def test_crash_at_each_step_resumes_without_duplicates(env, monkeypatch, method, when):
    pdf = PDF.read_bytes()
    source = env.drop_file(PDF_NAME, pdf)
    dest = f"/Files/downloads/2026-11/{PDF_NAME}"
    env.server.reset_counters()
    if when == "before":
        def crashing(self, job):
            raise Crash(method)

        monkeypatch.setattr(Filer, method, crashing)
    else:  # the step's effect happened, its record did not
        record = STEP_RECORDS[method]
        original_update = _JobStore.update

        def crashing_update(self, job, **fields):
            if fields.get("step") == record:
                raise Crash(f"before recording {record}")
            return original_update(self, job, **fields)

        monkeypatch.setattr(_JobStore, "update", crashing_update)
    with pytest.raises(Crash):
        env.filer().file(source)
    monkeypatch.undo()
    if method in ("_do_upload", "_do_sidecar", "_do_journal") or (method == "_do_move" and when == "before"):
        assert source.exists()  # still in the drop folder until the move

    env.restart()
    results = env.filer().resume()
    assert [r.status for r in results] == ["filed"], [r.message for r in results]
    assert results[0].remote_path == dest

    assert env.copies(pdf) == [dest]  # one upload, no "(1)" copy
    assert env.server.request_count(UPLOADS) == 2  # document + sidecar, each exactly once
    tree = env.server.tree(env.repo_id)
    assert [p for p in tree if p.endswith(".pdf.md")] == [dest + ".md"]
    assert env.journal_count(journal_line(PDF_NAME, dest, NOW)) == 1
    assert not source.exists() and list(env.drop.iterdir()) == []
    assert (env.mirror.root / dest[1:]).read_bytes() == pdf
    assert env.filer().resume() == []  # nothing left to do
    env.assert_converged()


def test_crash_after_upload_with_a_sync_pass_before_resume(env, monkeypatch):
    """The restarted daemon's first pass pulls the uploaded file before filing resumes."""
    pdf = PDF.read_bytes()
    source = env.drop_file(PDF_NAME, pdf)
    original = Filer._do_upload

    def crashing(self, job):
        original(self, job)
        raise Crash("after upload")

    monkeypatch.setattr(Filer, "_do_upload", crashing)
    with pytest.raises(Crash):
        env.filer().file(source)
    monkeypatch.setattr(Filer, "_do_upload", original)
    env.restart()
    assert env.mirror.sync().errors == []  # downloads the new file into the mirror
    [result] = env.filer().resume()
    assert result.status == "filed", result.message
    assert not source.exists()
    assert env.copies(pdf) == [f"/Files/downloads/2026-11/{PDF_NAME}"]
    env.assert_converged()


# -- large files ------------------------------------------------------------------------------

BIG = 20 * 1024 * 1024


def test_large_file_survives_a_dropped_connection_mid_upload(env):
    data = os.urandom(BIG)
    source = env.drop_file("lecture-recording.mp4", data)
    # let the first chunk through, then drop the connection of the second
    env.server.after_request("POST", "/seafhttp/upload-api/",
                             lambda srv: srv.inject_fault("POST", "/seafhttp/upload-api/", drop=True))
    env.server.reset_counters()
    result = env.filer().file(source)
    assert result.status == "filed", result.message
    assert env.remote("/Files/_inbox/lecture-recording.mp4") == data
    # 3 chunks of 8 MiB + the dropped one; the upload resumed at 8 MiB instead of starting over
    assert env.server.request_count(UPLOADS) == 3 + 1 + 1  # + the sidecar
    assert env.server.request_count("file-uploaded-bytes") >= 1
    meta, body = sidecar_of(env.remote("/Files/_inbox/lecture-recording.mp4.md"))
    assert meta["size"] == BIG and "MP4 视频，20.0 MB" in body
    env.assert_converged()


def test_large_file_upload_resumes_after_a_crash_mid_upload(env, monkeypatch):
    from ohsync.engine.filing import filer as filing

    data = os.urandom(BIG)
    source = env.drop_file("dataset.zip", data)
    original = filing._post_chunk
    calls = {"n": 0}

    def crash_on_second_chunk(*args, **kw):
        calls["n"] += 1
        if calls["n"] == 2:
            raise Crash("killed mid-upload")
        return original(*args, **kw)

    monkeypatch.setattr(filing, "_post_chunk", crash_on_second_chunk)
    env.server.reset_counters()
    with pytest.raises(Crash):
        env.filer().file(source)
    monkeypatch.setattr(filing, "_post_chunk", original)
    assert source.exists()
    env.restart()
    [result] = env.filer().resume()
    assert result.status == "filed", result.message
    assert env.remote("/Files/_inbox/dataset.zip") == data
    assert env.server.request_count(UPLOADS) == 1 + 2 + 1  # chunk 1, then chunks 2-3 after resuming, sidecar
    env.assert_converged()


# -- the daemon's service ------------------------------------------------------------------------

class WorkerThread:
    """Stands in for the sync worker: runs submitted callables on one thread."""

    def __init__(self) -> None:
        self.q: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.ran_on: set[str] = set()

    def _run(self) -> None:
        while True:
            fn = self.q.get()
            if fn is None:
                return
            self.ran_on.add(threading.current_thread().name)
            fn()

    def submit(self, fn) -> None:
        self.q.put(fn)

    def call(self, fn):
        box: list = []
        done = threading.Event()
        self.submit(lambda: (box.append(fn()), done.set()))
        assert done.wait(30)
        return box[0]

    def stop(self) -> None:
        self.q.put(None)
        self.thread.join(5)


def test_service_files_dropped_files_once_stable(env):
    results: list[FilingResult] = []
    worker = WorkerThread()
    env.drop_file("early.txt", b"dropped while the daemon was down\n")
    service = FilingService(env.drop, worker.submit, results.append, quiet_seconds=0.5)
    service.start()
    try:
        worker.call(lambda: service.attach(env.filer()))
        wait_for(lambda: any(r.status == "filed" for r in results))
        assert results[0].remote_path == "/Files/_inbox/early.txt"

        # a download in progress: not filed while partial, filed after the rename
        partial = env.drop / "数据结构" / "slides.pdf.crdownload"
        partial.parent.mkdir()
        partial.write_bytes(PDF.read_bytes()[:500])
        time.sleep(1.5)  # why: a quiet period three times quiet_seconds: the partial file must stay unfiled
        assert len(results) == 1 and partial.exists()
        partial.write_bytes(PDF.read_bytes())
        partial.rename(partial.with_name("slides.pdf"))
        wait_for(lambda: len(results) == 2)
        assert results[1].status == "filed", results[1].message
        assert results[1].remote_path == "/Files/learn/2026-2027-1/数据结构/slides.pdf"
        assert worker.ran_on == {worker.thread.name}

        # a duplicate is announced once and left alone
        dup = env.drop / "copy.pdf"
        dup.write_bytes(PDF.read_bytes())
        wait_for(lambda: len(results) == 3)
        assert results[2].status == "duplicate"
        time.sleep(1.5)  # why: a quiet period: the duplicate must not be announced again
        assert len(results) == 3 and dup.exists()
        assert service.status()["drop_dir"] == str(env.drop)

        # `ohsync file PATH` / socket `file`: synchronous, on the worker thread
        outside = env.base / "elsewhere.txt"
        outside.write_bytes(b"filed by command\n")
        [direct] = service.file_now([outside])
        assert direct.status == "filed" and direct.remote_path == "/Files/_inbox/elsewhere.txt"
    finally:
        service.stop()
        worker.stop()
    assert env.remote("/Files/_inbox/elsewhere.txt") == b"filed by command\n"


def test_file_now_on_a_busy_worker_files_nothing_and_says_so(env, tmp_path):
    """A ``file`` request the worker has not started when the wait ends is cancelled:
    the caller is told nothing was filed, and the worker never files it later."""
    from ohsync.daemon.filing_service import FilingUnavailable

    queued: list = []
    results: list[FilingResult] = []
    service = FilingService(env.drop, queued.append, results.append, quiet_seconds=0.3)
    service.attach(env.filer())
    outside = tmp_path / "later.txt"
    outside.write_bytes(b"asked for while the worker was busy\n")
    with pytest.raises(FilingUnavailable, match="nothing was filed: ohsync was busy syncing for 0.2 s"):
        service.file_now([outside], timeout=0.2)
    assert len(queued) == 1
    queued[0]()  # the worker gets to it after the caller gave up: it must not run
    assert results == [] and "/Files/_inbox/later.txt" not in env.server.tree(env.repo_id)


def test_service_holds_over_quota_files_and_retries_on_request(env):
    results: list[FilingResult] = []
    worker = WorkerThread()
    service = FilingService(env.drop, worker.submit, results.append, quiet_seconds=0.3)
    env.server.set_quota(USER, env.server.store.usage(USER) + 10_000)
    service.start()
    try:
        worker.call(lambda: service.attach(env.filer()))
        (env.drop / "huge.bin").write_bytes(os.urandom(100_000))
        wait_for(lambda: results)
        assert results[0].status == "over_quota"
        assert [h["path"] for h in service.status()["held"]] == [str(env.drop / "huge.bin")]
        env.server.set_quota(USER, 0)
        service.retry_held()
        wait_for(lambda: len(results) == 2)
        assert results[1].status == "filed"
        assert service.status()["held"] == []
    finally:
        service.stop()
        worker.stop()
