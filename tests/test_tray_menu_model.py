"""The tray's menu model for every daemon state (no pystray, no display)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from ohsync.tray import menu_model as mm
from ohsync.tray.menu_model import Action, MenuEntry, TrayView

NOW = datetime(2026, 11, 30, 9, 14, 3, tzinfo=timezone(timedelta(hours=8)))
LOCAL = "/home/u/OH-Memory"


def status(state: str = "idle", **changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "protocol": 1, "state": state, "message": "Up to date", "last_sync": "2026-11-30T09:12:03+08:00",
        "pending_up": 0, "pending_down": 0, "conflicts": 0, "damaged": 0, "skipped": 0,
        "held_deletes": 0, "transfer": None,
        "mirrors": [{"library": "OH-Memory", "local": LOCAL, "state": state, "message": "Up to date"}],
    }
    base.update(changes)
    return base


def texts(entries: tuple[MenuEntry, ...]) -> list[str]:
    return [e.text for e in entries]


def entry(entries: tuple[MenuEntry, ...], prefix: str) -> MenuEntry:
    return next(e for e in entries if e.text.startswith(prefix))


def menu(st: dict[str, Any] | None, **view: Any) -> tuple[MenuEntry, ...]:
    return mm.build_menu(TrayView(status=st, now=NOW, **view))


# --- every state: status line, icon, menu shape ---------------------------------------

EXPECTED_LINES = {
    "starting": "Starting…",
    "idle": "Up to date · synced 2 min ago",
    "syncing": "Syncing",
    "attention": "Needs attention · synced 2 min ago",
    "paused": "Paused",
    "offline": "Offline — retrying",
    "auth_required": "Login needed — run ohsync login",
    "stopped": "Stopped — Local folder /home/u/OH-Memory is missing",
    "error": "Error — Local folder /home/u/OH-Memory is missing",
}


@pytest.mark.parametrize("state", sorted(EXPECTED_LINES))
def test_every_daemon_state_has_a_line_an_icon_and_the_full_menu(state: str) -> None:
    message = "Up to date" if state == "idle" else "Local folder /home/u/OH-Memory is missing"
    st = status(state, message=message)
    entries = menu(st)
    assert entries[0] == MenuEntry(EXPECTED_LINES[state], enabled=False)
    assert mm.icon_state(st) == (state, False)
    assert [t for t in texts(entries) if t != "-"][1:] == [
        "Refresh now", "Open ohsync…", "Open folder", "Open drop folder", "Conflicts (0)",
        "Resume syncing" if state == "paused" else "Pause syncing", "Stop ohsync and quit", "Quit"]
    assert entry(entries, "Refresh now") == MenuEntry("Refresh now", Action("refresh"))
    assert entry(entries, "Open folder").action == Action("open", (LOCAL,))
    assert entry(entries, "Conflicts").enabled is False
    assert entry(entries, "Quit").action == Action("quit")
    assert entries[1].is_separator


def test_the_state_list_covers_the_design_contract() -> None:
    contract = {"starting", "idle", "syncing", "attention", "paused", "offline", "auth_required", "stopped",
                "error"}
    assert contract | {mm.NOT_RUNNING} == set(mm.ICON_STATES)
    assert contract == set(EXPECTED_LINES)


def test_not_running_disables_daemon_actions_but_keeps_quit_and_drop_folder() -> None:
    entries = menu(None)
    assert entries[0].text == "ohsync is not running"
    assert mm.icon_state(None) == (mm.NOT_RUNNING, False)
    assert entry(entries, mm.START_LABEL).enabled is True  # `ohsync tray`: Start instead of Refresh now
    assert entry(menu(None, owns_daemon=True), "Refresh now").enabled is False
    assert entry(entries, "Pause syncing").enabled is False
    assert entry(entries, "Open folder").enabled is False
    assert entry(entries, "Conflicts (0)").enabled is False
    assert entry(entries, "Open drop folder").enabled is True
    assert entry(entries, "Quit").enabled is True
    assert mm.tooltip(TrayView(None, now=NOW)) == "ohsync — ohsync is not running"


def test_not_running_offers_start_unless_the_tray_owns_the_daemon() -> None:
    entries = mm.build_menu(TrayView(None, now=NOW))
    labels = [e.text for e in entries if not e.is_separator]
    assert labels[:2] == ["ohsync is not running", mm.START_LABEL]
    assert "Refresh now" not in labels
    assert entry(entries, mm.START_LABEL).action == Action("start") and entry(entries, mm.START_LABEL).enabled
    # after a click: "Starting…" and the item is disabled until the daemon answers
    starting = mm.build_menu(TrayView(None, now=NOW, starting=True))
    assert starting[0].text == "Starting…" and entry(starting, mm.START_LABEL).enabled is False
    # the in-process tray never offers Start (its daemon is this process)
    owned = [e.text for e in mm.build_menu(TrayView(None, now=NOW, owns_daemon=True))]
    assert mm.START_LABEL not in owned and "Refresh now" in owned
    # a running daemon: Refresh now, no Start
    running = [e.text for e in menu(status("idle"))]
    assert mm.START_LABEL not in running and "Refresh now" in running


def test_a_daemon_still_starting_in_process_says_starting() -> None:
    view = TrayView(None, now=NOW, owns_daemon=True, starting=True)
    assert mm.build_menu(view)[0].text == "Starting…"
    assert mm.icon_state(None, starting=True) == ("starting", False)


def test_unknown_state_from_a_newer_daemon_never_shows_a_tick() -> None:
    st = status("frobnicating", message="Doing new things")
    assert mm.icon_state(st) == ("error", False)
    assert menu(st)[0].text == "Error — Doing new things"


def test_paused_shows_resume_and_waiting_changes() -> None:
    entries = menu(status("paused", pending_up=2, pending_down=1))
    assert entries[0].text == "Paused · 3 changes waiting"
    assert entry(entries, "Resume syncing").action == Action("resume")
    assert mm.status_line(status("paused", pending_up=1), now=NOW) == "Paused · 1 change waiting"


def test_stopped_without_top_message_uses_the_stopped_mirror() -> None:
    st = status("stopped", message="", mirrors=[
        {"library": "OH-Memory", "local": LOCAL, "state": "stopped", "message": "Folder missing"}])
    assert mm.status_line(st, now=NOW) == "Stopped — Folder missing"


# --- time and progress ------------------------------------------------------------------

@pytest.mark.parametrize(("delta", "text"), [
    (timedelta(seconds=10), "just now"), (timedelta(seconds=70), "1 min ago"),
    (timedelta(minutes=2), "2 min ago"), (timedelta(minutes=59), "59 min ago"),
    (timedelta(hours=3, minutes=5), "3 h ago"), (timedelta(days=3), "on 27 Nov"),
])
def test_relative_time(delta: timedelta, text: str) -> None:
    assert mm.relative_time((NOW - delta).isoformat(), NOW) == text


def test_idle_without_last_sync_is_just_up_to_date() -> None:
    assert menu(status(last_sync=None))[0].text == "Up to date"
    assert menu(status(last_sync="garbage"))[0].text == "Up to date"
    assert mm.relative_time("2026-11-30T01:14:03Z", NOW) == "just now"  # Z suffix, other zone


def test_syncing_counts_up_through_a_batch_with_the_current_file() -> None:
    progress = mm.SyncProgress()
    transfer = {"path": "notes/notes.md", "direction": "up", "done": 0, "total": 10}
    st = status("syncing", pending_up=12, transfer=transfer)
    assert progress.update(st) == (1, 12)
    st = status("syncing", pending_up=10, transfer=transfer)
    p = progress.update(st)
    assert p == (3, 12)
    assert mm.status_line(st, now=NOW, progress=p) == "Syncing 3 of 12 · ↑ notes.md"
    # more work arrives mid-batch: the total grows, the count keeps going up
    assert progress.update(status("syncing", pending_up=10, pending_down=4)) == (3, 16)
    assert progress.update(status("idle")) is None
    assert progress.update(status("syncing", pending_down=2)) == (1, 2)


def test_syncing_line_with_transfer_progress_and_daemon_counts() -> None:
    transfer = {"path": "Files/big.pdf", "direction": "down", "done": 450, "total": 1000}
    st = status("syncing", transfer=transfer, files_done=4, files_total=9)
    p = mm.SyncProgress().update(st)
    assert p == (5, 9)
    assert mm.status_line(st, now=NOW, progress=p) == "Syncing 5 of 9 · ↓ big.pdf (45%)"
    assert mm.status_line(status("syncing"), now=NOW, progress=(1, 1)) == "Syncing"


def test_long_names_are_shortened_in_the_middle() -> None:
    name = "a" * 100 + ".md"
    line = mm.status_line(status("syncing", transfer={"path": name, "direction": "up"}), now=NOW)
    assert len(line) <= mm.MAX_LINE and line.endswith("a.md") and "…" in line


# --- detail lines, folders, conflicts ------------------------------------------------------

def test_counts_that_need_attention_get_their_own_disabled_lines() -> None:
    entries = menu(status(held_deletes=60, damaged=1, skipped=2))
    assert texts(entries)[1:4] == ["60 deletions held — run ohsync confirm-deletes",
                                   "1 damaged file — see ohsync status",
                                   "2 names skipped — see ohsync status"]
    assert not any(e.enabled for e in entries[:4])


def test_several_mirrors_get_an_open_folder_submenu_and_a_line_each() -> None:
    mirrors = [{"library": "OH-Memory", "local": LOCAL, "state": "idle", "message": "Up to date"},
               {"library": "Work", "local": "/home/u/Work", "state": "offline", "message": "Offline"}]
    entries = menu(status(mirrors=mirrors))
    assert "OH-Memory: Up to date" in texts(entries) and "Work: Offline" in texts(entries)
    folder = entry(entries, "Open folder")
    assert folder.children is not None
    assert [(c.text, c.action) for c in folder.children] == [
        ("OH-Memory", Action("open", (LOCAL,))), ("Work", Action("open", ("/home/u/Work",)))]


def test_drop_folder_comes_from_status_or_defaults_to_home() -> None:
    drop = entry(menu(status(drop_dir="/data/drop")), "Open drop folder")
    assert drop.action == Action("open", ("/data/drop",), fallback="/data/drop")
    default = os.path.expanduser("~/OH-Drop")
    assert entry(menu(status()), "Open drop folder").action == Action("open", (default,), fallback=default)


CONFLICTS = (
    {"path": "notes/a.md", "archived": ".conflict/notes/a__remote__20261130T011203Z.md",
     "time": "2026-11-30T01:12:03Z", "reason": "both changed", "fields": []},
    {"path": "b.txt", "archived": ".conflict/b__phone__20261130T011500Z.txt",
     "time": "2026-11-30T01:15:00Z", "reason": "both changed", "fields": []},
)


def test_conflicts_submenu_opens_each_file_with_its_archived_copy() -> None:
    st = status("attention", conflicts=2)
    entries = menu(st, conflicts=CONFLICTS)
    assert mm.icon_state(st) == ("attention", True)
    sub = entry(entries, "Conflicts (2)")
    assert sub.enabled and sub.children is not None
    assert texts(sub.children) == ["notes/a.md", "b.txt", "-", "Open conflicts folder"]
    assert sub.children[0].action == Action("open", (
        f"{LOCAL}/notes/a.md", f"{LOCAL}/.conflict/notes/a__remote__20261130T011203Z.md"))
    assert sub.children[-1].action == Action("open", (f"{LOCAL}/.conflict",))


def test_open_conflicts_are_never_up_to_date_even_from_an_older_daemon() -> None:
    """A daemon that still says ``idle`` beside open conflicts: the tray shows what needs the person."""
    st = status(conflicts=1)
    assert mm.status_line(st, now=NOW) == "Needs attention · synced 2 min ago"
    assert mm.icon_state(st) == ("attention", True)
    assert mm.status_line(status(), now=NOW) == "Up to date · synced 2 min ago"
    assert mm.icon_state(status()) == ("idle", False)


def test_conflict_count_before_the_list_arrives_and_long_lists() -> None:
    sub = entry(menu(status(conflicts=3)), "Conflicts (3)")
    assert sub.children is not None and sub.children[0].text == "Run ohsync conflicts for the list"
    many = tuple({"path": f"f{i}.md", "archived": f".conflict/f{i}.md"} for i in range(20))
    sub = entry(menu(status(conflicts=20), conflicts=many), "Conflicts (20)")
    assert sub.children is not None
    assert sub.children[mm.MAX_CONFLICT_ITEMS].text == "… and 5 more — run ohsync conflicts"


def test_conflict_paths_follow_the_named_library_and_accept_local_paths() -> None:
    st = status(mirrors=[{"library": "A", "local": "/a"}, {"library": "B", "local": "/b"}])
    assert mm.conflict_local_paths(st, {"path": "x.md", "archived": ".conflict/x.md", "library": "B"}) == (
        "/b/x.md", "/b/.conflict/x.md")
    assert mm.conflict_local_paths(st, {"path": "/a/y.md"}) == ("/a/y.md",)
    assert mm.conflict_local_paths(status(mirrors=[]), {"path": "x.md"}) == ()


def test_tray_modules_import_neither_pystray_nor_the_engine() -> None:
    code = ("import sys, ohsync.tray.app, ohsync.tray.menu_model, ohsync.tray.icons, "
            "ohsync.tray.notifier, ohsync.tray.desktop, ohsync.tray.__main__; "
            "print(sorted(m for m in sys.modules if m.startswith(('ohsync.engine', 'pystray', 'gi'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_a_tray_that_did_not_start_the_daemon_offers_to_stop_it_separately():
    from ohsync.tray.menu_model import TrayView, build_menu

    status = {"protocol": 1, "state": "idle", "message": "Up to date", "conflicts": 0,
              "mirrors": [{"library": "OH-Memory", "local": "/tmp/m", "state": "idle", "message": "Up to date"}]}
    labels = [e.text for e in build_menu(TrayView(status=status, owns_daemon=False))]
    assert labels[-2:] == ["Stop ohsync and quit", "Quit"]
    owned = [e.text for e in build_menu(TrayView(status=status, owns_daemon=True))]
    assert "Stop ohsync and quit" not in owned and owned[-1] == "Quit"


# --- several mirrors ----------------------------------------------------------------

def _two(second_state: str, second_message: str, **second: Any) -> dict[str, Any]:
    first = {"name": "OH-Memory", "library": "OH-Memory", "local": LOCAL, "state": "idle", "message": "Up to date",
             "conflicts": 0, "held_deletes": 0, "damaged": 0, "skipped": 0, "attention": []}
    other = {"name": "docs", "library": "Docs", "local": "/home/u/Docs", "state": second_state,
             "message": second_message, "conflicts": 0, "held_deletes": 0, "damaged": 0, "skipped": 0,
             "attention": [], **second}
    return status(mirrors=[first, other])


def test_the_icon_and_first_line_show_the_worst_mirror() -> None:
    st = _two("stopped", "Local folder /home/u/Docs is missing")
    assert st["state"] == "idle"  # the top level describes the first mirror
    assert mm.icon_state(st) == ("stopped", False)
    entries = menu(st)
    assert entries[0].text == "Stopped — docs: Local folder /home/u/Docs is missing"
    assert "OH-Memory: Up to date" in texts(entries) and "docs: Local folder /home/u/Docs is missing" in texts(entries)
    assert mm.icon_state(_two("idle", "Up to date")) == ("idle", False)
    assert mm.icon_state(_two("paused", "Syncing is paused"))[0] == "paused"


def test_counts_and_attention_items_of_every_mirror_reach_the_menu() -> None:
    item = {"kind": "damaged", "path": "notes/bad.md", "reason": "does not parse"}
    st = _two("attention", "Needs attention", damaged=1, conflicts=2, attention=[item])
    assert mm.icon_state(st) == ("attention", True)
    damaged = entry(menu(st), "1 damaged file")
    assert damaged.children is not None
    assert damaged.children[0].action == Action("open", ("/home/u/Docs/notes/bad.md",))
    assert entry(menu(st), "Conflicts (2)").enabled


def test_a_conflict_of_the_second_mirror_opens_in_its_folder() -> None:
    st = _two("idle", "Up to date", conflicts=1)
    conflict = {"path": "x.md", "archived": ".conflict/x.md", "mirror": "docs"}
    assert mm.conflict_local_paths(st, conflict) == ("/home/u/Docs/x.md", "/home/u/Docs/.conflict/x.md")


def test_every_mirrors_conflicts_folder_is_reachable() -> None:
    """With two mirrors the conflicts submenu opens each mirror's .conflict folder, each item
    naming its mirror; with one it is the one "Open conflicts folder" item as before."""
    st = _two("attention", "Needs attention", conflicts=1)
    conflicts = ({"path": "x.md", "archived": ".conflict/x.md", "mirror": "docs"},)
    sub = entry(menu(st, conflicts=conflicts), "Conflicts (1)")
    assert sub.children is not None
    folders = [(c.text, c.action) for c in sub.children if c.text.startswith("Open conflicts folder")]
    assert folders == [("Open conflicts folder of OH-Memory", Action("open", (f"{LOCAL}/.conflict",))),
                       ("Open conflicts folder of docs", Action("open", ("/home/u/Docs/.conflict",)))]


def test_a_conflict_or_damaged_file_of_no_known_mirror_is_not_opened_in_the_first() -> None:
    """Among several mirrors, an item whose mirror the status does not list opens nothing (it is not
    looked for in the first mirror's folder)."""
    st = _two("idle", "Up to date", conflicts=1)
    assert mm.conflict_local_paths(st, {"path": "x.md", "archived": ".conflict/x.md", "mirror": "gone"}) == ()
    item = {"kind": "damaged", "path": "notes/bad.md", "reason": "does not parse"}
    st = _two("attention", "Needs attention", local=None, damaged=1, attention=[item])  # docs: no folder said
    damaged = entry(menu(st), "1 damaged file")
    assert damaged.children is not None and damaged.children[0].action is None
    assert mm.conflict_local_paths(status(), {"path": "x.md"}) == (f"{LOCAL}/x.md",)  # one mirror: its folder


def test_an_error_label_is_one_short_sentence_with_the_details_one_click_away() -> None:
    message = ("1 file(s) failed to sync; they will be retried with backoff; see `ohsync activity` for "
               "each path and its cause")
    entries = menu(status("error", message=message))
    assert entries[0].text == "Error — 1 file(s) failed to sync"
    assert len(entries[0].text) <= mm.MAX_LINE and "…" not in entries[0].text
    details = entry(entries, "Details")
    assert " ".join(c.text for c in details.children) == message
    assert all(len(c.text) <= mm.MAX_LINE for c in details.children)
    # a long first sentence is cut at a word, never in the middle of one
    long = menu(status("error", message="The local folder /home/someone/Documents/OH-Memory/archive "
                                        "cannot be read by this user."))
    assert long[0].text.endswith("…") and len(long[0].text) <= mm.MAX_LINE
    assert long[0].text.removesuffix("…").split()[-1] in "The local folder /home/someone/Documents/OH-Memory/archive"


def test_not_running_names_the_socket_it_tried() -> None:
    entries = mm.build_menu(TrayView(None, now=NOW, socket="/run/user/1000/ohsync/ohsync.sock"))
    assert entries[0].text == "ohsync is not running"
    assert entries[1] == MenuEntry("No answer on /run/user/1000/ohsync/ohsync.sock", enabled=False)
