"""The real tray on a real (virtual) desktop: Xvfb + a StatusNotifier host + D-Bus.

What runs (recipes: /work/shared/linux-desktop-testing.md, section 1):

* ``Xvfb`` on a free display (``-displayfd``), a private ``dbus-daemon
  --session``, ``dunst`` as the notification service (pystray needs one; we
  read notifications back with ``busctl monitor``), and
  ``gtk-sni-tray-standalone --watcher`` as the tray host;
* a stand-in daemon (``test_tray_fake_daemon.FakeDaemon``: the daemon's JSON-RPC
  framing on a Unix socket, recording every call) serving a status with one
  conflict;
* the tray itself, ``python -m ohsync.tray`` with pystray's appindicator backend.

The test right-clicks the icon (xdotool), screenshots the open menu into
``artifacts/tray-display/``, reads the menu back over D-Bus
(``com.canonical.dbusmenu``), clicks **Refresh now** with the keyboard in the
open menu and checks the daemon got ``refresh``, clicks **Pause syncing** over
D-Bus and checks the menu turns to **Resume syncing**, checks a conflict event
becomes a desktop notification, and quits.  Missing programs make the test
FAIL with a pointer to ``.ci/desktop-deps.sh``: CI must not skip it silently.
"""

from __future__ import annotations

import importlib.util
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

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="X11/D-Bus desktop test")]

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "artifacts" / "tray-display"
PROGRAMS = ("Xvfb", "dbus-daemon", "dunst", "gtk-sni-tray-standalone", "xdotool", "busctl", "import")
SCREEN_W, SCREEN_H = 1024, 768
ITEM_PATH = "/org/ayatana/NotificationItem/ohsync"  # Ayatana: the icon's name, "-" -> "_"


def _load_fake_daemon() -> Any:
    name = "ohsync_tests_tray_fake_daemon"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("test_tray_fake_daemon.py"))
        assert spec and spec.loader
        sys.modules[name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


def wait_until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except Exception:  # not up yet
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.05)


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
        runtime = tmp / "runtime"
        runtime.mkdir(mode=0o700)
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("DBUS_", "XDG_", "PYSTRAY"))}
        self.env.update(HOME=str(tmp / "home"), XDG_RUNTIME_DIR=str(runtime), XDG_CACHE_HOME=str(tmp / "cache"),
                        XDG_CONFIG_HOME=str(tmp / "config"), XDG_DATA_HOME=str(tmp / "data"),
                        NO_AT_BRIDGE="1", GDK_BACKEND="x11", PYTHONUNBUFFERED="1")
        (tmp / "home").mkdir()
        self.env.pop("WAYLAND_DISPLAY", None)

    def spawn(self, args: list[str], log: str, **kwargs: Any) -> subprocess.Popen[bytes]:
        out = open(self.tmp / log, "wb")
        proc = subprocess.Popen(args, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, **kwargs)
        out.close()
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
        wait_until(lambda: self.has_name("org.freedesktop.Notifications"), 10, "dunst on the bus")
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
            wait_until(lambda: self.host.poll() is not None or self.has_name("org.kde.StatusNotifierWatcher"),
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

    def run(self, *args: str) -> str:
        return subprocess.run(list(args), env=self.env, capture_output=True, text=True, check=True,
                              timeout=20).stdout

    def screenshot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
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
def desktop(tmp_path: Path) -> Iterator[Desktop]:
    check_prerequisites()
    d = Desktop(tmp_path)
    try:
        d.start()
        yield d
    finally:
        d.stop()
        for log in ("host-1.log", "host-2.log", "host-3.log", "dunst.log", "tray.log", "notify.jsonl"):
            if (tmp_path / log).exists():
                shutil.copy(tmp_path / log, ARTIFACTS / log) if ARTIFACTS.exists() else None


def test_tray_menu_on_a_real_display(desktop: Desktop, tmp_path: Path) -> None:
    started = time.monotonic()
    fake_daemon = _load_fake_daemon()
    mirror = tmp_path / "OH-Memory"
    (mirror / ".conflict" / "notes").mkdir(parents=True)
    (mirror / "notes").mkdir()
    status = {**fake_daemon.STATUS_IDLE, "conflicts": 1, "drop_dir": str(tmp_path / "OH-Drop"),
              "last_sync": time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(time.time() - 120)),
              "mirrors": [{"library": "OH-Memory", "local": str(mirror), "state": "idle", "message": "Up to date"}]}
    conflicts = [{"path": "notes/my_notes.md", "archived": ".conflict/notes/my_notes__phone__20261130T011203Z.md",
                  "time": "2026-11-30T01:12:03Z", "reason": "both changed", "fields": ["body"]}]
    fake = fake_daemon.FakeDaemon(tmp_path / "run" / "ohsync.sock", status=status, conflicts=conflicts).start()
    tray = None
    menu = DBusMenu(desktop.env["DBUS_SESSION_BUS_ADDRESS"])
    try:
        tray = desktop.spawn([sys.executable, "-m", "ohsync.tray", "--socket", str(fake.path),
                              "--backend", "appindicator", "-v"], "tray.log")
        wait_until(lambda: tray.poll() is not None or (desktop.host_alive() and menu.registered()), 20,
                   "the tray icon to register")
        assert tray.poll() is None, (tmp_path / "tray.log").read_text()
        menu.connect()
        expected = ["Up to date · synced 2 min ago", "Refresh now", "Open folder", "Open drop folder",
                    "Conflicts (1)", "Pause syncing", "Quit"]
        expected_conflicts = ["notes/my_notes.md", "Open conflicts folder"]

        def conflict_labels() -> list[str]:
            entry = next(e for e in menu.layout() if e["label"].startswith("Conflicts ("))
            return [c["label"] for c in entry["children"] if not c["separator"]]

        wait_until(lambda: menu.labels() == expected and conflict_labels() == expected_conflicts, 15,
                   f"the menu to read {expected} with conflicts {expected_conflicts}")
        by_label = {e["label"]: e for e in menu.layout()}
        assert not by_label[expected[0]]["enabled"] and by_label["Refresh now"]["enabled"]
        time.sleep(0.5)  # let the host draw the icon

        # open the menu for real: right click on the icon (top right of the host's bar)
        before = desktop.screenshot("tray.png")
        desktop.run("xdotool", "mousemove", str(SCREEN_W - 16), "16", "click", "3")
        time.sleep(1.0)
        after = desktop.screenshot("menu.png")
        from PIL import Image, ImageChops
        with Image.open(before) as a, Image.open(after) as b:
            diff = ImageChops.difference(a.convert("RGB"), b.convert("RGB"))
            changed = sum(1 for px in diff.convert("L").tobytes() if px)
            box = diff.getbbox()
            b.crop((SCREEN_W - 420, 0, SCREEN_W, 300)).save(ARTIFACTS / "menu-crop.png")
        assert changed > 1000 and box is not None, f"the right click opened no menu ({changed} pixels changed)"
        assert box[2] > SCREEN_W - 300 and box[1] < 80, f"the menu opened away from the icon: {box}"

        # click "Refresh now" in the open menu: the first item that can be selected
        desktop.run("xdotool", "key", "Down", "Return")
        assert fake.wait_for_call("refresh", timeout=10), f"no refresh; calls: {fake.calls}"

        # the Conflicts submenu, opened with the keyboard, for the screenshot
        desktop.run("xdotool", "mousemove", str(SCREEN_W - 16), "16", "click", "3")
        time.sleep(0.7)
        desktop.run("xdotool", "key", "Down", "Down", "Down", "Down", "Right")
        time.sleep(0.7)
        submenu = desktop.screenshot("conflicts-submenu.png")
        with Image.open(submenu) as img:
            img.crop((SCREEN_W - 700, 0, SCREEN_W, 300)).save(ARTIFACTS / "conflicts-submenu-crop.png")
        desktop.run("xdotool", "key", "Escape", "Escape")
        time.sleep(0.3)

        # the menu follows the daemon: Pause (clicked over D-Bus) turns into Resume
        menu.click("Pause syncing")
        assert fake.wait_for_call("pause", timeout=10)
        wait_until(lambda: "Resume syncing" in menu.labels(), 10, "Resume syncing in the menu")
        assert menu.labels()[0] == "Paused"

        # a new conflict becomes one desktop notification naming the file
        fake.conflicts.append({"path": "b.txt", "archived": ".conflict/b__remote__x.txt"})
        fake.push({"type": "conflict", "path": "b.txt", "archived": ".conflict/b__remote__x.txt"})
        fake.set_status(conflicts=2)
        notify_log = tmp_path / "notify.jsonl"
        wait_until(lambda: "Conflict in b.txt" in notify_log.read_text(), 10, "the conflict notification")
        wait_until(lambda: "Conflicts (2)" in menu.labels(), 10, "Conflicts (2)")
        desktop.screenshot("notification.png")

        # the daemon goes away and comes back: "not running", then live again
        fake.stop()
        wait_until(lambda: menu.labels()[0] == "ohsync is not running", 10, "ohsync is not running")
        fake = fake_daemon.FakeDaemon(fake.path, status=status, conflicts=conflicts).start()
        wait_until(lambda: menu.labels()[0].startswith("Up to date"), 15, "the tray to reconnect")

        menu.click("Quit")
        assert tray.wait(10) == 0
        assert "shutdown" not in fake.calls  # `ohsync tray` does not own the daemon
    finally:
        menu.close()
        if tray is not None and tray.poll() is None:
            tray.terminate()
        fake.stop()
        print(f"display test took {time.monotonic() - started:.1f} s; screenshots in {ARTIFACTS}")
