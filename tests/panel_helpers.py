"""Shared helpers for the local page's tests: a running daemon with one open text conflict."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from daemon_helpers import DaemonProc, DaemonSetup, wait_for

#: The conflicted file and its three versions.
REL = "notes/todo.txt"
BASE = b"milk\nbread\neggs\n"
LOCAL = b"milk\nbread and butter\neggs\n"
REMOTE = b"milk\nrye bread\neggs\ntea\n"


@dataclass
class Conflicted:
    """A daemon whose mirror holds one open conflict of :data:`REL`."""

    setup: DaemonSetup
    daemon: DaemonProc
    archived: str

    def status(self) -> dict[str, Any]:
        return self.daemon.status()

    def server(self, rel: str) -> bytes | None:
        return self.setup.srv.tree(self.setup.repo_id).get("/" + rel)


def make_conflict(seed_daemon: Any, **config: Any) -> Conflicted:
    """Seed :data:`BASE`, start a daemon, then edit the line on both sides while it is paused."""
    setup = seed_daemon(files={REL: BASE, "notes/keep.md": b"---\ntitle: keep\n---\n"}, **config)
    d = setup.start(wait="idle")
    assert d.cli("pause").returncode == 0
    (setup.mirror / REL).write_bytes(LOCAL)
    setup.srv.put_file(setup.repo_id, "/" + REL, REMOTE)
    assert d.cli("resume").returncode == 0

    def listed() -> Any:
        items = json.loads(d.cli("conflicts", "--json").stdout)
        return items if items and (setup.mirror / items[0]["archived"]).exists() else None

    items = wait_for(listed, timeout=90, what="the conflict of " + REL)
    d.wait_state("idle", "attention", timeout=90)
    assert [c["path"] for c in items] == [REL]
    return Conflicted(setup, d, items[0]["archived"])
