"""The tests wait on conditions, not on the clock.

One helper, ``daemon_helpers.wait_for``, polls a condition and fails naming
what it waited for and the last value it saw.  A fixed ``time.sleep(`` is left
only where the time itself is the point (a quiet period in which nothing may
happen, a debounce to pass, a timestamp's resolution, a child process that must
stay up); each says why in a ``# why:`` comment on its line or the line above,
and their number may only go down.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from daemon_helpers import wait_for

TESTS = Path(__file__).resolve().parent
SLEEP = re.compile(r"time\.sleep\(")  # also `_time.sleep(` and one inside a child's script
WHY = "# why:"
#: The fixed sleeps left in tests/ (each with its reason). Lower it when one goes; never raise it.
MAX_SLEEPS = 72


def _sources() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "data" not in p.relative_to(TESTS).parts
                  and p != Path(__file__).resolve())


def _sleeps() -> list[tuple[str, int, str, str]]:
    """``(file, line number, line, line above)`` of every ``time.sleep(`` in the tests."""
    found = []
    for path in _sources():
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if SLEEP.search(line):
                found.append((path.name, i + 1, line, lines[i - 1] if i else ""))
    return found


def test_fixed_sleeps_do_not_grow() -> None:
    sleeps = _sleeps()
    assert len(sleeps) <= MAX_SLEEPS, (
        f"{len(sleeps)} time.sleep( calls in tests/, at most {MAX_SLEEPS}: wait on the condition with "
        "daemon_helpers.wait_for instead of sleeping")


def test_every_fixed_sleep_says_why() -> None:
    unexplained = [f"{name}:{no}: {line.strip()}" for name, no, line, above in _sleeps()
                   if WHY not in line and not above.strip().startswith(WHY)]
    assert unexplained == [], ("a fixed sleep without a `# why:` comment (on its line or the line above); "
                               "if it waits for something to happen, use wait_for:\n  " + "\n  ".join(unexplained))


def test_sleep_is_not_imported_under_another_name() -> None:
    aliased = [p.name for p in _sources()
               if re.search(r"^[ \t]*from time import .*\bsleep\b", p.read_text(encoding="utf-8"), re.MULTILINE)]
    assert aliased == []


def test_there_is_one_wait_for_helper() -> None:
    helpers = [f"{p.name}: {m.group(1)}" for p in _sources()
               for m in re.finditer(r"^[ \t]*def (wait_for|wait_until|_wait_for|_wait_until|_until)\(",
                                    p.read_text(encoding="utf-8"), re.MULTILINE)]
    assert helpers == ["daemon_helpers.py: wait_for"], helpers


# ------------------------------------------------------------------ the helper itself

def test_wait_for_returns_the_first_truthy_value() -> None:
    values = iter([None, 0, "", [], {"ready": True}])
    assert wait_for(lambda: next(values), timeout=5, interval=0.001, what="ready") == {"ready": True}


def test_wait_for_retries_an_exception_until_the_condition_holds() -> None:
    calls = []

    def predicate() -> bool:
        calls.append(1)
        if len(calls) < 3:
            raise ConnectionRefusedError("not listening yet")
        return True

    assert wait_for(predicate, timeout=5, interval=0.001, what="the socket") is True
    assert len(calls) == 3


def test_wait_for_fails_naming_what_and_the_last_value_seen() -> None:
    states = iter(["starting", "syncing", "syncing", "error"] + ["error"] * 10_000)
    with pytest.raises(AssertionError) as info:
        wait_for(lambda: next(states) == "idle", timeout=0.05, interval=0.01, what="the daemon idle",
                 seen=lambda: "state: error")
    message = str(info.value)
    assert "timed out after 0.05 s waiting for the daemon idle" in message
    assert "last value: False" in message and "seen: 'state: error'" in message


def test_wait_for_fails_with_the_last_error_and_names_an_unnamed_predicate() -> None:
    def socket_up() -> bool:
        raise ConnectionRefusedError("no daemon on /tmp/x.sock")

    with pytest.raises(AssertionError) as info:
        wait_for(socket_up, timeout=0.05, interval=0.01)
    message = str(info.value)
    assert "socket_up" in message and "test_test_hygiene.py" in message
    assert "last error: ConnectionRefusedError('no daemon on /tmp/x.sock')" in message
