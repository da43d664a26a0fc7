"""Held deletions cost nothing: while the safety valve holds a remote mass
delete, a pass costs what an idle pass costs plus O(1), never a request per
held path; the held paths are checked again when their folders change."""

from __future__ import annotations

from pathlib import Path

from engine_helpers import USER, make_mirror

DETAIL = "GET /api2/repos/{id}/file/detail/"
HELD_DETAIL = r"file/detail/.*notes"  # a file/detail request about a path in /notes


def _library(devserver, tmp_path: Path, files: int = 80):
    seed = tmp_path / "seed"
    (seed / "notes").mkdir(parents=True)
    (seed / "keep").mkdir()
    for i in range(files):
        (seed / "notes" / f"n{i:03d}.md").write_text(f"note {i}\n", encoding="utf-8")
    (seed / "keep" / "k.md").write_text("kept\n", encoding="utf-8")
    repo = devserver.create_library(USER, "OH-Memory", from_tree=seed)
    mirror = make_mirror(devserver, repo, tmp_path)
    assert not mirror.sync().errors
    mirror.sync([])
    return repo, mirror


def _delete_on_server(devserver, repo: str, folder: str, names: list[str]) -> None:
    """Delete ``names`` of ``folder`` in one commit (as a person's mass delete on the web)."""
    with devserver.store.lock:
        devserver.ops.delete(repo, folder, names, devserver.store.repos[repo].owner)


def test_passes_while_deletes_are_held_cost_what_an_idle_pass_costs(devserver, tmp_path: Path) -> None:
    repo, mirror = _library(devserver, tmp_path)
    devserver.reset_counters()
    mirror.sync([])
    idle_cost = devserver.request_count()
    assert idle_cost >= 1
    victims = [f"n{i:03d}.md" for i in range(60)]  # past max_delete_files (50)
    _delete_on_server(devserver, repo, "/notes", victims)
    report = mirror.sync([])
    assert len(report.held_deletes) == 60 and report.deleted_local == []
    assert all((mirror.root / "notes" / name).exists() for name in victims)
    devserver.reset_counters()
    for _ in range(10):
        report = mirror.sync([])  # the daemon's polls
        assert report.deleted_local == []
    assert devserver.request_count(DETAIL) == 0
    assert devserver.request_count() <= 10 * idle_cost + 2, devserver.requests
    assert len(mirror.engine.held_deletes()) == 60
    # a full scan (the periodic one) asks no more either
    devserver.reset_counters()
    mirror.sync()
    assert devserver.request_count(DETAIL) == 0 and devserver.request_count() <= idle_cost + 2, devserver.requests
    assert len(mirror.engine.held_deletes()) == 60


def test_held_paths_are_checked_again_when_their_folder_changes(devserver, tmp_path: Path) -> None:
    repo, mirror = _library(devserver, tmp_path)
    victims = [f"n{i:03d}.md" for i in range(60)]
    _delete_on_server(devserver, repo, "/notes", victims)
    assert len(mirror.sync([]).held_deletes) == 60
    # one of them comes back on the server: the folder changed, so it is seen and no longer held
    devserver.put_file(repo, "/notes/n000.md", b"note 0, restored\n")
    report = mirror.sync([])
    held = {p for p, _ in mirror.engine.held_deletes()}
    assert "notes/n000.md" not in held and len(held) == 59
    assert (mirror.root / "notes" / "n000.md").read_bytes() == b"note 0, restored\n"
    assert report.deleted_local == []
    # a change in another folder asks nothing about the held ones
    devserver.reset_counters()
    devserver.put_file(repo, "/keep/other.md", b"other\n")
    mirror.sync([])
    assert (mirror.root / "keep" / "other.md").exists()
    assert devserver.request_count(HELD_DETAIL) == 0, devserver.requests
    assert len(mirror.engine.held_deletes()) == 59
    # confirmed, they go (each one checked once more right before)
    devserver.reset_counters()
    mirror.engine.confirm_deletes()
    report = mirror.sync([])
    assert len(report.deleted_local) == 59
    assert devserver.request_count(HELD_DETAIL) >= 59
    assert not any((mirror.root / "notes" / name).exists() for name in victims[1:])


def test_ohsync_status_shows_the_first_twenty_held_paths_and_a_count(capsys) -> None:
    from daemon_helpers import idle_snapshot
    from ohsync.daemon.attention import attention_items
    from ohsync.daemon.cli.status import _print_status
    from ohsync.daemon.status import build_status

    held = [(f"notes/n{i:03d}.md", "local") for i in range(120)]
    items = tuple(attention_items(held=held, damaged=[("knowledge/x.md", "not valid UTF-8")], skipped=[]))
    st = build_status(idle_snapshot(held_deletes=120, damaged=1, attention=items))
    assert st["state"] == "attention"
    _print_status(st)
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert sum(1 for line in lines if line.strip().startswith("deletion held:")) == 20
    assert "notes/n000.md" in out and "notes/n019.md" in out and "notes/n020.md" not in out
    assert "… and 100 more (deletion held, 120 in all): see `ohsync confirm-deletes --list`" in out
    assert "damaged: 'knowledge/x.md'" in out
    assert len(lines) < 30


def test_the_daemon_stays_in_attention_and_polls_cheaply_while_deletes_are_held(isolated_env, seed_daemon,
                                                                              tmp_path: Path) -> None:
    import json
    import socket
    import threading
    import time

    from daemon_helpers import wait_for

    files = {f"notes/n{i:03d}.md": f"note {i}\n".encode() for i in range(80)}
    s = seed_daemon(files=files, poll_interval=0.5)
    proc = s.start(wait="idle")
    srv = s.srv
    _delete_on_server(srv, s.repo_id, "/notes", [f"n{i:03d}.md" for i in range(60)])
    wait_for(lambda: proc.status()["held_deletes"] == 60 and proc.status()["state"] == "attention", timeout=60,
             what="the mass delete held")
    held_at = proc.status()["polls"]
    wait_for(lambda: proc.status()["polls"] > held_at, timeout=30, what="a poll after the pass that held them")
    srv.reset_counters()
    polls = proc.status()["polls"]
    states: list[str] = []

    def listen() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.connect(str(isolated_env.socket))
            sock.sendall(b'{"jsonrpc":"2.0","id":1,"method":"subscribe"}\n')
            sock.settimeout(0.2)
            deadline, buf = time.monotonic() + 4.0, b""
            while time.monotonic() < deadline:
                try:
                    buf += sock.recv(65536)
                except TimeoutError:
                    continue
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    msg = json.loads(line)
                    if msg.get("method") == "event" and msg["params"].get("type") == "status":
                        states.append(msg["params"]["status"]["state"])

    reader = threading.Thread(target=listen)
    reader.start()
    reader.join(20)
    st = proc.status()
    new_polls = st["polls"] - polls
    assert new_polls >= 4 and st["state"] == "attention" and st["held_deletes"] == 60
    assert "syncing" not in states, states
    assert srv.request_count(HELD_DETAIL) == 0, srv.requests
    assert srv.request_count() <= 2 * new_polls + 4, srv.requests  # about one request per poll
    out = proc.cli("status").stdout
    assert sum(1 for line in out.splitlines() if "deletion held:" in line) == 20
    assert "… and 40 more (deletion held, 60 in all)" in out
