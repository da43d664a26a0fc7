"""The ``quiet`` scenario of ``bench/run.py`` (issue scenario 1): what an
idle daemon costs over ``--idle-seconds`` (300 s), polling and with push.

Two real ``ohsync run --no-tray`` daemons on the bench's generated library,
each against **its own devserver process** seeded with the same tree, so
that each one's requests are counted alone:

* ``poll``: notifications absent, ``poll_interval`` = ``--idle-poll`` (30 s,
  the default of the configuration);
* ``push``: devserver's notification service up, ``push_safety_poll`` =
  ``--idle-safety-poll`` (300 s, the default), ``poll_interval`` 30 s (used
  only while the channel is down).

Both are started and cold-mirrored before the first scenario (not
measured: the ``daemon`` row measures a cold start), then left alone for
the window, with no socket call: CPU seconds (utime + stime from
``/proc/<pid>/stat``), RSS sampled once a second (median and max), the
requests devserver counted, the polls the daemon counted (``status``
``polls``, read just before and just after the window).  Requests per hour
are the measured count scaled to an hour, next to what the configuration
predicts (3600 / interval).

``--idle-window background`` (``make bench``): the window runs while the
next scenarios run, so the 5 minutes cost no extra wall time; the daemons'
own CPU seconds and RSS do not depend on the wall clock, their requests go
to their own devservers, and the other scenarios' load shows in the
recorded load average.  ``--idle-window alone``: the window runs as this
scenario, with nothing else running (5 minutes more).
"""

from __future__ import annotations

import os
import shutil
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from common import LIB, DevServerProc, Measure, log

__all__ = ["QuietPair", "start_quiet", "stop_quiet", "s_quiet"]


class _Idler:
    """One daemon of the pair, with its own devserver."""

    def __init__(self, bench: Any, name: str, push: bool) -> None:
        self.name, self.push = name, push
        self.root = bench.work / f"quiet-{name}"
        self.root.mkdir()
        self.srv: DevServerProc | None = None
        self.daemon: Any = None

    def start_server(self, tree: Path) -> None:
        self.srv = DevServerProc(self.root / "devserver-data", {LIB: tree})
        if self.push:
            self.srv.http.post("/notifications", json={"state": "up"})

    def start_daemon(self, args: Any) -> None:
        from daemon_proc import BenchDaemon

        config: dict[str, Any] = {"poll_interval": 30.0 if self.push else args.idle_poll}
        if self.push:
            config["push_safety_poll"] = args.idle_safety_poll
        self.daemon = BenchDaemon(self.srv, self.root, "daemon", config)
        self.daemon.start()

    def wait_ready(self, timeout: float) -> None:
        """Settled after the cold mirror (and, for ``push``, subscribed)."""
        self.daemon.wait_settled(timeout)
        deadline = time.monotonic() + 60
        while self.push and self.daemon.status().get("notifications") != "push":
            if time.monotonic() > deadline:
                raise RuntimeError(f"quiet: the push daemon never subscribed; see {self.daemon.root}")
            time.sleep(0.2)

    def stop(self) -> None:
        if self.daemon is not None:
            self.daemon.stop()
            self.daemon = None
        if self.srv is not None:
            self.srv.stop()
            self.srv = None


class QuietPair:
    """The two idle daemons and their window (run in a thread or in the caller)."""

    def __init__(self, bench: Any) -> None:
        self.bench = bench
        self.idlers = [_Idler(bench, "poll", push=False), _Idler(bench, "push", push=True)]
        self.result: dict[str, Measure] = {}
        self.error: BaseException | None = None
        self.loadavg: tuple[str, str] = ("", "")
        self.thread: threading.Thread | None = None

    def start(self) -> None:
        """Start both devservers and daemons; return once both are settled."""
        args = self.bench.args
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=2) as pool:
            list(pool.map(lambda i: i.start_server(self.bench.tree), self.idlers))
        for idler in self.idlers:
            idler.start_daemon(args)
        for idler in self.idlers:
            idler.wait_ready(args.timeout)
        log(f"quiet: polling and push daemons settled ({time.perf_counter() - t0:.0f} s, not measured)")
        time.sleep(5.0)  # the watcher's echoes of the cold mirror are handed on; no pass is due now

    def window(self) -> None:
        """Measure ``--idle-seconds`` with no socket call; stop the pair after it."""
        try:
            self._window()
        except BaseException as exc:  # noqa: BLE001 - reported by s_quiet
            self.error = exc
        finally:
            self.stop()

    def _window(self) -> None:
        seconds = self.bench.args.idle_seconds
        polls0 = {i.name: i.daemon.status().get("polls") or 0 for i in self.idlers}
        for i in self.idlers:
            i.srv.reset()
        cpu0 = {i.name: i.daemon.cpu_s() for i in self.idlers}
        rss: dict[str, list[int]] = {i.name: [] for i in self.idlers}
        self.loadavg = (" ".join(f"{x:.1f}" for x in os.getloadavg()), "")
        w0 = time.perf_counter()
        while time.perf_counter() - w0 < seconds:
            for i in self.idlers:
                if not i.daemon.alive():
                    raise RuntimeError(f"quiet: the {i.name} daemon exited; see {i.daemon.root}")
                rss[i.name].append(i.daemon.status_mib("VmRSS"))
            time.sleep(1.0)
        wall = time.perf_counter() - w0
        cpu1 = {i.name: i.daemon.cpu_s() for i in self.idlers}
        counted = {i.name: i.srv.counters() for i in self.idlers}
        self.loadavg = (self.loadavg[0], " ".join(f"{x:.1f}" for x in os.getloadavg()))
        for i in self.idlers:
            polls = (i.daemon.status().get("polls") or 0) - polls0[i.name]
            c = counted[i.name]
            cpu = cpu1[i.name] - cpu0[i.name]
            m = Measure(seconds=wall, requests=c["total"], endpoints=c["endpoints"])
            m.extra.update({
                "cpu_seconds": round(cpu, 3), "cpu_percent": round(100 * cpu / wall, 3),
                "rss_mib_median": statistics.median(rss[i.name]), "rss_mib_max": max(rss[i.name]),
                "rss_anon_mib": i.daemon.status_mib("RssAnon"), "peak_rss_mib_incl_cold_start":
                    i.daemon.status_mib("VmHWM"),
                "polls": polls, "requests_per_poll": round(c["total"] / polls, 2) if polls else None,
                "requests_per_hour_measured": round(c["total"] * 3600 / wall, 1),
                "interval_s": (self.bench.args.idle_safety_poll if i.push else self.bench.args.idle_poll),
                "mode": self.bench.args.idle_window,
                "load_average_before_after": list(self.loadavg)})
            m.extra["requests_per_hour_configured"] = round(3600 / m.extra["interval_s"])
            self.result[i.name] = m
            log(f"quiet ({i.name}): {cpu:.2f} CPU s in {wall:.0f} s = {m.extra['cpu_percent']} %, RSS "
                f"{m.extra['rss_mib_median']} MiB, {c['total']} requests in {polls} polls "
                f"({m.extra['requests_per_hour_measured']}/h)")

    def start_window_thread(self) -> None:
        self.thread = threading.Thread(target=self.window, name="bench-quiet", daemon=True)
        self.thread.start()
        log(f"quiet: {self.bench.args.idle_seconds:.0f} s idle window running beside the next scenarios")

    def join(self, timeout: float) -> None:
        if self.thread is not None:
            self.thread.join(timeout)
            if self.thread.is_alive():
                raise TimeoutError("quiet: the idle window did not end")

    def stop(self) -> None:
        for i in self.idlers:
            i.stop()

    def cleanup(self) -> None:
        self.stop()
        for i in self.idlers:
            shutil.rmtree(i.root, ignore_errors=True)


def start_quiet(bench: Any) -> None:
    """Before the first scenario (``--idle-window background``): start the pair and its window."""
    pair = QuietPair(bench)
    bench.quiet = pair
    log("== quiet: starting a polling daemon and a push daemon, each on its own devserver")
    try:
        pair.start()
    except Exception as exc:  # noqa: BLE001 - reported as this scenario's failure, the others run
        log(f"quiet: FAILED to start: {type(exc).__name__}: {exc}")
        pair.error = exc
        pair.stop()
        return
    pair.start_window_thread()


def stop_quiet(bench: Any) -> None:
    """Stop the pair if it still runs (the end of the run, or a failure)."""
    pair = getattr(bench, "quiet", None)
    if pair is not None:
        pair.cleanup()


def s_quiet(bench: Any) -> None:
    args = bench.args
    pair = getattr(bench, "quiet", None)
    if pair is None:  # --idle-window alone, or the pair could not start before the first scenario
        pair = QuietPair(bench)
        bench.quiet = pair
        pair.start()
        pair.window()
    else:
        left = args.idle_seconds + 120
        log("quiet: waiting for the idle window to end")
        pair.join(left)
    if pair.error is not None:
        raise pair.error
    files = args.files
    load = "load average {} before, {} after (background)".format(*pair.loadavg) \
        if args.idle_window == "background" else "nothing else running"
    for name, label in (("poll", f"polling every {args.idle_poll:g} s"),
                        ("push", f"push, safety poll every {args.idle_safety_poll:g} s")):
        m = pair.result[name]
        x = m.extra
        bench.add_row("quiet", f"idle {args.idle_seconds:.0f} s, {label}, {files} files", m, None, other_name="-",
                      oh_value=f"{x['cpu_percent']:.2f} % CPU ({x['cpu_seconds']:.2f} s), {x['rss_mib_median']} MiB "
                               f"RSS; {x['polls']} poll{'' if x['polls'] == 1 else 's'}, "
                              f"{x['requests_per_hour_measured']:g} req/h measured "
                               f"({x['requests_per_hour_configured']}/h configured)",
                      note=load)
