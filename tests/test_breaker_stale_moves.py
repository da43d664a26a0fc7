"""Breaker: stale overwrites, then remote moves.

Another client overwrites a file we pushed to from a version older than our
pushes, then the file is moved or renamed on the server before our pass
(``engine/sync/moves.py`` pairs it by name or folder, checking the new content
against our kept versions).  Around that: two such files of one name at
once, a move into a folder that has a file of its name (the server makes it
``name (1).ext``), a rename beside a new unrelated file, a second stale
overwrite at the new path, a local edit before the pass, a failing check
download, a crash between the local rename and the merge, memory files, and
an unrelated memory file of the same name made from the same template.
Every line of ours stays live at the file's new path (or archived in
``/.conflict/`` with a notice), never only in a local backup or in server
history, and nothing of ours is mixed into an unrelated file.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from engine_helpers import USER, make_mirror
from test_writers_stale import HEADER, JOURNAL, assert_kept, settle

V0 = b"line1\nline2\nline3\n"
TODO = "notes/todo.txt"
A, B, R = "- [note] LINE-A #desk", "- [note] LINE-B #desk", "- [note] LINE-R #bot"


@pytest.fixture
def rid(devserver):
    return devserver.create_library(USER, "OH-Memory")


def _push(mirror, rel: str, lines) -> None:
    """Save each of ``lines`` appended to ``rel``, synced one by one (pushes on record)."""
    for line in lines:
        mirror.write(rel, mirror.read(rel) + (line + "\n").encode())
        assert mirror.sync([rel]).errors == []


def _pushed(devserver, rid, tmp_path, files: dict[str, bytes], extra: dict[str, bytes] | None = None):
    """Sync ``files`` (and ``extra``), push two lines to each of ``files``, then
    another client overwrites each from its first version (one line added)."""
    for rel, data in {**files, **(extra or {})}.items():
        devserver.put_file(rid, "/" + rel, data)
    mirror = make_mirror(devserver, rid, tmp_path)
    assert mirror.sync().errors == []
    tags = {rel: rel.rsplit("/", 1)[-1].split(".")[0] + ":" + rel.split("/")[0] for rel in files}
    for rel in files:
        _push(mirror, rel, [f"{tags[rel]} ONE", f"{tags[rel]} TWO"])
    for rel, data in files.items():  # after every push: a pass would merge an overwrite seen before the move
        burst = devserver.stale_burst(rid, "/" + rel, 1, old=data, line=f"{tags[rel]} STALE\n")
        assert burst.errors == []
    return mirror


def test_two_files_of_one_name_moved_to_two_folders_each_keep_their_lines(devserver, rid, tmp_path):
    mirror = _pushed(devserver, rid, tmp_path, {"a/todo.txt": b"a1\na2\na3\n", "b/todo.txt": b"b1\nb2\nb3\n"})
    for folder, src in (("/x", "/a/todo.txt"), ("/y", "/b/todo.txt")):
        devserver.mkdir(rid, folder)
        devserver.move_path(rid, src, folder)
    settle(mirror)
    assert_kept(mirror, "x/todo.txt", ["todo:a ONE", "todo:a TWO", "a1"], live_only=["todo:a ONE", "todo:a TWO"])
    assert_kept(mirror, "y/todo.txt", ["todo:b ONE", "todo:b TWO", "b1"], live_only=["todo:b ONE", "todo:b TWO"])
    assert ":b" not in devserver.read_file(rid, "/x/todo.txt").decode(), "b's lines mixed into a's file"
    assert not (mirror.root / "a").joinpath("todo.txt").exists() and not (mirror.root / "b/todo.txt").exists()


def test_two_files_of_one_name_moved_into_one_folder_keep_their_lines(devserver, rid, tmp_path):
    mirror = _pushed(devserver, rid, tmp_path, {"a/todo.txt": b"a1\na2\na3\n", "b/todo.txt": b"b1\nb2\nb3\n"})
    devserver.mkdir(rid, "/x")
    assert devserver.move_path(rid, "/a/todo.txt", "/x") == "todo.txt"
    assert devserver.move_path(rid, "/b/todo.txt", "/x") == "todo (1).txt"
    settle(mirror)
    assert_kept(mirror, "x/todo.txt", ["todo:a ONE", "todo:a TWO", "a1"], live_only=["todo:a ONE", "todo:a TWO"])
    assert_kept(mirror, "x/todo (1).txt", ["todo:b ONE", "todo:b TWO", "b1"],
                live_only=["todo:b ONE", "todo:b TWO"])


@pytest.mark.parametrize("rel, v0", [(TODO, V0), (JOURNAL, HEADER)], ids=["text", "memory"])
def test_a_move_into_a_folder_with_a_file_of_its_name_keeps_our_lines(devserver, rid, tmp_path, rel, v0):
    name = rel.rsplit("/", 1)[-1]
    there = b"groceries\nmilk\n" if rel == TODO else HEADER.replace(b"start #seed", b"someone else's #x")
    mirror = _pushed(devserver, rid, tmp_path, {rel: v0}, {"archive/" + name: there})
    clash = devserver.move_path(rid, "/" + rel, "/archive")
    assert clash == name.replace(".", " (1).")
    settle(mirror)
    tag = name.split(".")[0] + ":notes"
    assert_kept(mirror, "archive/" + clash, [f"{tag} ONE", f"{tag} TWO"], live_only=[f"{tag} ONE", f"{tag} TWO"])
    assert devserver.read_file(rid, "/archive/" + name) == there == mirror.read("archive/" + name)


@pytest.mark.parametrize("rel, v0", [(TODO, V0), (JOURNAL, HEADER)], ids=["text", "memory"])
def test_a_rename_beside_a_new_unrelated_file_keeps_our_lines(devserver, rid, tmp_path, rel, v0):
    mirror = _pushed(devserver, rid, tmp_path, {rel: v0})
    ext = rel.rsplit(".", 1)[-1]
    devserver.rename_path(rid, "/" + rel, "renamed." + ext)
    unrelated = b"unrelated\nstuff\n" if ext == "txt" else HEADER.replace(b"start #seed", b"another one #x")
    devserver.put_file(rid, "/notes/new." + ext, unrelated)
    settle(mirror)
    tag = rel.rsplit("/", 1)[-1].split(".")[0] + ":notes"
    assert_kept(mirror, "notes/renamed." + ext, [f"{tag} ONE", f"{tag} TWO"],
                live_only=[f"{tag} ONE", f"{tag} TWO"])
    assert devserver.read_file(rid, "/notes/new." + ext) == unrelated == mirror.read("notes/new." + ext)


def _journal(month: str, line: str) -> bytes:
    from datetime import datetime

    from ohsync.engine.filing.journal import BEIJING, new_journal
    return new_journal(month, datetime(2026, 9, 1, 8, 12, tzinfo=BEIJING), line)


@pytest.mark.parametrize("template", ["header", "journal"])
def test_an_unrelated_memory_file_of_the_same_name_from_the_same_template_gets_none_of_our_lines(
        devserver, rid, tmp_path, template):
    # the file is deleted on the server and another one of its name made elsewhere from the same
    # template: its frontmatter and headings are most of its distinct lines, its observation is its own
    if template == "header":
        rel, ours = JOURNAL, HEADER
        other = HEADER.replace(b"- [note] start #seed", b"- [note] a different journal #x")
    else:
        rel, ours = "journal/2026-09.md", _journal("2026-09", "- [file] 2026-09-01 08:12 filed a.pdf #attachment")
        other = _journal("2026-09", "- [file] 2026-09-02 10:00 filed b.pdf #attachment") \
            .replace(b"08:12:00", b"10:00:00")
    devserver.put_file(rid, "/" + rel, ours)
    mirror = make_mirror(devserver, rid, tmp_path)
    assert mirror.sync().errors == []
    _push(mirror, rel, [A, B])
    devserver.delete_path(rid, "/" + rel)
    devserver.put_file(rid, "/archive/" + rel.rsplit("/", 1)[-1], other)
    settle(mirror)
    new = "archive/" + rel.rsplit("/", 1)[-1]
    assert devserver.read_file(rid, "/" + new) == other == mirror.read(new), "our lines mixed into another file"
    assert not (mirror.root / rel).exists()


@pytest.mark.parametrize("how", ["moved", "renamed"])
def test_a_memory_file_overwritten_from_its_template_then_moved_keeps_our_lines(devserver, rid, tmp_path, how):
    devserver.put_file(rid, "/" + JOURNAL, HEADER)
    mirror = make_mirror(devserver, rid, tmp_path)
    assert mirror.sync().errors == []
    _push(mirror, JOURNAL, [A, B])
    devserver.stale_burst(rid, "/" + JOURNAL, 1, old=HEADER, line=R + "\n")
    if how == "moved":
        devserver.mkdir(rid, "/archive")
        devserver.move_path(rid, "/" + JOURNAL, "/archive")
        new = "archive/journal.md"
    else:
        devserver.rename_path(rid, "/" + JOURNAL, "diary.md")
        new = "notes/diary.md"
    settle(mirror)
    assert_kept(mirror, new, [A, B, R], live_only=[A, B, R])  # observations merge as a union


def test_a_check_that_keeps_failing_is_reported_and_retried_by_the_next_poll(devserver, rid, tmp_path):
    # the file server answers 502 to every download for a while: nothing is deleted or pulled
    # meanwhile, the pass says so (a settled pass would leave it to the next full scan), and the
    # next ordinary poll after the server is back pairs and merges it
    mirror = _pushed(devserver, rid, tmp_path, {TODO: V0})
    devserver.mkdir(rid, "/archive")
    devserver.move_path(rid, "/" + TODO, "/archive")
    devserver.inject_fault("GET", r"/files/", status=502, count=10**6)
    for _ in range(3):
        report = mirror.sync()
        assert (mirror.root / TODO).exists() and not (mirror.root / "archive/todo.txt").exists()
        assert [rel for rel, _ in report.errors] == [TODO], report.errors
    devserver.clear_faults()
    report = mirror.sync([])
    assert not report.idle and (TODO, "archive/todo.txt") in report.moved, report
    settle(mirror)
    assert_kept(mirror, "archive/todo.txt", ["todo:notes ONE", "todo:notes TWO", "line1"],
                live_only=["todo:notes ONE", "todo:notes TWO"])


@pytest.mark.parametrize("second", ["same old read", "edit of the moved file"])
def test_a_second_overwrite_at_the_new_path_before_our_pass_keeps_our_lines(devserver, rid, tmp_path, second):
    mirror = _pushed(devserver, rid, tmp_path, {TODO: V0})
    devserver.mkdir(rid, "/archive")
    devserver.move_path(rid, "/" + TODO, "/archive")
    old = V0 if second == "same old read" else None  # None: what the moved file holds now
    devserver.stale_burst(rid, "/archive/todo.txt", 2, old=old, line="LINE-S{i}\n")
    settle(mirror)
    ours = ["todo:notes ONE", "todo:notes TWO"]
    last = ["LINE-S1"] if old is not None else ["todo:notes STALE", "LINE-S1"]  # S0: overwritten by its writer
    assert_kept(mirror, "archive/todo.txt", ours + last + ["line1"], live_only=ours)
    assert not (mirror.root / TODO).exists()


def test_an_unrelated_file_holding_our_one_line_first_version_gets_none_of_our_lines(devserver, rid, tmp_path):
    devserver.put_file(rid, "/" + TODO, b"TODO\n")
    mirror = make_mirror(devserver, rid, tmp_path)
    assert mirror.sync().errors == []
    _push(mirror, TODO, ["LINE-A", "LINE-B"])
    devserver.delete_path(rid, "/" + TODO)
    devserver.put_file(rid, "/archive/todo.txt", b"TODO\nmilk\neggs\n")
    settle(mirror)
    assert devserver.read_file(rid, "/archive/todo.txt") == b"TODO\nmilk\neggs\n" == mirror.read("archive/todo.txt")
    assert not (mirror.root / TODO).exists()


def test_another_stale_overwrite_after_the_merge_at_the_new_path_keeps_our_lines(devserver, rid, tmp_path):
    mirror = _pushed(devserver, rid, tmp_path, {TODO: V0})
    devserver.mkdir(rid, "/archive")
    devserver.move_path(rid, "/" + TODO, "/archive")
    settle(mirror)
    devserver.stale_burst(rid, "/archive/todo.txt", 1, old=V0, line="LINE-S\n")  # our pushes moved with the file
    settle(mirror)
    ours = ["todo:notes ONE", "todo:notes TWO"]
    assert_kept(mirror, "archive/todo.txt", ours + ["todo:notes STALE", "LINE-S", "line1"], live_only=ours)


def test_a_local_edit_before_the_pass_keeps_every_line_live(devserver, rid, tmp_path):
    # modification beats deletion: the edited file goes up again at its old path
    mirror = _pushed(devserver, rid, tmp_path, {TODO: V0})
    devserver.mkdir(rid, "/archive")
    devserver.move_path(rid, "/" + TODO, "/archive")
    mirror.write(TODO, mirror.read(TODO) + b"LINE-L\n")
    settle(mirror)
    assert_kept(mirror, TODO, ["todo:notes ONE", "todo:notes TWO", "LINE-L"],
                live_only=["todo:notes ONE", "todo:notes TWO", "LINE-L"])
    assert b"todo:notes STALE" in devserver.read_file(rid, "/archive/todo.txt") == mirror.read("archive/todo.txt")


class _Killed(BaseException):
    """Stands for the process dying at a crash point (nothing catches it)."""


def _killed_at(mirror, point: str) -> None:
    """Run a pass that dies at ``point`` (``engine/crashpoints.py``); close its state."""
    from ohsync.engine.crashpoints import set_hook

    def hook(name: str) -> None:
        if name == point:
            raise _Killed(name)
    previous = set_hook(hook)
    try:
        with pytest.raises(_Killed):
            mirror.sync()
    finally:
        set_hook(previous)
        mirror.state.close()
        mirror.client.close()


@pytest.mark.parametrize("rel, v0", [(TODO, V0), (JOURNAL, HEADER)], ids=["text", "memory"])
def test_a_kill_between_the_local_rename_and_the_merge_keeps_our_lines(devserver, rid, tmp_path, rel, v0):
    mirror = _pushed(devserver, rid, tmp_path, {rel: v0})
    devserver.mkdir(rid, "/archive")
    devserver.move_path(rid, "/" + rel, "/archive")
    _killed_at(mirror, "move.local_done")  # renamed here, base not moved yet
    again = make_mirror(devserver, rid, tmp_path)
    settle(again)
    tag = rel.rsplit("/", 1)[-1].split(".")[0] + ":notes"
    new = "archive/" + rel.rsplit("/", 1)[-1]
    assert_kept(again, new, [f"{tag} ONE", f"{tag} TWO", f"{tag} STALE"], live_only=[f"{tag} ONE", f"{tag} TWO"])
    assert not (again.root / rel).exists() and rel not in [p.lstrip("/") for p in devserver.tree(rid)]


def test_a_kill_after_the_base_moved_before_the_merge_keeps_our_lines(devserver, rid, tmp_path, monkeypatch):
    from ohsync.engine.sync import engine as sync_module

    mirror = _pushed(devserver, rid, tmp_path, {TODO: V0})
    devserver.mkdir(rid, "/archive")
    devserver.move_path(rid, "/" + TODO, "/archive")

    def killed(old, new):  # the move and its base are done, the merge not planned
        raise _Killed("after the move")
    monkeypatch.setattr(sync_module, "plan_again", killed)
    with pytest.raises(_Killed):
        mirror.sync()
    monkeypatch.undo()
    mirror.state.close()
    mirror.client.close()
    again = make_mirror(devserver, rid, tmp_path)
    settle(again)
    ours = ["todo:notes ONE", "todo:notes TWO"]
    assert_kept(again, "archive/todo.txt", ours + ["todo:notes STALE", "line1"], live_only=ours)


def test_a_save_landing_right_after_the_local_rename_is_merged_too(devserver, rid, tmp_path):
    from ohsync.engine.crashpoints import set_hook

    mirror = _pushed(devserver, rid, tmp_path, {TODO: V0})
    devserver.mkdir(rid, "/archive")
    devserver.move_path(rid, "/" + TODO, "/archive")

    def save(name: str) -> None:
        if name == "move.local_done":
            with open(mirror.root / "archive/todo.txt", "ab") as fh:
                fh.write(b"LINE-L\n")
    previous = set_hook(save)
    try:
        mirror.sync()
    finally:
        set_hook(previous)
    settle(mirror)
    ours = ["todo:notes ONE", "todo:notes TWO", "LINE-L"]
    assert_kept(mirror, "archive/todo.txt", ours + ["todo:notes STALE", "line1"], live_only=ours)


def test_more_moved_files_than_one_pass_checks_all_keep_their_lines(devserver, rid, tmp_path):
    from ohsync.engine.sync.moves import MAX_CONTENT_CHECKS

    files = {f"n{i}/f{i}.txt": f"first {i}\nsecond {i}\nthird {i}\n".encode() for i in range(MAX_CONTENT_CHECKS + 3)}
    mirror = _pushed(devserver, rid, tmp_path, files)
    devserver.mkdir(rid, "/archive")
    for rel in files:
        devserver.move_path(rid, "/" + rel, "/archive")
    settle(mirror, rounds=6)
    for i, rel in enumerate(files):
        tag = f"f{i}:n{i}"
        assert_kept(mirror, f"archive/f{i}.txt", [f"{tag} ONE", f"{tag} TWO", f"{tag} STALE"],
                    live_only=[f"{tag} ONE", f"{tag} TWO"])
        assert not (mirror.root / rel).exists()


def test_a_merge_download_failing_after_the_check_keeps_our_lines(devserver, rid, tmp_path):
    mirror = _pushed(devserver, rid, tmp_path, {TODO: V0})
    devserver.mkdir(rid, "/archive")
    devserver.move_path(rid, "/" + TODO, "/archive")
    # the check's download goes through, every later one fails for a while
    devserver.after_request("GET", r"/files/", lambda srv: srv.inject_fault("GET", r"/files/", status=502, count=6))
    report = mirror.sync()
    assert (TODO, "archive/todo.txt") in report.moved and report.errors, report
    devserver.clear_faults()
    assert mirror.engine.release_failures() == 1  # its backoff over
    settle(mirror)
    ours = ["todo:notes ONE", "todo:notes TWO"]
    assert_kept(mirror, "archive/todo.txt", ours + ["todo:notes STALE", "line1"], live_only=ours)



@pytest.mark.parametrize("stale", [False, True], ids=["renamed", "overwritten, renamed"])
@pytest.mark.parametrize("rel, v0", [(TODO, V0), (JOURNAL, HEADER)], ids=["text", "memory"])
def test_a_rename_then_a_fresh_file_at_the_old_name_gets_none_of_our_lines(devserver, rid, tmp_path, rel, v0,
                                                                            stale):
    # "archive and start afresh": the file is renamed on the server and a new one made at its name;
    # our lines stay with the renamed file (merged there after a stale overwrite), the fresh file
    # stays as it was made
    mirror = _pushed(devserver, rid, tmp_path, {rel: v0}) if stale else None
    if mirror is None:
        devserver.put_file(rid, "/" + rel, v0)
        mirror = make_mirror(devserver, rid, tmp_path)
        assert mirror.sync().errors == []
        tag = rel.rsplit("/", 1)[-1].split(".")[0] + ":notes"
        _push(mirror, rel, [f"{tag} ONE", f"{tag} TWO"])
    ext = rel.rsplit(".", 1)[-1]
    devserver.rename_path(rid, "/" + rel, "archived." + ext)
    fresh = b"fresh\nlist\n" if ext == "txt" else HEADER.replace(b"- [note] start #seed", b"- [note] fresh #new")
    devserver.put_file(rid, "/" + rel, fresh)
    settle(mirror)
    tag = rel.rsplit("/", 1)[-1].split(".")[0] + ":notes"
    ours = [f"{tag} ONE", f"{tag} TWO"]
    assert_kept(mirror, "notes/archived." + ext, ours + ([f"{tag} STALE"] if stale else []), live_only=ours)
    assert devserver.read_file(rid, "/" + rel) == fresh == mirror.read(rel), "our lines mixed into the fresh file"
    assert rel not in [c.path for c in mirror.engine.conflicts()]


@pytest.mark.parametrize("edit", ["ordinary edit", "stale overwrite"])
def test_an_edit_there_beside_a_new_file_is_no_move(devserver, rid, tmp_path, edit):
    mirror = _pushed(devserver, rid, tmp_path, {TODO: V0}) if edit == "stale overwrite" else None
    if mirror is None:
        devserver.put_file(rid, "/" + TODO, V0)
        mirror = make_mirror(devserver, rid, tmp_path)
        assert mirror.sync().errors == []
        _push(mirror, TODO, ["todo:notes ONE", "todo:notes TWO"])
        devserver.put_file(rid, "/" + TODO, devserver.read_file(rid, "/" + TODO) + b"from the phone\n")
    devserver.put_file(rid, "/notes/new.txt", V0 + b"a copy, edited\n")  # made from a version of ours, too
    report = mirror.sync()
    assert report.errors == [] and report.moved == []
    settle(mirror)
    ours = ["todo:notes ONE", "todo:notes TWO"]
    assert_kept(mirror, TODO, ours + ["line1"], live_only=ours)
    assert devserver.read_file(rid, "/notes/new.txt") == V0 + b"a copy, edited\n" == mirror.read("notes/new.txt")


@pytest.mark.parametrize("stale", [False, True], ids=["renamed", "overwritten, renamed"])
def test_a_kill_in_the_move_away_from_a_fresh_file_keeps_both(devserver, rid, tmp_path, stale):
    mirror = _pushed(devserver, rid, tmp_path, {JOURNAL: HEADER}) if stale else None
    if mirror is None:
        devserver.put_file(rid, "/" + JOURNAL, HEADER)
        mirror = make_mirror(devserver, rid, tmp_path)
        assert mirror.sync().errors == []
        _push(mirror, JOURNAL, ["journal:notes ONE", "journal:notes TWO"])
    devserver.rename_path(rid, "/" + JOURNAL, "archived.md")
    fresh = HEADER.replace(b"- [note] start #seed", b"- [note] fresh #new")
    devserver.put_file(rid, "/" + JOURNAL, fresh)
    _killed_at(mirror, "move.local_done")
    again = make_mirror(devserver, rid, tmp_path)
    settle(again)
    ours = ["journal:notes ONE", "journal:notes TWO"]
    assert_kept(again, "notes/archived.md", ours, live_only=ours)
    assert devserver.read_file(rid, "/" + JOURNAL) == fresh == again.read(JOURNAL), "our lines mixed into it"
    # and later edits of the fresh file are its own: our old pushes are not judged against them
    devserver.put_file(rid, "/" + JOURNAL, fresh + b"- [note] from the phone #phone\n")
    settle(again)
    assert devserver.read_file(rid, "/" + JOURNAL) == fresh + b"- [note] from the phone #phone\n"
