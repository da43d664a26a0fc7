"""Chaos run with version accounting: two writers, faults and kills, nothing lost.

A seeded, reproducible, bounded run against a real daemon (``ohsync run
--no-tray``) and devserver:

* the *person* edits the mirror as editors do: in place, temp file + rename
  (atomic save), appends, inserts in the middle, new files, moves, folder
  moves, deletes;
* the *other client* writes through the server at the same time: edits,
  blind overwrites (reads a version, writes its edit of it later), new
  files, moves, deletes;
* with ``stale_bursts``, a *stale device* (``tests/chaos_stale.py``, plain
  Web API over httpx) reads a file and later overwrites it several times in
  a row from that old version through the update link, no ``head``, a few
  tens of milliseconds apart, while the person goes on editing;
* devserver injects faults (5xx, 429, latency, dropped connections, answers
  lost after the server applied a request) and the daemon is SIGKILLed and
  restarted at random moments.

Every write adds one unique *marker* line, so a version is accounted for by
its marker: at quiescence each marker must be found live (merged), in
``/.conflict/`` or in ``/.trash/``, on either side.  The server's file
history does not count, and for the person's lines neither do the daemon's
local backups (``state_dir/backups/``): a line the person wrote that survives
only there is **lost**.  A remote writer's line found only in a backup is
counted as found and reported (``backup only``).  Exempt (that writer meant
it): markers that only the writer's own later delete removed, lines a remote
writer replaced of its own or the other remote writer's (a blind or stale
overwrite), and the person's lines in a file the other client deleted after
reading them (``deleted seen``: its delete, carried here after a backup).

Run it by hand (the long profile; stale bursts on unless ``--no-stale-bursts``)::

    .venv/bin/python tests/chaos.py --seed 7 --actions 10000

It prints ``versions written / found / lost`` and the memory auto-merge rate;
a failing seed prints the seed and the actions on the lost marker's file.
"""
from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, os.path.dirname(__file__))
from chaos_stale import Burst, StaleBursts
from daemon_helpers import USER, DaemonProc, Env, mirrored, read_tree, seed_daemon_setup, wait_for

MEMORY_HEAD = ("---\ntitle: {title}\ntype: note\npermalink: {slug}\ntags: [chaos]\n"
               "created: 2026-11-01T10:00:00+08:00\nmodified: 2026-11-01T10:00:00+08:00\n"
               "origin: desktop\nsensitivity: normal\n---\n\n# {title}\n\n## Observations\n"
               "- [seed] first fact #chaos\n\n## Relations\n- relates_to [[index]]\n")
FAULTS = ("5xx", "429", "latency", "drop", "lost-answer", "5xx", "latency", "drop", "401")


def set_difference(new: bytes, old: bytes) -> bytes:
    """The lines of ``new`` that ``old`` does not have, joined."""
    have = set(old.splitlines())
    return b"\n".join(line for line in new.splitlines() if line not in have)


@dataclass
class Stats:
    """What one chaos run did and found."""

    seed: int
    actions: int = 0
    kills: int = 0
    relogins: int = 0
    confirms: int = 0
    refreshes: int = 0
    faults: int = 0
    written: int = 0
    found: int = 0
    lost: list[str] = field(default_factory=list)
    exempt: int = 0
    deleted_seen: int = 0
    backup_only: int = 0
    stale_bursts: int = 0
    stale_overwrites: int = 0
    memory_concurrent: int = 0
    memory_conflicts: int = 0

    def summary(self) -> str:
        """One line: versions written / found / lost and the memory auto-merge rate."""
        rate = (1.0 - self.memory_conflicts / self.memory_concurrent) if self.memory_concurrent else 1.0
        return (f"chaos seed={self.seed}: {self.actions} actions, {self.kills} kills, {self.relogins} logins, "
                f"{self.confirms} confirmed mass deletes, {self.refreshes} refreshes of paused files, "
                f"{self.faults} faults, {self.stale_bursts} stale bursts ({self.stale_overwrites} overwrites); "
                f"versions written {self.written} / found {self.found} / lost {len(self.lost)} "
                f"(exempt {self.exempt}, deleted seen {self.deleted_seen}; remote lines in a backup only "
                f"{self.backup_only}); memory auto-merge {rate:.1%} "
                f"({self.memory_conflicts} conflict copies over {self.memory_concurrent} concurrent edits)")


class Chaos:
    """One seeded run: ``Chaos(env, srv, root, seed).run(actions)`` → :class:`Stats`.

    ``stale_bursts``: the stale device joins the other client (its actions
    come from the same draws, so a seed's run differs with and without it).
    """

    user = USER

    def __init__(self, env: Env, srv: Any, root: Path, seed: int, *, kill_every: int = 60,
                 fault_rate: float = 0.05, stale_bursts: bool = False) -> None:
        self.env, self.srv, self.root = env, srv, root
        self.rng = random.Random(seed)
        self.stats = Stats(seed)
        self.kill_every, self.fault_rate = kill_every, fault_rate
        self.mirror = root / "mirror"
        self.log: list[str] = []
        self.n = 0
        # marker -> (writer, path at write time); exempt: markers their own writer deleted
        self.markers: dict[str, tuple[str, str]] = {}
        self.exempt: set[str] = set()
        self.deleted_seen: set[str] = set()   # the person's markers in a file the other client deleted
        self._marks = threading.Lock()        # markers come from the stale burst's thread too
        self.remote_lock = threading.Lock()   # the other client's actions and each stale overwrite
        self.stale: StaleBursts | None = None
        self.stale_enabled = stale_bursts
        self.pending_blind: list[tuple[str, bytes]] = []
        self.recent_local: dict[str, float] = {}
        self.daemon: DaemonProc | None = None
        self.relogin_in: int | None = None

    # ------------------------------------------------------------------ setup

    def seed_library(self) -> str:
        files: dict[str, bytes] = {"index.md": MEMORY_HEAD.format(title="index", slug="index-0000").encode()}
        for i in range(8):
            files[f"notes/n{i}.md"] = MEMORY_HEAD.format(title=f"n{i}", slug=f"n{i}-{i:04x}").encode()
        for i in range(6):
            files[f"docs/d{i}.txt"] = f"document {i}\nline two\nline three\n".encode()
        files["journal/2026-11.md"] = MEMORY_HEAD.format(title="2026-11", slug="j-2026-11").encode()
        self.repo = seed_daemon_setup(self.env, self.srv, self.mirror, files=files, poll_interval=1.0).repo_id
        return self.repo

    def start_daemon(self) -> None:
        self.daemon = DaemonProc(self.env)

    # ------------------------------------------------------------------ markers

    def _marker(self, writer: str, rel: str) -> str:
        with self._marks:
            self.n += 1
            m = f"chaos-{self.stats.seed}-{self.n:05d}-{writer}"
            self.markers[m] = (writer, rel)
        return m

    def _unmark(self, marker: str) -> None:
        """A write that did not happen (its request failed before the server applied it)."""
        with self._marks:
            self.markers.pop(marker, None)

    @staticmethod
    def _line(rel: str, marker: str) -> bytes:
        if rel.endswith(".md"):
            return f"- [chaos] {marker} #c\n".encode()
        return f"{marker}\n".encode()

    def _note(self, text: str) -> None:
        self.log.append(f"{self.stats.actions:05d} {text}")

    # ------------------------------------------------------------------ the person (local)

    def _local_files(self) -> list[str]:
        out = []
        # os.walk skips a folder the daemon removes mid-walk (rglob raises FileNotFoundError)
        for folder, _dirs, names in os.walk(self.mirror):
            for name in names:
                p = Path(folder) / name
                rel = p.relative_to(self.mirror).as_posix()
                if p.is_file() and not rel.startswith((".conflict", ".trash")) and ".ohsync-tmp" not in rel \
                        and "SFConflict" not in rel:
                    out.append(rel)
        return sorted(out)

    def local_action(self) -> None:
        files = self._local_files()
        kind = self.rng.choice(["append", "append", "append", "atomic", "atomic", "insert", "new", "new", "move",
                                "delete", "folder_move"])
        if kind == "new" or not files:
            rel = f"{self.rng.choice(['notes', 'docs', 'inbox'])}/l{self.n}.{self.rng.choice(['md', 'txt'])}"
            m = self._marker("local", rel)
            data = (MEMORY_HEAD.format(title=f"l{self.n}", slug=f"l-{self.n:05d}").encode()
                    if rel.endswith(".md") else b"") + self._line(rel, m)
            (self.mirror / rel).parent.mkdir(parents=True, exist_ok=True)
            (self.mirror / rel).write_bytes(data)
            self._note(f"local new {rel} {m}")
            return
        rel = self.rng.choice(files)
        if self.stale is not None and kind in ("append", "atomic", "insert"):
            # half the person's edits go to a file the stale device read or overwrites now
            targets = [t for t in self.stale.targets() if t in files]
            if targets and self.rng.random() < 0.5:
                rel = self.rng.choice(targets)
        path = self.mirror / rel
        try:
            if kind in ("append", "atomic", "insert"):
                data = path.read_bytes()
                m = self._marker("local", rel)
                line = self._line(rel, m)
                if kind == "insert":
                    lines = data.splitlines(keepends=True)
                    at = self.rng.randrange(len(lines) + 1) if lines else 0
                    if rel.endswith(".md"):       # keep memory structure: insert among observations
                        at = len(lines)
                    new = b"".join(lines[:at]) + line + b"".join(lines[at:])
                else:
                    new = data + line if data.endswith(b"\n") or not data else data + b"\n" + line
                if kind == "atomic":
                    tmp = path.with_name(f".{path.name}.swp")
                    tmp.write_bytes(new)
                    os.replace(tmp, path)
                else:
                    with open(path, "r+b") as fh:
                        fh.seek(0)
                        fh.write(new)
                        fh.truncate()
                self.recent_local[rel] = time.monotonic()
                self._note(f"local {kind} {rel} {m}")
            elif kind == "move":
                dest = f"{self.rng.choice(['notes', 'docs', 'moved'])}/mv{self.n}-{Path(rel).name}"
                self.n += 1
                (self.mirror / dest).parent.mkdir(parents=True, exist_ok=True)
                os.rename(path, self.mirror / dest)
                self._note(f"local move {rel} -> {dest}")
            elif kind == "folder_move":
                folder = Path(rel).parent.as_posix()
                if folder in (".", "journal") or folder.split("/")[0] == "moved":
                    return
                dest = f"moved/f{self.n}"
                self.n += 1
                (self.mirror / "moved").mkdir(exist_ok=True)
                os.rename(self.mirror / folder, self.mirror / dest)
                self._note(f"local folder move {folder} -> {dest}")
            elif kind == "delete":
                if rel.startswith("journal/") or rel == "index.md":
                    return
                self._forget(("local",), path.read_bytes())
                path.unlink()
                self._note(f"local delete {rel}")
        except OSError as exc:   # the daemon moved or removed it a moment ago: as for a person
            self._note(f"local {kind} {rel}: {exc.strerror}")

    def _forget(self, writers: tuple[str, ...], content: bytes, *, keep: bytes = b"",
                into: set[str] | None = None) -> None:
        """A writer deletes (or replaces) a file it sees as ``content``: the markers of
        ``writers`` in it, on lines ``keep`` (what it writes instead) does not have, are
        its intent, not a loss; they go to ``into`` (default: the exempt set)."""
        gone = set_difference(content, keep) if keep else content
        for m in re.findall(rb"chaos-\d+-\d+-(?:" + b"|".join(w.encode() for w in writers) + rb")\b", gone):
            (self.exempt if into is None else into).add(m.decode())

    # ------------------------------------------------------------------ the other client (remote)

    def _remote_files(self) -> list[str]:
        return sorted(k[1:] for k in self.srv.tree(self.repo)
                      if not k.startswith(("/.conflict", "/.trash")) and "SFConflict" not in k)

    def remote_action(self) -> None:
        kinds = ["edit", "edit", "edit", "blind_read", "blind_write", "new", "new", "move", "delete"]
        if self.stale is not None:
            kinds += ["stale_read", "stale_burst"]
        kind = self.rng.choice(kinds)
        if kind == "stale_burst":
            self._stale_burst()
            return
        with self.remote_lock:
            self._remote_action(kind)

    def _stale_burst(self) -> None:
        """The stale device overwrites, several times, a file it read earlier (one burst at a time)."""
        assert self.stale is not None
        if not self.stale.reads or self.stale.busy():
            return
        rel, old = self.stale.reads.pop(0)
        count = self.rng.randint(3, 8)
        self.stale.start(Burst(rel, old, count, [self.rng.uniform(0.02, 0.08) for _ in range(count - 1)]))

    def _remote_action(self, kind: str) -> None:
        files = self._remote_files()
        if kind == "stale_read":
            if files:
                assert self.stale is not None
                self.stale.read(self.rng.choice(files))
            return
        if kind == "blind_write" and self.pending_blind:
            rel, old = self.pending_blind.pop(0)
            if self.srv.file_id(self.repo, "/" + rel) is None:
                self._note(f"remote blind write {rel}: gone")
                return
            self._blind_write(rel, old)
            return
        if kind == "new" or not files:
            rel = f"{self.rng.choice(['notes', 'docs', 'phone'])}/r{self.n}.{self.rng.choice(['md', 'txt'])}"
            m = self._marker("remote", rel)
            data = (MEMORY_HEAD.format(title=f"r{self.n}", slug=f"r-{self.n:05d}").encode()
                    if rel.endswith(".md") else b"") + self._line(rel, m)
            self.srv.put_file(self.repo, "/" + rel, data)
            self._note(f"remote new {rel} {m}")
            return
        rel = self.rng.choice(files)
        try:
            if kind in ("edit", "blind_read", "blind_write"):
                data = self.srv.read_file(self.repo, "/" + rel)
                if kind == "blind_read":
                    self.pending_blind.append((rel, data))
                    self._note(f"remote blind read {rel}")
                    return
                m = self._marker("remote", rel)
                if rel.endswith(".md") and rel in self.recent_local:
                    self.stats.memory_concurrent += 1
                new = data + self._line(rel, m) if data.endswith(b"\n") or not data else data + b"\n" + \
                    self._line(rel, m)
                self.srv.put_file(self.repo, "/" + rel, new)
                self._note(f"remote edit {rel} {m}")
            elif kind == "move":
                dest_dir = self.rng.choice(["/notes", "/docs", "/phone"])
                self.srv.mkdir(self.repo, dest_dir) if self.srv.file_id(self.repo, dest_dir) is None else None
                if "/" + str(Path(rel).parent) == dest_dir:
                    return
                self.srv.move_path(self.repo, "/" + rel, dest_dir)
                self._note(f"remote move {rel} -> {dest_dir}")
            elif kind == "delete":
                if rel.startswith("journal/") or rel == "index.md":
                    return
                seen = self.srv.read_file(self.repo, "/" + rel)
                self._forget(("remote", "stale"), seen)
                self._forget(("local",), seen, into=self.deleted_seen)   # its delete, of what it read
                self.srv.delete_path(self.repo, "/" + rel)
                self._note(f"remote delete {rel}")
        except Exception as exc:  # noqa: BLE001 - the other client meets races too; logged, not fatal
            self._note(f"remote {kind} {rel}: {type(exc).__name__} {exc}")

    def _blind_write(self, rel: str, old: bytes) -> None:
        """Upload an edit of the version read earlier (``old``), whatever is there now.

        What the other client overwrites of its *own* later edits is its own
        doing (exempt); what it overwrites of ours the daemon must keep.
        """
        current = self.srv.read_file(self.repo, "/" + rel)
        self._forget(("remote", "stale"), current, keep=old)
        m = self._marker("remote", rel)
        self.srv.put_file(self.repo, "/" + rel, old + self._line(rel, m))
        self._note(f"remote blind write {rel} {m}")

    # ------------------------------------------------------------------ faults and kills

    def inject(self) -> None:
        kind = self.rng.choice(FAULTS)
        rx = self.rng.choice([r"/seafhttp/", r"/api2/repos/", r"/api/v2\.1/repos/", r"/dir/"])
        if kind == "5xx":
            self.srv.inject_fault(None, rx, status=self.rng.choice([500, 502, 503]), count=self.rng.randint(1, 3))
        elif kind == "429":
            self.srv.inject_fault(None, rx, status=429, retry_after=1, count=1)
        elif kind == "latency":
            self.srv.inject_fault(None, rx, latency=self.rng.uniform(0.1, 0.8), count=self.rng.randint(1, 5))
        elif kind == "drop":
            self.srv.inject_fault(None, rx, drop=True, count=1)
        elif kind == "401":
            if self.relogin_in is not None:
                return
            self.srv.revoke_token(self.srv.token_for(USER))   # the token is revoked; later: login again
            self.relogin_in = self.rng.randint(3, 15)
            rx = "the token"
        else:
            self.srv.inject_fault("POST", r"/seafhttp/", status=500, after_processing=True, count=1)
        self.stats.faults += 1
        self._note(f"fault {kind} on {rx}")

    def login_again(self) -> None:
        """The person signs in again (a new token in the keyring) and asks for a refresh."""
        from ohsync.daemon import credentials

        credentials.save_token(self.srv.url, USER, self.srv.token_for(USER))
        self.relogin_in = None
        self.stats.relogins += 1
        self._note("login again; refresh")
        try:
            assert self.daemon is not None
            self.daemon.client(timeout=10).call("refresh")
        except Exception as exc:  # noqa: BLE001 - a daemon just killed has no socket yet: it reads the keyring at start
            self._note(f"refresh: {type(exc).__name__}")

    def kill_and_restart(self) -> None:
        assert self.daemon is not None
        if self.daemon.proc.poll() is None:
            self.daemon.proc.send_signal(signal.SIGKILL)
            self.daemon.proc.wait(30)
        self.daemon.log.close()
        self.stats.kills += 1
        self._note("SIGKILL daemon; restart")
        self.start_daemon()

    # ------------------------------------------------------------------ the run

    def run(self, actions: int, *, pace: float = 0.05) -> Stats:
        """Do ``actions`` random actions, then quiesce and account for every version."""
        self.seed_library()
        if self.stale_enabled:
            self.stale = StaleBursts(self, self.remote_lock)
        self.start_daemon()
        assert self.daemon is not None
        self.daemon.wait_state("idle", timeout=120)
        next_kill = self.rng.randint(self.kill_every // 2, self.kill_every * 3 // 2)
        for i in range(actions):
            self.stats.actions = i + 1
            roll = self.rng.random()
            if roll < self.fault_rate:
                self.inject()
            elif roll < 0.55:
                self.local_action()
            else:
                self.remote_action()
            if self.relogin_in is not None:
                self.relogin_in -= 1
                if self.relogin_in <= 0:
                    self.login_again()
            if i + 1 >= next_kill:
                self.kill_and_restart()
                next_kill = i + 1 + self.rng.randint(self.kill_every // 2, self.kill_every * 3 // 2)
            time.sleep(self.rng.uniform(0, 2 * pace))  # why: the chaos run's random pace between actions
        if self.stale is not None:
            self.stale.join()                   # the burst under way ends; reads not used are dropped
            self.stats.stale_bursts, self.stats.stale_overwrites = self.stale.bursts, self.stale.overwrites
        for rel, old in self.pending_blind:     # finish the blind overwrites still pending
            if self.srv.file_id(self.repo, "/" + rel) is not None:
                self._blind_write(rel, old)
        self.pending_blind.clear()
        if self.relogin_in is not None:
            self.login_again()
        self.quiesce()
        self.account()
        return self.stats

    def quiesce(self, timeout: float = 240.0) -> None:
        """Faults off, daemon up, until both trees are equal and ``wait`` says synced."""
        self.srv.clear_faults()
        assert self.daemon is not None
        if self.daemon.proc.poll() is not None:
            self.start_daemon()

        def settled() -> bool:
            client = self.daemon.client(timeout=60)
            if client.call("held_deletes"):
                # the safety valve held a mass delete (many deletes piled up while the
                # daemon was down): the person looks and confirms, as `ohsync confirm-deletes`
                client.call("confirm_deletes")
                self.stats.confirms += 1
                self._note("confirm held deletes")
                return False
            status = client.call("status")
            attention = status.get("attention", [])
            paused = [a["path"] for a in attention if "two writers keep changing it" in a.get("reason", "")]
            if paused and len(paused) == len(attention) and not status.get("errors"):
                # a file the two writers fought over is left alone for a while: the person
                # looks, settles it (either version may stay live; the other is a copy) and refreshes
                # (only then: a refresh also releases failures, which must show if they stick)
                client.call("refresh")
                self.stats.refreshes += 1
                self._note(f"refresh for paused {paused}")
                return False
            if read_tree(self.mirror) != mirrored(self.srv.tree(self.repo)):
                return False
            return client.call("wait", {"timeout": 30}).get("synced") is True

        try:
            wait_for(settled, timeout=timeout, interval=1.0, what="quiescence")
            # two more polls (counted, not slept for: a loaded machine polls late): nothing may still be moving
            polls = self.daemon.status()["polls"]
            wait_for(lambda: self.daemon.status()["polls"] >= polls + 2, timeout=60, interval=0.2,
                     what="two more polls")
            wait_for(settled, timeout=60, interval=1.0, what="quiescence after two more polls")
        except AssertionError:
            local, server = read_tree(self.mirror), mirrored(self.srv.tree(self.repo))
            diff = sorted(k for k in set(local) | set(server) if local.get(k) != server.get(k))
            raise AssertionError(f"seed {self.stats.seed}: no quiescence; differing paths {diff[:20]}\n"
                                 f"--- daemon output ---\n{self.daemon.output()[-3000:]}") from None

    def account(self) -> None:
        """Find every marker live, in /.conflict/ or /.trash/ (either side); a remote
        writer's also in a local backup, never the person's (see the module docstring)."""
        server = self.srv.tree(self.repo)
        live = b"\n".join(list(read_tree(self.mirror).values()) + list(server.values()))
        backups = self.env.root / "state" / "backups"
        kept = b"\n".join(p.read_bytes() for p in backups.rglob("*") if p.is_file()) if backups.is_dir() else b""
        self.stats.memory_conflicts = sum(1 for k in server if k.startswith("/.conflict/") and k.endswith(".md"))
        for m, (writer, rel) in self.markers.items():
            in_backup = m.encode() in kept
            if m.encode() in live:
                self.stats.found += 1
            elif m in self.exempt:
                self.stats.exempt += 1
            elif m in self.deleted_seen:
                self.stats.deleted_seen += 1
            elif in_backup and writer != "local":
                self.stats.found += 1
                self.stats.backup_only += 1
            else:
                where = "only in a local backup" if in_backup else "nowhere"
                self.stats.lost.append(f"{m} ({writer}, written to {rel}; {where})")
        self.stats.written = len(self.markers) - self.stats.exempt - self.stats.deleted_seen

    def explain(self) -> str:
        """The seed and the actions on the lost markers' files (a minimal action log)."""
        names = {m.split(" ")[0] for m in self.stats.lost}
        files = {self.markers[m][1] for m in names if m in self.markers}
        for line in reversed(self.log):  # the names those files had before a folder or file move
            moved = re.search(r"local (?:folder )?move (\S+) -> (\S+)$", line)
            if moved:
                src, dst = moved.groups()
                files |= {src + f[len(dst):] for f in files if f == dst or f.startswith(dst + "/")}
        # the lines on those files, each with the kills, faults and folder moves just before it
        keep: list[str] = []
        for i, line in enumerate(self.log):
            if any(f in line for f in files):
                near = [x for x in self.log[max(0, i - 6):i] if "SIGKILL" in x or "fault" in x or "folder move" in x]
                keep += [x for x in near if x not in keep[-6:]] + [line]
        return f"seed {self.stats.seed}; lost {sorted(self.stats.lost)[:10]}\n" + "\n".join(keep[-150:])

    def close(self) -> None:
        if self.stale is not None:
            self.stale.close()
        if self.daemon is not None:
            self.daemon.stop()


def main(argv: list[str] | None = None) -> int:
    """``python tests/chaos.py [--seed N] [--actions N]``: the long profile, by hand."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--actions", type=int, default=10000)
    ap.add_argument("--stale-bursts", action=argparse.BooleanOptionalAction, default=True,
                    help="a stale device overwrites files from old reads, in bursts (default: on)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    ns = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="ohsync-chaos-"))
    sock_dir = Path(tempfile.mkdtemp(prefix="ohs-", dir="/tmp"))
    env = Env(root=root, sock_dir=sock_dir, keyring_file=root / "keyring.json", config=root / "config.toml")
    os.environ.update({k: v for k, v in env.vars().items()
                       if k in ("PYTHON_KEYRING_BACKEND", "OHSYNC_KEYRING_FILE", "OHSYNC_CONFIG")})
    from ohsync.devserver import DevServer

    srv = DevServer(root / "devserver", users={USER: "secret"})
    srv.start()
    chaos = Chaos(env, srv, root, ns.seed, stale_bursts=ns.stale_bursts)
    try:
        stats = chaos.run(ns.actions)
        print(stats.summary())
        if stats.lost:
            print(chaos.explain())
            return 1
        return 0
    finally:
        chaos.close()
        srv.stop()
        if not ns.keep:
            shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(sock_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
