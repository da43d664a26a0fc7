#!/usr/bin/env python3
"""Memory-tool index: the earlier in-memory index and the SQLite FTS5 index side by side.

    .venv/bin/python bench/memory_search.py [--files 3000,30000] [--queries 200] [--runs 1]
                                            [--out bench/out/] [--results bench/MEMORY_SEARCH.md]

For each size a library is generated with ``tests/data/samples/make_scale_library.py``
into a temp dir.  Each measurement runs in a fresh Python process (a daemon
restart), which imports the memory tools, notes its RSS (the *idle* figure),
opens the index and answers one search:

* **first build**: the FTS5 index from nothing (an empty state folder); the
  in-memory index does this at every start;
* **first search after a restart**: the FTS5 index reopened (a stat of every
  file to find what changed while the process was off; nothing changed here)
  vs. the in-memory index rebuilt, then one search;
* **search latency**: a fixed, seeded mix of ``memory_search`` calls (one CJK
  word, of two to four characters; one English word; two words; a word + tag
  filter; a type + ``since`` filter; no keyword, newest first; a word that
  matches nothing), wall time per call, p50 / p95 / max in milliseconds, and
  the CPU time of the same calls (p95: what the calls cost, whatever else
  the machine runs; the wall time grows with the load);
* **RSS delta**: the process's resident memory with the index ready and the
  query mix run, minus the idle figure (``/proc/self/status`` ``VmRSS``);
* **edit searchable**: a file gets a new word, the index is told its path
  (what the daemon does on the sync event of that file), then a search for
  the word: the time until it is found.

No network, no daemon: the engine's index and the memory tools' search alone.
Budget at 30,000 files (FTS5 index): first search after a restart ≤ 1 s,
p95 ≤ 30 ms, RSS ≤ idle + 30 MiB, an edit searchable within 1 s.

``--runs N`` measures each size N times over the same library (the figures
of a shared machine vary with its load); the budget is checked on the
median run.  Writes ``bench/out/memory_search.json`` and the Markdown table
``bench/MEMORY_SEARCH.md`` (date, commit, load average of each run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
GENERATOR = REPO / "tests" / "data" / "samples" / "make_scale_library.py"

CJK = ["哈希", "作业", "复习", "图书馆", "考试", "睡眠", "课程", "提醒", "线性代数", "算法"]
ASCII = ["hash", "review", "deadline", "python", "notes", "project", "lab", "paper", "srt", "exam"]
BUDGET = {"first_search_s": 1.0, "p95_ms": 30.0, "rss_delta_mib": 30.0, "edit_searchable_s": 1.0}


def _queries(rng: random.Random, n: int) -> list[dict[str, Any]]:
    kinds = [
        lambda: {"query": rng.choice(CJK)},
        lambda: {"query": rng.choice(ASCII)},
        lambda: {"query": f"{rng.choice(CJK)} {rng.choice(ASCII)}"},
        lambda: {"query": rng.choice(CJK), "tags": [rng.choice(CJK)]},
        lambda: {"type": rng.choice(["note", "task", "course", "journal"]), "since": "2026-01-01"},
        lambda: {},
        lambda: {"query": "不存在的词 zzzqqq"},
    ]
    return [kinds[i % len(kinds)]() for i in range(n)]


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


# -- the earlier index, from the repository's history -----------------------------------------

#: The last commit with the in-memory index (then engine/memory_index.py, engine/memory_tools.py).
LEGACY_COMMIT = "65651d2"


def _legacy_modules(folder: Path) -> Path:
    """Write the earlier index and its search, as they were at :data:`LEGACY_COMMIT`, into
    ``folder`` as ``legacy_memory_index.py`` and ``legacy_memory_tools.py`` (read with
    ``git show``: the bench needs a clone with its history, not a copy of the old code)."""
    folder.mkdir(parents=True, exist_ok=True)

    def show(path: str) -> str:
        return subprocess.run(["git", "-C", str(REPO), "show", f"{LEGACY_COMMIT}:{path}"], check=True,
                              capture_output=True, text=True).stdout

    def current(source: str) -> str:  # the other memory modules it imports have moved since
        return re.sub(r"\bohsync\.engine\.memory_(\w+)", r"ohsync.engine.memory.\1", source)

    (folder / "legacy_memory_index.py").write_text(current(show("engine/memory_index.py")), encoding="utf-8")
    tools = show("engine/memory_tools.py").replace("from ohsync.engine.memory_index import",
                                                   "from legacy_memory_index import")
    (folder / "legacy_memory_tools.py").write_text(current(tools), encoding="utf-8")
    return folder


# -- one process: a restarted daemon ---------------------------------------------------------

def child(impl: str, root: Path, db: Path, queries: int, seed: int) -> dict[str, Any]:
    """Open the index of ``impl`` (``fts`` or ``legacy``) as a fresh process would, then measure."""
    from ohsync.engine.memory.index import parse_offset

    tz = parse_offset("+08:00")
    if impl == "legacy":
        sys.path.insert(0, str(_legacy_modules(db.parent.parent / "legacy-index")))
        from legacy_memory_index import MemoryIndex as Legacy  # type: ignore[import-not-found]
        from legacy_memory_tools import MemoryTools as LegacyTools  # type: ignore[import-not-found]
        idle = _rss_mib()
        started = time.perf_counter()
        legacy = Legacy(root, tz)
        count = legacy.rebuild()
        legacy.columns()
        tools: Any = LegacyTools(legacy, tz)
        update = legacy.update
    else:
        from ohsync.engine.memory.index import MemoryIndex
        from ohsync.engine.memory.tools import MemoryTools
        idle = _rss_mib()
        started = time.perf_counter()
        index = MemoryIndex(root, tz, db)
        count, reread = index.load()
        tools = MemoryTools(index, tz)
        update = index.update
    opened = time.perf_counter() - started
    tools.search(query="复习")
    first = time.perf_counter() - started
    plan = _queries(random.Random(seed), queries)
    times: list[float] = []
    cpu: list[float] = []
    hits: list[int] = []
    for q in plan:
        t0, c0 = time.perf_counter(), time.process_time()
        result = tools.search(**q)
        times.append((time.perf_counter() - t0) * 1000)
        cpu.append((time.process_time() - c0) * 1000)
        hits.append(len(result["results"]))
    rss = _rss_mib()
    # an edit arrives by sync: the file changes, the daemon names its path, an agent searches
    rel = next(p for p in sorted(str(x.relative_to(root)) for x in (root / "knowledge").rglob("*.md")))
    path = root / rel
    original = path.read_bytes()
    word = f"斑马{os.getpid()}zebra"
    path.write_bytes(original + f"- [bench] {word}\n".encode())
    t0 = time.perf_counter()
    update([rel])
    found = tools.search(query=word)["results"]
    edit_s = time.perf_counter() - t0
    path.write_bytes(original)
    update([rel])
    return {"impl": impl, "entities": count, "open_s": round(opened, 3), "first_search_s": round(first, 3),
            "p50_ms": round(statistics.median(times), 2), "p95_ms": round(_percentile(times, 95), 2),
            "max_ms": round(max(times), 2), "cpu_p50_ms": round(statistics.median(cpu), 2),
            "cpu_p95_ms": round(_percentile(cpu, 95), 2), "mean_hits": round(statistics.mean(hits), 1),
            "idle_rss_mib": round(idle, 1), "rss_delta_mib": round(rss - idle, 1),
            "edit_searchable_s": round(edit_s, 4), "edit_found": bool(found),
            "files_reread": reread if impl == "fts" else count}


def _run_child(impl: str, root: Path, db: Path, queries: int, seed: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--child", impl, "--root", str(root), "--db", str(db),
                          "--queries", str(queries), "--seed", str(seed)],
                         check=True, capture_output=True, text=True, timeout=1800)
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def run_size(files: int, queries: int, seed: int, work: Path, runs: int = 1) -> list[dict[str, Any]]:
    """Generate a library of ``files`` files and measure both indexes ``runs`` times over it."""
    out = work / f"lib{files}"
    subprocess.run([sys.executable, str(GENERATOR), str(out), "--files", str(files), "--seed", str(seed)],
                   check=True, capture_output=True, timeout=900)
    root = out / "OH-Memory"
    size = sum(p.stat().st_size for p in root.rglob("*.md"))
    rows = []
    for run in range(runs):
        db = work / f"state{files}-{run}" / "memory-index.sqlite3"
        load_before = os.getloadavg()[0]
        legacy = _run_child("legacy", root, db, queries, seed)
        build = _run_child("fts", root, db, queries, seed)  # the first start: an empty state folder
        restart = _run_child("fts", root, db, queries, seed)  # every later start
        rows.append({"files": files, "run": run + 1, "library_mb": round(size / 2**20, 1),
                     "index_file_mb": round(db.stat().st_size / 2**20, 1), "fts_build_s": build["open_s"],
                     "legacy": legacy, "fts": restart, "load_avg_1min": round(os.getloadavg()[0], 2),
                     "load_avg_before": round(load_before, 2),
                     "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})
    return rows


def _line(label: str, r: dict[str, Any]) -> str:
    return (f"  {label:<22} first search {r['first_search_s']:>7.3f} s  search p50 {r['p50_ms']:>6.2f} ms "
            f"p95 {r['p95_ms']:>7.2f} ms max {r['max_ms']:>7.2f} ms (CPU p95 {r['cpu_p95_ms']:>6.2f} ms)  "
            f"RSS +{r['rss_delta_mib']:>6.1f} MiB "
            f"(idle {r['idle_rss_mib']} MiB)  edit searchable {r['edit_searchable_s'] * 1000:>6.1f} ms")


def _within_budget(r: dict[str, Any]) -> list[str]:
    fts = r["fts"]
    missed = [k for k, limit in BUDGET.items() if fts[k] > limit]
    return missed + ([] if fts["edit_found"] else ["edit not found"])


def _median_run(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The run whose FTS5 search p95 is the median of the runs (the budget is checked on it)."""
    return sorted(rows, key=lambda r: r["fts"]["p95_ms"])[(len(rows) - 1) // 2]


def _commit() -> str:
    out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return (out.stdout.strip() or "?") + (" (uncommitted changes)" if dirty else "")


def _markdown(rows: list[dict[str, Any]], argv: list[str], started: str, loads: tuple[str, str]) -> str:
    """``bench/MEMORY_SEARCH.md``: every run's figures, both indexes, with its load average."""
    lines = ["# Memory search: the in-memory index and the SQLite FTS5 index", "",
             f"Written by `bench/memory_search.py` at commit {_commit()}, started {started}: "
             f"{os.cpu_count()} cores, {platform.system()} {platform.machine()}, Python {platform.python_version()}; "
             f"`{' '.join(argv) or '(defaults)'}`; load average {loads[0]} before, {loads[1]} at the end "
             "(the machine is shared: wall times grow with the load, CPU times much less).", "",
             "| files | run (load avg before → after) | index | first search after a restart | search p50 / p95 "
             "/ max | CPU p95 | RSS over idle | edit searchable | first build, index file |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        for label, x in (("in-memory (rebuilt)", r["legacy"]), ("SQLite FTS5 (reopened)", r["fts"])):
            extra = f"{r['fts_build_s']} s, {r['index_file_mb']} MB" if label.startswith("SQLite") else "-"
            lines.append(f"| {r['files']:,} | {r['run']} at {r['when']} ({r['load_avg_before']} → "
                         f"{r['load_avg_1min']}) | {label} | {x['first_search_s']:.3f} s | {x['p50_ms']:.1f} / "
                         f"{x['p95_ms']:.1f} / {x['max_ms']:.1f} ms | {x['cpu_p95_ms']:.1f} ms | "
                         f"+{x['rss_delta_mib']:.1f} MiB (idle {x['idle_rss_mib']}) | "
                         f"{x['edit_searchable_s'] * 1000:.1f} ms | {extra} |")
    lines.append("")
    for files in sorted({r["files"] for r in rows}):
        if files >= 30000:
            median = _median_run([r for r in rows if r["files"] == files])
            missed = _within_budget(median)
            lines.append(f"Budget at {files:,} files (FTS5, median run {median['run']}): first search ≤ 1 s, p95 ≤ "
                         f"30 ms, RSS ≤ idle + 30 MiB, edit searchable ≤ 1 s: "
                         + ("**met**." if not missed else "**not met**: " + ", ".join(missed) + "."))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", default="3000,30000", help="comma-separated library sizes")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--runs", type=int, default=1, help="measurements of each size (the budget: the median run)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    ap.add_argument("--results", type=Path, default=REPO / "bench" / "MEMORY_SEARCH.md")
    ap.add_argument("--child", choices=("fts", "legacy"), help=argparse.SUPPRESS)
    ap.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.root, args.db, args.queries, args.seed)))
        return 0
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_before = " ".join(f"{x:.1f}" for x in os.getloadavg())
    rows: list[dict[str, Any]] = []
    ok = True
    with tempfile.TemporaryDirectory(prefix="ohsync-memory-bench-") as tmp:
        for n in (int(x) for x in args.files.split(",") if x.strip()):
            size_rows = run_size(n, args.queries, args.seed, Path(tmp), max(1, args.runs))
            rows += size_rows
            for r in size_rows:
                print(f"{r['files']:>6} files, run {r['run']} ({r['library_mb']} MB of memory files; "
                      f"{r['legacy']['entities']} entities; load average {r['load_avg_1min']} on "
                      f"{os.cpu_count()} CPUs)", flush=True)
                print(_line("in-memory (rebuilt)", r["legacy"]), flush=True)
                print(_line("SQLite FTS5 (reopened)", r["fts"]) + f"  [first build {r['fts_build_s']} s, "
                      f"index file {r['index_file_mb']} MB]", flush=True)
            if n >= 30000:
                median = _median_run(size_rows)
                missed = _within_budget(median)
                ok = ok and not missed
                print(f"  budget at 30,000 files (median run {median['run']}):",
                      "met" if not missed else "NOT met: " + ", ".join(missed))
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "memory_search.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    loads = (load_before, " ".join(f"{x:.1f}" for x in os.getloadavg()))
    args.results.write_text(_markdown(rows, sys.argv[1:] if argv is None else argv, started, loads), encoding="utf-8")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())
