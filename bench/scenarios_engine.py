"""Engine scenarios of ``bench/run.py`` (``SyncEngine`` in the bench process):

* ``cold``: cold mirror of N files, an engine full pass into an empty folder, vs ``rclone copy``;
* ``idle``: idle poll, an engine pass with nothing changed, vs ``rclone lsf -R`` / ``rclone copy``;
* ``detect``: one remote change 3 folders deep, an engine pass, vs ``rclone copy`` (and ``--fast-list``);
* ``push``: local save -> verified remote for one edited file, an engine pass with the path, vs
  ``rclone copyto``.
"""

from __future__ import annotations

import shutil
import statistics
import time
from pathlib import Path
from typing import Any

from common import LIB, EngineMirror, bounded, count_files, engine_measure, log, measured, rclone_measure

__all__ = ["ensure_mirror", "ensure_rc_dir", "s_cold", "s_idle", "s_detect", "s_push"]


def ensure_mirror(bench: Any) -> EngineMirror:
    if bench.mirror is None:
        log("ohsync: cold pass to get a mirror (setup, not measured)")
        bench.mirror = EngineMirror(bench.srv, bench.repo, bench.work, "ohsync-mirror")
        bounded(lambda: bench.mirror.sync(), bench.args.timeout, "setup cold pass")
    return bench.mirror


def ensure_rc_dir(bench: Any) -> Path:
    """An rclone-side local copy that rclone considers up to date: the generator tree
    (devserver keeps the source mtimes on import, so sizes and mtimes match), plus
    whatever changed remotely since, fetched by one unmeasured ``rclone copy``."""
    if bench.rc_dir is None:
        bench.rc_dir = bench.work / "rclone-copy"
        shutil.copytree(bench.tree, bench.rc_dir, copy_function=shutil.copy2)
        bench.rc.run("copy", bench.rc.remote(LIB), str(bench.rc_dir), timeout=bench.args.timeout)
    return bench.rc_dir


# ---- 1. cold mirror
def s_cold(bench: Any) -> None:
    """Cold mirror without added latency (its mirror is the one later scenarios use), then again
    into another empty folder with ``--latency`` ms per request (the target is set there)."""
    from speed import set_latency

    bench.mirror = _cold_once(bench, 0.0, "ohsync-mirror")
    if bench.args.latency:
        set_latency(bench, bench.args.latency)
        try:
            _cold_once(bench, bench.args.latency, "ohsync-mirror-latency")
        finally:
            set_latency(bench, 0)


def _cold_once(bench: Any, ms: float, folder: str) -> EngineMirror:
    n = bench.args.files
    label = f", {ms:g} ms" if ms else ""
    log(f"cold: ohsync engine full pass, {n} files into an empty folder{label}")
    mirror = EngineMirror(bench.srv, bench.repo, bench.work, folder)
    oh = engine_measure(bench.srv, mirror, None, bench.args.timeout, "ohsync cold pass")
    oh.extra["files_local"] = count_files(mirror.root)
    oh.extra["zip_requests"] = sum(v for k, v in oh.endpoints.items() if "zip" in k)
    log(f"  ohsync: {oh.seconds:.1f} s, {oh.requests} requests, {oh.extra['files_local']} files"
        f" (zip-task requests: {oh.extra['zip_requests']})")
    other = None
    if bench.rc.bin:
        budget = bench.args.rclone_cold_timeout
        log(f"cold: rclone copy (bounded to {budget:.0f} s; extrapolated if not done){label}")
        dest = bench.work / ("rclone-cold" + (f"-{ms:g}ms" if ms else ""))
        other = rclone_measure(bench.srv, bench.rc, ["copy", bench.rc.remote(LIB), str(dest)], budget, "rclone cold")
        done = count_files(dest)
        other.extra["files_local"] = done
        if other.extra.get("timed_out") and done:
            # rclone's seafile backend is paced (~10 calls/s), so time scales with requests:
            # fixed part (login, listings) + per-file part (link + file) scaled to n files.
            per_file = sum(v for k, v in other.endpoints.items()
                           if k.startswith("GET /api2/repos/{id}/file/") or k.startswith("GET /seafhttp/files/"))
            fixed = other.requests - per_file
            total = fixed + round(per_file * n / done)
            other.extra.update({"measured_seconds": round(other.seconds, 2), "measured_requests": other.requests,
                                "extrapolated": True, "requests_per_second": round(other.requests / other.seconds, 2)})
            other.seconds = other.seconds * total / other.requests
            other.requests = total
            other.error = None
        log(f"  rclone: {other.seconds:.1f} s{' (extrapolated)' if other.extra.get('extrapolated') else ''}, "
            f"{other.requests} requests, {done} files done")
        if ms:
            shutil.rmtree(dest, ignore_errors=True)
    note = "rclone extrapolated from a bounded run" if other and other.extra.get("extrapolated") else ""
    bench.add_row("cold", f"cold mirror of {n} files{label}", oh, other, note=note)
    if ms:
        mirror.close()
        shutil.rmtree(mirror.root, ignore_errors=True)
    return mirror


# ---- 2. idle poll
def s_idle(bench: Any) -> None:
    mirror = ensure_mirror(bench)
    log("idle: ohsync engine pass with nothing changed (x5)")
    runs = [engine_measure(bench.srv, mirror, None, 120, "ohsync idle pass") for _ in range(5)]
    oh = runs[len(runs) // 2]
    oh.seconds = statistics.median(r.seconds or 0 for r in runs)
    oh.extra["requests_each"] = [r.requests for r in runs]
    oh.extra["transferred"] = sum(r.extra.get("uploaded", 0) + r.extra.get("downloaded", 0) for r in runs)
    log(f"  ohsync: median {oh.seconds * 1000:.0f} ms, requests per poll {oh.extra['requests_each']}")
    # the remote half alone: what a timer-driven daemon poll costs when the watcher saw nothing
    oh_remote, _ = measured(bench.srv, lambda: mirror.engine.sync([], check_remote=True), 60, "remote-only poll")
    log(f"  ohsync remote-only poll (sync([])): {oh_remote.seconds * 1000:.0f} ms, {oh_remote.requests} requests")
    lsf = copy = None
    if bench.rc.bin:
        rc_dir = ensure_rc_dir(bench)
        lsf = rclone_measure(bench.srv, bench.rc, ["lsf", "-R", bench.rc.remote(LIB)], 120, "rclone lsf")
        log(f"  rclone lsf -R: {lsf.seconds:.2f} s, {lsf.requests} requests")
        copy = rclone_measure(bench.srv, bench.rc, ["copy", bench.rc.remote(LIB), str(rc_dir)], 300, "rclone copy")
        log(f"  rclone copy (nothing to do): {copy.seconds:.2f} s, {copy.requests} requests")
    bench.add_row("idle", "idle poll (full pass)", oh, lsf, other_name="rclone lsf -R",
                 note="rclone's count includes its login (3 requests per process)")
    bench.add_row("idle", "idle poll vs rclone copy (no change)", oh, copy, other_name="rclone copy")
    bench.add_row("idle", "idle poll, remote half only: sync([])", oh_remote, None, other_name="-")


# ---- 3. detect + pull one remote change
def deep_file(bench: Any, skip: set[str]) -> str:
    files = sorted((p.relative_to(bench.tree).as_posix() for p in bench.tree.rglob("*.md")),
                   key=lambda s: (-s.count("/"), s))
    return next(f for f in files if f not in skip and not f.startswith(".trash"))


def s_detect(bench: Any) -> None:
    mirror = ensure_mirror(bench)
    rc_dir = ensure_rc_dir(bench) if bench.rc.bin else None
    used: set[str] = set()
    for variant, rargs in (("rclone copy", []), ("rclone copy --fast-list", ["--fast-list"])):
        rel = deep_file(bench, used)
        used.add(rel)
        data = bench.srv.read_file(bench.repo, "/" + rel) + f"\n- [bench] remote edit {time.time()}\n".encode()
        bench.srv.put_file(bench.repo, "/" + rel, data)
        log(f"detect: one remote change ({rel}, depth {rel.count('/')})")
        oh = engine_measure(bench.srv, mirror, None, 120, "ohsync detect")
        oh.extra["pulled_ok"] = (mirror.root / rel).read_bytes() == data
        log(f"  ohsync: {oh.seconds * 1000:.0f} ms, {oh.requests} requests, pulled={oh.extra['pulled_ok']}")
        other = None
        if rc_dir:
            other = rclone_measure(bench.srv, bench.rc, ["copy", *rargs, bench.rc.remote(LIB), str(rc_dir)], 300,
                                   variant)
            other.extra["pulled_ok"] = (rc_dir / rel).read_bytes() == data
            log(f"  {variant}: {other.seconds:.2f} s, {other.requests} requests, pulled={other.extra['pulled_ok']}")
        bench.add_row("detect", f"detect+pull 1 change in {bench.args.files}", oh, other, other_name=variant)


# ---- 4. local save -> verified remote
def s_push(bench: Any) -> None:
    mirror = ensure_mirror(bench)
    rel = "journal/" + sorted(p.name for p in (mirror.root / "journal").glob("*.md"))[-1]
    data = (mirror.root / rel).read_bytes() + f"- [bench] 本地保存 {time.time()}\n".encode()
    (mirror.root / rel).write_bytes(data)
    log(f"push: ohsync engine pass with the path ({rel})")
    oh = engine_measure(bench.srv, mirror, [rel], 120, "ohsync push")
    oh.extra["remote_ok"] = bench.srv.read_file(bench.repo, "/" + rel) == data
    log(f"  ohsync: {oh.seconds * 1000:.0f} ms, {oh.requests} requests, on server={oh.extra['remote_ok']}")
    other = None
    if bench.rc.bin:
        rc_dir = ensure_rc_dir(bench)
        rrel = "index.md"
        rdata = (rc_dir / rrel).read_bytes() + f"- [bench] rclone save {time.time()}\n".encode()
        (rc_dir / rrel).write_bytes(rdata)
        other = rclone_measure(bench.srv, bench.rc, ["copyto", str(rc_dir / rrel), bench.rc.remote(LIB, rrel)], 120,
                               "rclone copyto")
        other.extra["remote_ok"] = bench.srv.read_file(bench.repo, "/" + rrel) == rdata
        log(f"  rclone copyto: {other.seconds:.2f} s, {other.requests} requests, on server={other.extra['remote_ok']}")
    bench.add_row("push", "local save -> verified remote (1 file)", oh, other, other_name="rclone copyto",
                 note="ohsync reads back and compares sha1; rclone checks size only (no seafile hash)")
