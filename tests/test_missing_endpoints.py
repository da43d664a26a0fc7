"""A server without the optional endpoints (file history, commit details:
404) is a capability noted once and worked around, never a failed file.

devserver's switch for such a server is a lasting 404 fault on those
endpoints (``inject_fault``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from engine_helpers import USER, make_mirror

MEMORY = ("---\ntitle: Journal\ntype: note\n---\n# Journal\n\n## Observations\n"
          "- [note] first line #seed\n")
HISTORY = "GET /api/v2.1/repos/{id}/file/history/"
COMMITS = "GET /api/v2.1/repos/{id}/commits/{commit}/"


def _without_optional_endpoints(devserver) -> None:
    for rx in (r"/api/v2\.1/repos/[^/]+/file/history/", r"/api2/repos/[^/]+/file/history/",
               r"/api/v2\.1/repos/[^/]+/commits/", r"/api2/repos/[^/]+/file/revision/"):
        devserver.inject_fault("GET", rx, status=404, count=10_000)


@pytest.fixture
def mirror(devserver, tmp_path):
    rid = devserver.create_library(USER, "OH-Memory")
    devserver.put_file(rid, "/notes/journal.md", MEMORY.encode())
    m = make_mirror(devserver, rid, tmp_path)
    assert not m.sync().errors
    _without_optional_endpoints(devserver)
    yield m
    m.state.close()
    m.client.close()


def test_a_merge_on_a_server_without_file_history_fails_no_file(devserver, mirror) -> None:
    rid = mirror.repo_id
    for n in range(3):
        devserver.put_file(rid, "/notes/journal.md", (MEMORY + f"- [note] phone edit {n} #phone\n").encode())
        mirror.write("notes/journal.md", (MEMORY + f"- [note] local line {n} #desk\n").encode())
        report = mirror.sync(["notes/journal.md"])
        assert report.errors == [], report.errors
        assert mirror.engine.failures() == []
        live = devserver.read_file(rid, "/notes/journal.md").decode()
        assert f"local line {n}" in live and f"phone edit {n}" in live
        assert mirror.read("notes/journal.md").decode() == live
    # noted once: after the first 404 the history is not asked again
    assert devserver.request_count(HISTORY) <= 1


def test_a_conflict_on_a_server_without_file_history_fails_no_file(devserver, mirror) -> None:
    rid = mirror.repo_id
    devserver.put_file(rid, "/notes/journal.md", b"---\ntitle: Journal\n---\nphone rewrote all\n")
    mirror.write("notes/journal.md", b"---\ntitle: Journal\n---\ndesk rewrote all\n")
    report = mirror.sync(["notes/journal.md"])
    assert report.errors == [] and mirror.engine.failures() == []
    assert report.conflicts
    assert report.conflicts[0].archived in devserver.tree(rid) or "/" + report.conflicts[0].archived in \
        devserver.tree(rid)
