"""Honest status: nothing that needs the person hides behind "Up to date".

Held deletes, damaged memory files and names that cannot sync make the state
``attention`` with each path and reason (status object, CLI, socket);
``wait`` fails while a delete is held, a path is skipped or a conflict
appeared since it began; a pass that finds nothing publishes nothing.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import (
    DEMO_LIBRARY,
    FakeEngine,
    FakeSession,
    idle_snapshot,
    wait_for,
)
from ohsync.daemon.attention import attention_items, wait_verdict
from ohsync.daemon.status import CHECK_GRACE, STATES, Snapshot, StatusModel, build_status
from ohsync.daemon.worker import SyncWorker
from ohsync.engine.events import ConflictRecord, SyncReport
from ohsync.engine.memory.check import memory_problem

TWO_BLOCKS = b"---\ntitle: Two blocks\n---\n---\ntags: [pasted]\n---\nbody\n"


def _idle(**kw: Any) -> Snapshot:
    return idle_snapshot(**kw)


# --------------------------------------------------------------------------- the status object


def test_attention_is_a_state_with_each_path_and_reason() -> None:
    items = attention_items(held=[("journal/2026-11.md", "remote")],
                            damaged=[("knowledge/x.md", "frontmatter opened on line 1 is never closed")],
                            skipped=[("back\\slash.md", "'back\\slash.md' contains a character Seafile does "
                                                        "not accept")])
    st = build_status(_idle(held_deletes=1, damaged=1, skipped=1, attention=tuple(items)))
    assert "attention" in STATES
    assert st["state"] == "attention" and st["mirrors"][0]["state"] == "attention"
    assert "Up to date" not in st["message"]
    assert "1 deletion held" in st["message"] and "1 damaged memory file" in st["message"]
    assert "1 name that cannot sync" in st["message"]
    by_kind = {i["kind"]: i for i in st["attention"]}
    assert by_kind["held_delete"]["path"] == "journal/2026-11.md"
    assert "confirm-deletes" in by_kind["held_delete"]["reason"]
    assert by_kind["damaged"]["path"] == "knowledge/x.md" and "never closed" in by_kind["damaged"]["reason"]
    assert by_kind["skipped"]["path"] == "back\\slash.md" and "Seafile" in by_kind["skipped"]["reason"]
    # the docs/architecture.md §7.2 keys keep their names and types
    for k in ("damaged", "skipped", "held_deletes"):
        assert st[k] == 1


def test_a_dropped_document_that_waits_for_the_person_is_attention_not_up_to_date() -> None:
    refused = {"drop_dir": "/d", "waiting": 0, "filing": 0, "held": [], "last": [], "error": None,
               "refused": [{"path": "/d/link.pdf", "message": "link.pdf is not a regular file (…); not filed."}]}
    st = build_status(_idle(filing=refused))
    assert st["state"] == "attention" and "1 dropped document not filed" in st["message"]
    quota = dict(refused, refused=[], held=[{"path": "/d/big.pdf", "status": "over_quota", "message": "no space"}])
    assert build_status(_idle(filing=quota))["state"] == "attention"
    broken = dict(refused, refused=[], error="checking the drop folder failed: RuntimeError() (see the log)")
    st = build_status(_idle(filing=broken))
    assert st["state"] == "attention" and "checking the drop folder failed" in st["message"]
    assert build_status(_idle(filing=dict(refused, refused=[])))["state"] == "idle"


def test_the_status_reads_the_drop_folder_facts_when_asked() -> None:
    import dataclasses

    model = StatusModel(**{f.name: getattr(_idle(), f.name) for f in dataclasses.fields(Snapshot)
                           if f.name not in ("now", "watcher_alive")})
    model.watcher_alive = lambda: True
    facts: dict[str, Any] = {"held": [], "refused": [{"path": "/d/x", "message": "x is not a regular file"}]}
    model.filing_now = lambda: facts
    assert model.status()["state"] == "attention"
    facts["refused"] = []  # the person removed it: no update() needed to say so
    assert model.status()["state"] == "idle"


@pytest.mark.parametrize("facts", [dict(held_deletes=2), dict(damaged=1), dict(skipped=3)])
def test_never_up_to_date_while_anything_needs_the_person(facts: dict[str, int]) -> None:
    st = build_status(_idle(**facts))
    assert st["state"] == "attention" and not st["message"].startswith("Up to date")
    assert build_status(_idle())["state"] == "idle"


def test_worse_states_still_win_over_attention() -> None:
    assert build_status(_idle(held_deletes=1, paused=True))["state"] == "paused"
    assert build_status(_idle(damaged=1, problem="offline"))["state"] == "offline"
    assert build_status(_idle(skipped=1, errors=2))["state"] == "error"


def test_a_short_check_changes_no_state_a_long_one_shows_syncing() -> None:
    model = StatusModel(library="L", local="/x", poll_interval=30, phase="running", last_poll=time.time(),
                        last_scan=time.time(), last_sync=time.time())
    model.watcher_alive = lambda: True
    seen: list[dict[str, Any]] = []
    model.update()  # the first notification is the starting point
    model.add_listener(seen.append)
    assert model.status()["state"] == "idle"
    started = time.time()
    model.update(checking_since=started)      # a pass begins
    assert model.status()["state"] == "idle"
    model.update(checking_since=None, last_poll=time.time(), last_scan=time.time(), polls=1)  # found nothing
    assert seen == []
    # a check that outlasts the grace period is shown (and a notify then publishes it)
    assert build_status(_idle(checking_since=time.time() - CHECK_GRACE - 0.1))["state"] == "syncing"


# --------------------------------------------------------------------------- the worker


@dataclass
class AttentionEngine(FakeEngine):
    """A fake engine whose held deletes, damaged and skipped lists the test sets."""

    held: list[tuple[str, str]] = field(default_factory=list)
    damaged_list: list[tuple[str, str]] = field(default_factory=list)
    skipped_list: list[tuple[str, str]] = field(default_factory=list)
    conflict_next_pass: ConflictRecord | None = None

    def sync(self, local_paths: Any = None, *, check_remote: bool = True, should_stop: Any = None) -> SyncReport:
        report = super().sync(local_paths, check_remote=check_remote, should_stop=should_stop)
        if self.conflict_next_pass is not None:
            self.conflict_list.append(self.conflict_next_pass)
            report.conflicts.append(self.conflict_next_pass)
            self.conflict_next_pass = None
        return report

    def held_deletes(self) -> list[tuple[str, str]]:
        return list(self.held)

    def damaged(self) -> list[tuple[str, str]]:
        return list(self.damaged_list)

    def skipped(self) -> list[tuple[str, str]]:
        return list(self.skipped_list)


def _worker(engine: FakeEngine, poll: float = 60.0) -> tuple[SyncWorker, StatusModel, list[dict[str, Any]]]:
    status = StatusModel(library="OH-Memory", local=str(engine.local_root), poll_interval=poll)
    status.watcher_alive = lambda: True
    events: list[dict[str, Any]] = []
    status.add_listener(events.append)

    def open_session(on_event):
        engine.on_event = on_event
        return FakeSession(engine)

    return SyncWorker(open_session, status, poll_interval=poll), status, events


def test_idle_polls_publish_nothing_but_real_work_does(tmp_path: Path) -> None:
    engine = AttentionEngine(tmp_path)
    w, status, events = _worker(engine, poll=0.1)
    w.start()
    try:
        wait_for(lambda: status.status()["state"] == "idle", what="idle")
        first = status.status()["polls"]
        wait_for(lambda: status.status()["polls"] > first, what="one idle poll after the first pass")
        events.clear()
        polls = status.status()["polls"]
        wait_for(lambda: status.status()["polls"] >= polls + 8, what="eight idle polls")
        assert events == [], [e["state"] for e in events]
        # the listener does hear a pass that carries something across
        w.post_dirty(["a.md"])
        wait_for(lambda: [e["state"] for e in events][-1:] == ["idle"] and len(events) >= 2, what="a real pass")
        assert "syncing" in [e["state"] for e in events]
    finally:
        assert w.shutdown(10)


def test_wait_fails_and_names_the_path_while_a_delete_is_held(tmp_path: Path) -> None:
    engine = AttentionEngine(tmp_path, held=[("journal/2026-11.md", "remote")])
    w, status, _ = _worker(engine)
    w.start()
    try:
        synced, message, reasons = w.wait_detail(10)
        assert synced is False
        assert "journal/2026-11.md" in message and "ohsync confirm-deletes" in message
        assert reasons == [{"kind": "held_delete", "path": "journal/2026-11.md",
                            "reason": reasons[0]["reason"]}] and "safety valve" in reasons[0]["reason"]
        st = status.status()
        assert st["state"] == "attention" and st["held_deletes"] == 1
        assert st["attention"][0]["path"] == "journal/2026-11.md"
        engine.held.clear()  # confirmed or restored
        assert w.wait(10) == (True, "")
        assert status.status()["state"] == "idle"
    finally:
        w.shutdown(10)


def test_wait_fails_while_a_path_is_skipped(tmp_path: Path) -> None:
    engine = AttentionEngine(tmp_path, skipped_list=[("new\nline.md", "'new\nline.md' contains a control character")])
    w, status, _ = _worker(engine)
    w.start()
    try:
        synced, message, reasons = w.wait_detail(10)
        assert synced is False and "new\nline.md" in message and "control character" in message
        assert reasons[0]["kind"] == "skipped" and reasons[0]["path"] == "new\nline.md"
        assert status.status()["attention"][0]["kind"] == "skipped"
    finally:
        w.shutdown(10)


def test_damaged_files_are_listed_but_do_not_fail_wait(tmp_path: Path) -> None:
    """A damaged memory file still syncs byte for byte: status names it, wait is not held up."""
    engine = AttentionEngine(tmp_path, damaged_list=[("knowledge/x.md", "not valid UTF-8 (byte 3)")])
    w, status, _ = _worker(engine)
    w.start()
    try:
        assert w.wait(10) == (True, "")
        st = status.status()
        assert st["state"] == "attention" and st["damaged"] == 1
        assert st["attention"] == [{"kind": "damaged", "path": "knowledge/x.md",
                                    "reason": st["attention"][0]["reason"]}]
        assert "not valid UTF-8" in st["attention"][0]["reason"]
    finally:
        w.shutdown(10)


def test_wait_fails_for_a_conflict_that_appeared_since_it_began(tmp_path: Path) -> None:
    old = ConflictRecord("a.md", ".conflict/a__phone__20261130T010000Z.md", "2026-11-30T01:00:00Z", "both edited")
    engine = AttentionEngine(tmp_path, conflict_list=[old])
    w, status, _ = _worker(engine)
    w.start()
    try:
        assert w.wait(10) == (True, "")  # a conflict from before the wait does not fail it
        new = ConflictRecord("b.md", ".conflict/b__laptop__20261130T020000Z.md", "2026-11-30T02:00:00Z",
                             "both edited")
        engine.conflict_next_pass = new
        synced, message, reasons = w.wait_detail(10)
        assert synced is False
        assert "b.md" in message and ".conflict/b__laptop__20261130T020000Z.md" in message
        assert "a.md" not in message.replace("b.md", "")
        assert [r["path"] for r in reasons] == ["b.md"]
        assert w.wait(10) == (True, "")  # the next wait starts after it
    finally:
        w.shutdown(10)


def test_wait_verdict_lists_every_cause_in_one_answer() -> None:
    v = wait_verdict(errors=[("x.md", "x.md: Permission denied")], held=[("y.md", "local")],
                     new_conflicts=[{"path": "z.md", "archived": ".conflict/z__p__20261130T000000Z.md"}],
                     skipped=[("back\\slash.md", "bad name")])
    assert v.synced is False
    for needle in ("x.md", "Permission denied", "y.md", "confirm-deletes", "z.md", "back\\slash.md"):
        assert needle in v.message
    assert [r["kind"] for r in v.reasons] == ["failed", "held_delete", "conflict", "skipped"]
    assert wait_verdict() .synced is True


def test_wait_verdict_gives_each_skipped_path_its_own_reason() -> None:
    nfd = "the name is in decomposed Unicode (NFD) and renaming it to the composed form failed: Permission denied"
    v = wait_verdict(skipped=[("knowledge/z3.md", "symbolic link (not followed)"), ("knowledge/Résumé.md", nfd)])
    assert v.message == (f"2 paths are not synced: knowledge/Résumé.md ({nfd}); "
                         "knowledge/z3.md (symbolic link (not followed))")
    same = wait_verdict(skipped=[("a.md", "symbolic link (not followed)"), ("b.md", "symbolic link (not followed)")])
    assert same.message == "2 paths are not synced (a.md, b.md): symbolic link (not followed)"
    failed = wait_verdict(errors=[("x.md", "x.md: Permission denied"), ("y.md", "y.md: disk full")])
    assert "x.md (x.md: Permission denied); y.md (y.md: disk full)" in failed.message


# --------------------------------------------------------------------------- damaged memory files


def test_a_second_frontmatter_block_is_damage_and_a_rule_is_not() -> None:
    assert "second frontmatter block starts on line 4" in memory_problem(TWO_BLOCKS)
    assert memory_problem(b"---\ntitle: a\n---\nbody\n\n---\n\nmore\n") is None      # a horizontal rule
    assert memory_problem(b"---\ntitle: a\n---\n---\nJust a rule\n---\n") is None    # not a mapping
    assert memory_problem(b"---\ntitle: a\n") == "frontmatter opened on line 1 is never closed"
    assert memory_problem(b"") is None


# --------------------------------------------------------------------------- through the real daemon


@pytest.fixture
def daemon(seed_daemon):
    s = seed_daemon(tree=DEMO_LIBRARY, put={"/back\\slash.md": b"a name this disk is not given\n",
                                            "/knowledge/two-blocks.md": TWO_BLOCKS},
                    poll_interval=0.5, safety={"max_delete_files": 3, "max_delete_percent": 25})
    proc = s.start(wait="attention")
    proc.repo_id, proc.mirror, proc.srv = s.repo_id, s.mirror, s.srv
    return proc


def test_held_delete_makes_wait_fail_and_status_names_everything(daemon) -> None:
    (daemon.mirror / "new\nline.md").write_bytes(b"a local name with a newline\n")
    victims = sorted(p for p in daemon.mirror.rglob("*.md")
                     if "Files" not in p.parts and p.name not in ("two-blocks.md", "new\nline.md"))[:5]
    assert daemon.cli("pause").returncode == 0  # the deletes reach the daemon as one batch
    for p in victims:
        p.unlink()
    assert daemon.cli("resume").returncode == 0
    wait_for(lambda: daemon.status()["held_deletes"] == 5, timeout=60, what="held deletes")

    r = daemon.cli("wait", "--timeout", "30")
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert "Everything is synced" not in r.stdout
    held = [p.relative_to(daemon.mirror).as_posix() for p in victims]
    assert "5 deletions are held by the safety valve" in r.stderr and "ohsync confirm-deletes" in r.stderr
    assert all(repr(p) in r.stderr for p in held)
    assert "'new\\nline.md'" in r.stderr and "control character" in r.stderr

    st = daemon.status()
    assert st["state"] == "attention" and "Up to date" not in st["message"]
    items = {(i["kind"], i["path"]): i["reason"] for i in st["attention"]}
    for p in held:
        assert "safety valve" in items[("held_delete", p)]
    assert "second frontmatter block" in items[("damaged", "knowledge/two-blocks.md")]
    assert "Seafile" in items[("skipped", "back\\slash.md")]
    assert "control character" in items[("skipped", "new\nline.md")]

    r = daemon.cli("status", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["attention"] == st["attention"]
    r = daemon.cli("status")
    assert r.stdout.startswith("attention: Needs attention: 5 deletions held")
    assert "damaged: 'knowledge/two-blocks.md' — memory file does not parse: a second frontmatter" in r.stdout
    assert "cannot sync: 'back\\slash.md'" in r.stdout and "cannot sync: 'new\\nline.md'" in r.stdout
    assert all(f"deletion held: {p!r} — deleted here" in r.stdout for p in held)

    # once the deletes are carried out, wait still fails, now only for the names that cannot sync
    assert daemon.cli("confirm-deletes").returncode == 0
    wait_for(lambda: daemon.status()["held_deletes"] == 0, timeout=60, what="deletes carried out")
    r = daemon.cli("wait", "--timeout", "30")
    assert r.returncode == 1 and "held" not in r.stderr and "back\\slash.md" in r.stderr


def _read_events(sock_path: Path, seconds: float,
                 until: Callable[[list[dict[str, Any]]], bool] | None = None,
                 subscribed: threading.Event | None = None) -> list[dict[str, Any]]:
    """Subscribe on the daemon's socket and collect event params for ``seconds``
    (or until ``until(events)`` holds); ``subscribed`` is set once the daemon answered the subscribe."""
    events: list[dict[str, Any]] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(sock_path))
        sock.sendall(b'{"jsonrpc": "2.0", "id": 1, "method": "subscribe"}\n')
        deadline = time.monotonic() + seconds
        buf = b""
        while time.monotonic() < deadline:
            sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                msg = json.loads(line)
                if msg.get("method") == "event":
                    events.append(msg["params"])
                elif msg.get("result") == {"subscribed": True} and subscribed is not None:
                    subscribed.set()
            if until is not None and until(events):
                break
    return events


def test_idle_polls_send_no_status_events_on_the_socket(isolated_env, seed_daemon) -> None:
    s = seed_daemon(tree=DEMO_LIBRARY, poll_interval=0.5)
    mirror = s.mirror
    proc = s.start(wait="idle")
    first = proc.status()["polls"]
    wait_for(lambda: proc.status()["polls"] > first, what="one idle poll after the first pass")
    polls = proc.status()["polls"]
    collected: list[list[dict[str, Any]]] = []
    reader = threading.Thread(target=lambda: collected.append(_read_events(isolated_env.socket, 4.0)))
    reader.start()
    reader.join(20)
    assert proc.status()["polls"] >= polls + 4  # the server was checked several times meanwhile
    assert collected and [e for e in collected[0] if e.get("type") == "status"] == []
    # the same stream does carry a real change
    collected.clear()
    def synced_again(events: list[dict[str, Any]]) -> bool:
        states = [e["status"]["state"] for e in events if e.get("type") == "status"]
        return "syncing" in states and states[-1] == "idle"

    subscribed = threading.Event()
    reader = threading.Thread(target=lambda: collected.append(
        _read_events(isolated_env.socket, 8.0, until=synced_again, subscribed=subscribed)))
    reader.start()
    assert subscribed.wait(10), "the daemon did not answer the subscribe"
    (mirror / "knowledge" / "fresh.md").write_bytes(b"a new note\n")
    reader.join(20)
    states = [e["status"]["state"] for e in collected[0] if e.get("type") == "status"]
    assert "syncing" in states and states[-1] == "idle"


def test_a_login_during_a_failing_pass_is_not_reported_as_login_needed(tmp_path: Path) -> None:
    """`ohsync login` + `refresh` while the old session still holds the revoked token:
    the 401 that follows must lead to reading the keyring again, not to a stuck auth_required."""
    from ohsync.engine.errors import AuthError, ServerError

    engine = AttentionEngine(tmp_path)
    opened: list[int] = []
    status = StatusModel(library="OH-Memory", local=str(tmp_path), poll_interval=60)
    status.watcher_alive = lambda: True

    def open_session(on_event):
        opened.append(1)
        engine.on_event = on_event
        return FakeSession(engine)

    w = SyncWorker(open_session, status, poll_interval=60)
    w.start()
    try:
        wait_for(lambda: status.status()["state"] == "idle", what="idle")
        engine.fail_with = [ServerError("The server failed (HTTP 500)", status=500)]
        w.refresh()
        wait_for(lambda: status.status()["state"] == "error", what="server error")
        engine.fail_with = [AuthError("Invalid token", status=401)]  # the old token, revoked meanwhile
        w.refresh()  # the person logged in again and asked for a refresh
        wait_for(lambda: len(opened) == 2, what="opened again")
        wait_for(lambda: status.status()["state"] == "idle", what="idle with the new login")
        # a token rejected right after opening is reported as it is
        engine.fail_with = [AuthError("Invalid token", status=401)]
        w.post_dirty(["a.md"])
        wait_for(lambda: status.status()["state"] == "auth_required", what="auth_required")
    finally:
        w.shutdown(10)


# --------------------------------------------------------------------------- the tray and the engine's names


def test_the_tray_lists_each_item_with_its_reason() -> None:
    from datetime import datetime, timezone

    from ohsync.tray import menu_model as mm

    items = attention_items(held=[("journal/2026-11.md", "remote")],
                            damaged=[("knowledge/x.md", "frontmatter opened on line 1 is never closed")],
                            skipped=[("new\nline.md", "'new\nline.md' contains a control character")])
    st = build_status(_idle(held_deletes=1, damaged=1, skipped=1, attention=tuple(items)))
    entries = mm.build_menu(mm.TrayView(status=st, now=datetime.now(timezone.utc)))
    assert entries[0].text.startswith("Needs attention")
    assert mm.icon_state(st) == ("attention", False)
    held, damaged, skipped = entries[1:4]
    assert held.text == "1 deletion held — run ohsync confirm-deletes"
    assert held.children[0].text.startswith("journal/2026-11.md — deleted here")
    assert damaged.children[0].text.startswith("knowledge/x.md — memory file does not parse")
    assert damaged.children[0].action == mm.Action("open", ("/home/u/OH-Memory/knowledge/x.md",))
    assert skipped.children[0].text.startswith("new\\nline.md — not synced:")  # one line, newline shown
    assert "\n" not in skipped.children[0].text


def test_engine_names_that_cannot_sync_become_attention_items(devserver, tmp_path: Path) -> None:
    from breaker_helpers import synced_small

    m = synced_small(devserver, tmp_path, {"/back\\slash.md": b"remote backslash\n"})
    long_name = "长" * 90 + ".md"  # 273 UTF-8 bytes
    devserver.put_file(m.repo_id, "/" + long_name, b"long remote name\n")
    (m.root / "new\nline.md").write_bytes(b"local newline\n")
    m.sync()
    items = {i["path"]: i["reason"] for i in attention_items(skipped=m.engine.skipped())}
    assert "Seafile" in items["back\\slash.md"]
    assert "255" in items[long_name]
    assert "control character" in items["new\nline.md"]
    # a later pass over other paths keeps them named
    m.sync(["pad/f01.txt"])
    assert {p for p, _ in m.engine.skipped()} >= {"back\\slash.md", "new\nline.md"}


def test_the_held_deletes_message_names_where_the_deletions_were_made(tmp_path: Path) -> None:
    engine = AttentionEngine(tmp_path, held=[("journal/2026-11.md", "remote")])  # deleted here
    status = StatusModel(library="OH-Memory", local=str(engine.local_root), poll_interval=60.0)
    status.watcher_alive = lambda: True
    events: list[dict[str, Any]] = []

    def open_session(on_event):
        engine.on_event = on_event
        return FakeSession(engine)

    w = SyncWorker(open_session, status, poll_interval=60.0, publish=events.append)
    w.start()
    try:
        wait_for(lambda: any(e.get("kind") == "held_deletes" for e in events), what="the held-deletes event")
        [event] = [e for e in events if e.get("kind") == "held_deletes"]
        assert "(made here) are held" in event["message"] and "(remote)" not in event["message"]
    finally:
        w.shutdown(10)
