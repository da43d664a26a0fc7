"""The real tray on a real (virtual) desktop, driven by the real daemon on devserver.

What runs (recipes: docs/desktop-testing.md):

* ``Xvfb`` on a free display (``-displayfd``), a private ``dbus-daemon
  --session``, ``dunst`` as the notification service (we read every
  ``Notify`` call back with ``busctl monitor``), and ``gtk-sni-tray-standalone
  --watcher`` as the StatusNotifier host;
* devserver in the test process with the demo library plus four text files,
  and the real ``ohsync run`` daemon as a subprocess with an isolated config,
  state dir, socket and file keyring (``tests/daemon_helpers.py``);
* the tray with pystray's appindicator backend: in-process in the daemon
  (``ohsync run`` with DISPLAY set), or alone (``ohsync tray``).

Tests:

* menu + refresh: right-click the icon (xdotool), screenshot the open menu
  into ``artifacts/tray-display/``, read the menu back over D-Bus
  (``com.canonical.dbusmenu``), press **Refresh now** with the keyboard in the
  open menu and see the daemon poll the server (``polls`` and devserver's
  request counter rise; the poll interval is 5 minutes); Quit ends the daemon
  that owns the tray;
* conflict notices: with syncing paused from the menu, the same line of a text
  file is edited locally and on the server; Resume → exactly one notice naming
  the file; then three files at once → one summary notice;
* ``ohsync tray`` against ``ohsync run --no-tray``: the menu follows the
  daemon; ``ohsync stop`` → "ohsync is not running" with **Start ohsync**;
  Start brings a daemon back and the tray reconnects; Quit leaves it running.

Missing programs make the tests FAIL with a pointer to ``.ci/desktop-deps.sh``:
CI must not skip them silently.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import contextlib

from daemon_helpers import DEMO_LIBRARY, Env, isolated_env, ohsync_cmd, wait_for, write_config  # noqa: F401

pytestmark = [pytest.mark.timeout(90),
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11/D-Bus desktop test")]

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "artifacts" / "tray-display"
PROGRAMS = ("Xvfb", "dbus-daemon", "dunst", "gtk-sni-tray-standalone", "xdotool", "busctl", "import")
SCREEN_W, SCREEN_H = 1024, 768
ITEM_PATH = "/org/ayatana/NotificationItem/ohsync"  # Ayatana: the icon's name, "-" -> "_"


def check_prerequisites() -> None:
    missing = [p for p in PROGRAMS if shutil.which(p) is None]
    probe = ("import gi; gi.require_version('Gtk', '3.0'); gi.require_version('AyatanaAppIndicator3', '0.1'); "
             "from gi.repository import AyatanaAppIndicator3; import pystray, PIL, jeepney")
    py = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                        env={**os.environ, "PYSTRAY_BACKEND": "dummy"})
    if py.returncode != 0:
        missing.append("Python: PyGObject/pystray/Pillow/jeepney/AyatanaAppIndicator3 typelib "
                       f"({py.stderr.strip().splitlines()[-1] if py.stderr.strip() else 'import failed'})")
    if missing:
        pytest.fail("the real-display tray test needs: " + ", ".join(missing)
                    + f". Install them with: bash .ci/desktop-deps.sh {Path(sys.executable).parent.parent}",
                    pytrace=False)


class Desktop:
    """Xvfb + session bus + notification service + tray host, torn down in reverse order."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: list[subprocess.Popen[bytes]] = []
        self.prefix = ""  # of artifact file names: one set per test
        runtime = tmp / "runtime"
        runtime.mkdir(mode=0o700)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("DBUS_", "XDG_", "PYSTRAY"))}
        self.env.update(HOME=str(tmp / "home"), XDG_RUNTIME_DIR=str(runtime), XDG_CACHE_HOME=str(tmp / "cache"),
                        XDG_CONFIG_HOME=str(tmp / "config"), XDG_DATA_HOME=str(tmp / "data"),
                        NO_AT_BRIDGE="1", GDK_BACKEND="x11", PYTHONUNBUFFERED="1")
        (tmp / "home").mkdir(exist_ok=True)
        self.env.pop("WAYLAND_DISPLAY", None)

    def spawn(self, args: list[str], log: str, env: dict[str, str] | None = None,
              **kwargs: Any) -> subprocess.Popen[bytes]:
        with open(self.tmp / log, "wb") as out:  # the child's own copy stays open
            proc = subprocess.Popen(args, env=env or self.env, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, **kwargs)
        self.procs.append(proc)
        return proc

    def _read_fd_line(self, args: list[str], log: str, placeholder: str) -> tuple[subprocess.Popen[bytes], str]:
        rfd, wfd = os.pipe()
        proc = self.spawn([a.replace(placeholder, str(wfd)) for a in args], log, pass_fds=(wfd,))
        os.close(wfd)
        with os.fdopen(rfd, "rb") as pipe:
            line = pipe.readline().decode().strip()
        if not line:
            raise AssertionError(f"{args[0]} did not start: {(self.tmp / log).read_text(errors='replace')}")
        return proc, line

    def start(self) -> None:
        _, display = self._read_fd_line(["Xvfb", "-displayfd", "FD", "-screen", "0",
                                         f"{SCREEN_W}x{SCREEN_H}x24", "-nolisten", "tcp"], "xvfb.log", "FD")
        self.env["DISPLAY"] = f":{display}"
        _, address = self._read_fd_line(["dbus-daemon", "--session", "--nofork", "--print-address=FD"],
                                        "dbus.log", "FD")
        self.env["DBUS_SESSION_BUS_ADDRESS"] = address
        self.spawn(["dunst"], "dunst.log")
        wait_for(lambda: self.has_name("org.freedesktop.Notifications"), 10, "dunst on the bus")
        self.spawn(["busctl", "--user", "monitor", "--json=short", "--match",
                    "type='method_call',interface='org.freedesktop.Notifications',member='Notify'"],
                   "notify.jsonl")
        self.host_starts = 0
        self.start_host()

    def start_host(self) -> None:
        """Start the tray host; it is restarted (up to 3 starts) if it dies.

        gtk-sni-tray-standalone 0.1.8.1 sometimes exits with "Pattern match failure in do
        expression at app/Main.hs:177" after an UnknownObject reply (a race in the host, at
        its start or when an item registers).  libayatana re-registers its item with a new
        watcher by itself.
        """
        while True:
            self.host_starts += 1
            if self.host_starts > 3:
                raise AssertionError("gtk-sni-tray-standalone died 3 times: "
                                     + (self.tmp / "host-3.log").read_text(errors="replace")[-2000:])
            self.host = self.spawn(["gtk-sni-tray-standalone", "--top", "--end", "--watcher", "--size", "32",
                                    "-c", "#404040"], f"host-{self.host_starts}.log")
            wait_for(lambda: self.host.poll() is not None or self.has_name("org.kde.StatusNotifierWatcher"),
                       15, "the StatusNotifier host")
            if self.host.poll() is None:
                return

    def host_alive(self) -> bool:
        """False (after a restart) if the host had died."""
        if self.host.poll() is None:
            return True
        self.start_host()
        return False

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)

    def has_name(self, name: str) -> bool:
        return subprocess.run(["busctl", "--user", "status", name], env=self.env,
                              capture_output=True).returncode == 0

    def session_vars(self) -> dict[str, str]:
        """What a program needs to show a tray icon and notifications on this desktop."""
        return {"DISPLAY": self.env["DISPLAY"], "DBUS_SESSION_BUS_ADDRESS": self.env["DBUS_SESSION_BUS_ADDRESS"],
                "GDK_BACKEND": "x11", "NO_AT_BRIDGE": "1"}

    def notifications(self) -> list[tuple[str, str]]:
        """Every ``Notify`` call seen on the bus so far: ``(summary, body)``."""
        found = []
        for line in (self.tmp / "notify.jsonl").read_text(errors="replace").splitlines():
            if line.startswith("{"):
                data = json.loads(line)["payload"]["data"]
                found.append((data[3], data[4]))
        return found

    def right_click_icon(self) -> None:
        self.run("xdotool", "mousemove", str(SCREEN_W - 16), "16", "click", "3")

    def run(self, *args: str) -> str:
        return subprocess.run(list(args), env=self.env, capture_output=True, text=True, check=True,
                              timeout=20).stdout

    def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        name = f"{self.prefix}{name}"
        path = ARTIFACTS / name
        self.run("import", "-window", "root", str(path))
        return path


class DBusMenu:
    """The tray's menu, read and clicked over D-Bus (com.canonical.dbusmenu) with jeepney."""

    def __init__(self, address: str) -> None:
        from jeepney.io.blocking import open_dbus_connection
        self.conn = open_dbus_connection(bus=address)
        self.item_bus: str | None = None
        self.menu_path: str | None = None

    def close(self) -> None:
        self.conn.close()

    def _call(self, msg: Any) -> Any:
        from jeepney.wrappers import unwrap_msg
        return unwrap_msg(self.conn.send_and_get_reply(msg, timeout=5))

    def registered(self) -> list[str]:
        from jeepney import DBusAddress, Properties
        watcher = DBusAddress("/StatusNotifierWatcher", bus_name="org.kde.StatusNotifierWatcher",
                              interface="org.kde.StatusNotifierWatcher")
        return list(self._call(Properties(watcher).get("RegisteredStatusNotifierItems"))[0][1])

    def connect(self) -> None:
        from jeepney import DBusAddress, Properties
        items = self.registered()
        assert items, "no StatusNotifierItem registered with the host"
        self.item_bus = items[0].split("/", 1)[0]
        item = DBusAddress(ITEM_PATH, bus_name=self.item_bus, interface="org.kde.StatusNotifierItem")
        self.menu_path = self._call(Properties(item).get("Menu"))[0][1]

    def _address(self) -> Any:
        from jeepney import DBusAddress
        return DBusAddress(self.menu_path, bus_name=self.item_bus, interface="com.canonical.dbusmenu")

    def layout(self) -> list[dict[str, Any]]:
        """Top-level entries: ``{"id", "label", "enabled", "separator", "children": [...]}``."""
        from jeepney import new_method_call
        _, root = self._call(new_method_call(self._address(), "GetLayout", "iias", (0, -1, [])))

        def convert(node: Any) -> dict[str, Any]:
            node_id, props, children = node
            value = {k: v[1] for k, v in props.items()}
            # dbusmenu labels use "_" for mnemonics and "__" for a literal underscore
            return {"id": node_id, "label": str(value.get("label", "")).replace("__", "_"),
                    "enabled": bool(value.get("enabled", True)), "separator": value.get("type") == "separator",
                    "children": [convert(child[1]) for child in children]}

        return convert(root)["children"]

    def labels(self) -> list[str]:
        return [e["label"] for e in self.layout() if not e["separator"]]

    def click(self, label: str) -> None:
        """Activate the entry with this label (ids change after every rebuild: look it up now)."""
        from jeepney import new_method_call
        entry = next(e for e in self.layout() if e["label"] == label)
        self._call(new_method_call(self._address(), "Event", "isvu",
                                   (entry["id"], "clicked", ("i", 0), int(time.time()) & 0xFFFFFFFF)))


@pytest.fixture
def desktop(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Desktop]:
    check_prerequisites()
    d = Desktop(tmp_path)
    d.prefix = request.node.name.removeprefix("test_") + "-"
    try:
        d.start()
        yield d
    finally:
        d.stop()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for log in ("host-1.log", "host-2.log", "host-3.log", "dunst.log", "notify.jsonl", "daemon.log",
                    "tray.log", "daemon-output.log"):
            if (tmp_path / log).exists():
                shutil.copy(tmp_path / log, ARTIFACTS / f"{d.prefix}{log}")


# --------------------------------------------------------------------------- the real daemon

USER = "user@example.edu.cn"
TEXT = "".join(f"line {i} of {{name}}\n" for i in range(1, 7))
TEXT_FILES = ("notes/plan.txt", "notes/b.txt", "notes/c.txt", "notes/d.txt")


class World:
    """devserver with the demo library, a login and a config for a daemon under ``env``."""

    def __init__(self, env: Env, devserver: Any, desktop: Desktop, tmp_path: Path) -> None:
        self.env, self.srv, self.desktop = env, devserver, desktop
        self.repo = devserver.create_library(USER, "OH-Memory", from_tree=DEMO_LIBRARY)
        for rel in TEXT_FILES:
            devserver.put_file(self.repo, "/" + rel, TEXT.format(name=rel).encode())
        from ohsync.daemon import credentials
        credentials.save_token(devserver.url, USER, devserver.token_for(USER))
        self.mirror = tmp_path / "OH-Memory"
        # exists before the first start: the daemon then starts its watcher before the first pass.
        # (Created by that pass instead, the watcher starts after it and no status event follows,
        # so subscribers keep "Error — The file watcher stopped…" until the next change.)
        self.mirror.mkdir()
        # a 5-minute poll interval: the server is polled at start and on refresh only
        write_config(env, devserver.url, USER, self.mirror, poll_interval=300.0)
        self.procs: list[subprocess.Popen[bytes]] = []

    def vars(self, display: bool) -> dict[str, str]:
        # the browser a notice's "Open ohsync…" button starts: a script that writes down the address
        self.opened = self.env.root / "browser-opened.txt"
        browser = self.env.root / "fake-browser"
        if not browser.exists():
            browser.write_text(f"#!/bin/sh\nprintf '%s\\n' \"$1\" >> {self.opened}\n")
            browser.chmod(0o755)
        return {**self.env.vars(), **(self.desktop.session_vars() if display else {}), "BROWSER": str(browser)}

    def start_daemon(self, *args: str, display: bool) -> subprocess.Popen[bytes]:
        proc = self.desktop.spawn([*ohsync_cmd(), "run", "-v", *args], "daemon.log", env=self.vars(display),
                                  cwd=self.env.root)
        self.procs.append(proc)
        return proc

    def client(self) -> Any:
        from ohsync.daemon.protocol import RpcClient
        return RpcClient(self.env.socket, timeout=30)

    def status(self) -> dict[str, Any]:
        return self.client().call("status")

    def cli(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*ohsync_cmd(), *argv], env=self.vars(False), capture_output=True, text=True,
                              timeout=60, check=False)

    def log(self) -> str:
        return (self.env.root / "daemon.log").read_text(errors="replace")[-3000:]

    def stop_all(self) -> None:
        """Stop every daemon of this test, also one the tray started (its pid file)."""
        pid_file = self.env.root / "state" / "ohsync.pid"
        if pid_file.exists():
            with contextlib.suppress(OSError, ValueError, KeyError):
                os.kill(json.loads(pid_file.read_text())["pid"], signal.SIGTERM)
            wait_for(lambda: not pid_file.exists(), 30, "the daemon to exit")
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(30)


@pytest.fixture
def world(isolated_env: Env, devserver: Any, desktop: Desktop, tmp_path: Path) -> Iterator[World]:
    w = World(isolated_env, devserver, desktop, tmp_path)
    try:
        yield w
    finally:
        w.stop_all()


def wait_icon(desktop: Desktop, menu: DBusMenu, proc: subprocess.Popen[bytes], log: Callable[[], str]) -> None:
    wait_for(lambda: proc.poll() is not None or (desktop.host_alive() and menu.registered()), 30,
               "the tray icon to register")
    assert proc.poll() is None, log()
    menu.connect()


def up_to_date(menu: DBusMenu) -> bool:
    labels = menu.labels()
    return labels[0].startswith("Up to date") and "Refresh now" in labels


def conflict_labels(menu: DBusMenu) -> list[str]:
    entry = next(e for e in menu.layout() if e["label"].startswith("Conflicts ("))
    return [c["label"] for c in entry["children"] if not c["separator"]]


def edit_both_sides(world: World, rel: str) -> None:
    """The same line changed differently here and on the server: a text conflict."""
    local = world.mirror / rel
    local.write_text(local.read_text().replace("line 3 of", "line 3 (laptop) of"))
    remote = world.srv.read_file(world.repo, "/" + rel).decode().replace("line 3 of", "line 3 (phone) of")
    world.srv.put_file(world.repo, "/" + rel, remote.encode())


# --------------------------------------------------------------------------- tests


def test_menu_and_refresh_with_the_daemon_in_process(world: World, desktop: Desktop) -> None:
    started = time.monotonic()
    daemon = world.start_daemon(display=True)  # DISPLAY set, no --no-tray: the tray runs in the daemon
    menu = DBusMenu(desktop.env["DBUS_SESSION_BUS_ADDRESS"])
    try:
        wait_icon(desktop, menu, daemon, world.log)
        expected = ["Refresh now", "Open ohsync…", "Open folder", "Open drop folder", "Conflicts (0)", "Pause syncing",
                    "Quit"]
        wait_for(lambda: up_to_date(menu) and menu.labels()[1:] == expected, 30,
                   f"the menu to read 'Up to date…' + {expected}", seen=menu.labels)
        by_label = {e["label"]: e for e in menu.layout()}
        assert not by_label[menu.labels()[0]]["enabled"] and by_label["Refresh now"]["enabled"]
        assert (world.mirror / "notes" / "plan.txt").exists()  # the daemon really synced the library
        time.sleep(0.5)  # why: the host draws the icon: no signal to wait on but its pixels

        # open the menu for real: right click on the icon (top right of the host's bar)
        before = desktop.screenshot("tray.png")
        desktop.right_click_icon()
        time.sleep(1.0)  # why: the menu is drawn: no signal to wait on but its pixels
        after = desktop.screenshot("menu.png")
        from PIL import Image, ImageChops
        with Image.open(before) as a, Image.open(after) as b:
            diff = ImageChops.difference(a.convert("RGB"), b.convert("RGB"))
            changed = sum(1 for px in diff.convert("L").tobytes() if px)
            box = diff.getbbox()
            b.crop((SCREEN_W - 420, 0, SCREEN_W, 300)).save(ARTIFACTS / f"{desktop.prefix}menu-crop.png")
        assert changed > 1000 and box is not None, f"the right click opened no menu ({changed} pixels changed)"
        assert box[2] > SCREEN_W - 300 and box[1] < 80, f"the menu opened away from the icon: {box}"

        # click "Refresh now" in the open menu (the first item that can be selected): the daemon polls
        polls = world.status()["polls"]
        world.srv.reset_counters()
        desktop.run("xdotool", "key", "Down", "Return")
        wait_for(lambda: world.status()["polls"] > polls, 15,
                   f"the daemon to poll after Refresh now (polls stayed {polls})")
        assert world.srv.request_count() >= 1, "Refresh now reached the daemon but not the server"

        # Quit: the tray owns this daemon, so the daemon stops too
        menu.click("Quit")
        assert daemon.wait(30) == 0, world.log()
        assert not world.env.socket.exists()
    finally:
        menu.close()
        print(f"display test took {time.monotonic() - started:.1f} s; screenshots in {ARTIFACTS}")


def test_conflict_notices_on_the_session_bus(world: World, desktop: Desktop) -> None:
    daemon = world.start_daemon(display=True)
    menu = DBusMenu(desktop.env["DBUS_SESSION_BUS_ADDRESS"])
    try:
        wait_icon(desktop, menu, daemon, world.log)
        wait_for(lambda: up_to_date(menu), 30, "Up to date")
        assert desktop.notifications() == []

        def conflict_round(files: tuple[str, ...]) -> None:
            menu.click("Pause syncing")  # over D-Bus, as a click in the menu
            wait_for(lambda: world.status()["state"] == "paused" and "Resume syncing" in menu.labels(), 15,
                       "paused")
            for rel in files:
                edit_both_sides(world, rel)
            wait_for(lambda: world.status()["pending_up"] >= len(files), 15,
                     "the watcher to see the local edits (held while paused)", seen=world.status)
            menu.click("Resume syncing")

        # one conflict → one notice naming the file
        conflict_round(("notes/plan.txt",))
        wait_for(lambda: desktop.notifications(), 20, "a notification")
        wait_for(lambda: "Conflicts (1)" in menu.labels(), 10, "Conflicts (1) in the menu")
        time.sleep(2.0)  # why: a quiet period longer than the notifier's quiet time: nothing else may follow
        first = desktop.notifications()
        assert len(first) == 1, first
        assert first[0][0] == "Conflict in plan.txt", first
        assert ".conflict/notes/plan" in first[0][1]
        assert world.status()["conflicts"] == 1
        assert "line 3 (laptop) of" in (world.mirror / "notes" / "plan.txt").read_text()  # ours stays
        desktop.screenshot("notification.png")
        # its "Open ohsync…" button opens the local page (dunst: the notice's default action)
        desktop.run("dunstctl", "action", "0")
        wait_for(lambda: world.opened.exists() and world.opened.read_text().strip(), 15,
                   "the browser started by the notice's button")
        assert world.opened.read_text().startswith("http://127.0.0.1:") and "/auth#" in world.opened.read_text()

        # a burst of three conflicts → one summary notice
        conflict_round(("notes/b.txt", "notes/c.txt", "notes/d.txt"))
        wait_for(lambda: len(desktop.notifications()) > 1, 20, "the summary notification")
        wait_for(lambda: "Conflicts (4)" in menu.labels(), 10, "Conflicts (4) in the menu")
        time.sleep(2.0)  # why: a quiet period longer than the notifier's quiet time: one summary only
        notices = desktop.notifications()
        assert len(notices) == 2, notices
        summary, body = notices[1]
        assert summary == "3 conflicts", notices
        assert sorted(body.splitlines()[:3]) == ["b.txt", "c.txt", "d.txt"], body
        desktop.screenshot("summary-notification.png")
        assert sorted(conflict_labels(menu)) == sorted([*TEXT_FILES, "Open conflicts folder"])

        # the Conflicts submenu, opened with the keyboard, for the screenshot
        desktop.right_click_icon()
        time.sleep(0.7)  # why: the menu is drawn before the keys go to it (no signal but pixels)
        desktop.run("xdotool", "key", "Down", "Down", "Down", "Down", "Right")
        time.sleep(0.7)  # why: the submenu is drawn before the screenshot (no signal but pixels)
        submenu = desktop.screenshot("conflicts-submenu.png")
        from PIL import Image
        with Image.open(submenu) as img:
            img.crop((SCREEN_W - 700, 0, SCREEN_W, 300)).save(ARTIFACTS / f"{desktop.prefix}conflicts-submenu-crop.png")
        desktop.run("xdotool", "key", "Escape", "Escape")
        time.sleep(0.3)  # why: the menus close before the next click (no signal but pixels)

        menu.click("Quit")
        assert daemon.wait(30) == 0, world.log()
    finally:
        menu.close()


def test_ohsync_tray_follows_a_running_daemon_and_can_start_one(world: World, desktop: Desktop) -> None:
    daemon = world.start_daemon("--no-tray", display=False)  # e.g. started by systemd
    wait_for(lambda: world.status()["state"] == "idle", 60, "the daemon to sync")
    tray = desktop.spawn([*ohsync_cmd(), "tray"], "tray.log", env=world.vars(True), cwd=world.env.root)
    menu = DBusMenu(desktop.env["DBUS_SESSION_BUS_ADDRESS"])
    try:
        wait_icon(desktop, menu, tray, lambda: (world.env.root / "tray.log").read_text(errors="replace"))
        wait_for(lambda: up_to_date(menu), 20, "Up to date")

        # the daemon stops (as `systemctl --user stop` does it; `ohsync stop` would end the tray too):
        # "ohsync is not running", the socket it follows, and a Start item
        daemon.terminate()
        assert daemon.wait(30) == 0
        wait_for(lambda: menu.labels()[:3] == ["ohsync is not running", f"No answer on {world.env.socket}",
                                                 "Start ohsync"], 15,
                   "'ohsync is not running' + the socket + 'Start ohsync'")
        assert "Refresh now" not in menu.labels()
        time.sleep(0.3)  # why: the host redraws the changed menu before the click (no signal but pixels)
        desktop.right_click_icon()
        time.sleep(0.8)  # why: the menu is drawn before the screenshot (no signal but pixels)
        desktop.screenshot("not-running-menu.png")
        desktop.run("xdotool", "key", "Escape")
        time.sleep(0.3)  # why: the menu closes before the next click (no signal but pixels)

        # Start: the tray starts `ohsync run --no-tray` and reconnects to it
        menu.click("Start ohsync")
        wait_for(lambda: up_to_date(menu), 45, "the started daemon in the menu")
        pid = json.loads((world.env.root / "state" / "ohsync.pid").read_text())["pid"]
        assert pid != daemon.pid and pid != tray.pid

        # Quit closes only the tray: `ohsync tray` does not own the daemon (stopping it is its own item)
        assert menu.labels()[-2:] == ["Stop ohsync and quit", "Quit"]
        menu.click("Quit")
        assert tray.wait(15) == 0
        assert world.status()["state"] == "idle"
        r = world.cli("stop")
        assert r.returncode == 0, r.stderr
        assert "tray" not in r.stdout  # the tray had quit: nothing else to stop
    finally:
        menu.close()
        if tray.poll() is None:
            tray.terminate()
