"""One CLI convention: every command comes from a module of ``daemon/cli/`` listed in
``main.COMMANDS``, whose one ``register(subparsers) -> None`` adds its parsers and their handlers."""

from __future__ import annotations

import argparse
import inspect
from pathlib import Path
from types import ModuleType

import ohsync.daemon.cli as cli_package
from ohsync.daemon.cli.main import COMMANDS, build_parser

#: The modules of ``daemon/cli/`` that are not commands: the package, ``python -m``, the list and the helpers.
NOT_COMMANDS = {"__init__", "__main__", "main", "common"}


def _commands_of(module: ModuleType) -> dict[str, argparse.ArgumentParser]:
    """The commands ``module.register`` adds to a parser of its own, in the order it adds them."""
    sub = argparse.ArgumentParser(prog="ohsync").add_subparsers()
    assert module.register(sub) is None
    return dict(sub.choices)


def _below(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and every subcommand parser below it."""
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found.extend(_below(child))
    return found


def test_every_listed_module_has_the_one_register_shape() -> None:
    assert COMMANDS and len(set(COMMANDS)) == len(COMMANDS)
    for module in COMMANDS:
        assert module.__name__.startswith("ohsync.daemon.cli."), module.__name__
        register = getattr(module, "register", None)
        assert callable(register), f"{module.__name__} has no register"
        signature = inspect.signature(register)
        assert list(signature.parameters) == ["subparsers"], f"{module.__name__}.register{signature}"
        assert signature.return_annotation in (None, "None"), f"{module.__name__}.register{signature}"
        commands = _commands_of(module)
        assert commands, f"{module.__name__}.register added no command"
        for parser in commands.values():
            for p in _below(parser):  # the command and each of its own subcommands sets its handler
                assert callable(p.get_default("func")), f"`{p.prog}` ({module.__name__}) sets no handler"


def test_the_parser_has_exactly_the_listed_modules_commands_in_their_order() -> None:
    expected: list[str] = []
    for module in COMMANDS:
        expected.extend(_commands_of(module))
    assert len(set(expected)) == len(expected), "two modules add the same command"
    [sub] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(sub.choices) == expected  # nothing is added outside the list, nothing listed is lost


def test_every_command_module_of_the_package_is_in_the_list() -> None:
    folder = Path(cli_package.__file__).parent
    modules = {path.stem for path in folder.glob("*.py")} - NOT_COMMANDS
    listed = {module.__name__.rsplit(".", 1)[1] for module in COMMANDS}
    assert modules == listed, f"not in main.COMMANDS: {sorted(modules - listed)}"


def test_main_and_common_add_no_command_themselves() -> None:
    folder = Path(cli_package.__file__).parent
    main_source = (folder / "main.py").read_text(encoding="utf-8")
    assert "add_parser(" not in main_source and "add_command(" not in main_source
    common_source = (folder / "common.py").read_text(encoding="utf-8")
    assert common_source.count("add_parser(") == 1  # inside add_command, the helper the modules call


def test_the_architecture_recipe_names_the_helpers_as_they_are() -> None:
    import re

    from ohsync.daemon.cli import common

    doc = (Path(__file__).resolve().parent.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    recipe = doc[doc.index("- **A new CLI command**"):doc.index("- **A new mirror option**")]
    assert "`register(subparsers: Subparsers) -> None`" in recipe and "`COMMANDS`" in recipe
    named = set(re.findall(r"`(add_\w+)\(", recipe))
    assert named == {"add_command", "add_mirror_option"}
    for name in (*named, "Subparsers"):
        assert hasattr(common, name), f"the recipe names common.{name}, which does not exist"
