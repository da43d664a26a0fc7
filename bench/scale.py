"""The ``scale`` scenario of ``bench/run.py`` (issue scenario 7): a
``--scale-files`` library (30,000 by default) through the real daemon.

Generates its own library with the samples' generator, seeds a second
devserver process with it and runs ``ohsync run --no-tray`` (poll every
``--scale-poll`` s).  Measured:

* cold mirror: wall time, devserver requests, CPU seconds and peak RSS from
  the daemon's start until it has settled;
* idle: once the first poll after the cold mirror is over (it reads every
  base once more, then polls turn idle: its CPU is reported apart),
  ``--scale-idle-seconds`` with no socket call at all (RSS sampled from
  ``/proc`` once a second): CPU %, median RSS, requests; and the same CPU
  with the periodic full scans spread over their interval (the worker spaces them by ``SCAN_COST_FACTOR`` × a scan's
  duration, at least ``scan_interval(poll)``), since a short window may hold none;
* a full local rescan (``refresh``): seconds and CPU seconds until the status
  shows the new scan;
* the first ``memory.search``, which builds the memory tools' index (built on
  first use, not at start): seconds and the RSS after it.

The generated library and devserver's data live in ``/dev/shm`` when it
has room (:func:`common.server_side_dir`; the server side is not what is
measured, and creating and unlinking 60,000 files there is quick); the
mirror and the daemon's state are on the disk under test.  All of it is
removed at the end (part of ``make bench``'s total time, not of any figure).
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import time
from typing import Any

from common import GENERATOR, LIB, DevServerProc, Measure, log, server_side_dir

__all__ = ["s_scale"]


def s_scale(bench: Any) -> None:
    from daemon_proc import BenchDaemon
    from ohsync.daemon.protocol import Method
    from ohsync.daemon.status import scan_interval
    from ohsync.daemon.worker import MAX_SCAN_INTERVAL, SCAN_COST_FACTOR

    args = bench.args
    n, poll = args.scale_files, args.scale_poll
    work = bench.work / "scale"
    work.mkdir()
    server = server_side_dir(work, "server")
    log(f"scale: generating {n} files into {server}")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, str(GENERATOR), str(server / "gen"), "--files", str(n), "--seed",
                    str(args.seed)], check=True, stdout=subprocess.DEVNULL, timeout=1800)
    log(f"scale: {time.perf_counter() - t0:.0f} s; starting a devserver with it")
    t0 = time.perf_counter()
    srv = DevServerProc(server / "devserver-data", {LIB: server / "gen" / LIB})
    log(f"scale: devserver ready ({time.perf_counter() - t0:.0f} s)")
    d = BenchDaemon(srv, work, "daemon", {"poll_interval": poll})
    try:
        srv.reset()
        t0 = time.perf_counter()
        d.start()
        d.wait_settled(args.timeout * 6)
        cold_s = time.perf_counter() - t0
        c = srv.counters()
        cold = Measure(seconds=cold_s, requests=c["total"], endpoints=c["endpoints"],
                       extra={"cpu_seconds": round(d.cpu_s(), 1), "peak_rss_mib": d.status_mib("VmHWM")})
        log(f"scale: cold mirror {cold_s:.1f} s, {c['total']} requests, {cold.extra['cpu_seconds']} CPU s, "
            f"peak RSS {cold.extra['peak_rss_mib']} MiB")

        # the first poll after work reads every base once more before the polls turn idle
        polls = d.status().get("polls") or 0
        c0, t0 = d.cpu_s(), time.perf_counter()
        d.wait_settled(2 * poll + 60, min_polls=polls + 1)
        settling = Measure(seconds=time.perf_counter() - t0, requests=None,
                           extra={"cpu_seconds": round(d.cpu_s() - c0, 2)})
        time.sleep(1.0)
        srv.reset()
        log(f"scale: settling poll {settling.extra['cpu_seconds']} CPU s; idle {args.scale_idle_seconds:.0f} s, "
            f"poll_interval {poll:g} s, no socket calls")
        c0, w0 = d.cpu_s(), time.perf_counter()
        rss: list[int] = []
        while time.perf_counter() - w0 < args.scale_idle_seconds:
            rss.append(d.status_mib("VmRSS"))
            time.sleep(1.0)
        c1, w1 = d.cpu_s(), time.perf_counter()
        c = srv.counters()
        idle = Measure(seconds=w1 - w0, requests=c["total"], endpoints=c["endpoints"],
                       extra={"cpu_seconds": round(c1 - c0, 2), "cpu_percent": round(100 * (c1 - c0) / (w1 - w0), 3),
                              "rss_mib_median": statistics.median(rss), "rss_mib_max": max(rss),
                              "settling_poll_cpu_seconds": settling.extra["cpu_seconds"],
                              # anonymous memory (heap, stacks) vs mapped files (interpreter, libraries)
                              "rss_anon_mib": d.status_mib("RssAnon"), "rss_file_mib": d.status_mib("RssFile")})

        before = d.status().get("last_scan") or ""
        time.sleep(1.1)  # last_scan has one-second resolution
        srv.reset()
        c0, t0 = d.cpu_s(), time.perf_counter()
        d.rpc.call(Method.REFRESH)
        d.wait_settled(args.timeout, after_scan=before)
        rescan_s = time.perf_counter() - t0
        c = srv.counters()
        rescan = Measure(seconds=rescan_s, requests=c["total"], endpoints=c["endpoints"],
                         extra={"cpu_seconds": round(d.cpu_s() - c0, 2)})
        every = max(scan_interval(poll), min(MAX_SCAN_INTERVAL, SCAN_COST_FACTOR * rescan_s))
        # a full scan that finds nothing settles the mirror: the polls after it stay idle
        with_scans = idle.extra["cpu_percent"] + 100 * rescan.extra["cpu_seconds"] / every
        idle.extra.update({"full_scan_every_s": round(every), "cpu_percent_with_scans": round(with_scans, 3)})
        log(f"scale: idle {idle.extra['cpu_percent']} % CPU ({with_scans:.2f} % with a full scan every "
            f"{every:.0f} s), RSS {idle.extra['rss_mib_median']} MiB, {idle.requests} requests; "
            f"rescan {rescan_s:.2f} s, {rescan.extra['cpu_seconds']} CPU s")

        t0 = time.perf_counter()
        hits = _first_answer(d.rpc, args.timeout)
        first = Measure(seconds=time.perf_counter() - t0, requests=0,
                        extra={"rss_mib_after": d.status_mib("VmRSS"), "hits": len(hits.get("results", []))})
        log(f"scale: first memory.search (builds the index) {first.seconds:.1f} s, RSS after "
            f"{first.extra['rss_mib_after']} MiB")
    finally:
        d.stop()
        srv.stop()
        log("scale: removing its library, devserver data and mirror")
        shutil.rmtree(server, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    label = f"{n} files"
    bench.add_row("scale", f"cold mirror through the daemon, {label}", cold, None, other_name="-",
                  oh_value=f"{cold.extra['cpu_seconds']} CPU s, peak RSS {cold.extra['peak_rss_mib']} MiB; "
                           f"the poll after it {settling.extra['cpu_seconds']} CPU s")
    bench.add_row("scale", f"idle {idle.seconds:.0f} s, {label} (poll {poll:g} s)", idle, None, other_name="-",
                  oh_value=f"{idle.extra['cpu_percent']} % CPU ({idle.extra['cpu_percent_with_scans']:.2f} % with "
                           f"scans every {idle.extra['full_scan_every_s']} s), {idle.extra['rss_mib_median']} MiB RSS "
                           f"({idle.extra['rss_anon_mib']} anon + {idle.extra['rss_file_mib']} files)")
    bench.add_row("scale", f"full local rescan, {label}", rescan, None, other_name="-",
                  oh_value=f"{rescan.extra['cpu_seconds']} CPU s")
    bench.add_row("scale", f"first memory request (index build), {label}", first, None, other_name="-",
                  oh_value=f"RSS after {first.extra['rss_mib_after']} MiB")


def _first_answer(rpc: Any, timeout: float) -> dict[str, Any]:
    """The first ``memory.search`` answer, asked again while the daemon says
    the index is still being built (-32000, "try again in a moment"), as an
    agent would; at most ``timeout`` seconds."""
    from ohsync.daemon.protocol import Method, RpcError

    deadline = time.monotonic() + timeout
    while True:
        try:
            answer: dict[str, Any] = rpc.call(Method.MEMORY_SEARCH, {"query": "the", "limit": 5})
            return answer
        except RpcError as exc:
            if exc.code != -32000 or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
