"""A person's saved edit of a memory entity gets `modified` (and `origin`)
stamped before the push; never a file that is not a memory entity, never a
file that changed since the plan, never when the edit set `modified` itself."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from datetime import datetime

sys.path.insert(0, os.path.dirname(__file__))
from engine_helpers import USER, make_mirror, sample_library  # noqa: E402

from ohsync.engine.memory.index import parse_offset  # noqa: E402
from ohsync.engine.memory.stamp import stamp_edit  # noqa: E402

REL = "preferences/沟通风格偏好.md"


def _mirror(devserver, tmp_path, **opts):  # noqa: ANN001, ANN202
    repo = devserver.create_library(USER, "OH-Memory", from_tree=sample_library(tmp_path / "seed"))
    m = make_mirror(devserver, repo, tmp_path)
    m.engine.options = replace(m.engine.options, stamp_edits=True, stamp_quiet=0.2, **opts)
    m.engine.ctx.options = m.engine.options
    m.sync()
    return repo, m


def test_a_persons_edit_is_stamped_before_the_push(devserver, tmp_path) -> None:
    repo, m = _mirror(devserver, tmp_path, origin="desktop", time_offset="+08:00")
    before = m.read(REL)
    edited = before.replace(b"origin: desktop", b"origin: android").replace(
        b"## Relations", b"- [tone] \xe5\xb0\x91\xe7\x94\xa8\xe6\x84\x9f\xe5\x8f\xb9\xe5\x8f\xb7\n\n## Relations")
    # the android edit arrived earlier (base), then the person edits here
    m.write(REL, edited)
    m.sync([REL])
    base_text = devserver.read_file(repo, "/" + REL).decode()
    assert "origin: android" not in base_text  # origin follows this computer
    first = next(x for x in base_text.splitlines() if x.startswith("modified: "))
    time.sleep(1.1)  # why: stamps have whole seconds: let the second one differ
    started = datetime.now(parse_offset("+08:00")).replace(microsecond=0)
    text = m.read(REL).decode()
    m.write(REL, text.replace("少用感叹号", "少用感叹号和省略号").encode())
    m.sync([REL])
    on_server = devserver.read_file(repo, "/" + REL).decode()
    assert on_server == m.read(REL).decode()
    line = next(x for x in on_server.splitlines() if x.startswith("modified: "))
    stamped = datetime.fromisoformat(line.split(": ", 1)[1])
    assert stamped >= started and line.endswith("+08:00") and line != first
    assert "origin: desktop" in on_server and "少用感叹号和省略号" in on_server
    # everything else is byte for byte what the person saved
    strip = lambda s: [x for x in s.splitlines() if not x.startswith(("modified: ", "origin: "))]  # noqa: E731
    assert strip(on_server) == strip(text.replace("少用感叹号", "少用感叹号和省略号"))
    backups = [p for p in (tmp_path / "m-state" / "backups").rglob("沟通风格偏好*.md")]
    assert any(p.read_text(encoding="utf-8") == text.replace("少用感叹号", "少用感叹号和省略号") for p in backups)


def test_not_stamped_non_entities_changed_files_or_own_modified(devserver, tmp_path) -> None:
    repo, m = _mirror(devserver, tmp_path)
    # not a memory entity: a sidecar under Files/ and a markdown file without frontmatter
    sidecar = "Files/im/2026-11/群聊记录_数据结构互助小组_2026-11-18.txt.md"
    sidecar_text = m.read(sidecar) + b"\nmore\n"
    m.write(sidecar, sidecar_text)
    m.write("tasks/待办速记.md", b"- buy milk\n")
    m.sync([sidecar, "tasks/待办速记.md"])
    assert devserver.read_file(repo, "/tasks/待办速记.md") == b"- buy milk\n"
    assert devserver.read_file(repo, "/" + sidecar) == m.read(sidecar) == sidecar_text
    # the person set `modified` themselves: kept as written
    own = m.read(REL).replace(b"modified: 2026-10-18T23:05:00+08:00", b"modified: 2026-10-19T08:00:00+08:00")
    m.write(REL, own)
    m.sync([REL])
    assert devserver.read_file(repo, "/" + REL) == own
    # a file that changed after the plan was made is not touched
    m.write(REL, own + b"- [x1] still typing\n")
    st = os.stat(m.root / REL)
    stale = (st.st_size - 1, st.st_mtime_ns, st.st_ino)
    base = m.state.get_base(REL)
    assert not stamp_edit(m.engine.ctx, REL, stale, base, remote_changed=False)
    assert m.read(REL) == own + b"- [x1] still typing\n"


def test_off_by_config(devserver, tmp_path) -> None:
    repo, m = _mirror(devserver, tmp_path)
    m.engine.options = replace(m.engine.options, stamp_edits=False)
    m.engine.ctx.options = m.engine.options
    edited = m.read(REL) + b"- [x1] plain edit\n"
    time.sleep(0.01)  # why: mtime resolution: the edit gets an mtime of its own
    m.write(REL, edited)
    m.sync([REL])
    assert devserver.read_file(repo, "/" + REL) == edited


def test_memory_config_keys(tmp_path) -> None:
    import pytest

    from ohsync.daemon.config import ConfigError, load_config

    path = tmp_path / "config.toml"
    path.write_text('[memory]\ntime_offset = "-05:30"\nwrite_timeout = 5\nstamp_edits = true\norigin = "laptop"\n',
                    encoding="utf-8")
    cfg = load_config(path)
    assert (cfg.memory.time_offset, cfg.memory.write_timeout, cfg.memory.stamp_edits, cfg.memory.origin) == (
        "-05:30", 5.0, True, "laptop")
    from ohsync.engine.place import local_offset
    defaults = load_config(tmp_path / "missing.toml").memory
    assert defaults.time_offset == local_offset() and defaults.stamp_edits is True and defaults.language == "auto"
    path.write_text('[memory]\ntime_offset = "8"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="time_offset"):
        load_config(path)


def test_stamping_never_conflicts_with_a_concurrent_remote_edit_of_the_frontmatter(devserver, tmp_path,
                                                                                   monkeypatch) -> None:
    """The server's copy changes after the plan saw it unchanged (so `origin` is stamped too) and before the
    push: `modified`, `origin` and `tags` changed on both sides, observations on both, and it all merges."""
    import ohsync.engine.sync.run as sync_run

    repo, m = _mirror(devserver, tmp_path, origin="desktop", time_offset="+08:00")
    text = m.read(REL).decode()
    assert "origin: desktop" in text
    # the phone edited it last: the base says android
    devserver.put_file(repo, "/" + REL, text.replace("origin: desktop", "origin: android").encode())
    m.sync()
    base = m.read(REL).decode()
    assert "origin: android" in base
    time.sleep(0.3)  # why: mtime resolution: the local edit comes clearly after the synced copy
    mine = base.replace("## Relations", "- [tone] 电脑上加的一条\n\n## Relations")
    m.write(REL, mine.encode())
    line = next(x for x in base.splitlines() if x.startswith("modified: "))
    tags = next(x for x in base.splitlines() if x.startswith("tags: "))
    theirs = (base.replace("origin: android", "origin: bot").replace(line, "modified: 2026-11-30T09:00:00+08:00")
              .replace(tags, tags[:-1] + ", 远程]").replace("## Relations", "- [tone] 机器人加的一条\n\n## Relations"))
    real = sync_run.stamp_edit
    stamped: list[bool] = []

    def remote_edit_then_stamp(ctx, rel, fp, b, *, remote_changed, now=None):  # noqa: ANN001, ANN202
        devserver.put_file(repo, "/" + REL, theirs.encode())  # lands after the plan, before the push
        stamped.append(real(ctx, rel, fp, b, remote_changed=remote_changed, now=now))
        return stamped[-1]
    monkeypatch.setattr(sync_run, "stamp_edit", remote_edit_then_stamp)
    report = m.sync([REL])
    assert stamped == [True]
    assert report.conflicts == [] and report.errors == []
    assert not any(p.startswith(("/.conflict", ".conflict")) for p in devserver.tree(repo))
    on_server = devserver.read_file(repo, "/" + REL).decode()
    assert on_server == m.read(REL).decode()
    assert "电脑上加的一条" in on_server and "机器人加的一条" in on_server and "远程" in on_server
    assert "origin: desktop" in on_server  # this computer's stamp is the later edit
    modified = next(x for x in on_server.splitlines() if x.startswith("modified: "))
    assert datetime.fromisoformat(modified.split(": ", 1)[1]) > datetime.fromisoformat("2026-11-30T09:00:00+08:00")


def test_a_save_the_watcher_saw_complete_is_stamped_without_waiting(devserver, tmp_path, monkeypatch) -> None:
    """``stamp_quiet`` guards a file an editor may still be writing; a save the
    daemon's watcher saw closed after writing (or renamed onto) is done: no wait.
    Any other just-written file still waits."""
    from ohsync.engine.memory import stamp

    repo, m = _mirror(devserver, tmp_path)
    m.engine.options = replace(m.engine.options, stamp_quiet=600.0)
    m.engine.ctx.options = m.engine.options
    waits: list[float] = []
    monkeypatch.setattr(stamp.time, "sleep", waits.append)
    m.write(REL, m.read(REL).replace(b"## Relations", b"- [tone] saved in an editor\n\n## Relations"))
    m.engine.note_saved([REL])
    assert m.sync([REL]).errors == []
    on_server = devserver.read_file(repo, "/" + REL)
    assert waits == [] and b"saved in an editor" in on_server and on_server == m.read(REL)
    assert m.engine.ctx.saved == set()  # for that pass only
    m.write(REL, m.read(REL).replace(b"saved in an editor", b"saved again, seen by no watcher"))
    assert m.sync([REL]).errors == []
    assert len(waits) == 1 and 0 < waits[0] <= 600.0
