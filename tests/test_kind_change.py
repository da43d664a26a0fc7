"""A file replaced by a folder of the same name (or a folder by a file) converges, on either side:
the new kind wins where the other side did not change the old one (the old file backed up here or
moved into the server's /.trash/); when both changed, the file is archived in /.conflict/ and the
folder keeps the name.  Each case by a full walk and by a poll (the commit-diff path, then the walk
it falls back to), and nothing is lost."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine_helpers import USER, make_mirror, mirrored, read_tree

FILE_X = b"file x, as synced\n"
A, B = b"a, as synced\n", b"b, as synced\n"
HOWS = ["walk", "poll"]
DIFF = "GET /api/v2.1/repos/{id}/commits/{commit}/"


def _mirror(devserver, tmp_path: Path, *, folder: bool):
    repo = devserver.create_library(USER, "OH-Memory")
    devserver.put_file(repo, "/keep.md", b"keep\n")
    if folder:
        devserver.put_file(repo, "/x/a.md", A)
        devserver.put_file(repo, "/x/b.md", B)
    else:
        devserver.put_file(repo, "/x", FILE_X)
    m = make_mirror(devserver, repo, tmp_path)
    assert m.sync().errors == []
    assert m.engine.sync([], check_remote=True).errors == []  # the head recorded: later polls take the diffs
    return repo, m


def _settle(m, how: str, paths: list[str] = (), *, remote_changed: bool = False) -> list:
    """Passes until one does nothing (at most 4): a full walk each, or watcher-shaped polls
    (``paths`` the watcher saw, the head checked) with the full scan a pass asks for.

    :param remote_changed: the server changed: a poll reads the commits' changes first.
    :returns: the conflicts recorded.
    """
    m.server.reset_counters()
    conflicts = []
    for _ in range(4):
        rep = m.sync() if how == "walk" else m.engine.sync(list(paths), check_remote=True)
        if how == "poll" and rep.rescan:
            assert rep.errors == [] and rep.skipped == [], (rep.errors, rep.skipped)
            conflicts += rep.conflicts
            rep = m.sync()
        assert rep.errors == [] and rep.skipped == [], (rep.errors, rep.skipped)
        conflicts += rep.conflicts
        if not (rep.transferred or rep.deleted_local or rep.deleted_remote or rep.conflicts):
            assert not (how == "poll" and remote_changed) or m.server.request_count(DIFF) >= 1
            return conflicts
        paths = []
    raise AssertionError("no quiet pass after 4")


def _backups(m) -> dict[str, bytes]:
    root = m.engine.options.backup_dir
    return {p.relative_to(root).as_posix().split("/", 2)[2]: p.read_bytes()
            for p in root.rglob("*") if p.is_file()} if root.is_dir() else {}


def _under(tree: dict[str, bytes], prefix: str) -> dict[str, bytes]:
    return {p: d for p, d in tree.items() if p.startswith(prefix)}


def _assert_same_both_sides(m, devserver, repo) -> dict[str, bytes]:
    local, remote = read_tree(m.root), devserver.tree(repo)
    assert local == mirrored(remote)  # the trash stays on the server
    return remote


# --------------------------------------------------------------------------- the server changed the kind


@pytest.mark.parametrize("how", HOWS)
def test_remote_file_replaced_by_a_folder_arrives_and_the_file_is_backed_up(devserver, tmp_path, how) -> None:
    repo, m = _mirror(devserver, tmp_path, folder=False)
    devserver.delete_path(repo, "/x")
    devserver.put_file(repo, "/x/a.md", A)
    devserver.put_file(repo, "/x/b.md", B)
    assert _settle(m, how, remote_changed=True) == []
    tree = _assert_same_both_sides(m, devserver, repo)
    assert tree == {"/keep.md": b"keep\n", "/x/a.md": A, "/x/b.md": B}  # the folder's files arrived
    assert _backups(m) == {"x": FILE_X}  # the old file, unchanged here, backed up


@pytest.mark.parametrize("how", HOWS)
def test_remote_file_replaced_by_a_folder_while_edited_here_archives_the_file(devserver, tmp_path, how) -> None:
    repo, m = _mirror(devserver, tmp_path, folder=False)
    m.write("x", b"file x, edited here\n")
    devserver.delete_path(repo, "/x")
    devserver.put_file(repo, "/x/a.md", A)
    (conflict,) = _settle(m, how, ["x"], remote_changed=True)
    tree = _assert_same_both_sides(m, devserver, repo)
    assert _under(tree, "/x/") == {"/x/a.md": A}  # the folder keeps the name
    (copy,) = _under(tree, "/.conflict/")
    assert copy.startswith("/.conflict/x__local__") and tree[copy] == b"file x, edited here\n"
    assert conflict.path == "x" and "/" + conflict.archived == copy
    assert [c.archived for c in m.engine.conflicts()] == [conflict.archived]


@pytest.mark.parametrize("edited", [False, True], ids=["unchanged here", "edited here"])
def test_remote_file_replaced_by_a_folder_waits_while_a_program_writes_the_file(devserver, tmp_path, edited) -> None:
    repo, m = _mirror(devserver, tmp_path, folder=False)
    if edited:
        m.write("x", b"file x, edited here\n")
    devserver.delete_path(repo, "/x")
    devserver.put_file(repo, "/x/a.md", A)
    m.engine.options.being_written = lambda path: path.name == "x"  # a program holds it open
    for _ in range(2):
        rep = m.sync()
        assert rep.errors == [] and [p for p, _ in rep.skipped] == ["x", "x/a.md"], (rep.errors, rep.skipped)
        assert rep.conflicts == [] and not _under(devserver.tree(repo), "/.conflict/")  # nothing archived yet
    assert (m.root / "x").is_file()
    m.engine.options.being_written = None  # the program closed it
    conflicts = _settle(m, "walk")
    tree = _assert_same_both_sides(m, devserver, repo)
    assert _under(tree, "/x/") == {"/x/a.md": A}
    assert len(conflicts) == (1 if edited else 0)


@pytest.mark.parametrize("how", HOWS)
def test_remote_folder_replaced_by_a_file_arrives_and_the_folder_is_backed_up(devserver, tmp_path, how) -> None:
    repo, m = _mirror(devserver, tmp_path, folder=True)
    devserver.delete_path(repo, "/x")
    devserver.put_file(repo, "/x", FILE_X)
    assert _settle(m, how, remote_changed=True) == []
    tree = _assert_same_both_sides(m, devserver, repo)
    assert tree == {"/keep.md": b"keep\n", "/x": FILE_X}
    assert _backups(m) == {"x/a.md": A, "x/b.md": B}


@pytest.mark.parametrize("how", HOWS)
def test_remote_folder_replaced_by_a_file_while_edited_here_archives_the_file(devserver, tmp_path, how) -> None:
    repo, m = _mirror(devserver, tmp_path, folder=True)
    m.write("x/a.md", b"a, edited here\n")
    m.write("x/c.md", b"c, new here\n")
    devserver.delete_path(repo, "/x")
    devserver.put_file(repo, "/x", FILE_X)
    (conflict,) = _settle(m, how, ["x/a.md", "x/c.md"], remote_changed=True)
    tree = _assert_same_both_sides(m, devserver, repo)
    # the folder keeps the name with what changed here; what the server removed, unchanged here, went
    assert _under(tree, "/x/") == {"/x/a.md": b"a, edited here\n", "/x/c.md": b"c, new here\n"}
    (copy,) = _under(tree, "/.conflict/")
    assert copy.startswith("/.conflict/x__remote__") and tree[copy] == FILE_X
    assert "/" + conflict.archived == copy
    assert _backups(m) == {"x/b.md": B}


# --------------------------------------------------------------------------- this side changed the kind


@pytest.mark.parametrize("how", HOWS)
def test_local_file_replaced_by_a_folder_goes_up_and_the_file_into_trash(devserver, tmp_path, how) -> None:
    repo, m = _mirror(devserver, tmp_path, folder=False)
    (m.root / "x").unlink()
    m.write("x/a.md", A)
    m.write("x/b.md", B)
    assert _settle(m, how, ["x", "x/a.md", "x/b.md"]) == []
    tree = _assert_same_both_sides(m, devserver, repo)
    assert _under(tree, "/x/") == {"/x/a.md": A, "/x/b.md": B}
    assert _under(tree, "/.trash/") == {"/.trash/x": FILE_X}  # the old file, unchanged there
    assert "/.conflict/" not in "".join(tree)


@pytest.mark.parametrize("how", HOWS)
def test_local_file_replaced_by_a_folder_while_edited_there_archives_the_file(devserver, tmp_path, how) -> None:
    repo, m = _mirror(devserver, tmp_path, folder=False)
    (m.root / "x").unlink()
    m.write("x/a.md", A)
    devserver.put_file(repo, "/x", b"file x, edited on the server\n")
    (conflict,) = _settle(m, how, ["x", "x/a.md"], remote_changed=True)
    tree = _assert_same_both_sides(m, devserver, repo)
    assert _under(tree, "/x/") == {"/x/a.md": A}
    (copy,) = _under(tree, "/.conflict/")
    assert copy.startswith("/.conflict/x__remote__") and tree[copy] == b"file x, edited on the server\n"
    assert "/" + conflict.archived == copy


@pytest.mark.parametrize("how", HOWS)
def test_local_folder_replaced_by_a_file_goes_up_and_the_folder_into_trash(devserver, tmp_path, how) -> None:
    repo, m = _mirror(devserver, tmp_path, folder=True)
    shutil.rmtree(m.root / "x")
    m.write("x", FILE_X)
    assert _settle(m, how, ["x", "x/a.md", "x/b.md"]) == []
    tree = _assert_same_both_sides(m, devserver, repo)
    assert tree["/x"] == FILE_X
    assert _under(tree, "/.trash/") == {"/.trash/x/a.md": A, "/.trash/x/b.md": B}


@pytest.mark.parametrize("how", HOWS)
def test_local_folder_replaced_by_a_file_while_edited_there_archives_the_file(devserver, tmp_path, how) -> None:
    repo, m = _mirror(devserver, tmp_path, folder=True)
    shutil.rmtree(m.root / "x")
    m.write("x", FILE_X)
    devserver.put_file(repo, "/x/a.md", b"a, edited on the server\n")
    (conflict,) = _settle(m, how, ["x", "x/a.md", "x/b.md"], remote_changed=True)
    tree = _assert_same_both_sides(m, devserver, repo)
    # the folder keeps the name with what changed there; what was removed here, unchanged there, is in trash
    assert _under(tree, "/x/") == {"/x/a.md": b"a, edited on the server\n"}
    assert _under(tree, "/.trash/") == {"/.trash/x/b.md": B}
    (copy,) = _under(tree, "/.conflict/")
    assert copy.startswith("/.conflict/x__local__") and tree[copy] == FILE_X
    assert "/" + conflict.archived == copy


def test_a_new_file_here_and_a_new_folder_there_with_one_name(devserver, tmp_path) -> None:
    repo = devserver.create_library(USER, "OH-Memory")
    devserver.put_file(repo, "/x/a.md", A)
    m = make_mirror(devserver, repo, tmp_path)
    m.write("x", b"new file here\n")
    (conflict,) = _settle(m, "walk")
    tree = _assert_same_both_sides(m, devserver, repo)
    assert _under(tree, "/x/") == {"/x/a.md": A}
    (copy,) = _under(tree, "/.conflict/")
    assert tree[copy] == b"new file here\n"


def test_the_daemon_converges_both_ways(seed_daemon) -> None:
    from daemon_helpers import wait_for

    setup = seed_daemon(put={"/x": FILE_X, "/y/a.md": A}, poll_interval=1.0)
    srv, repo, mirror = setup.srv, setup.repo_id, setup.mirror
    p = setup.start(wait="idle", timeout=60)
    # the server replaces the file x by a folder; here the folder y is replaced by a file
    srv.delete_path(repo, "/x")
    srv.put_file(repo, "/x/a.md", A)
    shutil.rmtree(mirror / "y")
    (mirror / "y").write_bytes(b"y, a file now\n")
    wait_for(lambda: (mirror / "x" / "a.md").is_file() and srv.tree(repo).get("/y") == b"y, a file now\n",
             timeout=60, what="both replacements carried over")
    wait_for(lambda: srv.tree(repo).get("/.trash/y/a.md") == A, timeout=60, what="y's old file in /.trash/")
    wait_for(lambda: read_tree(mirror) == mirrored(srv.tree(repo)) and p.status()["state"] == "idle", timeout=60,
             what="both sides equal and idle")
    assert not p.status().get("skipped"), p.status()


@pytest.mark.parametrize("how", HOWS)
def test_desktop_junk_does_not_keep_a_folder_the_server_replaced_by_a_file(devserver, tmp_path, how) -> None:
    repo, m = _mirror(devserver, tmp_path, folder=True)
    m.write("x/.DS_Store", b"finder junk\n")  # never synced (ignored), left by the desktop
    m.write("x/sub/Thumbs.db", b"thumbnails\n")
    devserver.delete_path(repo, "/x")
    devserver.put_file(repo, "/x", FILE_X)
    assert _settle(m, how, remote_changed=True) == []
    assert m.read("x") == FILE_X and devserver.tree(repo)["/x"] == FILE_X
    assert _backups(m) == {"x/a.md": A, "x/b.md": B, "x/.DS_Store": b"finder junk\n",
                           "x/sub/Thumbs.db": b"thumbnails\n"}


def test_a_file_of_its_own_keeps_a_folder_the_server_replaced_by_a_file(devserver, tmp_path) -> None:
    repo, m = _mirror(devserver, tmp_path, folder=True)
    m.write("x/.DS_Store", b"finder junk\n")
    m.write("x/notes.log", b"ignored, yet someone's\n")
    m.engine.ignore = type(m.engine.ignore)((*m.engine.options.ignore, "*.log"), m.root)
    devserver.delete_path(repo, "/x")
    devserver.put_file(repo, "/x", FILE_X)
    rep = m.sync()
    assert m.read("x/notes.log") == b"ignored, yet someone's\n" and m.read("x/.DS_Store") == b"finder junk\n"
    assert [p for p, _ in rep.skipped] == ["x"]


def test_a_folder_here_holding_only_desktop_junk_yields_to_a_new_file_there(devserver, tmp_path) -> None:
    repo = devserver.create_library(USER, "OH-Memory")
    devserver.put_file(repo, "/x", FILE_X)
    m = make_mirror(devserver, repo, tmp_path)
    m.write("x/.DS_Store", b"finder junk\n")
    assert _settle(m, "walk") == []
    assert m.read("x") == FILE_X and devserver.tree(repo) == {"/x": FILE_X}
    assert _backups(m) == {"x/.DS_Store": b"finder junk\n"}


def test_a_file_then_a_folder_of_one_name_both_deleted_here_both_land_in_trash(devserver, tmp_path) -> None:
    repo, m = _mirror(devserver, tmp_path, folder=False)
    (m.root / "x").unlink()
    m.write("x/a.md", A)
    assert _settle(m, "walk") == []  # the file x went to /.trash/x
    shutil.rmtree(m.root / "x")  # now the folder goes too: /.trash/x is a file, not a folder
    assert _settle(m, "walk") == []
    tree = _assert_same_both_sides(m, devserver, repo)
    trash = _under(tree, "/.trash/")
    assert trash["/.trash/x"] == FILE_X and len(trash) == 2, trash
    (folder_copy,) = [p for p in trash if p != "/.trash/x"]
    assert folder_copy.startswith("/.trash/x__") and folder_copy.endswith("Z/a.md") and trash[folder_copy] == A


def test_backups_of_a_file_and_then_of_a_folder_of_its_name_on_one_day(devserver, tmp_path) -> None:
    repo, m = _mirror(devserver, tmp_path, folder=False)
    devserver.delete_path(repo, "/x")
    devserver.put_file(repo, "/x/a.md", A)
    assert _settle(m, "walk") == []  # the file x backed up
    devserver.delete_path(repo, "/x")
    devserver.put_file(repo, "/x", b"a file again\n")
    assert _settle(m, "walk") == []  # the folder's a.md backed up beside it
    assert m.read("x") == b"a file again\n"
    backups = _backups(m)
    assert backups["x"] == FILE_X and sorted(backups.values()) == sorted([FILE_X, A]), backups
