"""The repository stands alone: no script, test or docstring names a path
outside it, every ``docs/…`` document cited in the code exists with the cited
section, and no citation points at a design note the repository lacks."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SKIP_DIRS = {".git", ".venv", "artifacts", ".pytest_cache", ".hypothesis", "__pycache__", "build", "dist"}
SUFFIXES = {".py", ".sh", ".md", ".toml", ".service", ".desktop", ".plist", ""}
# built from pieces so that this file does not match itself
OUTSIDE = re.compile("|".join([
    r"/" + "work/",
    r"\.\./" + "shared/",
    r"\bshared/" + r"(seafile|DESIGN|STYLE|samples|linux-desktop|hooks)",
]))


def _candidates() -> list[Path]:
    """The repository's files: git's list (tracked and new, not ignored), else a walk."""
    try:
        done = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO,
                              capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        done = None
    if done is not None and done.returncode == 0 and done.stdout:
        return [REPO / name for name in done.stdout.decode("utf-8", "surrogateescape").split("\0") if name]
    return list(REPO.rglob("*"))


def source_files() -> list[Path]:
    """Every text file of the repository that code, scripts or docs live in."""
    found = []
    for path in _candidates():
        rel = path.relative_to(REPO)
        if any(part in SKIP_DIRS or part.endswith(".egg-info") for part in rel.parts):
            continue
        if rel.parts[:2] == ("tests", "data"):  # recorded data, not code
            continue
        if path.is_file() and (path.suffix in SUFFIXES or rel.parts[0] == ".ci"):
            found.append(path)
    return found


def test_no_path_outside_the_repository_is_named() -> None:
    files = source_files()
    assert any(f.name == "seafile.py" for f in files) and any(f.parts[-2] == ".ci" for f in files)
    hits = []
    for path in files:
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if OUTSIDE.search(line):
                hits.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert hits == [], "paths outside the repository:\n" + "\n".join(hits)


# a citation of the design notes that are not in the repository ("DESIGN" + " §4");
# built from pieces so that this file does not match itself
BARE_DESIGN = re.compile(r"\b" + "DESIGN" + r"(?:\.md)?`{0,2}\s*§")


def test_no_citation_of_design_notes_outside_the_repository() -> None:
    hits = []
    for path in source_files():
        for n, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if BARE_DESIGN.search(line):
                hits.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert hits == [], "cite docs/architecture.md §N instead:\n" + "\n".join(hits)


def test_every_cited_doc_exists_and_has_the_cited_section() -> None:
    cite = re.compile(r"docs/([\w.-]+\.md)(?:`{0,2}\s*(§[\d.]+))?")
    cited: dict[str, set[str]] = {}
    for path in source_files():
        for m in cite.finditer(path.read_text(encoding="utf-8", errors="replace")):
            cited.setdefault(m.group(1), set()).update([m.group(2)] if m.group(2) else [])
    assert "seafile-api.md" in cited and "desktop-testing.md" in cited and "architecture.md" in cited
    assert len(cited["architecture.md"]) >= 8, cited["architecture.md"]  # the sections the docstrings cite
    for doc, sections in cited.items():
        text = (REPO / "docs" / doc).read_text(encoding="utf-8")
        headings = {h.group(1) for h in re.finditer(r"^#+ (\d+(?:\.\d+)?)\.? ", text, re.M)}
        for section in sections:
            assert section[1:].rstrip(".") in headings, f"docs/{doc} has no section {section}"
