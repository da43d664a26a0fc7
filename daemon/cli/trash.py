"""``ohsync trash``: the library's trash, which stays on the server (engine/trash.py).

``ohsync trash`` lists it, ``ohsync trash restore PATH [--to NEW]`` brings one
file back (answering once the server holds it), ``ohsync trash purge`` deletes
entries trashed more than ``[safety] backup_days`` days ago (``--older-than``,
``--dry-run``).  All through the daemon's socket method ``trash``.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ..protocol import Method
from .common import EXIT_OK, Subparsers, add_command, add_mirror_option, daemon_client

__all__ = ["register", "cmd_trash"]


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"


def cmd_trash(args: argparse.Namespace) -> int:
    """List, restore or purge the trash (``args.trash_action``)."""
    action = getattr(args, "trash_action", None) or "list"
    params: dict[str, Any] = {"action": action}
    if action == "restore":
        params.update(path=args.path, **({"to": args.to} if args.to else {}))
    elif action == "purge":
        params.update(dry_run=args.dry_run, **({"older_than": args.older_than} if args.older_than is not None else {}))
    answer = daemon_client(args, timeout=600).call(Method.TRASH, params)
    if getattr(args, "json", False):
        print(json.dumps(answer, ensure_ascii=False))
        return EXIT_OK
    if action == "list":
        if not answer:
            print("The trash is empty.")
        for e in answer:
            when = f"trashed {e['trashed']}" if e.get("trashed") else "trashed by another client (time unknown)"
            print(f"{e['path']}  ({_size(int(e['size']))}, {when})\n    was {e['original']}")
    elif action == "restore":
        print(f"Restored {answer['restored']} from {answer['from']}; the server holds it.")
        if not answer.get("removed_from_trash"):
            print("Its copy stays in the trash (the upload is not verified yet); purge it later.")
    else:
        verb = "Would remove" if answer["dry_run"] else "Removed"
        print(f"{verb} {len(answer['removed'])} entr{'y' if len(answer['removed']) == 1 else 'ies'} trashed more "
              f"than {answer['older_than']:g} days ago ({_size(int(answer['bytes']))}).")
        for path in answer["removed"]:
            print(f"  {path}")
        if answer["kept_unknown"]:
            print(f"Kept {len(answer['kept_unknown'])} entr{'y' if len(answer['kept_unknown']) == 1 else 'ies'} "
                  "whose trash time is not known (trashed by another client); empty them in the web interface.")
    return EXIT_OK


def register(subparsers: Subparsers) -> None:
    """Add ``trash`` and its actions ``list``, ``restore``, ``purge`` (acting on one mirror)."""
    sp = add_command(subparsers, "trash", cmd_trash,
                     "list, restore or purge deleted files (the trash stays on the server)")
    sp.add_argument("--json", action="store_true", help="print the answer as JSON")
    sub = sp.add_subparsers(dest="trash_action", metavar="ACTION")
    sub.add_parser("list", help="list the trash (the default)", description="list the trash")
    rp = sub.add_parser("restore", help="bring a deleted file back (through the normal upload and check)",
                        description="bring a deleted file back; nothing existing is replaced")
    rp.add_argument("path", help="the file as `ohsync trash` lists it (its path in .trash/, or where it was)")
    rp.add_argument("--to", metavar="PATH", help="restore it here instead of where it was")
    pp = sub.add_parser("purge", help="delete old entries for good",
                        description="delete trash entries trashed more than DAYS days ago")
    pp.add_argument("--older-than", type=float, default=None, metavar="DAYS",
                    help="age in days (default: [safety] backup_days, 30)")
    pp.add_argument("--dry-run", action="store_true", help="only say what would be removed")
    for p in sub.choices.values():
        p.add_argument("--json", action="store_true", default=argparse.SUPPRESS, help="print the answer as JSON")
    for p in (sp, *sub.choices.values()):
        p.set_defaults(func=cmd_trash)
    add_mirror_option(sp)
