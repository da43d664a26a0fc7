"""Helpers for the breaker tests: the invariant 'every version ends up somewhere'."""

from __future__ import annotations

from pathlib import Path

from engine_helpers import USER, make_mirror, read_tree


def all_files(root: Path) -> dict[str, bytes]:
    if not root.exists():
        return {}
    return read_tree(root)


def everywhere(mirror, base: Path, name: str = "m") -> dict[str, list[bytes]]:
    """Where bytes live: mirror, server (whole library), backups."""
    return {
        "mirror": list(all_files(mirror.root).values()),
        "server": list(mirror.server.tree(mirror.repo_id).values()),
        "backups": list(all_files(base / f"{name}-state" / "backups").values()),
    }


def missing_versions(mirror, base: Path, versions, name: str = "m") -> list[bytes]:
    """Versions that are nowhere (exact bytes)."""
    where = everywhere(mirror, base, name)
    pool = [b for blobs in where.values() for b in blobs]
    return [v for v in versions if v not in pool]


def missing_lines(mirror, base: Path, lines, name: str = "m") -> list[bytes]:
    """Lines that appear in no file anywhere."""
    where = everywhere(mirror, base, name)
    pool = [b for blobs in where.values() for b in blobs]
    return [ln for ln in lines if not any(ln in b for b in pool)]


def small_library(devserver, files: dict[str, bytes]) -> str:
    repo = devserver.create_library(USER, "OH-Memory")
    files = {**{f"/pad/f{i:02d}.txt": f"pad {i}\n".encode() for i in range(20)}, **files}
    for path, data in files.items():
        devserver.put_file(repo, path, data)
    return repo


def synced_small(devserver, tmp_path, files: dict[str, bytes], name: str = "m"):
    repo = small_library(devserver, files)
    m = make_mirror(devserver, repo, tmp_path, name)
    rep = m.sync()
    assert rep.errors == []
    return m
