"""The secrets blocklist holds and personal details are marked in many countries.

Refused: every field of a write (title, folder, type, tags, observations,
relation targets, contexts) and the entity's resulting text after a write,
an append or an edit, read after NFKC with format characters removed and
digit runs joined; card numbers by Luhn.  Marked ``sensitivity: sensitive``:
phone numbers, e-mail addresses, IBANs, card references, street addresses,
health words, from at least five countries.  Refusals name the field and
write nothing."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ohsync.daemon.memory_service import MemoryService
from ohsync.daemon.socket.server import InvalidParams
from ohsync.engine.memory.edit import MemoryToolError
from ohsync.engine.memory.guard import iban_ok, luhn_ok, secrets_in, sensitive_in
from ohsync.engine.memory.index import MemoryIndex, parse_offset
from ohsync.engine.memory.tools import MemoryTools

SAMPLES = Path(__file__).resolve().parent / "data" / "samples" / "OH-Memory"
TZ = parse_offset("+08:00")
PERMALINK = "comm-style-pref-0e96"  # preferences/沟通风格偏好.md, contains "先给结论"
KEY = "sk-abcdefghijklmnopqrstu"


@pytest.fixture
def lib(tmp_path: Path) -> Path:
    root = tmp_path / "OH-Memory"
    shutil.copytree(SAMPLES, root)
    return root


@pytest.fixture
def tools(lib: Path) -> MemoryTools:
    index = MemoryIndex(lib, TZ)
    index.rebuild()
    return MemoryTools(index, TZ)


def current(tools: MemoryTools):
    entity = tools.entity(PERMALINK)
    return entity, (tools.index.root / entity.path).read_bytes()


def obs(text: str, **more) -> list[dict]:
    return [{"category": "fact", "text": text, **more}]


# -- the walk-arounds -------------------------------------------------------------------------

def test_two_edits_cannot_assemble_an_api_key(tools: MemoryTools, lib: Path) -> None:
    entity, data = current(tools)
    first = tools.plan_edit(entity, data, "先给结论", "sk-abcdefghij 先给结论")  # too short to be a key: allowed
    (lib / entity.path).write_bytes(first.data)
    tools.index.update([entity.path])
    entity, data = current(tools)
    assert secrets_in("jklmnopqrstu 先") == []  # the second replace text alone is harmless ...
    with pytest.raises(MemoryToolError, match=r"refused: the entity's text after this edit: .*API key"):
        tools.plan_edit(entity, data, "j 先", "jklmnopqrstu 先")  # ... but the result holds sk-abcdefghijklmnopqrstu
    split = tools.plan_edit(entity, data, "j 先", "j klmnopqrstu 先")  # two harmless halves, apart
    with pytest.raises(MemoryToolError, match="refused: the entity's text after this edit"):
        tools.plan_edit(entity, split.data, "j k", "jk")  # joined by deleting the space: the result decides


def test_an_assembled_key_is_refused_by_the_service_and_nothing_is_queued(lib: Path) -> None:
    jobs: list = []
    service = MemoryService(lib, "+08:00", jobs.append, {"paused": False}.get, lambda t: (True, ""),
                            lambda paths: None, write_timeout=0.3)
    service.rebuild()
    entity = service.tools.entity(PERMALINK)
    path = lib / entity.path
    path.write_bytes(path.read_bytes().replace("先给结论".encode(), "sk-abcdefghij 先给结论".encode(), 1))
    service.note_paths([entity.path])
    before = path.read_bytes()
    with pytest.raises(InvalidParams, match=r"refused: the entity's text after this edit"):
        service.handlers()["memory.edit"]({"permalink": PERMALINK, "find": "j 先", "replace": "jklmnopqrstu 先"})
    assert jobs == [] and path.read_bytes() == before


@pytest.mark.parametrize(("field", "kwargs"), [
    ("title", {"title": KEY}),
    ("folder", {"folder": KEY}),
    ("type", {"type": KEY}),
    ("tags", {"tags": ["ok", KEY]}),
    ("observations[0].text", {"observations": obs(KEY)}),
    ("observations[0].context", {"observations": obs("fine", context=KEY)}),
    ("observations[0].category", {"observations": [{"category": KEY, "text": "fine"}]}),
    ("observations[0].tags", {"observations": obs("fine", tags=[KEY])}),
    ("relations[0].target", {"relations": [{"rel": "relates_to", "target": KEY}]}),
    ("relations[0].context", {"relations": [{"rel": "relates_to", "target": "x", "context": KEY}]}),
])
def test_every_field_of_a_write_is_checked_and_named(tools: MemoryTools, field: str, kwargs: dict) -> None:
    args = {"title": "Harmless", "observations": obs("harmless"), **kwargs}
    with pytest.raises(MemoryToolError, match=rf"refused: `{field.replace('[', '.').replace(']', '.')}`: .*API key"):
        tools.plan_write(**args)


@pytest.mark.parametrize(("text", "kind"), [
    ("key sk-abc\u200bdefghijklmnopqrstu", "api_key"),                 # a zero-width space inside
    ("key sk-abcdefgh\u2060ijklmnop\u00adqrstu", "api_key"),            # a word joiner and a soft hyphen
    ("key ｓｋ－ａｂｃｄｅｆｇｈｉｊｋｌｍｎｏｐｑｒｓｔｕ", "api_key"),      # full-width letters
    ("验证码 1 2 3 4 5 6", "verification_code"),                        # spaced digits
    ("验证码：４８２９１３", "verification_code"),                        # full-width digits
    ("your OTP is 4-8-2-9-1-3", "verification_code"),
    ("card 4111.1111.1111.1111", "card_number"),                       # dotted, Luhn-valid
    ("Amex 3782.822463.10005", "card_number"),                         # 4-6-5 groups, Luhn-valid
    ("visa ４１１１ １１１１ １１１１ １１１１", "card_number"),             # full-width digits and spaces
    ("card 4111 1111 1111 1\u200b111", "card_number"),
    ("卡号 ６２２２０２０２００１１２２３３４４５", "long_number"),            # full-width digits, 19 in a row
])
def test_each_walk_around_is_refused_by_write_append_and_edit(tools: MemoryTools, text: str, kind: str) -> None:
    assert kind in [f.kind for f in secrets_in(text)]
    with pytest.raises(MemoryToolError, match=r"refused: `observations\[0\]\.text`"):
        tools.plan_write("测试", obs(text))
    entity, data = current(tools)
    with pytest.raises(MemoryToolError, match="refused: `text`"):
        tools.plan_append(entity, data, "fact", text)
    with pytest.raises(MemoryToolError, match="refused: `replace`"):
        tools.plan_edit(entity, data, "先给结论", text)


def test_luhn_decides_card_numbers_and_dates_are_never_cards(tools: MemoryTools) -> None:
    assert luhn_ok("4111111111111111") and not luhn_ok("4111111111111112")
    assert "card_number" not in [f.kind for f in secrets_in("card 4111.1111.1111.1112")]  # bad check digit
    assert not luhn_ok("411111111111110") and secrets_in("card 4111.111111.11110") == []
    assert [f.kind for f in secrets_in("card 4111.111111.11116")] == ["card_number"]
    for text in ("会议 2026-11-20 2026-11-21", "2026.11.20 - 2026.12.31", "ISBN 978-3-16-148410-0",
                 "+49 1512 3456789", "电话 138 0013 8000", "IBAN DE89 3704 0044 0532 0130 00",
                 "作业 DDL 2026-12-11 23:59，提前两天交"):
        assert secrets_in(text) == [], text
    assert iban_ok("DE89 3704 0044 0532 0130 00") and not iban_ok("DE89 3704 0044 0532 0130 01")


def test_text_already_in_the_file_never_blocks_a_later_write(tools: MemoryTools, lib: Path) -> None:
    entity, data = current(tools)
    path = lib / entity.path
    path.write_bytes(data + "- [fact] 旧卡号 6222020200112233445 (person's own line)\n".encode())
    tools.index.update([entity.path])
    entity, data = current(tools)
    assert tools.plan_append(entity, data, "tone", "少用感叹号").result["added"]
    assert tools.plan_edit(entity, data, "先给结论", "先说结论").data != data


# -- sensitivity: many countries ----------------------------------------------------------------

COUNTRY_EXAMPLES = [
    ("DE", "Handy: +49 170 1234567", "phone"),
    ("DE", "Ruf an: 0170 1234567", "phone"),
    ("DE", "wohnt Hauptstraße 5, 10115 Berlin", "address"),
    ("DE", "IBAN DE89 3704 0044 0532 0130 00", "iban"),
    ("US", "call (415) 555-2671", "phone"),
    ("US", "lives at 1600 Pennsylvania Avenue", "address"),
    ("GB", "Tel. 020 7946 0958", "phone"),
    ("GB", "flat at 221B Baker Street", "address"),
    ("GB", "GB82 WEST 1234 5698 7654 32", "iban"),
    ("FR", "portable 06 12 34 56 78", "phone"),
    ("FR", "12 rue de Rivoli, Paris", "address"),
    ("FR", "FR14 2004 1010 0505 0001 3M02 606", "iban"),
    ("JP", "携帯 090-1234-5678", "phone"),
    ("JP", "東京都千代田区丸の内1丁目", "address"),
    ("IN", "+91 98765 43210", "phone"),
    ("BR", "celular (11) 91234-5678", "phone"),
    ("BR", "Rua Augusta 1500, São Paulo", "address"),
    ("ES", "Calle Mayor 12, Madrid", "address"),
    ("ES", "ES91 2100 0418 4502 0005 1332", "iban"),
    ("NL", "Kalverstraat 92 Amsterdam", "address"),
    ("CN", "手机 13800138000", "phone"),
    ("CN", "电话 138-0000-0000", "phone"),
    ("CN", "北京市海淀区中关村大街27号", "address"),
    ("CN", "对青霉素过敏", "words"),
    ("any", "mail jane.doe@example.org", "email"),
    ("any", "allergic to penicillin", "words"),
    ("any", "diagnosed with asthma, takes insulin", "words"),
    ("any", "Visa ending in 4242", "card"),
    ("any", "**** **** **** 4242", "card"),
    ("any", "招行卡尾号 1234", "card"),
    ("any", "Handy: ＋４９ １７０ １２３\u200b４５６７", "phone"),  # full-width with a zero-width space
]


@pytest.mark.parametrize(("country", "text", "kind"), COUNTRY_EXAMPLES, ids=[f"{c}-{k}-{i}" for i, (c, _, k)
                                                                            in enumerate(COUNTRY_EXAMPLES)])
def test_personal_details_of_many_countries_are_marked_sensitive(tools: MemoryTools, country: str, text: str,
                                                                 kind: str) -> None:
    assert kind in [f.kind for f in sensitive_in(text)]
    assert secrets_in(text) == []  # marked, never refused
    plan = tools.plan_write("联系方式", obs(text))
    assert plan.result["sensitivity"] == "sensitive" and plan.result["marked_sensitive"]
    assert b"sensitivity: sensitive" in plan.data
    entity, data = current(tools)
    appended = tools.plan_append(entity, data, "contact", text)
    assert b"sensitivity: sensitive" in appended.data and appended.result["marked_sensitive"]
    edited = tools.plan_edit(entity, data, "先给结论", text)
    assert b"sensitivity: sensitive" in edited.data and edited.result["marked_sensitive"]


@pytest.mark.parametrize("text", [
    "作业 DDL 2026-12-11 23:59，提前两天交", "会议 2026-11-20 2026-11-21", "北馆 8:00 开门", "价格 1234.56 元",
    "版本 3.10.12", "IP 192.168.1.20", "ticket 2026112012", "第 3 章 123 页", "ISBN 978-3-16-148410-0",
    "order 12345678", "特征值之和等于迹", "meet at 3 pm", "read chapter 5 of the book",
    "Termin am 03.01.2026", "2026-01-03 12 km gelaufen", "2026-01-03 09:30 ran 5 km", "paid 12345.67 EUR",
])
def test_ordinary_text_is_not_marked(tools: MemoryTools, text: str) -> None:
    assert sensitive_in(text) == []
    plan = tools.plan_write("普通笔记", obs(text))
    assert plan.result["sensitivity"] == "normal" and b"sensitivity: normal" in plan.data


def test_a_new_entity_of_hundreds_of_dated_lines_is_not_marked(tools: MemoryTools) -> None:
    lines = [f"{2020 + n % 7}-{n % 12 + 1:02d}-{n % 28 + 1:02d} ran {n % 30 + 1} km, {n * 37 % 9000 + 1000}.50 EUR, "
             f"app 3.{n % 20}.{n % 9}" for n in range(400)]
    plan = tools.plan_write("Training log", [{"category": "log", "text": line} for line in lines])
    assert plan.result["sensitivity"] == "normal" and "marked_sensitive" not in plan.result
    plan = tools.plan_write("Training log", [{"category": "log", "text": line} for line in lines]
                            + [{"category": "contact", "text": "coach: +49 170 1234567"}])
    assert plan.result["sensitivity"] == "sensitive"


def test_folder_and_type_count_for_sensitivity_too(tools: MemoryTools) -> None:
    plan = tools.plan_write("Klinik", obs("Termin"), type="medical record")
    assert plan.result["sensitivity"] == "sensitive"


def test_the_generated_permalink_never_reads_as_a_code(tools: MemoryTools) -> None:
    # "OTP 7" gets the permalink otp-7-2682: the caller wrote no code, so nothing is refused
    plan = tools.plan_write("OTP 7", obs("how to set up the authenticator app"))
    assert plan.result["permalink"] == "otp-7-2682"


# -- property: disguises never hide a secret --------------------------------------------------

_DISGUISE = st.sampled_from(["", " ", ".", "-", "\u3000", "\u200b", "\u2060", "\ufeff", "\u00ad", "．", "－"])


def _full_width(ch: str, wide: bool) -> str:
    return chr(ord(ch) + 0xFEE0) if wide and "!" <= ch <= "~" else ch


@settings(max_examples=150, deadline=None)
@given(body=st.lists(st.integers(0, 9), min_size=14, max_size=14), gaps=st.lists(_DISGUISE, min_size=16, max_size=16),
       wide=st.lists(st.booleans(), min_size=16, max_size=16))
def test_a_disguised_card_number_is_always_refused(body: list[int], gaps: list[str], wide: list[bool]) -> None:
    digits = "4" + "".join(map(str, body))
    digits += next(d for d in "0123456789" if luhn_ok(digits + d))
    text = "".join(_full_width(d, w) + g for d, g, w in zip(digits, gaps, wide, strict=True)).rstrip(" .-\u3000．－")
    kinds = [f.kind for f in secrets_in(f"pay with {text} please")]
    assert "card_number" in kinds or "long_number" in kinds, text


@settings(max_examples=150, deadline=None)
@given(key=st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=16, max_size=40),
       hidden=st.lists(st.tuples(st.integers(0, 60), st.sampled_from(["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff",
                                                                       "\u00ad"])), max_size=4),
       wide=st.booleans())
def test_a_disguised_api_key_is_always_refused(key: str, hidden: list[tuple[int, str]], wide: bool) -> None:
    text = "sk-" + key
    for pos, ch in hidden:
        pos = min(pos, len(text))
        text = text[:pos] + ch + text[pos:]
    text = "".join(_full_width(c, wide) for c in text)
    assert "api_key" in [f.kind for f in secrets_in(f"the key is {text}")], repr(text)
