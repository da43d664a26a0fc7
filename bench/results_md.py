"""The writer of ``bench/RESULTS.md``.

The file has two parts, each rewritten only by a run that produced rows for
it, so one file holds every scenario although they come from two commands:
``--only`` runs without ``scale`` write the main table, ``make bench-scale``
(``--only scale``, 30,000 files) the section between the ``<!-- scale -->``
markers.  Each part's header line says how it
was made: options, the wall time of each scenario, and whether the run
shared the machine (load average before it 0.5 or more).

README.md's Benchmarks section holds a copy of RESULTS.md between
:data:`README_BEGIN` and :data:`README_END`, rewritten with it by every run
that writes ``bench/RESULTS.md``, so the README's table is never older than
the file.  ``python bench/results_md.py`` copies it again (after a merge,
say); ``--check`` only says whether the copy is current (exit 1 if not).
"""

from __future__ import annotations

import os
import platform
import re
import subprocess
import time
from pathlib import Path
from typing import Any

from targets import targets_table, update_targets

__all__ = ["write_results_md", "server_line", "readme_block", "update_readme", "README_BEGIN", "README_END"]

_BEGIN, _END = "<!-- scale -->", "<!-- /scale -->"
#: The block of README.md's Benchmarks section that holds a copy of RESULTS.md.
README_BEGIN = "<!-- bench/RESULTS.md: copied by bench/results_md.py, do not edit -->"
README_END = "<!-- /bench/RESULTS.md -->"
REPO = Path(__file__).resolve().parents[1]
#: The heading of the generated section that judges the speed targets (``bench/targets.py``).
TARGETS_HEADING = "## Targets"


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
    if bench.args.only == "scale":
        opts = (f"--scale-files {args.scale_files} --seed {args.seed} --scale-idle-seconds "
                f"{args.scale_idle_seconds:g} --scale-poll {args.scale_poll:g}")
    else:
        opts = (f"--files {args.files} --seed {args.seed} --big-mb {args.big_mb} --latency {args.latency:g} "
                f"--runs {args.runs} --saves {args.saves} --burst {args.burst} --idle-seconds {args.idle_seconds:g} "
                f"--idle-window {args.idle_window}")
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10,
                                cwd=Path(__file__).resolve().parent).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        commit = ""
    at = f" at commit {commit}" if commit else ""
    return (f"Written by `{what}` (`bench/run.py`{at}) on {time.strftime('%Y-%m-%d %H:%M %Z')}: "
            f"{os.cpu_count()} cores, {platform.platform()}, Python {platform.python_version()}, "
            f"{bench.rc.version or 'rclone not installed'}; `{opts}`{only}; {seconds:.0f} s in all "
            f"({per}){shared}.")


def server_line(bench: Any) -> str:
    """The sentence saying which server answered and who counted the requests."""
    version = getattr(bench, "server_version", None) or "unknown"
    if bench.args.server:
        return (f"Server: {bench.args.server}, Seafile {version} (`GET /api2/server-info/`), scratch "
                "libraries made and deleted by the run; requests counted by the tools themselves (the "
                "engine's HTTP client, rclone's `--dump headers`, the daemon's status).")
    return (f"Server: devserver on 127.0.0.1 in its own process, version {version.removeprefix('devserver ')} "
            "(`GET /api2/server-info/`); requests counted by devserver.")


def kept_sections(main: str) -> str:
    """The sections of RESULTS.md's main part written by hand (a before/after
    comparison, a profile): every ``## `` section but the generated targets;
    a new run keeps them below its table."""
    parts = re.split(r"(?m)^(?=## )", main)
    return "".join(p for p in parts[1:] if not p.startswith(TARGETS_HEADING)).strip()


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
            _header(bench, seconds, "bench/run.py --server" if bench.args.server else "make bench"),
            server_line(bench) + " Ratios are "
            "ohsync ÷ other (below 1: ohsync needed less time / fewer requests). See `bench/README.md` "
            "for what each row measures.",
            "",
            bench.table(main_rows),
            "",
            f"{TARGETS_HEADING}",
            "",
            "Each speed target judged on this run's rows (the 30,000-file row only when the run had `scale`).",
            "",
            targets_table(bench.rows),
            "",
            kept_sections(old_main),
        ])
    if not main_rows and scale_rows:
        main = update_targets(main, scale_rows)  # the 30,000-file target's line, the rest as the last run left it
    scale = old_scale
    if scale_rows:
        scale = "\n".join([
            _BEGIN,
            f"## Scale: {bench.args.scale_files:,} files",
            "",
            _header(bench, seconds, "make bench-scale" if bench.args.only == "scale" else "make bench"),
            "",
            bench.table(scale_rows),
            _END,
        ])
    path.write_text(main.rstrip() + "\n" + ("\n" + scale + "\n" if scale else ""), encoding="utf-8")
    if path.resolve() == (REPO / "bench" / "RESULTS.md").resolve():
        update_readme(path, REPO / "README.md")


def readme_block(results: str) -> str:
    """The README copy of RESULTS.md's text ``results``: its title dropped, its
    sections one level down (they sit inside README's Benchmarks section),
    between the markers."""
    lines = results.strip().splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    body = "\n".join("#" + line if line.startswith("## ") else line for line in lines).strip()
    return f"{README_BEGIN}\n{body}\n{README_END}"


def update_readme(results: Path, readme: Path) -> bool:
    """Rewrite README.md's block with the copy of ``results``.

    :returns: True when the README changed; False when it was current or has
        no block (then nothing is written).
    """
    text = readme.read_text(encoding="utf-8")
    m = re.search(re.escape(README_BEGIN) + r".*?" + re.escape(README_END), text, re.S)
    if not m:
        return False
    new = text[:m.start()] + readme_block(results.read_text(encoding="utf-8")) + text[m.end():]
    if new == text:
        return False
    readme.write_text(new, encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    """Copy bench/RESULTS.md into README.md (``--check``: exit 1 when the copy is stale)."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--check", action="store_true", help="only say whether README.md's copy is current")
    args = ap.parse_args(argv)
    results, readme = REPO / "bench" / "RESULTS.md", REPO / "README.md"
    text = readme.read_text(encoding="utf-8")
    m = re.search(re.escape(README_BEGIN) + r".*?" + re.escape(README_END), text, re.S)
    if not m:
        print(f"{readme}: no block between {README_BEGIN!r} and {README_END!r}")
        return 1
    current = m.group(0) == readme_block(results.read_text(encoding="utf-8"))
    if args.check:
        print("README.md's benchmark table is " + ("current" if current else "older than bench/RESULTS.md"))
        return 0 if current else 1
    changed = update_readme(results, readme)
    print("README.md: benchmark table " + ("copied from bench/RESULTS.md" if changed else "already current"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
