#!/usr/bin/env python3
"""ohsync benchmarks (docs/architecture.md §9): ohsync vs rclone vs plain httpx, against devserver on 127.0.0.1.

    .venv/bin/python bench/run.py [--files 3000] [--only cold,idle,...] [--out bench/out/]

Scenarios (``--only`` takes a comma-separated subset):

  cold     cold mirror of N files: engine full pass into an empty folder vs ``rclone copy``
  idle     idle poll: engine pass with nothing changed vs ``rclone lsf -R`` / ``rclone copy``
  detect   one remote change in N files: engine pass vs ``rclone copy`` (and ``--fast-list``)
  push     local save -> verified remote for one edited file: engine pass with the path vs ``rclone copyto``
  bigfile  upload and download of one big file: engine vs a plain httpx stream vs ``rclone copyto``
  daemon   idle CPU and RSS of ``ohsync run --no-tray`` over 30 s (after its cold start)
  upload   cold upload of N new files, no latency and --latency ms: engine vs ``rclone copy`` (bench/speed.py)
  notify   the daemon with push notifications: remote change -> local, idle requests (bench/speed.py)

devserver runs as its own process (``python -m ohsync.devserver``) so that it does not
share a GIL with the engine; request counts come from its control API
(``/_devserver/counters``), which itself is not counted.  The engine runs in this
process.  rclone is the Debian package, configured only through a connection string
(``--config /dev/null``).  Nothing leaves 127.0.0.1.  Output: a table on stdout and
``OUT/results-<stamp>.json`` + ``OUT/latest.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

import httpx

REPO = Path(__file__).resolve().parents[1]
GENERATOR = REPO / "tests" / "data" / "samples" / "make_scale_library.py"
USER, PASSWORD = "user@example.edu.cn", "secret"
LIB = "OH-Memory"
BIG_LIB = "Bench-Big"
SCENARIOS = ["cold", "idle", "detect", "push", "upload", "bigfile", "daemon", "notify"]
#: Daemon states after a finished sync ("attention": synced, but the generated library's
#: damaged memory files are named).
SETTLED = ("idle", "attention")
MB = 1024 * 1024


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
    """``python -m ohsync.devserver`` on 127.0.0.1, steered through ``/_devserver/``."""

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


def measured(srv: DevServerProc, fn: Callable[[], Any], timeout: float, what: str) -> tuple[Measure, Any]:
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
    """The rclone binary with an on-the-fly seafile remote (no config file)."""

    def __init__(self, url: str) -> None:
        self.bin = shutil.which("rclone")
        self.version = ""
        self.url = url
        if self.bin:
            self.version = subprocess.run([self.bin, "version"], capture_output=True, text=True,
                                          timeout=30).stdout.splitlines()[0]
            self.obscured = subprocess.run([self.bin, "obscure", PASSWORD], capture_output=True, text=True,
                                           timeout=30).stdout.strip()

    def remote(self, library: str, path: str = "") -> str:
        return (f":seafile,url='{self.url}',user='{USER}',pass='{self.obscured}',"
                f"library='{library}':{path}")

    def run(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        """Run rclone; on timeout terminate it (by pid) and return code 124."""
        cmd = [self.bin or "rclone", "--config", "/dev/null", "-q", *args]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            out, err = proc.communicate(timeout=timeout)
            return subprocess.CompletedProcess(cmd, proc.returncode, out, err)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)
            try:
                out, err = proc.communicate(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                out, err = proc.communicate()
            return subprocess.CompletedProcess(cmd, 124, out, err)


def rclone_measure(srv: DevServerProc, rc: Rclone, args: list[str], timeout: float, what: str) -> Measure:
    srv.reset()
    t0 = time.perf_counter()
    cp = rc.run(*args, timeout=timeout)
    m = Measure(seconds=time.perf_counter() - t0)
    c = srv.counters()
    m.requests, m.endpoints = c["total"], c["endpoints"]
    if cp.returncode == 124:
        m.error = f"timed out after {timeout:.0f} s"
        m.extra["timed_out"] = True
    elif cp.returncode != 0:
        m.error = f"rclone exit {cp.returncode}: {cp.stderr.strip()[-500:]}"
    return m


# ----------------------------------------------------------------------------- ohsync engine

class EngineMirror:
    """An engine mirror of one library in ``base/name`` (as tests/engine_helpers.py does)."""

    def __init__(self, srv: DevServerProc, repo_id: str, base: Path, name: str) -> None:
        from ohsync.engine.client import SeafileClient
        from ohsync.engine.context import EngineOptions
        from ohsync.engine.state import StateStore
        from ohsync.engine.sync import SyncEngine

        self.root = base / name
        self.root.mkdir(parents=True)
        st = base / f"{name}-state"
        self.state = StateStore(st / "state.db", st / "blobs")
        self.client = SeafileClient(srv.url, srv.token, retries=1)
        self.engine = SyncEngine(self.client, repo_id, self.root, self.state,
                                 options=EngineOptions(backup_dir=st / "backups", library_name=LIB))

    def sync(self, paths: list[str] | None = None):  # noqa: ANN201 - SyncReport
        return self.engine.sync(paths)


def report_extra(report: Any) -> dict[str, Any]:
    if report is None:
        return {}
    return {"uploaded": len(report.uploaded), "downloaded": len(report.downloaded),
            "errors": [list(e) for e in report.errors[:5]], "conflicts": len(report.conflicts),
            "report_requests": report.requests}


def engine_measure(srv: DevServerProc, mirror: EngineMirror, paths: list[str] | None, timeout: float,
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


class Bench:
    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        self.results: dict[str, Any] = {}
        self.rows: list[dict[str, Any]] = []
        self.tree = work / "gen" / LIB
        self.srv: DevServerProc | None = None
        self.mirror: EngineMirror | None = None
        self.rc_dir: Path | None = None  # an up-to-date rclone copy of the library

    # ---- setup
    def setup(self) -> None:
        log(f"generating {self.args.files} files with {GENERATOR.name} (seed {self.args.seed})")
        subprocess.run([sys.executable, str(GENERATOR), str(self.work / "gen"), "--files", str(self.args.files),
                        "--seed", str(self.args.seed)], check=True, stdout=subprocess.DEVNULL, timeout=600)
        log("starting devserver (importing the library)")
        t0 = time.perf_counter()
        self.srv = DevServerProc(self.work / "devserver-data", {LIB: self.tree})
        log(f"devserver at {self.srv.url} ({time.perf_counter() - t0:.1f} s)")
        self.repo = self.srv.repo_id(LIB)
        self.rc = Rclone(self.srv.url)
        if not self.rc.bin:
            log("rclone not found: rclone columns are skipped (apt-get install -y rclone)")

    def add_row(self, scenario: str, figure: str, oh: Measure | None, other: Measure | None,
                other_name: str = "rclone", note: str = "", oh_value: str | None = None,
                other_value: str | None = None, value_ratio: float | None = None) -> None:
        row = {"scenario": scenario, "figure": figure, "other_tool": other_name, "note": note,
               "ohsync": oh.as_dict() if oh else None, "other": other.as_dict() if other else None}
        if oh and other:
            row["time_ratio_ohsync_over_other"] = ratio(oh.seconds, other.seconds)
            row["request_ratio_ohsync_over_other"] = ratio(oh.requests, other.requests)
        if oh_value is not None:
            row["ohsync_value"] = oh_value
        if other_value is not None:
            row["other_value"] = other_value
        if value_ratio is not None:
            row["value_ratio_ohsync_over_other"] = value_ratio
        self.rows.append(row)

    def ensure_mirror(self) -> EngineMirror:
        if self.mirror is None:
            log("ohsync: cold pass to get a mirror (setup, not measured)")
            self.mirror = EngineMirror(self.srv, self.repo, self.work, "ohsync-mirror")
            bounded(lambda: self.mirror.sync(), self.args.timeout, "setup cold pass")
        return self.mirror

    def ensure_rc_dir(self) -> Path:
        """An rclone-side local copy that rclone considers up to date: the generator tree
        (devserver keeps the source mtimes on import, so sizes and mtimes match), plus
        whatever changed remotely since, fetched by one unmeasured ``rclone copy``."""
        if self.rc_dir is None:
            self.rc_dir = self.work / "rclone-copy"
            shutil.copytree(self.tree, self.rc_dir, copy_function=shutil.copy2)
            self.rc.run("copy", self.rc.remote(LIB), str(self.rc_dir), timeout=self.args.timeout)
        return self.rc_dir

    # ---- 1. cold mirror
    def s_cold(self) -> None:
        n = self.args.files
        log(f"cold: ohsync engine full pass, {n} files into an empty folder")
        self.mirror = EngineMirror(self.srv, self.repo, self.work, "ohsync-mirror")
        oh = engine_measure(self.srv, self.mirror, None, self.args.timeout, "ohsync cold pass")
        oh.extra["files_local"] = count_files(self.mirror.root)
        oh.extra["zip_requests"] = sum(v for k, v in oh.endpoints.items() if "zip" in k)
        log(f"  ohsync: {oh.seconds:.1f} s, {oh.requests} requests, {oh.extra['files_local']} files"
            f" (zip-task requests: {oh.extra['zip_requests']})")
        other = None
        if self.rc.bin:
            budget = self.args.rclone_cold_timeout
            log(f"cold: rclone copy (bounded to {budget:.0f} s; extrapolated if not done)")
            dest = self.work / "rclone-cold"
            other = rclone_measure(self.srv, self.rc, ["copy", self.rc.remote(LIB), str(dest)], budget, "rclone cold")
            done = count_files(dest)
            other.extra["files_local"] = done
            if other.extra.get("timed_out") and done:
                # rclone's seafile backend is paced (~10 calls/s), so time scales with requests:
                # fixed part (login, listings) + per-file part (link + file) scaled to n files.
                per_file = sum(v for k, v in other.endpoints.items()
                               if k.startswith("GET /api2/repos/{id}/file/") or k.startswith("GET /seafhttp/files/"))
                fixed = other.requests - per_file
                total = fixed + round(per_file * n / done)
                other.extra.update({"measured_seconds": round(other.seconds, 2), "measured_requests": other.requests,
                                    "extrapolated": True, "requests_per_second": round(other.requests / other.seconds, 2)})
                other.seconds = other.seconds * total / other.requests
                other.requests = total
                other.error = None
            log(f"  rclone: {other.seconds:.1f} s{' (extrapolated)' if other.extra.get('extrapolated') else ''}, "
                f"{other.requests} requests, {done} files done")
        note = "rclone extrapolated from a bounded run" if other and other.extra.get("extrapolated") else ""
        self.add_row("cold", f"cold mirror of {n} files", oh, other, note=note)

    # ---- 2. idle poll
    def s_idle(self) -> None:
        mirror = self.ensure_mirror()
        log("idle: ohsync engine pass with nothing changed (x5)")
        runs = [engine_measure(self.srv, mirror, None, 120, "ohsync idle pass") for _ in range(5)]
        oh = runs[len(runs) // 2]
        oh.seconds = statistics.median(r.seconds or 0 for r in runs)
        oh.extra["requests_each"] = [r.requests for r in runs]
        oh.extra["transferred"] = sum(r.extra.get("uploaded", 0) + r.extra.get("downloaded", 0) for r in runs)
        log(f"  ohsync: median {oh.seconds * 1000:.0f} ms, requests per poll {oh.extra['requests_each']}")
        # the remote half alone: what a timer-driven daemon poll costs when the watcher saw nothing
        oh_remote, _ = measured(self.srv, lambda: mirror.engine.sync([], check_remote=True), 60, "remote-only poll")
        log(f"  ohsync remote-only poll (sync([])): {oh_remote.seconds * 1000:.0f} ms, {oh_remote.requests} requests")
        lsf = copy = None
        if self.rc.bin:
            rc_dir = self.ensure_rc_dir()
            lsf = rclone_measure(self.srv, self.rc, ["lsf", "-R", self.rc.remote(LIB)], 120, "rclone lsf")
            log(f"  rclone lsf -R: {lsf.seconds:.2f} s, {lsf.requests} requests")
            copy = rclone_measure(self.srv, self.rc, ["copy", self.rc.remote(LIB), str(rc_dir)], 300, "rclone copy")
            log(f"  rclone copy (nothing to do): {copy.seconds:.2f} s, {copy.requests} requests")
        self.add_row("idle", "idle poll (full pass)", oh, lsf, other_name="rclone lsf -R",
                     note="rclone's count includes its login (3 requests per process)")
        self.add_row("idle", "idle poll vs rclone copy (no change)", oh, copy, other_name="rclone copy")
        self.add_row("idle", "idle poll, remote half only: sync([])", oh_remote, None, other_name="-")

    # ---- 3. detect + pull one remote change
    def _deep_file(self, skip: set[str]) -> str:
        files = sorted((p.relative_to(self.tree).as_posix() for p in self.tree.rglob("*.md")),
                       key=lambda s: (-s.count("/"), s))
        return next(f for f in files if f not in skip and not f.startswith(".trash"))

    def s_detect(self) -> None:
        mirror = self.ensure_mirror()
        rc_dir = self.ensure_rc_dir() if self.rc.bin else None
        used: set[str] = set()
        for variant, rargs in (("rclone copy", []), ("rclone copy --fast-list", ["--fast-list"])):
            rel = self._deep_file(used)
            used.add(rel)
            data = self.srv.read_file(self.repo, "/" + rel) + f"\n- [bench] remote edit {time.time()}\n".encode()
            self.srv.put_file(self.repo, "/" + rel, data)
            log(f"detect: one remote change ({rel}, depth {rel.count('/')})")
            oh = engine_measure(self.srv, mirror, None, 120, "ohsync detect")
            oh.extra["pulled_ok"] = (mirror.root / rel).read_bytes() == data
            log(f"  ohsync: {oh.seconds * 1000:.0f} ms, {oh.requests} requests, pulled={oh.extra['pulled_ok']}")
            other = None
            if rc_dir:
                other = rclone_measure(self.srv, self.rc, ["copy", *rargs, self.rc.remote(LIB), str(rc_dir)], 300,
                                       variant)
                other.extra["pulled_ok"] = (rc_dir / rel).read_bytes() == data
                log(f"  {variant}: {other.seconds:.2f} s, {other.requests} requests, pulled={other.extra['pulled_ok']}")
            self.add_row("detect", f"detect+pull 1 change in {self.args.files}", oh, other, other_name=variant)

    # ---- 4. local save -> verified remote
    def s_push(self) -> None:
        mirror = self.ensure_mirror()
        rel = "journal/" + sorted(p.name for p in (mirror.root / "journal").glob("*.md"))[-1]
        data = (mirror.root / rel).read_bytes() + f"- [bench] 本地保存 {time.time()}\n".encode()
        (mirror.root / rel).write_bytes(data)
        log(f"push: ohsync engine pass with the path ({rel})")
        oh = engine_measure(self.srv, mirror, [rel], 120, "ohsync push")
        oh.extra["remote_ok"] = self.srv.read_file(self.repo, "/" + rel) == data
        log(f"  ohsync: {oh.seconds * 1000:.0f} ms, {oh.requests} requests, on server={oh.extra['remote_ok']}")
        other = None
        if self.rc.bin:
            rc_dir = self.ensure_rc_dir()
            rrel = "index.md"
            rdata = (rc_dir / rrel).read_bytes() + f"- [bench] rclone save {time.time()}\n".encode()
            (rc_dir / rrel).write_bytes(rdata)
            other = rclone_measure(self.srv, self.rc, ["copyto", str(rc_dir / rrel), self.rc.remote(LIB, rrel)], 120,
                                   "rclone copyto")
            other.extra["remote_ok"] = self.srv.read_file(self.repo, "/" + rrel) == rdata
            log(f"  rclone copyto: {other.seconds:.2f} s, {other.requests} requests, on server={other.extra['remote_ok']}")
        self.add_row("push", "local save -> verified remote (1 file)", oh, other, other_name="rclone copyto",
                     note="ohsync reads back and compares sha1; rclone checks size only (no seafile hash)")

    # ---- 5. big file
    def s_bigfile(self) -> None:
        size = self.args.big_mb * MB
        src = self.work / "big-src.bin"
        with open(src, "wb") as fh:
            for _ in range(self.args.big_mb):
                fh.write(os.urandom(MB))
        repo = self.srv.repo_id(BIG_LIB)
        base = self.work / "big"
        base.mkdir()
        mirror = EngineMirror(self.srv, repo, base, "ohsync")
        mirror.sync()  # empty library: establishes the base head (not measured)
        mbps = lambda m: None if not m or not m.seconds or m.error else round(size / MB / m.seconds, 1)  # noqa: E731
        t = self.args.timeout

        log(f"bigfile: {self.args.big_mb} MiB upload/download")
        shutil.copyfile(src, mirror.root / "ohsync-up.bin")
        rss0 = peak_rss_mib()
        oh_up = engine_measure(self.srv, mirror, ["ohsync-up.bin"], t, "ohsync big upload")
        oh_up.extra["bench_peak_rss_growth_mib"] = peak_rss_mib() - rss0
        self.srv.put_file_from(repo, "/server-down.bin", src)
        rss0 = peak_rss_mib()
        oh_down = engine_measure(self.srv, mirror, None, t, "ohsync big download")
        oh_down.extra["bench_peak_rss_growth_mib"] = peak_rss_mib() - rss0
        oh_down.extra["ok"] = (mirror.root / "server-down.bin").exists() and \
            (mirror.root / "server-down.bin").stat().st_size == size

        def httpx_up() -> None:
            with httpx.Client(timeout=600) as c:
                hdr = {"Authorization": f"Token {self.srv.token}"}
                link = c.get(f"{self.srv.url}/api2/repos/{repo}/upload-link/", params={"p": "/"}, headers=hdr).json()
                with open(src, "rb") as fh:
                    r = c.post(link, params={"ret-json": "1"}, data={"parent_dir": "/", "replace": "1"},
                               files={"file": ("httpx-up.bin", fh, "application/octet-stream")})
                r.raise_for_status()

        def httpx_down() -> None:
            with httpx.Client(timeout=600) as c:
                hdr = {"Authorization": f"Token {self.srv.token}"}
                link = c.get(f"{self.srv.url}/api2/repos/{repo}/file/", params={"p": "/server-down.bin"},
                             headers=hdr).json()
                with c.stream("GET", link) as r, open(self.work / "httpx-down.bin", "wb") as out:
                    r.raise_for_status()
                    for chunk in r.iter_bytes(MB):
                        out.write(chunk)

        hx_up, _ = measured(self.srv, httpx_up, t, "httpx upload")
        hx_down, _ = measured(self.srv, httpx_down, t, "httpx download")
        rc_up = rc_down = None
        if self.rc.bin:
            rc_up = rclone_measure(self.srv, self.rc, ["copyto", str(src), self.rc.remote(BIG_LIB, "rclone-up.bin")], t,
                                   "rclone big upload")
            rc_down = rclone_measure(self.srv, self.rc, ["copyto", self.rc.remote(BIG_LIB, "server-down.bin"),
                                                         str(self.work / "rclone-down.bin")], t, "rclone big download")
        for label, m in (("ohsync up", oh_up), ("ohsync down", oh_down), ("httpx up", hx_up),
                         ("httpx down", hx_down), ("rclone up", rc_up), ("rclone down", rc_down)):
            if m:
                m.extra["MiB_per_s"] = mbps(m)
                log(f"  {label}: {m.seconds or 0:.2f} s, {mbps(m)} MiB/s, {m.requests} requests"
                    + (f", peak RSS +{m.extra['bench_peak_rss_growth_mib']} MiB"
                       if "bench_peak_rss_growth_mib" in m.extra else "")
                    + (f" ERROR {m.error}" if m.error else ""))
        for direction, oh, hx, rc in (("upload", oh_up, hx_up, rc_up), ("download", oh_down, hx_down, rc_down)):
            self.add_row("bigfile", f"{self.args.big_mb} MiB {direction}", oh, hx, other_name="plain httpx",
                         oh_value=f"{mbps(oh)} MiB/s", other_value=f"{mbps(hx)} MiB/s",
                         value_ratio=ratio(mbps(oh), mbps(hx)))
            if rc:
                self.add_row("bigfile", f"{self.args.big_mb} MiB {direction}", oh, rc, other_name="rclone copyto",
                             oh_value=f"{mbps(oh)} MiB/s", other_value=f"{mbps(rc)} MiB/s",
                             value_ratio=ratio(mbps(oh), mbps(rc)))
        for p in (src, self.work / "httpx-down.bin", self.work / "rclone-down.bin"):
            p.unlink(missing_ok=True)
        shutil.rmtree(base, ignore_errors=True)

    # ---- 6. daemon idle CPU / RSS
    def s_daemon(self) -> None:
        r = subprocess.run([sys.executable, "-m", "ohsync.daemon.cli", "run", "--help"], capture_output=True,
                           text=True, timeout=60)
        if r.returncode != 0 or "--no-tray" not in r.stdout:
            reason = f"`ohsync run --no-tray` not available (exit {r.returncode})"
            log(f"daemon: skipped: {reason}")
            self.rows.append({"scenario": "daemon", "figure": "idle CPU / RSS", "skipped": reason})
            return
        import tomli_w

        root = self.work / "daemon"
        root.mkdir()
        sock_dir = Path(tempfile.mkdtemp(prefix="ohb-", dir="/tmp"))
        env = daemon_env(root, sock_dir)
        poll = self.args.daemon_poll
        (root / "config.toml").write_text(tomli_w.dumps({
            "server": self.srv.url, "username": USER, "poll_interval": poll, "state_dir": str(root / "state"),
            "mirror": [{"library": LIB, "local": str(root / "mirror")}]}), encoding="utf-8")
        subprocess.run([sys.executable, "-c", "import sys; from ohsync.daemon import credentials; "
                        "credentials.save_token(sys.argv[1], sys.argv[2], sys.argv[3])",
                        self.srv.url, USER, self.srv.token], env=env, check=True, timeout=60)
        from ohsync.daemon.protocol import Method, RpcClient

        rpc = RpcClient(sock_dir / "ohsync" / "ohsync.sock", timeout=30)
        out = open(root / "daemon-output.log", "wb")
        self.srv.reset()
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "ohsync.daemon.cli", "run", "--no-tray"], env=env,
                                stdout=out, stderr=subprocess.STDOUT, cwd=root)
        clk = os.sysconf("SC_CLK_TCK")

        def cpu_s() -> float:
            f = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return (int(f[11]) + int(f[12])) / clk  # utime, stime

        def status_field(name: str) -> int:
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                if line.startswith(name + ":"):
                    return int(line.split()[1]) // 1024  # kB -> MiB
            return 0

        def state() -> str | None:
            try:
                return rpc.call(Method.STATUS).get("state")
            except Exception:  # noqa: BLE001 - not up yet
                return None

        try:
            deadline = time.monotonic() + self.args.timeout
            st = None
            while time.monotonic() < deadline and proc.poll() is None:
                st = state()
                if st in SETTLED:
                    break
                time.sleep(0.2)
            if st not in SETTLED:
                reason = f"daemon never reached idle (last state {st!r}, exit {proc.poll()})"
                log(f"daemon: {reason}; see {root / 'daemon-output.log'}")
                self.rows.append({"scenario": "daemon", "figure": "idle CPU / RSS", "skipped": reason})
                return
            cold_s = time.perf_counter() - t0
            cold_counters = self.srv.counters()
            cold_req = cold_counters["total"]
            cold_cpu = cpu_s()
            log(f"daemon: idle after {cold_s:.1f} s ({cold_req} requests, {cold_cpu:.1f} CPU s); "
                f"measuring {self.args.daemon_seconds:.0f} s idle, poll_interval {poll:g} s")
            time.sleep(1.0)
            self.srv.reset()
            c0, w0 = cpu_s(), time.perf_counter()
            rss: list[int] = []
            while time.perf_counter() - w0 < self.args.daemon_seconds:
                rss.append(status_field("VmRSS"))
                time.sleep(1.0)
            c1, w1 = cpu_s(), time.perf_counter()
            counters = self.srv.counters()
            hwm = status_field("VmHWM")
            polls = (w1 - w0) / poll
            m = Measure(seconds=w1 - w0, requests=counters["total"], endpoints=counters["endpoints"])
            m.extra.update({"cpu_seconds": round(c1 - c0, 3), "cpu_percent": round(100 * (c1 - c0) / (w1 - w0), 2),
                            "rss_mib_median": statistics.median(rss), "rss_mib_max": max(rss),
                            "peak_rss_mib_incl_cold_start": hwm, "poll_interval": poll,
                            "requests_per_poll": round(counters["total"] / polls, 2),
                            "cold_start_seconds": round(cold_s, 2), "cold_start_requests": cold_req,
                            "cold_start_cpu_seconds": round(cold_cpu, 2),
                            "cold_start_endpoints": cold_counters["endpoints"]})
            log(f"  CPU {m.extra['cpu_percent']} %, RSS {m.extra['rss_mib_median']} MiB (peak {hwm} MiB), "
                f"{m.requests} requests in {m.seconds:.0f} s = {m.extra['requests_per_poll']} per poll")
            cold = Measure(seconds=cold_s, requests=cold_req, endpoints=cold_counters["endpoints"],
                           extra={"cpu_seconds": round(cold_cpu, 2)})
            self.add_row("daemon", f"daemon start to idle, {self.args.files} files", cold, None, other_name="-",
                         oh_value=f"{cold_cpu:.1f} CPU s")
            self.add_row("daemon", f"idle {self.args.daemon_seconds:.0f} s, {self.args.files} files", m, None,
                         other_name="-", oh_value=f"{m.extra['cpu_percent']} % CPU, {m.extra['rss_mib_median']} MiB RSS")
        finally:
            stop_process(proc)
            out.close()
            shutil.rmtree(sock_dir, ignore_errors=True)

    # ---- 7. and 8. (bench/speed.py)
    def s_upload(self) -> None:
        import speed

        speed.s_upload(self)

    def s_notify(self) -> None:
        import speed

        speed.s_notify(self)

    # ---- output
    def table(self) -> str:
        def fs(x: float | None) -> str:
            return "-" if x is None else (f"{x:.3f}" if x < 10 else f"{x:.1f}")

        def fr(x: float | None) -> str:
            return "-" if x is None else f"{x:.2f}"

        head = ["scenario", "figure", "ohsync s", "ohsync req", "vs", "other s", "other req", "t ratio",
                "req ratio", "value (ohsync / other)"]
        lines = [head]
        for r in self.rows:
            if r.get("skipped"):
                lines.append([r["scenario"], r["figure"], "skipped: " + r["skipped"], "", "", "", "", "", "", ""])
                continue
            oh, ot = r.get("ohsync") or {}, r.get("other") or {}
            val = ""
            if r.get("ohsync_value"):
                val = r["ohsync_value"] + (f" / {r['other_value']}" if r.get("other_value") else "")
                if r.get("value_ratio_ohsync_over_other") is not None:
                    val += f" (x{r['value_ratio_ohsync_over_other']:.2f})"
            if oh.get("error") or ot.get("error"):
                val += f" ERR: {oh.get('error') or ot.get('error')}"[:80]
            lines.append([r["scenario"], r["figure"], fs(oh.get("seconds")), str(oh.get("requests", "-")),
                          r["other_tool"] if r.get("other") else "-", fs(ot.get("seconds")),
                          str(ot.get("requests", "-")) if ot else "-",
                          fr(r.get("time_ratio_ohsync_over_other")), fr(r.get("request_ratio_ohsync_over_other")),
                          val])
        widths = [max(len(str(row[i])) for row in lines) for i in range(len(head))]
        out = ["| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths)) + " |" for row in lines]
        out.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
        return "\n".join(out)

    def write(self, out_dir: Path) -> Path:
        out_dir.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        doc = {"date": datetime.now().astimezone().isoformat(timespec="seconds"),
               "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                           "python": platform.python_version()},
               "rclone": self.rc.version if self.srv else None, "files": self.args.files, "seed": self.args.seed,
               "big_mb": self.args.big_mb,
               "ratios": "ohsync / other: below 1 means ohsync took less time / fewer requests",
               "rows": self.rows}
        path = out_dir / f"results-{stamp}.json"
        path.write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")
        (out_dir / "latest.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False), encoding="utf-8")
        (out_dir / "latest.md").write_text(self.table() + "\n", encoding="utf-8")
        return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=3000, help="library size (default 3000)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only", default="", help=f"comma-separated subset of {','.join(SCENARIOS)}")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    ap.add_argument("--big-mb", type=int, default=200, help="big-file size in MiB (default 200)")
    ap.add_argument("--rclone-cold-timeout", type=float, default=90.0,
                    help="bound on rclone's cold copy; past it the time is extrapolated (default 90 s)")
    ap.add_argument("--daemon-seconds", type=float, default=30.0)
    ap.add_argument("--daemon-poll", type=float, default=5.0, help="poll_interval of the measured daemon")
    ap.add_argument("--timeout", type=float, default=300.0, help="bound on any one ohsync step (default 300 s)")
    ap.add_argument("--keep", action="store_true", help="keep the temp work dir")
    ap.add_argument("--latency", type=float, default=50.0,
                    help="ms added to every request in the second round of `upload` (default 50)")
    ap.add_argument("--runs", type=int, default=3, help="ohsync runs per `upload` figure (median; default 3)")
    ap.add_argument("--rclone-upload-timeout", type=float, default=45.0,
                    help="bound on each rclone upload; past it the figure is extrapolated (default 45 s)")
    ap.add_argument("--notify-changes", type=int, default=10, help="remote changes timed in `notify` (default 10)")
    ap.add_argument("--results", type=Path, default=REPO / "bench" / "RESULTS.md",
                    help="the markdown table of the run (default bench/RESULTS.md)")
    args = ap.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()] or SCENARIOS
    bad = [s for s in only if s not in SCENARIOS]
    if bad:
        ap.error(f"unknown scenario(s) {bad}; choose from {SCENARIOS}")

    work = Path(tempfile.mkdtemp(prefix="ohsync-bench-"))
    bench = Bench(args, work)
    t0 = time.perf_counter()
    try:
        bench.setup()
        for name in only:
            try:
                getattr(bench, f"s_{name}")()
            except Exception as exc:  # noqa: BLE001 - one scenario failing must not hide the others
                log(f"{name}: FAILED: {type(exc).__name__}: {exc}")
                bench.rows.append({"scenario": name, "figure": "-", "skipped": f"failed: {type(exc).__name__}: {exc}"})
    finally:
        if bench.srv:
            bench.srv.stop()
        if args.keep:
            log(f"work dir kept: {work}")
        else:
            log(f"removing {work}")
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(bench.table())
    path = bench.write(args.out)
    import speed

    speed.write_results_md(bench, args.results, time.perf_counter() - t0)
    print(f"\n{len(bench.rows)} rows, {time.perf_counter() - t0:.0f} s total; JSON: {path}; table: {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
