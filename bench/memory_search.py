#!/usr/bin/env python3
"""Memory-tool search latency and index memory (issue 15; target: p95 under 20 ms on 3,000 files).

    .venv/bin/python bench/memory_search.py [--files 3000,30000] [--queries 200] [--out bench/out/]

For each size a library is generated with ``tests/data/samples/make_scale_library.py``
into a temp dir; the index is built once (seconds, and the Python heap it holds,
measured with ``tracemalloc`` around a second build, search corpora included), then a fixed, seeded mix of
``memory_search`` calls runs against it: one CJK word, one English word, two
words, a word + tag filter, a type + ``since`` filter, no keyword (newest
first), a word that matches nothing.  Latency is wall time per call
(``time.perf_counter``), reported as p50, p95 and max in milliseconds.  No
network, no daemon: this measures the engine's index and scoring alone.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
GENERATOR = REPO / "tests" / "data" / "samples" / "make_scale_library.py"

CJK = ["哈希", "作业", "复习", "图书馆", "考试", "睡眠", "课程", "提醒", "线性代数", "算法"]
ASCII = ["hash", "review", "deadline", "python", "notes", "project", "lab", "paper", "srt", "exam"]


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


def run_size(files: int, queries: int, seed: int, work: Path) -> dict[str, Any]:
    from ohsync.engine.memory_index import MemoryIndex, parse_offset
    from ohsync.engine.memory_tools import MemoryTools

    out = work / f"lib{files}"
    subprocess.run([sys.executable, str(GENERATOR), str(out), "--files", str(files), "--seed", str(seed)],
                   check=True, capture_output=True, timeout=600)
    root = out / "OH-Memory"
    size = sum(p.stat().st_size for p in root.rglob("*.md"))
    tz = parse_offset("+08:00")
    started = time.perf_counter()
    index = MemoryIndex(root, tz)
    count = index.rebuild()
    index.columns()
    build_s = time.perf_counter() - started
    del index
    gc.collect()
    tracemalloc.start()  # a second build, traced (tracing slows it down; the time above is untraced)
    index = MemoryIndex(root, tz)
    index.rebuild()
    index.columns()
    heap, _peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    tools = MemoryTools(index, tz)
    rng = random.Random(seed)
    plan = _queries(rng, queries)
    for q in plan[:10]:  # warm caches
        tools.search(**q)
    times: list[float] = []
    hits: list[int] = []
    for q in plan:
        t0 = time.perf_counter()
        result = tools.search(**q)
        times.append((time.perf_counter() - t0) * 1000)
        hits.append(len(result["results"]))
    return {
        "files": files, "entities": count, "library_mb": round(size / 2**20, 1),
        "build_s": round(build_s, 2), "index_mb": round(heap / 2**20, 1),
        "queries": len(times), "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(_percentile(times, 95), 2), "max_ms": round(max(times), 2),
        "mean_hits": round(statistics.mean(hits), 1),
        "load_avg_1min": round(os.getloadavg()[0], 2),  # latency on a shared machine scales with this
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", default="3000,30000", help="comma-separated library sizes")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    args = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="ohsync-memory-bench-") as tmp:
        for n in (int(x) for x in args.files.split(",") if x.strip()):
            rows.append(run_size(n, args.queries, args.seed, Path(tmp)))
            r = rows[-1]
            print(f"{r['files']:>6} files ({r['library_mb']} MB): index {r['build_s']} s, {r['index_mb']} MB heap; "
                  f"search p50 {r['p50_ms']} ms, p95 {r['p95_ms']} ms, max {r['max_ms']} ms "
                  f"({r['queries']} queries; load average {r['load_avg_1min']} on {os.cpu_count()} CPUs)", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "memory_search.json").write_text(json.dumps(rows, indent=2), encoding="utf-8")
    ok = all(r["p95_ms"] < 20 for r in rows if r["files"] <= 3000)
    print("target p95 < 20 ms on 3,000 files:", "met" if ok else "NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    raise SystemExit(main())
