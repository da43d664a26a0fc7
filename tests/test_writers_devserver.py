"""devserver as a second writer meets it on a real Seafile 12 server: the
update's ``head`` merge (SFConflict files), per-file history, seahub 12's
rename answer, and backslashes in multipart file names."""
from __future__ import annotations

import re

import httpx
import pytest

from daemon_helpers import wait_for
from devserver_fixtures import c, rid  # noqa: F401 - fixtures used as parameters

USER = "user@example.edu.cn"
SFCONFLICT = re.compile(r"^notes \(SFConflict user@example\.edu\.cn \d{4}(-\d\d){5}\)\.md$")



def head_of(c, rid):
    return c.get(f"/api2/repos/{rid}/").json()["head_commit_id"]


def update(c, rid, path, data, head=None, in_query=True):
    parent = path.rsplit("/", 1)[0] or "/"
    link = c.get(f"/api2/repos/{rid}/update-link/", params={"p": parent}).json()
    form = {"target_file": path}
    params = {}
    if head is not None:
        if in_query:
            params["head"] = head
        else:
            form["head"] = head
    return c.post(link, params=params, data=form, files={"file": ("x", data)})


def names(c, rid, folder="/"):
    return {e["name"]: e["id"] for e in c.get(f"/api2/repos/{rid}/dir/", params={"p": folder}).json()}


@pytest.mark.parametrize("in_query", [True, False])
def test_update_with_stale_head_keeps_the_other_edit_live(c, devserver, rid, in_query):
    devserver.put_file(rid, "/d/notes.md", b"base\n")
    head = head_of(c, rid)
    theirs = devserver.put_file(rid, "/d/notes.md", b"theirs\n")  # lands after our read
    r = update(c, rid, "/d/notes.md", b"ours\n", head=head, in_query=in_query)
    assert r.status_code == 200
    ours_id = r.text.strip()
    listing = names(c, rid, "/d")
    assert listing["notes.md"] == theirs  # the newer edit stays live
    conflict = [n for n in listing if n != "notes.md"]
    assert len(conflict) == 1 and SFCONFLICT.match(conflict[0]), listing
    assert listing[conflict[0]] == ours_id
    assert devserver.read_file(rid, f"/d/{conflict[0]}") == b"ours\n"
    newest = c.get(f"/api2/repos/{rid}/history/").json()["commits"][0]
    assert newest["conflict"] is True and newest["second_parent_id"]
    assert newest["desc"] == f'Added or modified "{conflict[0]}".'


def test_update_with_current_head_other_file_changed_or_same_content(c, devserver, rid):
    devserver.put_file(rid, "/notes.md", b"base\n")
    head = head_of(c, rid)
    devserver.put_file(rid, "/other.md", b"x\n")  # another file changed: clean merge
    assert update(c, rid, "/notes.md", b"ours\n", head=head).status_code == 200
    assert devserver.read_file(rid, "/notes.md") == b"ours\n"
    assert set(names(c, rid)) == {"notes.md", "other.md"}
    head = head_of(c, rid)
    devserver.put_file(rid, "/notes.md", b"same\n")
    assert update(c, rid, "/notes.md", b"same\n", head=head).status_code == 200  # identical: no copy
    assert set(names(c, rid)) == {"notes.md", "other.md"}


def test_update_with_head_recreates_deleted_file_and_refuses_bogus_head(c, devserver, rid):
    devserver.put_file(rid, "/notes.md", b"base\n")
    head = head_of(c, rid)
    devserver.delete_path(rid, "/notes.md")
    assert update(c, rid, "/notes.md", b"ours\n", head=head).status_code == 200
    assert devserver.read_file(rid, "/notes.md") == b"ours\n"
    r = update(c, rid, "/notes.md", b"again\n", head="0" * 40)
    assert r.status_code == 500 and "Internal error" in r.text


def test_head_ignored_when_switched_off_and_by_upload_replace(c, devserver, rid):
    devserver.put_file(rid, "/notes.md", b"base\n")
    head = head_of(c, rid)
    devserver.put_file(rid, "/notes.md", b"theirs\n")
    link = c.get(f"/api2/repos/{rid}/upload-link/", params={"p": "/"}).json()
    r = c.post(link, params={"ret-json": "1", "head": head}, data={"parent_dir": "/", "replace": "1"},
               files={"file": ("notes.md", b"replaced\n")})
    assert r.status_code == 200 and devserver.read_file(rid, "/notes.md") == b"replaced\n"
    devserver.honour_head = False
    head = head_of(c, rid)
    devserver.put_file(rid, "/notes.md", b"theirs again\n")
    assert update(c, rid, "/notes.md", b"ours\n", head=head).status_code == 200
    assert devserver.read_file(rid, "/notes.md") == b"ours\n"
    assert set(names(c, rid)) == {"notes.md"}


def test_file_history_and_revision_download(c, devserver, rid):
    first = devserver.put_file(rid, "/d/a.md", b"one\n")
    devserver.put_file(rid, "/d/b.md", b"unrelated\n")
    second = devserver.put_file(rid, "/d/a.md", b"two\n")
    commits = c.get(f"/api2/repos/{rid}/file/history/", params={"p": "/d/a.md"}).json()["commits"]
    assert [x["rev_file_id"] for x in commits] == [second, first]
    assert commits[0]["parent_id"] and commits[0]["user_info"]["email"] == USER
    v21 = c.get(f"/api/v2.1/repos/{rid}/file/history/", params={"path": "/d/a.md", "limit": 1}).json()
    assert [x["rev_file_id"] for x in v21["data"]] == [second]
    link = c.get(f"/api2/repos/{rid}/file/revision/",
                 params={"p": "/d/a.md", "commit_id": commits[1]["id"]}).json()
    assert httpx.get(link).content == b"one\n"
    assert c.get(f"/api2/repos/{rid}/file/history/", params={"p": "/nope.md"}).status_code == 404


@pytest.mark.parametrize("version, expected", [(13, "/sub/again.txt"), (12, "/subagain.txt")])
def test_rename_location_by_seahub_version(c, devserver, rid, version, expected):
    devserver.seahub_version = version
    devserver.put_file(rid, "/sub/a.txt", b"a\n")
    r = c.post(f"/api2/repos/{rid}/file/", params={"p": "/sub/a.txt"},
               data={"operation": "rename", "newname": "again.txt"})
    assert r.status_code == 301
    assert httpx.URL(r.headers["Location"]).params["p"] == expected
    assert devserver.read_file(rid, "/sub/again.txt") == b"a\n"




def test_names_transcript_with_escaped_backslashes(devserver, monkeypatch):
    """httpx (like browsers) sends ``back\\slash.txt`` as ``filename="back\\\\slash.txt"``;
    the real fileserver stores it with one backslash, so must devserver."""
    import transcript_replay as replay

    original = replay.build_multipart

    def escaping(spec, variables):
        files = [dict(f, filename=f["filename"].replace("\\", "\\\\")) for f in spec.get("files", [])]
        return original(dict(spec, files=files), variables)
    monkeypatch.setattr(replay, "build_multipart", escaping)
    path = replay.TRANSCRIPTS / "names.jsonl"
    result = replay.replay_file(path, devserver.url, USER, "secret")
    assert result.mismatches == [], "\n".join(result.mismatches)


def test_httpx_upload_of_backslash_name_is_stored_as_sent(c, devserver, rid):
    link = c.get(f"/api2/repos/{rid}/upload-link/", params={"p": "/"}).json()
    r = c.post(link, params={"ret-json": "1"}, data={"parent_dir": "/"},
               files={"file": ("back\\slash.txt", b"b\n")})
    assert r.json()[0]["name"] == "back\\slash.txt"
    assert devserver.read_file(rid, "/back\\slash.txt") == b"b\n"


def test_stale_burst_overwrites_from_one_old_version_each_a_revision(c, devserver, rid):
    devserver.put_file(rid, "/n.md", b"v0\n")
    v0_commit = head_of(c, rid)
    devserver.put_file(rid, "/n.md", b"v0\nnewer\n")
    devserver.reset_counters()
    r = c.post(f"/_devserver/libraries/{rid}/stale-burst",
               json={"path": "/n.md", "count": 4, "spacing_ms": 5, "from_commit": v0_commit, "line": "bot {i}\n"})
    assert r.status_code == 200, r.text
    burst = r.json()
    assert burst["done"] is True and burst["errors"] == [] and len(burst["ids"]) == 4
    assert devserver.read_file(rid, "/n.md") == b"v0\nbot 3\n"
    # each went through an ordinary update link, without head
    assert devserver.request_count("GET /api2/repos/{id}/update-link/") == 4
    assert devserver.request_count(r"POST /seafhttp/update-api/[^?]*$") == 4
    commits = c.get(f"/api2/repos/{rid}/file/history/", params={"p": "/n.md"}).json()["commits"]
    assert [x["rev_file_id"] for x in commits[:4]] == burst["ids"][::-1]
    for i, x in enumerate(reversed(commits[:4])):
        link = c.get(f"/api2/repos/{rid}/file/revision/", params={"p": "/n.md", "commit_id": x["id"]}).json()
        assert httpx.get(link).content == f"v0\nbot {i}\n".encode()


def test_stale_burst_in_the_background_with_spacing(c, devserver, rid):
    devserver.put_file(rid, "/d/n.md", b"old\n")
    r = c.post(f"/_devserver/libraries/{rid}/stale-burst",
               json={"path": "/d/n.md", "count": 3, "spacing_ms": 30, "text": "read earlier\n", "wait": False})
    assert r.status_code == 200
    number = r.json()["burst"]
    state = wait_for(lambda: (st := c.get(f"/_devserver/libraries/{rid}/stale-burst",
                                          params={"burst": number}).json())["done"] and st,
                     timeout=30, interval=0.02, what=f"stale burst {number} to finish")
    assert state["done"] and len(state["ids"]) == 3 and state["errors"] == []
    assert devserver.read_file(rid, "/d/n.md") == b"read earlier\n- [note] stale writer 2 #bot\n"
    assert c.post(f"/_devserver/libraries/{rid}/stale-burst", json={"path": "/nope.md"}).status_code == 404
    assert c.get(f"/_devserver/libraries/{rid}/stale-burst", params={"burst": "99"}).status_code == 404
