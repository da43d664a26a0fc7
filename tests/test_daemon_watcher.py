"""The watcher: bursts of writes become one dirty path; ignored names never appear;
a completed save (closed after writing, a temp file renamed onto it) is handed
on without waiting the quiet period."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import FakeEngine, FakeSession, isolated_env, wait_for  # noqa: F401
from ohsync.daemon.watcher import Watcher


class Recorder:
    def __init__(self) -> None:
        self.batches: list[tuple[list[str], bool]] = []
        self.lock = threading.Lock()

    def __call__(self, paths: list[str], full_scan: bool) -> None:
        with self.lock:
            self.batches.append((paths, full_scan))

    def paths(self) -> list[str]:
        with self.lock:
            return [p for b, _ in self.batches for p in b]


def _watch(root: Path, rec: Recorder, quiet: float = 0.5, **kw) -> Watcher:
    engine = FakeEngine(root)
    w = Watcher(root, engine.rel_path, rec, quiet=quiet, **kw)
    w.start()  # returns with the tree watched (watchdog adds its inotify watches in start()): no wait needed
    return w


class Clock:
    """The debounce's clock seam: time moves only when the test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _advance(w: Watcher, clock: Clock, seconds: float) -> None:
    with w.cond:
        clock.now += seconds
        w.cond.notify_all()  # the debounce thread looks at the clock again


def test_burst_of_writes_is_one_dirty_path(tmp_path: Path) -> None:
    (tmp_path / "journal").mkdir()
    target = tmp_path / "journal" / "2026-11.md"
    target.write_text("start\n", encoding="utf-8")
    rec = Recorder()
    w = _watch(tmp_path, rec, quiet=0.7, settle=2.0)
    try:
        for i in range(10):  # an editor saving repeatedly, 0.1 s apart (< quiet, < settle)
            with open(target, "a", encoding="utf-8") as f:
                f.write(f"- [x] line {i}\n")
            time.sleep(0.1)  # why: the pacing of the saves under test
        wait_for(lambda: rec.paths(), timeout=15, what="a dirty path")
        time.sleep(1.5)  # why: a quiet period longer than the debounce: nothing else may follow
        assert rec.paths() == ["journal/2026-11.md"]
        assert w.is_alive()
    finally:
        w.stop()
    assert not w.is_alive()


def test_temp_file_rename_reports_the_target_only(tmp_path: Path) -> None:
    rec = Recorder()
    w = _watch(tmp_path, rec)
    try:
        tmp = tmp_path / ".ohsync-tmp-abc"
        tmp.write_bytes(b"data")
        os.replace(tmp, tmp_path / "note.md")
        wait_for(lambda: "note.md" in rec.paths(), timeout=15, what="note.md")
        time.sleep(1.0)  # why: a quiet period: the temp file must never be reported
        assert rec.paths() == ["note.md"]
    finally:
        w.stop()


def test_two_paths_and_a_new_folder(tmp_path: Path) -> None:
    rec = Recorder()
    w = _watch(tmp_path, rec)
    try:
        (tmp_path / "a.md").write_text("a")
        (tmp_path / "b.md").write_text("b")
        wait_for(lambda: set(rec.paths()) >= {"a.md", "b.md"}, timeout=15, what="a.md and b.md")
        (tmp_path / "sub").mkdir()
        wait_for(lambda: any(scan for _, scan in rec.batches), timeout=15, what="a full-scan request")
    finally:
        w.stop()


def test_move_records_of_finished_renames_are_swept(tmp_path: Path, monkeypatch) -> None:
    import ohsync.daemon.watcher as watcher_mod

    monkeypatch.setattr(watcher_mod, "MOVE_RECORD_SWEEP", 3600.0)
    rec = Recorder()
    w = _watch(tmp_path, rec, quiet=0.2)

    def records() -> int:
        total = 0
        for emitter in list(w._observer.emitters):  # type: ignore[union-attr]
            inotify = getattr(getattr(emitter, "_inotify", None), "_inotify", None)
            total += len(getattr(inotify, "_moved_from_events", {}))
        return total

    def saves(batch: int) -> None:  # atomic saves: a temp file, then a rename over the target
        for i in range(50):
            tmp = tmp_path / f".ohsync-tmp-{batch}-{i}"
            tmp.write_text(f"v{batch}.{i}\n", encoding="utf-8")
            os.replace(tmp, tmp_path / f"note-{i}.md")
        wait_for(lambda: len(rec.paths()) >= 50 * batch, timeout=15, what="the renamed files")
    try:
        saves(1)
        assert records() >= 50  # watchdog keeps one record per rename
        w._sweep_move_records()  # new since the last sweep: kept
        assert records() >= 50
        w._sweep_move_records()  # still there a sweep later: the renames are over
        assert records() == 0
        # the debounce thread does the same on its own, then sleeps without a timeout again
        monkeypatch.setattr(watcher_mod, "MOVE_RECORD_SWEEP", 0.3)
        saves(2)
        wait_for(lambda: records() == 0, timeout=15, what="the move records swept")
        wait_for(lambda: not w._old_moves, timeout=15, what="nothing left to sweep")
        assert sorted(set(rec.paths())) == sorted(f"note-{i}.md" for i in range(50))
        assert w.is_alive()
    finally:
        w.stop()


def test_a_save_closed_after_writing_is_handed_on_before_the_quiet_period(tmp_path: Path) -> None:
    clock = Clock()
    rec = Recorder()
    w = _watch(tmp_path, rec, quiet=0.7, settle=0.1, clock=clock)
    try:
        (tmp_path / "note.md").write_text("saved\n")  # open, write, close (IN_CLOSE_WRITE)
        wait_for(lambda: w._paths.is_complete("note.md"), timeout=15, what="the close seen")
        assert rec.paths() == []  # the clock has not moved: nothing is due yet
        _advance(w, clock, 0.1)   # settle, far less than the quiet period
        wait_for(lambda: rec.paths(), timeout=15, what="the save handed on")
        assert rec.batches == [(["note.md"], False)]
        assert clock.now - 1000.0 < 0.7
    finally:
        w.stop()


def test_completed_saves_are_named_to_on_saved_before_they_are_handed_on(tmp_path: Path) -> None:
    clock = Clock()
    order: list[tuple[str, list[str]]] = []
    w = _watch(tmp_path, lambda paths, scan: order.append(("dirty", paths)), quiet=0.7, settle=0.1, clock=clock,
               on_saved=lambda paths: order.append(("saved", paths)))
    try:
        (tmp_path / "note.md").write_text("saved\n")  # closed after writing
        with open(tmp_path / "big.bin", "wb") as f:  # still open: no close yet
            f.write(b"x" * 1000)
            f.flush()
            wait_for(lambda: w._paths.is_complete("note.md") and w.pending == 2, timeout=15, what="both seen")
            _advance(w, clock, 0.1)
            wait_for(lambda: order, timeout=15, what="the save handed on")
            assert order == [("saved", ["note.md"]), ("dirty", ["note.md"])]
            _advance(w, clock, 1.0)  # the open file's quiet period: handed on, but not as a completed save
            wait_for(lambda: len(order) == 3, timeout=15, what="the quiet path handed on")
            assert order[2] == ("dirty", ["big.bin"])
    finally:
        w.stop()


def test_a_temp_file_renamed_onto_the_target_is_a_completed_save(tmp_path: Path) -> None:
    (tmp_path / "note.md").write_text("old\n")
    clock = Clock()
    rec = Recorder()
    w = _watch(tmp_path, rec, quiet=0.7, settle=0.1, clock=clock)
    try:
        tmp = tmp_path / ".ohsync-tmp-save"   # an editor's atomic save: a temp file, then a rename
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(fd, b"new\n")
        os.fsync(fd)
        os.close(fd)
        os.replace(tmp, tmp_path / "note.md")
        wait_for(lambda: w._paths.is_complete("note.md"), timeout=15, what="the rename seen")
        _advance(w, clock, 0.1)
        wait_for(lambda: rec.paths(), timeout=15, what="the save handed on")
        assert rec.batches == [(["note.md"], False)]
    finally:
        w.stop()


def test_without_a_close_the_quiet_period_applies(tmp_path: Path) -> None:
    clock = Clock()
    rec = Recorder()
    w = _watch(tmp_path, rec, quiet=0.7, settle=0.1, clock=clock)
    try:
        with open(tmp_path / "big.bin", "wb") as f:  # still being written: no close yet
            f.write(b"x" * 1000)
            f.flush()
            wait_for(lambda: w.pending == 1, timeout=15, what="the write seen")
            _advance(w, clock, 0.5)   # past settle, within the quiet period
            time.sleep(0.3)  # why: a quiet period: the debounce thread, woken, must hand on nothing yet
            assert rec.paths() == [] and not w._paths.is_complete("big.bin")
            _advance(w, clock, 1.0)   # past the quiet period (of the last event seen, however late)
            wait_for(lambda: rec.paths() == ["big.bin"], timeout=15, what="the quiet path handed on")
    finally:
        w.stop()


def test_a_burst_of_saves_of_many_files_is_one_batch(tmp_path: Path) -> None:
    rec = Recorder()
    w = _watch(tmp_path, rec, quiet=60.0, settle=1.0)
    try:
        names = [f"n{i:02}.md" for i in range(30)]
        for name in names:
            (tmp_path / name).write_text(name)
        for name in names[:5]:  # and some of them saved again at once
            (tmp_path / name).write_text(name + " again")
        wait_for(lambda: rec.paths(), timeout=30, what="the burst handed on")  # long before 60 s
        time.sleep(0.5)  # why: a quiet period: no second batch may follow
        assert len(rec.batches) == 1 and rec.batches[0] == (names, False)
    finally:
        w.stop()


def test_the_polling_observer_reports_no_close_so_the_quiet_period_applies(tmp_path: Path) -> None:
    from watchdog.observers.polling import PollingObserver

    clock = Clock()
    rec = Recorder()
    w = _watch(tmp_path, rec, quiet=0.7, settle=0.1, clock=clock,
               observer_factory=lambda: PollingObserver(timeout=0.1))
    try:
        (tmp_path / "note.md").write_text("saved\n")  # closed, but polling cannot tell
        wait_for(lambda: w.pending == 1, timeout=15, what="the new file seen")
        time.sleep(0.3)  # why: three polls of the polling observer: any later event of the same write is in
        _advance(w, clock, 0.5)  # past settle, within the quiet period
        time.sleep(0.3)  # why: a quiet period: the debounce thread, woken, must hand on nothing yet
        assert rec.paths() == [] and not w._paths.is_complete("note.md")
        _advance(w, clock, 1.0)
        wait_for(lambda: rec.paths() == ["note.md"], timeout=15, what="the quiet path handed on")
    finally:
        w.stop()


def test_the_daemon_hands_a_completed_save_to_the_engine_without_the_quiet_period(isolated_env,
                                                                                   tmp_path: Path) -> None:
    """End to end in-process: watcher -> worker -> engine.sync with the saved path, while the
    quiet period (60 s) is nowhere near over."""
    from ohsync.daemon.app import Daemon
    from ohsync.daemon.config import load_config

    (tmp_path / "mirror").mkdir()
    isolated_env.config.write_text("\n".join([
        'server = "http://127.0.0.1:9"', 'username = "u@x"', "poll_interval = 3600",
        f'state_dir = "{tmp_path}/state"', "[[mirror]]", f'local = "{tmp_path}/mirror"']) + "\n", encoding="utf-8")
    cfg = load_config(isolated_env.config)
    engine = FakeEngine(cfg.mirrors[0].local)

    def factory(on_event):
        engine.on_event = on_event
        return FakeSession(engine)

    d = Daemon(cfg, session_factory=factory, install_signals=False, watcher_quiet=60.0)
    t = threading.Thread(target=d.run, daemon=True)
    t.start()
    try:
        assert d.ready.wait(10)
        wait_for(lambda: d.mirrors[0]._watcher is not None and d.mirrors[0]._watcher.is_alive(),
                 timeout=20, what="the watcher running")  # its observer started: the tree is watched
        started = time.monotonic()
        (tmp_path / "mirror" / "note.md").write_text("saved\n")
        wait_for(lambda: any(paths and "note.md" in paths for paths, _ in engine.calls), timeout=30,
                 what="a pass with the saved path")
        assert time.monotonic() - started < 60.0  # the quiet period was not waited
        assert "note.md" in engine.saved  # told before that pass: its writer is done
    finally:
        d.request_stop()
        t.join(15)


def test_paused_watching_ends_in_a_scan_that_finds_what_changed_meanwhile(tmp_path: Path) -> None:
    """While the engine writes a cold mirror the watcher stops watching (each
    file written would be an echo); an edit made meanwhile raises no event, so
    resuming asks for a full scan, which finds it, and watches again."""
    (tmp_path / "notes").mkdir()
    rec = Recorder()
    w = _watch(tmp_path, rec, quiet=0.3)
    try:
        w.pause_events()
        assert w.is_alive()  # paused on purpose: the mirror must not start another watcher
        observers = [t for t in threading.enumerate() if t.name == w.observer_name]
        assert observers == []  # nothing watches: what is written now raises no event
        (tmp_path / "notes" / "during.md").write_text("made while paused\n", encoding="utf-8")
        w.resume_events()
        wait_for(lambda: any(full for _, full in rec.batches), timeout=15, what="a full scan after resuming")
        assert "notes/during.md" not in rec.paths()  # found by the scan, not by an event
        (tmp_path / "notes" / "after.md").write_text("made after\n", encoding="utf-8")
        wait_for(lambda: "notes/after.md" in rec.paths(), timeout=15, what="an event after resuming")
        assert w.is_alive()
    finally:
        w.stop()
    assert not w.is_alive()
