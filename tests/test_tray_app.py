"""The tray app against a stand-in daemon: following, reconnecting, actions, pystray mapping.

pystray runs on its ``dummy`` backend here (no display); the real-display
test is ``test_tray_display.py``.
"""

from __future__ import annotations

import importlib.util
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import pytest

from daemon_helpers import wait_for
from ohsync.tray import app as tray_app
from ohsync.tray import desktop, menu_model
from ohsync.tray.menu_model import Action
from ohsync.tray.notifier import Notice


def _load_fake_daemon() -> Any:
    """tests/ is not a package (pytest runs with --import-mode=importlib): load by path."""
    name = "ohsync_tests_tray_fake_daemon"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name("test_tray_fake_daemon.py"))
        assert spec and spec.loader
        sys.modules[name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


FakeDaemon = _load_fake_daemon().FakeDaemon
STATUS_IDLE = _load_fake_daemon().STATUS_IDLE


class Harness:
    def __init__(self, sock: Path, **kwargs: Any) -> None:
        self.notices: list[Notice] = []
        self.changes = 0
        self.gone = threading.Event()
        self.opened: list[str] = []
        self.controller = tray_app.TrayController(
            sock, notify=self.notices.extend, on_change=self._changed, on_daemon_gone=self.gone.set,
            opener=self.opened.append, **kwargs)

    def _changed(self) -> None:
        self.changes += 1

    def state(self) -> str | None:
        status = self.controller.view().status
        return None if status is None else status.get("state")


@pytest.fixture
def sock(tmp_path: Path) -> Path:
    return tmp_path / "run" / "ohsync.sock"


def test_follows_status_events_and_conflicts(sock: Path) -> None:
    fake = FakeDaemon(sock, conflicts=[{"path": "old.md", "archived": ".conflict/old.md"}]).start()
    h = Harness(sock)
    h.controller.start()
    try:
        assert h.controller.connected.wait(8)
        assert h.state() == "idle" and h.controller.view().conflicts == (
            {"path": "old.md", "archived": ".conflict/old.md"},)
        assert fake.wait_for_subscriber()
        fake.set_status(state="syncing", pending_up=3,
                        transfer={"path": "notes.md", "direction": "up", "done": 1, "total": 4})
        wait_for(lambda: h.state() == "syncing")
        assert h.controller.view().progress == (1, 3)
        fake.conflicts.append({"path": "new.md", "archived": ".conflict/new__remote__x.md"})
        fake.push({"type": "conflict", "path": "new.md", "archived": ".conflict/new__remote__x.md"})
        wait_for(lambda: h.controller.view().conflicts and len(h.controller.view().conflicts) == 2)
        fake.push({"type": "filed", "name": "scan.pdf", "dest": "/Files/_inbox/scan.pdf"})
        wait_for(lambda: len(h.notices) >= 2)
        assert [n.title for n in h.notices] == ["Conflict in new.md", "Filed scan.pdf"]  # old.md: silent
        fake.set_status(state="auth_required", message="Token rejected")
        wait_for(lambda: any(n.kind == "login" for n in h.notices))
        # daemon/app.py publishes the status nested: {"type": "status", "status": {...}}
        fake.push({"type": "status", "status": {**fake.status, "state": "offline"}})
        wait_for(lambda: h.state() == "offline")
        # the worker's conflict event carries path + message, no archived copy
        fake.push({"type": "conflict", "path": "c.md", "message": "both changed"})
        wait_for(lambda: any(n.title == "Conflict in c.md" for n in h.notices))
    finally:
        h.controller.stop()
        fake.stop()


def test_shows_not_running_and_reconnects_when_the_daemon_restarts(sock: Path) -> None:
    h = Harness(sock)
    h.controller.start()
    fake = None
    try:
        time.sleep(0.3)  # why: a quiet period: with no daemon the tray keeps showing "not running"
        assert h.controller.view().status is None  # nobody there yet: "ohsync is not running"
        fake = FakeDaemon(sock).start()
        assert h.controller.connected.wait(8)
        fake.stop()
        wait_for(lambda: h.controller.view().status is None)
        assert not h.controller.connected.is_set()
        fake = FakeDaemon(sock, status={**STATUS_IDLE, "state": "paused"}).start()
        wait_for(lambda: h.state() == "paused", timeout=10)
        assert not h.gone.is_set()  # not ours: keep waiting for it instead of quitting
    finally:
        h.controller.stop()
        if fake:
            fake.stop()
    assert not any(t.name == "ohsync-tray-subscribe" and t.is_alive() for t in threading.enumerate())


def test_owned_daemon_going_away_ends_the_tray(sock: Path) -> None:
    fake = FakeDaemon(sock).start()
    h = Harness(sock, owns_daemon=True)
    assert h.controller.view().starting
    h.controller.start()
    try:
        assert h.controller.connected.wait(8)
        assert not h.controller.view().starting
        fake.stop()
        assert h.gone.wait(8)
    finally:
        h.controller.stop()


def test_actions_call_the_daemon_or_open_files(sock: Path, tmp_path: Path) -> None:
    with FakeDaemon(sock) as fake:
        h = Harness(sock)
        h.controller.perform(Action("refresh"))  # on the action executor: the UI never waits on the socket
        assert fake.wait_for_call("refresh")
        assert h.controller.call("pause") is None and h.controller.call("resume") is None
        assert fake.wait_for_call("resume") and h.notices == []
        existing = tmp_path / "a.md"
        existing.write_text("x")
        h.controller.perform(Action("open", (str(existing), str(tmp_path / "gone.md"))))
        drop = tmp_path / "OH-Drop"
        h.controller.perform(Action("open", (str(drop),), fallback=str(drop)))
        assert h.opened == [str(existing), str(drop)] and drop.is_dir()
    h.controller.perform(Action("refresh"))  # daemon gone: a notice, not an exception
    wait_for(lambda: h.notices)
    assert h.notices[0].title == "Could not refresh" and "not running" in h.notices[0].body
    h.controller.stop()  # the controller owns its action threads: stopped, none is left
    assert [t.name for t in threading.enumerate() if t.name.startswith("ohsync-tray")] == []
    h.controller.perform(Action("refresh"))  # after the stop: no action runs, no thread starts
    assert [t.name for t in threading.enumerate() if t.name.startswith("ohsync-tray")] == []


START_FAKE = """
import importlib.util, os, sys, time
spec = importlib.util.spec_from_file_location("fake", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
open(sys.argv[3], "w").write(str(os.getpid()))
module.FakeDaemon(sys.argv[2]).start()
time.sleep(30)  # why: the started "daemon" stays up until the test kills it
"""


def test_start_item_starts_the_daemon_and_shows_starting(sock: Path, tmp_path: Path) -> None:
    import os
    import signal

    pid_file = tmp_path / "started.pid"
    command = [sys.executable, "-c", START_FAKE, str(Path(__file__).with_name("test_tray_fake_daemon.py")),
               str(sock), str(pid_file)]
    h = Harness(sock, start_command=command)
    h.controller.start()
    try:
        time.sleep(0.2)  # why: a quiet period: nothing is started before the Start item is clicked
        assert h.controller.view().status is None and not h.controller.view().starting
        h.controller.perform(Action("start"))
        wait_for(lambda: h.controller.view().starting, timeout=2)  # "Starting…", Start disabled
        assert h.controller.connected.wait(15)  # well before the 5 s backoff would have retried
        assert h.state() == "idle" and not h.controller.view().starting
        assert h.controller.start_daemon() is True  # already running: nothing started twice
        assert h.notices == []
    finally:
        h.controller.stop()
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGTERM)


def test_start_item_reports_a_daemon_that_cannot_start(sock: Path) -> None:
    h = Harness(sock, start_command=[sys.executable, "-c", "raise SystemExit(3)"])
    h.controller.start()
    try:
        assert h.controller.start_daemon() is False
        assert [n.title for n in h.notices] == ["Could not start ohsync"]
        assert "exited with code 3" in h.notices[0].body
        assert not h.controller.view().starting  # Start is offered again
    finally:
        h.controller.stop()


def test_default_start_command_runs_this_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tray_app.shutil, "which", lambda name: None)  # no systemd here
    assert tray_app.default_start_command() == [sys.executable, "-m", "ohsync.daemon.cli", "run", "--no-tray"]
    assert tray_app.default_start_command("/etc/o.toml")[3:5] == ["--config", "/etc/o.toml"]


# --- pystray (dummy backend) -------------------------------------------------------------

@pytest.fixture
def pystray_dummy(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("PYSTRAY_BACKEND", "dummy")
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)  # notices go through icon.notify
    return desktop.load_pystray()


def make_fake_pystray(pystray: Any) -> Any:
    class LoopIcon(pystray.Icon):
        """pystray's dummy Icon with a loop that runs until stop()."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._quit = threading.Event()
            self.notified: list[tuple[str, str]] = []
            self.menus = 0

        def _show(self) -> None: ...
        def _hide(self) -> None: ...
        def _update_title(self) -> None: ...

        def _update_icon(self) -> None:
            self._icon_valid = True

        def _update_menu(self) -> None:
            self.menus += 1

        def _run(self) -> None:
            self._mark_ready()
            self._quit.wait(30)

        def _stop(self) -> None:
            self._quit.set()

        def _notify(self, message: str, title: str | None = None) -> None:
            self.notified.append((title or "", message))

    return types.SimpleNamespace(Icon=LoopIcon, Menu=pystray.Menu, MenuItem=pystray.MenuItem)


def items(menu: Any) -> dict[str, Any]:
    return {item.text: item for item in menu}


def test_model_maps_to_pystray_items(pystray_dummy: Any) -> None:
    from ohsync.tray import menu_model as mm
    status = {**STATUS_IDLE, "conflicts": 1}
    view = mm.TrayView(status, conflicts=({"path": "a.md", "archived": ".conflict/a.md"},))
    performed: list[Action] = []
    menu = tray_app.to_pystray_menu(pystray_dummy, mm.build_menu(view), performed.append)
    by_text = items(menu)
    first = next(iter(menu))
    assert first.text.startswith("Needs attention") and not first.enabled  # an open conflict needs the person
    assert by_text["Open folder"].default and by_text["Refresh now"].enabled
    sub = by_text["Conflicts (1)"].submenu
    assert [i.text for i in sub] == ["a.md", "- - - -", "Open conflicts folder"]
    by_text["Refresh now"](None)
    list(sub)[0](None)
    assert performed == [Action("refresh"), Action("open", ("/tmp/OH-Memory/a.md", "/tmp/OH-Memory/.conflict/a.md"))]


def test_tray_app_end_to_end_with_a_stand_in_icon(pystray_dummy: Any, sock: Path) -> None:
    fake_pystray = make_fake_pystray(pystray_dummy)
    with FakeDaemon(sock) as fake:
        app = tray_app.TrayApp(fake_pystray, sock, owns_daemon=False)
        runner = threading.Thread(target=app.run, name="ohsync-test-tray")
        runner.start()
        try:
            assert app.controller.connected.wait(8)
            wait_for(lambda: next(iter(app.icon.menu)).text.startswith("Up to date"))
            assert app.icon.title.startswith("ohsync — Up to date")
            items(app.icon.menu)["Refresh now"](app.icon)
            assert fake.wait_for_call("refresh")
            items(app.icon.menu)["Pause syncing"](app.icon)
            wait_for(lambda: "Resume syncing" in items(app.icon.menu))
            fake.set_status(state="auth_required")
            wait_for(lambda: app.icon.notified, timeout=10)
            assert app.icon.notified[0][0] == "Login needed"
            items(app.icon.menu)["Quit"](app.icon)
            runner.join(10)
            assert not runner.is_alive() and app.quit_requested
        finally:
            app.quit()
            runner.join(10)
        assert "shutdown" not in fake.calls


def test_run_tray_owning_the_daemon_stops_it_on_quit(pystray_dummy: Any, sock: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    fake_pystray = make_fake_pystray(pystray_dummy)
    monkeypatch.setattr(desktop, "load_pystray", lambda backend=None: fake_pystray)
    created: list[Any] = []
    real_init = tray_app.TrayApp.__init__

    def spy_init(self: Any, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        created.append(self)

    monkeypatch.setattr(tray_app.TrayApp, "__init__", spy_init)
    with FakeDaemon(sock) as fake:
        stopped = threading.Event()
        runner = threading.Thread(target=tray_app.run_tray, args=(sock,),
                                  kwargs={"owns_daemon": True, "stop_daemon": stopped.set})
        runner.start()
        wait_for(lambda: created and created[0].controller.connected.is_set())
        created[0].controller.perform(Action("quit"))
        runner.join(10)
        assert stopped.is_set() and not runner.is_alive()

        created.clear()
        runner = threading.Thread(target=tray_app.run_tray, args=(sock,), kwargs={"owns_daemon": True})
        runner.start()
        wait_for(lambda: created and created[0].controller.connected.is_set())
        created[0].quit()
        runner.join(10)
        assert fake.wait_for_call("shutdown")  # no stop_daemon given: ask over the socket


def test_stop_event_closes_the_tray(pystray_dummy: Any, sock: Path) -> None:
    stop = threading.Event()
    app = tray_app.TrayApp(make_fake_pystray(pystray_dummy), sock, owns_daemon=False, stop_event=stop)
    runner = threading.Thread(target=app.run)
    runner.start()
    wait_for(lambda: next(iter(app.icon.menu)).text == "ohsync is not running")
    stop.set()
    runner.join(10)
    assert not runner.is_alive() and not app.quit_requested


# --- desktop helpers -------------------------------------------------------------------------

@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux backend selection")
def test_load_pystray_explains_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    monkeypatch.delenv("PYSTRAY_BACKEND", raising=False)
    with pytest.raises(desktop.TrayUnavailable, match="no graphical display"):
        desktop.load_pystray()
    monkeypatch.setitem(sys.modules, "gi", None)  # PyGObject not installed
    from ohsync.tray import install_hint

    # a Debian machine whose /usr/bin/python3 lacks python3-gi: the packages, then the prebuilt-bindings way
    system = install_hint.SystemPython("/usr/bin/python3", (3, 11), ("gi", "Gtk", "AyatanaAppIndicator3"))
    monkeypatch.setattr(install_hint, "probe_machine", lambda: install_hint.Machine("linux", "debian", system))
    with pytest.raises(desktop.TrayUnavailable) as info:
        desktop.choose_linux_backend()
    assert "PyGObject is missing" in str(info.value) and "sudo apt install python3-gi" in str(info.value)
    assert "--system-site-packages '.[tray-system]'" in str(info.value)
    # no distribution Python to borrow the bindings from: the source build and its -dev packages
    monkeypatch.setattr(install_hint, "probe_machine", lambda: install_hint.Machine("linux", "debian", None))
    with pytest.raises(desktop.TrayUnavailable) as info:
        desktop.choose_linux_backend()
    assert "pipx install --force '.[tray]'" in str(info.value) and "libgirepository1.0-dev" in str(info.value)


def test_open_commands_per_platform() -> None:
    assert desktop.open_command("/x", "linux") == ["xdg-open", "/x"]
    assert desktop.open_command("/x", "darwin") == ["open", "/x"]
    assert desktop.open_command("C:\\x", "win32") is None


def test_open_ohsync_opens_the_address_the_socket_gives(sock: Path) -> None:
    fake = FakeDaemon(sock).start()
    opened: list[str] = []
    h = Harness(sock, browser=lambda url: opened.append(url) or True)
    h.controller.start()
    try:
        assert h.controller.connected.wait(8)
        entry = next(e for e in menu_model.build_menu(h.controller.view()) if e.text == "Open ohsync…")
        assert entry.enabled and entry.action == Action("panel")
        h.controller.perform(entry.action)
        wait_for(lambda: opened)
        assert opened == ["http://127.0.0.1:8765/auth#the-secret"] and fake.wait_for_call("panel")
    finally:
        h.controller.stop()
        fake.stop()
