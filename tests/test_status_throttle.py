"""A pass that syncs thousands of files (a cold mirror) tells the status's
listeners (the socket's subscribers, the tray) a few times a second, not
once per file; a reader of the status sees the newest path at once, and the
next change that is told carries it."""

from __future__ import annotations

import time

from ohsync.daemon.status import StatusModel
from ohsync.daemon.worker.facts import PATH_INTERVAL, MirrorFacts
from ohsync.engine.events import SyncEvent


def test_files_synced_one_after_another_are_told_a_few_times_a_second() -> None:
    status = StatusModel(library="OH-Memory", local="/tmp/mirror", poll_interval=30)
    told: list[dict] = []
    status.add_listener(told.append)
    published: list[dict] = []
    facts = MirrorFacts(status, published.append)
    started = time.monotonic()
    for i in range(2000):
        facts.on_event(SyncEvent("synced", f"notes/n{i}.md", "down", action="download"))
    elapsed = time.monotonic() - started
    assert 1 <= len(told) <= elapsed / PATH_INTERVAL + 1  # not one per file
    assert status.status()["message"] == "Syncing notes/n1999.md"  # readers are never behind
    assert [e["path"] for e in published if e["type"] == "synced"][-1] == "notes/n1999.md"  # every file's event
    assert len(facts.activity(limit=5000)) == 200  # every file in the activity list (up to its size)
    status.update(syncing=False)  # the pass ends: told at once
    assert told[-1]["state"] != "syncing"


def _after_one_file() -> tuple[StatusModel, list[dict], MirrorFacts]:
    """A status model, what its listener was told, and the facts, after one file synced."""
    status = StatusModel(library="OH-Memory", local="/tmp/mirror", poll_interval=30)
    told: list[dict] = []
    status.add_listener(told.append)
    facts = MirrorFacts(status, lambda event: None)
    facts.on_event(SyncEvent("synced", "a.md", "down", action="download"))
    return status, told, facts


def test_a_conflict_or_an_error_is_told_at_once() -> None:
    status, told, facts = _after_one_file()
    before = len(told)
    facts.on_event(SyncEvent("error", "b.md", message="the server failed"))
    assert len(told) == before + 1 and told[-1]["message"] == "Syncing b.md"


def test_the_first_file_of_a_pass_right_after_another_pass_is_told() -> None:
    status, told, facts = _after_one_file()
    status.update(syncing=False, current_path=None)  # that pass ends; the next begins at once
    facts.on_event(SyncEvent("synced", "b.md", "down", action="download"))
    assert told[-1]["message"] == "Syncing b.md"  # not idle to idle for the listeners
