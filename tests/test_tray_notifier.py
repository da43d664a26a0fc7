"""Which events become notices, and how a burst becomes one summary."""

from __future__ import annotations

import threading
import time
from typing import Any

from daemon_helpers import wait_for
from ohsync.tray.notifier import Announcer, Notice, Notifier, summarize

A = {"path": "notes/a.md", "archived": ".conflict/notes/a__remote__20261130T011203Z.md"}
B = {"path": "b.txt", "archived": ".conflict/b__phone__20261130T011500Z.txt"}


def test_each_new_conflict_is_announced_once_naming_the_file() -> None:
    ann = Announcer()
    assert ann.on_conflicts([A]) == []  # already waiting at start: the badge shows it, no notice
    notices = ann.on_event({"type": "conflict", **B})
    assert notices == [Notice("conflict", "Conflict in b.txt",
                              "Both versions were kept: yours stays in place, the other is in "
                              ".conflict/b__phone__20261130T011500Z.txt.")]
    assert ann.on_event({"type": "conflict", **B}) == []
    assert ann.on_conflicts([A, B]) == []  # the list after the event: nothing new
    C = {"path": "c.md", "archived": ".conflict/c.md"}
    assert [n.title for n in ann.on_conflicts([A, B, C])] == ["Conflict in c.md"]  # arrived while away


def test_filings_and_errors() -> None:
    ann = Announcer()
    assert ann.on_event({"type": "filed", "name": "scan.pdf", "dest": "/Files/downloads/2026-11/scan.pdf"}) == [
        Notice("filed", "Filed scan.pdf", "scan.pdf → /Files/downloads/2026-11/scan.pdf")]
    assert ann.on_event({"type": "filed", "path": "/home/u/OH-Drop/x.doc"})[0].title == "Filed x.doc"
    # the daemon's events carry FilingResult.as_dict(): status, source, dest, dest_rel, message
    filed = {"type": "filed", "status": "filed", "source": "/home/u/OH-Drop/a.pdf", "dest": "/Files/_inbox/a.pdf",
             "dest_rel": "Files/_inbox/a.pdf", "message": "a.pdf filed to /Files/_inbox/a.pdf"}
    assert ann.on_event(filed) == [Notice("filed", "Filed a.pdf", "a.pdf → /Files/_inbox/a.pdf")]
    quota = {"type": "filed", "status": "over_quota", "source": "/home/u/OH-Drop/big.iso", "dest": None,
             "message": "big.iso stays in the drop folder: the library is full"}
    assert ann.on_event(quota) == [Notice("error", "Could not file big.iso",
                                          "big.iso stays in the drop folder: the library is full")]
    assert ann.on_event(quota) == []  # retried later: said once
    assert ann.on_event({**quota, "status": "not_ready", "message": "still downloading"}) == []
    dup = ann.on_event({**quota, "status": "duplicate", "message": "big.iso is already at /Files/x/big.iso"})
    assert [n.title for n in dup] == ["big.iso is already filed"]
    err = {"type": "error", "path": "OH-Drop/big.iso", "message": "Quota exceeded"}
    assert ann.on_event(err) == [Notice("error", "Problem with big.iso", "Quota exceeded")]
    assert ann.on_event(err) == []  # the same message once
    held = {"type": "error", "kind": "held_deletes", "count": 40,
            "message": "40 deletions are held; run ohsync confirm-deletes"}
    assert ann.on_event(held) == [Notice("stopped", "Deletions held", held["message"])]
    assert ann.on_event(held) == []
    assert ann.on_event({"type": "mystery"}) == []


def test_login_needed_once_per_transition() -> None:
    ann = Announcer()
    assert [n.kind for n in ann.on_status({"state": "auth_required"})] == ["login"]
    assert ann.on_status({"state": "auth_required"}) == []
    assert ann.on_status({"state": "idle"}) == []
    assert [n.kind for n in ann.on_event({"type": "status", "state": "auth_required"})] == ["login"]
    assert ann.on_event({"type": "status", "status": {"state": "idle"}}) == []  # nested shape
    assert [n.kind for n in ann.on_event({"type": "status", "status": {"state": "auth_required"}})] == ["login"]


def test_a_stopped_mirror_is_announced_once() -> None:
    ann = Announcer()
    stopped = {"state": "stopped", "message": "", "mirrors": [
        {"library": "OH-Memory", "state": "stopped", "message": "Folder /home/u/OH-Memory is missing"},
        {"library": "Work", "state": "idle"}]}
    assert ann.on_status(stopped) == [Notice("stopped", "OH-Memory stopped syncing",
                                             "Folder /home/u/OH-Memory is missing")]
    assert ann.on_status(stopped) == []
    assert ann.on_status({"state": "idle", "mirrors": []}) == []
    assert len(ann.on_status(stopped)) == 1  # stopped again later: a new notice
    assert ann.on_status({"state": "stopped", "message": "Disk full"}) == [
        Notice("stopped", "ohsync stopped syncing", "Disk full")]


def test_summaries() -> None:
    one = Notice("filed", "Filed a.pdf", "a.pdf → /Files/a.pdf")
    assert summarize([one]) is one
    conflicts = [Notice("conflict", f"Conflict in f{i}.md") for i in range(7)]
    s = summarize(conflicts)
    assert s.title == "7 conflicts"
    assert s.body.splitlines() == ["f0.md", "f1.md", "f2.md", "f3.md", "f4.md", "… and 2 more",
                                   "Both versions of each were kept."]
    assert summarize([one, one]).title == "Filed 2 files"
    mixed = summarize([one, Notice("login", "Login needed")])
    assert mixed.title == "ohsync: 2 updates" and mixed.body == "Filed a.pdf\nLogin needed"


class Recorder:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        self.event = threading.Event()

    def __call__(self, title: str, body: str) -> None:
        self.sent.append((title, body))
        self.event.set()


def test_a_burst_becomes_one_notice() -> None:
    rec = Recorder()
    notifier = Notifier(rec, quiet=0.3, max_wait=3.0)
    try:
        for i in range(5):
            notifier.post(Notice("conflict", f"Conflict in f{i}.md"))
            time.sleep(0.02)  # why: the burst's spacing, well inside the quiet time
        assert rec.event.wait(5)
        time.sleep(0.4)  # why: a quiet period longer than the quiet time: no second notice may follow
        assert [t for t, _ in rec.sent] == ["5 conflicts"]
        rec.event.clear()
        notifier.post(Notice("login", "Login needed", "Run: ohsync login"))
        assert rec.event.wait(5)
        assert rec.sent[-1] == ("Login needed", "Run: ohsync login")
    finally:
        notifier.close()


def test_a_steady_stream_is_still_flushed_after_max_wait_and_failures_are_logged() -> None:
    sent: list[str] = []

    def flaky(title: str, body: str) -> None:
        sent.append(title)
        raise OSError("no notification service")

    notifier = Notifier(flaky, quiet=0.5, max_wait=0.6)
    start = time.monotonic()
    try:
        while not sent and time.monotonic() - start < 5:
            notifier.post(Notice("filed", "Filed x", "x → /Files/x"))
            time.sleep(0.1)  # why: the stream's spacing, inside the quiet time, so only max_wait flushes
        assert sent and time.monotonic() - start < 2
    finally:
        notifier.close(flush=False)


def test_close_flushes_what_is_queued() -> None:
    rec = Recorder()
    notifier = Notifier(rec, quiet=30, max_wait=60)
    notifier.post(Notice("filed", "Filed a.pdf", "a.pdf → /Files/a.pdf"))
    notifier.close()
    assert rec.sent == [("Filed a.pdf", "a.pdf → /Files/a.pdf")]


def test_a_conflict_notice_carries_the_open_page_button() -> None:
    sent: list[tuple[Any, ...]] = []
    opened: list[bool] = []
    notifier = Notifier(lambda *args: sent.append(args), quiet=0.05, max_wait=0.2,
                        open_page=lambda: opened.append(True))
    try:
        notifier.post(Notice("conflict", "Conflict in a.md", "Both versions were kept."))
        wait_for(lambda: sent, timeout=5, what="the conflict notice")
        notifier.post(Notice("filed", "Filed x.pdf", "x.pdf → /Files/"))
        wait_for(lambda: len(sent) >= 2, timeout=5, what="the filed notice")
    finally:
        notifier.close()
    (title, body, (label, press)), filed = sent
    assert (title, label) == ("Conflict in a.md", "Open ohsync…") and filed == ("Filed x.pdf", "x.pdf → /Files/")
    press()
    assert opened == [True]
