"""The local checks of ``ohsync doctor``: folders, watch limit, desktop, daemon, state.

Each function returns :class:`~ohsync.daemon.doctor.Finding` values.  The
folder probe creates a file named ``.ohsync-tmp-doctor…`` (a prefix the
watcher and the scanner ignore), renames it to a 255-byte name and to a
non-ASCII name, and removes it: what a download into the mirror does.
"""

from __future__ import annotations

import contextlib
import errno
import importlib.util
import os
import sqlite3
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine.errors import OhsyncError
from ..engine.models import RepoInfo
from ..engine.state_schema import SCHEMA_VERSION
from .config import Config, MirrorConfig
from .doctor_findings import Finding

if TYPE_CHECKING:
    from .doctor import Probes

__all__ = ["check_name", "local_checks", "state_db_path", "probe_folder", "count_folders", "find_tray_host",
           "tray_libraries_problem"]

_PROBE = ".ohsync-tmp-doctor"
_NAME_MAX = 255
#: Folder counts above this share of the limit leave little room for editors and IDEs.
_WATCH_SHARE = 0.5


def _finding(check: str, level: str, message: str, fix: str = "", summary: str = "") -> Finding:
    return Finding(check, level, message, fix, summary)


def check_name(check: str, cfg: Config, index: int) -> str:
    """The name of a per-mirror check of the ``index``-th mirror: ``check`` for the first (as with one
    mirror), ``check:LABEL`` for each after it (``library:Notes``)."""
    return check if index == 0 else f"{check}:{cfg.mirrors[index].label}"


def state_db_path(cfg: Config, repo: RepoInfo | None, mirror: MirrorConfig) -> Path | None:
    """The state database of ``mirror``: exact when its library ``repo`` is known, else found by
    folder; None when there is none yet."""
    if repo is not None:
        return cfg.mirror_state_dir(repo.id, mirror) / "state.sqlite3"
    found = [d / "state.sqlite3" for d in cfg.mirror_state_dirs(mirror) if (d / "state.sqlite3").exists()]
    return found[0] if found else None


def probe_folder(folder: Path) -> tuple[str, str, str] | None:
    """Try what syncing does in ``folder``: create, write, rename (long and non-ASCII names), delete.

    :returns: ``(level, message, fix)`` for the first thing that fails, None when all work.
    """
    try:
        fd, tmp = tempfile.mkstemp(prefix=_PROBE + "-", dir=folder)
    except OSError as exc:
        if exc.errno == errno.EROFS:
            return ("error", f"{folder} is on a read-only file system.",
                    "Remount it read-write, or choose a folder on another disk with `ohsync setup`.")
        return ("error", f"Cannot create files in {folder} ({exc.strerror}).",
                f"Give yourself write access (`chmod u+rwx '{folder}'`), or choose another folder with "
                "`ohsync setup`.")
    current = tmp
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(b"ohsync doctor probe\n")
            f.flush()
            os.fsync(f.fileno())
        long_name = os.path.join(folder, _PROBE + "-" + "n" * (_NAME_MAX - len(_PROBE) - 1))
        try:
            os.replace(current, long_name)
            current = long_name
        except OSError as exc:
            if exc.errno != errno.ENAMETOOLONG:
                return ("error", f"Cannot rename files in {folder} ({exc.strerror}).",
                        "ohsync writes into temporary files and renames them; choose a folder on a local "
                        "disk with `ohsync setup`.")
            try:
                limit = os.statvfs(folder).f_namemax
            except OSError:
                limit = 0
            return ("warning", f"{folder} takes file names of at most {limit or 'fewer than 255'} bytes; "
                    "files with longer names cannot be synced there and are reported as skipped.",
                    "Put the mirror on a file system with 255-byte names (ext4, btrfs, APFS; an eCryptfs "
                    "home folder allows only 143).")
        unicode_name = os.path.join(folder, _PROBE + "-名前-é")
        try:
            os.replace(current, unicode_name)
            current = unicode_name
        except (OSError, UnicodeError) as exc:
            return ("warning", f"{folder} cannot store non-ASCII file names ({exc}); such files are skipped.",
                    "Use a UTF-8 locale and a file system that stores any name (ext4, btrfs, APFS).")
    except OSError as exc:
        return ("error", f"Cannot write files in {folder} ({exc.strerror}).",
                "Free some space or choose another folder with `ohsync setup`.")
    finally:
        with contextlib.suppress(OSError):
            os.unlink(current)
    return None


def _folder_check(check: str, what: str, folder: Path, synced_before: bool) -> Finding:
    if not folder.exists():
        if synced_before:
            return _finding(check, "error", f"The {what} {folder} is missing; syncing is stopped so that "
                            "nothing is deleted on the server.", "Reconnect the drive or restore the folder, "
                            "then run `ohsync refresh`; or choose another folder with `ohsync setup`.")
        parent = folder.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not os.access(parent, os.W_OK | os.X_OK):
            return _finding(check, "error", f"The {what} {folder} does not exist and cannot be created "
                            f"in {parent}.", "Create it yourself, or choose another folder with `ohsync setup`.")
        return _finding(check, "ok", f"The {what} {folder} does not exist yet; ohsync creates it when it starts.")
    if not folder.is_dir():
        return _finding(check, "error", f"The {what} {folder} is a file, not a folder.",
                        "Move the file away, or choose another folder with `ohsync setup`.")
    problem = probe_folder(folder)
    if problem:
        return _finding(check, *problem)
    return _finding(check, "ok", f"The {what} {folder} is writable (temporary files, renames, long and "
                    "non-ASCII names work).")


def count_folders(roots: list[Path], stop_after: int) -> int:
    """Folders under ``roots`` (roots included), not following symlinks; stops counting past ``stop_after``."""
    total = 0
    for root in roots:
        if not root.is_dir():
            continue
        for _ in os.walk(root):  # symlinked folders are listed but not entered, like the watcher
            total += 1
            if total > stop_after:
                return total
    return total


def _inotify_check(cfg: Config, limit_file: Path) -> Finding:
    try:
        limit = int(limit_file.read_text().strip())
    except FileNotFoundError:
        return _finding("inotify", "ok", "No inotify watch limit on this system; the file watcher uses the "
                        "platform's own notifications.")
    except (OSError, ValueError) as exc:
        return _finding("inotify", "warning", f"Cannot read the inotify watch limit from {limit_file} ({exc}).",
                        "Check it with `sysctl fs.inotify.max_user_watches`.")
    needed = count_folders([*(m.local for m in cfg.mirrors), cfg.filing.drop_dir], stop_after=max(limit, 1) * 4)
    suggest = 524288
    while suggest < needed * 4:
        suggest *= 2
    fix = (f"Raise it: `sudo sysctl fs.inotify.max_user_watches={suggest}`, and keep it after a reboot with "
           f"`echo fs.inotify.max_user_watches={suggest} | sudo tee /etc/sysctl.d/90-ohsync.conf`.")
    if needed > limit:
        return _finding("inotify", "error", f"The inotify watch limit ({limit}) is below the {needed} folders "
                        "to watch: local edits are noticed only by the periodic full scan.", fix)
    if needed > limit * _WATCH_SHARE:
        return _finding("inotify", "warning", f"The mirror and drop folder need {needed} of the {limit} inotify "
                        "watches; editors and other sync tools share the same limit.", fix)
    return _finding("inotify", "ok", f"{needed} folders to watch, inotify limit {limit}.")


def find_tray_host(environ: Mapping[str, str]) -> str | None:
    """Which tray host the desktop runs: a StatusNotifierWatcher on the session bus, or an
    XEmbed system tray (``_NET_SYSTEM_TRAY_S0`` owner); None when neither is found."""
    address = environ.get("DBUS_SESSION_BUS_ADDRESS")
    if address:
        try:
            from jeepney import DBus, new_method_call  # an optional dependency (the tray extra)
            from jeepney.io.blocking import open_dbus_connection

            with open_dbus_connection(bus=address) as conn:
                reply = conn.send_and_get_reply(
                    new_method_call(DBus(), "NameHasOwner", "s", ("org.kde.StatusNotifierWatcher",)), timeout=3)
                if reply.body and reply.body[0]:
                    return "StatusNotifierWatcher (AppIndicator)"
        except Exception:  # noqa: BLE001, S110 - no bus, no jeepney: fall through to X11
            pass
    display_name = environ.get("DISPLAY")
    if display_name:
        try:
            from Xlib import X
            from Xlib.display import Display

            display = Display(display_name)
            try:
                atom = display.intern_atom(f"_NET_SYSTEM_TRAY_S{display.get_default_screen()}")
                if display.get_selection_owner(atom) != X.NONE:
                    return "XEmbed system tray"
            finally:
                display.close()
        except Exception:  # noqa: BLE001, S110 - no Xlib or no X server
            pass
    return None


def tray_libraries_problem() -> str | None:
    """Why the tray's Python packages cannot load, or None (checked without importing pystray,
    which would pick a backend and open the display)."""
    missing = [name for name in ("pystray", "PIL", "gi") if importlib.util.find_spec(name) is None]
    if missing:
        return f"the tray's Python packages are missing ({', '.join(missing)})"
    return None


def _desktop_checks(probes: Probes) -> list[Finding]:
    env = probes.environ
    if not probes.platform.startswith("linux"):
        return [_finding("display", "ok", "Not Linux: the tray uses the system's menu bar.")]
    if not (env.get("DISPLAY") or env.get("WAYLAND_DISPLAY")):
        no_tray = "No tray icon here; ohsync still syncs, and `ohsync status` reports."
        return [_finding("display", "warning", f"No graphical display (DISPLAY and WAYLAND_DISPLAY are unset). "
                         f"{no_tray}", "Start ohsync inside your desktop session to get the tray icon; on a "
                         "server use `ohsync run --no-tray`."),
                _finding("tray", "skipped", "Not checked: no display.")]
    out = [_finding("display", "ok", f"Display {env.get('WAYLAND_DISPLAY') or env.get('DISPLAY')}.")]
    problem = probes.tray_libraries()
    if problem:
        out.append(_finding("tray", "warning", f"No tray icon: {problem}.", probes.tray_install_hint()))
        return out
    host = probes.find_tray_host(env)
    if host is None:
        out.append(_finding("tray", "warning", "The desktop shows no tray icons (no StatusNotifierWatcher on "
                            "the session bus, no XEmbed system tray). ohsync still syncs; `ohsync status` "
                            "reports.", "On GNOME install and enable the AppIndicator extension (Debian/Ubuntu: "
                            "`sudo apt install gnome-shell-extension-appindicator`, then log in again)."))
    else:
        out.append(_finding("tray", "ok", f"Tray host: {host}."))
    return out


def _start_advice() -> str:
    """How to start the daemon, as ``ohsync autostart status`` sees the next login."""
    from . import autostart

    try:
        st = autostart.status()
    except OhsyncError:  # no autostart on this system
        return "Start it with `ohsync run`."
    if st.will_run:
        return "Start it now with `ohsync run` (autostart is on: it also starts at your next login)."
    if st.enabled:
        return f"Start it with `ohsync run`. Autostart is installed but will not start it: {st.problems[0]}"
    return "Start it with `ohsync run`, or at every login with `ohsync autostart enable`."


def _instance_check(socket: Path, cfg: Config) -> Finding:
    """The daemon of this config: running, syncing, and whether something needs the person.

    A daemon that is not running, or that runs but holds a conflict, a held
    deletion, a damaged file or a name that cannot sync (state ``attention``),
    is a warning whose ``summary`` the report's last line repeats: the setup
    can sync, yet "syncing works" alone would not be true.  So is a daemon
    that runs this config file as it was before an edit (older settings).
    """
    from .protocol import DaemonNotRunning, Method, RpcClient
    from .running import Running, running_daemon, same_file

    config = cfg.path

    client = RpcClient(socket, timeout=3)
    try:
        st = client.call(Method.STATUS, timeout=3)
    except DaemonNotRunning:
        return _finding("instance", "warning", "ohsync is not running, so nothing syncs right now.",
                        _start_advice(), summary="ohsync is not running, so nothing syncs now")
    except Exception as exc:  # noqa: BLE001 - a socket that takes calls but does not answer
        return _finding("instance", "error", f"An ohsync daemon holds {socket} but does not answer ({exc}).",
                        "Stop it (`ohsync stop`; if that hangs, end the `ohsync run` process) and start it again.")
    theirs = client.answered_config  # the answer names the daemon's config; an older daemon: ask it
    running = (Running(Path(theirs), same_file(Path(theirs), config)) if theirs
               else running_daemon(socket, config))
    if running is not None and running.config is not None and not running.same:
        return _finding("instance", "warning", f"The ohsync daemon answering on {socket} runs another config "
                        f"({running.config}), not {config}; this config does not sync now.",
                        "Stop that one (`ohsync --config PATH stop` with its config), or give this config its "
                        "own `socket` path, then start this one.", summary="this config's daemon does not run")
    mirrors = [m for m in (st.get("mirrors") or []) if isinstance(m, dict)] or [st]
    several = len(mirrors) > 1

    def said(m: dict[str, Any]) -> str:
        name = f"{m.get('name') or m.get('library')}: " if several else ""
        return f"{name}{m.get('state', '?')}: {m.get('message', '')}"
    failing = [m for m in mirrors if m.get("state") in ("error", "auth_required", "stopped")]
    if failing:
        return _finding("instance", "error", "ohsync is running but not syncing: "
                        + "; ".join(said(m) for m in failing),
                        "See `ohsync status`; its message says what to do.")
    needing = [m for m in mirrors if m.get("state") == "attention"]
    if needing:
        return _finding("instance", "warning", "ohsync is running and syncs, but something needs you: "
                        + "; ".join(said(m) for m in needing),
                        "See `ohsync status`: each item names the command that settles it (`ohsync conflicts` "
                        "or `ohsync panel` for conflicts, `ohsync confirm-deletes` for held deletions).",
                        summary="something needs you (see `instance` above)")
    if running is not None and running.same and running.settings is None:
        running = running_daemon(socket, config) or running  # the settings it started with
    changed = running.changed(dict(cfg.settings)) if running is not None else []
    if changed:
        keys = ", ".join(f"`{k}`" for k in changed[:5]) + (", …" if len(changed) > 5 else "")
        return _finding("instance", "warning", f"ohsync is running with this config file, but the running daemon "
                        f"uses older settings ({keys} changed since it started): {said(st)}.",
                        "Restart it to use the file as it is now: `ohsync stop`, then `ohsync run`.",
                        summary="the running daemon uses older settings (see `instance` above)")
    return _finding("instance", "ok", f"ohsync is running with this config: {said(st)}.")


def _state_check(db: Path | None, check: str = "state_db") -> Finding:
    if db is None or not db.exists():
        return _finding(check, "ok", "No state database yet: the first sync builds it.")
    fix = (f"Stop ohsync (`ohsync stop`), move the database aside (`mv '{db}' '{db}.broken'`) and start ohsync "
           "again: it rebuilds the state by comparing both sides. Nothing is deleted; files that differ are "
           "merged or kept as conflict copies.")
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            rows = conn.execute("PRAGMA integrity_check").fetchall()
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        return _finding(check, "error", f"The state database {db} cannot be read: {exc}.", fix)
    if version > SCHEMA_VERSION:
        return _finding(check, "error", f"The state database {db} was written by a newer ohsync (state "
                        f"version {version}; this ohsync knows up to {SCHEMA_VERSION}).",
                        "Upgrade ohsync, or run `ohsync resync`: it sets that database aside and compares both "
                        "sides afresh. Nothing is deleted.")
    if rows != [("ok",)]:
        detail = "; ".join(str(r[0]) for r in rows[:3])
        return _finding(check, "error", f"The state database {db} is damaged: {detail}.", fix)
    return _finding(check, "ok", f"The state database {db} passes SQLite's integrity check.")


def local_checks(cfg: Config, probes: Probes, repos: Sequence[RepoInfo | None]) -> list[Finding]:
    """Every mirror's folder, the drop folder, inotify, display and tray, the running instance, every
    mirror's state database.

    :param repos: each mirror's library as the server named it (None: unknown), in config order.
    :returns: the findings in that order; a mirror after the first names itself (:func:`check_name`).
    """
    dbs = [state_db_path(cfg, repo, mirror) for mirror, repo in zip(cfg.mirrors, repos, strict=True)]
    first = cfg.mirrors[0]
    out = [_folder_check("mirror_folder", "mirror folder", first.local, dbs[0] is not None and dbs[0].exists())]
    drop = cfg.filing.drop_dir
    # the daemon turns filing off when the drop folder overlaps any mirror, so check them all
    local = next((m.local for m in cfg.mirrors
                  if drop == m.local or m.local in drop.parents or drop in m.local.parents), None)
    if local is not None:
        out.append(_finding("drop_folder", "error", f"The drop folder {drop} overlaps the mirror {local}: "
                            "filing is off.", f"Set another `drop_dir` under [filing] in {cfg.path}, or run "
                            "`ohsync setup`."))
    else:
        out.append(_folder_check("drop_folder", "drop folder", drop, False))
    for index, mirror in enumerate(cfg.mirrors[1:], start=1):
        db = dbs[index]
        out.append(_folder_check(check_name("mirror_folder", cfg, index), f"mirror folder of {mirror.label}",
                                 mirror.local, db is not None and db.exists()))
    out.append(_inotify_check(cfg, probes.inotify_limit_file))
    out.extend(_desktop_checks(probes))
    out.append(_instance_check(probes.socket or cfg.socket, cfg))
    out += [_state_check(db, check_name("state_db", cfg, index)) for index, db in enumerate(dbs)]
    return out
