"""Object-id formulas of devserver match the real Seafile server (API doc §5.1)."""
from __future__ import annotations

import hashlib

from ohsync.devserver import ids


def test_file_ids_match_real_server():
    assert ids.file_id(b"") == "0" * 40
    assert ids.file_id(b"hello\n") == "4226e5b3d7da1a4575241f9501f9882aee9b5ea9"
    # block id of hello\n as documented
    assert hashlib.sha1(b"hello\n").hexdigest() == "f572d396fae9206628714fb2ce00f72e94f2258f"


def test_nine_mib_file_is_two_blocks_cut_at_8_mib():
    rep = b"seafile-transcript-0123456789abcdef\n"
    size = 9437184
    data = (rep * (size // len(rep) + 1))[:size]
    blocks = ids.split_blocks(data)
    assert [len(b) for b in blocks] == [8 * 1024 * 1024, size - 8 * 1024 * 1024]
    assert ids.file_id(data) == "3bc641cd0e72470bf4146e3d3b0c3bbd252fc2a3"  # recorded on a real server


def test_explicit_empty_file_object():
    assert ids.file_id_for_blocks([], 0, explicit_empty=True) == "c5d52a60cac7b22bb1d170f10d7a848a8d9583af"
    assert ids.file_id_for_blocks([], 0) == ids.EMPTY_ID


def test_dir_id_worked_example():
    entry = {"id": "4226e5b3d7da1a4575241f9501f9882aee9b5ea9", "mode": ids.FILE_MODE,
             "modifier": "alice@example.com", "mtime": 1700000000, "name": "a.txt", "size": 6}
    assert ids.dir_object_json([entry]) == (
        '{"dirents": [{"id": "4226e5b3d7da1a4575241f9501f9882aee9b5ea9", "mode": 33188, '
        '"modifier": "alice@example.com", "mtime": 1700000000, "name": "a.txt", "size": 6}], '
        '"type": 3, "version": 1}')
    assert ids.dir_id([entry]) == "50eb6790985fbf6c11c1c6b7fde276f7e6386446"
    assert ids.dir_id([]) == ids.EMPTY_ID


def test_dir_entries_sorted_descending_and_order_independent():
    a = {"id": ids.EMPTY_ID, "mode": ids.DIR_MODE, "mtime": 1, "name": "a"}
    b = {"id": ids.EMPTY_ID, "mode": ids.DIR_MODE, "mtime": 1, "name": "b"}
    assert ids.dir_object_json([a, b]).index('"b"') < ids.dir_object_json([a, b]).index('"a"')
    assert ids.dir_id([a, b]) == ids.dir_id([b, a])
    assert ids.dir_id([a]) != ids.dir_id([dict(a, mtime=2)])


def test_commit_ids_depend_on_parent_and_time():
    c1 = ids.commit_id(ids.EMPTY_ID, None, "u", "Created library", 100)
    assert c1 == ids.commit_id(ids.EMPTY_ID, None, "u", "Created library", 100)
    assert c1 != ids.commit_id(ids.EMPTY_ID, None, "u", "Created library", 101)
    assert c1 != ids.commit_id(ids.EMPTY_ID, c1, "u", "Created library", 100)
