"""The tray's menu as plain data: daemon status in, menu entries out.

Nothing here imports pystray or touches a display, so every daemon state can
be unit-tested.  :func:`build_menu` turns a :class:`TrayView` (the last status
object of docs/architecture.md §7.2, the ``conflicts`` list, the time) into a tuple of
:class:`MenuEntry`; :func:`status_line` is the first, disabled line;
:func:`icon_state` picks the picture; :class:`SyncProgress` turns the
daemon's pending counts into "Syncing 3 of 12".  ``app.py`` maps entries to
pystray items and :class:`Action` values to socket calls.  With several
mirrors, :func:`overall` folds the status object into one view first: the
worst mirror's state (the icon), the sums of the counts, every mirror's
attention items, and a line per mirror below the first; "Open folder" is
then a submenu of the mirrors, and the conflicts submenu opens each
mirror's conflicts folder (an item per mirror, naming it).

Paths: ``remote_path`` values are library-relative POSIX paths as the daemon
reports them (``notes/a.md``); ``local_path`` values are absolute paths on
this machine.
"""

from __future__ import annotations

import os
import re
import textwrap
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ..daemon.protocol import STATES, Method, State, worst_state

__all__ = [
    "ICON_STATES",
    "NOT_RUNNING",
    "Action",
    "MenuEntry",
    "SEPARATOR",
    "START_LABEL",
    "SyncProgress",
    "TrayView",
    "build_menu",
    "conflict_local_paths",
    "drop_dir",
    "icon_state",
    "overall",
    "relative_time",
    "shorten",
    "status_from_event",
    "status_line",
    "tooltip",
]

#: Pseudo-state for "no daemon answers on the socket".
NOT_RUNNING = "not_running"

#: Every picture ``icons.draw_icon`` knows: the daemon's states plus ours.
ICON_STATES = (*STATES, NOT_RUNNING)

#: The menu item offered while no daemon answers (``ohsync tray`` only).
START_LABEL = "Start ohsync"

#: Most conflicts listed in the submenu; the rest are summarised.
MAX_CONFLICT_ITEMS = 15
#: The item that opens the daemon's local page (conflicts side by side, status, activity).
PANEL_LABEL = "Open ohsync…"
#: Longest menu line before it is shortened in the middle.
MAX_LINE = 64


@dataclass(frozen=True)
class Action:
    """What a click asks for.

    :ivar kind: ``refresh``, ``pause``, ``resume``, ``open`` (open every path
        in ``paths`` that exists, else ``fallback``), ``panel`` (open the
        daemon's local page in the browser), ``start`` (start the
        daemon; offered while it is not running), ``stop_and_quit`` (stop a daemon this
        tray did not start, then quit), or ``quit``.
    """

    kind: str
    paths: tuple[str, ...] = ()
    fallback: str | None = None


@dataclass(frozen=True)
class MenuEntry:
    """One menu line: a label, an action, or a submenu (``children``)."""

    text: str
    action: Action | None = None
    enabled: bool = True
    children: tuple[MenuEntry, ...] | None = None
    default: bool = False

    @property
    def is_separator(self) -> bool:
        return self is SEPARATOR or self.text == "-"


SEPARATOR = MenuEntry("-", enabled=False)


@dataclass(frozen=True)
class TrayView:
    """Everything the menu is drawn from.

    :ivar status: the last status object, or ``None`` when the daemon is down.
    :ivar conflicts: the last ``conflicts`` answer (``None``: not fetched).
    :ivar progress: ``(current, total)`` from :class:`SyncProgress`.
    :ivar owns_daemon: Quit stops the daemon too.
    :ivar starting: no status yet from a daemon that is still starting
        (in-process, or after the Start item): show "Starting…" instead of
        "not running".
    :ivar socket: the socket followed; named under "not running", so a tray
        started with another ``XDG_RUNTIME_DIR`` or config says where it looked.
    """

    status: dict[str, Any] | None
    conflicts: tuple[dict[str, Any], ...] | None = None
    now: datetime = field(default_factory=lambda: datetime.now(timezone.utc))
    progress: tuple[int, int] | None = None
    owns_daemon: bool = False
    starting: bool = False
    #: the socket this tray follows (named while no daemon answers there)
    socket: str | None = None


# --- small text helpers -------------------------------------------------------

def shorten(text: str, limit: int = MAX_LINE) -> str:
    """Cut ``text`` in the middle with an ellipsis so it fits ``limit`` characters."""
    if len(text) <= limit:
        return text
    head = (limit - 1) // 2
    tail = limit - 1 - head
    return text[:head] + "…" + text[-tail:]


def headline(message: str, limit: int) -> str:
    """The first sentence (or clause) of a daemon message, cut at a word to ``limit`` characters:
    the menu's one short line; the whole message is one click away (:func:`_details_entry`)."""
    first = re.split(r"(?<=[.;!?])\s", message.strip(), maxsplit=1)[0].rstrip(" .;")
    if len(first) <= limit:
        return first
    cut = first[:limit - 1].rsplit(" ", 1)[0] if " " in first[:limit - 1] else first[:limit - 1]
    return cut.rstrip(" ,;:") + "…"


def _details_entry(message: str) -> MenuEntry:
    """"Details" with the whole message, wrapped into menu lines."""
    lines = textwrap.wrap(message, MAX_LINE) or [message]
    return MenuEntry("Details", children=tuple(MenuEntry(line, enabled=False) for line in lines))


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def relative_time(iso_time: Any, now: datetime) -> str | None:
    """``"just now"``, ``"2 min ago"``, ``"3 h ago"``, ``"on 30 Nov"``; ``None`` if unparseable."""
    then = _parse_time(iso_time)
    if then is None:
        return None
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    seconds = (now - then).total_seconds()
    if seconds < 45:
        return "just now"
    minutes = round(seconds / 60)
    if minutes < 60:
        return f"{max(minutes, 1)} min ago"
    hours = int(seconds // 3600)
    if hours < 24:
        return f"{hours} h ago"
    local = then.astimezone(now.tzinfo)
    return f"on {local.day} {local.strftime('%b')}"


def _count(status: dict[str, Any], key: str) -> int:
    value = status.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _basename(remote_path: Any) -> str:
    text = str(remote_path or "").rstrip("/")
    return text.rsplit("/", 1)[-1] or text


def status_from_event(event: dict[str, Any]) -> dict[str, Any]:
    """The status object carried by a ``status`` event.

    Accepts both shapes: nested (``{"type": "status", "status": {...}}``, what
    ``daemon/app.py`` publishes) and flat (``{"type": "status", "state": ...}``).
    """
    nested = event.get("status")
    if isinstance(nested, dict):
        return nested
    return {k: v for k, v in event.items() if k != "type"}


# --- state --------------------------------------------------------------------

_SUMMED = ("conflicts", "damaged", "skipped", "held_deletes", "pending_up", "pending_down")


def overall(status: dict[str, Any] | None) -> dict[str, Any] | None:
    """The status as the tray shows it: unchanged for one mirror; for several,
    ``state`` and ``message`` of the worst mirror (its message names it), the
    counts summed over all, and every mirror's attention items (each with
    its mirror's ``local``, so a damaged file opens in the right folder)."""
    mirrors = _mirrors(status)
    if status is None or len(mirrors) < 2:
        return status
    view = dict(status)
    states = [m.get("state") for m in mirrors]
    view["state"] = worst = worst_state(states)
    culprit = next((m for m in mirrors if m.get("state") == worst), mirrors[0])
    if worst != State.IDLE:
        view["message"] = f"{_name(culprit)}: {culprit.get('message') or worst}"
    for key in _SUMMED:
        view[key] = sum(_count(m, key) for m in mirrors)
    view["attention"] = [{**item, "local": m.get("local")} for m in mirrors
                         for item in (m.get("attention") or []) if isinstance(item, dict)]
    view["transfer"] = next((m["transfer"] for m in mirrors if isinstance(m.get("transfer"), dict)),
                            status.get("transfer"))
    return view


def _name(mirror: dict[str, Any]) -> str:
    return str(mirror.get("name") or mirror.get("library") or mirror.get("local") or "?")


def icon_state(status: dict[str, Any] | None, *, starting: bool = False) -> tuple[str, bool]:
    """The picture for a status: ``(state, conflict_badge)``; with several
    mirrors, the worst mirror's state (:func:`overall`).

    Unknown states draw as ``error`` so that a newer daemon never shows a
    green tick by mistake.
    """
    status = overall(status)
    if status is None:
        return ("starting" if starting else NOT_RUNNING), False
    state = status.get("state")
    if state not in ICON_STATES or state == NOT_RUNNING:
        state = "error"
    conflicts = _count(status, "conflicts") > 0
    if state == State.IDLE and conflicts:
        state = State.ATTENTION  # as :func:`status_line`: an open conflict is never a green tick
    return str(state), conflicts


class SyncProgress:
    """Turns successive status objects into ``(current, total)`` files.

    The daemon reports what is still pending; a batch starts when ``state``
    becomes ``syncing`` and its total grows whenever more work arrives, so
    "Syncing 3 of 12" counts up instead of down.  Explicit ``files_done`` /
    ``files_total`` fields in the status, if a daemon sends them, win.
    """

    def __init__(self) -> None:
        self._total = 0
        self._remaining = 0

    def update(self, status: dict[str, Any] | None) -> tuple[int, int] | None:
        """Feed the newest status; returns the progress to show, if any."""
        if status is None or status.get("state") != "syncing":
            self._total = self._remaining = 0
            return None
        done, total = status.get("files_done"), status.get("files_total")
        if isinstance(done, int) and isinstance(total, int) and total > 0:
            return min(done + 1, total), total
        pending = _count(status, "pending_up") + _count(status, "pending_down")
        if pending > self._remaining:
            self._total += pending - self._remaining
        self._remaining = pending
        if self._total <= 0:
            return None
        return min(self._total - pending + 1, self._total), self._total


def status_line(status: dict[str, Any] | None, *, now: datetime,
                progress: tuple[int, int] | None = None, starting: bool = False) -> str:
    """The first, disabled menu line: what the daemon is doing, in words
    (with several mirrors, the worst one's: :func:`overall`)."""
    status = overall(status)
    if status is None:
        return "Starting…" if starting else "ohsync is not running"
    state = status.get("state")
    message = str(status.get("message") or "").strip()
    if state == State.IDLE and _count(status, "conflicts"):
        state = State.ATTENTION  # an older daemon says idle beside open conflicts: they still need the person
    if state == State.IDLE:
        ago = relative_time(status.get("last_sync"), now)
        return f"Up to date · synced {ago}" if ago else "Up to date"
    if state == State.ATTENTION:  # syncing works; the lines below say what needs the person
        ago = relative_time(status.get("last_sync"), now)
        return f"Needs attention · synced {ago}" if ago else "Needs attention"
    if state == State.SYNCING:
        return shorten(_syncing_line(status, progress))
    if state == State.PAUSED:
        pending = _count(status, "pending_up") + _count(status, "pending_down")
        return f"Paused · {pending} change{'s' if pending != 1 else ''} waiting" if pending else "Paused"
    if state == State.OFFLINE:
        return "Offline — retrying"
    if state == State.AUTH_REQUIRED:
        return "Login needed — run ohsync login"
    if state == State.STARTING:
        return "Starting…"
    if state == State.STOPPED:
        detail = message or next((str(m.get("message")) for m in _mirrors(status)
                                  if m.get("state") == "stopped" and m.get("message")), "")
        return f"Stopped — {headline(detail, MAX_LINE - 10)}" if detail else "Stopped"
    return f"Error — {headline(message, MAX_LINE - 8)}" if message else "Error"


def _syncing_line(status: dict[str, Any], progress: tuple[int, int] | None) -> str:
    head = "Syncing"
    if progress and progress[1] > 1:
        head = f"Syncing {progress[0]} of {progress[1]}"
    transfer = status.get("transfer")
    if not isinstance(transfer, dict) or not transfer.get("path"):
        return head
    name = _basename(transfer.get("path"))
    arrow = {"up": "↑ ", "down": "↓ "}.get(str(transfer.get("direction")), "")
    done, total = transfer.get("done"), transfer.get("total")
    percent = ""
    if isinstance(done, int) and isinstance(total, int) and total > 0 and 0 < done < total:
        percent = f" ({done * 100 // total}%)"
    return f"{head} · {arrow}{shorten(name, 40)}{percent}"


def tooltip(view: TrayView) -> str:
    """The icon's hover title."""
    return "ohsync — " + status_line(view.status, now=view.now, progress=view.progress,
                                     starting=view.starting)


# --- paths --------------------------------------------------------------------

def _mirrors(status: dict[str, Any] | None) -> list[dict[str, Any]]:
    mirrors = (status or {}).get("mirrors")
    return [m for m in mirrors if isinstance(m, dict)] if isinstance(mirrors, list) else []


def drop_dir(status: dict[str, Any] | None) -> str:
    """The drop folder: the daemon's ``drop_dir`` if it says, else ``~/OH-Drop``."""
    value = (status or {}).get("drop_dir")
    return os.path.expanduser(str(value)) if value else os.path.expanduser("~/OH-Drop")


def _mirror_for(status: dict[str, Any] | None, conflict: dict[str, Any]) -> str | None:
    """The local folder of the mirror a conflict names (its ``mirror``, else its ``library``, else
    the mirror folder holding its absolute ``path``); a daemon with one mirror names none, so its
    folder; None when no mirror matches."""
    mirrors = _mirrors(status)
    wanted = conflict.get("mirror") or conflict.get("library")
    for key in ("name", "library"):
        for mirror in mirrors:
            if wanted and mirror.get(key) == wanted and mirror.get("local"):
                return str(mirror["local"])
    path = str(conflict.get("path") or "")
    for mirror in mirrors:
        local = str(mirror.get("local") or "")
        if local and os.path.isabs(path) and _to_local(local, path) == path:
            return local
    if len(mirrors) == 1 and mirrors[0].get("local"):
        return str(mirrors[0]["local"])
    return None


def _to_local(local_root: str, path: str) -> str:
    if os.path.isabs(path) and (path == local_root or path.startswith(local_root.rstrip("/") + "/")):
        return path  # already a local path
    return os.path.join(local_root, path.lstrip("/"))


def conflict_local_paths(status: dict[str, Any] | None, conflict: dict[str, Any]) -> tuple[str, ...]:
    """Local paths of a conflict's winning file and its archived copy."""
    root = _mirror_for(status, conflict)
    if root is None:
        return ()
    return tuple(_to_local(root, str(conflict[key])) for key in ("path", "archived")
                 if conflict.get(key))


# --- the menu -----------------------------------------------------------------

def _attention_items(status: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    items = status.get("attention")
    if not isinstance(items, list):
        return []
    return [i for i in items if isinstance(i, dict) and i.get("kind") == kind and i.get("path")]


#: Control characters shown as escapes (``\n``), so a strange name cannot break a menu line.
_VISIBLE = {c: ("\\n" if c == 10 else f"\\x{c:02x}") for c in range(32)}


def _clip(text: str, limit: int = MAX_LINE + 16) -> str:
    """Cut ``text`` at the end (a reason reads from its start)."""
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _attention_entry(status: dict[str, Any], text: str, kind: str, total: int) -> MenuEntry:
    """A count line; with the daemon's ``attention`` items, a submenu naming
    each path and its reason (a damaged file opens in its editor)."""
    items = _attention_items(status, kind)
    if not items:
        return MenuEntry(text, enabled=False)
    # several mirrors: each item carries its mirror's ``local`` (:func:`overall`); one: the items name none
    mirrors = _mirrors(status)
    root = str(mirrors[0]["local"]) if len(mirrors) == 1 and mirrors[0].get("local") else None
    children: list[MenuEntry] = []
    for item in items[:MAX_CONFLICT_ITEMS]:
        path = str(item["path"]).translate(_VISIBLE)  # a name with a newline stays on one line
        label = _clip(f"{shorten(path, MAX_LINE // 2)} — {str(item.get('reason') or kind).translate(_VISIBLE)}")
        where = str(item.get("local") or root or "")
        action = Action("open", (_to_local(where, str(item["path"])),)) if kind == "damaged" and where else None
        children.append(MenuEntry(label, action, enabled=action is not None))
    if total > len(children):
        children.append(MenuEntry(f"… and {total - len(children)} more — run ohsync status", enabled=False))
    return MenuEntry(text, children=tuple(children))


def _problem_message(status: dict[str, Any]) -> str:
    """The message of an error or stopped state (the status line shows its headline only)."""
    state = status.get("state")
    if state in (State.ERROR, State.STOPPED) or state not in STATES:
        message = str(status.get("message") or "").strip()
        if not message and state == State.STOPPED:
            message = next((str(m.get("message")) for m in _mirrors(status)
                            if m.get("state") == "stopped" and m.get("message")), "")
        return message
    return ""


def _detail_lines(status: dict[str, Any]) -> list[MenuEntry]:
    entries = []
    held = _count(status, "held_deletes")
    if held:
        entries.append(_attention_entry(
            status, f"{held} deletion{'s' if held != 1 else ''} held — run ohsync confirm-deletes", "held_delete",
            held))
    damaged = _count(status, "damaged")
    if damaged:
        entries.append(_attention_entry(
            status, f"{damaged} damaged file{'s' if damaged != 1 else ''} — see ohsync status", "damaged", damaged))
    skipped = _count(status, "skipped")
    if skipped:
        entries.append(_attention_entry(
            status, f"{skipped} name{'s' if skipped != 1 else ''} skipped — see ohsync status", "skipped", skipped))
    mirrors = _mirrors(status)
    if len(mirrors) > 1:
        for mirror in mirrors:
            entries.append(MenuEntry(shorten(f"{_name(mirror)}: "
                                             f"{mirror.get('message') or mirror.get('state', '')}"), enabled=False))
    return entries


def _open_folder_entry(status: dict[str, Any] | None) -> MenuEntry:
    mirrors = [m for m in _mirrors(status) if m.get("local")]
    if len(mirrors) <= 1:
        local = str(mirrors[0]["local"]) if mirrors else None
        return MenuEntry("Open folder", Action("open", (local,)) if local else None,
                         enabled=local is not None, default=local is not None)
    children = tuple(MenuEntry(shorten(_name(m)),
                               Action("open", (str(m["local"]),))) for m in mirrors)
    return MenuEntry("Open folder", children=children)


def _conflicts_entry(view: TrayView) -> MenuEntry:
    status = overall(view.status)
    listed = list(view.conflicts or ())
    count = len(listed) if view.conflicts is not None else _count(status or {}, "conflicts")
    if status is None or count == 0:
        return MenuEntry(f"Conflicts ({count})", enabled=False)
    children: list[MenuEntry] = []
    for conflict in listed[:MAX_CONFLICT_ITEMS]:
        paths = conflict_local_paths(status, conflict)
        label = shorten(str(conflict.get("path") or conflict.get("archived") or "?"))
        children.append(MenuEntry(label, Action("open", paths) if paths else None, enabled=bool(paths)))
    if len(listed) > MAX_CONFLICT_ITEMS:
        children.append(MenuEntry(f"… and {len(listed) - MAX_CONFLICT_ITEMS} more — run ohsync conflicts",
                                  enabled=False))
    if not listed:
        children.append(MenuEntry("Run ohsync conflicts for the list", enabled=False))
    children += _conflict_folder_entries(status)
    return MenuEntry(f"Conflicts ({count})", children=tuple(children))


def _conflict_folder_entries(status: dict[str, Any]) -> list[MenuEntry]:
    """The items that open the archived copies' folders: ``Open conflicts folder`` for one
    mirror; with several, one item per mirror naming it (``Open conflicts folder of docs``)."""
    mirrors = [m for m in _mirrors(status) if m.get("local")]
    if not mirrors:
        return []
    if len(mirrors) == 1:
        folder = os.path.join(str(mirrors[0]["local"]), ".conflict")
        return [SEPARATOR, MenuEntry("Open conflicts folder", Action("open", (folder,)))]
    return [SEPARATOR, *(MenuEntry(shorten(f"Open conflicts folder of {_name(m)}"),
                                   Action("open", (os.path.join(str(m["local"]), ".conflict"),)))
                         for m in mirrors)]


def build_menu(view: TrayView) -> tuple[MenuEntry, ...]:
    """The whole menu, top to bottom."""
    status = overall(view.status)
    running = status is not None
    entries: list[MenuEntry] = [MenuEntry(status_line(status, now=view.now, progress=view.progress,
                                                      starting=view.starting), enabled=False)]
    if status is not None:
        message = _problem_message(status)
        if message and headline(message, MAX_LINE - 10) != message.strip().rstrip("."):
            entries.append(_details_entry(message))
        entries += _detail_lines(status)
    elif view.socket and not view.starting:
        entries.append(MenuEntry(shorten(f"No answer on {view.socket}"), enabled=False))
    paused = running and status.get("state") == State.PAUSED  # type: ignore[union-attr]
    if running or view.owns_daemon:
        first = MenuEntry("Refresh now", Action(Method.REFRESH), enabled=running)
    else:  # `ohsync tray` with no daemon: offer to start one (disabled while it starts)
        first = MenuEntry(START_LABEL, Action("start"), enabled=not view.starting)
    entries += [
        SEPARATOR,
        first,
        MenuEntry(PANEL_LABEL, Action(Method.PANEL), enabled=running),
        _open_folder_entry(status),
        MenuEntry("Open drop folder", Action("open", (drop_dir(status),), fallback=drop_dir(status))),
        _conflicts_entry(view),
        SEPARATOR,
        MenuEntry("Resume syncing" if paused else "Pause syncing",
                  Action(Method.RESUME if paused else Method.PAUSE), enabled=running),
    ]
    if running and not view.owns_daemon:
        # This tray did not start the daemon: Quit leaves it running; stopping it is a separate choice.
        entries.append(MenuEntry("Stop ohsync and quit", Action("stop_and_quit")))
    entries.append(MenuEntry("Quit", Action("quit")))
    return tuple(entries)
