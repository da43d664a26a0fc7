"""The engine hands its events to the caller's handler (``on_event``): a handler
that raises never stops a sync, and its first failure is logged, not lost."""

from __future__ import annotations

import logging

from engine_helpers import USER, make_mirror
from ohsync.engine.events import SyncEvent


def test_a_failing_event_handler_is_logged_once_and_the_sync_carries_on(devserver, tmp_path, caplog) -> None:
    m = make_mirror(devserver, devserver.create_library(USER, "OH-Memory"), tmp_path)
    seen: list[SyncEvent] = []

    def broken(event: SyncEvent) -> None:
        seen.append(event)
        raise RuntimeError("display bug")

    m.engine.ctx.on_event = broken
    m.write("a.md", b"# a\n")
    m.write("b.md", b"# b\n")
    with caplog.at_level(logging.ERROR, logger="ohsync.engine.context"):
        report = m.sync()
    assert report.errors == [] and sorted(report.uploaded) == ["a.md", "b.md"]
    assert devserver.tree(m.repo_id)["/a.md"] == b"# a\n" and devserver.tree(m.repo_id)["/b.md"] == b"# b\n"
    assert len(seen) > 1  # every event was still handed over
    failures = [r for r in caplog.records if r.name == "ohsync.engine.context"]
    assert len(failures) == 1 and "syncing goes on" in failures[0].getMessage()
    assert failures[0].exc_info is not None and "display bug" in str(failures[0].exc_info[1])
    m.state.close()
    m.client.close()
