"""Stale writers: another client that read a file long ago keeps uploading
its edit of that old version through the ordinary update link (no ``head``),
once or in bursts, before, during or after our pushes.  Whatever we saved and
the server verified stays live, or is archived in ``/.conflict/`` with a
notice; never only in a local backup (``engine/merge/stale.py``)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from engine_helpers import USER, make_mirror

TEXT = "Files/notes/todo.txt"
V0 = b"line1\nline2\nline3\n"
JOURNAL = "notes/journal.md"
HEADER = b"---\ntitle: Journal\ntype: note\n---\n# Journal\n\n## Observations\n- [note] start #seed\n"


@pytest.fixture
def rid(devserver):
    return devserver.create_library(USER, "OH-Memory")


def kept(devserver, rid, rel: str) -> tuple[str, str]:
    """``(live text of rel, every /.conflict/ file's text joined)`` on the server."""
    tree = devserver.tree(rid)
    copies = "".join(v.decode("utf-8", "replace") for k, v in tree.items() if k.startswith("/.conflict/"))
    return tree.get("/" + rel, b"").decode("utf-8", "replace"), copies


def assert_kept(mirror, rel: str, lines, *, live_only=()) -> None:
    """Every one of ``lines`` is live on the server or in /.conflict/ there
    (then with a recorded conflict: the notice); ``live_only`` must be live;
    the mirror holds what the server holds."""
    live, copies = kept(mirror.server, mirror.repo_id, rel)
    lost = [ln for ln in lines if ln not in live and ln not in copies]
    assert lost == [], f"lines neither live nor in /.conflict/: {lost}\nlive:\n{live}"
    assert [ln for ln in live_only if ln not in live] == [], live
    if any(ln not in live for ln in lines):
        assert rel in [c.path for c in mirror.engine.conflicts()], "archived without a notice"
    assert mirror.read(rel).decode() == live


def settle(mirror, rounds: int = 4) -> None:
    """Sync until a pass moves nothing (bounded)."""
    for _ in range(rounds):
        report = mirror.sync()
        assert report.errors == []
        if report.transferred == 0:
            return
    raise AssertionError(f"{rounds} passes and still transferring")


def two_pushes_then_stale(devserver, rid, tmp_path, rel: str, v0: bytes, a: str, b: str, stale: str,
                          append=None):
    """Sync v0; save (or ``append``) line ``a``, synced; then ``b``, synced;
    then another client uploads its edit of v0 (``stale`` added) through the
    update link.  Returns the mirror and the activity events."""
    devserver.put_file(rid, "/" + rel, v0)
    mirror = make_mirror(devserver, rid, tmp_path)
    events = []
    mirror.engine.ctx.on_event = events.append
    assert mirror.sync().errors == []
    for line in (a, b):
        if append is not None:
            append(mirror, rel, line)
        else:
            mirror.write(rel, mirror.read(rel) + (line + "\n").encode())
            assert mirror.sync([rel]).errors == []
        assert devserver.read_file(rid, "/" + rel).decode().endswith(line + "\n")
    burst = devserver.stale_burst(rid, "/" + rel, 1, old=v0, line=stale + "\n")
    assert burst.errors == [] and len(burst.ids) == 1
    return mirror, events


def test_plain_text_two_pushes_behind_keeps_both_of_ours(devserver, rid, tmp_path):
    mirror, events = two_pushes_then_stale(devserver, rid, tmp_path, TEXT, V0, "LINE-A", "LINE-B", "LINE-R")
    settle(mirror)
    assert_kept(mirror, TEXT, ["LINE-A", "LINE-B", "LINE-R", "line1"], live_only=["LINE-A", "LINE-B"])
    said = [e.message or "" for e in events if e.path == TEXT and e.kind == "synced"]
    assert any("2 of our uploads" in m for m in said), said


def test_memory_file_two_pushes_behind_merges_every_line(devserver, rid, tmp_path):
    a, b, r = "- [note] LINE-A #desk", "- [note] LINE-B #desk", "- [note] LINE-R #bot"
    mirror, _ = two_pushes_then_stale(devserver, rid, tmp_path, JOURNAL, HEADER, a, b, r)
    settle(mirror)
    assert_kept(mirror, JOURNAL, [a, b, r], live_only=[a, b, r, "start #seed"])  # observations merge as a union
    assert mirror.engine.conflicts() == []


def _memory_append(mirror, rel: str, line: str) -> None:
    from ohsync.engine.memory.tools import WritePlan
    from ohsync.engine.memory.writes import apply_write

    result = apply_write(mirror.engine, rel, lambda data: WritePlan(rel, (data or b"") + (line + "\n").encode(), {}))
    assert result["verified"] is True


def test_memory_append_two_pushes_behind_merges_every_line(devserver, rid, tmp_path):
    a, b, r = "- [note] LINE-A #agent", "- [note] LINE-B #agent", "- [note] LINE-R #bot"
    mirror, _ = two_pushes_then_stale(devserver, rid, tmp_path, JOURNAL, HEADER, a, b, r, append=_memory_append)
    c = "- [note] LINE-C #agent"
    _memory_append(mirror, JOURNAL, c)  # the next append meets the stale overwrite first
    assert_kept(mirror, JOURNAL, [a, b, c, r], live_only=[a, b, c, r])
    settle(mirror)
    assert_kept(mirror, JOURNAL, [a, b, c, r], live_only=[a, b, c, r])


LOCAL = "- [note] saved at the desk #desk"


def _synced_journal(devserver, rid, tmp_path):
    devserver.put_file(rid, "/" + JOURNAL, HEADER)
    mirror = make_mirror(devserver, rid, tmp_path)
    assert mirror.sync().errors == []
    return mirror


def _save_and_push(mirror, line: str) -> None:
    mirror.write(JOURNAL, mirror.read(JOURNAL) + (line + "\n").encode())
    assert mirror.sync([JOURNAL]).errors == []


def _burst_lines(burst) -> list[str]:
    return [burst.line.format(i=i).strip() for i in range(burst.count)]


def test_stale_burst_before_our_push(devserver, rid, tmp_path):
    mirror = _synced_journal(devserver, rid, tmp_path)
    burst = devserver.stale_burst(rid, "/" + JOURNAL, 6, old=HEADER, spacing_ms=5)
    assert len(burst.ids) == 6
    _save_and_push(mirror, LOCAL)
    settle(mirror)
    assert_kept(mirror, JOURNAL, [LOCAL, _burst_lines(burst)[-1]], live_only=[LOCAL])


def test_stale_burst_after_our_push(devserver, rid, tmp_path):
    mirror = _synced_journal(devserver, rid, tmp_path)
    _save_and_push(mirror, LOCAL)
    burst = devserver.stale_burst(rid, "/" + JOURNAL, 11, old=HEADER, spacing_ms=5)
    assert len(burst.ids) == 11
    settle(mirror)
    assert_kept(mirror, JOURNAL, [LOCAL, _burst_lines(burst)[-1]], live_only=[LOCAL, _burst_lines(burst)[-1]])


def test_stale_burst_during_our_push(devserver, rid, tmp_path):
    """Overwrites from the version both read land before our read, between
    our read and our update (the update's head keeps them live) and after
    our upload was verified."""
    mirror = _synced_journal(devserver, rid, tmp_path)
    first = devserver.stale_burst(rid, "/" + JOURNAL, 3, old=HEADER, spacing_ms=5, line="- [note] early {i} #bot\n")
    later = []
    devserver.after_request("GET", r"/update-link/", lambda srv: later.append(
        srv.stale_burst(rid, "/" + JOURNAL, 4, old=HEADER, line="- [note] crossing {i} #bot\n")))
    theirs = {devserver.file_id(rid, "/" + JOURNAL), *first.ids}

    def after_ours_verified(srv):
        # the read-back just saw a revision of ours live: overwrite it right after
        if len(later) == 1 and srv.file_id(rid, "/" + JOURNAL) not in theirs | set(later[0].ids):
            later.append(srv.stale_burst(rid, "/" + JOURNAL, 4, old=HEADER, spacing_ms=10,
                                         line="- [note] late {i} #bot\n"))
    devserver.after_request("GET", r"/file/detail/|/file/history/", after_ours_verified, count=50)
    mirror.write(JOURNAL, mirror.read(JOURNAL) + (LOCAL + "\n").encode())
    mirror.sync([JOURNAL])
    for burst in later:
        burst.wait()
    assert later and all(len(b.ids) == b.count for b in [first, *later])
    settle(mirror, rounds=6)
    history = [r.file_id for r in mirror.client.file_history(rid, "/" + JOURNAL, limit=100)]
    bursts = {i: b.line.format(i=n).strip() for b in [first, *later] for n, i in enumerate(b.ids)}
    ours = [k for k, fid in enumerate(history) if fid not in bursts][:-1]  # newest first; the last is HEADER
    stale = [k for k, fid in enumerate(history) if fid in bursts]
    assert ours and min(stale) < max(ours) < max(stale), "the overwrites did not cross our push"
    newest_stale = bursts[history[min(stale)]]
    assert_kept(mirror, JOURNAL, [LOCAL, newest_stale], live_only=[LOCAL])


def test_without_file_history_the_kept_versions_decide(devserver, rid, tmp_path):
    devserver.inject_fault("GET", r"/file/history/", status=404, count=10**6)  # neither endpoint exists
    a, b, r = "- [note] LINE-A #desk", "- [note] LINE-B #desk", "- [note] LINE-R #bot"
    mirror, events = two_pushes_then_stale(devserver, rid, tmp_path, JOURNAL, HEADER, a, b, r)
    settle(mirror)
    assert_kept(mirror, JOURNAL, [a, b, r], live_only=[a, b, r])
    said = [e.message or "" for e in events if e.kind == "synced"]
    assert any("2 of our uploads" in m and "on purpose" in m for m in said), said
    assert devserver.request_count(r"GET /api/v2.1/repos/[^/]+/file/history/") >= 1  # it was asked, and 404


def test_an_edit_of_a_later_version_that_removes_our_line_is_pulled(devserver, rid, tmp_path):
    """Another client edits the version after ours (adds its line), then one
    that read *that* removes our line: made from a version that held ours, so
    a deliberate removal, pulled as usual."""
    mirror = _synced_journal(devserver, rid, tmp_path)
    _save_and_push(mirror, LOCAL)
    phone = HEADER + (LOCAL + "\n- [note] from the phone #phone\n").encode()
    devserver.put_file(rid, "/" + JOURNAL, phone)
    settle(mirror)
    tidied = HEADER + b"- [note] from the phone #phone\n"
    devserver.put_file(rid, "/" + JOURNAL, tidied)
    report = mirror.sync()
    assert report.errors == [] and JOURNAL in report.downloaded and JOURNAL not in report.merged
    assert mirror.read(JOURNAL) == tidied == devserver.read_file(rid, "/" + JOURNAL)


def test_daemon_keeps_a_local_edit_made_during_a_burst_of_twenty(seed_daemon, devserver):
    """As seen on a real server: 20 overwrites from the version read earlier,
    one every 50 ms, and a local edit 1 s into the burst."""
    from daemon_helpers import wait_for

    s = seed_daemon(files={JOURNAL: HEADER}, poll_interval=0.5)
    daemon = s.start(wait="idle")
    journal = s.mirror / JOURNAL
    first = "- [note] before the burst #desk"
    journal.write_bytes(journal.read_bytes() + (first + "\n").encode())
    wait_for(lambda: first in devserver.read_file(s.repo_id, "/" + JOURNAL).decode(), timeout=60,
             what="the first local line uploaded")
    burst = devserver.stale_burst(s.repo_id, "/" + JOURNAL, 20, old=HEADER, spacing_ms=50, wait=False)
    wait_for(lambda: len(burst.ids) >= 20 * 1000 // 1050 or burst.done.is_set(), timeout=30,
             what="1 s into the burst")
    during = "- [note] during the burst #desk"
    journal.write_bytes(journal.read_bytes() + (during + "\n").encode())
    assert len(burst.wait()) == 20 and burst.errors == []
    last = burst.line.format(i=19).strip()

    def settled() -> bool:
        live = devserver.read_file(s.repo_id, "/" + JOURNAL).decode()
        return all(x in live for x in (first, during, last)) and journal.read_bytes().decode() == live
    wait_for(settled, timeout=90, what="both local lines and the burst's last line live on both sides")
    daemon.wait_state("idle", timeout=60)
    assert daemon.status()["conflicts"] == 0


# ----------------------------------------------------------------------------- property

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

#: One step: a local save (synced later), a save pushed at once (memory.append), a pass, or
#: another client's overwrite made from the n-th server version seen so far (counted back).
_STEPS = st.lists(st.one_of(st.just(("save",)), st.just(("append",)), st.just(("sync",)),
                            st.tuples(st.just("stale"), st.integers(min_value=0, max_value=6))),
                  min_size=1, max_size=10)


def _interleave(devserver, work, rel: str, v0: bytes, steps) -> None:
    """Run ``steps`` on a new library holding ``rel`` = ``v0``, settle, and
    check that every line a local save added is live or archived with a notice."""
    repo = devserver.create_library(USER, "OH-Memory")
    devserver.put_file(repo, "/" + rel, v0)
    mirror = make_mirror(devserver, repo, work)
    try:
        assert mirror.sync().errors == []
        seen = [v0]  # server versions, oldest first
        saved = []
        for n, step in enumerate(steps):
            if step[0] in ("save", "append"):
                saved.append(f"- [note] saved {n} #desk")
                if step[0] == "append" and rel == JOURNAL:
                    _memory_append(mirror, rel, saved[-1])
                else:
                    mirror.write(rel, mirror.read(rel) + (saved[-1] + "\n").encode())
            elif step[0] == "sync":
                assert mirror.sync().errors == []
            else:
                old = seen[max(0, len(seen) - 1 - step[1])]
                devserver.stale_burst(repo, "/" + rel, 1, old=old, line=f"- [note] stale {n} #bot\n")
            live = devserver.read_file(repo, "/" + rel)
            if live != seen[-1]:
                seen.append(live)
        settle(mirror, rounds=6)
        assert_kept(mirror, rel, saved)
    finally:
        mirror.state.close()
        mirror.client.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_STEPS)
def test_any_interleaving_of_saves_and_stale_overwrites_keeps_every_saved_line(devserver, tmp_path_factory, steps):
    _interleave(devserver, tmp_path_factory.mktemp("interleaving"), JOURNAL, HEADER, steps)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=_STEPS)
def test_plain_text_interleavings_keep_every_saved_line_live_or_archived(devserver, tmp_path_factory, steps):
    _interleave(devserver, tmp_path_factory.mktemp("interleaving"), TEXT, V0, steps)


def test_a_writer_putting_back_an_earlier_revision_of_ours_keeps_our_newer_lines(devserver, rid, tmp_path):
    mirror = _synced_journal(devserver, rid, tmp_path)
    _save_and_push(mirror, "- [note] first #desk")
    earlier = devserver.read_file(rid, "/" + JOURNAL)
    _save_and_push(mirror, "- [note] second #desk")
    devserver.stale_burst(rid, "/" + JOURNAL, 1, old=earlier, line="")  # writes back what it read: ours, one behind
    settle(mirror)
    assert_kept(mirror, JOURNAL, ["first #desk", "second #desk"], live_only=["first #desk", "second #desk"])


def test_a_stale_write_after_a_remote_delete_keeps_our_recreated_file(devserver, rid, tmp_path):
    """The other client read v0, then the file was deleted on the server while we had an unsynced
    edit (modification beats deletion: ours goes up as a new file); the other client then uploads
    its edit of v0 over it.  Our line stays live or in /.conflict/, never only in a backup."""
    devserver.put_file(rid, "/" + TEXT, V0)
    mirror = make_mirror(devserver, rid, tmp_path)
    assert mirror.sync().errors == []
    mirror.write(TEXT, V0 + b"LINE-A\n")  # saved here, not synced yet
    devserver.delete_path(rid, "/" + TEXT)
    settle(mirror)
    assert devserver.read_file(rid, "/" + TEXT) == V0 + b"LINE-A\n"  # ours went up again
    devserver.put_file(rid, "/" + TEXT, V0 + b"LINE-R\n")  # the other client's edit of the old v0
    settle(mirror)
    assert_kept(mirror, TEXT, ["LINE-A", "LINE-R"])


def test_a_stale_write_older_than_every_push_on_record_keeps_our_lines(devserver, rid, tmp_path):
    """More of our pushes came after the other client's read than the record keeps: what it read
    is not known, and every line of ours still stays live or in /.conflict/."""
    from ohsync.engine.merge.stale import MAX_PUSHES

    devserver.put_file(rid, "/" + TEXT, V0)
    mirror = make_mirror(devserver, rid, tmp_path)
    assert mirror.sync().errors == []
    ours = [f"LOCAL-{i}" for i in range(MAX_PUSHES + 4)]
    for line in ours:
        mirror.write(TEXT, mirror.read(TEXT) + (line + "\n").encode())
        assert mirror.sync([TEXT]).errors == []
    burst = devserver.stale_burst(rid, "/" + TEXT, 1, old=V0, line="LINE-R\n")
    assert burst.errors == []
    settle(mirror)
    assert_kept(mirror, TEXT, ours + ["LINE-R"])
