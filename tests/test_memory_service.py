"""The daemon's memory service without a server: index waits, parameter
errors, refusals before queueing, and the caller's timeout (a write that never
started is cancelled, never carried out later)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ohsync.daemon.memory_service import MemoryService
from ohsync.daemon.socket.server import CannotNow, InvalidParams

SAMPLES = Path(__file__).resolve().parent / "data" / "samples" / "OH-Memory"


class Harness:
    def __init__(self, root: Path) -> None:
        self.jobs: list = []
        self.facts: dict = {"paused": False, "problem": None, "problem_message": "", "retry_at": None}
        self.dirty: list = []
        self.service = MemoryService(root, "+08:00", self.jobs.append, self.facts.get,
                                     lambda timeout: (True, ""), self.dirty.extend, write_timeout=0.3)


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    root = tmp_path / "OH-Memory"
    shutil.copytree(SAMPLES, root)
    h = Harness(root)
    h.service.rebuild()
    return h


def test_reads_answer_from_the_index(harness: Harness) -> None:
    handlers = harness.service.handlers()
    assert handlers["memory.search"]({"query": "沟通风格"})["results"][0]["permalink"] == "comm-style-pref-0e96"
    assert handlers["memory.list"]({"folder": "tasks"})["total"] == 3
    with pytest.raises(InvalidParams, match="unknown parameter"):
        handlers["memory.search"]({"qeury": "x"})
    with pytest.raises(InvalidParams, match="limit"):
        handlers["memory.search"]({"limit": 0})


def test_refusals_and_bad_params_fail_before_anything_is_queued(harness: Harness) -> None:
    handlers = harness.service.handlers()
    with pytest.raises(InvalidParams, match="refused"):
        handlers["memory.append"]({"permalink": "comm-style-pref-0e96", "category": "k",
                                   "text": "sk-abcdefghijklmnopqrstu"})
    with pytest.raises(InvalidParams, match="no memory entity"):
        handlers["memory.append"]({"permalink": "nope", "category": "k", "text": "v"})
    with pytest.raises(InvalidParams, match="does not occur"):
        handlers["memory.edit"]({"permalink": "comm-style-pref-0e96", "find": "不存在", "replace": "x"})
    with pytest.raises(InvalidParams, match="timeout"):
        handlers["memory.append"]({"permalink": "comm-style-pref-0e96", "category": "k", "text": "v", "timeout": -1})
    assert harness.jobs == []


def test_paused_or_offline_writes_nothing(harness: Harness) -> None:
    handlers = harness.service.handlers()
    harness.facts["paused"] = True
    with pytest.raises(CannotNow, match="paused"):
        handlers["memory.append"]({"permalink": "comm-style-pref-0e96", "category": "k", "text": "v"})
    harness.facts.update(paused=False, problem="offline", problem_message="Cannot reach the server")
    with pytest.raises(CannotNow, match="nothing was written: Cannot reach the server"):
        handlers["memory.append"]({"permalink": "comm-style-pref-0e96", "category": "k", "text": "v"})
    assert harness.jobs == []


def test_a_write_the_worker_never_started_is_cancelled(harness: Harness) -> None:
    path = harness.service.index.root / "preferences/沟通风格偏好.md"
    before = path.read_bytes()
    with pytest.raises(CannotNow, match="nothing was written yet"):
        harness.service.handlers()["memory.append"]({"permalink": "comm-style-pref-0e96", "category": "k",
                                                      "text": "v", "timeout": 0.2})
    assert len(harness.jobs) == 1
    harness.jobs[0]()  # the worker gets to it later: it must not write
    assert path.read_bytes() == before and harness.dirty == []


def test_a_write_without_an_engine_says_it_is_connecting(harness: Harness) -> None:
    import threading

    from daemon_helpers import wait_for

    def run_jobs() -> None:
        wait_for(lambda: harness.jobs, timeout=5, interval=0.01, what="the write queued for the worker")
        harness.jobs[0]()
    t = threading.Thread(target=run_jobs)
    t.start()
    with pytest.raises(CannotNow, match="still connecting"):
        harness.service.handlers()["memory.append"]({"permalink": "comm-style-pref-0e96", "category": "k",
                                                      "text": "v", "timeout": 5})
    t.join(5)


def test_the_index_is_built_on_the_first_memory_request_not_at_start(tmp_path: Path, monkeypatch) -> None:
    from ohsync.engine.memory.index import MemoryIndex

    root = tmp_path / "OH-Memory"
    shutil.copytree(SAMPLES, root)
    builds: list[Path] = []
    real = MemoryIndex.rebuild

    def counting(self: MemoryIndex) -> int:
        builds.append(self.root)
        return real(self)
    monkeypatch.setattr(MemoryIndex, "rebuild", counting)
    states: list[str] = []
    h = Harness.__new__(Harness)
    h.jobs, h.dirty = [], []
    h.facts = {"paused": False, "problem": None, "problem_message": "", "retry_at": None}
    h.service = MemoryService(root, "+08:00", h.jobs.append, h.facts.get, lambda timeout: (True, ""),
                              h.dirty.extend, write_timeout=0.3, on_state=states.append)
    h.service.start()
    # a file the watcher reports before anyone asked: nothing is read for it yet
    path = root / "preferences/沟通风格偏好.md"
    path.write_bytes(path.read_bytes() + "- [tone] 懒加载之前的改动\n".encode())
    h.service.note_paths(["preferences/沟通风格偏好.md"])
    assert builds == [] and not h.service.built and len(h.service.index) == 0
    assert states == ["not built"]
    hits = h.service.handlers()["memory.search"]({"query": "懒加载之前的改动"})["results"]
    assert [r["permalink"] for r in hits] == ["comm-style-pref-0e96"]
    assert builds == [root] and h.service.built and states == ["not built", "building", "ready"]
    h.service.handlers()["memory.list"]({"folder": "tasks"})
    assert len(builds) == 1  # built once


def test_ignored_paths_are_neither_returned_nor_written(tmp_path: Path) -> None:
    root = tmp_path / "OH-Memory"
    shutil.copytree(SAMPLES, root)
    (root / ".ohsyncignore").write_text("tasks/\n", encoding="utf-8")
    h = Harness(root)
    h.service.rebuild()
    handlers = h.service.handlers()
    assert handlers["memory.list"]({"folder": "tasks"})["total"] == 0
    found = handlers["memory.search"]({"query": "哈希表"})["results"]
    assert "ds-hw1-hashtable-2f29" not in [r["permalink"] for r in found]
    with pytest.raises(InvalidParams, match="no memory entity"):
        handlers["memory.read"]({"permalink": "ds-hw1-hashtable-2f29"})
    with pytest.raises(InvalidParams, match=r"tasks/申请 SRT 项目\.md is ignored \(\.ohsyncignore"):
        handlers["memory.read"]({"permalink": "tasks/申请 SRT 项目"})
    with pytest.raises(InvalidParams, match=r"is ignored"):
        handlers["memory.write"]({"title": "日记", "folder": "tasks", "observations": [{"category": "k", "text": "v"}]})
    with pytest.raises(InvalidParams, match=r"tasks/diary\.md is ignored"):
        handlers["memory.append"]({"permalink": "tasks/diary", "category": "k", "text": "v"})
    assert h.jobs == [] and not (root / "tasks" / "diary.md").exists()

    (root / ".ohsyncignore").write_text("# nothing\n", encoding="utf-8")  # the rules change: followed
    assert handlers["memory.list"]({"folder": "tasks"})["total"] == 3


def test_the_engine_s_ignore_setting_applies_once_attached(harness: Harness) -> None:
    from ohsync.engine.ignore import IgnoreRules

    handlers = harness.service.handlers()
    assert handlers["memory.list"]({"folder": "journal"})["total"] == 3
    engine = type("Engine", (), {"ignore": IgnoreRules(["journal/"], harness.service.index.root)})()
    harness.service.attach(engine)
    assert handlers["memory.list"]({"folder": "journal"})["total"] == 0


def test_a_permalink_with_a_nul_or_a_folder_that_is_a_file_is_a_sentence(harness: Harness) -> None:
    handlers = harness.service.handlers()
    with pytest.raises(InvalidParams, match=r"`permalink` holds a NUL character"):
        handlers["memory.read"]({"permalink": "knowledge/a\x00b"})
    with pytest.raises(InvalidParams, match=r"`permalink` holds a NUL character"):
        handlers["memory.append"]({"permalink": "knowledge/a\x00b", "category": "k", "text": "v"})
    with pytest.raises(InvalidParams, match=r"index\.md is a file, not a folder"):
        handlers["memory.write"]({"title": "T", "folder": "index.md", "observations": [{"category": "k", "text": "v"}]})
    assert harness.jobs == []
