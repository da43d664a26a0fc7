"""A stale writer's SFConflict file never takes our pushed lines out of the live file.

Another client reads a file at commit C0; we push a line; that client then
uploads its edit of the old version with ``head`` = C0.  The server keeps ours
live and stores theirs beside it as ``… (SFConflict …)``.  Folded against our
base (the version we pushed), the stale file would read as deleting our line;
folded against the version it was edited from (``engine/merge/stale.py``
``stale_base``), its own change merges in and ours stays live.
"""
from __future__ import annotations

import httpx

from breaker_helpers import synced_small
from engine_helpers import USER

MEM = ("---\ntitle: Journal\ntype: note\n---\n# Journal\n\n## Observations\n"
       "- [note] first line #seed\n")


def _head(c: httpx.Client, rid: str) -> str:
    return c.get(f"/api2/repos/{rid}/").json()["head_commit_id"]


def _update_with_head(c: httpx.Client, rid: str, path: str, data: bytes, head: str) -> None:
    """Upload ``data`` over ``path`` as a client that read the library at ``head``."""
    parent = path.rsplit("/", 1)[0] or "/"
    link = c.get(f"/api2/repos/{rid}/update-link/", params={"p": parent}).json()
    r = c.post(link, params={"head": head}, data={"target_file": path}, files={"file": ("x", data)})
    assert r.status_code == 200, r.text


def _run(devserver, tmp_path, rel: str, old: bytes, ours: bytes, theirs: bytes,
         our_line: bytes, their_line: bytes) -> None:
    m = synced_small(devserver, tmp_path, {"/" + rel: old})
    m.sync()
    with httpx.Client(base_url=devserver.url, timeout=60,
                      headers={"Authorization": f"Token {devserver.token_for(USER)}"}) as c:
        stale_head = _head(c, m.repo_id)          # the other client reads the file here (old version)
        m.write(rel, ours)                        # the person saves a line; ohsync pushes it
        rep = m.sync([rel])
        assert rep.errors == [] and devserver.read_file(m.repo_id, "/" + rel) == ours
        _update_with_head(c, m.repo_id, "/" + rel, theirs, stale_head)
    assert any("SFConflict" in p for p in devserver.tree(m.repo_id)), devserver.tree(m.repo_id)
    events = []
    m.engine.ctx.on_event = events.append
    for _ in range(3):
        assert m.sync().errors == []
    tree = devserver.tree(m.repo_id)
    live = devserver.read_file(m.repo_id, "/" + rel)
    assert our_line in live and their_line in live, live   # both edits stay live
    assert m.read(rel) == live
    assert not any("SFConflict" in p or p.startswith("/.conflict/") for p in tree), sorted(tree)
    assert any("keeping our lines" in (e.message or "") for e in events if e.path == rel), events


def test_stale_sfconflict_of_plain_text_keeps_our_pushed_line(devserver, tmp_path):
    old = b"one\ntwo\nthree\nfour\n"
    _run(devserver, tmp_path, "docs/a.txt", old,
         ours=old + b"OUR LINE\n", theirs=b"THEIR LINE\n" + old,
         our_line=b"OUR LINE", their_line=b"THEIR LINE")


def test_stale_sfconflict_of_memory_file_keeps_our_pushed_observation(devserver, tmp_path):
    old = MEM.encode()
    _run(devserver, tmp_path, "notes/journal.md", old,
         ours=old + b"- [note] OUR OBSERVATION #desk\n",
         theirs=old + b"- [note] THEIR OBSERVATION #phone\n",
         our_line=b"OUR OBSERVATION", their_line=b"THEIR OBSERVATION")
