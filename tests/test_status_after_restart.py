"""A mirror that cannot sync after a restart says why, what to do, and when it last synced.

The time of the last pass that carried something across is kept in the
mirror's state database (daemon/last_sync.py), so ``ohsync status`` of a
mirror whose library was deleted while the daemon was stopped shows that
time next to the error, instead of "last sync: never".
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import httpx
import tomli_w

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import DaemonProc, isolated_env, wait_for  # noqa: F401
from ohsync.daemon import last_sync
from ohsync.engine.state import StateStore

USER = "user@example.edu.cn"


def test_the_last_sync_is_read_back_from_the_state_database(tmp_path: Path) -> None:
    folder = tmp_path / "mirrors" / "0f3c-1a2b3c4d"
    folder.mkdir(parents=True)
    state = StateStore(folder / "state.sqlite3", folder / "blobs")

    class Engine:
        pass

    engine = Engine()
    engine.state = state  # type: ignore[attr-defined]
    try:
        last_sync.record(engine, 1_764_000_000.25)
        assert state.get_meta(last_sync.KEY) == "1764000000.250"
    finally:
        state.close()
    newer = tmp_path / "mirrors" / "9e9e-1a2b3c4d"
    newer.mkdir()
    db = sqlite3.connect(newer / "state.sqlite3")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    db.execute("INSERT INTO meta VALUES (?, ?)", (last_sync.KEY, "1764000100"))
    db.commit()
    db.close()
    broken = tmp_path / "mirrors" / "dead-1a2b3c4d"
    broken.mkdir()
    (broken / "state.sqlite3").write_bytes(b"not a database")
    empty = tmp_path / "mirrors" / "none-1a2b3c4d"
    empty.mkdir()

    assert last_sync.recorded([folder]) == 1_764_000_000.25
    assert last_sync.recorded([folder, newer, broken, empty]) == 1_764_000_100  # the latest; the rest skipped
    assert last_sync.recorded([empty]) is None and list(empty.iterdir()) == []  # nothing created
    last_sync.record(object(), 1.0)  # an engine without a state store: nothing to write, no error


def _config(env: Any, server: str, mirrors: list[dict[str, Any]]) -> None:
    doc = {"server": server, "username": USER, "poll_interval": 1.0, "state_dir": str(env.root / "state"),
           "mirror": mirrors}
    env.config.write_text(tomli_w.dumps(doc), encoding="utf-8")


def _mirrors(d: DaemonProc) -> dict[str, dict[str, Any]]:
    return {m["name"]: m for m in d.status()["mirrors"]}


def _block(text: str, name: str) -> str:
    """The lines ``ohsync status`` prints for the mirror ``name``."""
    blocks = text.split("\n\n")
    return next(b for b in blocks if b.startswith(name + " "))


def test_a_library_deleted_while_stopped_shows_the_error_the_fix_and_the_last_sync(
        seed_daemon, tmp_path: Path) -> None:
    s = seed_daemon(put={"/a.md": b"a\n"}, config=False)
    docs = seed_daemon(library="Docs", put={"/readme.txt": b"docs library\n"}, config=False)
    _config(s.env, s.srv.url, [{"library": "OH-Memory", "local": str(tmp_path / "m")},
                               {"library": "Docs", "local": str(tmp_path / "docs")},
                               {"library": "Nowhere", "local": str(tmp_path / "nowhere")}])
    d = s.start()
    wait_for(lambda: _mirrors(d)["Docs"]["state"] == "idle" and _mirrors(d)["OH-Memory"]["state"] == "idle"
             and (tmp_path / "docs" / "readme.txt").is_file(), timeout=90, what="both libraries synced")
    seen: list[str | None] = []

    def settled() -> bool:  # the first pass to carry the file may end after the state first read idle
        seen.append(_mirrors(d)["Docs"]["last_sync"])
        return len(seen) >= 2 and seen[-1] == seen[-2] and _mirrors(d)["Docs"]["state"] == "idle"

    wait_for(settled, timeout=30, interval=1.5, what="the Docs mirror's last sync unchanged for a poll")
    synced = seen[-1]
    assert synced and (tmp_path / "docs" / "readme.txt").read_bytes() == b"docs library\n"
    assert d.stop() == 0

    token = s.srv.token_for(USER)
    reply = httpx.delete(f"{s.srv.url}/api2/repos/{docs.repo_id}/", headers={"Authorization": f"Token {token}"})
    assert reply.status_code == 200

    d = s.start()
    wait_for(lambda: _mirrors(d)["Docs"]["state"] == "stopped" and _mirrors(d)["OH-Memory"]["state"] == "idle",
             timeout=90, what="Docs stopped, OH-Memory syncing")
    assert _mirrors(d)["Docs"]["last_sync"] == synced  # from the state database of the first run
    assert _mirrors(d)["Nowhere"]["last_sync"] is None  # it never synced here

    r = d.cli("status")
    assert r.returncode == 1, r.stderr  # a mirror that does not sync: exit 1 (`ohsync status --help`)
    block = _block(r.stdout, "Docs")
    assert "stopped: The library 'Docs' does not exist on the server. Create it in the web interface" in block
    assert f"last sync: {synced} (nothing synced since: see above for why and what to do)" in block
    assert "never" not in block
    nowhere = _block(r.stdout, "Nowhere")
    assert "stopped: The library 'Nowhere' does not exist on the server." in nowhere
    assert "last sync: none recorded on this computer (see above for why and what to do)" in nowhere
    assert "last sync: never" not in r.stdout
    assert (tmp_path / "docs" / "readme.txt").read_bytes() == b"docs library\n"  # the local copy stays
