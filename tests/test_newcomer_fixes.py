"""Three faults a newcomer met: two daemons on one folder, a vanished mirror
folder shown as "Up to date" while push is on, server messages mangled by
the scrubbing of a short password."""
from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import DEMO_LIBRARY, USER, write_config
from ohsync.daemon.mirror_lock import MirrorInUse, MirrorLock
from ohsync.engine.client.errors import redact


@pytest.fixture
def library(seed_daemon):
    return seed_daemon(tree=DEMO_LIBRARY, config=False)


def test_second_daemon_on_the_same_folder_is_refused(library, isolated_env, tmp_path: Path) -> None:
    s = library
    s.configure(poll_interval=1.0)
    first = s.start(wait=("idle", "attention"))
    # a second config: its own state dir and socket, the same mirror folder
    other = tmp_path / "other"
    other.mkdir()
    env2 = type(isolated_env)(root=other, sock_dir=other / "run", keyring_file=isolated_env.keyring_file,
                              config=other / "config.toml")
    (other / "run").mkdir(mode=0o700)
    write_config(env2, s.srv.url, USER, s.mirror, poll_interval=1.0)
    second = s.start(env=env2)
    code = second.wait_exit(timeout=60)
    assert code != 0
    assert "Another ohsync daemon already syncs the folder" in second.output()
    assert first.status()["state"] in ("idle", "attention")     # the first one is untouched


def test_mirror_lock_is_per_folder_and_released(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    locks = tmp_path / "locks"
    one = MirrorLock(a, locks)
    one.acquire()
    with pytest.raises(MirrorInUse, match=str(a)):
        MirrorLock(a, locks).acquire()
    MirrorLock(b, locks).acquire()                 # another folder: its own lock
    one.release()
    MirrorLock(a, locks).acquire()                 # free again once released
    assert (os.stat(locks).st_mode & 0o777) == 0o700


def test_a_released_mirror_lock_leaves_no_file_and_a_stale_one_is_taken_over(tmp_path: Path) -> None:
    folder, locks = tmp_path / "m", tmp_path / "locks"
    folder.mkdir()
    for _ in range(3):                             # daemons that start and stop cleanly
        lock = MirrorLock(folder, locks)
        lock.acquire()
        assert lock.held and lock.path.exists()
        lock.release()
        assert not lock.held
    assert list(locks.iterdir()) == []             # no empty lock file piles up
    stale = MirrorLock(folder, locks)
    stale.path.write_bytes(b"")                    # left by a daemon that was killed
    stale.acquire()
    assert stale.held
    with pytest.raises(MirrorInUse):
        MirrorLock(folder, locks).acquire()
    stale.release()
    assert list(locks.iterdir()) == []


def test_vanished_mirror_folder_stops_within_seconds_when_no_poll_is_due(library) -> None:
    s = library
    # polls every 10 minutes (as with push on): only the folder guard can notice
    s.configure(poll_interval=600.0)
    d = s.start(wait=("idle", "attention"))
    before = s.srv.tree(s.repo_id)
    shutil.move(str(s.mirror), str(s.mirror.with_name("mirror.away")))
    st = d.wait_state("stopped", timeout=20)
    assert "missing" in st["message"]
    assert s.srv.tree(s.repo_id) == before                # nothing deleted on the server


def test_short_password_does_not_mangle_the_servers_message() -> None:
    said = "Unable to login with provided credentials."
    assert redact(said, ["n"]) == said
    token = "0123456789abcdef0123456789abcdef01234567"
    assert redact(f"bad token {token}", [token, None]) == "bad token <redacted>"
