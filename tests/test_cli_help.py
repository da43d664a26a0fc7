"""Every command and option of ``ohsync`` explains itself: a walk over the whole parser."""

from __future__ import annotations

import argparse

from ohsync.daemon.cli.main import build_parser


def _walk(parser: argparse.ArgumentParser, name: str):
    """Yield ``(command path, parser)`` for ``parser`` and every subcommand below it."""
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            summaries = {a.dest: a.help for a in action._choices_actions}
            for sub_name, child in action.choices.items():
                if sub_name in summaries:  # aliases have no summary line of their own
                    assert (summaries[sub_name] or "").strip(), f"`{name} {sub_name}` has no one-line summary"
                yield from _walk(child, f"{name} {sub_name}")


def test_every_command_has_a_summary_and_every_option_a_help() -> None:
    missing = []
    commands = 0
    for path, parser in _walk(build_parser(), "ohsync"):
        commands += 1
        for action in parser._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            if not (action.help or "").strip() or action.help == argparse.SUPPRESS:
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    assert commands > 25  # the walk reached the subcommands' own subcommands
    assert not missing, "options without help: " + ", ".join(missing)


def test_help_of_numeric_options_names_unit_or_default() -> None:
    vague = []
    for path, parser in _walk(build_parser(), "ohsync"):
        for action in parser._actions:
            if action.type in (int, float) and action.default not in (None, argparse.SUPPRESS):
                text = action.help or ""
                if "%(default)" not in text and str(action.default) not in text:
                    vague.append(f"{path} {'/'.join(action.option_strings)}")
    assert not vague, "numeric options whose help names no default: " + ", ".join(vague)


def test_global_config_option_is_accepted_after_the_command() -> None:
    p = build_parser()
    assert p.parse_args(["status", "--config", "a.toml"]).config == "a.toml"
    assert p.parse_args(["--config", "b.toml", "status"]).config == "b.toml"
    assert p.parse_args(["status"]).config is None


def test_a_daemon_of_another_config_is_named(tmp_path, monkeypatch, capsys) -> None:
    """Two configs naming one socket: the CLI says whose daemon answered before its output."""
    import shutil
    import tempfile
    from pathlib import Path

    from ohsync.daemon.cli.main import main
    from ohsync.daemon.socket.server import SocketServer

    sock = Path(tempfile.mkdtemp(prefix="ohs-", dir="/tmp")) / "s.sock"
    mine, theirs = tmp_path / "mine.toml", tmp_path / "theirs.toml"
    mine.write_text(f'socket = "{sock}"\n')
    theirs.write_text(f'socket = "{sock}"\n')
    monkeypatch.delenv("OHSYNC_SOCKET", raising=False)
    asked: list[str] = []
    server = SocketServer(sock, {"ping": lambda p: asked.append("ping") or {"pid": 1},
                                 "conflicts": lambda p: asked.append("conflicts") or []})
    server.stamp_answers(config=str(theirs))  # as the daemon does: every answer names its config
    server.start()
    try:
        assert main(["conflicts", "--config", str(mine)]) == 0
        out, err = capsys.readouterr()
        assert f"runs the config {theirs}, not {mine}" in err and "No conflicts." in out
        assert asked == ["conflicts"]  # the note came with the answer: no ping of its own
        server.stamp_answers(config=str(mine))
        assert main(["--config", str(mine), "conflicts"]) == 0
        assert "runs the config" not in capsys.readouterr().err
    finally:
        server.stop()
        shutil.rmtree(sock.parent, ignore_errors=True)


def test_a_missing_config_file_given_with_config_is_an_error(tmp_path, capsys) -> None:
    from ohsync.daemon.cli.main import main

    missing = tmp_path / "other.toml"
    assert main(["status", "--config", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"there is no config file {missing}" in err and "setup" in err
