"""Requests per change: links reused while valid, read-back without a
download, a push that trusts the snapshot its pass just listed
(engine/client/links.py, engine/transfer.py).

Counts come from devserver's request counters; every test also checks that
the server holds exactly the bytes the mirror recorded as synced.
"""

from __future__ import annotations

import hashlib
import os

import pytest

from engine_helpers import USER, make_mirror
from ohsync.engine import transfer
from ohsync.engine.ids import seafile_file_id

UPDATE_LINKS = r"^GET /api2/repos/[^/]+/update-link/"
UPLOAD_LINKS = r"^GET /api2/repos/[^/]+/upload-link/"
UPDATES = r"^POST /seafhttp/update-api/"
UPLOADS = r"^POST /seafhttp/upload-api/"
DETAILS = r"^GET /api2/repos/[^/]+/file/detail/"
HISTORIES = r"^GET /api/v2.1/repos/[^/]+/file/history/"
DOWNLOADS = r"^GET /seafhttp/files/"


@pytest.fixture
def mirror(devserver, tmp_path):
    repo_id = devserver.create_library(USER, "OH-Memory")
    for i in range(3):
        devserver.put_file(repo_id, f"/journal/n{i}.md", f"note {i}\n".encode())
    m = make_mirror(devserver, repo_id, tmp_path)
    assert m.sync().errors == []
    return m


def save(m, devserver, rel: str, data: bytes):  # -> SyncReport
    m.write(rel, data)
    devserver.reset_counters()
    report = m.sync([rel])
    assert report.errors == [] and report.uploaded == [rel]
    assert devserver.read_file(m.repo_id, "/" + rel) == data
    base = m.state.get_base(rel)
    assert base is not None and base.remote_id == seafile_file_id(data)
    return report


def test_a_save_costs_four_requests_and_later_saves_reuse_the_link(devserver, mirror):
    save(mirror, devserver, "journal/n1.md", b"note 1\nfirst save\n")
    # head, update link, update, read-back by file id through the file's history (no download)
    assert devserver.request_count() == 4
    assert devserver.request_count(UPDATE_LINKS) == 1 and devserver.request_count(DOWNLOADS) == 0
    assert devserver.request_count(HISTORIES) == 1 and devserver.request_count(DETAILS) == 0
    for k in range(3):
        save(mirror, devserver, "journal/n1.md", f"note 1\nsave {k}\n".encode())
        assert devserver.request_count(UPDATE_LINKS) == 0
        assert devserver.request_count(UPDATES) == 1
        assert devserver.request_count(HISTORIES) == 1 and devserver.request_count(DETAILS) == 0  # the read-back
        assert devserver.request_count(DOWNLOADS) == 0
    # one update link serves every folder of the library
    save(mirror, devserver, "journal/n2.md", b"note 2\nelsewhere\n")
    devserver.put_file(mirror.repo_id, "/other/x.md", b"x\n")
    assert mirror.sync().errors == []
    save(mirror, devserver, "other/x.md", b"x\nlocal\n")
    assert devserver.request_count(UPDATE_LINKS) == 0


def test_an_expired_update_link_is_fetched_again_once(devserver, mirror):
    save(mirror, devserver, "journal/n1.md", b"note 1\nfirst\n")
    assert devserver.expire_links() >= 1
    save(mirror, devserver, "journal/n1.md", b"note 1\nsecond\n")
    assert devserver.request_count(UPDATE_LINKS) == 1
    assert devserver.request_count(UPDATES) == 2  # refused with the old link, stored with the new one
    save(mirror, devserver, "journal/n1.md", b"note 1\nthird\n")
    assert devserver.request_count(UPDATE_LINKS) == 0


def test_an_expired_upload_link_is_fetched_again_once(devserver, mirror):
    client = mirror.client
    first = client.upload(mirror.repo_id, "/journal/a.bin", b"\x00a")
    devserver.expire_links()
    devserver.reset_counters()
    second = client.upload(mirror.repo_id, "/journal/b.bin", b"\x00b")
    assert devserver.request_count(UPLOAD_LINKS) == 1 and devserver.request_count(UPLOADS) == 2
    devserver.reset_counters()
    client.upload(mirror.repo_id, "/journal/c.bin", b"\x00c")
    assert devserver.request_count(UPLOAD_LINKS) == 0 and devserver.request_count(UPLOADS) == 1
    tree = devserver.tree(mirror.repo_id)
    assert tree["/journal/a.bin"] == b"\x00a" and tree["/journal/b.bin"] == b"\x00b"
    assert (first.path, second.path) == ("/journal/a.bin", "/journal/b.bin")


def test_a_link_refused_twice_is_an_error_not_a_loop(devserver, mirror):
    save(mirror, devserver, "journal/n1.md", b"note 1\nfirst\n")
    devserver.expire_links()  # and every new link expires at once
    devserver.after_request("GET", r"/update-link/$", lambda srv: srv.expire_links(), count=5)
    mirror.write("journal/n1.md", b"note 1\nrefused\n")
    devserver.reset_counters()
    report = mirror.sync(["journal/n1.md"])  # that file fails this pass, and is retried later
    assert [p for p, _ in report.errors] == ["journal/n1.md"]
    assert devserver.request_count(UPDATES) == 2  # the cached link, then one new link
    assert mirror.state.get_base("journal/n1.md").remote_id == seafile_file_id(b"note 1\nfirst\n")
    devserver.clear_faults()
    mirror.engine.release_failures()
    report = mirror.sync(["journal/n1.md"])
    assert report.errors == [] and devserver.read_file(mirror.repo_id, "/journal/n1.md") == b"note 1\nrefused\n"


def test_read_back_downloads_when_the_server_id_is_not_our_content_hash(devserver, mirror, monkeypatch):
    """A server cutting blocks otherwise reports ids we cannot compute: the
    read-back then compares the downloaded bytes."""
    monkeypatch.setattr(transfer, "seafile_file_id", lambda data: "f" * 40)
    mirror.write("journal/n1.md", b"note 1\nchecked by download\n")
    devserver.reset_counters()
    assert mirror.sync(["journal/n1.md"]).errors == []
    assert devserver.request_count(DOWNLOADS) == 1
    assert devserver.read_file(mirror.repo_id, "/journal/n1.md") == b"note 1\nchecked by download\n"


def test_a_listing_past_its_trust_is_read_again(devserver, mirror, monkeypatch):
    """A push that may not take the entry from the listing asks the server first."""
    monkeypatch.setattr(transfer, "LISTING_TRUST", 0.0)
    save(mirror, devserver, "journal/n1.md", b"note 1\nslow pass\n")
    assert devserver.request_count(DETAILS) == 1  # before the update
    assert devserver.request_count(HISTORIES) == 1  # the read-back


def watcher_save(m, devserver, rel: str, data: bytes):  # -> SyncReport
    """A save as the daemon's watcher hands it on: a pass that does not look at the server."""
    m.write(rel, data)
    devserver.reset_counters()
    report = m.engine.sync([rel], check_remote=False)
    assert report.errors == [] and report.uploaded == [rel]
    assert devserver.read_file(m.repo_id, "/" + rel) == data
    base = m.state.get_base(rel)
    assert base is not None and base.remote_id == seafile_file_id(data)
    return report


def test_a_watcher_save_costs_the_update_and_the_read_back(devserver, mirror):
    """Long after the last poll the listing still vouches for a file we did not
    write since: no head and no file detail before the update."""
    save(mirror, devserver, "journal/n0.md", b"note 0\nlink fetched\n")  # the update link is cached now
    assert mirror.sync().errors == []  # a poll: the snapshot is listed at the head after that save
    mirror.engine.ctx.head_read_at -= 3600  # an hour later
    watcher_save(mirror, devserver, "journal/n1.md", b"note 1\nan hour later\n")
    assert devserver.request_count() == 2
    assert devserver.request_count(UPDATES) == 1 and devserver.request_count(HISTORIES) == 1
    # the update carried the head the snapshot was listed with
    assert devserver.request_count(f"update-api/.*head={mirror.state.get_meta('head')}") == 1


def _merged_through_sfconflict(mirror, devserver, local: bytes, merged: bytes) -> None:
    """Save ``local`` in a watcher pass over another writer's edit: the server
    keeps theirs live and ours as an SFConflict file, which the read-back finds
    and deletes; both sides end as ``merged``."""
    mirror.write("journal/n1.md", local)
    devserver.reset_counters()
    report = mirror.engine.sync(["journal/n1.md"], check_remote=False)
    assert report.errors == [] and report.merged == ["journal/n1.md"]
    assert devserver.request_count(r"DELETE /api2/repos/.*SFConflict") == 1  # ours, found by the read-back
    live = devserver.read_file(mirror.repo_id, "/journal/n1.md")
    assert live == merged == mirror.read("journal/n1.md")
    assert not [p for p in devserver.tree(mirror.repo_id) if "SFConflict" in p]


def test_a_file_saved_again_before_the_next_poll_is_sent_at_its_own_commit(devserver, mirror):
    """The read-back of a save names the commit that holds it (the file's
    history); the next save of that file before a poll carries that commit
    as its head: the update and the read-back again, nothing read first."""
    assert mirror.sync().errors == []
    watcher_save(mirror, devserver, "journal/n1.md", b"note 1\nfirst\n")
    commit = devserver.head_commit(mirror.repo_id)  # the first save's commit
    watcher_save(mirror, devserver, "journal/n1.md", b"note 1\nsecond\n")
    assert devserver.request_count() == 2, devserver.requests
    assert devserver.request_count(UPDATES) == 1 and devserver.request_count(HISTORIES) == 1
    assert devserver.request_count(f"update-api/.*head={commit}") == 1
    # another file is still updated at the listing's head, unread
    watcher_save(mirror, devserver, "journal/n2.md", b"note 2\nelsewhere\n")
    assert devserver.request_count() == 2 and devserver.request_count(DETAILS) == 0


def test_an_edit_landing_between_two_saves_of_ours_stays_live_and_merges(devserver, mirror):
    """Another client's edit after our first save: the second save, sent at
    the first save's commit, becomes an SFConflict file; the read-back finds
    it and the push merges both."""
    devserver.put_file(mirror.repo_id, "/journal/n1.md", b"one\ntwo\nthree\nfour\nfive\n")
    assert mirror.sync().errors == []
    watcher_save(mirror, devserver, "journal/n1.md", b"one desk\ntwo\nthree\nfour\nfive\n")
    devserver.put_file(mirror.repo_id, "/journal/n1.md", b"one desk\ntwo\nthree\nfour\nfive phone\n")
    _merged_through_sfconflict(mirror, devserver, b"one desk\ntwo desk\nthree\nfour\nfive\n",
                               b"one desk\ntwo desk\nthree\nfour\nfive phone\n")


def test_an_edit_landing_long_after_the_listing_stays_live_and_merges(devserver, mirror):
    """Another client's edit after the last poll: the update at the listing's
    head becomes an SFConflict file; the read-back finds it and the push merges."""
    devserver.put_file(mirror.repo_id, "/journal/n1.md", b"one\ntwo\nthree\nfour\nfive\n")
    assert mirror.sync().errors == []
    devserver.put_file(mirror.repo_id, "/journal/n1.md", b"one\ntwo\nthree\nfour\nfive phone\n")
    _merged_through_sfconflict(mirror, devserver, b"one desk\ntwo\nthree\nfour\nfive\n",
                               b"one desk\ntwo\nthree\nfour\nfive phone\n")


def test_a_file_deleted_on_the_server_since_the_listing_comes_back_with_the_edit(devserver, mirror):
    """Modification beats deletion: the update at the listing's head creates it again."""
    assert mirror.sync().errors == []
    devserver.delete_path(mirror.repo_id, "/journal/n1.md")
    watcher_save(mirror, devserver, "journal/n1.md", b"note 1\nedited while deleted there\n")


def test_an_edit_landing_after_the_pass_listed_stays_live_and_merges(devserver, mirror):
    """The push trusts the pass's listing; an edit landing right after it
    is kept by the server (the update carries the head) and merged next round."""
    devserver.put_file(mirror.repo_id, "/journal/n1.md", b"one\ntwo\nthree\nfour\nfive\n")
    assert mirror.sync().errors == []
    devserver.after_request("GET", r"^/api2/repos/[0-9a-f-]{36}/$", lambda srv: srv.put_file(
        mirror.repo_id, "/journal/n1.md", b"one\ntwo\nthree\nfour\nfive phone\n"))
    mirror.write("journal/n1.md", b"one desk\ntwo\nthree\nfour\nfive\n")
    devserver.reset_counters()
    report = mirror.sync(["journal/n1.md"])
    assert report.errors == []
    live = devserver.read_file(mirror.repo_id, "/journal/n1.md").decode()
    assert live == "one desk\ntwo\nthree\nfour\nfive phone\n"
    assert devserver.request_count(r"update-api/.*head=[0-9a-f]{40}") == 2  # the first became an SFConflict file
    assert mirror.read("journal/n1.md").decode() == live
    assert not [p for p in devserver.tree(mirror.repo_id) if "SFConflict" in p]


def test_a_new_file_raced_by_another_writer_is_merged_not_doubled(devserver, mirror):
    devserver.after_request("GET", r"^/api2/repos/[0-9a-f-]{36}/$", lambda srv: srv.put_file(
        mirror.repo_id, "/journal/new.md", b"from the phone\n"))
    mirror.write("journal/new.md", b"from the desk\n")
    report = mirror.sync(["journal/new.md"])
    assert report.errors == []
    tree = devserver.tree(mirror.repo_id)
    assert not [p for p in tree if " (1)" in p]
    live = tree["/journal/new.md"].decode()
    kept = live + "".join(v.decode() for p, v in tree.items() if p.startswith("/.conflict/"))
    assert "from the phone" in kept and "from the desk" in kept


# ---------------------------------------------------------------- cold mirror

def test_the_cheaper_cold_path_by_the_documented_rule():
    from ohsync.engine.sync.bulk import choose_path
    assert choose_path(1, 100, 100, 4) == "files"
    assert choose_path(2, 200, 200, 1) == "files"
    assert choose_path(3, 300, 300, 1) == "zip"  # 4 requests beat 6
    assert choose_path(8, 800, 800, 4) == "files"  # two rounds of 4 downloads beat the zip's 4 requests
    assert choose_path(19, 19_000, 19_000, 4) == "zip"
    # a zip that would carry 100 MB of files not wanted loses to 19 downloads
    assert choose_path(19, 19_000, 100 * 1024 * 1024, 4) == "files"


def _cold(devserver, tmp_path, count, executor=None, name="/d{d}/sub/n{i:03}.md"):
    repo_id = devserver.create_library(USER, "OH-Memory")
    files = {name.format(d=i % 5, i=i): f"note {i}\n".encode() * (i + 1) for i in range(count)}
    for path, data in files.items():
        devserver.put_file(repo_id, path, data)
    m = make_mirror(devserver, repo_id, tmp_path)
    m.engine.ctx.executor = executor
    devserver.reset_counters()
    report = m.sync()
    assert report.errors == []
    for path, data in files.items():
        assert (m.root / path.lstrip("/")).read_bytes() == data
        base = m.state.get_base(path.lstrip("/"))
        assert base is not None and base.remote_id == seafile_file_id(data)
    return m


def test_a_small_cold_mirror_takes_the_zip_without_a_pool(devserver, tmp_path):
    _cold(devserver, tmp_path, 19)
    assert devserver.request_count(r"/zip-task/") == 1
    assert devserver.request_count(DOWNLOADS) == 0
    assert devserver.request_count(r"/file/\?") == 0  # no per-file links


@pytest.mark.parametrize("flagged", [True, False], ids=["flagged UTF-8", "unflagged, as without the locale"])
def test_names_outside_ascii_come_from_the_zip_whether_or_not_it_flags_them_utf8(devserver, tmp_path, flagged):
    devserver.zip_utf8_flag = flagged  # the C file server flags them only where en_US.UTF-8 exists
    _cold(devserver, tmp_path, 19, name="/数学{d}/概率 é/大数定律：第{i}讲.md")
    assert devserver.request_count(r"/zip-task/") == 1
    assert devserver.request_count(DOWNLOADS) == 0  # every file matched its listed name in the zip


def test_a_few_files_come_down_in_parallel_on_the_pool(devserver, tmp_path):
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(4) as pool:
        m = _cold(devserver, tmp_path, 6, executor=pool)
    assert devserver.request_count(r"/zip-task/") == 0
    assert devserver.request_count(DOWNLOADS) == 6  # one each, and nothing downloaded twice
    assert not [p for p in m.root.rglob(".ohsync-tmp-*")]
    assert m.sync().transferred == 0


def _block_hashing_spy(monkeypatch) -> list[int]:
    """Bytes fed to any hasher's per-block sha1s from now on (the list's one item)."""
    from ohsync.engine import ids
    fed = [0]
    original = ids.ContentHasher.update_blocks

    def spy(self, data):
        if getattr(self, "blocks", True):
            fed[0] += len(memoryview(data).cast("B"))
        return original(self, data)
    monkeypatch.setattr(ids.ContentHasher, "update_blocks", spy)
    return fed


def test_downloads_hash_no_block_ids(devserver, tmp_path, monkeypatch):
    """A pull and the pool's downloads record the sha1 and the link's file id:
    the per-block sha1s would only cost CPU while the bytes arrive."""
    from concurrent.futures import ThreadPoolExecutor
    fed = _block_hashing_spy(monkeypatch)
    with ThreadPoolExecutor(4) as pool:
        m = _cold(devserver, tmp_path, 6, executor=pool)
        assert devserver.request_count(DOWNLOADS) == 6
        big = os.urandom(9 * 1024 * 1024)  # more than one 8 MiB block
        devserver.put_file(m.repo_id, "/d0/big.bin", big)
        assert m.sync().errors == []
    assert (m.root / "d0/big.bin").read_bytes() == big
    base = m.state.get_base("d0/big.bin")
    assert base is not None and base.sha1 == hashlib.sha1(big).hexdigest() and base.remote_id == seafile_file_id(big)
    assert fed[0] == 0


def test_a_failing_download_on_the_pool_falls_back_to_the_ordinary_pull(devserver, tmp_path):
    from concurrent.futures import ThreadPoolExecutor
    devserver.inject_fault("GET", r"^/seafhttp/files/", drop=True, count=2)
    with ThreadPoolExecutor(4) as pool:
        m = _cold(devserver, tmp_path, 5, executor=pool)
    assert not [p for p in m.root.rglob(".ohsync-tmp-*")]


def test_a_head_read_for_an_update_does_not_vouch_for_older_listings(devserver, mirror):
    """A watcher pass re-reads the head before updating a path it wrote; a
    remote edit of another path that this head already holds, but the
    snapshot does not, must be read and merged, never overwritten."""
    devserver.put_file(mirror.repo_id, "/journal/n2.md", b"one\ntwo\nthree\nfour\nfive\n")
    assert mirror.sync().errors == []
    save(mirror, devserver, "journal/n1.md", b"note 1\nfirst\n")  # n1 now needs a fresh head
    devserver.put_file(mirror.repo_id, "/journal/n2.md", b"one\ntwo\nthree\nfour\nfive phone\n")
    mirror.write("journal/n1.md", b"note 1\nsecond\n")
    mirror.write("journal/n2.md", b"one desk\ntwo\nthree\nfour\nfive\n")
    report = mirror.engine.sync(["journal/n1.md", "journal/n2.md"], check_remote=False)
    assert report.errors == []
    assert devserver.read_file(mirror.repo_id, "/journal/n2.md") == b"one desk\ntwo\nthree\nfour\nfive phone\n"


def test_new_files_uploaded_together_are_each_updated_on_a_fresh_head(devserver, mirror):
    """Files the pass created in one batch moved past the listing, every one
    of them: an edit of any is based on a head read after it (no false SFConflict)."""
    assert mirror.sync().errors == []
    for name in ("a", "b", "c"):
        mirror.write(f"journal/{name}.md", f"{name}\n".encode())
    assert mirror.engine.sync(["journal/a.md", "journal/b.md", "journal/c.md"], check_remote=False).errors == []
    watcher_save(mirror, devserver, "journal/c.md", b"c\nedited\n")
    assert devserver.request_count(UPDATES) == 1 and devserver.request_count("GET /api2/repos/{id}/") == 1
    assert not [p for p in devserver.tree(mirror.repo_id) if "SFConflict" in p]


def test_a_history_the_server_fails_to_read_leaves_the_read_back_to_the_detail(devserver, mirror):
    """The file's history is a walk the server may fail at: the save is
    still verified, by ``file/detail``, and nothing is reported as an error."""
    devserver.inject_fault("GET", r"/file/history/", status=500, count=10_000)
    save(mirror, devserver, "journal/n1.md", b"note 1\nsaved while the history fails\n")
    assert devserver.request_count(DETAILS) == 1
