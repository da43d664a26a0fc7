"""The transcript replayer itself: normalisation rules and that a wrong
expectation is reported (so the transcript tests cannot pass vacuously)."""
from __future__ import annotations

import json

import transcript_replay as replay  # tests/ is on the path (pyproject pythonpath)


def test_normaliser_numbers_ids_and_rewrites_strings():
    n = replay.Normaliser({"username": "u@x.cn", "run": "runabc", "token": "t" * 40,
                           "repo_id": "11111111-2222-3333-4444-555555555555"})
    a, b = "a" * 40, "b" * 40
    body = {"head_commit_id": a, "root": b, "list": [{"type": "dir", "id": b}, {"type": "file", "id": a}],
            "mtime": 5, "name": "tx-runabc", "email": "u@x.cn", "owner_name": "u",
            "link": "http://127.0.0.1:1/seafhttp/files/99999999-2222-3333-4444-555555555555/a.txt",
            "loc": "http://h:2/api2/repos/11111111-2222-3333-4444-555555555555/dir/?p=//d",
            "when": "2026-01-01T00:00:00+08:00", "zero": "0" * 40, "flag": True}
    out = n.body(body, set(), set())
    assert out == {"email": "<username>", "flag": True, "head_commit_id": "<commit_id:1>",
                   "link": "<link:download>/a.txt", "list": [{"id": "<dir_id:2>", "type": "dir"},
                                                              {"id": a, "type": "file"}],
                   "loc": "<host>/api2/repos/<repo_id>/dir/?p=//d", "mtime": "<mtime#int>",
                   "name": "tx-<run>", "owner_name": "<user_name>", "root": "<dir_id:2>",
                   "when": "<time>", "zero": "0" * 40}


def test_wrong_expectation_is_reported(devserver, tmp_path):
    steps = [
        {"step": 1, "request": {"method": "GET", "path": "/api2/ping/"},
         "response": {"status": 200, "content_type": "application/json", "body_kind": "json", "body": "pong"}},
        {"step": 2, "request": {"method": "GET", "path": "/api2/ping/"},
         "response": {"status": 200, "content_type": "application/json", "body_kind": "json", "body": "ping"}},
        {"step": 3, "request": {"method": "GET", "path": "/api2/server-info/"},
         "response": {"status": 200, "content_type": "application/json; charset=utf-8", "body_kind": "json",
                      "body": {"version": "0", "encrypted_library_version": 2, "features": []}},
         "version_dependent": ["body.version", "body.features"]},
    ]
    f = tmp_path / "selftest.jsonl"
    f.write_text("\n".join(json.dumps(s) for s in steps))
    result = replay.replay_file(f, devserver.url, "user@example.edu.cn", "secret")
    assert len(result.mismatches) == 1 and result.mismatches[0].startswith("step 2")
    assert result.steps[2].ignored  # reported, not counted
