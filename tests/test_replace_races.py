"""A person's save that lands in the instant ohsync replaces or removes a local file stays live.

Before ohsync puts a downloaded or merged version over a local file (or
removes one the server deleted), it checks that the file is still the version
the plan saw, backs it up, and renames.  A save landing between the check and
the rename used to be replaced: the person's line survived only in
``state_dir/backups/`` (seen in the chaos profile, seed 15: a line appended
while a merge of another client's edit was written back).  The check is now
made on the very file the rename takes away (``engine/local_replace.py``):
each test makes the person save at the engine's hook point right before that
rename (``replace.ready``, ``delete.local_backed_up``) or right after it
(``replace.exchanged``), and then requires every line live on both sides or
archived in ``/.conflict/`` — never only in a backup.
"""
from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from breaker_helpers import synced_small
from engine_helpers import mirrored, read_tree

from ohsync.engine import renames
from ohsync.engine.crashpoints import set_hook


@pytest.fixture
def at_point() -> Iterator[Callable[[str, Callable[[], None]], list[str]]]:
    """``at_point(name, save)``: run ``save()`` the first time the engine reaches hook point ``name``."""
    hooks: dict[str, Callable[[], None]] = {}
    fired: list[str] = []

    def hook(name: str) -> None:
        action = hooks.pop(name, None)
        if action is not None:
            fired.append(name)
            action()

    previous = set_hook(hook)

    def arm(name: str, save: Callable[[], None]) -> list[str]:
        hooks[name] = save
        return fired

    yield arm
    set_hook(previous)


def _append(path: Path, line: bytes) -> None:
    """An in-place save, as `echo >> file` (same inode, new size and mtime)."""
    with open(path, "ab") as fh:
        fh.write(line)


def _atomic_append(path: Path, line: bytes) -> None:
    """An editor's atomic save of the file plus one line: temp file, rename over (new inode)."""
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_bytes(path.read_bytes() + line)
    os.replace(tmp, path)


SAVES = {"append": _append, "atomic": _atomic_append}


def _settle(m, passes: int = 4) -> None:  # noqa: ANN001
    for _ in range(passes):
        m.sync()
    assert read_tree(m.root) == mirrored(m.server.tree(m.repo_id)), "the two sides differ"


def _live(m, rel: str) -> tuple[bytes, bytes]:  # noqa: ANN001
    return m.read(rel), m.server.read_file(m.repo_id, "/" + rel)


def _unkept(m, rel: str, lines: list[bytes]) -> list[bytes]:  # noqa: ANN001
    """The lines that are neither live in ``rel`` nor in a conflict copy (both sides agree: settled)."""
    tree = read_tree(m.root)
    kept = tree.get("/" + rel, b"") + b"".join(v for k, v in tree.items() if k.startswith("/.conflict/"))
    return [line for line in lines if line not in kept]


@pytest.mark.parametrize("save", SAVES)
def test_save_just_before_a_download_replaces_the_file_stays_live(devserver, tmp_path, at_point,
                                                                  save: str) -> None:
    m = synced_small(devserver, tmp_path, {"/docs/a.txt": b"one\ntwo\nthree\n"})
    devserver.put_file(m.repo_id, "/docs/a.txt", b"one\ntwo\nthree\nremote line\n")
    path = m.root / "docs" / "a.txt"
    fired = at_point("replace.ready", lambda: SAVES[save](path, b"local line\n"))
    m.sync()
    assert fired == ["replace.ready"], "the download never came to replace the file"
    assert path.read_bytes() == b"one\ntwo\nthree\nlocal line\n"      # the save is live, not replaced
    _settle(m)
    assert b"local line" in m.read("docs/a.txt")
    assert _unkept(m, "docs/a.txt", [b"local line", b"remote line"]) == [], read_tree(m.root)


@pytest.mark.parametrize("save", SAVES)
def test_save_just_before_a_merge_is_written_back_stays_live(devserver, tmp_path, at_point, save: str) -> None:
    m = synced_small(devserver, tmp_path, {"/docs/a.txt": b"one\ntwo\nthree\nfour\nfive\n"})
    path = m.root / "docs" / "a.txt"
    devserver.put_file(m.repo_id, "/docs/a.txt", b"one\ntwo\nthree\nfour\nfive\nremote line\n")
    m.write("docs/a.txt", b"local first\none\ntwo\nthree\nfour\nfive\n")
    fired = at_point("replace.ready", lambda: SAVES[save](path, b"local second\n"))
    m.sync()
    assert fired == ["replace.ready"], "the merge was never written back"
    assert b"local second" in path.read_bytes()
    _settle(m)
    assert b"local second" in m.read("docs/a.txt")
    assert _unkept(m, "docs/a.txt", [b"local first", b"local second", b"remote line"]) == [], read_tree(m.root)


@pytest.mark.parametrize("save", SAVES)
def test_save_just_before_a_remote_delete_removes_the_file_keeps_it(devserver, tmp_path, at_point,
                                                                    save: str) -> None:
    m = synced_small(devserver, tmp_path, {"/docs/a.txt": b"one\ntwo\n"})
    devserver.delete_path(m.repo_id, "/docs/a.txt")
    path = m.root / "docs" / "a.txt"
    fired = at_point("delete.local_backed_up", lambda: SAVES[save](path, b"local line\n"))
    m.sync()
    assert fired == ["delete.local_backed_up"], "the remote delete was never carried out here"
    assert path.read_bytes() == b"one\ntwo\nlocal line\n"   # modification beats deletion
    _settle(m)
    assert _live(m, "docs/a.txt") == (b"one\ntwo\nlocal line\n",) * 2


def test_save_landing_while_a_new_remote_file_is_put_in_place_is_not_replaced(devserver, tmp_path,
                                                                              at_point) -> None:
    m = synced_small(devserver, tmp_path, {"/docs/d0.txt": b"document\n"})
    devserver.put_file(m.repo_id, "/docs/new.txt", b"remote version\n")
    path = m.root / "docs" / "new.txt"
    fired = at_point("replace.ready", lambda: path.write_bytes(b"local version\n"))
    m.sync()
    assert fired == ["replace.ready"]
    assert path.read_bytes() == b"local version\n"
    _settle(m)
    everything = b"".join(read_tree(m.root).values())
    assert b"local version" in everything and b"remote version" in everything


def test_two_saves_crossing_a_replace_keep_both(devserver, tmp_path, at_point) -> None:
    # one save just before the exchange, another (over ours) in the instant after it
    m = synced_small(devserver, tmp_path, {"/docs/a.txt": b"one\ntwo\nthree\n"})
    devserver.put_file(m.repo_id, "/docs/a.txt", b"one\ntwo\nthree\nremote line\n")
    path = m.root / "docs" / "a.txt"
    at_point("replace.ready", lambda: _append(path, b"first save\n"))
    fired = at_point("replace.exchanged", lambda: _atomic_append(path, b"second save\n"))
    m.sync()
    assert fired == ["replace.ready", "replace.exchanged"]
    assert path.read_bytes() == b"one\ntwo\nthree\nfirst save\n"
    copies = [p for p in read_tree(m.root) if p.startswith("/.conflict/docs/a__local__")]
    assert len(copies) == 1, read_tree(m.root)
    assert m.read(copies[0][1:]) == b"one\ntwo\nthree\nremote line\nsecond save\n"
    assert [c.archived for c in m.state.conflicts()] == [copies[0][1:]]   # recorded: `ohsync conflicts` names it
    _settle(m)
    assert copies[0] in m.server.tree(m.repo_id)                   # archived on both sides
    assert b"first save" in m.read("docs/a.txt")
    assert _unkept(m, "docs/a.txt", [b"first save", b"second save", b"remote line"]) == [], read_tree(m.root)


def test_a_save_since_the_file_was_hashed_is_not_adopted_as_synced(devserver, tmp_path, monkeypatch) -> None:
    # both sides end up with the same bytes (adopted without a transfer); a save
    # right after the hash must not be recorded as those bytes
    m = synced_small(devserver, tmp_path, {"/docs/a.txt": b"one\n"})
    devserver.put_file(m.repo_id, "/docs/a.txt", b"one\nsame edit\n")
    path = m.root / "docs" / "a.txt"
    m.write("docs/a.txt", b"one\nsame edit\n")
    from ohsync.engine.sync import run as sync_run

    real = sync_run.adopt
    saved: list[bool] = []

    def adopt_after_a_save(ctx, rel, remote_id, **kwargs):  # noqa: ANN001, ANN003, ANN202
        if not saved:
            saved.append(True)
            _append(path, b"local line\n")
        return real(ctx, rel, remote_id, **kwargs)

    monkeypatch.setattr(sync_run, "adopt", adopt_after_a_save)
    m.sync()
    assert saved, "the equal bytes were never adopted"
    monkeypatch.setattr(sync_run, "adopt", real)
    _settle(m)
    assert _live(m, "docs/a.txt") == (b"one\nsame edit\nlocal line\n",) * 2


def test_without_an_exchange_the_filesystem_still_gets_the_checked_rename(devserver, tmp_path,
                                                                          monkeypatch) -> None:
    # a filesystem (or system) that cannot exchange names or rename without replacing
    monkeypatch.setattr(renames, "_RENAME", None)
    m = synced_small(devserver, tmp_path, {"/docs/a.txt": b"one\n"})
    devserver.put_file(m.repo_id, "/docs/a.txt", b"one\nremote\n")
    devserver.put_file(m.repo_id, "/docs/b.txt", b"new\n")
    m.write("docs/c.txt", b"local new\n")
    m.sync()
    _settle(m)
    assert m.read("docs/a.txt") == b"one\nremote\n" and m.read("docs/b.txt") == b"new\n"


def test_rename_new_never_replaces(tmp_path, monkeypatch) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"ours")
    b.write_bytes(b"theirs")
    with pytest.raises(FileExistsError):
        renames.rename_new(a, b)
    assert a.read_bytes() == b"ours" and b.read_bytes() == b"theirs"
    monkeypatch.setattr(renames, "_RENAME", None)       # the hard-link way
    with pytest.raises(FileExistsError):
        renames.rename_new(a, b)
    renames.rename_new(a, tmp_path / "c")
    assert not a.exists() and (tmp_path / "c").read_bytes() == b"ours"

    def no_links(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise OSError(errno.EPERM, "no hard links here")

    monkeypatch.setattr(os, "link", no_links)                  # a filesystem without hard links
    with pytest.raises(FileExistsError):
        renames.rename_new(tmp_path / "c", b)
    renames.rename_new(tmp_path / "c", tmp_path / "d")
    assert (tmp_path / "d").read_bytes() == b"ours"


def test_exchange_swaps_two_names(tmp_path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_bytes(b"A")
    b.write_bytes(b"B")
    swapped = renames.exchange(a, b)
    if not swapped:   # another system: nothing moved, and the caller takes the checked rename
        assert not sys.platform.startswith("linux"), "renameat2(RENAME_EXCHANGE) failed on Linux"
        assert (a.read_bytes(), b.read_bytes()) == (b"A", b"B")
        return
    assert (a.read_bytes(), b.read_bytes()) == (b"B", b"A")
    with pytest.raises(FileNotFoundError):
        renames.exchange(a, tmp_path / "missing")


@pytest.mark.parametrize("twice", [False, True])
def test_save_landing_while_a_memory_tool_writes_the_file_stays_live(devserver, tmp_path, monkeypatch,
                                                                     twice: bool) -> None:
    # an agent's memory_append (read, plan, write) while the person saves the same file
    from ohsync.engine import nofollow
    from ohsync.engine.memory.tools import WritePlan
    from ohsync.engine.memory.writes import apply_write

    m = synced_small(devserver, tmp_path, {"/notes/n.md": b"# N\n\n## Observations\n- [a] one\n"})
    path = m.root / "notes" / "n.md"
    real = nofollow.exchange
    calls: list[int] = []

    def exchange_after_a_save(a, b, *, dir_fd=None):  # noqa: ANN001, ANN202
        calls.append(1)
        if len(calls) == 1:
            _append(path, b"- [b] person\n")          # the person saves just before the agent's write lands
        swapped = real(a, b, dir_fd=dir_fd)
        if twice and len(calls) == 1:
            _atomic_append(path, b"- [c] person again\n")   # and again, over the agent's, in that instant
        return swapped

    monkeypatch.setattr(nofollow, "exchange", exchange_after_a_save)
    result = apply_write(m.engine, "notes/n.md",
                         lambda data: WritePlan("notes/n.md", (data or b"") + b"- [d] agent\n", {"ok": True}))
    assert result["verified"] is True and len(calls) >= 3      # exchanged, back, then written on the new bytes
    monkeypatch.setattr(nofollow, "exchange", real)
    assert path.read_bytes() == b"# N\n\n## Observations\n- [a] one\n- [b] person\n- [d] agent\n"
    _settle(m)
    lines = [b"- [b] person", b"- [d] agent"] + ([b"- [c] person again"] if twice else [])
    assert _unkept(m, "notes/n.md", lines) == [], read_tree(m.root)
    assert bool(m.state.conflicts()) == twice


def test_save_landing_while_a_memory_tool_trashes_the_file_stays_live(devserver, tmp_path, monkeypatch) -> None:
    # memory_delete moves the entity into /.trash/ on the server, then removes it here; the
    # person saves it in between: that save is not removed (it syncs again as the file)
    from ohsync.engine.memory import writes as memory_writes
    from ohsync.engine.memory.tools import WritePlan

    m = synced_small(devserver, tmp_path, {"/notes/n.md": b"# N\n\n## Observations\n- [a] one\n"})
    path = m.root / "notes" / "n.md"
    real = memory_writes.delete_remote

    def trash_then_a_save(ctx, rel, base):  # noqa: ANN001, ANN202
        moved = real(ctx, rel, base)
        _append(path, b"- [b] person\n")
        return moved

    monkeypatch.setattr(memory_writes, "delete_remote", trash_then_a_save)
    result = memory_writes.trash_entity(
        m.engine, "notes/n.md", lambda data: WritePlan("notes/n.md", (data or b"") + b"status: trashed\n", {}))
    assert result["trash"] and not result["in_place"]
    assert b"- [b] person" in path.read_bytes()              # the save was not removed with the entity
    _settle(m)
    assert b"- [b] person" in devserver.read_file(m.repo_id, "/notes/n.md")


@pytest.mark.parametrize("exchange_works", [True, False])
def test_a_checked_memory_write_replaces_only_the_version_expected(tmp_path, monkeypatch,
                                                                   exchange_works: bool) -> None:
    from ohsync.engine import nofollow

    if not exchange_works:
        monkeypatch.setattr(renames, "_RENAME", None)          # the check just before the rename
    (tmp_path / "notes").mkdir()
    target = tmp_path / "notes" / "n.md"
    target.write_bytes(b"v1\n")
    st = os.lstat(target)
    seen = (st.st_size, st.st_mtime_ns, st.st_ino)
    nofollow.write_file(tmp_path, "notes/n.md", b"v2\n", expected=seen)
    assert target.read_bytes() == b"v2\n"
    with pytest.raises(nofollow.FileChanged):                   # v2 is not the version seen
        nofollow.write_file(tmp_path, "notes/n.md", b"v3\n", expected=seen)
    with pytest.raises(nofollow.FileChanged):                   # it exists: not "no file there"
        nofollow.write_file(tmp_path, "notes/n.md", b"v3\n", expected=None)
    nofollow.write_file(tmp_path, "notes/new.md", b"new\n", expected=None)
    assert target.read_bytes() == b"v2\n" and (tmp_path / "notes" / "new.md").read_bytes() == b"new\n"
    assert sorted(p.name for p in (tmp_path / "notes").iterdir()) == ["n.md", "new.md"]   # no temp files left
