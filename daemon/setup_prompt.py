"""Questions for ``ohsync setup``: asked at a terminal, or answered from defaults when scripted.

:class:`Prompter` is the only thing the setup flow uses to talk to the
person.  Interactive, it reads answers with an input function (``input``
and ``getpass`` by default; tests inject their own); scripted
(``--yes``), a question with a default takes it and every other question
raises :class:`MissingAnswer`, whose sentence names the flag that answers
it.  A closed input (Ctrl-D, end of a pipe) is a :class:`MissingAnswer` too.
"""

from __future__ import annotations

import getpass
import sys
import warnings
from collections.abc import Callable
from typing import TextIO

__all__ = ["MissingAnswer", "InputEnded", "Prompter"]


class MissingAnswer(Exception):
    """A question has no answer: scripted without its flag, or the input ended.

    ``str(exc)`` is the whole sentence, naming the flag.
    """


class InputEnded(MissingAnswer):
    """The input closed at a question (Ctrl-D, end of a pipe): not a usage mistake."""


def _quiet_getpass(prompt: str) -> str:
    """``getpass.getpass`` without its ``GetPassWarning`` (and source line) when there is no
    terminal: the answer then comes from standard input, as the other answers do."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", getpass.GetPassWarning)
        return getpass.getpass(prompt)


class Prompter:
    """Asks the questions of ``ohsync setup``.

    :param scripted: True for ``--yes``: never read input.
    :param ask: reads one answer; called with the prompt text (default ``input``).
    :param secret: reads one answer without echo (default ``getpass.getpass``, quiet without a terminal).
    :param out: where explanations go (default ``sys.stdout``).
    """

    def __init__(self, *, scripted: bool = False, ask: Callable[[str], str] | None = None,
                 secret: Callable[[str], str] | None = None, out: TextIO | None = None) -> None:
        self.scripted = scripted
        self._ask = ask or input
        self._secret = secret or _quiet_getpass
        self._out = out

    def say(self, text: str) -> None:
        """Print one explanation (a line or a block)."""
        print(text, file=self._out or sys.stdout, flush=True)

    def _read(self, reader: Callable[[str], str], prompt: str, question: str, flag: str) -> str:
        try:
            return reader(prompt)
        except EOFError:
            raise InputEnded(f"The input ended at the question “{question}”: answer it at the "
                                f"prompt, or pass {flag}.") from None

    def ask(self, question: str, *, default: str | None, flag: str) -> str:
        """One free-text answer, stripped; empty means ``default``.

        :raises MissingAnswer: scripted with no default, or the input ended.
        """
        if self.scripted:
            if default is None:
                raise MissingAnswer(f"setup --yes needs {flag} (for “{question}”)")
            return default
        prompt = f"{question} [{default}]: " if default else f"{question}: "
        while True:
            answer = self._read(self._ask, prompt, question, flag).strip()
            if answer:
                return answer
            if default is not None:
                return default
            self.say("An answer is needed here.")

    def secret(self, question: str, *, flag: str, allow_empty: bool = False) -> str:
        """One answer read without echo (a password, a token).

        :param allow_empty: an empty answer is returned (the caller gives it a meaning)
            instead of being asked again.
        :raises MissingAnswer: scripted, or the input ended.
        """
        if self.scripted:
            raise MissingAnswer(f"setup --yes needs {flag} (for “{question}”)")
        while True:
            answer = self._read(self._secret, f"{question}: ", question, flag).strip()
            if answer or allow_empty:
                return answer
            self.say("An answer is needed here.")

    def confirm(self, question: str, *, default: bool, flag: str) -> bool:
        """A yes/no answer; empty means ``default``.

        Scripted, a decision has no default: it must come from its flag.

        :raises MissingAnswer: scripted, or the input ended.
        """
        if self.scripted:
            raise MissingAnswer(f"setup --yes needs {flag} (for “{question}”)")
        prompt = f"{question} [{'Y/n' if default else 'y/N'}]: "
        while True:
            answer = self._read(self._ask, prompt, question, flag).strip().lower()
            if not answer:
                return default
            if answer in ("y", "yes"):
                return True
            if answer in ("n", "no"):
                return False
            self.say("Answer y or n.")

    def choose(self, question: str, options: list[str], *, default: int, flag: str) -> int:
        """Pick one of ``options`` by number (shown from 1); returns its index.

        :raises MissingAnswer: scripted, or the input ended.
        """
        if self.scripted:
            raise MissingAnswer(f"setup --yes needs {flag} (for “{question}”)")
        self.say(question)
        for i, option in enumerate(options, 1):
            self.say(f"  {i}) {option}")
        while True:
            answer = self._read(self._ask, f"Choice [{default + 1}]: ", question, flag).strip()
            if not answer:
                return default
            if answer.isdigit() and 1 <= int(answer) <= len(options):
                return int(answer) - 1
            self.say(f"Type a number from 1 to {len(options)}.")
