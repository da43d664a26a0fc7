"""Shared helpers for the daemon's tests: an isolated environment and fakes.

``isolated_env`` points every place the daemon could touch (config, state,
logs, runtime dir, keyring) into a temporary folder, selects the plaintext
file keyring, and removes DISPLAY so no tray or keyring prompt can appear.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from ohsync.engine.events import ConflictRecord, SyncEvent, SyncReport

KEYRING_BACKEND = "ohsync.daemon.file_keyring.FileKeyring"


@dataclass
class Env:
    root: Path
    sock_dir: Path
    keyring_file: Path
    config: Path

    @property
    def socket(self) -> Path:
        return self.sock_dir / "ohsync" / "ohsync.sock"  # the default under XDG_RUNTIME_DIR

    def vars(self) -> dict[str, str]:
        """The environment for a subprocess (``ohsync run``…)."""
        env = dict(os.environ)
        # a crash point comes only from the test that asks for it (DaemonProc's extra_env)
        for k in ("DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "OHSYNC_SOCKET", "OHSYNC_CRASH_AT"):
            env.pop(k, None)
        env.update({
            "PYTHON_KEYRING_BACKEND": KEYRING_BACKEND,
            "OHSYNC_KEYRING_FILE": str(self.keyring_file),
            "OHSYNC_CONFIG": str(self.config),
            "HOME": str(self.root / "home"),
            "XDG_CONFIG_HOME": str(self.root / "xdg-config"),
            "XDG_STATE_HOME": str(self.root / "xdg-state"),
            "XDG_DATA_HOME": str(self.root / "xdg-data"),
            "XDG_CACHE_HOME": str(self.root / "xdg-cache"),
            "XDG_RUNTIME_DIR": str(self.sock_dir),
            "PYTHONUNBUFFERED": "1",
        })
        return env


@pytest.fixture
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Env]:
    """Everything the daemon may touch lives under tmp_path (socket: a short /tmp dir)."""
    sock_dir = Path(tempfile.mkdtemp(prefix="ohs-", dir="/tmp"))
    env = Env(root=tmp_path, sock_dir=sock_dir, keyring_file=tmp_path / "keyring.json",
              config=tmp_path / "config.toml")
    for k in ("DISPLAY", "WAYLAND_DISPLAY", "OHSYNC_SOCKET"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.vars().items():
        if os.environ.get(k) != v:
            monkeypatch.setenv(k, v)
    from ohsync.daemon import credentials

    credentials.use_file_store(None)  # a config read by an earlier test may have chosen the file store
    try:
        yield env
    finally:
        credentials.use_file_store(None)
        shutil.rmtree(sock_dir, ignore_errors=True)


def wait_for(predicate: Callable[[], Any], timeout: float = 30.0, what: str = "", interval: float = 0.05,
             seen: Callable[[], Any] | None = None) -> Any:
    """Poll ``predicate`` until it returns something truthy and return that value.

    ``timeout`` and ``interval`` are seconds. An exception raised by ``predicate``
    counts as "not yet" (a socket not listening yet…) and is retried. After
    ``timeout`` an ``AssertionError`` names ``what`` was awaited, the last value
    ``predicate`` returned (or the last exception it raised) and, when given,
    what ``seen()`` shows then. The one wait-for helper of the tests: wait on the
    condition, never a fixed sleep.
    """
    deadline = time.monotonic() + timeout
    last_value: Any = None
    last_exc: BaseException | None = None
    while True:
        try:
            value = predicate()
        except Exception as exc:  # noqa: BLE001 - retried until the deadline
            last_exc, value = exc, None
        else:
            last_exc, last_value = None, value
        if value:
            return value
        if time.monotonic() >= deadline:
            break
        time.sleep(interval)  # why: the poll interval of this one wait-for helper
    detail = f"last error: {last_exc!r}" if last_exc is not None else f"last value: {last_value!r}"
    if seen is not None:
        try:
            detail += f"; seen: {seen()!r}"
        except Exception as exc:  # noqa: BLE001 - only describing the failure
            detail += f"; seen: {exc!r}"
    raise AssertionError(f"timed out after {timeout} s waiting for {what or _describe(predicate)} ({detail})")


def _describe(predicate: Callable[[], Any]) -> str:
    """A readable name for a predicate given without ``what``: its source line when it has one."""
    code = getattr(predicate, "__code__", None)
    if code is None:
        return repr(predicate)
    return f"{getattr(predicate, '__qualname__', predicate)} ({Path(code.co_filename).name}:{code.co_firstlineno})"


@dataclass
class FakeEngine:
    """A stand-in for SyncEngine: records calls, can be told to fail."""

    local_root: Path
    calls: list[tuple[tuple[str, ...] | None, bool]] = field(default_factory=list)
    fail_with: list[BaseException] = field(default_factory=list)
    conflict_list: list[ConflictRecord] = field(default_factory=list)
    on_event: Callable[[SyncEvent], None] | None = None
    called: threading.Event = field(default_factory=threading.Event)
    delay: float = 0.0
    initial_files: list[str] = field(default_factory=list)
    per_file_delay: float = 0.0
    finished: list[str] = field(default_factory=list)
    saved: list[str] = field(default_factory=list)

    def note_saved(self, rel_paths: Any) -> None:
        """As :meth:`SyncEngine.note_saved`: records the paths."""
        self.saved.extend(rel_paths)

    def sync(self, local_paths: Any = None, *, check_remote: bool = True,
             should_stop: Any = None) -> SyncReport:
        paths = None if local_paths is None else tuple(local_paths)
        self.calls.append((paths, check_remote))
        self.called.set()
        if self.delay:
            time.sleep(self.delay)  # why: a pass that takes the time the test asked for
        if self.fail_with:
            raise self.fail_with.pop(0)
        report = SyncReport(requests=1 if check_remote else 0)
        files = list(paths) if paths is not None else list(self.initial_files)
        for p in files:
            if should_stop is not None and should_stop():  # as the engine: between two files
                report.interrupted = True
                break
            time.sleep(self.per_file_delay)  # why: each file takes the time the test asked for
            self.finished.append(p)
            if self.on_event:
                self.on_event(SyncEvent("synced", p, direction="up", action="upload"))
            report.uploaded.append(p)
        return report

    def conflicts(self) -> list[ConflictRecord]:
        return list(self.conflict_list)

    def damaged(self) -> list[tuple[str, str]]:
        return []

    def skipped(self) -> list[tuple[str, str]]:
        return []

    def is_ignored(self, rel: str) -> bool:
        return rel.startswith(".ohsync-tmp-") or "/.ohsync-tmp-" in rel

    def rel_path(self, local_path: str) -> str | None:
        try:
            rel = Path(local_path).relative_to(self.local_root).as_posix()
        except ValueError:
            return None
        return None if rel in ("", ".") or self.is_ignored(rel) else rel


@dataclass
class FakeSession:
    engine: FakeEngine
    library_name: str = "OH-Memory"
    closed: bool = False

    @property
    def local_root(self) -> Path:
        return self.engine.local_root

    def close(self) -> None:
        self.closed = True


# --------------------------------------------------------------------------- a real daemon process

import subprocess  # noqa: E402

from engine_helpers import read_tree, mirrored  # noqa: E402,F401 - one tree reader for both kinds of test

REPO_ROOT = Path(__file__).resolve().parents[1]
DEMO_LIBRARY = REPO_ROOT / "devserver" / "demo_library"


def ohsync_cmd() -> list[str]:
    """How to run the console script of this checkout."""
    import sys

    return [sys.executable, "-m", "ohsync.daemon.cli"]


def write_config(env: Env, server: str, username: str, mirror: Path, *, poll_interval: float = 1.0,
                 **extra: Any) -> Path:
    """A config for a daemon under ``env`` (state in env.root/state); ``memory={...}`` keys
    replace the defaults set here (``+08:00``, Chinese texts, no stamping)."""
    import tomli_w

    doc: dict[str, Any] = {"server": server, "username": username, "poll_interval": poll_interval,
                           "state_dir": str(env.root / "state")}
    mirror_doc: dict[str, Any] = {"library": "OH-Memory", "local": str(mirror)}
    for k in ("library", "library_id", "remote", "ignore"):
        if k in extra:
            mirror_doc[k] = extra.pop(k)
    # the texts, offsets and bytes daemon tests compare were written for these (the product's defaults are the
    # computer's offset, the locale's language and stamping on: tests of those set them)
    doc["memory"] = {"time_offset": "+08:00", "language": "zh", "stamp_edits": False, **extra.pop("memory", {})}
    doc.update(extra)
    doc["mirror"] = [mirror_doc]
    env.config.write_text(tomli_w.dumps(doc), encoding="utf-8")
    return env.config


class DaemonProc:
    """``ohsync run --no-tray`` as a subprocess, with helpers to talk to it.

    ``extra_env`` is added to the environment of ``env`` (for example
    ``{"OHSYNC_CRASH_AT": point}``); output goes to ``env.root/daemon-output.log``.
    """

    def __init__(self, env: Env, *, args: tuple[str, ...] = (), extra_env: dict[str, str] | None = None) -> None:
        self.env = env
        self.log = open(env.root / "daemon-output.log", "ab")
        self.proc = subprocess.Popen([*ohsync_cmd(), "run", "--no-tray", *args], env={**env.vars(), **(extra_env or {})},
                                     stdout=self.log, stderr=subprocess.STDOUT, cwd=env.root)

    def client(self, timeout: float = 30.0) -> Any:
        from ohsync.daemon.protocol import RpcClient

        return RpcClient(self.env.socket, timeout=timeout)

    def status(self) -> dict[str, Any]:
        return self.client().call("status")

    def wait_state(self, *states: str, timeout: float = 60.0) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            if self.proc.poll() is not None:
                raise AssertionError(f"the daemon exited with {self.proc.returncode}:\n{self.output()}")
            st = self.status()
            return st if st["state"] in states else None

        try:
            return wait_for(check, timeout=timeout, what=f"state in {states}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- daemon output ---\n{self.output()[-4000:]}") from None

    def cli(self, *argv: str, timeout: float = 60.0, input: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*ohsync_cmd(), *argv], env=self.env.vars(), capture_output=True, text=True,
                              timeout=timeout, input=input)

    def output(self) -> str:
        self.log.flush()
        return (self.env.root / "daemon-output.log").read_text(encoding="utf-8", errors="replace")

    def stop(self, timeout: float = 60.0) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()
        return self.proc.returncode

    def wait_exit(self, timeout: float = 60.0) -> int:
        return self.proc.wait(timeout)


# --------------------------------------------------------------------------- a seeded daemon setup

#: The devserver account every daemon test signs in as (``conftest.DEVSERVER_USER``).
USER = "user@example.edu.cn"


@dataclass
class DaemonSetup:
    """A library on devserver, its user's token in the test keyring, a config, and the daemons started.

    ``repo_id`` is the library's id, ``mirror`` the local folder the config
    names (created by the daemon), ``procs`` every :class:`DaemonProc` that
    :meth:`start` made; the ``seed_daemon`` fixture stops them all.
    """

    env: Env
    srv: Any
    repo_id: str
    mirror: Path
    library: str = "OH-Memory"
    procs: list[DaemonProc] = field(default_factory=list)

    def configure(self, *, poll_interval: float = 1.0, **extra: Any) -> Path:
        """(Re)write the config for ``mirror`` (keys as :func:`write_config`); returns its path."""
        extra.setdefault("library", self.library)
        return write_config(self.env, self.srv.url, USER, self.mirror, poll_interval=poll_interval, **extra)

    def start(self, *args: str, wait: str | tuple[str, ...] | None = None, timeout: float = 90.0,
              env: Env | None = None, extra_env: dict[str, str] | None = None) -> DaemonProc:
        """Start ``ohsync run --no-tray ARGS`` (under ``env``, by default this setup's, plus
        ``extra_env``); with ``wait``, return once its state is one of them (else AssertionError
        after ``timeout`` seconds)."""
        proc = DaemonProc(env or self.env, args=args, extra_env=extra_env)
        self.procs.append(proc)
        if wait is not None:
            proc.wait_state(*((wait,) if isinstance(wait, str) else wait), timeout=timeout)
        return proc

    def converged(self) -> bool:
        """Whether the mirror and the library hold the same files, byte for byte."""
        return read_tree(self.mirror) == mirrored(self.srv.tree(self.repo_id))

    def stop_all(self) -> None:
        """Stop every daemon :meth:`start` made (SIGTERM, then SIGKILL)."""
        for proc in self.procs:
            proc.stop()


def seed_daemon_setup(env: Env, srv: Any, mirror: Path, *, tree: Path | None = None,
                      files: dict[str, bytes] | None = None, put: dict[str, bytes] | None = None,
                      library: str = "OH-Memory", config: bool = True, poll_interval: float = 1.0,
                      **extra: Any) -> DaemonSetup:
    """Seed a library and sign in, for a daemon under ``env``.

    Creates ``library`` on ``srv`` in one commit from the folder ``tree`` plus
    ``files`` (``{"rel/path": bytes}``, written over a copy of it), then puts
    each of ``put`` (``{"/path": bytes}``) as a commit of its own; saves the
    user's token in the keyring of ``env``; with ``config``, writes a config
    for ``mirror`` (``poll_interval`` in seconds, other keys as
    :func:`write_config`).
    """
    from ohsync.daemon import credentials

    if files:
        seed = Path(tempfile.mkdtemp(prefix="seed-", dir=env.root))
        if tree is not None:
            shutil.copytree(tree, seed, dirs_exist_ok=True)
        for rel, data in files.items():
            (seed / rel).parent.mkdir(parents=True, exist_ok=True)
            (seed / rel).write_bytes(data)
        tree = seed
    repo_id = srv.create_library(USER, library, from_tree=tree)
    for path, data in (put or {}).items():
        srv.put_file(repo_id, path, data)
    credentials.save_token(srv.url, USER, srv.token_for(USER))
    setup = DaemonSetup(env, srv, repo_id, mirror, library)
    if config:
        setup.configure(poll_interval=poll_interval, **extra)
    return setup


@pytest.fixture
def seed_daemon(isolated_env: Env, devserver: Any, tmp_path: Path) -> Iterator[Callable[..., DaemonSetup]]:
    """A factory: ``seed_daemon(tree=DEMO_LIBRARY, files=…, put=…, poll_interval=1.0, **config)`` →
    :class:`DaemonSetup` on the ``devserver`` fixture, mirror ``tmp_path / "mirror"``
    (arguments as :func:`seed_daemon_setup`).  Every daemon it started is
    stopped at teardown."""
    made: list[DaemonSetup] = []

    def make(**kwargs: Any) -> DaemonSetup:
        setup = seed_daemon_setup(isolated_env, devserver, tmp_path / "mirror", **kwargs)
        made.append(setup)
        return setup

    try:
        yield make
    finally:
        for setup in made:
            setup.stop_all()


def idle_snapshot(**kw: Any) -> Any:
    """A :class:`ohsync.daemon.status.Snapshot` of a running, idle daemon (polled and
    scanned 5 s ago), with the fields in ``kw`` changed."""
    from ohsync.daemon.status import Snapshot

    now = time.time()
    base: dict[str, Any] = dict(library="OH-Memory", local="/home/u/OH-Memory", poll_interval=30,
                                phase="running", watcher_alive=True, last_poll=now - 5, last_scan=now - 5,
                                last_sync=now - 5, now=now)
    base.update(kw)
    return Snapshot(**base)
