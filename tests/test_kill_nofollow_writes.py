"""A kill inside ``nofollow.write_file``/``remove_file`` between taking the
live file away and checking it, with a save that landed just before: the
save, then only under a temp name, is kept by the next start (a conflict
copy, uploaded), never removed as a leftover."""
from __future__ import annotations

import os

import pytest

from breaker_helpers import all_files, synced_small
from ohsync.engine import nofollow
from ohsync.engine.ignore import TEMP_PREFIX
from ohsync.engine.temp_marks import OURS_SUFFIX
from test_kill_after_exchange import BASE, SAVED, Killed, _restart_and_sync, _save_is_live


def _kill_at_the_check(monkeypatch, path) -> None:
    """The first fingerprint of ``path`` is real, then the person saves; the
    check of the temp name (after the exchange or rename) is where the kill lands."""
    real = nofollow._fingerprint

    def fingerprint(dfd, name):
        if name.startswith(TEMP_PREFIX):
            raise Killed("killed after taking the file away")
        fp = real(dfd, name)
        with open(path, "ab") as fh:
            fh.write(SAVED)
        return fp

    monkeypatch.setattr(nofollow, "_fingerprint", fingerprint)


def _fp(path) -> tuple[int, int, int]:
    st = os.stat(path)
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def _left(folder) -> list[bytes]:
    return [p.read_bytes() for p in folder.iterdir()
            if p.name.startswith(TEMP_PREFIX) and not p.name.endswith(OURS_SUFFIX)]


@pytest.mark.parametrize("step", ["write", "remove"])
def test_save_then_kill_inside_a_checked_write_or_remove_keeps_the_save(devserver, tmp_path, monkeypatch, step):
    m = synced_small(devserver, tmp_path, {"/docs/a.txt": BASE})
    path = m.root / "docs" / "a.txt"
    expected = _fp(path)
    _kill_at_the_check(monkeypatch, path)
    with pytest.raises(Killed):
        if step == "write":
            nofollow.write_file(m.root, "docs/a.txt", b"written by a tool\n", expected=expected)
        else:
            nofollow.remove_file(m.root, "docs/a.txt", expected=expected)
    monkeypatch.undo()
    assert _left(path.parent) == [BASE + SAVED]  # the save's only copy, not removed on the way out

    m2 = _restart_and_sync(devserver, m, tmp_path)
    _save_is_live(m2, tmp_path)
    copies = {k: v for k, v in all_files(m2.root).items() if k.startswith("/.conflict/")}
    assert list(copies.values()) == [BASE + SAVED], copies
