"""Drop-folder filing end to end (issue 8 acceptance): the real `ohsync run
--no-tray` subprocess against the devserver running in this process.

Covered: a PDF matched by a rule, an unmatched file to `_inbox`, a subfolder
rule, a name clash (through `ohsync file`), a duplicate, a partial download
that becomes complete, a 100 MiB file whose upload connection drops twice
(resumed, not restarted), over quota (held, announced, filed after a
refresh once there is room), SIGKILL at every `filing.*` crash point
(exactly one upload, one sidecar, one journal line in the end), and a remote
append to the same journal month while a file is being filed (merged, no
conflict copy).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import (
    DEMO_LIBRARY,
    DaemonProc,
    DaemonSetup,
    mirrored,
    read_tree,
    wait_for,
)
from engine_helpers import SAMPLES
from ohsync.engine.crashpoints import POINTS
from ohsync.engine.filing.filer import DEFAULT_CHUNK_SIZE
from ohsync.engine.filing.journal import BEIJING
from ohsync.engine.filing.rules import tsinghua_term
from ohsync.engine.ids import seafile_file_id

USER = "user@example.edu.cn"
SAMPLE_PDF = (SAMPLES / "Files" / "learn" / "2026-2027-1" / "数据结构" / "第07讲-散列表.pdf")
SAMPLE_REMOTE = "/Files/learn/2026-2027-1/数据结构/第07讲-散列表.pdf"  # in the demo library
# The demo library already holds the sample PDF; a trailing comment makes another document.
PDF_BYTES = SAMPLE_PDF.read_bytes() + b"\n% lecture 07, second printing\n"

RULES = [
    {"match": "dir:数据结构", "dest": "/Files/learn/{term}/数据结构/"},
    {"match": "*.pdf", "dest": "/Files/papers/{yyyy}/"},
]
UPLOAD = r"^POST /seafhttp/upload-api/"
UPDATE = r"^POST /seafhttp/update-api/"
# every filing step, plus the read-merge-write pushes inside the sidecar (the
# first push) and journal (the second) steps: uploaded but not read back, and
# read back but base not recorded
FILING_POINTS = [p for p in POINTS if p.startswith("filing.")] + [
    "push.uploaded:1", "push.verified:1", "push.uploaded:2", "push.verified:2"]


def now_bj() -> datetime:
    return datetime.now(BEIJING)


def month() -> str:
    return f"{now_bj():%Y-%m}"


def journal_header(m: str) -> bytes:
    return (f"---\ntitle: {m}\ntype: journal\npermalink: journal-{m}-test\ntags: [日志, {m[:4]}]\n"
            f"created: {m}-01T08:00:00+08:00\nmodified: {m}-01T08:00:00+08:00\norigin: bot\n"
            f"sensitivity: normal\n---\n\n# {m}\n\n## Observations\n"
            f"- [life] {m}-01 08:00 月初，开了这个月的日志 #日常\n").encode()


def filing_line(name: str, remote: str) -> str:
    """The journal line's text after its time stamp."""
    return f"归档 {name} → {remote} #附件"


def journal_count(tree: dict[str, bytes], name: str, remote: str) -> int:
    """How many journal lines (in all months) record filing ``name`` at ``remote``."""
    needle = filing_line(name, remote)
    return sum(1 for path, data in tree.items() if path.startswith("/journal/")
               for line in data.decode("utf-8", "replace").splitlines()
               if line.startswith("- [file] ") and line.endswith(needle))


def frontmatter(text: str) -> dict[str, str]:
    lines = text.splitlines()
    assert lines[0] == "---", text
    end = lines.index("---", 1)
    return dict(line.split(": ", 1) for line in lines[1:end])


def body(text: str) -> str:
    return text.split("\n---\n", 1)[1].strip()


def conflict_paths(tree: dict[str, bytes]) -> list[str]:
    return [p for p in tree if p.startswith("/.conflict/") or "conflict" in p.rsplit("/", 1)[-1].lower()]


# --------------------------------------------------------------------------- harness


class Events:
    """Collects the daemon's socket events in a thread."""

    def __init__(self, daemon: DaemonProc) -> None:
        self.items: list[dict[str, Any]] = []
        stream = daemon.client().subscribe()
        assert next(stream) == {"type": "subscribed"}

        def pump() -> None:
            for item in stream:
                self.items.append(item)

        threading.Thread(target=pump, name="events", daemon=True).start()

    def filed(self, source: Path | None = None) -> list[dict[str, Any]]:
        return [e for e in list(self.items) if e.get("type") == "filed"
                and (source is None or e.get("source") == str(source))]


class Harness:
    def __init__(self, setup: DaemonSetup, drop: Path) -> None:
        self.setup, self.env, self.srv = setup, setup.env, setup.srv
        self.repo, self.mirror, self.drop = setup.repo_id, setup.mirror, drop

    def seed_journal(self) -> str:
        """Give the server this month's journal (so filing appends to it)."""
        m = month()
        self.srv.put_file(self.repo, f"/journal/{m}.md", journal_header(m))
        return m

    def start(self, crash_at: str | None = None) -> DaemonProc:
        return self.setup.start(wait="idle", extra_env={"OHSYNC_CRASH_AT": crash_at} if crash_at else None)

    def tree(self) -> dict[str, bytes]:
        return self.srv.tree(self.repo)

    def wait_filed(self, remote: str, name: str, timeout: float = 60) -> dict[str, bytes]:
        """Wait until ``remote``, its sidecar and its journal line are on the server."""
        def done() -> dict[str, bytes] | None:
            tree = self.tree()
            ok = remote in tree and remote + ".md" in tree and journal_count(tree, name, remote) >= 1
            return tree if ok else None

        try:
            return wait_for(done, timeout=timeout, interval=0.2, what=f"{remote} filed")
        except AssertionError as exc:
            out = self.env.root / "daemon-output.log"
            raise AssertionError(f"{exc}\n--- daemon output ---\n{out.read_text(errors='replace')[-6000:]}") \
                from None

    def assert_settled(self, remote: str, content: bytes) -> None:
        """The document is in the mirror (moved there, not downloaded), the
        mirror equals the server, nothing is left in the drop folder."""
        rel = remote.lstrip("/")
        wait_for(lambda: (self.mirror / rel).is_file(), timeout=30, what="the mirror copy")
        assert (self.mirror / rel).read_bytes() == content
        wait_for(lambda: read_tree(self.mirror) == mirrored(self.tree()), timeout=30, interval=0.3,
                 what="mirror == server")
        leftover = [p for p in self.drop.rglob("*") if p.is_file()]
        assert leftover == []


@pytest.fixture
def harness(seed_daemon, tmp_path: Path) -> Harness:
    drop = tmp_path / "drop"
    return Harness(seed_daemon(tree=DEMO_LIBRARY, poll_interval=1.0, filing={
        "drop_dir": str(drop), "default": "/Files/_inbox/", "rules": RULES}), drop)


def check_sidecar(tree: dict[str, bytes], remote: str, content: bytes, original_name: str) -> str:
    text = tree[remote + ".md"].decode("utf-8")
    fm = frontmatter(text)
    assert fm["title"].strip('"\'') == remote.rsplit("/", 1)[-1]
    assert fm["type"] == "file" and fm["source"] == "drop"
    assert fm["sha1"] == hashlib.sha1(content).hexdigest()
    assert fm["size"] == str(len(content))
    assert fm["filed"].endswith("+08:00") and datetime.fromisoformat(fm["filed"])
    assert fm["original_name"].strip('"\'') == original_name
    assert body(text)
    return text


# --------------------------------------------------------------------------- rules and names


def test_a_pdf_matched_by_a_rule_is_filed_with_sidecar_journal_line_and_notice(harness: Harness) -> None:
    daemon = harness.start()
    events = Events(daemon)
    assert harness.drop.is_dir()  # created on start
    assert daemon.status()["drop_dir"] == str(harness.drop)
    (harness.drop / "lecture07.pdf").write_bytes(PDF_BYTES)
    remote = f"/Files/papers/{now_bj():%Y}/lecture07.pdf"
    tree = harness.wait_filed(remote, "lecture07.pdf")
    assert tree[remote] == PDF_BYTES
    check_sidecar(tree, remote, PDF_BYTES, "lecture07.pdf")
    harness.assert_settled(remote, PDF_BYTES)
    tree = harness.tree()
    assert journal_count(tree, "lecture07.pdf", remote) == 1
    line = next(ln for ln in tree[f"/journal/{month()}.md"].decode().splitlines() if ln.endswith(
        filing_line("lecture07.pdf", remote)))
    stamp = line.removeprefix("- [file] ").split(" 归档 ")[0]
    assert abs((datetime.strptime(stamp, "%Y-%m-%d %H:%M").replace(tzinfo=BEIJING) - now_bj()).total_seconds()) < 300
    assert [k for k in tree if k.startswith("/Files/papers/")] == [remote, remote + ".md"]
    # the notice: one `filed` event, and the status's last results
    wait_for(lambda: events.filed(harness.drop / "lecture07.pdf"), timeout=10, what="the filed event")
    [event] = events.filed(harness.drop / "lecture07.pdf")
    assert event["status"] == "filed" and event["dest"] == remote
    assert event["sidecar"] == remote.lstrip("/") + ".md"
    assert remote in event["message"]
    st = daemon.status()
    assert st["filing"]["last"][-1]["dest"] == remote and st["filing"]["held"] == []
    assert harness.srv.request_count(UPLOAD) == 3  # the PDF, its sidecar, the new journal month


def test_an_unmatched_file_goes_to_the_inbox(harness: Harness) -> None:
    harness.start()
    text = b"Meeting notes: hash table project\n\n- split the work\n"
    (harness.drop / "notes.txt").write_bytes(text)
    remote = "/Files/_inbox/notes.txt"
    tree = harness.wait_filed(remote, "notes.txt")
    assert tree[remote] == text
    sidecar = check_sidecar(tree, remote, text, "notes.txt")
    assert "Meeting notes: hash table project" in body(sidecar)
    harness.assert_settled(remote, text)
    assert journal_count(harness.tree(), "notes.txt", remote) == 1


def test_a_subfolder_rule_files_into_the_term_folder(harness: Harness) -> None:
    harness.start()
    content = PDF_BYTES + b"% 08\n"
    (harness.drop / "数据结构").mkdir()
    (harness.drop / "数据结构" / "第08讲-图.pdf").write_bytes(content)
    remote = f"/Files/learn/{tsinghua_term(now_bj())}/数据结构/第08讲-图.pdf"
    tree = harness.wait_filed(remote, "第08讲-图.pdf")
    assert tree[remote] == content
    check_sidecar(tree, remote, content, "第08讲-图.pdf")
    assert not any(k.startswith("/Files/papers/") for k in tree)  # the dir rule came first
    harness.assert_settled(remote, content)
    assert (harness.drop / "数据结构").is_dir()  # the folder itself stays for the next drop


def test_a_name_clash_gets_a_number_through_ohsync_file(harness: Harness) -> None:
    older = b"the older report\n"
    harness.srv.put_file(harness.repo, "/Files/_inbox/report.txt", older)
    daemon = harness.start()
    elsewhere = harness.env.root / "elsewhere"
    elsewhere.mkdir()
    newer = b"the newer report\n"
    (elsewhere / "report.txt").write_bytes(newer)
    r = daemon.cli("file", str(elsewhere / "report.txt"))
    assert r.returncode == 0, r.stdout + r.stderr
    remote = "/Files/_inbox/report (1).txt"
    assert remote in r.stdout and "report.txt" in r.stdout
    tree = harness.wait_filed(remote, "report (1).txt")
    assert tree["/Files/_inbox/report.txt"] == older  # untouched
    assert tree[remote] == newer
    check_sidecar(tree, remote, newer, "report.txt")
    assert "/Files/_inbox/report.txt.md" not in tree
    assert (elsewhere / "report.txt").read_bytes() == newer  # copied: a file outside the drop folder stays
    harness.assert_settled(remote, newer)


def test_a_duplicate_is_not_uploaded_and_the_notice_says_where_it_is(harness: Harness) -> None:
    daemon = harness.start()
    events = Events(daemon)
    before = harness.tree()
    harness.srv.reset_counters()
    dropped = harness.drop / "copy of the lecture.pdf"
    dropped.write_bytes(SAMPLE_PDF.read_bytes())
    wait_for(lambda: events.filed(dropped), timeout=30, what="the duplicate notice")
    [event] = events.filed(dropped)
    assert event["status"] == "duplicate" and event["dest"] == SAMPLE_REMOTE
    assert SAMPLE_REMOTE in event["message"]
    time.sleep(4)  # why: a quiet period longer than the 3 s quiet period: not retried, not announced again
    assert len(events.filed(dropped)) == 1
    assert dropped.read_bytes() == SAMPLE_PDF.read_bytes()  # stays in the drop folder
    assert harness.srv.request_count(UPLOAD) == harness.srv.request_count(UPDATE) == 0
    assert harness.tree() == before
    assert daemon.status()["filing"]["last"][-1]["status"] == "duplicate"


def test_a_partial_download_is_filed_once_and_only_when_complete(harness: Harness) -> None:
    harness.start()
    harness.srv.reset_counters()
    content = random.Random(8).randbytes(3 * 1024 * 1024 + 17)
    # Firefox: an empty placeholder under the final name, the data in `.part`
    final = harness.drop / "slides.pdf"
    part = harness.drop / "slides.pdf.part"
    final.write_bytes(b"")
    # Chrome: only a `.crdownload`
    crdl = harness.drop / "handout.pdf.crdownload"
    handout = random.Random(9).randbytes(200_000)
    # a file written in place and held open (a copy paused for longer than the quiet period)
    held_open = open(harness.drop / "copy.pdf", "wb")  # noqa: SIM115 - open across the loop
    copied = random.Random(10).randbytes(500_000)
    held_open.write(copied[:200_000])
    held_open.flush()
    step = len(content) // 6
    for i in range(6):  # slower than the 3 s quiet period
        with open(part, "ab") as fh:
            fh.write(content[i * step:(i + 1) * step])
        with open(crdl, "ab") as fh:
            fh.write(handout[i * 40_000:(i + 1) * 40_000])
        time.sleep(1.0)  # why: the downloads' pace: six steps take longer than the quiet period
    with open(part, "ab") as fh:
        fh.write(content[6 * step:])
    time.sleep(4)  # why: a quiet period: both stood still for longer than the 3 s quiet period
    assert harness.srv.request_count(UPLOAD) == 0, "a partial download was uploaded"
    assert not any(k.startswith("/Files/papers/") for k in harness.tree())
    os.replace(part, final)  # the downloads complete
    os.replace(crdl, harness.drop / "handout.pdf")
    held_open.write(copied[200_000:])
    held_open.close()
    year = f"{now_bj():%Y}"
    tree = harness.wait_filed(f"/Files/papers/{year}/slides.pdf", "slides.pdf")
    tree = harness.wait_filed(f"/Files/papers/{year}/handout.pdf", "handout.pdf")
    tree = harness.wait_filed(f"/Files/papers/{year}/copy.pdf", "copy.pdf")
    assert tree[f"/Files/papers/{year}/slides.pdf"] == content
    assert tree[f"/Files/papers/{year}/handout.pdf"] == handout
    assert tree[f"/Files/papers/{year}/copy.pdf"] == copied
    harness.assert_settled(f"/Files/papers/{year}/slides.pdf", content)
    tree = harness.tree()
    assert sorted(k for k in tree if k.startswith("/Files/papers/")) == sorted(
        f"/Files/papers/{year}/{n}" for n in ("handout.pdf", "handout.pdf.md", "slides.pdf", "slides.pdf.md",
                                              "copy.pdf", "copy.pdf.md"))
    # three documents, three sidecars, one new journal month: each uploaded once
    assert harness.srv.request_count(UPLOAD) == 7


# --------------------------------------------------------------------------- transfers and quota


def test_a_100_mib_upload_survives_dropped_connections_and_resumes(harness: Harness) -> None:
    harness.seed_journal()
    harness.start()
    srv = harness.srv
    size = 100 * 1024 * 1024
    data = random.Random(100).randbytes(size)
    chunks = -(-size // DEFAULT_CHUNK_SIZE)  # the daemon's filer uses the default
    assert chunks >= 9
    seen: list[int] = []

    def after_chunk(server: Any) -> None:
        seen.append(1)
        if len(seen) == 3:  # the 4th chunk's connection drops before the server reads it
            server.inject_fault("POST", r"^/seafhttp/upload-api/", drop=True)
        elif len(seen) == 7:  # the 8th is stored, then its connection drops (answer lost)
            server.inject_fault("POST", r"^/seafhttp/upload-api/", drop=True, after_processing=True)

    srv.reset_counters()
    srv.after_request("POST", r"^/seafhttp/upload-api/", after_chunk, count=chunks + 4)
    (harness.drop / "recording.bin").write_bytes(data)
    remote = "/Files/_inbox/recording.bin"
    wait_for(lambda: remote + ".md" in srv.tree_ids(harness.repo), timeout=150, interval=0.5,
             what="the big file filed")
    srv.clear_faults()
    assert srv.file_id(harness.repo, remote) == seafile_file_id(data)
    # each chunk went up once, plus the two whose connection dropped, plus the sidecar
    assert srv.request_count(UPLOAD) == chunks + 2 + 1
    assert srv.request_count(r"GET /api/v2\.1/repos/[^/]+/file-uploaded-bytes/") >= 2
    adds = [c for c in srv.history(harness.repo) if c["description"] == 'Added "recording.bin".']
    assert len(adds) == 1
    sidecar = srv.read_file(harness.repo, remote + ".md").decode()
    assert frontmatter(sidecar)["size"] == str(size)
    assert frontmatter(sidecar)["sha1"] == hashlib.sha1(data).hexdigest()
    local = harness.mirror / remote.lstrip("/")
    wait_for(lambda: local.is_file() and not (harness.drop / "recording.bin").exists(), timeout=30,
             what="moved into the mirror")
    assert local.stat().st_size == size
    only_journal = {f"/journal/{month()}.md": srv.read_file(harness.repo, f"/journal/{month()}.md")}
    assert journal_count(only_journal, "recording.bin", remote) == 1


def test_over_quota_the_file_stays_with_a_notice_until_there_is_room(harness: Harness) -> None:
    daemon = harness.start()
    events = Events(daemon)
    srv = harness.srv
    srv.set_quota(USER, srv.store.usage(USER) + 100_000)
    srv.reset_counters()
    content = random.Random(5).randbytes(300_000)
    dropped = harness.drop / "whiteboard.jpg"
    dropped.write_bytes(content)
    wait_for(lambda: events.filed(dropped), timeout=30, what="the over-quota notice")
    [event] = events.filed(dropped)
    assert event["status"] == "over_quota"
    assert "whiteboard.jpg" in event["message"] and "drop folder" in event["message"]
    st = daemon.status()
    assert [h["path"] for h in st["filing"]["held"]] == [str(dropped)]
    assert st["filing"]["held"][0]["status"] == "over_quota"
    assert st["state"] == "attention" and "1 dropped document not filed" in st["message"]
    text = daemon.cli("status")
    assert "not filed: " in text.stdout and "whiteboard.jpg" in text.stdout and "Up to date" not in text.stdout
    r = daemon.cli("status", "--json")
    assert r.returncode == 0, r.stderr
    held = json.loads(r.stdout)["filing"]["held"]
    assert held and held[0]["path"] == str(dropped) and "whiteboard.jpg" in held[0]["message"]
    time.sleep(4)  # why: a quiet period longer than the 3 s quiet period: announced once, not retried
    assert len(events.filed(dropped)) == 1  # announced once
    assert dropped.read_bytes() == content  # stays
    assert srv.request_count(UPLOAD) == 0
    assert not any(k.startswith("/Files/_inbox/whiteboard") for k in harness.tree())
    # room again: a refresh files it
    srv.set_quota(USER, 0)
    r = daemon.cli("refresh")
    assert r.returncode == 0, r.stderr
    remote = "/Files/_inbox/whiteboard.jpg"
    tree = harness.wait_filed(remote, "whiteboard.jpg")
    assert tree[remote] == content
    harness.assert_settled(remote, content)
    wait_for(lambda: daemon.status()["filing"]["held"] == [], timeout=10, what="nothing held")
    assert [e["status"] for e in events.filed(dropped)] == ["over_quota", "filed"]
    wait_for(lambda: daemon.status()["state"] == "idle", timeout=10, what="up to date once filed")


# --------------------------------------------------------------------------- crashes and merges


@pytest.mark.parametrize("point", FILING_POINTS)
def test_sigkill_at_each_pipeline_step_resumes_without_duplicates(harness: Harness, point: str) -> None:
    srv = harness.srv
    first = harness.start(crash_at=point)
    srv.reset_counters()
    size = DEFAULT_CHUNK_SIZE + 4 * 1024 * 1024  # two chunks, so there is a point between them
    data = random.Random(point).randbytes(size)
    (harness.drop / "scan.bin").write_bytes(data)
    try:
        code = first.wait_exit(90)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the daemon did not reach {point}:\n{first.output()[-4000:]}") from None
    assert code == -9, first.output()[-4000:]
    first.stop()
    remote = "/Files/_inbox/scan.bin"
    harness.start()
    tree = harness.wait_filed(remote, "scan.bin")
    harness.assert_settled(remote, data)
    tree = harness.tree()
    assert [k for k in tree if k.startswith("/Files/_inbox/")] == [remote, remote + ".md"]
    assert tree[remote] == data
    check_sidecar(tree, remote, data, "scan.bin")
    assert journal_count(tree, "scan.bin", remote) == 1
    assert conflict_paths(tree) == []
    # one upload of each: two chunks, the sidecar, the new journal month; nothing updated
    assert srv.request_count(UPLOAD) == 4, [ln for ln in srv.faults.lines if ln.startswith("POST")]
    assert srv.request_count(UPDATE) == 0, [ln for ln in srv.faults.lines if ln.startswith("POST")]
    history = [c["description"] for c in srv.history(harness.repo)]
    assert history.count('Added "scan.bin".') == 1
    assert history.count('Added "scan.bin.md".') == 1


def test_the_journal_line_merges_with_a_concurrent_remote_append(harness: Harness) -> None:
    m = harness.seed_journal()
    daemon = harness.start()
    srv, repo = harness.srv, harness.repo
    journal = f"/journal/{m}.md"
    remote_line = f"- [study] {m}-02 21:00 在手机上记了一条：散列表冲突处理要复习 #数据结构"
    seen: list[int] = []

    def append_remotely(server: Any) -> None:
        seen.append(1)
        if len(seen) == 2:  # the sidecar is up; the journal line comes next
            current = server.read_file(repo, journal)
            server.put_file(repo, journal, current + remote_line.encode() + b"\n", modifier=USER)

    srv.after_request("POST", r"^/seafhttp/upload-api/", append_remotely, count=2)
    (harness.drop / "lecture07.pdf").write_bytes(PDF_BYTES)
    remote = f"/Files/papers/{now_bj():%Y}/lecture07.pdf"
    tree = harness.wait_filed(remote, "lecture07.pdf")
    assert len(seen) == 2
    harness.assert_settled(remote, PDF_BYTES)
    tree = harness.tree()
    text = tree[journal].decode()
    assert text.count(remote_line) == 1
    assert journal_count(tree, "lecture07.pdf", remote) == 1
    assert text.startswith(journal_header(m).decode())  # the seed lines kept, in order
    assert conflict_paths(tree) == []
    assert daemon.status()["conflicts"] == 0
    assert not list(harness.mirror.rglob("*conflict*"))


def test_a_filed_document_moves_the_last_sync(harness: Harness) -> None:
    """Filing uploads the document: ``last sync`` in the status moves with it, at once."""
    import time

    daemon = harness.start()
    events = Events(daemon)
    before = daemon.status()["last_sync"]
    time.sleep(1.2)  # why: the status shows whole seconds: the next last sync must differ
    (harness.drop / "notes.txt").write_bytes(b"a document to file\n")
    wait_for(lambda: events.filed(harness.drop / "notes.txt"), timeout=60, what="the filed event")
    st = wait_for(lambda: (lambda s: s if s["last_sync"] != before else None)(daemon.status()), timeout=5,
                  what="the last sync moved")
    assert datetime.fromisoformat(st["last_sync"]) > datetime.fromisoformat(before)
