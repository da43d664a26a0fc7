"""The speed targets of bench/RESULTS.md are judged on a run's rows, and a
new run keeps the hand-written sections of the file below its table."""
from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import results_md  # noqa: E402
import targets  # noqa: E402


def _row(scenario: str, figure: str, seconds: float, requests: int, other: str = "-",
         other_seconds: float | None = None, **extra: object) -> dict:
    row = {"scenario": scenario, "figure": figure, "other_tool": other,
           "ohsync": {"seconds": seconds, "requests": requests, **extra},
           "other": None if other_seconds is None else {"seconds": other_seconds, "requests": 7}}
    return row


def _lines(table: str) -> dict[str, str]:
    """``{"job | target": met column}`` of a targets table."""
    out = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        out[f"{cells[0]} | {cells[1]}"] = cells[3]
    return out


def test_each_target_is_judged_on_its_row_and_a_missing_one_is_named() -> None:
    rows = [_row("cold", "cold mirror of 3000 files", 7.6, 7),
            _row("upload", "cold upload of 3000 new files, no latency", 5.0, 290, "rclone copy", 600.0),
            _row("save", "local save -> verified on server, daemon (p50 of 100)", 0.25, 3,
                 "rclone copyto (p50)", 0.6),
            _row("burst", "1000 local edits -> all verified, daemon", 25.0, 1046, "rclone copy", 200.0,
                 requests_per_file=1.046)]
    got = _lines(targets.targets_table(rows))
    assert got["cold mirror | ≤ 10 requests"] == "yes"
    assert got["cold upload of 3,000 files | ≤ 200 requests"].startswith("no")      # 290 requests
    assert got["local save -> verified | p50 ≤ 0.3 s and under rclone copyto's p50"] == "yes"
    assert got["local save -> verified | ≤ 2 requests"].startswith("no: a push the listing")
    assert got["burst of 1,000 local edits | ≤ 1.5 requests per file"] == "yes"
    assert got["cold mirror of 30,000 files through the daemon | ≤ 45 s"] == "not in this run"
    again = [_row("save", "local save -> verified on server, daemon (p50 of 100)", 0.2, 2, "rclone copyto (p50)", 0.6),
             _row("save", "the same file saved again at once, daemon (p50 of 20)", 0.2, 4)]
    assert _lines(targets.targets_table(again))["local save -> verified | ≤ 2 requests"].startswith("no")
    again[1]["ohsync"]["requests"] = 2
    assert _lines(targets.targets_table(again))["local save -> verified | ≤ 2 requests"] == "yes"
    slow = [_row("save", "local save -> verified on server, daemon (p50 of 100)", 0.25, 2, "rclone copyto (p50)", 0.2)]
    assert _lines(targets.targets_table(slow))[
        "local save -> verified | p50 ≤ 0.3 s and under rclone copyto's p50"].startswith("no")  # rclone was faster


def test_a_skipped_or_failed_scenario_is_not_judged() -> None:
    rows = [{"scenario": "scale", "figure": "-", "skipped": "failed: RuntimeError: x"}]
    assert _lines(targets.targets_table(rows))["cold mirror of 30,000 files through the daemon | ≤ 45 s"] \
        == "not in this run"


def test_a_new_run_keeps_the_hand_written_sections_and_rewrites_the_targets(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(results_md, "update_readme", lambda *a: False)  # the repository's README stays as it is
    path = tmp_path / "RESULTS.md"
    path.write_text("# Benchmark results\n\nWritten by an old run.\n\n| old | table |\n\n"
                    "## Targets\n\n| old targets |\n\n## A comparison by hand\n\nbefore/after text\n\n"
                    "<!-- scale -->\n## Scale: 30,000 files\n"
                    "| s | 1 |\n<!-- /scale -->\n", encoding="utf-8")
    args = SimpleNamespace(only="cold", note="", server="", files=3000, seed=1, big_mb=200, latency=50.0, runs=3,
                           saves=100, burst=1000, idle_seconds=300.0, idle_window="background", scale_files=30000)
    rows = [_row("cold", "cold mirror of 3000 files", 7.6, 7)]
    bench = SimpleNamespace(args=args, rows=rows, seconds={"cold": 8.0}, loadavg="0.1 0.1 0.1",
                            rc=SimpleNamespace(version="rclone v1"), table=lambda rs: "| new | table |")
    results_md.write_results_md(bench, path, 9.0)
    text = path.read_text(encoding="utf-8")
    assert "| new | table |" in text and "| old | table |" not in text
    assert text.count("## Targets") == 1 and "| old targets |" not in text and "| cold mirror | ≤ 10 requests" in text
    assert "## A comparison by hand\n\nbefore/after text" in text
    assert text.index("## Targets") < text.index("## A comparison by hand") < text.index("<!-- scale -->")
    assert "| s | 1 |" in text  # the scale part, not run this time, as it was


def test_a_scale_run_rewrites_its_own_target_line_only(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(results_md, "update_readme", lambda *a: False)
    path = tmp_path / "RESULTS.md"
    earlier = targets.targets_table([_row("cold", "cold mirror of 3000 files", 7.6, 7)])
    path.write_text(f"# Benchmark results\n\n| main | table |\n\n## Targets\n\n{earlier}\n\n"
                    "<!-- scale -->\n## Scale: 30,000 files\n| s | 1 |\n<!-- /scale -->\n", encoding="utf-8")
    args = SimpleNamespace(only="scale", note="", server="", files=3000, seed=1, big_mb=200, latency=50.0, runs=3,
                           saves=100, burst=1000, idle_seconds=300.0, idle_window="background", scale_files=30000,
                           scale_idle_seconds=60.0, scale_poll=30.0)
    rows = [_row("scale", "cold mirror through the daemon, 30000 files", 41.0, 59)]
    bench = SimpleNamespace(args=args, rows=rows, seconds={"scale": 300.0}, loadavg="0.1 0.1 0.1",
                            rc=SimpleNamespace(version="rclone v1"), table=lambda rs: "| new scale |")
    results_md.write_results_md(bench, path, 300.0)
    text = path.read_text(encoding="utf-8")
    got = _lines(text[text.index("| job |"):text.index("<!-- scale -->")].strip())
    assert got["cold mirror of 30,000 files through the daemon | ≤ 45 s"] == "yes"   # this run's 41 s
    assert got["cold mirror | ≤ 10 requests"] == "yes"                               # the earlier run's, kept
    assert "| main | table |" in text and "| new scale |" in text and "| s | 1 |" not in text
