"""How the CLI shows what the daemon answers: names as they are, columns that
line up, long lists cut short, natural order, sentences without doubled words.
A stand-in daemon (the real socket server with fixed handlers) answers."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import isolated_env  # noqa: F401
from ohsync.daemon.attention import attention_items, natural_key, summary, wait_verdict
from ohsync.daemon.cli.main import main
from ohsync.daemon.socket.server import CannotNow, SocketServer

ANSWERS: dict[str, Any] = {}


@pytest.fixture
def fake_daemon(isolated_env) -> Iterator[dict[str, Any]]:
    def answer(method: str):
        def handler(params: Any) -> Any:
            value = ANSWERS[method]
            if isinstance(value, Exception):
                raise value
            return value
        return handler

    methods = ("status", "wait", "activity", "conflicts", "held_deletes", "refresh", "memory.read", "damaged",
               "pause", "resume")
    server = SocketServer(isolated_env.socket, {m: answer(m) for m in methods})
    server.start()
    ANSWERS.clear()
    try:
        yield ANSWERS
    finally:
        server.stop()


def _status(**kw: Any) -> dict[str, Any]:
    st = {"state": "attention", "message": "Needs attention", "mirrors": [], "last_sync": None}
    st.update(kw)
    return st


def test_a_skipped_name_is_shown_as_it_is(fake_daemon, capsys) -> None:
    fake_daemon["status"] = _status(skipped=1, attention=[
        {"kind": "skipped", "path": "bad\\name.txt", "reason": "not synced"},
        {"kind": "skipped", "path": "new\nline.md", "reason": "not synced"}])
    assert main(["status"]) == 0
    out = capsys.readouterr().out
    assert "'bad\\name.txt'" in out and "bad\\\\name" not in out
    assert "'new\\nline.md'" in out  # a control character stays visible


def test_the_attention_summary_names_the_commands_not_status_itself() -> None:
    text = summary(held=2, damaged=1, skipped=1)
    assert "ohsync status" not in text
    assert "`ohsync confirm-deletes`" in text and "`ohsync damaged`" in text


def test_wait_lists_at_most_ten_reasons(fake_daemon, capsys) -> None:
    held = [(f"f{i}.md", "remote") for i in range(1, 26)]
    verdict = wait_verdict(held=held)
    fake_daemon["wait"] = {"synced": False, "message": verdict.message, "reasons": list(verdict.reasons)}
    assert main(["wait", "--timeout", "1"]) == 1
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("  held_delete:")]
    assert len(lines) == 10 and "and 15 more" in err
    assert [line.split("'")[1] for line in lines[:3]] == ["f1.md", "f2.md", "f3.md"]


def test_lists_are_in_natural_order() -> None:
    items = attention_items(held=[("f10.md", "remote"), ("f2.md", "remote"), ("f1.md", "remote")])
    assert [i["path"] for i in items] == ["f1.md", "f2.md", "f10.md"]
    assert sorted(["b/f10", "a", "b/f9", "B/f1"], key=natural_key) == ["a", "B/f1", "b/f9", "b/f10"]
    assert "(f1.md, f2.md, f10.md)" in wait_verdict(held=[("f10.md", "local"), ("f2.md", "local"),
                                                         ("f1.md", "local")]).message


def test_held_deletions_are_listed_in_natural_order(fake_daemon, capsys) -> None:
    fake_daemon["held_deletes"] = [{"path": p, "side": "remote"} for p in ("f10.md", "f9.md", "f1.md")]
    assert main(["confirm-deletes", "--list"]) == 0
    assert [line.split()[0] for line in capsys.readouterr().out.splitlines()] == ["f1.md", "f9.md", "f10.md"]


def test_activity_conflict_lines_keep_the_columns(fake_daemon, capsys) -> None:
    fake_daemon["activity"] = [
        {"time": "2026-12-01T10:00:00", "path": "a.md", "action": "upload", "result": "ok"},
        {"time": "2026-12-01T10:00:01", "path": "b.md", "action": "/.conflict/b (conflict 2026-12-01).md",
         "result": "conflict", "message": "both sides changed"}]
    assert main(["activity"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.index(p) for line, p in zip(lines, ("a.md", "b.md"), strict=False)] == [lines[0].index("a.md")] * 2
    assert "conflict" in lines[1] and "other version kept as /.conflict/b (conflict 2026-12-01).md" in lines[1]
    assert lines[1].split()[1:3] == ["conflict", "archived"]  # the kind once, then what became of it


def test_conflicts_say_how_to_settle_one(fake_daemon, capsys) -> None:
    fake_daemon["conflicts"] = [{"time": "2026-12-01T10:00:00", "path": "notes.md",
                                 "archived": "/.conflict/notes (conflict).md", "reason": "both sides changed"}]
    assert main(["conflicts"]) == 0
    assert "then delete /.conflict/notes (conflict).md" in capsys.readouterr().out


def test_a_refusal_is_not_called_refused_twice(fake_daemon, capsys) -> None:
    fake_daemon["refresh"] = CannotNow("refused: syncing is stopped")
    assert main(["refresh"]) == 1
    err = capsys.readouterr().err
    assert "the daemon refused: syncing is stopped" in err and "refused: refused" not in err


def test_memory_commands_name_the_commands_not_the_mcp_tools(fake_daemon, capsys) -> None:
    fake_daemon["memory.read"] = CannotNow("no memory entity has the permalink 'x'; it may have been deleted. "
                                           "Use memory_search to find it")
    assert main(["memory", "read", "x"]) == 1
    err = capsys.readouterr().err
    assert "Use `ohsync memory search` to find it" in err and "memory_search" not in err


def test_a_missing_library_is_explained_once(isolated_env, devserver, tmp_path) -> None:
    from daemon_helpers import write_config
    from ohsync.daemon.config import load_config
    from ohsync.daemon.session import open_session
    from ohsync.daemon.worker import FatalError

    user = "user@example.edu.cn"
    write_config(isolated_env, devserver.url, user, tmp_path / "mirror")
    with pytest.raises(FatalError) as caught:
        cfg = load_config(isolated_env.config)
        open_session(cfg, lambda e: None, mirror=cfg.mirrors[0], token=devserver.token_for(user))
    message = caught.value.message
    assert "'OH-Memory' does not exist on the server" in message
    assert message.count("web interface") == 1 and message.count("create_library") == 1


def test_doctor_says_when_the_config_file_does_not_exist(isolated_env, tmp_path, capsys) -> None:
    missing = tmp_path / "nonexistent" / "x.toml"
    assert main(["--config", str(missing), "doctor"]) == 1
    out = capsys.readouterr().out
    assert f"The config file {missing} does not exist" in out


def test_a_negative_log_line_count_is_a_usage_error(isolated_env, capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["log", "-n", "-3"])
    assert e.value.code == 2
    assert "give 0 or more" in capsys.readouterr().err


def test_the_readme_command_table_names_every_command() -> None:
    import argparse
    from pathlib import Path

    from ohsync.daemon.cli.main import build_parser

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    table = "\n".join(line for line in readme.splitlines() if line.startswith("| `"))
    [sub] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    missing = [name for name in sub.choices if f"`{name}" not in table and f" `{name}`" not in table
               and f"`{name} " not in table and f", `{name}" not in table]
    assert not missing, f"README's command table lacks {missing}"


def test_damaged_files_are_listed_in_natural_order(fake_daemon, capsys) -> None:
    fake_daemon["damaged"] = [{"path": p, "reason": "bad"} for p in ("n10.md", "n2.md", "n1.md")]
    assert main(["damaged"]) == 0
    assert [line.split(":")[0] for line in capsys.readouterr().out.splitlines()] == ["n1.md", "n2.md", "n10.md"]


def test_pause_of_one_mirror_says_which_and_how_to_resume_it(fake_daemon, capsys) -> None:
    fake_daemon["pause"] = fake_daemon["resume"] = {}
    assert main(["pause"]) == 0
    assert capsys.readouterr().out == "Syncing paused.\n"
    assert main(["pause", "--mirror", "Course notes"]) == 0
    out = capsys.readouterr().out
    assert "Syncing of Course notes paused (the other mirrors go on)" in out
    assert "`ohsync resume --mirror 'Course notes'`" in out
    assert main(["resume", "--mirror", "Course notes"]) == 0
    assert capsys.readouterr().out == "Syncing of Course notes resumed.\n"


def test_status_says_what_needs_the_person_and_its_exit_code_says_whether_it_syncs(fake_daemon, capsys) -> None:
    """An open conflict is never "Up to date"; exit 0 while the mirror syncs, 1 while it does not,
    3 without a daemon (as `ohsync status --help` says)."""
    from daemon_helpers import idle_snapshot
    from ohsync.daemon.status import build_status

    fake_daemon["status"] = build_status(idle_snapshot(conflicts=1))
    assert main(["status"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("attention: Needs attention: 1 conflict needs you")
    assert "`ohsync conflicts`" in first and "`ohsync panel`" in first and "Up to date" not in first
    fake_daemon["status"] = build_status(idle_snapshot(problem="stopped", problem_message="The library is gone."))
    assert main(["status"]) == 1
    assert capsys.readouterr().out.startswith("stopped: The library is gone.")
    fake_daemon["status"] = build_status(idle_snapshot(paused=True))
    assert main(["status", "--json"]) == 0


def test_status_without_a_daemon_exits_3_and_its_help_names_the_exit_codes(isolated_env, capsys) -> None:
    assert main(["status"]) == 3
    assert "ohsync is not running" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["status", "--help"])
    out = capsys.readouterr().out
    assert "Exit codes: 0 the daemon runs and syncs" in out and "3 ohsync is not running" in out


def test_activity_names_the_archived_copy_once(fake_daemon, capsys) -> None:
    copy = ".conflict/plan__remote__2026-12-01.txt"
    fake_daemon["activity"] = [{"time": "2026-12-01T10:00:01", "path": "plan.txt", "action": copy,
                                "result": "conflict", "message": f"remote version archived as {copy}"}]
    assert main(["activity"]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    assert line.count(copy) == 1 and f"remote version archived as {copy}" in line


@pytest.mark.parametrize("named,bad,said", [
    (False, 'poll_interval = "30s"', "`poll_interval` has the wrong type"),
    (True, 'poll_interval = "30s"', "`poll_interval` has the wrong type"),
    (True, "poll_interval = ", "is not valid TOML")])
def test_status_with_a_broken_config_still_shows_the_running_daemon(isolated_env, capsys, named, bad,
                                                                     said) -> None:
    """A config edited into an invalid state while the daemon runs: the error, then that
    daemon's status (it keeps the settings it started with), on the socket the file names."""
    from daemon_helpers import idle_snapshot
    from ohsync.daemon.socket.server import SocketServer
    from ohsync.daemon.status import build_status

    socket = isolated_env.sock_dir / "own" / "own.sock" if named else isolated_env.socket
    line = f'socket = "{socket}"\n' if named else ""
    isolated_env.config.write_text(f'{line}{bad}\n[[mirror]]\nlibrary = "OH-Memory"\n',
                                   encoding="utf-8")
    server = SocketServer(socket, {"status": lambda p: build_status(idle_snapshot())})
    server.start()
    try:
        assert main(["status"]) == 1
    finally:
        server.stop()
    out, err = capsys.readouterr()
    assert said in err and "keeps the settings it started with" in err
    assert out.startswith("idle: Up to date") and "Traceback" not in err
    assert main(["status"]) == 1  # no daemon: the error alone
    out, err = capsys.readouterr()
    assert out == "" and said in err and "started with" not in err


def test_each_file_that_cannot_sync_is_listed_once(fake_daemon, capsys) -> None:
    from daemon_helpers import idle_snapshot
    from ohsync.daemon.status import build_status

    def failure(path: str, permanent: bool) -> dict[str, Any]:
        return {"path": path, "reason": "the server has no space for it", "title": "Quota", "needs": "space",
                "permanent": permanent, "count": 1, "since": None, "retry_at": None}

    fake_daemon["status"] = build_status(idle_snapshot(failures=(failure("a.bin", True), failure("b.bin", False),
                                                                 failure("c.bin", True))))
    main(["status"])
    out = capsys.readouterr().out
    assert out.count("a.bin") == 1 and "3 file(s) cannot sync now; a.bin: " in out  # the message names the first
    assert "cannot sync: 'b.bin' — the server has no space for it (retried later)" in out
    assert "cannot sync: 'c.bin' — the server has no space for it\n" in out
