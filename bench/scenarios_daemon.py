"""Daemon scenarios of ``bench/run.py``: the real ``ohsync run --no-tray``
(watcher, debounce, sync worker) on the bench's library.

* ``daemon``: start to idle (the cold mirror through the daemon): seconds,
  requests, CPU seconds, peak RSS.  What the daemon costs idle is the
  ``quiet`` scenario (``scenarios_idle.py``: 5 minutes, polling and push).
* ``save``: ``--saves`` local saves (a line appended to one of 10 memory
  files at several depths, one save at a time): seconds from the write to
  the daemon's ``synced`` event for the path (sent after the read-back that
  verifies the upload; the debounce is included), p50 and p95, requests per
  save; the server's bytes are checked after each.  Compared with
  ``rclone copyto`` of one edited file (``--save-rclone-runs`` runs, p50/p95),
  which has no watcher: its figure is the upload alone.
* ``burst``: ``--burst`` memory files edited as fast as the disk allows,
  then seconds until the last of them is verified on the server, and the
  requests of the whole burst; every file's bytes on the server are checked.
  Compared with ``rclone copy --files-from LIST DIR remote:`` after the same number of edits
  (bounded by ``--rclone-burst-timeout``; past it extrapolated by requests,
  as rclone's seafile backend is paced at about 10 calls per second).

The three share one daemon (poll every ``--daemon-poll`` s), started by the
first of them and stopped before ``notify`` (and before ``burst``'s rclone
run).  While rclone runs in ``save`` the daemon is paused, so each tool's
requests are counted alone.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import LIB, Measure, log, rclone_measure

__all__ = ["ensure_daemon", "stop_daemon", "s_daemon", "s_save", "s_burst", "DAEMON_SCENARIOS"]

#: The scenarios that share :func:`ensure_daemon`'s daemon.
DAEMON_SCENARIOS = ("daemon", "save", "burst")


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def ensure_daemon(bench: Any) -> Any:
    """The shared daemon, started (and its cold start measured) on first use.

    :raises RuntimeError: ``ohsync run --no-tray`` is not available or never settled.
    """
    from daemon_proc import BenchDaemon

    d = getattr(bench, "daemon", None)
    if d is not None and d.alive():
        return d
    r = subprocess.run([sys.executable, "-m", "ohsync.daemon.cli", "run", "--help"], capture_output=True,
                       text=True, timeout=60)
    if r.returncode != 0 or "--no-tray" not in r.stdout:
        raise RuntimeError(f"`ohsync run --no-tray` not available (exit {r.returncode})")
    d = BenchDaemon(bench.srv, bench.work, f"daemon-{int(time.time())}", {"poll_interval": bench.args.daemon_poll})
    bench.daemon = d
    bench.srv.reset()
    t0 = time.perf_counter()
    d.start()
    d.wait_settled(bench.args.timeout)
    cold_s = time.perf_counter() - t0
    c = bench.srv.counters()
    bench.daemon_cold = Measure(seconds=cold_s, requests=c["total"], endpoints=c["endpoints"],
                                extra={"cpu_seconds": round(d.cpu_s(), 2),
                                       "peak_rss_mib": d.status_mib("VmHWM")})
    log(f"daemon: settled after {cold_s:.1f} s ({c['total']} requests, {d.cpu_s():.1f} CPU s)")
    time.sleep(1.0)
    return d


def stop_daemon(bench: Any) -> None:
    """Stop the shared daemon, if one runs."""
    d = getattr(bench, "daemon", None)
    if d is not None:
        d.stop()
        bench.daemon = None


def s_daemon(bench: Any) -> None:
    """The shared daemon's cold start (its idle cost over 5 minutes: the ``quiet`` scenario)."""
    ensure_daemon(bench)
    cold = bench.daemon_cold
    bench.add_row("daemon", f"daemon start to idle, {bench.args.files} files", cold, None, other_name="-",
                  oh_value=f"{cold.extra['cpu_seconds']:.1f} CPU s, peak RSS {cold.extra['peak_rss_mib']} MiB")


def _memory_files(root: Path) -> list[str]:
    """Memory files of the mirror (not ``Files/``, not dot-folders), deepest first, then by name."""
    rels = [p.relative_to(root).as_posix() for p in root.rglob("*.md") if p.is_file()]
    rels = [r for r in rels if not r.startswith(("Files/", ".")) and "/." not in r]
    return sorted(rels, key=lambda r: (-r.count("/"), r))


def _on_server(bench: Any, rel: str, path: Path, data: bytes) -> bool:
    """Whether the server holds the mirror's file and it has the edit: the bytes written
    (``data``) end in the edit's line, which must be in the server's copy, and the server's
    copy must equal the local file as it is now (the daemon stamps a memory file's
    ``modified:``/``origin:`` in its front matter on a local save, locally and up)."""
    server = bench.srv.read_file(bench.repo, "/" + rel)
    line = data.rstrip(b"\n").rsplit(b"\n", 1)[-1]
    return line in server and server == path.read_bytes()


def _spread(rels: list[str], n: int) -> list[str]:
    """``n`` paths spread over the depths of ``rels``."""
    step = max(1, len(rels) // n)
    return rels[::step][:n]


def _timed_saves(bench: Any, d: Any, tap: Any, rels: list[str]) -> tuple[list[float], list[int], list[str], int]:
    """Save each of ``rels`` in turn (one line appended), each timed from the
    write to the daemon's verified event, with its requests counted.

    :returns: ``(seconds, requests, paths wrong on the server, saves not verified)``.
    """
    seconds: list[float] = []
    requests: list[int] = []
    wrong: list[str] = []
    missing = 0
    for i, rel in enumerate(rels):
        path = d.mirror / rel
        data = path.read_bytes() + f"- [bench] 保存 {i} {time.time():.3f}\n".encode()
        bench.srv.reset()
        t0 = time.perf_counter()
        path.write_bytes(data)
        done = tap.wait_up({rel}, t0, 60)
        if done is None:
            missing += 1
            log(f"  save {i}: {rel} not verified within 60 s")
            continue
        seconds.append(done - t0)
        time.sleep(0.3)  # the pass that pushed it finishes; its requests are counted to this save
        requests.append(bench.srv.counters()["total"])
        if not _on_server(bench, rel, path, data):
            wrong.append(rel)
    return seconds, requests, wrong, missing


def s_save(bench: Any) -> None:
    d = ensure_daemon(bench)
    tap = d.tap()
    targets = _spread(_memory_files(d.mirror), 10)
    n = bench.args.saves
    log(f"save: {n} local saves through the daemon (one at a time, {len(targets)} files, depth "
        f"{targets[-1].count('/')}-{targets[0].count('/')})")
    seconds, requests, wrong, missing = _timed_saves(bench, d, tap, [targets[i % len(targets)] for i in range(n)])
    if not seconds:
        raise RuntimeError("no save was verified on the server")
    p50, p95 = statistics.median(seconds), _pct(seconds, 0.95)
    m = Measure(seconds=p50, requests=int(statistics.median(requests)),
                extra={"p95_seconds": round(p95, 3), "max_seconds": round(max(seconds), 3), "saves": len(seconds),
                       "not_verified": missing, "server_bytes_wrong": wrong, "requests_each": requests,
                       "seconds_each": [round(s, 3) for s in seconds]})
    log(f"  ohsync: p50 {p50:.2f} s, p95 {p95:.2f} s, max {max(seconds):.2f} s, "
        f"{m.requests} requests per save (median); not verified {missing}, wrong on server {len(wrong)}")
    other = None
    if bench.rc.bin and bench.args.save_rclone_runs:
        from scenarios_engine import ensure_rc_dir

        d.pause()
        try:
            rc_dir = ensure_rc_dir(bench)
            runs: list[Measure] = []
            for i in range(bench.args.save_rclone_runs):
                rel = targets[i % len(targets)]
                rdata = (rc_dir / rel).read_bytes() + f"- [bench] rclone 保存 {i} {time.time():.3f}\n".encode()
                (rc_dir / rel).write_bytes(rdata)
                r = rclone_measure(bench.srv, bench.rc, ["copyto", str(rc_dir / rel), bench.rc.remote(LIB, rel)], 120,
                                   "rclone copyto")
                r.extra["remote_ok"] = bench.srv.read_file(bench.repo, "/" + rel) == rdata
                runs.append(r)
        finally:
            d.resume(bench.args.timeout)
        secs = [r.seconds or 0.0 for r in runs]
        other = Measure(seconds=statistics.median(secs), requests=int(statistics.median(r.requests or 0 for r in runs)),
                        extra={"p95_seconds": round(_pct(secs, 0.95), 3), "runs": len(runs),
                               "remote_ok": all(r.extra["remote_ok"] for r in runs),
                               "errors": [r.error for r in runs if r.error][:3]})
        log(f"  rclone copyto: p50 {other.seconds:.2f} s, p95 {other.extra['p95_seconds']:.2f} s, "
            f"{other.requests} requests ({len(runs)} runs)")
    bench.add_row("save", f"local save -> verified on server, daemon (p50 of {len(seconds)})", m, other,
                  other_name="rclone copyto (p50)", oh_value=f"p95 {p95:.2f} s",
                  other_value=f"p95 {other.extra['p95_seconds']:.2f} s" if other else None,
                  note="ohsync: from the write to the daemon's verified event, the watcher's debounce included; "
                       "rclone: the upload of one file, no watcher")
    again = bench.args.saves_again
    if again:
        # one file saved over and over, as an editor's autosave does: most saves land before the next poll
        log(f"save: one file saved {again} times in a row (poll every {bench.args.daemon_poll:g} s)")
        secs, reqs, wrong, missing = _timed_saves(bench, d, tap, [targets[0]] * again)
        if secs:
            m = Measure(seconds=statistics.median(secs), requests=int(statistics.median(reqs)),
                        extra={"p95_seconds": round(_pct(secs, 0.95), 3), "saves": len(secs), "not_verified": missing,
                               "server_bytes_wrong": wrong, "requests_each": reqs})
            log(f"  ohsync: p50 {m.seconds:.2f} s, {m.requests} requests per save (median), each {reqs}")
            bench.add_row("save", f"the same file saved again at once, daemon (p50 of {len(secs)})", m, None,
                          other_name="-", oh_value=f"p95 {m.extra['p95_seconds']:.2f} s; requests each {reqs}")


def s_burst(bench: Any) -> None:
    d = ensure_daemon(bench)
    tap = d.tap()
    files = _memory_files(d.mirror)
    n = min(bench.args.burst, len(files))
    chosen = files[:n]
    log(f"burst: {n} local edits as fast as possible, then until all are verified on the server")
    datas = {rel: (d.mirror / rel).read_bytes() + f"- [bench] 批量修改 {time.time():.3f}\n".encode() for rel in chosen}
    bench.srv.reset()
    t0 = time.perf_counter()
    for rel, data in datas.items():
        (d.mirror / rel).write_bytes(data)
    written = time.perf_counter() - t0
    done = tap.wait_up(set(chosen), t0, bench.args.timeout)
    elapsed = (done or time.perf_counter()) - t0
    time.sleep(1.0)
    c = bench.srv.counters()
    wrong = [rel for rel, data in datas.items() if not _on_server(bench, rel, d.mirror / rel, data)]
    verified = sum(1 for rel in chosen if tap.up.get(rel, 0.0) > t0)
    m = Measure(seconds=elapsed, requests=c["total"], endpoints=c["endpoints"],
                extra={"files": n, "write_seconds": round(written, 3), "verified": verified,
                       "server_bytes_wrong": len(wrong), "requests_per_file": round(c["total"] / max(1, n), 3)})
    if done is None:
        m.error = f"only {verified} of {n} verified within {bench.args.timeout:.0f} s"
    log(f"  ohsync: {elapsed:.1f} s ({written:.1f} s of writing), {c['total']} requests "
        f"({m.extra['requests_per_file']} per file), verified {verified}/{n}, wrong on server {len(wrong)}")
    other = None
    if bench.rc.bin:
        from scenarios_engine import ensure_rc_dir

        stop_daemon(bench)  # the last scenario of the shared daemon: it would pull what rclone pushes
        rc_dir = ensure_rc_dir(bench)
        # n other files (rclone's copy of those ohsync just changed is older than the server's)
        rchosen = (files[n:] + files[:n])[:n]
        for rel in rchosen:
            p = rc_dir / rel
            p.write_bytes(p.read_bytes() + f"- [bench] rclone 批量修改 {time.time():.3f}\n".encode())
        listing = bench.work / "rclone-burst-files.txt"
        listing.write_text("".join(rel + "\n" for rel in rchosen), encoding="utf-8")
        other = rclone_measure(bench.srv, bench.rc, ["copy", "--files-from", str(listing), str(rc_dir),
                                                     bench.rc.remote(LIB)], bench.args.rclone_burst_timeout,
                               "rclone burst")
        uploads = sum(v for k, v in other.endpoints.items() if k.startswith("POST /seafhttp/"))
        if other.extra.get("timed_out") and uploads:
            fixed = other.requests - 2 * uploads  # login and listings; then link + POST per file
            total = fixed + 2 * len(rchosen)
            other.extra.update({"measured_seconds": round(other.seconds or 0, 2),
                                "measured_requests": other.requests, "files_done": uploads, "extrapolated": True})
            other.seconds = (other.seconds or 0) * total / max(1, other.requests or 1)
            other.requests = total
            other.error = None
        other.extra["requests_per_file"] = round((other.requests or 0) / max(1, len(rchosen)), 3)
        log(f"  rclone copy: {other.seconds:.1f} s{' (extrapolated)' if other.extra.get('extrapolated') else ''}, "
            f"{other.requests} requests")
    bench.add_row("burst", f"{n} local edits -> all verified, daemon", m, other, other_name="rclone copy",
                  oh_value=f"{m.extra['requests_per_file']} req/file",
                  other_value=f"{other.extra['requests_per_file']} req/file" if other else None,
                  note="rclone extrapolated from a bounded run" if other and other.extra.get("extrapolated") else "")
