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

from ..protocol import Method
from .common import EXIT_FAILED, EXIT_OK, Subparsers, add_command, add_mirror_option, daemon_client, say_error

__all__ = ["register", "EXIT_CODES_HELP", "cmd_status", "exit_code", "shown"]


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


#: Attention items of each kind ``ohsync status`` prints; the rest are counted.
SHOWN_PER_KIND = 20
#: Where the whole list of each kind is.
_FULL_LIST = {"held_delete": "`ohsync confirm-deletes --list`", "damaged": "`ohsync damaged`",
              "skipped": "`ohsync status --json`"}
_COUNT_KEY = {"held_delete": "held_deletes", "damaged": "damaged", "skipped": "skipped"}


def _print_attention(st: dict[str, Any], items: list[dict[str, Any]], indent: str) -> None:
    """The first :data:`SHOWN_PER_KIND` attention items of each kind, then how many more there are."""
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        by_kind.setdefault(str(item.get("kind")), []).append(item)
    for kind in list(by_kind) + [k for k in _COUNT_KEY if k not in by_kind]:
        kind_items = by_kind.get(kind, [])
        for item in kind_items[:SHOWN_PER_KIND]:
            print(f"{indent}{_ATTENTION_LABEL.get(kind, kind)}: {shown(item.get('path'))} — {item.get('reason')}")
        total = max(len(kind_items), int(st.get(_COUNT_KEY.get(kind, ""), 0) or 0))
        shown_count = min(len(kind_items), SHOWN_PER_KIND)
        if total > shown_count:
            label = _ATTENTION_LABEL.get(kind, kind)
            print(f"{indent}… and {total - shown_count} more ({label}, {total} in all): see "
                  f"{_FULL_LIST.get(kind, '`ohsync status --json`')}")


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
    _print_counts(st)
    _print_attention(st, st.get("attention") or [], "  ")
    _print_failures(st, "  ")
    _print_unfiled(st, "  ")
    _print_transfer(st)


def _print_failures(st: dict[str, Any], indent: str) -> None:
    """The failing paths the message does not name already (it names the first), each with its
    reason and whether it is retried, the first :data:`SHOWN_PER_KIND` of them."""
    message = str(st.get("message") or "")
    failures = [f for f in st.get("failures") or [] if f"{f.get('path')}: " not in message]
    for f in failures[:SHOWN_PER_KIND]:
        when = "" if f.get("permanent") else " (retried later)"
        print(f"{indent}cannot sync: {shown(f.get('path'))} — {f.get('reason')}{when}")
    if len(failures) > SHOWN_PER_KIND:
        print(f"{indent}… and {len(failures) - SHOWN_PER_KIND} more that cannot sync: see `ohsync status --json`")


def _print_unfiled(st: dict[str, Any], indent: str) -> None:
    """The dropped documents that wait for the person, each with its reason."""
    filing = st.get("filing") or {}
    for item in (filing.get("held") or []) + (filing.get("refused") or []):
        print(f"{indent}not filed: {item['message']}")


def _print_counts(st: dict[str, Any]) -> None:
    """The non-zero counts of one status (a daemon's or one mirror's) on one line."""
    counts = [f"{k.replace('_', ' ')} {st[k]}" for k in
              ("pending_up", "pending_down", "conflicts", "damaged", "skipped", "held_deletes") if st.get(k)]
    if counts:
        print("  " + ", ".join(counts))


def _print_transfer(st: dict[str, Any]) -> None:
    """The file being transferred now, with its bytes done of total, if any."""
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
        _print_counts(m)
        _print_attention(m, m.get("attention") or [], "  ")
        _print_transfer(m)
    if st.get("notifications"):
        print(f"notifications: {st['notifications']}")
    _print_unfiled(st, "")


#: ``ohsync status --help``: what its exit code says (README "Commands" says the same).
EXIT_CODES_HELP = ("Exit codes: 0 the daemon runs and syncs (idle, syncing, starting, paused, or "
                   "'attention': it syncs, but something listed needs you); 1 the daemon runs but a mirror "
                   "does not sync (stopped, error, login needed, offline: the message says why and what to "
                   "do); 3 ohsync is not running.")


def exit_code(st: dict[str, Any]) -> int:
    """0 when every mirror of the status object syncs, 1 when one does not
    (:data:`_NOT_SYNCING`: stopped, error, auth_required, offline)."""
    mirrors = [m for m in st.get("mirrors") or [] if isinstance(m, dict)]
    states = [m.get("state") for m in mirrors] or [st.get("state")]
    return EXIT_FAILED if any(state in _NOT_SYNCING for state in states) else EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    """Print the status (``--json``: the object as it is; ``--mirror``: that mirror's own).

    :returns: :func:`exit_code` of the status; a daemon that does not answer raises
        :class:`~ohsync.daemon.protocol.DaemonNotRunning` (exit 3, see :data:`EXIT_CODES_HELP`).
    """
    from ..config import ConfigError

    try:
        client = daemon_client(args)
    except ConfigError as exc:
        return _status_despite(args, exc)
    st = client.call(Method.STATUS)
    if args.json:
        print(json.dumps(st, ensure_ascii=False))
    else:
        _print_status(st)
    return exit_code(st)


def _status_despite(args: argparse.Namespace, error: Any) -> int:
    """``ohsync status`` with a config file that does not load: the error, and
    then the status of a daemon still running on the socket the file names
    (or the default one), which keeps the settings it started with; with no
    daemon there, the error alone (raised again).

    :returns: :data:`EXIT_FAILED` (the file needs fixing either way).
    """
    from ..config import config_path
    from ..protocol import DaemonNotRunning, RpcClient

    socket = _socket_named(config_path(args.config))
    try:
        st = RpcClient(socket, timeout=10.0).call(Method.STATUS)
    except DaemonNotRunning:
        raise error from None
    say_error(f"{error.title}: {error.message}")
    say_error(f"the daemon running on {socket} keeps the settings it started with; its status follows. "
              "Fix the file before the daemon restarts.")
    if args.json:
        print(json.dumps(st, ensure_ascii=False))
    else:
        _print_status(st)
    return EXIT_FAILED


def _socket_named(path: Any) -> Any:
    """The socket a config file names at its top level, read leniently (the
    file does not load), else the default socket."""
    import os
    import re
    import tomllib
    from pathlib import Path

    from ..protocol import default_socket_path

    if os.environ.get("OHSYNC_SOCKET"):
        return default_socket_path()  # it names the socket over any file, as when the file loads
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return default_socket_path()
    try:
        named = tomllib.loads(text).get("socket")  # valid TOML with a wrong value elsewhere
    except tomllib.TOMLDecodeError:  # not TOML: the key as written before the first table
        head = re.split(r"^\s*\[", text, maxsplit=1, flags=re.M)[0]
        found = re.search(r"^\s*socket\s*=\s*[\"']([^\"']+)[\"']", head, flags=re.M)
        named = found.group(1) if found else None
    return Path(named).expanduser() if isinstance(named, str) and named else default_socket_path()


def register(subparsers: Subparsers) -> None:
    """Add ``status``."""
    sp = add_command(subparsers, "status", cmd_status, "show what the daemon is doing")
    sp.epilog = EXIT_CODES_HELP
    sp.add_argument("--json", action="store_true", help="print the status object")
    add_mirror_option(sp)
