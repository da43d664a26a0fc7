#!/usr/bin/env python3
"""Where an idle daemon's memory and CPU go: ``tracemalloc`` and ``py-spy``
on ``ohsync run --no-tray`` over a generated library.

    .venv/bin/python bench/idle_profile.py [--files 30000] [--idle-seconds 120] [--frames 6]

Generates the library (``tests/data/samples/make_scale_library.py``), seeds
a devserver process with it and runs the daemon as ``bench/load.py`` does,
but under ``tracemalloc`` (``--frames`` frames per allocation; 0: off).
After the cold mirror has settled and ``--idle-seconds`` passed, the
daemon is sent ``SIGUSR1`` and writes the Python heap's largest holders
(grouped by traceback, after a ``gc.collect()``) and the live object
counts by type to ``OUT/idle-heap.txt``.  With ``--py-spy S`` (and py-spy
installed, ``pip install py-spy``) the idle stretch is also sampled for
``S`` seconds into ``OUT/idle-cpu.txt`` (py-spy's ``--format raw``
collapsed stacks, hottest first).  The idle CPU and RSS are read from
``/proc`` without any socket sampling.  tracemalloc slows the daemon
(about 2× during the cold mirror) and adds its own memory, so the RSS
printed here is above the real one: use ``bench/load.py`` for figures,
this for where they come from.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import GENERATOR, LIB, SETTLED, DevServerProc, log
from load import Daemon

REPO = Path(__file__).resolve().parents[1]

#: Runs inside the daemon process: tracemalloc, and a SIGUSR1 handler that writes the heap report.
_WRAPPER = r"""
import gc, os, signal, sys, threading, tracemalloc
from collections import Counter
frames, out = int(sys.argv[1]), sys.argv[2]
if frames:
    tracemalloc.start(frames)

def report():
    gc.collect()
    lines = []
    if tracemalloc.is_tracing():
        snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        stats = snap.statistics("traceback")
        total = sum(s.size for s in stats)
        lines.append(f"traced Python heap: {total / 2**20:.1f} MiB in {sum(s.count for s in stats)} blocks")
        for s in stats[:40]:
            lines.append(f"\n{s.size / 2**20:8.2f} MiB {s.count:8d} blocks")
            lines += ["    " + line for line in s.traceback.format(most_recent_first=True)]
    lines.append("\n" + open("/proc/self/smaps_rollup").read())
    maps, cur = Counter(), None
    for row in open("/proc/self/smaps"):
        head = row.split()
        if "-" in head[0] and not head[0].endswith(":"):
            name = head[5] if len(head) > 5 else "[anon]"
            cur = name.rsplit("/site-packages/", 1)[-1].split("/")[0] if "/site-packages/" in name else name
        elif head[0] == "Rss:":
            maps[cur] += int(head[1])
    lines.append("resident memory by mapping (KiB; [anon]: malloc arenas, pymalloc, thread stacks):")
    lines += [f"{kib:10d} {name}" for name, kib in maps.most_common(25)]
    # pymalloc's arenas: how much of them live objects use (the rest is fragmentation)
    import tempfile
    with tempfile.TemporaryFile("w+") as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        stats = tmp.read().splitlines()
    lines.append("pymalloc (sys._debugmallocstats):")
    lines += ["    " + row for row in stats if row.startswith(("# arenas", "# bytes", "Total")) or "bytes/arena" in row]
    sizes = Counter()
    for o in gc.get_objects():
        sizes[type(o).__name__] += sys.getsizeof(o)
    lines.append("\nshallow size of gc-tracked objects by type (KiB; strings and ints not tracked):")
    lines += [f"{n // 1024:10d} {k}" for k, n in sizes.most_common(15)]
    # which objects keep sparsely used arenas alive: bucket every object by its 1 MiB address
    # region (gc-tracked ones and the strings, ints, bytes they refer to)
    objs = {id(o): o for o in gc.get_objects()}
    for o in list(objs.values()):
        for r in gc.get_referents(o):
            if id(r) not in objs and not gc.is_tracked(r):
                objs[id(r)] = r
    regions = {}
    for addr, o in objs.items():
        regions.setdefault(addr >> 20, []).append(o)
    used = {k: sum(sys.getsizeof(o) for o in v) for k, v in regions.items()}
    sparse = sorted((k for k, n in used.items() if n < 256 * 1024), key=lambda k: used[k])
    lines.append(f"\n{len(regions)} 1 MiB regions hold objects; {len(sparse)} of them under 256 KiB of objects "
                 f"({sum(used[k] for k in sparse) // 1024} KiB in all). Types in those:")
    kinds = Counter(type(o).__name__ for k in sparse for o in regions[k])
    lines += [f"{n:10d} {k}" for k, n in kinds.most_common(20)]
    samples = [o for k in sparse for o in regions[k] if isinstance(o, (str, dict, tuple, list))]
    lines.append("samples:")
    for o in samples[:: max(1, len(samples) // 60)][:60]:
        lines.append("    " + type(o).__name__ + " " + repr(o)[:150])
    tops = Counter(m.split(".")[0] for m in list(sys.modules))
    lines.append(f"\n{len(sys.modules)} modules imported, by top-level package:")
    lines += [f"{n:6d} {k}" for k, n in tops.most_common(40)]
    lines.append(f"\n{threading.active_count()} threads: " + ", ".join(t.name for t in threading.enumerate()))
    kinds = Counter(type(o).__name__ for o in gc.get_objects())
    lines.append("\nlive objects tracked by gc, by type:")
    lines += [f"{n:10d} {k}" for k, n in kinds.most_common(25)]
    with open(out, "w", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")

signal.signal(signal.SIGUSR1, lambda *a: threading.Thread(target=report, daemon=True).start())
from ohsync.daemon.cli.main import main
sys.exit(main(["run", "--no-tray"]))
"""


class ProfiledDaemon(Daemon):
    """The benchmarked daemon, started under the tracemalloc wrapper."""

    def __init__(self, work: Path, srv: DevServerProc, poll: float, frames: int, heap_out: Path) -> None:
        super().__init__(work, srv, poll)
        self.frames, self.heap_out = frames, heap_out

    def start(self) -> None:
        # `ohsync run` restarts itself on glibc's malloc (daemon/allocator.py); the wrapper
        # calls the daemon in-process, so it is started with the same allocator here
        self.env.setdefault("PYTHONMALLOC", "malloc")
        self.proc = subprocess.Popen([sys.executable, "-c", _WRAPPER, str(self.frames), str(self.heap_out)],
                                     env=self.env, stdout=self._out, stderr=subprocess.STDOUT, cwd=self.root)


def wait_settled(daemon: Daemon, timeout: float) -> None:
    from ohsync.daemon.protocol import Method, RpcClient

    rpc = RpcClient(daemon.socket, timeout=30)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert daemon.proc is not None
        if daemon.proc.poll() is not None:
            raise RuntimeError(f"the daemon exited; see {daemon.root}/daemon-output.log")
        try:
            st = rpc.call(Method.STATUS)
        except Exception:  # noqa: BLE001 - not up yet
            st = {}
        if st.get("state") in SETTLED and st.get("last_scan"):
            return
        time.sleep(1.0)
    raise TimeoutError(f"the daemon did not settle within {timeout:.0f} s")


def py_spy(pid: int, seconds: float, out: Path) -> str:
    """Sample ``pid`` with py-spy for ``seconds``; hottest collapsed stacks into ``out``."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(exe).exists():
        return "py-spy not installed (pip install py-spy)"
    raw = out.with_suffix(".raw")
    r = subprocess.run([exe, "record", "--pid", str(pid), "--duration", str(int(seconds)), "--rate", "50",
                        "--format", "raw", "--threads", "--output", str(raw)], capture_output=True,
                       text=True, timeout=seconds + 120)
    if r.returncode != 0 or not raw.exists():
        return f"py-spy failed ({r.returncode}): {r.stderr.strip()[-300:]}"
    stacks = []
    for line in raw.read_text(encoding="utf-8").splitlines():
        stack, _, count = line.rpartition(" ")
        if count.isdigit():
            stacks.append((int(count), stack))
    stacks.sort(reverse=True)
    total = sum(c for c, _ in stacks) or 1
    # without --idle py-spy keeps only samples of threads that run (or hold the GIL)
    lines = [f"{total} samples of running threads at 50/s over {seconds:.0f} s"]
    lines += [f"{c:6d} {s.replace(';', ' <- ')}" for c, s in stacks[:40]]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lines[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=30000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--idle-seconds", type=float, default=120.0)
    ap.add_argument("--poll", type=float, default=30.0)
    ap.add_argument("--frames", type=int, default=6, help="tracemalloc frames per allocation (0: off)")
    ap.add_argument("--py-spy", type=float, default=0.0, help="seconds of py-spy sampling while idle (0: none)")
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ohsync-prof-"))
    srv = daemon = None
    try:
        log(f"generating {args.files} files")
        subprocess.run([sys.executable, str(GENERATOR), str(work / "gen"), "--files", str(args.files),
                        "--seed", str(args.seed)], check=True, stdout=subprocess.DEVNULL, timeout=1800)
        srv = DevServerProc(work / "devserver-data", {LIB: work / "gen" / LIB})
        heap = args.out / "idle-heap.txt"
        heap.unlink(missing_ok=True)
        daemon = ProfiledDaemon(work, srv, args.poll, args.frames, heap)
        t0 = time.perf_counter()
        daemon.start()
        wait_settled(daemon, args.timeout)
        log(f"settled after {time.perf_counter() - t0:.0f} s; RSS {daemon.status_mib('VmRSS')} MiB; "
            f"idle {args.idle_seconds:.0f} s")
        assert daemon.proc is not None
        c0, w0 = daemon.cpu_s(), time.perf_counter()
        spy = py_spy(daemon.proc.pid, args.py_spy, args.out / "idle-cpu.txt") if args.py_spy else ""
        time.sleep(max(0.0, args.idle_seconds - (time.perf_counter() - w0)))
        c1, w1 = daemon.cpu_s(), time.perf_counter()
        log(f"idle: {100 * (c1 - c0) / (w1 - w0):.2f} % CPU over {w1 - w0:.0f} s (py-spy attached: "
            f"{bool(spy)}), RSS {daemon.status_mib('VmRSS')} MiB {spy}")
        os.kill(daemon.proc.pid, signal.SIGUSR1)
        deadline = time.monotonic() + 300
        while not heap.exists() and time.monotonic() < deadline:
            time.sleep(1.0)
        time.sleep(1.0)
        log(f"heap report: {heap}")
        print(heap.read_text(encoding="utf-8")[:6000] if heap.exists() else "(no heap report)")
    finally:
        if daemon:
            daemon.stop()
        if srv:
            srv.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
