"""The socket methods of a daemon with two mirrors, over fake mirrors: a request that names no
mirror acts on every mirror it concerns, or refuses naming ``--mirror``; never the first alone.

The fakes stand for :class:`~ohsync.daemon.mirror.Mirror` as far as
:class:`~ohsync.daemon.daemon_methods.Methods` uses it (a name, its held
deletions, its open conflicts); with one mirror the answers are those of
before there were several.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from ohsync.daemon.daemon_methods import Methods
from ohsync.daemon.socket.server import InvalidParams


@dataclass
class FakeWorker:
    held: list[dict[str, Any]] = field(default_factory=list)
    confirmed: int = 0

    def held_deletes(self) -> list[dict[str, Any]]:
        return list(self.held)

    def confirm_deletes(self) -> int:
        self.confirmed += 1
        return len(self.held)


@dataclass
class FakeConflicts:
    paths: tuple[str, ...] = ()
    resolved: list[str] = field(default_factory=list)

    def owns(self, path: str) -> bool:
        return path in self.paths

    def resolve(self, path: str, keep: str, content: Any, timeout: float, expected: Any) -> dict[str, Any]:
        self.resolved.append(path)
        return {"path": path, "keep": keep}


class FakeMirror:
    def __init__(self, name: str, *, held: int = 0, conflicts: tuple[str, ...] = ()) -> None:
        self.name = name
        self.local = f"/home/me/{name}"
        self.worker = FakeWorker([{"path": f"gone{i}.md", "side": "local"} for i in range(held)])
        self.conflicts = FakeConflicts(conflicts)

    def answers_to(self, selector: str) -> bool:
        return selector in (self.name, self.local)


class FakeDaemon:
    def __init__(self, *mirrors: FakeMirror) -> None:
        self.mirrors = list(mirrors)


def _methods(*mirrors: FakeMirror) -> Methods:
    return Methods(FakeDaemon(*mirrors))  # type: ignore[arg-type]


def test_confirm_deletes_without_a_mirror_confirms_every_mirrors_held_deletions() -> None:
    mem, docs, quiet = FakeMirror("OH-Memory", held=3), FakeMirror("Docs", held=2), FakeMirror("Quiet")
    answer = _methods(mem, docs, quiet).confirm_deletes({})
    assert answer == {"confirmed": 5, "mirrors": [{"mirror": "OH-Memory", "confirmed": 3},
                                                  {"mirror": "Docs", "confirmed": 2}]}
    assert (mem.worker.confirmed, docs.worker.confirmed, quiet.worker.confirmed) == (1, 1, 0)


def test_confirm_deletes_of_one_holding_mirror_or_a_named_one_says_which() -> None:
    mem, docs = FakeMirror("OH-Memory"), FakeMirror("Docs", held=2)
    assert _methods(mem, docs).confirm_deletes({}) == {
        "confirmed": 2, "mirrors": [{"mirror": "Docs", "confirmed": 2}], "mirror": "Docs"}
    assert mem.worker.confirmed == 0
    assert _methods(mem, docs).confirm_deletes({"mirror": "OH-Memory"}) == {"confirmed": 0, "mirror": "OH-Memory"}
    assert _methods(FakeMirror("OH-Memory"), FakeMirror("Docs")).confirm_deletes({}) == {
        "confirmed": 0, "mirrors": []}


def test_confirm_deletes_with_one_mirror_answers_as_always() -> None:
    only = FakeMirror("OH-Memory", held=4)
    assert _methods(only).confirm_deletes({}) == {"confirmed": 4}


def test_resolve_finds_the_mirror_whose_conflicts_hold_the_path() -> None:
    mem = FakeMirror("OH-Memory", conflicts=("notes/a.md",))
    docs = FakeMirror("Docs", conflicts=("plans/q1.txt", "plans/q1 (conflict).txt"))
    answer = _methods(mem, docs).resolve({"path": "plans/q1.txt", "keep": "live"})
    assert answer == {"path": "plans/q1.txt", "keep": "live", "mirror": "Docs"}
    assert docs.conflicts.resolved == ["plans/q1.txt"] and mem.conflicts.resolved == []


def test_resolve_of_a_path_no_mirror_or_several_mirrors_hold_names_the_choices() -> None:
    mem = FakeMirror("OH-Memory", conflicts=("same.md",))
    docs = FakeMirror("Docs", conflicts=("same.md",))
    methods = _methods(mem, docs)
    with pytest.raises(InvalidParams) as caught:
        methods.resolve({"path": "nowhere.md", "keep": "live"})
    assert "not an open conflict of any mirror" in str(caught.value) and "--mirror" in str(caught.value)
    assert "OH-Memory (/home/me/OH-Memory)" in str(caught.value) and "Docs (/home/me/Docs)" in str(caught.value)
    with pytest.raises(InvalidParams) as caught:
        methods.resolve({"path": "same.md", "keep": "live"})
    assert "has conflicts in 2 mirrors" in str(caught.value) and "--mirror" in str(caught.value)
    assert mem.conflicts.resolved == docs.conflicts.resolved == []
    assert methods.resolve({"path": "same.md", "keep": "other", "mirror": "Docs"})["mirror"] == "Docs"
    assert docs.conflicts.resolved == ["same.md"]


def test_resolve_with_one_mirror_goes_to_it_whatever_the_path() -> None:
    only = FakeMirror("OH-Memory")  # its own resolve says when there is no such conflict
    assert _methods(only).resolve({"path": "a.md", "keep": "live"}) == {"path": "a.md", "keep": "live"}
