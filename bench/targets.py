"""The speed targets as rows of ``bench/RESULTS.md``: figure, target, met.

Each target reads the rows of one bench run (``Bench.rows``: dicts with
``scenario``, ``figure``, ``ohsync``/``other`` measures and their ratios,
see ``bench/run.py``); a target whose scenario did not run says so.  When a
target is not met, ``why`` names where the time goes (measured in earlier
profiles, ``bench/README.md``), so a reader need not guess.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["TARGETS", "Target", "targets_table", "update_targets"]

Row = dict[str, Any]


@dataclass(frozen=True)
class Target:
    """One target: ``measure(rows)`` -> ``(figure text, met)`` or None
    when the run has no row for it; ``why`` is shown when it is not met."""

    name: str
    target: str
    measure: Callable[[list[Row]], tuple[str, bool] | None]
    why: str = ""


def _find(rows: list[Row], scenario: str, figure: str = "", other: str | None = None) -> Row | None:
    """The first measured row of ``scenario`` whose figure contains ``figure``
    (and, when given, compared with the tool ``other``)."""
    for row in rows:
        if row.get("scenario") != scenario or row.get("skipped") or figure not in row.get("figure", ""):
            continue
        if other is not None and row.get("other_tool") != other:
            continue
        if (row.get("ohsync") or {}).get("seconds") is None:
            continue
        return row
    return None


def _oh(row: Row, key: str) -> Any:
    return (row.get("ohsync") or {}).get(key)


def _other(row: Row, key: str) -> Any:
    return (row.get("other") or {}).get(key)


def _cold_requests(rows: list[Row]) -> tuple[str, bool] | None:
    row = _find(rows, "cold", "cold mirror of")
    if row is None:
        return None
    return f"{_oh(row, 'requests')} requests ({row['figure']})", _oh(row, "requests") <= 10


def _upload_requests(rows: list[Row]) -> tuple[str, bool] | None:
    row = _find(rows, "upload", "no latency")
    if row is None:
        return None
    return f"{_oh(row, 'requests')} requests ({row['figure']})", _oh(row, "requests") <= 200


def _save_seconds(rows: list[Row]) -> tuple[str, bool] | None:
    row = _find(rows, "save", "local save")
    if row is None:
        return None
    oh, rc = _oh(row, "seconds"), _other(row, "seconds")
    text = f"p50 {oh:.3f} s" + (f" against rclone copyto's {rc:.3f} s" if rc is not None else ", no rclone")
    return text, oh <= 0.3 and (rc is None or oh < rc)


def _save_requests(rows: list[Row]) -> tuple[str, bool] | None:
    row = _find(rows, "save", "local save")
    if row is None:
        return None
    again = _find(rows, "save", "saved again")
    worst = max(_oh(row, "requests"), _oh(again, "requests") if again is not None else 0)
    text = f"{_oh(row, 'requests')} requests per save (median)"
    if again is not None:
        text += f"; {_oh(again, 'requests')} for the same file saved again at once"
    return text, worst <= 2


def _burst_requests(rows: list[Row]) -> tuple[str, bool] | None:
    row = _find(rows, "burst")
    if row is None:
        return None
    per = _oh(row, "requests_per_file")
    if per is None:
        return None
    return f"{per} requests per file ({row['figure']})", per <= 1.5


def _download_vs_plain(rows: list[Row]) -> tuple[str, bool] | None:
    row = _find(rows, "bigfile", "download, no latency", other="plain httpx")
    if row is None or row.get("value_ratio_ohsync_over_other") is None:
        return None
    share = row["value_ratio_ohsync_over_other"]
    return f"×{share:.2f} of a plain httpx stream to a file ({row.get('ohsync_value')} / {row.get('other_value')})", \
        share >= 0.5


def _download_vs_rclone(rows: list[Row]) -> tuple[str, bool] | None:
    row = _find(rows, "bigfile", "download, no latency", other="rclone copyto")
    if row is None:
        return None
    oh, rc = _oh(row, "seconds"), _other(row, "seconds")
    return f"{oh:.3f} s against rclone copyto's {rc:.3f} s", oh < rc


def _scale_cold(rows: list[Row]) -> tuple[str, bool] | None:
    row = _find(rows, "scale", "cold mirror through the daemon")
    if row is None:
        return None
    return f"{_oh(row, 'seconds'):.1f} s ({row.get('ohsync_value')})", _oh(row, "seconds") <= 45


#: The targets, in the order of the issue that set them.
TARGETS: list[Target] = [
    Target("cold mirror", "≤ 10 requests", _cold_requests),
    Target("cold upload of 3,000 files", "≤ 200 requests", _upload_requests),
    Target("local save -> verified", "p50 ≤ 0.3 s and under rclone copyto's p50", _save_seconds,
           why="the watcher's quiet period and the daemon's pass: `bench/README.md`, save"),
    Target("local save -> verified", "≤ 2 requests", _save_requests,
           why="a push the listing (or our own last write) does not vouch for reads the file first"),
    Target("burst of 1,000 local edits", "≤ 1.5 requests per file", _burst_requests),
    Target("200 MiB download", "≥ 0.5× a plain stream", _download_vs_plain,
           why="the file's sha1 is computed while it streams (on the transfer pool; 0.2 CPU s per 200 MiB "
               "here) and the file is fsynced once at the end; a plain stream does neither"),
    Target("200 MiB download", "faster than rclone copyto", _download_vs_rclone,
           why="as above (rclone's seafile backend checks no hash); runs vary by ±30 %"),
    Target("cold mirror of 30,000 files through the daemon", "≤ 45 s", _scale_cold,
           why="CPU-bound on 2 cores shared with devserver: the daemon's CPU seconds are in the figure; "
               "where they go: `bench/README.md`, \"Where a cold mirror's CPU goes\""),
]


def targets_table(rows: list[Row], targets: list[Target] | None = None) -> str:
    """The markdown table of ``targets`` (default :data:`TARGETS`) judged on
    ``rows``: one line per target with the figure, the target and whether
    this run met it (``yes`` / ``no: why`` / ``not in this run``)."""
    lines = ["| job | target | figure (this run) | met |", "|---|---|---|---|"]
    for t in targets if targets is not None else TARGETS:
        got = t.measure(rows)
        if got is None:
            lines.append(f"| {t.name} | {t.target} | - | not in this run |")
            continue
        figure, met = got
        verdict = "yes" if met else ("no" + (f": {t.why}" if t.why else ""))
        lines.append(f"| {t.name} | {t.target} | {figure} | {verdict} |")
    return "\n".join(lines)


def update_targets(text: str, rows: list[Row]) -> str:
    """``text`` (a RESULTS.md) with the line of each target that ``rows``
    judge replaced by this run's verdict; the other lines as they were.  For
    a run of some scenarios only (``make bench-scale``): the targets of the
    scenarios it did not run keep the figures of the run that had them."""
    for line in targets_table(rows).splitlines()[2:]:
        if line.endswith("| not in this run |"):
            continue
        key = "|".join(line.split("|")[:3]) + "|"  # "| job | target |"
        text = "\n".join(line if old.startswith(key) else old for old in text.split("\n"))
    return text
