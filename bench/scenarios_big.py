"""The ``bigfile`` scenario of ``bench/run.py``: upload and download of one
big file (``--big-mb`` MiB) by the engine, by a plain httpx stream (upload
link + multipart POST; download link + streamed GET) and by ``rclone copyto``.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import httpx

from common import BIG_LIB, MB, EngineMirror, engine_measure, log, measured, peak_rss_mib, rclone_measure, ratio

__all__ = ["s_bigfile"]


# ---- 5. big file
def s_bigfile(bench: Any) -> None:
    size = bench.args.big_mb * MB
    src = bench.work / "big-src.bin"
    with open(src, "wb") as fh:
        for _ in range(bench.args.big_mb):
            fh.write(os.urandom(MB))
    repo = bench.srv.repo_id(BIG_LIB)
    base = bench.work / "big"
    base.mkdir()
    mirror = EngineMirror(bench.srv, repo, base, "ohsync")
    mirror.sync()  # empty library: establishes the base head (not measured)
    mbps = lambda m: None if not m or not m.seconds or m.error else round(size / MB / m.seconds, 1)  # noqa: E731
    t = bench.args.timeout

    log(f"bigfile: {bench.args.big_mb} MiB upload/download")
    shutil.copyfile(src, mirror.root / "ohsync-up.bin")
    rss0 = peak_rss_mib()
    oh_up = engine_measure(bench.srv, mirror, ["ohsync-up.bin"], t, "ohsync big upload")
    oh_up.extra["bench_peak_rss_growth_mib"] = peak_rss_mib() - rss0
    bench.srv.put_file_from(repo, "/server-down.bin", src)
    rss0 = peak_rss_mib()
    oh_down = engine_measure(bench.srv, mirror, None, t, "ohsync big download")
    oh_down.extra["bench_peak_rss_growth_mib"] = peak_rss_mib() - rss0
    oh_down.extra["ok"] = (mirror.root / "server-down.bin").exists() and \
        (mirror.root / "server-down.bin").stat().st_size == size

    def httpx_up() -> None:
        with httpx.Client(timeout=600) as c:
            hdr = {"Authorization": f"Token {bench.srv.token}"}
            link = c.get(f"{bench.srv.url}/api2/repos/{repo}/upload-link/", params={"p": "/"}, headers=hdr).json()
            with open(src, "rb") as fh:
                r = c.post(link, params={"ret-json": "1"}, data={"parent_dir": "/", "replace": "1"},
                           files={"file": ("httpx-up.bin", fh, "application/octet-stream")})
            r.raise_for_status()

    def httpx_down() -> None:
        with httpx.Client(timeout=600) as c:
            hdr = {"Authorization": f"Token {bench.srv.token}"}
            link = c.get(f"{bench.srv.url}/api2/repos/{repo}/file/", params={"p": "/server-down.bin"},
                         headers=hdr).json()
            with c.stream("GET", link) as r, open(bench.work / "httpx-down.bin", "wb") as out:
                r.raise_for_status()
                for chunk in r.iter_bytes(MB):
                    out.write(chunk)

    hx_up, _ = measured(bench.srv, httpx_up, t, "httpx upload")
    hx_down, _ = measured(bench.srv, httpx_down, t, "httpx download")
    rc_up = rc_down = None
    if bench.rc.bin:
        rc_up = rclone_measure(bench.srv, bench.rc, ["copyto", str(src), bench.rc.remote(BIG_LIB, "rclone-up.bin")], t,
                               "rclone big upload")
        rc_down = rclone_measure(bench.srv, bench.rc, ["copyto", bench.rc.remote(BIG_LIB, "server-down.bin"),
                                                     str(bench.work / "rclone-down.bin")], t, "rclone big download")
    for label, m in (("ohsync up", oh_up), ("ohsync down", oh_down), ("httpx up", hx_up),
                     ("httpx down", hx_down), ("rclone up", rc_up), ("rclone down", rc_down)):
        if m:
            m.extra["MiB_per_s"] = mbps(m)
            log(f"  {label}: {m.seconds or 0:.2f} s, {mbps(m)} MiB/s, {m.requests} requests"
                + (f", peak RSS +{m.extra['bench_peak_rss_growth_mib']} MiB"
                   if "bench_peak_rss_growth_mib" in m.extra else "")
                + (f" ERROR {m.error}" if m.error else ""))
    for direction, oh, hx, rc in (("upload", oh_up, hx_up, rc_up), ("download", oh_down, hx_down, rc_down)):
        bench.add_row("bigfile", f"{bench.args.big_mb} MiB {direction}", oh, hx, other_name="plain httpx",
                     oh_value=f"{mbps(oh)} MiB/s", other_value=f"{mbps(hx)} MiB/s",
                     value_ratio=ratio(mbps(oh), mbps(hx)))
        if rc:
            bench.add_row("bigfile", f"{bench.args.big_mb} MiB {direction}", oh, rc, other_name="rclone copyto",
                         oh_value=f"{mbps(oh)} MiB/s", other_value=f"{mbps(rc)} MiB/s",
                         value_ratio=ratio(mbps(oh), mbps(rc)))
    for p in (src, bench.work / "httpx-down.bin", bench.work / "rclone-down.bin"):
        p.unlink(missing_ok=True)
    shutil.rmtree(base, ignore_errors=True)
