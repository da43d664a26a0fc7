"""Every cell of the reconciliation table (docs/architecture.md §4), for files and folders.

Each case starts from a synced mirror (a library of filler files plus the
case's own paths, so one delete stays under the mass-delete valve), changes
the local side and/or the server as its cell says, runs passes until nothing
moves, and checks the mirror, the server, ``/.trash/``, ``/.conflict/`` and
the backup folder.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from engine_helpers import USER, Mirror, make_mirror, mirrored, read_tree

BASE = b"line one\nline two\nline three\n"
LOCAL = b"line one (edited here)\nline two\nline three\n"
REMOTE = b"line one\nline two\nline three (edited on the phone)\n"
MERGED = b"line one (edited here)\nline two\nline three (edited on the phone)\n"
FILLER = {f"filler/f{i:02}.txt": f"filler {i}\n".encode() for i in range(24)}


@dataclass
class World:
    srv: object
    repo: str
    m: Mirror
    tmp: Path
    notes: dict = field(default_factory=dict)

    # server side, as another client
    def put(self, rel: str, data: bytes) -> None:
        self.srv.put_file(self.repo, "/" + rel, data)

    def rm_remote(self, rel: str) -> None:
        self.srv.delete_path(self.repo, "/" + rel)

    def mkdir_remote(self, rel: str) -> None:
        self.srv.mkdir(self.repo, "/" + rel)

    # local side
    def write(self, rel: str, data: bytes) -> None:
        self.m.write(rel, data)

    def rm_local(self, rel: str) -> None:
        path = self.m.root / rel
        if path.is_dir():
            for p in sorted(path.rglob("*"), key=lambda p: -len(p.parts)):
                p.rmdir() if p.is_dir() else p.unlink()
            path.rmdir()
        else:
            path.unlink()

    def mkdir_local(self, rel: str) -> None:
        (self.m.root / rel).mkdir(parents=True, exist_ok=True)

    # looking
    def server(self) -> dict[str, bytes]:
        return self.srv.tree(self.repo)

    def server_dirs(self) -> set[str]:
        return {d.rstrip("/") for d in self.srv.dirs(self.repo)}

    def local(self) -> dict[str, bytes]:
        return read_tree(self.m.root)

    def local_dirs(self) -> set[str]:
        return {"/" + p.relative_to(self.m.root).as_posix() for p in self.m.root.rglob("*") if p.is_dir()}

    def backups(self) -> dict[str, bytes]:
        """Backed-up files by rel path inside the library's backup folder."""
        root = self.tmp / "m-state" / "backups"
        out: dict[str, bytes] = {}
        for p in sorted(root.rglob("*")) if root.is_dir() else []:
            if p.is_file():
                rel = p.relative_to(root).parts[2:]  # <date>/<library>/<rel>
                out["/".join(rel)] = p.read_bytes()
        return out


def _seed(srv, tmp: Path, files: dict[str, bytes], dirs: tuple[str, ...]) -> str:
    seed = tmp / "seed"
    for rel, data in {**FILLER, **files}.items():
        (seed / rel).parent.mkdir(parents=True, exist_ok=True)
        (seed / rel).write_bytes(data)
    for rel in dirs:
        (seed / rel).mkdir(parents=True, exist_ok=True)
    return srv.create_library(USER, "OH-Memory", from_tree=seed)


def _converge(w: World, passes: int = 4) -> list:
    """Full passes until one changes nothing; returns the reports."""
    reports = []
    for _ in range(passes):
        r = w.m.sync()
        reports.append(r)
        assert r.errors == [], r.errors
        assert r.held_deletes == [], r.held_deletes
        if r.transferred == 0 and not r.deleted_local and not r.deleted_remote and not r.moved \
                and not r.remote_changed:
            return reports
    raise AssertionError(f"no convergence after {passes} passes: {reports[-1]}")


def _assert_same(w: World) -> None:
    """Both sides hold the same files and folders, but for the trash, which stays on the server."""
    assert w.local() == mirrored(w.server())
    assert w.local_dirs() == {d for d in w.server_dirs() if not re.match(r"/\.trash(?:_ohsync(?:-\d+)?)?(?:/|$)", d)}


# --------------------------------------------------------------------- files

P = "notes/doc.txt"


@dataclass
class Case:
    id: str
    change: Callable[[World], None]
    check: Callable[[World], None]
    files: dict[str, bytes] = field(default_factory=lambda: {P: BASE})
    dirs: tuple[str, ...] = ()


def _file_unchanged_unchanged(w: World) -> None:
    pass


def _check_unchanged(w: World) -> None:
    assert w.server()["/" + P] == BASE and w.local()["/" + P] == BASE
    assert not any(k.startswith("/.trash") or k.startswith("/.conflict") for k in w.server())
    assert w.backups() == {}


def _check_pulled(w: World) -> None:
    assert w.local()["/" + P] == REMOTE == w.server()["/" + P]
    assert w.backups() == {P: BASE}          # the overwritten local version was backed up
    assert not any(k.startswith("/.conflict") for k in w.server())


def _check_deleted_local(w: World) -> None:
    assert "/" + P not in w.local() and "/" + P not in w.server()
    assert w.backups() == {P: BASE}          # removed locally only after a backup


def _check_pushed(w: World) -> None:
    assert w.server()["/" + P] == LOCAL == w.local()["/" + P]
    assert w.backups() == {}
    assert not any(k.startswith("/.conflict") or k.startswith("/.trash") for k in w.server())


def _check_merged(w: World) -> None:
    assert w.server()["/" + P] == MERGED == w.local()["/" + P]
    assert not any(k.startswith("/.conflict") for k in w.server())


def _binary_both(w: World) -> None:
    w.write(P, b"\x00local binary\x00")
    w.put(P, b"\x00remote binary\x00")


def _check_binary_conflict(w: World) -> None:
    server = w.server()
    assert server["/" + P] == b"\x00local binary\x00" == w.local()["/" + P]   # the local version wins the path
    copies = {k: v for k, v in server.items() if k.startswith("/.conflict/notes/doc__remote__")}
    assert list(copies.values()) == [b"\x00remote binary\x00"]               # theirs archived, once
    assert len(w.m.engine.conflicts()) == 1


def _check_modification_beats_remote_delete(w: World) -> None:
    assert w.server()["/" + P] == LOCAL == w.local()["/" + P]
    assert not any(k.startswith("/.trash") for k in w.server())


def _check_trashed(w: World) -> None:
    server = w.server()
    assert "/" + P not in server and "/" + P not in w.local()
    assert server["/.trash/" + P] == BASE      # soft delete, folders kept
    assert "/.trash/" + P not in w.local()     # the trash stays on the server


def _check_modification_beats_local_delete(w: World) -> None:
    assert w.server()["/" + P] == REMOTE == w.local()["/" + P]
    assert not any(k.startswith("/.trash") for k in w.server())


def _check_forgotten(w: World) -> None:
    assert "/" + P not in w.server() and "/" + P not in w.local()
    assert not any(k.startswith("/.trash") for k in w.server())
    assert w.m.state.get_base(P) is None


NEW = "notes/new.txt"


def _check_new_pushed(w: World) -> None:
    assert w.server()["/" + NEW] == b"made here\n" == w.local()["/" + NEW]


def _check_new_pulled(w: World) -> None:
    assert w.local()["/" + NEW] == b"made there\n" == w.server()["/" + NEW]


def _new_both_equal(w: World) -> None:
    w.write(NEW, b"same bytes\n")
    w.put(NEW, b"same bytes\n")
    w.srv.reset_counters()


def _check_adopted(w: World) -> None:
    assert w.server()["/" + NEW] == b"same bytes\n" == w.local()["/" + NEW]
    assert w.srv.request_count(r"POST /seafhttp/(upload|update)") == 0   # adopted, not uploaded
    assert w.srv.request_count(r"GET /seafhttp/files/") == 0             # … nor downloaded
    assert w.m.state.get_base(NEW) is not None


def _new_both_different(w: World) -> None:
    w.write(NEW, b"alpha\nmade here\n")
    w.put(NEW, b"alpha\nmade there\n")


def _check_new_both_different(w: World) -> None:
    server = w.server()
    assert server["/" + NEW] == w.local()["/" + NEW]
    final = server["/" + NEW]
    copies = [v for k, v in server.items() if k.startswith("/.conflict/notes/new__")]
    # merged against an empty base, or the local version wins and theirs is archived: never dropped
    assert b"made here" in final
    assert b"made there" in final or copies == [b"alpha\nmade there\n"]


def _new_memory_both(w: World) -> None:
    head = b"---\ntitle: Shared\ntype: note\n---\n\n## Observations\n"
    w.write("notes/shared.md", head + b"- [desk] written at the desk #a\n")
    w.put("notes/shared.md", head + b"- [phone] written on the phone #b\n")


def _check_new_memory_merged(w: World) -> None:
    final = w.server()["/notes/shared.md"]
    assert final == w.local()["/notes/shared.md"]
    assert b"written at the desk" in final and b"written on the phone" in final   # union, empty base
    assert not any(k.startswith("/.conflict") for k in w.server())


FILE_CASES = [
    Case("unchanged-unchanged", _file_unchanged_unchanged, _check_unchanged),
    Case("unchanged-modified", lambda w: w.put(P, REMOTE), _check_pulled),
    Case("unchanged-deleted", lambda w: w.rm_remote(P), _check_deleted_local),
    Case("modified-unchanged", lambda w: w.write(P, LOCAL), _check_pushed),
    Case("modified-modified(text)", lambda w: (w.write(P, LOCAL), w.put(P, REMOTE)), _check_merged),
    Case("modified-modified(binary)", _binary_both, _check_binary_conflict),
    Case("modified-deleted", lambda w: (w.write(P, LOCAL), w.rm_remote(P)), _check_modification_beats_remote_delete),
    Case("deleted-unchanged", lambda w: w.rm_local(P), _check_trashed),
    Case("deleted-modified", lambda w: (w.rm_local(P), w.put(P, REMOTE)), _check_modification_beats_local_delete),
    Case("deleted-deleted", lambda w: (w.rm_local(P), w.rm_remote(P)), _check_forgotten),
    Case("new-absent", lambda w: w.write(NEW, b"made here\n"), _check_new_pushed),
    Case("new-new(equal)", _new_both_equal, _check_adopted),
    Case("new-new(different text)", _new_both_different, _check_new_both_different),
    Case("new-new(memory file)", _new_memory_both, _check_new_memory_merged),
    Case("absent-new", lambda w: w.put(NEW, b"made there\n"), _check_new_pulled),
]


# --------------------------------------------------------------------- folders

D = "proj"
DIR_FILES = {f"{D}/a.txt": b"file a\n", f"{D}/b.txt": b"file b\n", f"{D}/sub/c.txt": b"file c\n"}
EMPTY = "keep/empty"


def _dir_case(id_: str, change, check) -> Case:
    return Case(id_, change, check, files=dict(DIR_FILES), dirs=(EMPTY,))


def _check_dir_untouched(w: World) -> None:
    assert {k: v for k, v in w.server().items() if k.startswith(f"/{D}/")} == {"/" + k: v for k, v in DIR_FILES.items()}
    assert "/" + EMPTY in w.server_dirs() and "/" + EMPTY in w.local_dirs()


def _remote_adds(w: World) -> None:
    w.put(f"{D}/sub/new.txt", b"from the phone\n")
    w.mkdir_remote(f"{D}/newempty")
    w.mkdir_remote(f"{EMPTY}/inner")


def _check_remote_adds(w: World) -> None:
    assert w.local()[f"/{D}/sub/new.txt"] == b"from the phone\n"
    assert {f"/{D}/newempty", f"/{EMPTY}/inner"} <= w.local_dirs()
    _check_dir_untouched_files(w)


def _check_dir_untouched_files(w: World) -> None:
    for k, v in DIR_FILES.items():
        assert w.server()["/" + k] == v == w.local()["/" + k]


def _remote_deletes_folder(w: World) -> None:
    w.rm_remote(D)
    w.rm_remote(EMPTY)


def _check_remote_deleted_folder(w: World) -> None:
    assert not (w.m.root / D).exists() and not (w.m.root / EMPTY).exists()
    assert "/" + D not in w.server_dirs() and "/" + EMPTY not in w.server_dirs()
    assert "/keep" in w.local_dirs()          # only the deleted folder went
    assert w.backups() == DIR_FILES           # every removed file was backed up first


def _local_adds(w: World) -> None:
    w.write(f"{D}/sub/new.txt", b"made here\n")
    w.mkdir_local(f"{D}/newempty")
    w.mkdir_local(f"{EMPTY}/inner")


def _check_local_adds(w: World) -> None:
    assert w.server()[f"/{D}/sub/new.txt"] == b"made here\n"
    assert {f"/{D}/newempty", f"/{EMPTY}/inner"} <= w.server_dirs()
    _check_dir_untouched_files(w)


def _both_add(w: World) -> None:
    w.write(f"{D}/here.txt", b"made here\n")
    w.mkdir_local(f"{D}/here-empty")
    w.put(f"{D}/there.txt", b"made there\n")
    w.mkdir_remote(f"{D}/there-empty")


def _check_both_add(w: World) -> None:
    s = w.server()
    assert s[f"/{D}/here.txt"] == b"made here\n" and s[f"/{D}/there.txt"] == b"made there\n"
    assert {f"/{D}/here-empty", f"/{D}/there-empty"} <= w.server_dirs()
    _check_dir_untouched_files(w)


def _local_adds_remote_deletes(w: World) -> None:
    w.write(f"{D}/sub/new.txt", b"made here\n")
    w.write(f"{D}/a.txt", b"file a, edited here\n")
    w.rm_remote(D)


def _check_local_adds_remote_deletes(w: World) -> None:
    s = w.server()
    # modification beats deletion: what changed here survives on both sides ...
    assert s[f"/{D}/sub/new.txt"] == b"made here\n" and s[f"/{D}/a.txt"] == b"file a, edited here\n"
    # ... the untouched rest follows the remote delete, backed up first
    assert f"/{D}/b.txt" not in s and f"/{D}/sub/c.txt" not in s
    assert w.backups() == {f"{D}/b.txt": b"file b\n", f"{D}/sub/c.txt": b"file c\n"}


def _local_deletes_folder(w: World) -> None:
    w.rm_local(D)
    w.rm_local(EMPTY)


def _check_local_deleted_folder(w: World) -> None:
    s = w.server()
    assert "/" + D not in w.server_dirs() and "/" + EMPTY not in w.server_dirs()
    assert {k: v for k, v in s.items() if k.startswith("/.trash/")} == {"/.trash/" + k: v for k, v in DIR_FILES.items()}
    assert "/keep" in w.server_dirs()


def _local_deletes_remote_adds(w: World) -> None:
    w.rm_local(D)
    w.put(f"{D}/there.txt", b"made there\n")
    w.put(f"{D}/a.txt", b"file a, edited there\n")


def _check_local_deletes_remote_adds(w: World) -> None:
    s = w.server()
    assert s[f"/{D}/there.txt"] == b"made there\n" and s[f"/{D}/a.txt"] == b"file a, edited there\n"
    assert f"/{D}/b.txt" not in s and f"/{D}/sub/c.txt" not in s
    assert s["/.trash/" + D + "/b.txt"] == b"file b\n" and s["/.trash/" + D + "/sub/c.txt"] == b"file c\n"


def _both_delete(w: World) -> None:
    w.rm_local(D)
    w.rm_remote(D)
    w.rm_local(EMPTY)
    w.rm_remote(EMPTY)


def _check_both_deleted(w: World) -> None:
    assert "/" + D not in w.server_dirs() | w.local_dirs()
    assert "/" + EMPTY not in w.server_dirs() | w.local_dirs()
    assert not any(k.startswith("/.trash") for k in w.server()) and w.backups() == {}
    assert not any(p in (D, EMPTY) or p.startswith(D + "/") for p in w.m.state.all_bases())


def _local_new_folders(w: World) -> None:
    w.write("fresh/deep/x.txt", b"x\n")
    w.mkdir_local("fresh/empty/deeper")


def _check_local_new_folders(w: World) -> None:
    assert w.server()["/fresh/deep/x.txt"] == b"x\n"
    assert {"/fresh", "/fresh/deep", "/fresh/empty", "/fresh/empty/deeper"} <= w.server_dirs()


def _both_new_folders(w: World) -> None:
    w.write("fresh/x.txt", b"x here\n")
    w.mkdir_local("fresh/same-empty")
    w.put("fresh/y.txt", b"y there\n")
    w.mkdir_remote("fresh/same-empty")


def _check_both_new_folders(w: World) -> None:
    s = w.server()
    assert s["/fresh/x.txt"] == b"x here\n" and s["/fresh/y.txt"] == b"y there\n"
    assert "/fresh/same-empty" in w.server_dirs()


def _remote_new_folders(w: World) -> None:
    w.put("fresh/deep/y.txt", b"y\n")
    w.mkdir_remote("fresh/empty/deeper")


def _check_remote_new_folders(w: World) -> None:
    assert w.local()["/fresh/deep/y.txt"] == b"y\n"
    assert {"/fresh", "/fresh/deep", "/fresh/empty", "/fresh/empty/deeper"} <= w.local_dirs()


DIR_CASES = [
    _dir_case("dir-unchanged-unchanged", lambda w: None, _check_dir_untouched),
    _dir_case("dir-unchanged-modified", _remote_adds, _check_remote_adds),
    _dir_case("dir-unchanged-deleted", _remote_deletes_folder, _check_remote_deleted_folder),
    _dir_case("dir-modified-unchanged", _local_adds, _check_local_adds),
    _dir_case("dir-modified-modified", _both_add, _check_both_add),
    _dir_case("dir-modified-deleted", _local_adds_remote_deletes, _check_local_adds_remote_deletes),
    _dir_case("dir-deleted-unchanged", _local_deletes_folder, _check_local_deleted_folder),
    _dir_case("dir-deleted-modified", _local_deletes_remote_adds, _check_local_deletes_remote_adds),
    _dir_case("dir-deleted-deleted", _both_delete, _check_both_deleted),
    _dir_case("dir-new-absent", _local_new_folders, _check_local_new_folders),
    _dir_case("dir-new-new", _both_new_folders, _check_both_new_folders),
    _dir_case("dir-absent-new", _remote_new_folders, _check_remote_new_folders),
]


@pytest.mark.parametrize("case", FILE_CASES + DIR_CASES, ids=lambda c: c.id)
def test_reconciliation_cell(devserver, tmp_path, case: Case) -> None:
    repo = _seed(devserver, tmp_path, case.files, case.dirs)
    m = make_mirror(devserver, repo, tmp_path)
    first = m.sync()
    assert first.errors == []
    w = World(devserver, repo, m, tmp_path)
    _assert_same(w)
    case.change(w)
    _converge(w)
    _assert_same(w)                    # mirror == server, trash and conflict copies included
    case.check(w)
    for rel, data in FILLER.items():   # bystanders untouched
        assert w.server()["/" + rel] == data
