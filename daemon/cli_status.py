"""``ohsync status``: the status object as text, one block per mirror when there are several.

The object is the daemon's (docs/architecture.md §7.2); ``--json`` prints it
as it is.  With one mirror the text is what it always was; with several,
each mirror gets its own block (state and message, last sync, counts,
attention items, transfer), then what concerns the daemon as a whole.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from ohsync.daemon.protocol import Method

__all__ = ["cmd_status", "shown"]


#: How ``ohsync status`` names each kind of attention item (daemon/attention.py).
_ATTENTION_LABEL = {"held_delete": "deletion held", "damaged": "damaged", "skipped": "cannot sync"}


def shown(path: Any) -> str:
    """A path in quotes as it is; only control characters are escaped (a newline shows as \\n)."""
    text = str(path)
    return "'" + "".join(repr(c)[1:-1] if ord(c) < 32 or ord(c) == 127 else c for c in text) + "'"


#: States in which a mirror does not sync until its problem goes away (its message says what to do).
_NOT_SYNCING = ("stopped", "error", "auth_required", "offline")


def _last_sync(item: dict[str, Any]) -> str:
    """The ``last sync`` line's value for a mirror (or the one-mirror status object).

    A mirror that cannot sync points to its message rather than saying
    "never" (which reads as "never worked"); the time is the state
    database's when this run has synced nothing yet (daemon/last_sync.py).
    """
    when, state = item.get("last_sync"), item.get("state")
    if state not in _NOT_SYNCING:
        return when or "never"
    if when:
        return f"{when} (nothing synced since: see above for why and what to do)"
    return "none recorded on this computer (see above for why and what to do)"


def _print_status(st: dict[str, Any]) -> None:
    mirrors = [m for m in st.get("mirrors") or [] if isinstance(m, dict)]
    if len(mirrors) > 1:
        _print_mirrors(st, mirrors)
        return
    print(f"{st['state']}: {st['message']}")
    for m in mirrors:
        print(f"  {m['library']} ↔ {m['local']}")
    print(f"  last sync: {_last_sync(st)}")
    if st.get("notifications"):
        print(f"  notifications: {st['notifications']}")
    counts = [f"{k.replace('_', ' ')} {st[k]}" for k in
              ("pending_up", "pending_down", "conflicts", "damaged", "skipped", "held_deletes") if st.get(k)]
    if counts:
        print("  " + ", ".join(counts))
    items = st.get("attention") or []
    for item in items:
        print(f"  {_ATTENTION_LABEL.get(item.get('kind'), item.get('kind'))}: {shown(item.get('path'))} — {item.get('reason')}")
    listed = sum(int(st.get(k) or 0) for k in ("held_deletes", "damaged", "skipped"))
    if listed > len(items):
        print(f"  … {listed - len(items)} more: see `ohsync confirm-deletes --list` and `ohsync damaged`")
    for item in (st.get("filing") or {}).get("held", []):
        print(f"  not filed: {item['message']}")
    if st.get("transfer"):
        t = st["transfer"]
        print(f"  {'up' if t['direction'] == 'up' else 'down'}: {t['path']} {t['done']}/{t['total']} bytes")


def _print_mirrors(st: dict[str, Any], mirrors: list[dict[str, Any]]) -> None:
    """``ohsync status`` of a daemon with several mirrors: one block per mirror."""
    for i, m in enumerate(mirrors):
        if i:
            print()
        name = m.get("name") or m.get("library")
        library = f" ({m['library']})" if m.get("library") and m.get("library") != name else ""
        print(f"{name}{library} ↔ {m.get('local')}")
        print(f"  {m.get('state')}: {m.get('message')}")
        print(f"  last sync: {_last_sync(m)}")
        counts = [f"{k.replace('_', ' ')} {m[k]}" for k in
                  ("pending_up", "pending_down", "conflicts", "damaged", "skipped", "held_deletes") if m.get(k)]
        if counts:
            print("  " + ", ".join(counts))
        for item in m.get("attention") or []:
            print(f"  {_ATTENTION_LABEL.get(item.get('kind'), item.get('kind'))}: {shown(item.get('path'))} — "
                  f"{item.get('reason')}")
        if m.get("transfer"):
            t = m["transfer"]
            print(f"  {'up' if t['direction'] == 'up' else 'down'}: {t['path']} {t['done']}/{t['total']} bytes")
    if st.get("notifications"):
        print(f"notifications: {st['notifications']}")
    for item in (st.get("filing") or {}).get("held", []):
        print(f"not filed: {item['message']}")


def cmd_status(args: argparse.Namespace) -> int:
    """Print the status (``--json``: the object as it is; ``--mirror``: that mirror's own)."""
    from ohsync.daemon.cli_common import EXIT_OK, daemon_client as _client

    st = _client(args).call(Method.STATUS)
    if args.json:
        print(json.dumps(st, ensure_ascii=False))
    else:
        _print_status(st)
    return EXIT_OK
