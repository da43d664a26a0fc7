"""Scenarios of ``bench/run.py`` for new-file uploads and push notifications.

* ``upload``: cold upload of the N generated files into an empty library:
  the engine (new files batched per folder, a pool of 4 upload requests, as
  the daemon runs it; median of 3 runs) vs ``rclone copy DIR remote:`` with
  its default 4 transfers and with ``--transfers 16``; with no added latency
  and with ``--latency`` ms per request (devserver's latency fault, as a real
  server over a network).  rclone runs are bounded by
  ``--rclone-upload-timeout`` and extrapolated by requests when cut short
  (its seafile backend paces itself at about 10 calls per second).
  Then once more, engine only and without latency, for the shape measured
  on a real server: N files of 1–4 KiB in 180 folders three levels deep
  (5 × 5 × 6 leaf folders holding the files), with the request count
  against its target (≤ 200 for 3,000 files).
* ``notify``: the real daemon with devserver's notification service up:
  seconds from a remote change 3 folders deep to the file being local (p50
  and p95 of ``--notify-changes`` changes), requests per change.  Its idle
  cost (safety poll against polling) is the ``quiet`` scenario.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["s_upload", "s_notify", "set_latency"]


def set_latency(bench: Any, ms: float) -> None:
    """Every request to devserver waits ``ms`` first (0: no added latency).

    A server of one's own has no fault injection: nothing to do (run.py sets
    ``--latency 0`` for it, so no scenario asks for latency there)."""
    if not bench.srv.faults:
        return
    bench.srv.http.delete("/faults")
    if ms:
        bench.srv.http.post("/faults", json={"method": None, "path_regex": "", "latency": ms / 1000.0,
                                             "count": 10**9})


def s_upload(bench: Any) -> None:
    from common import EngineMirror, Measure, log, measured, rclone_measure, report_extra

    n = bench.args.files
    runs = bench.args.runs
    for ms in sorted({0.0, float(bench.args.latency)}):
        label = f"{ms:g} ms" if ms else "no latency"
        times: list[Measure] = []
        for i in range(runs):
            name = f"Upload-{int(ms)}-{i}"
            repo = bench.srv.repo_id(name)
            base = bench.work / f"upload-{int(ms)}-{i}"
            base.mkdir()
            mirror = EngineMirror(bench.srv, repo, base, "m")
            mirror.sync()  # empty library: the base head (not measured)
            shutil.copytree(bench.tree, mirror.root, dirs_exist_ok=True)
            set_latency(bench, ms)
            # the mirror's transfer pool: 4 upload requests in flight, as the daemon runs it
            m, report = measured(bench.srv, mirror.sync, bench.args.timeout, "ohsync upload")
            set_latency(bench, 0)
            m.extra.update(report_extra(report))
            m.extra["requests_per_file"] = round((m.requests or 0) / max(1, m.extra.get("uploaded", 0)), 3)
            log(f"upload ({label}) run {i + 1}: ohsync {m.seconds or 0:.1f} s, {m.requests} requests, "
                f"{m.extra.get('uploaded')} files, {m.extra['requests_per_file']} requests/file")
            times.append(m)
            mirror.close()
            shutil.rmtree(base, ignore_errors=True)
        oh = sorted(times, key=lambda m: m.seconds or 0)[len(times) // 2]
        oh.extra["seconds_each"] = [round(m.seconds or 0, 2) for m in times]
        if not bench.rc.bin:
            bench.add_row("upload", f"cold upload of {n} new files, {label}", oh, None, other_name="-",
                          oh_value=f"{oh.extra['requests_per_file']} req/file")
            continue
        for transfers in (None, 16):
            variant = "rclone copy" + (f" --transfers {transfers}" if transfers else "")
            lib = f"Upload-rclone-{int(ms)}-{transfers or 4}"
            bench.srv.repo_id(lib)
            args = ["copy", *(["--transfers", str(transfers)] if transfers else []), str(bench.tree),
                    bench.rc.remote(lib)]
            set_latency(bench, ms)
            other = rclone_measure(bench.srv, bench.rc, args, bench.args.rclone_upload_timeout, variant)
            set_latency(bench, 0)
            uploads = sum(v for k, v in other.endpoints.items() if k.startswith("POST /seafhttp/upload"))
            if other.extra.get("timed_out") and uploads:
                fixed = other.requests - 2 * uploads  # login, listings, mkdirs; then link + POST per file
                total = fixed + 2 * n
                other.extra.update({"measured_seconds": round(other.seconds, 2),
                                    "measured_requests": other.requests, "files_done": uploads,
                                    "extrapolated": True})
                other.seconds = other.seconds * total / max(1, other.requests)
                other.requests = total
                other.error = None
            other.extra["requests_per_file"] = round(other.requests / n, 3)
            log(f"upload ({label}): {variant} {other.seconds:.1f} s"
                f"{' (extrapolated)' if other.extra.get('extrapolated') else ''}, {other.requests} requests")
            bench.add_row("upload", f"cold upload of {n} new files, {label}", oh, other, other_name=variant,
                          oh_value=f"{oh.extra['requests_per_file']} req/file",
                          other_value=f"{other.extra['requests_per_file']} req/file",
                          note="rclone extrapolated from a bounded run" if other.extra.get("extrapolated") else "")
    _shaped_upload(bench)


#: The real-server shape of the cold upload: top × middle × leaf folders (180 in all).
SHAPE = (5, 5, 6)
#: Requests a cold upload of 3,000 files in that shape may cost.
SHAPE_TARGET = 200


def shaped_tree(dest: Path, n: int, seed: int) -> int:
    """``n`` files of 1–4 KiB spread evenly over the leaf folders of :data:`SHAPE`; returns the folder count."""
    import random

    rnd = random.Random(seed)
    top, mid, leaf = SHAPE
    leaves = [f"t{a}/m{b}/l{c}" for a in range(top) for b in range(mid) for c in range(leaf)]
    for i in range(n):
        path = dest / leaves[i % len(leaves)] / f"note-{i:05d}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rnd.randbytes(rnd.randint(1024, 4096)))
    return top + top * mid + len(leaves)


def _shaped_upload(bench: Any) -> None:
    """The cold upload in the real-server shape (see the module docstring)."""
    from common import EngineMirror, log, measured, report_extra

    n = bench.args.files
    src = bench.work / "upload-shape-src"
    folders = shaped_tree(src, n, bench.args.seed)
    repo = bench.srv.repo_id("Upload-shape")
    base = bench.work / "upload-shape"
    base.mkdir()
    mirror = EngineMirror(bench.srv, repo, base, "m")
    try:
        mirror.sync()  # empty library: the base head (not measured)
        shutil.copytree(src, mirror.root, dirs_exist_ok=True)
        m, report = measured(bench.srv, mirror.sync, bench.args.timeout, "ohsync upload (shape)")
    finally:
        mirror.close()
        shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(src, ignore_errors=True)
    m.extra.update(report_extra(report))
    m.extra["requests_per_file"] = round((m.requests or 0) / max(1, m.extra.get("uploaded", 0)), 3)
    target = SHAPE_TARGET * n / 3000
    met = "met" if (m.requests or 0) <= target else "not met"
    log(f"upload (real-server shape, {folders} folders): ohsync {m.seconds or 0:.1f} s, {m.requests} requests, "
        f"{m.extra.get('uploaded')} files")
    bench.add_row("upload", f"cold upload of {n} files in {folders} folders 3 deep (real-server shape), no latency",
                  m, None, other_name="-", oh_value=f"{m.requests} requests (target ≤ {target:g}: {met})",
                  note=f"{m.extra['requests_per_file']} req/file")


def s_notify(bench: Any) -> None:
    """The daemon with push: remote change → local latency and requests per change."""
    import tomli_w

    from common import LIB, USER, Measure, daemon_env, log, stop_process
    from ohsync.daemon.protocol import Method, RpcClient

    srv = bench.srv
    srv.http.post("/notifications", json={"state": "up"})
    root = bench.work / "notify"
    root.mkdir()
    sock_dir = Path(tempfile.mkdtemp(prefix="ohn-", dir="/tmp"))
    env = daemon_env(root, sock_dir)
    poll, safety = 30.0, 300.0
    (root / "config.toml").write_text(tomli_w.dumps({
        "server": srv.url, "username": USER, "poll_interval": poll, "push_safety_poll": safety,
        "state_dir": str(root / "state"), "mirror": [{"library": LIB, "local": str(root / "mirror")}]}),
        encoding="utf-8")
    subprocess.run([sys.executable, "-c", "import sys; from ohsync.daemon import credentials; "
                    "credentials.save_token(sys.argv[1], sys.argv[2], sys.argv[3])", srv.url, USER, srv.token],
                   env=env, check=True, timeout=60)
    rpc = RpcClient(sock_dir / "ohsync" / "ohsync.sock", timeout=30)
    with open(root / "daemon-output.log", "wb") as out:  # the daemon's own copy stays open
        proc = subprocess.Popen([sys.executable, "-m", "ohsync.daemon.cli", "run", "--no-tray"], env=env,
                                stdout=out, stderr=subprocess.STDOUT, cwd=root)

    def status() -> dict[str, Any]:
        try:
            return rpc.call(Method.STATUS)
        except Exception:  # noqa: BLE001 - not up yet
            return {}

    try:
        deadline = time.monotonic() + bench.args.timeout
        while time.monotonic() < deadline and proc.poll() is None:
            st = status()
            if st.get("state") == "idle" and st.get("notifications") == "push":
                break
            time.sleep(0.2)
        else:
            raise RuntimeError(f"the daemon never reached idle with push; see {root / 'daemon-output.log'}")
        deep = sorted((p.relative_to(bench.tree).as_posix() for p in bench.tree.rglob("*.md")
                       if p.relative_to(bench.tree).as_posix().count("/") >= 3 and ".trash" not in p.parts))
        delays, requests = [], []
        for i in range(bench.args.notify_changes):
            rel = deep[i % len(deep)]
            data = srv.read_file(bench.repo, "/" + rel) + f"\n- [bench] pushed change {i} {time.time()}\n".encode()
            time.sleep(0.3)  # let the previous pass settle
            srv.reset()
            sent = time.perf_counter()
            srv.put_file(bench.repo, "/" + rel, data)
            target = root / "mirror" / rel
            while time.perf_counter() - sent < 30:
                try:
                    if target.read_bytes() == data:
                        break
                except OSError:
                    pass
                time.sleep(0.005)
            delays.append(time.perf_counter() - sent)
            time.sleep(0.2)
            requests.append(srv.counters()["total"])  # the control API itself is not counted
        delays.sort()
        p50 = statistics.median(delays)
        p95 = delays[min(len(delays) - 1, round(0.95 * (len(delays) - 1)))]
        log(f"notify: remote change -> local p50 {p50 * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, "
            f"requests per change {statistics.median(requests)}")
        m = Measure(seconds=p50, requests=int(statistics.median(requests)),
                    extra={"p95_seconds": round(p95, 3), "changes": len(delays), "requests_each": requests,
                           "depth": deep[0].count("/")})
        bench.add_row("notify", f"remote change {deep[0].count('/')} deep -> local, push (p50)", m, None,
                      other_name="-", oh_value=f"p95 {p95:.2f} s")
    finally:
        stop_process(proc)
        shutil.rmtree(sock_dir, ignore_errors=True)
        srv.http.post("/notifications", json={"state": "absent"})
