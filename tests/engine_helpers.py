"""Helpers for engine tests: a mirror wired to a devserver library."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

from ohsync.engine.client import SeafileClient
from ohsync.engine.context import EngineOptions
from ohsync.engine.state import StateStore
from ohsync.engine.sync.engine import SyncEngine

USER = "user@example.edu.cn"


DATA = Path(__file__).resolve().parent / "data"
SAMPLES = DATA / "samples"


def samples_dir() -> Path:
    """The sample OH-Memory library in ``tests/data/samples`` (fails if it is missing)."""
    path = SAMPLES / "OH-Memory"
    assert path.is_dir(), f"sample library not found at {path}"
    return path


def sample(rel: str) -> bytes:
    """The bytes of one sample memory file, ``rel`` relative to :func:`samples_dir`."""
    return (samples_dir() / rel).read_bytes()


def synced_sample_mirror(devserver, tmp_path: Path) -> Mirror:  # noqa: ANN001
    """A mirror of a library seeded from :func:`sample_library`, synced once without errors."""
    repo = devserver.create_library(USER, "OH-Memory", from_tree=sample_library(tmp_path / "seed"))
    mirror = make_mirror(devserver, repo, tmp_path)
    assert mirror.sync().errors == []
    return mirror


def sample_library(dest: Path) -> Path:
    """Copy the sample OH-Memory library, with ``Files/`` inside it, to ``dest``."""
    samples = SAMPLES
    shutil.copytree(samples / "OH-Memory", dest)
    shutil.copytree(samples / "Files", dest / "Files")
    for path in dest.rglob("*"):
        if path.is_file():
            path.chmod(0o644)
        else:
            path.chmod(0o755)
    return dest


def read_tree(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` as ``"/rel/path" -> bytes``."""
    return {"/" + p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def mirrored(tree: dict[str, bytes]) -> dict[str, bytes]:
    """``tree`` without the library's trash, which stays on the server (``engine/ignore.py``):
    what a mirror of it holds."""
    return {p: data for p, data in tree.items() if not re.match(r"/\.trash(?:_ohsync(?:-\d+)?)?/", p)}


@dataclass
class Mirror:
    """A local folder, its state and an engine, synced with one library."""

    server: object
    repo_id: str
    root: Path
    state: StateStore
    client: SeafileClient
    engine: SyncEngine

    def sync(self, paths: list[str] | None = None):  # noqa: ANN201 - SyncReport
        return self.engine.sync(paths)

    def write(self, rel: str, data: bytes) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def read(self, rel: str) -> bytes:
        return (self.root / rel).read_bytes()


def make_mirror(server, repo_id: str, base: Path, name: str = "m") -> Mirror:  # noqa: ANN001
    """A mirror of ``repo_id`` in ``base/name`` with its own state."""
    root = base / name
    state = StateStore(base / f"{name}-state" / "state.db", base / f"{name}-state" / "blobs")
    client = SeafileClient(server.url, server.token_for(USER), retries=1)
    engine = SyncEngine(client, repo_id, root, state,
                        options=EngineOptions(backup_dir=base / f"{name}-state" / "backups",
                                              library_name="OH-Memory"))
    return Mirror(server, repo_id, root, state, client, engine)


def settled_mirror(server, name: str, seed: Path, base: Path):  # noqa: ANN001, ANN201 - Iterator[Mirror]
    """Yield a mirror of a new library ``name`` seeded from ``seed``, after a clean cold pass and a
    remote check (head recorded), then close its state and client (for fixtures)."""
    m = make_mirror(server, server.create_library(USER, name, from_tree=seed), base)
    assert not m.sync().errors
    m.engine.sync([], check_remote=True)
    yield m
    m.state.close()
    m.client.close()
