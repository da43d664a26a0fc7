#!/usr/bin/env python3
"""Load benchmark: a large library through the real daemon (issue scenarios 1 and 7).

    .venv/bin/python bench/load.py [--files 30000] [--idle-seconds 300] [--poll 30]

Generates the library with ``tests/data/samples/make_scale_library.py`` into a
temp dir (never committed), seeds a devserver process on 127.0.0.1 with it,
and runs ``ohsync run --no-tray`` in an isolated environment (own config,
state, socket, file keyring; the same wiring as ``bench/run.py``'s
``daemon`` scenario).  Measured:

* cold mirror: wall time and devserver requests from the daemon's start
  until its state is settled (``idle``, or ``attention`` for the generated
  library's named files);
* idle: daemon CPU seconds (utime + stime from ``/proc/<pid>/stat``) and RSS
  (median and max of 1 s samples of ``VmRSS``) over ``--idle-seconds``, and
  the requests made meanwhile;
* a full local rescan (``refresh``: stat-only walk plus the head check): wall
  time until the status shows the new scan and the state is settled again;
* ``status`` socket latency, sampled every ``--sample-ms`` throughout (cold,
  idle and rescan): p50, p95 and max per phase (target: max < 100 ms).

Prints a table and writes ``bench/LOAD.md`` (``--results`` to change) and
``bench/out/load-latest.json``.  Targets (issue 16): < 0.5 % CPU and < 80 MB
RSS idle at 30,000 files.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import daemon_env
from ohsync.daemon.protocol import Method
from run import GENERATOR, LIB, SETTLED, USER, DevServerProc, log

REPO = Path(__file__).resolve().parents[1]


class Daemon:
    """``ohsync run --no-tray`` in its own environment, watched through /proc and its socket."""

    def __init__(self, work: Path, srv: DevServerProc, poll: float) -> None:
        import tomli_w

        self.root = work / "daemon"
        self.root.mkdir()
        self.sock_dir = Path(tempfile.mkdtemp(prefix="ohl-", dir="/tmp"))
        r = self.root
        env = daemon_env(r, self.sock_dir)
        (r / "config.toml").write_text(tomli_w.dumps({
            "server": srv.url, "username": USER, "poll_interval": poll, "state_dir": str(r / "state"),
            "mirror": [{"library": LIB, "local": str(r / "mirror")}],
            "filing": {"drop_dir": str(r / "drop")}}), encoding="utf-8")  # not the person's ~/OH-Drop
        subprocess.run([sys.executable, "-c", "import sys; from ohsync.daemon import credentials; "
                        "credentials.save_token(sys.argv[1], sys.argv[2], sys.argv[3])",
                        srv.url, USER, srv.token], env=env, check=True, timeout=60)
        self.env = env
        self.clk = os.sysconf("SC_CLK_TCK")
        self.proc: subprocess.Popen[bytes] | None = None
        self._out = open(r / "daemon-output.log", "wb")  # noqa: SIM115 - for each start(), closed by stop()

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "ohsync.daemon.cli", "run", "--no-tray"], env=self.env,
                                     stdout=self._out, stderr=subprocess.STDOUT, cwd=self.root)

    @property
    def socket(self) -> Path:
        return self.sock_dir / "ohsync" / "ohsync.sock"

    def cpu_s(self) -> float:
        """The daemon's CPU seconds so far (user + system)."""
        return sum(self.cpu_split())

    def cpu_split(self) -> tuple[float, float]:
        """The daemon's ``(user, system)`` CPU seconds so far (``/proc/<pid>/stat``)."""
        assert self.proc is not None
        f = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(f[11]) / self.clk, int(f[12]) / self.clk  # utime, stime

    def status_mib(self, name: str) -> int:
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return int(line.split()[1]) // 1024  # kB -> MiB
        return 0

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._out.close()
        shutil.rmtree(self.sock_dir, ignore_errors=True)


class LatencyProbe:
    """Calls ``status`` on the socket every ``interval`` s from its own thread;
    keeps (phase, milliseconds) per answered call and counts failed ones."""

    def __init__(self, socket: Path, interval: float) -> None:
        from ohsync.daemon.protocol import RpcClient

        self.rpc = RpcClient(socket, timeout=30)
        self.interval = interval
        self.phase = "cold"
        self.samples: list[tuple[str, float]] = []
        self.failed: dict[str, int] = {}
        self.last: dict[str, Any] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="latency-probe", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            t0 = time.perf_counter()
            try:
                st = self.rpc.call(Method.STATUS)
            except Exception:  # noqa: BLE001 - not up yet, or an answer that took too long
                self.failed[self.phase] = self.failed.get(self.phase, 0) + 1
            else:
                self.samples.append((self.phase, (time.perf_counter() - t0) * 1000))
                self.last = st
            self._stop.wait(self.interval)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(40)

    def figures(self, phase: str | None = None) -> dict[str, Any]:
        ms = sorted(v for p, v in self.samples if phase is None or p == phase)
        if not ms:
            return {"samples": 0}
        return {"samples": len(ms), "p50_ms": round(statistics.median(ms), 1),
                "p95_ms": round(ms[min(len(ms) - 1, int(0.95 * len(ms)))], 1), "max_ms": round(ms[-1], 1),
                "failed": self.failed.get(phase, 0) if phase else sum(self.failed.values())}


def wait_settled(probe: LatencyProbe, daemon: Daemon, timeout: float, since_scan: str | None = None) -> str:
    """Wait until the state is settled (and, with ``since_scan``, ``last_scan`` moved past it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert daemon.proc is not None
        if daemon.proc.poll() is not None:
            raise RuntimeError(f"the daemon exited ({daemon.proc.returncode}); see {daemon.root}/daemon-output.log")
        st = probe.last
        if st.get("state") in SETTLED and st.get("last_scan") and \
                (since_scan is None or (st.get("last_scan") or "") > since_scan):
            return str(st.get("state"))
        time.sleep(0.05)
    raise TimeoutError(f"the daemon did not settle within {timeout:.0f} s (last status {probe.last.get('state')!r})")


def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    log(f"generating {args.files} files with {GENERATOR.name} (seed {args.seed}) into {work}")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, str(GENERATOR), str(work / "gen"), "--files", str(args.files),
                    "--seed", str(args.seed)], check=True, stdout=subprocess.DEVNULL, timeout=1800)
    log(f"  {time.perf_counter() - t0:.0f} s; starting devserver (importing the library)")
    srv = DevServerProc(work / "devserver-data", {LIB: work / "gen" / LIB})
    daemon = Daemon(work, srv, args.poll)
    probe = LatencyProbe(daemon.socket, args.sample_ms / 1000)
    out: dict[str, Any] = {"files": args.files, "poll_interval": args.poll, "idle_seconds": args.idle_seconds}
    try:
        srv.reset()
        t0 = time.perf_counter()
        daemon.start()
        probe.start()
        state = wait_settled(probe, daemon, args.timeout)
        cold_s = time.perf_counter() - t0
        c = srv.counters()
        out["cold"] = {"seconds": round(cold_s, 1), "requests": c["total"], "cpu_seconds": round(daemon.cpu_s(), 1),
                       "state": state, "peak_rss_mib": daemon.status_mib("VmHWM"), "endpoints": c["endpoints"]}
        log(f"cold mirror: {cold_s:.1f} s, {c['total']} requests, {out['cold']['cpu_seconds']} CPU s, "
            f"peak RSS {out['cold']['peak_rss_mib']} MiB (state {state})")

        probe.phase = "idle"
        time.sleep(2.0)  # the pass that settled has written its status
        srv.reset()
        log(f"idle: {args.idle_seconds:.0f} s, poll_interval {args.poll:g} s")
        c0, w0 = daemon.cpu_s(), time.perf_counter()
        rss: list[int] = []
        while time.perf_counter() - w0 < args.idle_seconds:
            rss.append(daemon.status_mib("VmRSS"))
            time.sleep(1.0)
        c1, w1 = daemon.cpu_s(), time.perf_counter()
        c = srv.counters()
        out["idle"] = {"seconds": round(w1 - w0, 1), "cpu_seconds": round(c1 - c0, 2),
                       "cpu_percent": round(100 * (c1 - c0) / (w1 - w0), 3),
                       "rss_mib_median": statistics.median(rss), "rss_mib_max": max(rss), "requests": c["total"],
                       "endpoints": c["endpoints"]}
        log(f"  CPU {out['idle']['cpu_seconds']} s = {out['idle']['cpu_percent']} %, RSS median "
            f"{out['idle']['rss_mib_median']} MiB (max {out['idle']['rss_mib_max']}), {c['total']} requests")

        probe.phase = "rescan"
        before = probe.last.get("last_scan") or ""
        time.sleep(1.1)  # last_scan has one-second resolution
        srv.reset()
        c0, t0 = daemon.cpu_s(), time.perf_counter()
        probe.rpc.call(Method.REFRESH)
        wait_settled(probe, daemon, args.timeout, since_scan=before)
        rescan_s = time.perf_counter() - t0
        c = srv.counters()
        out["rescan"] = {"seconds": round(rescan_s, 2), "cpu_seconds": round(daemon.cpu_s() - c0, 2),
                         "requests": c["total"], "rss_mib": daemon.status_mib("VmRSS")}
        log(f"full local rescan: {rescan_s:.2f} s, {out['rescan']['cpu_seconds']} CPU s, {c['total']} requests")
        probe.phase = "after"
        time.sleep(2.0)
    finally:
        probe.stop()
        daemon.stop()
        srv.stop()
    out["latency"] = {phase: probe.figures(phase) for phase in ("cold", "idle", "rescan")}
    out["latency"]["all"] = probe.figures()
    out["peak_rss_mib"] = max(out.get("cold", {}).get("peak_rss_mib", 0), out.get("rescan", {}).get("rss_mib", 0))
    return out


def table(r: dict[str, Any]) -> str:
    lat = r["latency"]
    rows = [
        ("cold mirror through the daemon",
         f"{r['cold']['seconds']} s, {r['cold']['requests']} requests, "
         f"{r['cold']['cpu_seconds']} CPU s, peak RSS {r['cold']['peak_rss_mib']} MiB",
         "-"),
        (f"idle {r['idle']['seconds']:.0f} s (poll {r['poll_interval']:g} s)",
         f"{r['idle']['cpu_percent']} % CPU ({r['idle']['cpu_seconds']} CPU s), RSS {r['idle']['rss_mib_median']} MiB "
         f"(max {r['idle']['rss_mib_max']}), {r['idle']['requests']} requests", "< 0.5 % CPU, < 80 MB"),
        ("full local rescan (`refresh`)", f"{r['rescan']['seconds']} s, {r['rescan']['cpu_seconds']} CPU s, "
                                          f"{r['rescan']['requests']} requests", "-"),
    ]
    for phase in ("cold", "idle", "rescan", "all"):
        f = lat[phase]
        if f.get("samples"):
            rows.append((f"`status` latency, {phase}",
                         f"p50 {f['p50_ms']} ms, p95 {f['p95_ms']} ms, max {f['max_ms']} ms "
                         f"({f['samples']} calls, {f['failed']} failed)", "< 100 ms"))
    lines = ["| figure | measured | target |", "|---|---|---|"]
    lines += [f"| {a} | {b} | {c} |" for a, b, c in rows]
    return "\n".join(lines)


def write_md(path: Path, r: dict[str, Any], args: argparse.Namespace) -> None:
    head = (f"# Load: {r['files']:,} files through the daemon\n\n"
            f"Written by `bench/load.py` on {datetime.now():%Y-%m-%d %H:%M}: {os.cpu_count()} cores, "
            f"{platform.system()} {platform.machine()}, Python {platform.python_version()}, "
            f"load average before the run {r['loadavg']}.\n"
            f"`--files {args.files} --seed {args.seed} --idle-seconds {args.idle_seconds:g} --poll {args.poll:g}`; "
            "devserver on 127.0.0.1 without added latency.\n\n")
    path.write_text(head + table(r) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=30000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--idle-seconds", type=float, default=300.0)
    ap.add_argument("--poll", type=float, default=30.0, help="the daemon's poll_interval (s)")
    ap.add_argument("--sample-ms", type=float, default=250.0, help="status latency sampling interval")
    ap.add_argument("--timeout", type=float, default=1800.0, help="bound on the cold mirror and the rescan (s)")
    ap.add_argument("--results", type=Path, default=REPO / "bench" / "LOAD.md")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    ap.add_argument("--keep", action="store_true", help="keep the temp work dir")
    args = ap.parse_args(argv)
    loadavg = " ".join(f"{x:.1f}" for x in os.getloadavg())
    work = Path(tempfile.mkdtemp(prefix="ohsync-load-"))
    try:
        r = run(args, work)
        r["loadavg"] = loadavg
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "load-latest.json").write_text(json.dumps(r, indent=2), encoding="utf-8")
        write_md(args.results, r, args)
        print(table(r), flush=True)
        log(f"wrote {args.results}")
    finally:
        if args.keep:
            log(f"work dir kept: {work}")
        else:
            log("removing the work dir (slow on some disks; not part of any figure)")
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
