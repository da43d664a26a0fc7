"""The debouncer's early end: a key whose save is complete (closed after
writing, renamed onto) is due once no event came for ``settle`` seconds,
not after the whole quiet period; bursts still coalesce.  All on the
debouncer's own clock seam."""

from __future__ import annotations

from ohsync.daemon.debounce import Debouncer


class Clock:
    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_completed_save_is_due_after_settle_not_after_the_quiet_period() -> None:
    clock = Clock()
    d: Debouncer[str] = Debouncer(0.7, clock, settle=0.1)
    d.touch("note.md")      # the editor writes...
    d.complete("note.md")   # ...and closes the file
    assert d.is_complete("note.md") and d.next_due() == 100.1
    clock.now = 100.05
    assert d.pop_due() == []
    clock.now = 100.1
    assert d.pop_due() == ["note.md"] and len(d) == 0 and not d.is_complete("note.md")


def test_a_file_written_again_within_the_settle_time_is_one_key() -> None:
    clock = Clock()
    d: Debouncer[str] = Debouncer(0.7, clock, settle=0.1)
    for _ in range(5):      # saved five times, 50 ms apart
        d.touch("note.md")
        d.complete("note.md")
        clock.now += 0.05
        assert d.pop_due() == []
    clock.now = 100.2 + 0.1  # settle after the last save
    assert d.pop_due() == ["note.md"]


def test_a_write_after_the_close_waits_the_quiet_period_again() -> None:
    clock = Clock()
    d: Debouncer[str] = Debouncer(0.7, clock, settle=0.1)
    d.complete("log.md")
    clock.now = 100.05
    d.touch("log.md")        # reopened and written, not closed yet
    assert not d.is_complete("log.md") and d.next_due() == 100.05 + 0.7
    clock.now = 100.5
    assert d.pop_due() == []


def test_a_burst_of_many_files_goes_out_as_one_batch() -> None:
    clock = Clock()
    d: Debouncer[str] = Debouncer(0.7, clock, settle=0.1)
    names = [f"n{i:03}.md" for i in range(200)]
    for name in names:       # a script saving 200 files, 1 ms apart
        d.touch(name)
        d.complete(name)
        clock.now += 0.001
        assert d.pop_due() == []  # the first ones wait while the burst goes on
    clock.now += 0.1
    assert d.pop_due() == names   # all of them at once, oldest first


def test_a_completed_save_is_never_later_than_its_quiet_period() -> None:
    clock = Clock()
    d: Debouncer[str] = Debouncer(0.7, clock, settle=0.1)
    d.complete("note.md")
    for _ in range(20):      # another file keeps changing (a log being appended to)
        clock.now += 0.05
        d.touch("busy.log")
        if clock.now < 100.7:
            assert d.pop_due() == []
    clock.now = 100.7 + 1e-9
    assert d.pop_due() == ["note.md"]


def test_without_settle_or_prompt_a_completion_is_a_plain_touch() -> None:
    clock = Clock()
    plain: Debouncer[str] = Debouncer(0.7, clock)  # the drop folder's debouncer
    plain.complete("a")
    assert not plain.is_complete("a") and plain.next_due() == 100.7
    d: Debouncer[str] = Debouncer(0.7, clock, settle=0.1)
    d.complete("a")
    assert d.next_due(prompt=False) == 100.7  # e.g. while the watcher waits for a full scan
    clock.now = 100.2
    assert d.pop_due(prompt=False) == [] and d.pop_due() == ["a"]


def test_a_hold_outlasts_a_completion() -> None:
    clock = Clock()
    d: Debouncer[str] = Debouncer(0.7, clock, settle=0.1)
    d.hold("a", until=105.0)
    d.complete("a")
    assert d.next_due() == 105.0
