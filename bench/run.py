#!/usr/bin/env python3
"""ohsync benchmarks (docs/architecture.md §9): ohsync vs rclone vs plain httpx, against devserver on 127.0.0.1.

    .venv/bin/python bench/run.py [--files 3000] [--only cold,idle,...] [--out bench/out/]
    .venv/bin/python bench/run.py --server https://seafile.example.org --username me@example.org \
        --password-stdin < pw.txt       # a server of one's own (or --token-stdin)

With ``--server`` the scenarios that need no fault injection and no devserver
of their own (:data:`REAL_SCENARIOS`) run against that server in scratch
libraries the bench creates and deletes at the end (also after a failure,
Ctrl-C or SIGTERM), requests counted by the tools themselves
(``bench/real_server.py``); the table goes to ``OUT/RESULTS-<host>-<stamp>.md``
(or ``--results``), never to ``bench/RESULTS.md``, which holds devserver's.

Scenarios (``--only`` takes a comma-separated subset; the module that runs each in brackets):

  cold     cold mirror of N files: engine full pass into an empty folder vs ``rclone copy`` [scenarios_engine]
  idle     idle poll: engine pass with nothing changed vs ``rclone lsf -R`` / ``rclone copy`` [scenarios_engine]
  detect   one remote change in N files: engine pass vs ``rclone copy`` (and ``--fast-list``) [scenarios_engine]
  push     local save -> verified remote for one edited file: engine pass with the path vs ``rclone copyto``
           [scenarios_engine]
  upload   cold upload of N new files, no latency and --latency ms: engine vs ``rclone copy`` [speed]
  bigfile  one big file up and down, a cold mirror of 10 large files: engine vs plain httpx streams vs rclone,
           no latency and --latency ms [scenarios_big]
  daemon   ``ohsync run --no-tray``: start to idle, then idle CPU and RSS [scenarios_daemon]
  save     local save -> verified on the server through the daemon, p50/p95 of --saves [scenarios_daemon]
  burst    --burst local edits at once -> all verified, through the daemon [scenarios_daemon]
  notify   the daemon with push notifications: remote change -> local [speed]
  quiet    a polling and a push daemon idle for --idle-seconds (300), each on its own devserver: CPU, RSS,
           requests per poll and per hour; beside the other scenarios by default [scenarios_idle]
  scale    a --scale-files library (30,000) through the daemon: cold mirror, idle, rescan [scale]

devserver runs as its own process (``python -m ohsync.devserver``) so that it does not
share a GIL with the engine; request counts come from its control API
(``/_devserver/counters``), which itself is not counted.  The engine runs in this
process.  rclone is the Debian package, configured only through a connection string
(``--config /dev/null``).  Nothing leaves 127.0.0.1.  Output: a table on stdout,
``bench/RESULTS.md``, and ``OUT/results-<stamp>.json`` + ``OUT/latest.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
# re-exported: bench/load.py, bench/hostile.py and others import these from here
from common import (  # noqa: F401
    BIG_LIB,
    GENERATOR,
    LIB,
    MB,
    PASSWORD,
    REPO,
    SETTLED,
    USER,
    DevServerProc,
    EngineMirror,
    Measure,
    Rclone,
    bounded,
    count_files,
    daemon_env,
    engine_measure,
    log,
    measured,
    peak_rss_mib,
    ratio,
    rclone_measure,
    report_extra,
    stop_process,
)

SCENARIOS = ["cold", "idle", "detect", "push", "upload", "bigfile", "daemon", "save", "burst", "notify", "quiet",
             "scale"]
#: What runs without ``--only`` (``make bench``): everything; ``make bench-scale`` reruns ``scale`` alone.
DEFAULT_SCENARIOS = list(SCENARIOS)
#: What runs against a server of one's own (``--server``): not ``notify`` (it switches devserver's
#: notification service), ``quiet`` and ``scale`` (each brings devservers of its own); the
#: ``--latency`` rounds of ``cold``, ``upload`` and ``bigfile`` need devserver's fault injection.
REAL_SCENARIOS = ["cold", "idle", "detect", "push", "upload", "bigfile", "daemon", "save", "burst"]


def scenario_table() -> dict[str, Callable[[Any], None]]:
    """Scenario name -> the function that runs it on a :class:`Bench`."""
    import scale
    import scenarios_big
    import scenarios_daemon
    import scenarios_engine
    import scenarios_idle
    import speed

    return {"cold": scenarios_engine.s_cold, "idle": scenarios_engine.s_idle, "detect": scenarios_engine.s_detect,
            "push": scenarios_engine.s_push, "upload": speed.s_upload, "bigfile": scenarios_big.s_bigfile,
            "daemon": scenarios_daemon.s_daemon, "save": scenarios_daemon.s_save, "burst": scenarios_daemon.s_burst,
            "notify": speed.s_notify, "quiet": scenarios_idle.s_quiet, "scale": scale.s_scale}


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
        self.daemon: Any = None  # the daemon shared by the daemon scenarios (scenarios_daemon.py)
        self.daemon_cold: Measure | None = None
        self.seconds: dict[str, float] = {}  # wall time of each scenario

    # ---- setup
    def generate(self) -> None:
        log(f"generating {self.args.files} files with {GENERATOR.name} (seed {self.args.seed})")
        subprocess.run([sys.executable, str(GENERATOR), str(self.work / "gen"), "--files", str(self.args.files),
                        "--seed", str(self.args.seed)], check=True, stdout=subprocess.DEVNULL, timeout=600)

    def setup(self) -> None:
        self.generate()
        log("starting devserver (importing the library)")
        t0 = time.perf_counter()
        self.srv = DevServerProc(self.work / "devserver-data", {LIB: self.tree})
        log(f"devserver at {self.srv.url} ({time.perf_counter() - t0:.1f} s)")
        self.repo = self.srv.repo_id(LIB)
        self.rc = Rclone(self.srv)
        if not self.rc.bin:
            log("rclone not found: rclone columns are skipped (apt-get install -y rclone)")

    def setup_real(self, secret: str) -> None:
        """A server of one's own: log in, make the scratch library and fill it with the
        generated files (one engine upload, not measured; it keeps the files' mtimes, so
        rclone's copy of the tree is up to date for rclone too)."""
        from real_server import RealServer

        self.generate()
        kw = {"token": secret} if self.args.token_stdin else {"password": secret}
        self.srv = RealServer(self.args.server, self.args.username, **kw)
        log(f"server {self.srv.url}: Seafile {self.srv.version}; scratch libraries {self.srv.prefix}-*")
        self.repo = self.srv.repo_id(LIB)
        t0 = time.perf_counter()
        seed = EngineMirror(self.srv, self.repo, self.work, "seed")
        try:
            seed.sync()  # the empty library's head
            shutil.copytree(self.tree, seed.root, dirs_exist_ok=True, copy_function=shutil.copy2)
            report = seed.sync()
        finally:
            seed.close()
            shutil.rmtree(seed.root, ignore_errors=True)
        if report.errors:
            raise RuntimeError(f"filling the scratch library failed for {len(report.errors)} files, "
                               f"first {report.errors[0]}")
        log(f"scratch library filled: {len(report.uploaded)} files ({time.perf_counter() - t0:.1f} s, not measured)")
        self.rc = Rclone(self.srv)
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

    # ---- output
    def table(self, rows: list[dict[str, Any]] | None = None) -> str:
        """The rows (default: all of this run) as a markdown table."""
        def fs(x: float | None) -> str:
            return "-" if x is None else (f"{x:.3f}" if x < 10 else f"{x:.1f}")

        def fr(x: float | None) -> str:
            return "-" if x is None else f"{x:.2f}"

        head = ["scenario", "figure", "ohsync s", "ohsync req", "vs", "other s", "other req", "t ratio",
                "req ratio", "value (ohsync / other)"]
        lines = [head]
        for r in self.rows if rows is None else rows:
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
        out = ["| " + " | ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) + " |" for row in lines]
        out.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
        return "\n".join(out)

    def write(self, out_dir: Path) -> Path:
        out_dir.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        doc = {"date": datetime.now().astimezone().isoformat(timespec="seconds"),
               "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                           "python": platform.python_version()},
               "rclone": self.rc.version if getattr(self, "rc", None) else None, "files": self.args.files,
               "seed": self.args.seed,
               "big_mb": self.args.big_mb, "scale_files": self.args.scale_files,
               "load_average_at_start": getattr(self, "loadavg", None),
               "server": getattr(self.srv, "url", None) if self.args.server else "devserver",
               "server_version": getattr(self, "server_version", None),
               "scenario_seconds": self.seconds,
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
    ap.add_argument("--only", default="", help=f"comma-separated subset of {','.join(SCENARIOS)} "
                                               "(default: all)")
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    ap.add_argument("--big-mb", type=int, default=200, help="big-file size in MiB (default 200)")
    ap.add_argument("--cold-big-files", type=int, default=10,
                    help="files of the large cold mirror in `bigfile` (default 10; 0: none)")
    ap.add_argument("--cold-big-mb", type=int, default=50, help="MiB of each of them (default 50)")
    ap.add_argument("--rclone-cold-timeout", type=float, default=20.0,
                    help="bound on rclone's cold copy; past it the time is extrapolated (default 20 s)")
    ap.add_argument("--idle-seconds", type=float, default=300.0,
                    help="idle window of `quiet` (default 300 s)")
    ap.add_argument("--idle-poll", type=float, default=30.0,
                    help="poll_interval of the polling daemon of `quiet` (default 30 s, the configuration's)")
    ap.add_argument("--idle-safety-poll", type=float, default=300.0,
                    help="push_safety_poll of the push daemon of `quiet` (default 300 s, the configuration's)")
    ap.add_argument("--idle-window", choices=("background", "alone"), default="background",
                    help="`quiet`'s window beside the scenarios that follow its start (default) or alone")
    ap.add_argument("--daemon-poll", type=float, default=5.0, help="poll_interval of the measured daemon")
    ap.add_argument("--timeout", type=float, default=300.0, help="bound on any one ohsync step (default 300 s)")
    ap.add_argument("--keep", action="store_true", help="keep the temp work dir")
    ap.add_argument("--latency", type=float, default=50.0,
                    help="ms added to every request in the second round of `upload` and `bigfile` (default 50)")
    ap.add_argument("--runs", type=int, default=3, help="ohsync runs per `upload` figure (median; default 3)")
    ap.add_argument("--rclone-upload-timeout", type=float, default=10.0,
                    help="bound on each rclone upload; past it the figure is extrapolated (default 10 s)")
    ap.add_argument("--notify-changes", type=int, default=20, help="remote changes timed in `notify` (default 20)")
    ap.add_argument("--saves", type=int, default=100, help="local saves timed in `save` (default 100)")
    ap.add_argument("--saves-again", type=int, default=20,
                    help="saves of one file in a row in `save`, most before the next poll (default 20; 0: none)")
    ap.add_argument("--save-rclone-runs", type=int, default=10,
                    help="rclone copyto runs in `save` (p50/p95; default 10, 0: none)")
    ap.add_argument("--burst", type=int, default=1000, help="local edits at once in `burst` (default 1000)")
    ap.add_argument("--rclone-burst-timeout", type=float, default=10.0,
                    help="bound on rclone's `burst` copy; past it the figure is extrapolated (default 10 s)")
    ap.add_argument("--scale-files", type=int, default=30000, help="library size of `scale` (default 30000)")
    ap.add_argument("--scale-idle-seconds", type=float, default=60.0, help="idle stretch of `scale` (default 60 s)")
    ap.add_argument("--scale-poll", type=float, default=30.0, help="poll_interval of the `scale` daemon (default 30)")
    ap.add_argument("--note", default="", help="a sentence added to RESULTS.md's header line")
    ap.add_argument("--results", type=Path, default=None,
                    help="the markdown table of the run (default bench/RESULTS.md; with --server "
                         "OUT/RESULTS-<host>-<stamp>.md)")
    ap.add_argument("--server", default="", help="a Seafile server of one's own (URL) instead of devserver")
    ap.add_argument("--username", default="", help="with --server: the account (e-mail)")
    secret = ap.add_mutually_exclusive_group()
    secret.add_argument("--password-stdin", action="store_true", help="with --server: read the password from stdin")
    secret.add_argument("--token-stdin", action="store_true", help="with --server: read an API token from stdin")
    args = ap.parse_args(argv)
    default_only = REAL_SCENARIOS if args.server else DEFAULT_SCENARIOS
    only = [s.strip() for s in args.only.split(",") if s.strip()] or default_only
    bad = [s for s in only if s not in SCENARIOS]
    if bad:
        ap.error(f"unknown scenario(s) {bad}; choose from {SCENARIOS}")
    secret_text = ""
    if args.server:
        not_real = [s for s in only if s not in REAL_SCENARIOS]
        if not_real:
            ap.error(f"--server runs only {','.join(REAL_SCENARIOS)}; {','.join(not_real)} need devserver")
        if not args.username or not (args.password_stdin or args.token_stdin):
            ap.error("--server needs --username and --password-stdin or --token-stdin")
        secret_text = sys.stdin.readline().strip()
        if not secret_text:
            ap.error("--password-stdin / --token-stdin: nothing on stdin")
        args.latency = 0.0  # added latency is devserver's fault injection
        if args.results is None:
            from urllib.parse import urlsplit

            host = urlsplit(args.server).netloc.replace(":", "-") or "server"
            args.results = args.out / f"RESULTS-{host}-{datetime.now().strftime('%Y%m%d-%H%M%S')}.md"
        elif args.results.resolve() == (REPO / "bench" / "RESULTS.md").resolve():
            ap.error("bench/RESULTS.md holds devserver's figures; give --server runs another --results")
    elif args.results is None:
        args.results = REPO / "bench" / "RESULTS.md"

    from scenarios_daemon import DAEMON_SCENARIOS, stop_daemon
    from scenarios_idle import start_quiet, stop_quiet

    only = [s for s in SCENARIOS if s in only]  # the daemon scenarios share a daemon: keep them together
    funcs = scenario_table()
    work = Path(tempfile.mkdtemp(prefix="ohsync-bench-"))
    bench = Bench(args, work)
    bench.loadavg = " ".join(f"{x:.1f}" for x in os.getloadavg())
    t0 = time.perf_counter()
    signal.signal(signal.SIGTERM, _interrupt)  # a stopped run still deletes its scratch libraries
    try:
        if args.server:
            bench.setup_real(secret_text)
        elif only == ["scale"]:
            bench.rc = Rclone(None)  # scale brings its own library and devserver
        else:
            bench.setup()
        bench.server_version = getattr(bench.srv, "version", None)
        if "quiet" in only and args.idle_window == "background":
            t1 = time.perf_counter()
            start_quiet(bench)  # its idle window runs beside the scenarios that follow
            bench.seconds["quiet start"] = round(time.perf_counter() - t1, 1)
        for name in only:
            if name not in DAEMON_SCENARIOS:
                stop_daemon(bench)
            if name == "scale" and bench.srv:
                bench.srv.stop()  # the last scenario brings its own devserver: free the machine
                bench.srv = None
            log(f"== {name}")
            t1 = time.perf_counter()
            try:
                funcs[name](bench)
            except Exception as exc:  # noqa: BLE001 - one scenario failing must not hide the others
                log(f"{name}: FAILED: {type(exc).__name__}: {exc}")
                bench.rows.append({"scenario": name, "figure": "-", "skipped": f"failed: {type(exc).__name__}: {exc}"})
            bench.seconds[name] = round(time.perf_counter() - t1, 1)
            log(f"== {name}: {bench.seconds[name]:.0f} s")
    finally:
        # a second Ctrl-C must not cut the cleanup short (scratch libraries left on a server)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        stop_daemon(bench)
        stop_quiet(bench)
        left = ""
        if bench.srv:
            if args.server:
                log(f"deleting the scratch libraries {bench.srv.prefix}-* "
                    f"(made: {sorted(bench.srv.lib_name(n) for n in bench.srv.created)})")
            try:
                bench.srv.stop()  # a server of one's own: its scratch libraries deleted (raises if one is left)
            except RuntimeError as exc:
                left = str(exc)
                log(f"ERROR: {exc}")
        if args.keep:
            log(f"work dir kept: {work}")
        else:
            log(f"removing {work}")
            shutil.rmtree(work, ignore_errors=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if left:
        print(left, file=sys.stderr)
        return 1
    print()
    print(bench.table())
    path = bench.write(args.out)
    from results_md import write_results_md

    write_results_md(bench, args.results, time.perf_counter() - t0)
    print(f"\n{len(bench.rows)} rows, {time.perf_counter() - t0:.0f} s total; JSON: {path}; table: {args.results}")
    return 0


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


if __name__ == "__main__":
    sys.exit(main())
