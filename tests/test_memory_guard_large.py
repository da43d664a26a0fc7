"""The write guard reads a large text in time proportional to its length.

A memory write of up to 1 MiB (the socket's request limit) is checked on the
daemon's request thread under the memory lock: a check whose time grows with
the square of the length (a pattern retried at every character, a text
copied once per finding) froze the daemon for minutes.  Most cases are
one text repeated; the bound is generous, a guard against the quadratic case
(which takes seconds at 64 KiB and hours at 1 MiB), not a speed figure, and
counts this process's CPU time, so other work on the machine does not count."""

from __future__ import annotations

import random
import time

import pytest

from ohsync.engine.memory.guard import PHONE_RUNS_CHECKED, secrets_in, sensitive_in

WORST = ["a", "1 ", "a@", "sk-", "sk-a-", "1234 ", "AB12 ", "DE89 3704 0044 0532 0130 00 ", "市", "中市",
         "+49 170 1234567 ", "验证码 ", "Hauptstraße ", "2026-01-03 ", "03.01.2026 ", "1234.56 ", "192.168.1.20 "]


@pytest.mark.parametrize("unit", WORST)
def test_a_large_text_is_checked_in_linear_time(unit: str) -> None:
    for size in (64 << 10, 1 << 20):  # the small size first: the quadratic case fails in seconds, not hours
        text = unit * (size // len(unit.encode()))
        for check in (secrets_in, sensitive_in):
            began = time.process_time()
            check(text)
            assert time.process_time() - began < 2.0, (check.__name__, unit, size)


def _dated_lines(count: int, seed: int = 7) -> str:
    """``count`` distinct journal-like lines: dates in three styles, times, distances, amounts, versions,
    IP addresses, order numbers (nothing in them is a phone number)."""
    rng = random.Random(seed)
    lines = []
    for n in range(count):
        y, m, d = rng.randrange(2000, 2030), rng.randrange(1, 13), rng.randrange(1, 29)
        lines.append(rng.choice([
            f"- {y}-{m:02d}-{d:02d} ran {rng.randrange(1, 40)} km in {rng.randrange(20, 200)} min",
            f"- {d:02d}.{m:02d}.{y} {rng.randrange(0, 24):02d}:{rng.randrange(0, 60):02d} paid "
            f"{rng.randrange(100, 10**6)}.{rng.randrange(100):02d} EUR",
            f"- {m}/{d}/{y} upgraded to 3.{rng.randrange(20)}.{rng.randrange(20)} on 10.0.{rng.randrange(256)}."
            f"{rng.randrange(1, 256)}",
            f"- {y}-{m:02d}-{d:02d} {rng.randrange(10)} order {rng.randrange(10**7, 10**9)} shipped (#{n})",
        ]))
    return "\n".join(lines) + "\n"


def test_many_distinct_numbers_are_each_classified_and_none_is_a_phone_number() -> None:
    rng = random.Random(7)
    text = ", ".join(f"{rng.randrange(10**6, 10**7)}" for _ in range(PHONE_RUNS_CHECKED + 50))
    began = time.process_time()
    assert sensitive_in(text) == []  # bare numbers in a list, far more than the snippets libphonenumber reads
    assert time.process_time() - began < 2.0
    lines = _dated_lines(PHONE_RUNS_CHECKED * 3)
    assert sensitive_in(lines) == []
    assert [f.kind for f in sensitive_in(lines + "Call Anna on +49 30 12345678\n")] == ["phone"]


def test_a_megabyte_of_distinct_dated_lines_is_read_exactly_in_linear_time() -> None:
    lines = _dated_lines(40_000)
    lines = lines[:lines.rindex("\n", 0, 1 << 20) + 1]  # 1 MiB of whole lines, some 25,000 of them
    assert len(lines) > (1 << 20) - 100
    began = time.process_time()
    assert sensitive_in(lines) == []
    assert time.process_time() - began < 2.0


def test_addresses_and_keys_are_still_found_at_the_edges_of_long_runs() -> None:
    assert [f.kind for f in sensitive_in("x" * 5000 + " jane.doe@example.org")] == ["email"]
    assert [f.kind for f in sensitive_in("写" * 5000 + "北京市海淀区中关村大街27号")] == ["address"]
    assert [f.kind for f in secrets_in("sk-" * 500 + "abcdefghijklmnopqrstu")] == ["api_key"]


def test_a_phone_number_added_to_a_text_of_many_numbers_is_still_marked() -> None:
    from ohsync.engine.memory.guard import added

    base = "".join(f"- note {n:05d}: met on 2026-01-05 about item {n * 7919 % 10**6:06d}\n"
                   for n in range(PHONE_RUNS_CHECKED + 1))
    assert sensitive_in(base) == []  # hundreds of numbers, none a phone number: not marked
    phone = "Call Anna on +49 30 12345678\n"
    assert [f.kind for f in added(sensitive_in(base), sensitive_in(base + phone))] == ["phone"]
    assert [f.kind for f in added(sensitive_in(base), sensitive_in(phone + base))] == ["phone"]
    assert added(sensitive_in(base + phone), sensitive_in(base + phone + "- note: more\n")) == []  # not new
    assert added(sensitive_in("a\nb\n"), sensitive_in("a\nb\nCall Anna on +49 30 12345678\n"))


def test_past_the_numbers_read_each_further_phone_like_number_counts_by_itself() -> None:
    from ohsync.engine.memory.guard import added

    # groups of digits with dashes (book numbers), none a phone number: each is read until the budget is spent
    base = "".join(f"- ISBN 978-3-16-{n * 7919 % 10**6:06d}-{n % 10}\n" for n in range(PHONE_RUNS_CHECKED + 20))
    found = sensitive_in(base)
    assert {f.kind for f in found} == {"numbers"} and len(found) == 20  # one finding per run not read
    assert added(found, sensitive_in(base + "- more words\n")) == []  # the same numbers are not new
    brought = added(found, sensitive_in(base + "- ruf an: 030 1234567\n"))
    assert [f.kind for f in brought] == ["numbers"] and brought[0].match == "030 1234567"
