#!/usr/bin/env python3
"""Where a cold mirror through the daemon spends its CPU: ``py-spy`` on
``ohsync run --no-tray`` from its start until it has settled.

    .venv/bin/python bench/cold_profile.py [--files 30000] [--gen DIR] [--no-py-spy]

Generates the library (``tests/data/samples/make_scale_library.py``; with
``--gen DIR`` once, reused by later runs), seeds a devserver process with it
(server side in ``/dev/shm`` when it has room) and starts the daemon as
``bench/load.py`` does.  Prints the wall seconds and the daemon's CPU seconds
until it settled and, with py-spy (``pip install py-spy``), writes
``OUT/cold-cpu.txt``: the functions with the most samples on their own
(self) and with their callees (total), and the hottest stacks.  py-spy costs
the daemon a little CPU of its own; ``--no-py-spy`` gives the plain figures.
"""

from __future__ import annotations

import argparse
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import GENERATOR, LIB, DevServerProc, log, server_side_dir
from idle_profile import wait_settled
from load import Daemon

REPO = Path(__file__).resolve().parents[1]


def summarize(raw: Path, out: Path, top: int = 45) -> str:
    """py-spy's raw (collapsed) stacks -> self/total per function and the hottest stacks in ``out``."""
    own: Counter[str] = Counter()
    total: Counter[str] = Counter()
    stacks: list[tuple[int, str]] = []
    for line in raw.read_text(encoding="utf-8").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        frames = [f.split(" (")[0] + " (" + f.rsplit("/", 1)[-1] if " (" in f else f for f in stack.split(";")]
        frames = [f.split(":")[0] + ")" if f.endswith(")") and ":" in f.rsplit("(", 1)[-1] else f for f in frames]
        stacks.append((n, " <- ".join(reversed(frames[-8:]))))
        if frames:
            own[frames[-1]] += n
        for f in set(frames):
            total[f] += n
    samples = sum(n for n, _ in stacks) or 1
    lines = [f"{samples} samples of running threads", "", "self (own samples):"]
    lines += [f"{n:7d} {100 * n / samples:5.1f}%  {f}" for f, n in own.most_common(top)]
    lines += ["", "total (with callees):"]
    lines += [f"{n:7d} {100 * n / samples:5.1f}%  {f}" for f, n in total.most_common(top)]
    lines += ["", "hottest stacks (innermost first, 8 frames):"]
    lines += [f"{n:7d} {s}" for n, s in sorted(stacks, reverse=True)[:top]]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return lines[0]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=30000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gen", type=Path, default=None, help="keep the generated library here and reuse it")
    ap.add_argument("--no-py-spy", action="store_true", help="no sampling: the plain figures")
    ap.add_argument("--rate", type=int, default=100, help="py-spy samples per second (default 100)")
    ap.add_argument("--gil", action="store_true",
                    help="sample only the thread holding the interpreter: its CPU, not the waits in system calls")
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    ap.add_argument("--keep-log", action="store_true", help="copy the daemon's log to OUT/cold-daemon.log")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="ohsync-coldprof-"))
    server = server_side_dir(work, "server")
    gen = args.gen or server / "gen"
    srv = daemon = spy = None
    try:
        if not (gen / LIB).is_dir():
            log(f"generating {args.files} files into {gen}")
            subprocess.run([sys.executable, str(GENERATOR), str(gen), "--files", str(args.files), "--seed",
                            str(args.seed)], check=True, stdout=subprocess.DEVNULL, timeout=1800)
        t0 = time.perf_counter()
        srv = DevServerProc(server / "devserver-data", {LIB: gen / LIB})
        log(f"devserver ready ({time.perf_counter() - t0:.0f} s)")
        daemon = Daemon(work, srv, 30.0)
        # `ohsync run` re-executes itself on glibc's malloc (daemon/allocator.py), which py-spy
        # would not follow: start it on that allocator already
        daemon.env.setdefault("PYTHONMALLOC", "malloc")
        raw = args.out / "cold-cpu.raw"
        t0 = time.perf_counter()
        daemon.start()
        assert daemon.proc is not None
        exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
        if not args.no_py_spy and Path(exe).exists():
            spy = subprocess.Popen([exe, "record", "--pid", str(daemon.proc.pid), "--rate", str(args.rate),
                                    "--format", "raw", "--threads", "--nonblocking", "--output", str(raw),
                                    *(["--gil"] if args.gil else [])],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_settled(daemon, args.timeout)
        seconds, (user, system) = time.perf_counter() - t0, daemon.cpu_split()
        log(f"cold mirror of {args.files} files through the daemon: {seconds:.1f} s, {user + system:.1f} CPU s "
            f"({user:.1f} user, {system:.1f} system), peak RSS {daemon.status_mib('VmHWM')} MiB")
        if spy is not None:
            spy.send_signal(signal.SIGINT)  # py-spy writes what it has on SIGINT
            spy.wait(120)
            spy = None
            if raw.exists():
                log(summarize(raw, args.out / "cold-cpu.txt") + f": {args.out / 'cold-cpu.txt'}")
    finally:
        if spy is not None:
            spy.kill()
        if daemon:
            daemon.stop()
            if args.keep_log:  # the rotated ones first (ohsync.log.2, .1), then the current one
                def age(path: Path) -> int:
                    return int(path.suffix[1:]) if path.suffix[1:].isdigit() else 0
                logs = sorted(work.rglob("ohsync.log*"), key=age, reverse=True)
                with open(args.out / "cold-daemon.log", "wb") as out:
                    for path in logs:
                        out.write(path.read_bytes())
        if srv:
            srv.stop()
        shutil.rmtree(server, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
