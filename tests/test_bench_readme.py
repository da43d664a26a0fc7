"""The README's benchmark table follows bench/RESULTS.md: the block between
its markers is the copy ``bench/results_md.py`` makes, so it is never older
than the file a ``make bench`` wrote."""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))
import results_md  # noqa: E402


def test_the_readme_holds_the_current_copy_of_results_md() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    block = results_md.readme_block((REPO / "bench" / "RESULTS.md").read_text(encoding="utf-8"))
    assert block in readme, "README.md's benchmark table is stale: run .venv/bin/python bench/results_md.py"


def test_a_new_results_md_rewrites_only_the_readme_block(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    results.write_text("# Benchmark results\n\nWritten by run 1.\n\n| a | b |\n\n"
                       "<!-- scale -->\n## Scale: 30,000 files\n"
                       "| s | 1 |\n<!-- /scale -->\n", encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text(f"# ohsync\n\n## Benchmarks\n\nText before.\n\n{results_md.README_BEGIN}\nold table\n"
                      f"{results_md.README_END}\n\nReading it: text after.\n\n## Layout\n", encoding="utf-8")
    assert results_md.update_readme(results, readme)
    text = readme.read_text(encoding="utf-8")
    assert "old table" not in text and "Written by run 1." in text and "| s | 1 |" in text
    assert "### Scale: 30,000 files" in text and "# Benchmark results" not in text  # inside ## Benchmarks
    assert text.startswith("# ohsync\n\n## Benchmarks\n\nText before.\n\n")
    assert text.endswith("\n\nReading it: text after.\n\n## Layout\n")
    assert not results_md.update_readme(results, readme)                              # already current
    results.write_text(results.read_text(encoding="utf-8").replace("run 1", "run 2"), encoding="utf-8")
    assert results_md.update_readme(results, readme)
    assert "Written by run 2." in readme.read_text(encoding="utf-8")
