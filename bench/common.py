"""Shared parts of the benchmarks (``bench/run.py``, ``bench/load.py``): the
devserver process, rclone, an engine mirror, measuring helpers.

devserver runs as its own process (``python -m ohsync.devserver``) so that it
does not share a GIL with the engine; request counts come from its control API
(``/_devserver/counters``), which itself is not counted.  rclone is the Debian
package, configured only through a connection string (``--config /dev/null``).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import httpx

REPO = Path(__file__).resolve().parents[1]
GENERATOR = REPO / "tests" / "data" / "samples" / "make_scale_library.py"
USER, PASSWORD = "user@example.edu.cn", "secret"
LIB = "OH-Memory"
BIG_LIB = "Bench-Big"
#: Daemon states after a finished sync ("attention": synced, but the generated library's
#: damaged memory files are named).
SETTLED = ("idle", "attention")
MB = 1024 * 1024



def server_side_dir(work: Path, name: str) -> Path:
    """A folder for the server side of a big scenario (the generated library, devserver's
    data): in ``/dev/shm`` when it is a writable tmpfs with room, since creating and
    unlinking 60,000 files there takes seconds instead of minutes; else ``work/name``.
    The mirror and the daemon's state stay on the disk under test."""
    shm = Path("/dev/shm")
    try:
        st = os.statvfs(shm)
        if os.access(shm, os.W_OK) and st.f_bavail * st.f_frsize > 4 * 1024**3:
            return Path(tempfile.mkdtemp(prefix=f"ohsync-{name}-", dir=shm))
    except OSError:
        pass
    path = work / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def bounded(fn: Callable[[], Any], timeout: float, what: str) -> tuple[Any, float]:
    """Run ``fn`` in a thread; return (result, seconds) or raise TimeoutError after ``timeout``."""
    box: dict[str, Any] = {}

    def target() -> None:
        t0 = time.perf_counter()
        try:
            box["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller
            box["error"] = exc
        box["seconds"] = time.perf_counter() - t0

    th = threading.Thread(target=target, daemon=True, name=f"bench-{what}")
    th.start()
    th.join(timeout)
    if th.is_alive():
        raise TimeoutError(f"{what} did not finish within {timeout:.0f} s")
    if "error" in box:
        raise box["error"]
    return box["result"], box["seconds"]


# ----------------------------------------------------------------------------- devserver process

class DevServerProc:
    """``python -m ohsync.devserver`` on 127.0.0.1, steered through ``/_devserver/``.

    Its requests are counted by devserver itself (``/_devserver/counters``);
    a server of one's own is :class:`real_server.RealServer`, with the same
    interface and the requests counted by the tools.
    """

    #: devserver counts every request it answers (the control API excepted).
    counts_requests = True
    #: ``/_devserver/faults`` adds latency and failures
    faults = True
    user, password = USER, PASSWORD

    def __init__(self, data: Path, libraries: dict[str, Path]) -> None:
        cmd = [sys.executable, "-m", "ohsync.devserver", "--host", "127.0.0.1", "--port", "0",
               "--data", str(data), "--user", f"{USER}:{PASSWORD}"]
        for name, tree in libraries.items():
            cmd += ["--library", f"{name}={tree}"]
        self.log_path = data.parent / "devserver.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._log)
        line = b""
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            line = self.proc.stdout.readline()  # type: ignore[union-attr]
            if line or self.proc.poll() is not None:
                break
        m = re.search(rb"ready at (http://\S+)", line)
        if not m:
            self.stop()
            raise RuntimeError(f"devserver did not start: {line!r}; see {self.log_path}")
        self.url = m.group(1).decode()
        self.http = httpx.Client(base_url=self.url + "/_devserver", timeout=600)
        self.token = self.http.get("/token", params={"email": USER}).json()["token"]
        from real_server import server_version

        self.version = "devserver " + server_version(self.url)

    def lib_name(self, name: str) -> str:
        """The library's name on the server (devserver: the bench's name itself)."""
        return name

    def repo_id(self, name: str) -> str:
        for lib in self.http.get("/libraries").json():
            if lib["name"] == name:
                return lib["id"]
        return self.http.post("/libraries", json={"email": USER, "name": name}).json()["repo_id"]

    def reset(self) -> None:
        self.http.post("/reset")

    def counters(self) -> dict[str, Any]:
        return self.http.get("/counters").json()

    def put_file(self, repo_id: str, path: str, data: bytes) -> str:
        return self.http.put(f"/libraries/{repo_id}/file", params={"path": path}, content=data).json()["id"]

    def put_file_from(self, repo_id: str, path: str, src: Path) -> str:
        with open(src, "rb") as fh:
            return self.http.put(f"/libraries/{repo_id}/file", params={"path": path}, content=fh).json()["id"]

    def read_file(self, repo_id: str, path: str) -> bytes:
        return self.http.get(f"/libraries/{repo_id}/file", params={"path": path}).content

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()


@dataclass
class Measure:
    """One tool doing one job: seconds, devserver requests, and free-form extras."""

    seconds: float | None = None
    requests: int | None = None
    endpoints: dict[str, int] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"seconds": None if self.seconds is None else round(self.seconds, 4),
                             "requests": self.requests, "endpoints": self.endpoints}
        d.update(self.extra)
        if self.error:
            d["error"] = self.error
        return d


def measured(srv: Any, fn: Callable[[], Any], timeout: float, what: str) -> tuple[Measure, Any]:
    """Reset the counters, run ``fn`` bounded, read the counters."""
    srv.reset()
    m = Measure()
    result = None
    try:
        result, m.seconds = bounded(fn, timeout, what)
    except Exception as exc:  # noqa: BLE001 - recorded in the results
        m.error = f"{type(exc).__name__}: {exc}"
    c = srv.counters()
    m.requests, m.endpoints = c["total"], c["endpoints"]
    return m, result


# ----------------------------------------------------------------------------- rclone

class Rclone:
    """The rclone binary with an on-the-fly seafile remote (no config file).

    :param srv: the server (``url``, ``user``, ``password`` or only ``token``,
        ``lib_name``), or None for no server (then only ``bin`` and ``version``).
    """

    def __init__(self, srv: Any) -> None:
        self.bin = shutil.which("rclone")
        self.version = ""
        self.srv = srv
        self.url = srv.url if srv is not None else ""
        self.auth = ""
        if self.bin:
            self.version = subprocess.run([self.bin, "version"], capture_output=True, text=True,
                                          timeout=30).stdout.splitlines()[0]
            if srv is not None and srv.password is not None:
                obscured = subprocess.run([self.bin, "obscure", srv.password], capture_output=True, text=True,
                                          timeout=30).stdout.strip()
                self.auth = f"user='{srv.user}',pass='{obscured}'"
            elif srv is not None:  # a token only: rclone's seafile backend takes it as auth_token
                self.auth = f"user='{srv.user}',auth_token='{srv.token}'"

    def remote(self, library: str, path: str = "") -> str:
        name = self.srv.lib_name(library) if self.srv is not None else library
        return f":seafile,url='{self.url}',{self.auth},library='{name}':{path}"

    def run(self, *args: str, timeout: float, dump_to: Path | None = None) -> subprocess.CompletedProcess[str]:
        """Run rclone; on timeout terminate it (by pid) and return code 124.

        :param dump_to: log every request's headers to this file (``--dump headers``;
            rclone redacts the Authorization header) so they can be counted.
        """
        log_opts = ["--dump", "headers", "--log-file", str(dump_to)] if dump_to is not None else ["-q"]
        cmd = [self.bin or "rclone", "--config", "/dev/null", *log_opts, *args]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=timeout)
            return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
        except KeyboardInterrupt:  # the run is stopped: so is its rclone
            proc.kill()
            proc.wait(10)
            raise
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            try:
                out, err = proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            return subprocess.CompletedProcess(cmd, 124, out, err)


def rclone_measure(srv: Any, rc: Rclone, args: list[str], timeout: float, what: str) -> Measure:
    """One rclone run, timed, its requests counted by devserver or, on a server of one's
    own, from rclone's ``--dump headers`` log (:func:`real_server.count_rclone_dump`)."""
    srv.reset()
    dump = None
    if not srv.counts_requests:
        fd, name = tempfile.mkstemp(prefix="ohsync-bench-rclone-", suffix=".log")
        os.close(fd)
        dump = Path(name)
    t0 = time.perf_counter()
    cp = rc.run(*args, timeout=timeout, dump_to=dump)
    m = Measure(seconds=time.perf_counter() - t0)
    if dump is not None:
        from real_server import count_rclone_dump

        m.requests, m.endpoints = count_rclone_dump(dump)
        dump.unlink(missing_ok=True)
    else:
        c = srv.counters()
        m.requests, m.endpoints = c["total"], c["endpoints"]
    if cp.returncode == 124:
        m.error = f"timed out after {timeout:.0f} s"
        m.extra["timed_out"] = True
    elif cp.returncode != 0:
        m.error = f"rclone exit {cp.returncode}: {cp.stderr.strip()[-500:]}"
    return m


# ----------------------------------------------------------------------------- ohsync engine

#: Workers of the transfer pool an engine mirror gets: the daemon's default
#: (``transfers`` in daemon/config/__init__.py), which ``daemon/session.py`` hands every engine.
TRANSFERS = 4


class EngineMirror:
    """An engine mirror of one library in ``base/name`` (as tests/engine_helpers.py does),
    with a transfer pool of ``transfers`` workers as the daemon gives its engines
    (0: none, transfers one after the other)."""

    def __init__(self, srv: Any, repo_id: str, base: Path, name: str, *,
                 transfers: int = TRANSFERS) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from ohsync.engine.client import SeafileClient
        from ohsync.engine.context import EngineOptions
        from ohsync.engine.state import StateStore
        from ohsync.engine.sync.engine import SyncEngine

        self.root = base / name
        self.root.mkdir(parents=True)
        st = base / f"{name}-state"
        self.state = StateStore(st / "state.db", st / "blobs")
        from real_server import TALLY

        # each request is counted where it is sent, too: a server of one's own has no counter
        self.client = SeafileClient(srv.url, srv.token, retries=1, on_request=TALLY.add)
        self.pool = ThreadPoolExecutor(max_workers=transfers, thread_name_prefix="bench-transfer") \
            if transfers else None
        self.engine = SyncEngine(self.client, repo_id, self.root, self.state,
                                 options=EngineOptions(backup_dir=st / "backups", library_name=LIB),
                                 executor=self.pool)

    def sync(self, paths: list[str] | None = None):  # noqa: ANN201 - SyncReport
        return self.engine.sync(paths)

    def close(self) -> None:
        """Stop the pool, close the state and the client."""
        if self.pool is not None:
            self.pool.shutdown(wait=True)
        self.state.close()
        self.client.close()


def report_extra(report: Any) -> dict[str, Any]:
    if report is None:
        return {}
    return {"uploaded": len(report.uploaded), "downloaded": len(report.downloaded),
            "errors": [list(e) for e in report.errors[:5]], "conflicts": len(report.conflicts),
            "report_requests": report.requests}


def engine_measure(srv: Any, mirror: EngineMirror, paths: list[str] | None, timeout: float,
                   what: str) -> Measure:
    m, report = measured(srv, lambda: mirror.sync(paths), timeout, what)
    m.extra.update(report_extra(report))
    return m


# ----------------------------------------------------------------------------- the bench

def daemon_env(root: Path, sock_dir: Path) -> dict[str, str]:
    """The environment of a benchmarked ``ohsync run``: config, state, keyring
    (the plaintext file keyring) and socket all under ``root`` / ``sock_dir``;
    no display, so no tray."""
    env = dict(os.environ)
    for k in ("DISPLAY", "WAYLAND_DISPLAY", "DBUS_SESSION_BUS_ADDRESS", "OHSYNC_SOCKET"):
        env.pop(k, None)
    env.update({"PYTHON_KEYRING_BACKEND": "ohsync.daemon.file_keyring.FileKeyring",
                "OHSYNC_KEYRING_FILE": str(root / "keyring.json"), "OHSYNC_CONFIG": str(root / "config.toml"),
                "XDG_CONFIG_HOME": str(root / "xdg-config"), "XDG_STATE_HOME": str(root / "xdg-state"),
                "XDG_DATA_HOME": str(root / "xdg-data"), "XDG_CACHE_HOME": str(root / "xdg-cache"),
                "XDG_RUNTIME_DIR": str(sock_dir), "PYTHONUNBUFFERED": "1"})
    return env


def stop_process(proc: subprocess.Popen[Any]) -> None:
    """SIGTERM a benchmarked daemon, SIGKILL it after 30 s; waits for it."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def peak_rss_mib() -> int:
    """Peak resident memory of this process so far (ru_maxrss, KiB on Linux), in MiB."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def count_files(root: Path) -> int:
    return sum(1 for p in root.rglob("*") if p.is_file()) if root.exists() else 0


def ratio(a: float | None, b: float | None) -> float | None:
    if a is None or b in (None, 0):
        return None
    return round(a / b, 3)

