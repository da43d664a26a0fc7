"""The ``bigfile`` scenario of ``bench/run.py``: large files, with no added
latency and with ``--latency`` ms per request.

* one big file (``--big-mb`` MiB) up and down: an engine pass uploading it as
  a new file, a pass downloading one put by another client; a plain httpx
  stream (upload link + one multipart POST; download link + streamed GET);
  ``rclone copyto``;
* a cold mirror of ``--cold-big-files`` files of ``--cold-big-mb`` MiB
  (10 × 50), at ``--latency`` ms only: an engine pass into an empty folder;
  plain httpx streamed downloads of the same files one after the other
  (download link + GET each); ``rclone copy``.

The engine mirrors have the daemon's transfer pool (``common.TRANSFERS``).
Every file's content is unique (the engine never finds its bytes already
on the other side).
"""

from __future__ import annotations

import os
import resource
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from real_server import counted_client

from common import BIG_LIB, MB, EngineMirror, Measure, engine_measure, log, measured, peak_rss_mib, rclone_measure, ratio

__all__ = ["s_bigfile"]

COLD_LIB = "Bench-Big-Cold"
#: where httpx and rclone upload to, so the engine's library holds only its own files
OTHER_LIB = "Bench-Big-Others"


def _latency(bench: Any, ms: float) -> None:
    from speed import set_latency

    set_latency(bench, ms)


def _unique_copy(src: Path, dest: Path, tag: str, extra: int = 0) -> None:
    """``src`` copied to ``dest`` with its first bytes replaced by ``tag``
    (content of its own) and ``extra`` bytes appended."""
    shutil.copyfile(src, dest)
    with open(dest, "r+b") as fh:
        fh.write(tag.encode().ljust(64, b"."))
        if extra:
            fh.seek(0, os.SEEK_END)
            fh.write(b"\n" * extra)


def _random_file(path: Path, mib: int) -> None:
    with open(path, "wb") as fh:
        for _ in range(mib):
            fh.write(os.urandom(MB))


def _mbps(size: int, m: Measure | None) -> float | None:
    return None if not m or not m.seconds or m.error else round(size / MB / m.seconds, 1)


def _proc_cpu(pid: int) -> float:
    """utime + stime of process ``pid`` so far, seconds (0 when unreadable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def _cpu(bench: Any, step: Callable[[], Measure]) -> Measure:
    """Run a measured step and record where the CPU went: ``client_cpu_s`` (this
    process, all threads, plus children that ended meanwhile, i.e. rclone) and
    ``server_cpu_s`` (devserver's process)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = getattr(bench.srv, "proc", None)  # None: a server of one's own, its CPU is not ours to read
    srv0 = _proc_cpu(proc.pid) if proc else 0.0
    m = step()
    own2 = resource.getrusage(resource.RUSAGE_SELF)
    kids2 = resource.getrusage(resource.RUSAGE_CHILDREN)
    m.extra["client_cpu_s"] = round(own2.ru_utime + own2.ru_stime - own.ru_utime - own.ru_stime
                                    + kids2.ru_utime + kids2.ru_stime - kids.ru_utime - kids.ru_stime, 3)
    if proc:
        m.extra["server_cpu_s"] = round(_proc_cpu(proc.pid) - srv0, 3)
    return m


def _log(label: str, m: Measure, size: int) -> None:
    log(f"  {label}: {m.seconds or 0:.2f} s, {_mbps(size, m)} MiB/s, {m.requests} requests"
        + (f", CPU s client {m.extra['client_cpu_s']} / devserver {m.extra.get('server_cpu_s', '-')}"
           if "client_cpu_s" in m.extra else "")
        + (f", peak RSS +{m.extra['bench_peak_rss_growth_mib']} MiB" if "bench_peak_rss_growth_mib" in m.extra
           else "")
        + (f" ERROR {m.error}" if m.error else ""))


def _rows(bench: Any, figure: str, size: int, oh: Measure, others: list[tuple[str, Measure | None]]) -> None:
    for name, other in others:
        if other is None:
            continue
        oh.extra["MiB_per_s"], other.extra["MiB_per_s"] = _mbps(size, oh), _mbps(size, other)
        bench.add_row("bigfile", figure, oh, other, other_name=name, oh_value=f"{_mbps(size, oh)} MiB/s",
                      other_value=f"{_mbps(size, other)} MiB/s", value_ratio=ratio(_mbps(size, oh), _mbps(size, other)))


def s_bigfile(bench: Any) -> None:
    mib = bench.args.big_mb
    size = mib * MB
    src = bench.work / "big-src.bin"
    _random_file(src, mib)
    repo, other = bench.srv.repo_id(BIG_LIB), bench.srv.repo_id(OTHER_LIB)
    base = bench.work / "big"
    base.mkdir()
    mirror = EngineMirror(bench.srv, repo, base, "ohsync")
    mirror.sync()  # empty library: establishes the base head (not measured)
    t = bench.args.timeout
    hdr = {"Authorization": f"Token {bench.srv.token}"}
    _warm_up(bench, other, src, hdr)
    try:
        for n, ms in enumerate(sorted({0.0, float(bench.args.latency)})):
            label = f"{ms:g} ms" if ms else "no latency"
            tag = f"{int(ms)}"
            log(f"bigfile: {mib} MiB upload/download, {label}")
            # a size no base has: a new file of the same size as a synced one is read
            # and hashed first, in case it is that file moved (engine/sync/moves.py)
            _unique_copy(src, mirror.root / f"ohsync-up-{tag}.bin", f"ohsync up {tag}", extra=n + 1)
            down = bench.work / f"down-src-{tag}.bin"
            _unique_copy(src, down, f"server down {tag}")

            os.sync()  # the copies' writeback must not slow whichever step comes first
            _latency(bench, ms)
            rss0 = peak_rss_mib()
            oh_up = _cpu(bench, lambda: engine_measure(bench.srv, mirror, [f"ohsync-up-{tag}.bin"], t,
                                                         "ohsync big upload"))
            oh_up.extra["bench_peak_rss_growth_mib"] = peak_rss_mib() - rss0
            bench.srv.put_file_from(repo, f"/server-down-{tag}.bin", down)  # by another client
            down.unlink()
            rss0 = peak_rss_mib()
            oh_down = _cpu(bench, lambda: engine_measure(bench.srv, mirror, None, t, "ohsync big download"))
            oh_down.extra["bench_peak_rss_growth_mib"] = peak_rss_mib() - rss0
            got = mirror.root / f"server-down-{tag}.bin"
            oh_down.extra["ok"] = got.exists() and got.stat().st_size == size

            def httpx_up() -> None:
                with counted_client() as c:
                    link = c.get(f"{bench.srv.url}/api2/repos/{other}/upload-link/", params={"p": "/"},
                                 headers=hdr).json()
                    with open(src, "rb") as fh:
                        r = c.post(link, params={"ret-json": "1"}, data={"parent_dir": "/", "replace": "1"},
                                   files={"file": (f"httpx-up-{tag}.bin", fh, "application/octet-stream")})
                    r.raise_for_status()

            def httpx_down() -> None:
                with counted_client() as c:
                    _stream_down(c, bench.srv.url, repo, f"/server-down-{tag}.bin", bench.work / "httpx-down.bin",
                                 hdr)

            os.sync()
            hx_up = _cpu(bench, lambda: measured(bench.srv, httpx_up, t, "httpx upload")[0])
            hx_down = _cpu(bench, lambda: measured(bench.srv, httpx_down, t, "httpx download")[0])
            rc_up = rc_down = None
            if bench.rc.bin:
                rc_up = _cpu(bench, lambda: rclone_measure(
                    bench.srv, bench.rc, ["copyto", str(src), bench.rc.remote(OTHER_LIB, f"rclone-up-{tag}.bin")],
                    t, "rclone big upload"))
                rc_down = _cpu(bench, lambda: rclone_measure(
                    bench.srv, bench.rc, ["copyto", bench.rc.remote(BIG_LIB, f"server-down-{tag}.bin"),
                                          str(bench.work / "rclone-down.bin")], t, "rclone big download"))
            _latency(bench, 0)
            for name, m in (("ohsync up", oh_up), ("ohsync down", oh_down), ("httpx up", hx_up),
                            ("httpx down", hx_down), ("rclone up", rc_up), ("rclone down", rc_down)):
                if m:
                    _log(name, m, size)
            _rows(bench, f"{mib} MiB upload, {label}", size, oh_up, [("plain httpx", hx_up), ("rclone copyto", rc_up)])
            _rows(bench, f"{mib} MiB download, {label}", size, oh_down,
                  [("plain httpx", hx_down), ("rclone copyto", rc_down)])
            for p in (bench.work / "httpx-down.bin", bench.work / "rclone-down.bin"):
                p.unlink(missing_ok=True)
    finally:
        _latency(bench, 0)
        mirror.close()
        src.unlink(missing_ok=True)
        shutil.rmtree(base, ignore_errors=True)
    if bench.args.cold_big_files and bench.args.cold_big_mb:
        _cold_big(bench)


def _warm_up(bench: Any, repo: str, src: Path, hdr: dict[str, str]) -> None:
    """One plain upload and download of ``src``, not measured: devserver's first
    request of this size pays for growing its heap (about +1 s here), which
    would otherwise fall on whichever tool goes first."""
    with counted_client() as c:
        link = c.get(f"{bench.srv.url}/api2/repos/{repo}/upload-link/", params={"p": "/"}, headers=hdr).json()
        with open(src, "rb") as fh:
            c.post(link, params={"ret-json": "1"}, data={"parent_dir": "/", "replace": "1"},
                   files={"file": ("warm-up.bin", fh, "application/octet-stream")}).raise_for_status()
        _stream_down(c, bench.srv.url, repo, "/warm-up.bin", bench.work / "warm-up.bin", hdr)
    (bench.work / "warm-up.bin").unlink()


def _stream_down(c: httpx.Client, url: str, repo: str, path: str, dest: Path, hdr: dict[str, str]) -> None:
    """A plain streamed download: the download link, then one GET written in 1 MiB pieces."""
    link = c.get(f"{url}/api2/repos/{repo}/file/", params={"p": path}, headers=hdr).json()
    with c.stream("GET", link) as r, open(dest, "wb") as out:
        r.raise_for_status()
        for chunk in r.iter_bytes(MB):
            out.write(chunk)


def _cold_big(bench: Any) -> None:
    """Cold mirror of N large files: engine vs plain httpx streams vs rclone copy."""
    n, mib = bench.args.cold_big_files, bench.args.cold_big_mb
    total = n * mib * MB
    repo = bench.srv.repo_id(COLD_LIB)
    names = [f"/lecture-{i:02d}.bin" for i in range(n)]
    one = bench.work / "cold-big-src.bin"
    _random_file(one, mib)
    for i, name in enumerate(names):  # n files of unique content, seeded as another client
        _unique_copy(one, bench.work / "cold-big-part.bin", f"cold {i}")
        bench.srv.put_file_from(repo, name, bench.work / "cold-big-part.bin")
    one.unlink()
    (bench.work / "cold-big-part.bin").unlink()
    t = bench.args.timeout
    hdr = {"Authorization": f"Token {bench.srv.token}"}
    figure = f"cold mirror of {n} × {mib} MiB"
    ms = float(bench.args.latency)  # one round, with latency: like a server across a network
    label = f"{ms:g} ms" if ms else "no latency"
    log(f"bigfile: {figure}, {label}")
    base = bench.work / f"cold-big-{int(ms)}"
    base.mkdir()
    mirror = EngineMirror(bench.srv, repo, base, "ohsync")
    plain_dir = base / "httpx"
    plain_dir.mkdir()

    def plain() -> None:
        with counted_client() as c:
            for name in names:
                _stream_down(c, bench.srv.url, repo, name, plain_dir / name.lstrip("/"), hdr)

    try:
        _latency(bench, ms)
        oh = _cpu(bench, lambda: engine_measure(bench.srv, mirror, None, t, "ohsync cold big"))
        oh.extra["files_local"] = sum(1 for name in names if (mirror.root / name.lstrip("/")).is_file()
                                      and (mirror.root / name.lstrip("/")).stat().st_size == mib * MB)
        hx = _cpu(bench, lambda: measured(bench.srv, plain, t, "httpx cold big")[0])
        rc = None
        if bench.rc.bin:
            rc = _cpu(bench, lambda: rclone_measure(bench.srv, bench.rc, ["copy", bench.rc.remote(COLD_LIB),
                                                                          str(base / "rclone")], t, "rclone cold big"))
    finally:
        _latency(bench, 0)
        mirror.close()
    for name, m in (("ohsync", oh), ("httpx (one after the other)", hx), ("rclone copy", rc)):
        if m:
            _log(name, m, total)
    _rows(bench, f"{figure}, {label}", total, oh, [("plain httpx", hx), ("rclone copy", rc)])
    shutil.rmtree(base, ignore_errors=True)
