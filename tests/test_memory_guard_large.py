"""The write guard reads a large text in time proportional to its length.

A memory write of up to 1 MiB (the socket's request limit) is checked on the
daemon's request thread under the memory lock: a check whose time grows with
the square of the length (a pattern retried at every character, a text
copied once per finding) froze the daemon for minutes.  Each case is one
text repeated; the bound is generous, a guard against the quadratic case
(which takes seconds at 64 KiB and hours at 1 MiB), not a speed figure, and
counts this process's CPU time, so other work on the machine does not count."""

from __future__ import annotations

import random
import time

import pytest

from ohsync.engine.memory.guard import PHONE_RUNS_CHECKED, secrets_in, sensitive_in

WORST = ["a", "1 ", "a@", "sk-", "sk-a-", "1234 ", "AB12 ", "DE89 3704 0044 0532 0130 00 ", "市", "中市",
         "+49 170 1234567 ", "验证码 ", "Hauptstraße "]


@pytest.mark.parametrize("unit", WORST)
def test_a_large_text_is_checked_in_linear_time(unit: str) -> None:
    for size in (64 << 10, 1 << 20):  # the small size first: the quadratic case fails in seconds, not hours
        text = unit * (size // len(unit.encode()))
        for check in (secrets_in, sensitive_in):
            began = time.process_time()
            check(text)
            assert time.process_time() - began < 2.0, (check.__name__, unit, size)


def test_many_distinct_numbers_are_marked_without_reading_each() -> None:
    rng = random.Random(7)
    text = ", ".join(f"{rng.randrange(10**6, 10**7)}" for _ in range(PHONE_RUNS_CHECKED + 50))
    began = time.process_time()
    found = sensitive_in(text)
    assert time.process_time() - began < 2.0
    assert [f.kind for f in found] == ["numbers"]  # marked sensitive, not left unmarked
    assert sensitive_in(text[:200]) == []  # a few of them are ordinary numbers


def test_addresses_and_keys_are_still_found_at_the_edges_of_long_runs() -> None:
    assert [f.kind for f in sensitive_in("x" * 5000 + " jane.doe@example.org")] == ["email"]
    assert [f.kind for f in sensitive_in("写" * 5000 + "北京市海淀区中关村大街27号")] == ["address"]
    assert [f.kind for f in secrets_in("sk-" * 500 + "abcdefghijklmnopqrstu")] == ["api_key"]


def test_a_phone_number_added_to_a_text_of_many_numbers_is_still_marked() -> None:
    from ohsync.engine.memory.guard import added

    base = "".join(f"- note {n:05d}: met on 2026-01-05 about item\n" for n in range(PHONE_RUNS_CHECKED + 1))
    assert [f.kind for f in sensitive_in(base)] == ["numbers"]
    brought = added(sensitive_in(base), sensitive_in(base + "Call Anna on +49 30 12345678\n"))
    assert brought, "a number added where numbers are not read one by one must still mark the text"
    assert added(sensitive_in("a\nb\n"), sensitive_in("a\nb\nCall Anna on +49 30 12345678\n"))
