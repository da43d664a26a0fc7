"""The writer of ``bench/RESULTS.md``.

The file has two parts, each rewritten only by a run that produced rows for
it, so one file holds every scenario although they come from two commands:
``make bench`` (every scenario but ``scale``, 3,000 files) writes the main
table, ``make bench-scale`` (``--only scale``, 30,000 files) the section
between the ``<!-- scale -->`` markers.  Each part's header line says how it
was made: options, the wall time of each scenario, and whether the run
shared the machine (load average before it 0.5 or more).
"""

from __future__ import annotations

import os
import platform
import re
import time
from pathlib import Path
from typing import Any

__all__ = ["write_results_md"]

_BEGIN, _END = "<!-- scale -->", "<!-- /scale -->"


def _header(bench: Any, seconds: float, what: str) -> str:
    args = bench.args
    only = f" `--only {args.only}`" if args.only else ""
    per = ", ".join(f"{k} {v:.0f} s" for k, v in bench.seconds.items())
    load = getattr(bench, "loadavg", "")
    shared = ""
    if load and float(load.split()[0]) >= 0.5:
        shared = (f"; the run shared the machine with other work (load average {load} before it, "
                  f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end)")
    if args.note:
        shared += f"; {args.note}"
    if what == "make bench-scale":
        opts = (f"--scale-files {args.scale_files} --seed {args.seed} --scale-idle-seconds "
                f"{args.scale_idle_seconds:g} --scale-poll {args.scale_poll:g}")
    else:
        opts = (f"--files {args.files} --seed {args.seed} --big-mb {args.big_mb} --latency {args.latency:g} "
                f"--runs {args.runs} --saves {args.saves} --burst {args.burst}")
    return (f"Written by `{what}` (`bench/run.py`) on {time.strftime('%Y-%m-%d %H:%M %Z')}: "
            f"{os.cpu_count()} cores, {platform.platform()}, Python {platform.python_version()}, "
            f"{bench.rc.version or 'rclone not installed'}; `{opts}`{only}; {seconds:.0f} s in all "
            f"({per}){shared}.")


def write_results_md(bench: Any, path: Path, seconds: float) -> None:
    """Rewrite the parts of ``path`` this run has rows for; keep the other part as it was."""
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    m = re.search(re.escape(_BEGIN) + r".*?" + re.escape(_END), old, re.S)
    old_scale = m.group(0) if m else ""
    old_main = (old[:m.start()] if m else old).rstrip() + "\n" if old else ""
    scale_rows = [r for r in bench.rows if r["scenario"] == "scale"]
    main_rows = [r for r in bench.rows if r["scenario"] != "scale"]
    main = old_main
    if main_rows or not old_main:
        main = "\n".join([
            "# Benchmark results",
            "",
            _header(bench, seconds, "make bench"),
            "devserver on 127.0.0.1 in its own process; requests counted by devserver. Ratios are "
            "ohsync ÷ other (below 1: ohsync needed less time / fewer requests). See `bench/README.md` "
            "for what each row measures.",
            "",
            bench.table(main_rows),
            "",
        ])
    scale = old_scale
    if scale_rows:
        scale = "\n".join([
            _BEGIN,
            f"## Scale: {bench.args.scale_files:,} files",
            "",
            _header(bench, seconds, "make bench-scale"),
            "",
            bench.table(scale_rows),
            _END,
        ])
    path.write_text(main.rstrip() + "\n" + ("\n" + scale + "\n" if scale else ""), encoding="utf-8")
