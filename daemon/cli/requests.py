"""The ``ohsync`` commands that ask the running daemon: refresh, pause,
resume, wait, conflicts, damaged, activity, file, confirm-deletes, restore-deletes.

Each is a client of the socket (:func:`~ohsync.daemon.cli.common.daemon_client`)
that prints the answer as text (``--json``: as it is, for the lists).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from collections.abc import Callable
from typing import Any

from ..attention import natural_key
from ..protocol import Method
from .common import (
    EXIT_FAILED,
    EXIT_OK,
    Subparsers,
    UsageError,
    add_command,
    add_mirror_option,
    daemon_client,
    say_error,
)
from .status import shown as _shown

__all__ = ["register", "simple_command", "pause_resume_command", "cmd_wait", "cmd_conflicts", "cmd_damaged",
           "cmd_activity", "cmd_file", "cmd_confirm_deletes", "cmd_restore_deletes"]


#: Most reasons ``ohsync wait`` lists one per line (the summary line names them all by count).
WAIT_LINES = 10


def simple_command(method: str, done: str) -> Callable[[argparse.Namespace], int]:
    """A command that calls ``method`` and prints ``done``."""
    def command(args: argparse.Namespace) -> int:
        daemon_client(args).call(method)
        print(done)
        return EXIT_OK
    return command


def pause_resume_command(method: str, done: str) -> Callable[[argparse.Namespace], int]:
    """``pause`` / ``resume``: the answer names the mirror when ``--mirror`` picked one (the others
    keep their state, so "Syncing paused." alone would say more than happened)."""
    def command(args: argparse.Namespace) -> int:
        daemon_client(args).call(method)
        mirror = getattr(args, "mirror", None)
        if not mirror:
            print(f"Syncing {done}.")
        elif method == Method.PAUSE:
            print(f"Syncing of {mirror} paused (the other mirrors go on); "
                  f"`ohsync resume --mirror {shlex.quote(mirror)}` continues it.")
        else:
            print(f"Syncing of {mirror} resumed.")
        return EXIT_OK
    return command


def cmd_wait(args: argparse.Namespace) -> int:
    """``ohsync wait``: wait until everything on disk now is synced (exit 1 with the reasons if not)."""
    result = daemon_client(args, timeout=args.timeout + 30).call(Method.WAIT, {"timeout": args.timeout})
    if result.get("synced"):
        print("Everything is synced.")
        return EXIT_OK
    say_error(f"not everything is synced: {result.get('message') or 'see `ohsync status`'}")
    reasons = result.get("reasons") or []
    for item in reasons[:WAIT_LINES]:
        print(f"  {item.get('kind')}: {_shown(item.get('path'))} — {item.get('reason')}", file=sys.stderr)
    if len(reasons) > WAIT_LINES:
        print(f"  … and {len(reasons) - WAIT_LINES} more (`ohsync status --json` lists them all)", file=sys.stderr)
    return EXIT_FAILED


def _print_items(args: argparse.Namespace, items: list[dict[str, Any]], empty: str,
                 show: Callable[[dict[str, Any]], str]) -> int:
    """Print a socket list as JSON (``--json``) or one block per item."""
    if args.json:
        print(json.dumps(items, ensure_ascii=False))
    elif not items:
        print(empty)
    else:
        for item in items:  # with several mirrors, each item names its own
            print(f"[{item['mirror']}] {show(item)}" if item.get("mirror") else show(item))
    return EXIT_OK


def _conflict_text(c: dict[str, Any]) -> str:
    text = f"{c['time']}  {c['path']}\n    other version kept as {c['archived']}\n    {c['reason']}"
    if c.get("fields"):
        text += f"\n    could not merge: {', '.join(c['fields'])}"
    return text + (f"\n    to settle it: copy what you need from {c['archived']} into {c['path']}, then "
                   f"delete {c['archived']}")


def cmd_conflicts(args: argparse.Namespace) -> int:
    """``ohsync conflicts``: the conflicts and where the other versions were kept."""
    return _print_items(args, daemon_client(args).call(Method.CONFLICTS), "No conflicts.", _conflict_text)


def cmd_damaged(args: argparse.Namespace) -> int:
    """``ohsync damaged``: the memory files that do not parse."""
    damaged = sorted(daemon_client(args).call(Method.DAMAGED), key=lambda d: natural_key(str(d.get("path"))))
    return _print_items(args, damaged, "No damaged files.",
                        lambda d: f"{d['path']}: {d['reason']}")


def _activity_text(a: dict[str, Any]) -> str:
    action, result, notes = a["action"], a["result"], [a["message"]] if a.get("message") else []
    if result == "conflict":  # a conflict's action is where the other version went
        kept = str(a["action"]).lstrip("/")
        if not any(kept in note for note in notes):  # a message naming the copy says it already
            notes = [f"other version kept as {a['action']}", *notes]
        action, result = "conflict", "archived"  # not "conflict conflict"
    extra = f"  ({'; '.join(notes)})" if notes else ""
    return f"{a['time']}  {action:<9} {result:<8} {a['path']}{extra}"


def cmd_activity(args: argparse.Namespace) -> int:
    """``ohsync activity``: the recent sync activity (at most ``--limit`` entries)."""
    return _print_items(args, daemon_client(args).call(Method.ACTIVITY, {"limit": args.limit}), "No activity yet.",
                        _activity_text)


def cmd_file(args: argparse.Namespace) -> int:
    """``ohsync file``: file documents into ``/Files/`` as if dropped into the drop folder.

    :raises UsageError: a path is missing or not a file."""
    paths = [os.path.abspath(os.path.expanduser(p)) for p in args.paths]
    for p in paths:
        if not os.path.exists(p):
            raise UsageError(f"no such file: {p}")
        if not os.path.isfile(p):
            raise UsageError(f"{p} is not a file; `ohsync file` takes documents one by one "
                             "(to file a whole folder, move its files into the drop folder)")
    results = daemon_client(args, timeout=args.timeout).call(Method.FILE, {"paths": paths}, timeout=args.timeout)
    ok = True
    for r in results:
        print(r.get("message") or f"{r.get('source')}: {r.get('status')}")
        ok = ok and r.get("status") in ("filed", "duplicate")
    return EXIT_OK if ok else EXIT_FAILED


def cmd_confirm_deletes(args: argparse.Namespace) -> int:
    """``ohsync confirm-deletes``: carry out the deletions the safety valve holds (``--list``: list them)."""
    client = daemon_client(args)
    if args.list:
        held = client.call(Method.HELD_DELETES)
        if not held:
            print("No deletions are held.")
        for item in sorted(held, key=lambda h: natural_key(str(h.get("path")))):
            where = "on the server (into /.trash/)" if item["side"] == "remote" else "in this folder (backed up)"
            mirror = f"[{item['mirror']}] " if item.get("mirror") else ""
            print(f"{mirror}{item['path']}  — would be deleted {where}")
        return EXIT_OK
    result = client.call(Method.CONFIRM_DELETES)
    each = result.get("mirrors")
    if isinstance(each, list) and len(each) > 1:  # several mirrors held deletions: each was confirmed
        for item in each:
            print(f"Carrying out {int(item.get('confirmed', 0))} held deletion(s) in {item.get('mirror')} now.")
        return EXIT_OK
    held = int(result.get("confirmed", 0))
    where = f" in {result['mirror']}" if result.get("mirror") else ""
    print(f"Carrying out {held} held deletion(s){where} now." if held else "No deletions were held.")
    return EXIT_OK


def cmd_restore_deletes(args: argparse.Namespace) -> int:
    """``ohsync restore-deletes``: undo the deletions the safety valve holds, each file back on the
    side it was deleted on; exit 1 when some could not be restored (each named with its reason)."""
    params: dict[str, Any] = {"timeout": args.timeout}
    result = daemon_client(args).call(Method.RESTORE_DELETES, params, timeout=args.timeout + 30)
    restored = [str(p) for p in result.get("restored") or []]
    left = [r for r in result.get("left") or [] if isinstance(r, dict)]
    where = f" in {result['mirror']}" if result.get("mirror") else ""
    if not restored and not left:
        print("No deletions were held.")
        return EXIT_OK
    print(f"Restored {len(restored)} file(s){where}: each is back on the side it was deleted on.")
    for item in left:
        print(f"Not restored: {item.get('path')}: {item.get('reason')}", file=sys.stderr)
    return EXIT_FAILED if left else EXIT_OK


def register(subparsers: Subparsers) -> None:
    """Add the commands of this module, each acting on one mirror but ``file``."""
    refresh = simple_command(Method.REFRESH, "Checking the server and the local folder now.")
    sp = add_command(subparsers, "refresh", refresh, "check the server and the local folder now")
    add_mirror_option(sp)
    sp = add_command(subparsers, "pause", pause_resume_command(Method.PAUSE, "paused"), "pause syncing")
    add_mirror_option(sp)
    sp = add_command(subparsers, "resume", pause_resume_command(Method.RESUME, "resumed"), "resume syncing")
    add_mirror_option(sp)
    sp = add_command(subparsers, "wait", cmd_wait, "wait until everything on disk now is synced")
    sp.add_argument("--timeout", type=float, default=60.0, metavar="S",
                    help="give up after S seconds (exit 1; default: %(default)s)")
    add_mirror_option(sp)
    sp = add_command(subparsers, "conflicts", cmd_conflicts, "list conflicts and where the other versions are")
    sp.add_argument("--json", action="store_true", help="print the list as JSON")
    add_mirror_option(sp)
    sp = add_command(subparsers, "damaged", cmd_damaged, "list memory files that do not parse")
    sp.add_argument("--json", action="store_true", help="print the list as JSON")
    add_mirror_option(sp)
    sp = add_command(subparsers, "activity", cmd_activity, "show recent sync activity")
    sp.add_argument("--limit", type=int, default=50, metavar="N", help="the last N events (default: %(default)s)")
    sp.add_argument("--json", action="store_true", help="print the events as JSON")
    add_mirror_option(sp)
    sp = add_command(subparsers, "file", cmd_file, "file documents into /Files/ (as if dropped into the drop folder)")
    sp.add_argument("paths", nargs="+", metavar="PATH", help="the documents to file, one or more")
    sp.add_argument("--timeout", type=float, default=600.0, metavar="S",
                    help="seconds to wait until they are filed and uploaded (default: %(default)s)")
    sp = add_command(subparsers, "confirm-deletes", cmd_confirm_deletes, "carry out deletions held by the safety valve")
    sp.add_argument("--list", action="store_true", help="only list the held deletions")
    add_mirror_option(sp)
    sp = add_command(subparsers, "restore-deletes", cmd_restore_deletes,
                     "undo deletions held by the safety valve: each file comes back on the side it was deleted on")
    sp.add_argument("--timeout", type=float, default=120.0, metavar="S",
                    help="seconds to wait until they are restored (default: %(default)s)")
    add_mirror_option(sp)
