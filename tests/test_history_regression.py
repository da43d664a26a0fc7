"""History going backwards (issue 12): when the library's head moves to a
commit that does not descend from the last head seen (a restore below
Seafile, a snapshot rollback), nothing newer is deleted or overwritten
locally, the server's older versions are archived, the mirror says so, and
``keep_newer`` (``ohsync resync``) puts the newer version from either side
back on both."""

from __future__ import annotations

import pytest

from daemon_helpers import DEMO_LIBRARY, wait_for
from engine_helpers import USER, mirrored, read_tree, synced_sample_mirror

REMOTE_EDITED = "tasks/申请 SRT 项目.md"
LOCAL_EDITED = "knowledge/哈希表冲突处理.md"
LOCAL_NEW = "knowledge/新笔记.md"
PHONE_EDITED = "preferences/沟通风格偏好.md"


@pytest.fixture
def rolled_back(devserver, tmp_path):
    """A mirror that synced newer versions, then a server restored to the first commit."""
    mirror = synced_sample_mirror(devserver, tmp_path)
    repo = mirror.repo_id
    snapshot = devserver.head_commit(repo)
    older = {rel: mirror.read(rel) for rel in (REMOTE_EDITED, LOCAL_EDITED, PHONE_EDITED)}

    newer = {}
    newer[REMOTE_EDITED] = older[REMOTE_EDITED] + "- [followup] 12 月 3 日导师回信了 #跟进\n".encode()
    devserver.put_file(repo, "/" + REMOTE_EDITED, newer[REMOTE_EDITED])
    newer[LOCAL_EDITED] = older[LOCAL_EDITED] + "- [note] 线性探测的聚集问题 #数据结构\n".encode()
    mirror.write(LOCAL_EDITED, newer[LOCAL_EDITED])
    newer[LOCAL_NEW] = "---\ntitle: 新笔记\n---\n\n# 新笔记\n\n## Observations\n- [idea] 新的想法 #想法\n".encode()
    mirror.write(LOCAL_NEW, newer[LOCAL_NEW])
    newer[PHONE_EDITED] = older[PHONE_EDITED] + "- [tone] 回答先给结论 #重要\n".encode()
    mirror.write(PHONE_EDITED, newer[PHONE_EDITED])
    report = mirror.sync()
    assert report.errors == [] and mirror.sync().transferred == 0
    assert all(devserver.read_file(repo, "/" + rel) == data for rel, data in newer.items())

    devserver.restore_to_commit(repo, snapshot)
    assert devserver.read_file(repo, "/" + LOCAL_EDITED) == older[LOCAL_EDITED]
    return mirror, older, newer


def test_rollback_keeps_newer_local_versions_and_archives_the_older_ones(devserver, rolled_back):
    mirror, older, newer = rolled_back
    repo = mirror.repo_id
    report = mirror.sync()
    for rel, data in newer.items():
        assert mirror.read(rel) == data, rel  # nothing rolled back, nothing deleted here
    assert report.deleted_local == [] and report.downloaded == []
    archived = {c.path: c.archived for c in report.conflicts}
    assert sorted(archived) == sorted([REMOTE_EDITED, LOCAL_EDITED, PHONE_EDITED])
    for rel, copy in archived.items():
        assert copy.startswith(".conflict/")
        assert mirror.read(copy) == older[rel] == devserver.read_file(repo, "/" + copy)
    sentence = mirror.engine.regression()
    assert sentence is not None and "went back to an older state" in sentence and "ohsync resync" in sentence
    # the next pass holds the same way, without archiving again
    again = mirror.sync()
    assert again.conflicts == [] and again.downloaded == [] and again.deleted_local == []
    assert mirror.engine.regression() == sentence


def test_keep_newer_puts_the_newer_version_from_either_side_on_both(devserver, rolled_back):
    mirror, older, newer = rolled_back
    repo = mirror.repo_id
    mirror.sync()
    # after the restore, the phone app edits its (older) copy of one file
    phone = older[PHONE_EDITED] + "- [tone] 少用感叹号 #风格\n".encode()
    devserver.put_file(repo, "/" + PHONE_EDITED, phone)
    mirror.sync()
    assert mirror.read(PHONE_EDITED) == newer[PHONE_EDITED]

    assert mirror.engine.keep_newer() == 4
    assert mirror.engine.regression() is None
    report = mirror.sync()
    assert report.deleted_local == [] and report.errors == []
    for rel in (REMOTE_EDITED, LOCAL_EDITED, LOCAL_NEW):
        assert mirror.read(rel) == newer[rel] == devserver.read_file(repo, "/" + rel), rel
    merged = mirror.read(PHONE_EDITED)  # newer on both sides: both kept
    assert "回答先给结论".encode() in merged and "少用感叹号".encode() in merged
    tree = read_tree(mirror.root)
    assert tree == mirrored(devserver.tree(repo))
    assert mirror.sync().transferred == 0


def test_no_push_outside_a_pass_merges_with_the_older_version(devserver, rolled_back):
    """Settling a conflict, restoring a delete, a filing's journal line: every
    push meets the server's older version of a held path and must not merge
    ours with it (our newer base against it would take the newer lines out)."""
    from ohsync.engine.regression import HeldByRollback
    from ohsync.engine.transfer import push

    mirror, older, newer = rolled_back
    repo = mirror.repo_id
    mirror.sync()
    ctx = mirror.engine.ctx
    edited = newer[REMOTE_EDITED] + "- [note] 又加了一行 #跟进\n".encode()
    mirror.write(REMOTE_EDITED, edited)
    with pytest.raises(HeldByRollback, match="ohsync resync"):
        push(ctx, REMOTE_EDITED, ctx.state.get_base(REMOTE_EDITED))
    assert mirror.read(REMOTE_EDITED) == edited
    assert devserver.read_file(repo, "/" + REMOTE_EDITED) == older[REMOTE_EDITED]
    mirror.engine.keep_newer()
    assert mirror.sync().errors == []
    assert devserver.read_file(repo, "/" + REMOTE_EDITED) == edited == mirror.read(REMOTE_EDITED)


def test_a_rollback_followed_by_many_commits_is_still_a_rollback(devserver, rolled_back):
    """More commits after the restore than the usual history read holds (a
    bot busy while this mirror was away): the deeper read still finds that
    the last head is not an ancestor, and nothing newer is rolled back."""
    from ohsync.engine.regression import MAX_PAGES, PER_PAGE

    mirror, older, newer = rolled_back
    repo = mirror.repo_id
    for n in range(MAX_PAGES * PER_PAGE + 20):
        devserver.put_file(repo, f"/bot/{n % 7}.md", f"run {n}\n".encode())
    report = mirror.sync()
    assert mirror.engine.regression() is not None
    for rel, data in newer.items():
        assert mirror.read(rel) == data, rel
    assert sorted(c.path for c in report.conflicts) == sorted([REMOTE_EDITED, LOCAL_EDITED, PHONE_EDITED])


def test_an_ordinary_new_head_is_not_a_regression(devserver, tmp_path):
    mirror = synced_sample_mirror(devserver, tmp_path)
    repo = mirror.repo_id
    devserver.delete_path(repo, "/" + LOCAL_EDITED)
    devserver.put_file(repo, "/" + REMOTE_EDITED, b"---\ntitle: x\n---\n")
    report = mirror.sync()
    assert report.deleted_local == [LOCAL_EDITED] and report.downloaded == [REMOTE_EDITED]
    assert mirror.engine.regression() is None


def test_devserver_restore_control_moves_the_head_back(devserver, tmp_path):
    import httpx

    repo = devserver.create_library(USER, "OH-Memory")
    first = devserver.head_commit(repo)
    devserver.put_file(repo, "/a.md", b"a")
    assert devserver.head_commit(repo) != first
    r = httpx.post(f"{devserver.url}/_devserver/libraries/{repo}/restore", json={"commit_id": first})
    assert r.status_code == 200 and r.json() == {"head": first}
    assert devserver.tree(repo) == {}
    assert [c["commit_id"] for c in devserver.history(repo)] == [first]
    r = httpx.post(f"{devserver.url}/_devserver/libraries/{repo}/restore", json={"commit_id": "0" * 40})
    assert r.status_code == 404


def test_a_memory_write_during_a_rollback_keeps_the_newer_lines_live(devserver, rolled_back):
    """An agent's append to a held file must not be merged against the
    server's older version (that would take the newer lines out of the live
    file): it stays in the mirror, the agent is told, and resync carries it."""
    from ohsync.engine.memory.tools import WritePlan
    from ohsync.engine.memory.writes import apply_write
    from ohsync.engine.regression import HeldByRollback

    mirror, older, newer = rolled_back
    repo = mirror.repo_id
    mirror.sync()  # holds the rollback
    line = "- [agent] 记下的新观察 #测试\n".encode()
    for rel in (REMOTE_EDITED, LOCAL_EDITED):
        with pytest.raises(HeldByRollback, match="ohsync resync"):
            apply_write(mirror.engine, rel, lambda data, rel=rel: WritePlan(rel, (data or b"") + line, {}))
        assert mirror.read(rel) == newer[rel] + line, rel  # newer lines and the agent's, live
        assert devserver.read_file(repo, "/" + rel) == older[rel], rel  # nothing pushed over the older one
    # a file the rollback did not touch is written and verified as usual
    untouched = "knowledge/回滚后的新条目.md"
    result = apply_write(mirror.engine, untouched, lambda data: WritePlan(untouched, b"# new\n" + line, {}),
                         create=True)
    assert result["verified"] is True and devserver.read_file(repo, "/" + untouched) == b"# new\n" + line

    mirror.engine.keep_newer()
    assert mirror.sync().errors == []
    for rel in (REMOTE_EDITED, LOCAL_EDITED):
        assert devserver.read_file(repo, "/" + rel) == newer[rel] + line == mirror.read(rel), rel


def test_daemon_names_the_state_and_resync_keeps_the_newer_side(seed_daemon, devserver):
    s = seed_daemon(tree=DEMO_LIBRARY, poll_interval=1.0)
    repo, mirror = s.repo_id, s.mirror
    snapshot = devserver.head_commit(repo)
    proc = s.start(wait="idle")
    rel = sorted(p.relative_to(mirror).as_posix() for p in mirror.rglob("*.md")
                 if "Files" not in p.parts and ".conflict" not in p.parts)[0]
    older = (mirror / rel).read_bytes()
    newer = older + "- [note] 恢复之前写下的新内容 #新\n".encode()
    (mirror / rel).write_bytes(newer)
    wait_for(lambda: devserver.tree(repo).get("/" + rel) == newer, timeout=60, what="the edit uploaded")
    proc.wait_state("idle", timeout=60)

    devserver.restore_to_commit(repo, snapshot)
    st = proc.wait_state("stopped", timeout=60)
    assert "went back to an older state" in st["message"] and "ohsync resync" in st["message"]
    assert st["mirrors"][0]["state"] == "stopped" and st["regression"] == st["message"]
    assert (mirror / rel).read_bytes() == newer

    r = proc.cli("resync")
    assert r.returncode == 0, r.stderr
    assert "keeping the newer version from either side" in r.stdout
    wait_for(lambda: devserver.tree(repo).get("/" + rel) == newer, timeout=60, what="the newer version back")
    # the server's older version is kept in /.conflict/ to look at: it needs the person, never "Up to date"
    st = proc.wait_state("attention", timeout=60)
    assert st["conflicts"] == 1 and "1 conflict needs you" in st["message"] and st["regression"] is None
    assert (mirror / rel).read_bytes() == newer


class _History:
    """A fake client whose history pages are given (newest first)."""

    def __init__(self, commits, per_page=2):
        from ohsync.engine.client.commits import CommitInfo

        self.commits = [CommitInfo(c, p, None, "r" * 40, t, "") for c, p, t in commits]
        self.per_page, self.pages = per_page, 0

    def commit_history(self, repo_id, *, page=1, per_page=100):
        self.pages += 1
        chunk = self.commits[(page - 1) * self.per_page: page * self.per_page]
        return chunk, len(self.commits) > page * self.per_page


def test_head_descends_reads_parents_and_stops_early():
    from ohsync.engine.regression import head_descends

    a, b, c, d = ("a" * 40, "b" * 40, "c" * 40, "d" * 40)
    chain = _History([(d, c, 40), (c, b, 30), (b, a, 20), (a, None, 10)])
    assert head_descends(chain, "r", b, 20, d) is True  # b is d's grandparent
    assert chain.pages == 1  # c names b as its parent on the first page
    assert head_descends(chain, "r", d, 40, d) is True and chain.pages == 1  # equal: no request
    rolled = _History([(b, a, 20), (a, None, 10)])
    assert head_descends(rolled, "r", d, 40, b) is False and rolled.pages == 1  # older than d at once
    same_second = _History([(b, a, 40), (a, None, 40)])
    assert head_descends(same_second, "r", d, 40, b) is False  # reached the first commit
    trimmed = _History([(d, c, 40), (c, b, 30)])
    assert head_descends(trimmed, "r", a, 0, d) is None  # history ends early: cannot tell
    long = _History([(d, c, 40), (c, b, 30), (b, a, 20), (a, None, 10)], per_page=1)
    assert head_descends(long, "r", a, 10, d, max_pages=2) is None  # a is past the pages read
    assert head_descends(long, "r", a, 10, d, max_pages=4) is True
