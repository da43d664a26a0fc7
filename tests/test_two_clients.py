"""Two ohsync clients mirroring one library (a laptop and a desktop) save the
same file within milliseconds of each other, a few rounds in a row.

Both mirrors and the server must end with the same files: edits that merge
(lines far apart in a text file, observations appended to a memory file)
merged into the live file with no conflict copy; edits that do not merge
(two lines appended at the end of a plain text file) kept as one conflict
copy per meeting in ``/.conflict/``, the other line live, and never a pause
("two writers keep changing it") nor a cascade of copies. The engine test
shows the step that used to start the cascade: the client whose upload the
other archived took the other's version for a stale overwrite and archived
it in turn.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import USER, DaemonProc, DaemonSetup, Env, mirrored, read_tree, wait_for, write_config  # noqa: E402
from engine_helpers import make_mirror  # noqa: E402

from ohsync.engine.merge.stale import ARCHIVED_ELSEWHERE, has_pushes  # noqa: E402

TEXT = "".join(f"line {i}\n" for i in range(1, 21))
MEMORY = """---
title: log
type: journal
permalink: log
created: 2026-10-01T09:30:00+08:00
modified: 2026-10-01T09:30:00+08:00
origin: bot
sensitivity: normal
---

# log

## Observations
- [life] 2026-10-01 09:30 first day
"""


class Pair:
    """Two daemons, A (the seeded setup's env) and B (an env of its own), on one library."""

    def __init__(self, setup: DaemonSetup, env_b: Env, mirror_b: Path) -> None:
        self.s, self.env_b, self.a_root, self.b_root = setup, env_b, setup.mirror, mirror_b
        self.a: DaemonProc | None = None
        self.b: DaemonProc | None = None

    def start(self) -> None:
        self.a = self.s.start(wait="idle")
        write_config(self.env_b, self.s.srv.url, USER, self.b_root, poll_interval=1.0, library=self.s.library)
        self.b = self.s.start(env=self.env_b, wait="idle")

    def server(self) -> dict[str, bytes]:
        return mirrored(self.s.srv.tree(self.s.repo_id))

    def settled(self) -> bool:
        assert self.a is not None and self.b is not None
        server = self.server()
        if not (read_tree(self.a_root) == read_tree(self.b_root) == server):
            return False
        return all(d.status()["state"] in ("idle", "attention") for d in (self.a, self.b))

    def wait_settled(self, timeout: float = 90) -> dict[str, bytes]:
        try:
            wait_for(self.settled, timeout=timeout, interval=0.3, what="both mirrors equal to the server")
            # still equal a few polls later (nothing left in flight)
            wait_for(self.settled, timeout=timeout, interval=2.5, what="both mirrors equal to the server again")
        except AssertionError as exc:
            assert self.a is not None and self.b is not None
            raise AssertionError(
                f"{exc}\nA: {self._diff(self.a_root)}\nB: {self._diff(self.b_root)}\n"
                f"A status: {self.a.status()}\nB status: {self.b.status()}\n"
                f"--- A ---\n{self.a.output()[-3000:]}\n--- B ---\n{self.b.output()[-3000:]}") from None
        return self.server()

    def _diff(self, root: Path) -> dict[str, Any]:
        here, there = read_tree(root), self.server()
        return {p: (here.get(p), there.get(p)) for p in sorted(set(here) | set(there)) if here.get(p) != there.get(p)}

    def save_both(self, rel: str, edit_a: Any, edit_b: Any) -> None:
        """Save ``rel`` in both mirrors at (nearly) the same moment; ``edit_*`` map old text to new."""
        go = threading.Barrier(2)

        def save(root: Path, edit: Any) -> None:
            path = root / rel
            new = edit(path.read_text(encoding="utf-8"))
            go.wait()
            path.write_text(new, encoding="utf-8")

        threads = [threading.Thread(target=save, args=(root, edit))
                   for root, edit in ((self.a_root, edit_a), (self.b_root, edit_b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def conflicts(self) -> dict[str, list[dict[str, Any]]]:
        assert self.a is not None and self.b is not None
        return {"a": self.a.client().call("conflicts"), "b": self.b.client().call("conflicts")}


@pytest.fixture
def pair(seed_daemon, tmp_path: Path) -> Iterator[Pair]:
    setup = seed_daemon(files={"notes.txt": TEXT.encode(), "journal/log.md": MEMORY.encode()})
    other = tmp_path / "desktop"
    other.mkdir()
    sock_dir = Path(tempfile.mkdtemp(prefix="ohs-", dir="/tmp"))
    env_b = Env(root=other, sock_dir=sock_dir, keyring_file=setup.env.keyring_file, config=other / "config.toml")
    p = Pair(setup, env_b, tmp_path / "mirror-b")
    try:
        yield p
    finally:
        setup.stop_all()
        shutil.rmtree(sock_dir, ignore_errors=True)


def _copies(tree: dict[str, bytes]) -> dict[str, bytes]:
    return {p: d for p, d in tree.items() if p.startswith("/.conflict/")}


def test_edits_that_merge_converge_with_no_conflict_copy(pair: Pair) -> None:
    pair.start()
    pair.wait_settled()
    for rnd in range(3):
        pair.save_both("notes.txt",
                       lambda t, r=rnd: t.replace("line 2\n", f"line 2\nlaptop {r}\n"),
                       lambda t, r=rnd: t.replace("line 19\n", f"line 19\ndesktop {r}\n"))
        pair.save_both("journal/log.md",
                       lambda t, r=rnd: t + f"- [life] 2026-10-0{r + 2} 10:00 laptop note {r}\n",
                       lambda t, r=rnd: t + f"- [life] 2026-10-0{r + 2} 11:00 desktop note {r}\n")
        server = pair.wait_settled()
        notes = server["/notes.txt"].decode()
        log = server["/journal/log.md"].decode()
        for r in range(rnd + 1):
            assert f"laptop {r}\n" in notes and f"desktop {r}\n" in notes, notes
            assert f"laptop note {r}" in log and f"desktop note {r}" in log, log
        assert _copies(server) == {}, list(server)
    conflicts = pair.conflicts()
    assert conflicts == {"a": [], "b": []}


def test_edits_that_do_not_merge_keep_one_copy_each_time_and_converge(pair: Pair) -> None:
    pair.start()
    pair.wait_settled()
    for rnd in range(3):
        pair.save_both("notes.txt", lambda t, r=rnd: t + f"laptop {r}\n", lambda t, r=rnd: t + f"desktop {r}\n")
        server = pair.wait_settled()
        copies = _copies(server)
        assert len(copies) == rnd + 1, list(server)  # one copy per meeting, not a cascade
        everything = server["/notes.txt"].decode() + "".join(d.decode() for d in copies.values())
        for r in range(rnd + 1):
            assert f"laptop {r}\n" in everything and f"desktop {r}\n" in everything, everything
    # both people are told: the side that archived the other's version and the
    # side whose version was archived list every copy, each once
    listed = pair.conflicts()
    copies = sorted(p.lstrip("/") for p in _copies(pair.server()))
    for side in ("a", "b"):
        assert sorted(c["archived"] for c in listed[side]) == copies, listed[side]
        assert {c["path"] for c in listed[side]} == {"notes.txt"}


def test_an_upload_the_other_client_archived_is_not_merged_back(devserver, tmp_path: Path) -> None:
    rid = devserver.create_library(USER, "OH-Memory")
    devserver.put_file(rid, "/notes.txt", TEXT.encode())
    laptop, desktop = make_mirror(devserver, rid, tmp_path, "laptop"), make_mirror(devserver, rid, tmp_path, "desktop")
    try:
        assert not laptop.sync().errors and not desktop.sync().errors
        ours, theirs = (TEXT + "laptop\n").encode(), (TEXT + "desktop\n").encode()
        laptop.write("notes.txt", ours)
        assert laptop.sync().uploaded == ["notes.txt"]
        desktop.write("notes.txt", theirs)  # saved before the desktop saw the laptop's upload
        report = desktop.sync()
        assert [c.path for c in report.conflicts] == ["notes.txt"]  # two appends at one place do not merge
        (copy,) = [p for p in devserver.tree(rid) if p.startswith("/.conflict/")]
        assert devserver.read_file(rid, copy) == ours and devserver.read_file(rid, "/notes.txt") == theirs

        report = laptop.sync()
        assert report.conflicts == [] and report.merged == [], report  # nothing archived or merged back
        assert laptop.read("notes.txt") == theirs and laptop.read(copy.lstrip("/")) == ours
        assert [p for p in devserver.tree(rid) if p.startswith("/.conflict/")] == [copy]
        # the laptop's person is told where their version went, once
        assert [(c.path, c.archived, c.reason) for c in laptop.engine.conflicts()] == [
            ("notes.txt", copy.lstrip("/"), ARCHIVED_ELSEWHERE)]
        assert not has_pushes(laptop.engine.ctx, "notes.txt")  # accounted for by the copy

        # later edits of the desktop's version are pulled as they are, even once the copy is settled
        desktop.state.forget_conflicts([copy.lstrip("/")])
        (desktop.root / copy.lstrip("/")).unlink()
        later = theirs + b"desktop again\n"
        desktop.write("notes.txt", later)
        assert not desktop.sync().errors
        assert copy not in devserver.tree(rid)
        report = laptop.sync()
        assert report.conflicts == [] and report.merged == [] and report.uploaded == [], report
        assert laptop.read("notes.txt") == later == devserver.read_file(rid, "/notes.txt")
        assert laptop.engine.conflicts() == []  # its copy is gone from both sides: settled
        assert desktop.sync().downloaded == [] and read_tree(desktop.root) == read_tree(laptop.root)
    finally:
        for m in (laptop, desktop):
            m.state.close()
            m.client.close()
