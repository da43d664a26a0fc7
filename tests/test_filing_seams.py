"""Filing on the engine's seams: the stability gate the daemon injects, and
crash points that the engine only announces (the daemon decides to kill)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from ohsync.daemon.crash_at import ENV, install_from_env, killer
from ohsync.daemon.filing_service import FilingService
from ohsync.daemon.stability import StabilityGate
from ohsync.engine import crashpoints
from ohsync.engine.errors import OhsyncError
from ohsync.engine.events import SyncEvent
from ohsync.engine.filing.api import DOWNLOADING, WRITING
from ohsync.engine.filing.filer import Filer, journal_line
from ohsync.engine.ids import seafile_file_id, sha1_bytes
from ohsync.engine.models import RemoteEntry


@pytest.fixture
def no_hook():
    previous = crashpoints.set_hook(None)
    yield
    crashpoints.set_hook(previous)


# -- crash points -------------------------------------------------------------------------------

def test_reach_without_a_hook_does_nothing(no_hook):
    for point in crashpoints.POINTS:
        crashpoints.reach(point)


def test_the_engine_announces_each_point_to_the_installed_hook(no_hook):
    heard: list[str] = []
    crashpoints.set_hook(heard.append)
    crashpoints.reach("push.uploaded")
    crashpoints.reach("filing.moved")
    assert heard == ["push.uploaded", "filing.moved"]
    assert crashpoints.set_hook(None) is not None


def test_the_daemons_killer_dies_at_the_nth_time_of_its_point_only():
    deaths: list[str] = []
    hook = killer("filing.chunk_sent:2", kill=lambda: deaths.append("dead"))
    hook("filing.uploaded")
    hook("filing.chunk_sent")
    assert deaths == []
    hook("filing.chunk_sent")
    assert deaths == ["dead"]


@pytest.mark.parametrize("spec", ["no.such_point", "push.uploaded:0"])
def test_a_bad_crash_point_is_refused_with_a_sentence(no_hook, spec):
    with pytest.raises(OhsyncError) as info:
        install_from_env({ENV: spec})
    assert ENV in info.value.message


def test_install_from_env_installs_only_when_the_variable_is_set(no_hook):
    assert install_from_env({}) is False and crashpoints.set_hook(None) is None
    assert install_from_env({ENV: "pull.replaced"}) is True
    assert crashpoints.set_hook(None) is not None


# -- the stability gate -----------------------------------------------------------------------------

def test_gate_says_downloading_for_partial_names_and_companions(tmp_path):
    gate = StabilityGate(writers=lambda p: False)
    (tmp_path / "a.pdf.crdownload").write_bytes(b"x")
    (tmp_path / "b.pdf").write_bytes(b"")
    (tmp_path / "b.pdf.part").write_bytes(b"x")
    (tmp_path / "c.pdf").write_bytes(b"x")
    assert gate.not_ready(tmp_path / "a.pdf.crdownload") == DOWNLOADING
    assert gate.not_ready(tmp_path / "b.pdf") == DOWNLOADING
    assert gate.not_ready(tmp_path / "c.pdf") is None


def test_gate_says_writing_when_its_writer_check_sees_a_writer(tmp_path):
    path = tmp_path / "c.pdf"
    path.write_bytes(b"x")
    old = path.stat().st_mtime - 60
    os.utime(path, (old, old))
    busy = {path}
    gate = StabilityGate(writers=lambda p: Path(p) in busy)
    assert gate.not_ready(path) == WRITING and not gate.is_stable(path, 3)
    busy.clear()
    assert gate.not_ready(path) is None and gate.is_stable(path, 3)
    assert not gate.is_stable(path, 3, now=old + 1)  # modified a second ago


def test_the_service_injects_its_own_gate_into_the_filers_it_makes(tmp_path):
    seen: list[Path] = []

    class Gate(StabilityGate):
        def not_ready(self, path: Path) -> str | None:
            seen.append(Path(path))
            return WRITING

    gate = Gate()
    service = FilingService(tmp_path / "drop", lambda fn: fn(), lambda r: None, gate=gate)
    assert service.gate is gate
    mirror = FakeMirror(tmp_path / "mirror")
    filer = service.new_filer(mirror, [], "/Files/_inbox/", tmp_path / "filing.db")
    try:
        dropped = tmp_path / "elsewhere.txt"
        dropped.write_bytes(b"held open by someone\n")
        result = filer.file(dropped)
    finally:
        filer.close()
    assert result.status == "not_ready" and result.retryable and "being written" in result.message
    assert seen == [dropped] and mirror.remote == {}


def test_the_service_waits_on_its_gate_before_it_hands_a_file_on(tmp_path):
    answers = {"busy": True}

    class Gate(StabilityGate):
        def not_ready(self, path: Path) -> str | None:
            return WRITING if answers["busy"] else None

    service = FilingService(tmp_path / "drop", lambda fn: fn(), lambda r: None, quiet_seconds=0.0,
                            gate=Gate())
    service.drop_dir.mkdir()
    path = service.drop_dir / "x.txt"
    path.write_bytes(b"x")
    service._note(path)
    with service.cond:
        assert service._due_paths() == []  # quiet, but the gate says it is being written
        assert service._due_paths() == [] and service.status()["waiting"] == 1
        answers["busy"] = False
        assert service._due_paths() == [str(path)]


# -- filing against a fake of its engine API ------------------------------------------------------

class FakeMirror:
    """:class:`~ohsync.engine.filing.api.MirrorAPI` in memory: ``remote``
    maps rel paths to bytes; the local mirror is a real folder."""

    def __init__(self, root: Path, free: int | None = None) -> None:
        self.local_root, self.remote_root = root, "/"
        root.mkdir(parents=True, exist_ok=True)
        self.remote: dict[str, bytes] = {}
        self.folders: set[str] = set()  # created by upload_new
        self.adopted: dict[str, str] = {}
        self.events: list[SyncEvent] = []
        self.free = free
        self.calls: list[str] = []

    def _entry(self, rel: str) -> RemoteEntry:
        return RemoteEntry(rel, False, seafile_file_id(self.remote[rel]), len(self.remote[rel]))

    def remote_file(self, rel):
        return self._entry(rel) if rel in self.remote else None

    def list_folder(self, rel):
        prefix = rel + "/" if rel else ""
        return sorted({p[len(prefix):].split("/")[0] for p in self.remote if p.startswith(prefix)})

    def known(self, rel):
        return rel in self.remote

    def find_copy(self, sha1, file_id, under):
        return next((p for p, data in sorted(self.remote.items())
                     if sha1_bytes(data) == sha1 and (under == "" or p.startswith(under + "/"))), None)

    def free_space(self):
        return self.free

    def upload_new(self, rel, fh, size, *, resume, attempts, chunk_size, progress, before_chunk):
        self.calls.append(f"upload {rel}")
        self.folders.add(rel.rsplit("/", 1)[0])
        before_chunk(0, size)
        fh.seek(0)
        data = fh.read(size)
        stored = rel
        while stored in self.remote:
            stored += " (1)"
        self.remote[stored] = data
        progress(size, size)
        return stored, seafile_file_id(data)

    def verify(self, entry, *, sha1, size, file_id):
        self.calls.append(f"verify {entry.path}")
        data = self.remote.get(entry.path)
        return data is not None and sha1_bytes(data) == sha1 and len(data) == size

    def delete_remote(self, rel):
        self.remote.pop(rel, None)

    def pull(self, rel):
        if rel not in self.remote:
            return False
        target = self.local_root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(self.remote[rel])
        return True

    def push(self, rel):
        self.calls.append(f"push {rel}")
        self.remote[rel] = (self.local_root / rel).read_bytes()
        return "upload"

    def write_over(self, rel, data, expected):
        self.calls.append(f"write over {rel}")
        (self.local_root / rel).write_bytes(data)

    def adopt(self, rel, *, sha1, remote_id, size):
        self.adopted[rel] = remote_id

    def emit(self, event):
        self.events.append(event)


NOW = datetime(2026, 11, 30, 9, 12, 34, tzinfo=timezone(timedelta(hours=8)))


def fake_filer(tmp_path: Path, mirror: FakeMirror) -> Filer:
    drop = tmp_path / "drop"
    drop.mkdir(exist_ok=True)
    return Filer(mirror, drop, [{"match": "*.pdf", "dest": "/Files/pdf/{yyyy}/"}], "/Files/_inbox/",
                 tmp_path / "filing.db", ready=StabilityGate(writers=lambda p: False).not_ready, now=lambda: NOW)


def drop(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / "drop" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def test_filing_runs_end_to_end_on_a_fake_of_its_engine_api(tmp_path):
    mirror = FakeMirror(tmp_path / "mirror")
    mirror.remote["journal/2026-11.md"] = b"---\ntitle: 2026-11\n---\n\n## Observations\n- [x] kept\n"
    filer = fake_filer(tmp_path, mirror)
    try:
        source = drop(tmp_path, "notes.pdf", b"%PDF-1.4 lecture\n")
        result = filer.file(source)
    finally:
        filer.close()
    assert result.status == "filed", result.message
    assert result.remote_path == "/Files/pdf/2026/notes.pdf"
    assert mirror.remote["Files/pdf/2026/notes.pdf"] == b"%PDF-1.4 lecture\n"
    assert b"sha1: " + sha1_bytes(b"%PDF-1.4 lecture\n").encode() in mirror.remote["Files/pdf/2026/notes.pdf.md"]
    journal = mirror.remote["journal/2026-11.md"].decode()
    assert "- [x] kept" in journal and journal_line("notes.pdf", "/Files/pdf/2026/notes.pdf", NOW) in journal
    assert mirror.calls == ["upload Files/pdf/2026/notes.pdf", "verify Files/pdf/2026/notes.pdf",
                            "push Files/pdf/2026/notes.pdf.md", "write over journal/2026-11.md",
                            "push journal/2026-11.md"]
    assert not source.exists() and (mirror.local_root / "Files/pdf/2026/notes.pdf").read_bytes() == \
        b"%PDF-1.4 lecture\n"
    assert mirror.adopted == {"Files/pdf/2026/notes.pdf": seafile_file_id(b"%PDF-1.4 lecture\n")}
    assert [e.kind for e in mirror.events][-1] == "synced"


def test_on_the_fake_a_duplicate_and_a_full_account_upload_nothing(tmp_path):
    mirror = FakeMirror(tmp_path / "mirror", free=10)
    mirror.remote["Files/old/a.txt"] = b"same\n"
    filer = fake_filer(tmp_path, mirror)
    try:
        assert filer.file(drop(tmp_path, "b.txt", b"same\n")).status == "duplicate"
        assert filer.file(drop(tmp_path, "c.txt", b"new and too big\n")).status == "over_quota"
    finally:
        filer.close()
    assert mirror.calls == [] and list(mirror.remote) == ["Files/old/a.txt"]


def test_on_the_fake_a_read_back_that_does_not_match_removes_our_upload(tmp_path):
    mirror = FakeMirror(tmp_path / "mirror")
    mirror.verify = lambda entry, **kw: False  # type: ignore[method-assign]
    filer = fake_filer(tmp_path, mirror)
    try:
        source = drop(tmp_path, "x.txt", b"x\n")
        result = filer.file(source)
        pending = filer.pending()
    finally:
        filer.close()
    assert result.status == "failed" and result.retryable and "did not match" in result.message
    assert mirror.remote == {} and source.exists() and [p["step"] for p in pending] == ["planned"]


# -- one thread base and one debouncer for both folder services ---------------------------------------

def test_watcher_and_filing_service_share_the_thread_base_and_the_debouncer(tmp_path):
    from ohsync.daemon.debounce import Debouncer
    from ohsync.daemon.service_thread import ServiceThread
    from ohsync.daemon.watcher import Watcher

    watcher = Watcher(tmp_path, lambda p: p, lambda paths, scan: None)
    service = FilingService(tmp_path / "drop", lambda fn: fn(), lambda r: None)
    assert isinstance(watcher, ServiceThread) and isinstance(service, ServiceThread)
    assert isinstance(watcher._paths, Debouncer) and isinstance(service._waiting, Debouncer)


def test_debouncer_restarts_a_key_on_each_touch_and_honours_holds():
    from ohsync.daemon.debounce import Debouncer

    clock = [100.0]
    d: Debouncer[str] = Debouncer(2.0, clock=lambda: clock[0])
    d.touch("a")
    d.hold("b", until=110.0)
    clock[0] = 101.5
    d.touch("a")  # an event during the quiet period restarts it
    assert d.pop_due() == [] and d.next_due() == 103.5 and d.newest() == 101.5
    clock[0] = 103.5
    assert d.pop_due() == ["a"] and "a" not in d and len(d) == 1
    d.touch("b")  # a new event keeps the hold
    clock[0] = 106.0
    assert d.pop_due() == []
    d.release_holds()
    assert d.pop_due() == ["b"] and d.next_due() is None and d.pop_all() == []


# -- the one read-back every writer uses --------------------------------------------------------------

class _Client:
    """Serves one file's bytes for downloads and counts them."""

    def __init__(self, data: bytes) -> None:
        self.data, self.downloads = data, 0

    def download(self, repo_id, path, dest, **kw):
        self.downloads += 1
        dest.write(self.data)
        return "id"


def _ctx(client: _Client, limit: int):
    from ohsync.engine.context import EngineOptions, MirrorContext

    return MirrorContext(client, "r", "/", Path("/nonexistent"), state=None,  # type: ignore[arg-type]
                         options=EngineOptions(readback_full_limit=limit))


@pytest.mark.parametrize("size, same_id, downloads", [
    (10, True, 0),       # small with the locally computed content id: the id proves it
    (10, False, 1),      # small with another id: downloaded and compared
    (10_000, True, 0),   # large with the locally computed content id: the id proves it
    (10_000, False, 1),  # large with another id: downloaded and compared
])
def test_the_shared_read_back_downloads_unless_the_files_id_proves_it(size, same_id, downloads):
    from ohsync.engine.write_path import holds_content

    data = os.urandom(size)
    client = _Client(data)
    ctx = _ctx(client, limit=1000)
    fid = seafile_file_id(data)
    entry = RemoteEntry("a.bin", False, fid if same_id else "f" * 40, size)
    assert holds_content(ctx, entry, sha1=sha1_bytes(data), size=size, file_id=fid)
    assert client.downloads == downloads
    client.data = data[:-1] + bytes([data[-1] ^ 1])  # the server holds other bytes
    assert holds_content(ctx, entry, sha1=sha1_bytes(data), size=size, file_id=fid) is (downloads == 0)
