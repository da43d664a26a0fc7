"""A push of ours that the server holds but the state never recorded still
guards the person's lines against a stale overwrite.

A stale (blind) overwrite is merged back because the engine keeps a record
of its verified pushes (``engine/merge/stale.py``).  A push can reach the
server without that record: the daemon killed after the upload, or the
upload's answer lost after the server applied it (the chaos profile's
``lost-answer`` fault).  The next pass then finds the server holding exactly
the local bytes and adopts them as synced — and when the other client's
upload of the version it had read earlier arrives, it used to be pulled as a
plain download: the person's line went to ``state_dir/backups/`` only.
Adopting our own bytes now records them as a push of ours.
"""
from __future__ import annotations

import pytest

from breaker_helpers import synced_small
from engine_helpers import make_mirror, mirrored, read_tree
from ohsync.engine.crashpoints import set_hook

BASE = b"one\ntwo\nthree\nfour\nfive\n"


class Killed(BaseException):
    """Stands for SIGKILL at an engine crash point (nothing after it runs)."""


def _kill_at(point: str) -> None:
    def hook(name: str) -> None:
        if name == point:
            set_hook(None)
            raise Killed(point)
    set_hook(hook)


def _sync_killed_at(m, point: str) -> None:
    """A pass of ``m`` killed at the crash point ``point``."""
    _kill_at(point)
    try:
        with pytest.raises(Killed):
            m.sync()
    finally:
        set_hook(None)


def _settled(m) -> None:
    for _ in range(3):
        m.sync()
    assert read_tree(m.root) == mirrored(m.server.tree(m.repo_id))


@pytest.mark.parametrize("point", ["push.uploaded", "push.verified"])
def test_a_push_killed_before_it_was_recorded_still_merges_a_stale_overwrite_back(devserver, tmp_path,
                                                                                  point: str) -> None:
    m = synced_small(devserver, tmp_path, {"/docs/a.txt": BASE})
    read_by_other = devserver.read_file(m.repo_id, "/docs/a.txt")       # the other client reads
    m.write("docs/a.txt", BASE + b"local line\n")
    _sync_killed_at(m, point)
    assert devserver.read_file(m.repo_id, "/docs/a.txt") == BASE + b"local line\n"   # it reached the server
    m.state.close()
    m = make_mirror(devserver, m.repo_id, tmp_path)                    # the daemon starts again
    m.sync()                                                           # finds its own bytes there
    devserver.put_file(m.repo_id, "/docs/a.txt", b"zero\n" + read_by_other)   # blind: from before ours
    _settled(m)
    for data in (m.read("docs/a.txt"), devserver.read_file(m.repo_id, "/docs/a.txt")):
        assert b"local line" in data and b"zero" in data, data


def test_a_push_whose_answer_was_lost_still_merges_a_stale_overwrite_back(devserver, tmp_path) -> None:
    m = synced_small(devserver, tmp_path, {"/docs/a.txt": BASE})
    read_by_other = devserver.read_file(m.repo_id, "/docs/a.txt")
    m.write("docs/a.txt", BASE + b"local line\n")
    # the server applies the update, then its answer is lost (every retry too)
    devserver.inject_fault("POST", r"/seafhttp/", status=500, after_processing=True, count=5)
    m.sync()
    devserver.clear_faults()
    assert devserver.read_file(m.repo_id, "/docs/a.txt") == BASE + b"local line\n"
    m.engine.failure_book.succeeded("docs/a.txt")                     # its backoff is over
    m.sync()
    devserver.put_file(m.repo_id, "/docs/a.txt", b"zero\n" + read_by_other)
    _settled(m)
    for data in (m.read("docs/a.txt"), devserver.read_file(m.repo_id, "/docs/a.txt")):
        assert b"local line" in data and b"zero" in data, data


def test_bytes_both_sides_reached_on_their_own_are_not_taken_for_a_push_of_ours(devserver, tmp_path) -> None:
    # the same edit made on both sides, then the other client removes a line on purpose
    # from that version: its removal stands (nothing of ours is lacking)
    m = synced_small(devserver, tmp_path, {"/docs/a.txt": BASE})
    devserver.put_file(m.repo_id, "/docs/a.txt", BASE + b"same\n")
    m.write("docs/a.txt", BASE + b"same\n")
    m.sync()
    devserver.put_file(m.repo_id, "/docs/a.txt", BASE.replace(b"three\n", b"") + b"same\n")
    _settled(m)
    assert m.read("docs/a.txt") == BASE.replace(b"three\n", b"") + b"same\n"



NOTE = b"---\ntitle: Note\ntype: note\n---\n# Note\n\n## Observations\n- [seed] first #seed\n"


@pytest.mark.parametrize("point", ["push.uploaded", "push.verified"])
def test_a_save_after_an_unrecorded_push_keeps_both_lines_through_a_stale_overwrite(devserver, tmp_path,
                                                                                    point: str) -> None:
    # Killed after the upload reached the server, before it was recorded; the
    # person saves again before the daemon starts. Its next push merges the
    # server's version (our unrecorded one) in, so the record shows that
    # version as what the push replaced: a stale overwrite from before both
    # lacks its lines, and they are ours all the same.
    first, second = b"- [note] local line #desk\n", b"- [note] saved while stopped #desk\n"
    m = synced_small(devserver, tmp_path, {"/notes/a.md": NOTE})
    read_by_other = devserver.read_file(m.repo_id, "/notes/a.md")
    m.write("notes/a.md", NOTE + first)
    _sync_killed_at(m, point)
    assert devserver.read_file(m.repo_id, "/notes/a.md") == NOTE + first
    m.write("notes/a.md", NOTE + first + second)
    m.state.close()
    m = make_mirror(devserver, m.repo_id, tmp_path)
    m.sync()
    assert devserver.read_file(m.repo_id, "/notes/a.md") == NOTE + first + second
    devserver.put_file(m.repo_id, "/notes/a.md", read_by_other + b"- [note] the bot's #bot\n")  # from before both
    _settled(m)
    for data in (m.read("notes/a.md"), devserver.read_file(m.repo_id, "/notes/a.md")):
        assert first in data and second in data and b"the bot's" in data, data
