"""What memory writes may contain: the secrets blocklist (refuse) and the
sensitivity marker (store, marked).

Memory files travel to the cloud and into assistants' context.  Two separate
checks read the same normalised text (:func:`normalise`: NFKC, so full-width
letters and digits read as ASCII, with zero-width and other format
characters, Unicode category Cf, removed):

* **Refused** (:func:`secrets_in`): API keys such as ``sk-…``, ``Bearer …``
  tokens, verification codes (a 4–8 digit code next to a word such as 验证码 /
  verification code / OTP, its digits joined across spaces, dots and dashes:
  ``验证码 1 2 3 4 5 6``), card numbers (13–19 digits joined the same way,
  with a card network's prefix and a valid Luhn check digit:
  ``4111.1111.1111.1111``), runs of 15 or more digits and 4 × 4-digit groups
  (card, account and ID numbers).  A valid IBAN is not refused (it is marked).
* **Marked** ``sensitivity: sensitive`` (:func:`sensitive_in`): phone numbers
  in international format (``+49 170 1234567``) and national formats of
  common countries (``phonenumbers``, Google's libphonenumber metadata),
  e-mail addresses, IBANs (mod-97 checksum), card mentions (``**** 4242``,
  ``card ending 4242``, 尾号 4242), street addresses (best effort: English,
  German, French, Spanish, Italian, Dutch, Chinese and Japanese patterns),
  and health, identity and money words in English and Chinese.  Dates,
  IPv4 addresses, amounts with cents and bare digit runs without a phone
  word (order and ticket numbers) are never phone numbers and are sorted
  out without libphonenumber, each run once; only the runs left (written
  like a phone number) are read by it, and past :data:`PHONE_RUNS_CHECKED`
  of those in one text each further one counts as a phone number itself
  (``numbers``).  Every check reads the text in time linear in its length
  (bounded repeats, no per-character retry of an unbounded run): a 1 MiB
  write is checked in about a second.  Sensitive entities are left out of
  search results unless a caller asks for them.

Each finding is a :class:`Finding`; callers compare the findings of the text
before and after a write (:func:`added`) so a secret assembled by two edits
is refused and a person's own older text never blocks a later write.
"""
from __future__ import annotations

import bisect
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

__all__ = ["Finding", "normalise", "join_digits", "secrets_in", "sensitive_in", "added", "find_secret",
           "looks_sensitive", "luhn_ok", "iban_ok"]


class Finding(NamedTuple):
    """One thing a check found: ``kind`` (e.g. ``api_key``, ``phone``), the
    normalised ``match``, and ``why``, a sentence naming the kind (never the value)."""

    kind: str
    match: str
    why: str


# -- normalisation -------------------------------------------------------------------------------

_SEP = r"[ \t.\-‐‑‒–—―·・_]"  # what a person puts between digits (full-width forms are ASCII after NFKC)
_JOIN = re.compile(rf"(?<=[0-9]){_SEP}{{1,3}}(?=[0-9])")


def normalise(text: str) -> str:
    """NFKC with every format character (Unicode category Cf: zero-width
    spaces and joiners, soft hyphens, bidi marks, BOM) removed."""
    text = unicodedata.normalize("NFKC", text)
    return "".join(ch for ch in text if unicodedata.category(ch) != "Cf")


def join_digits(text: str) -> str:
    """``text`` (normalised) with digit runs joined across spaces, dots,
    dashes and middle dots (``4111 1111`` → ``41111111``); never across a
    line break."""
    return _JOIN.sub("", text)


def luhn_ok(digits: str) -> bool:
    """True when the digit string passes the Luhn check (card numbers)."""
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return bool(digits) and total % 10 == 0


_IBAN_DIGITS = {ord(c): str(int(c, 36)) for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}  # A → 10 … Z → 35
_IBAN_SHAPE = re.compile(r"[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}")


def iban_ok(iban: str) -> bool:
    """True for an IBAN (spaces allowed) whose ISO 13616 mod-97 checksum holds."""
    s = "".join(iban.split()).upper()
    if not _IBAN_SHAPE.fullmatch(s):
        return False
    return int((s[4:] + s[:4]).translate(_IBAN_DIGITS)) % 97 == 1


# -- the blocklist (refused) ---------------------------------------------------------------------

_CODE_WORDS = (r"验证码|校验码|动态码|动态密码|短信码|登录码|安全码|确认码|激活码"
               r"|verification code|verify code|security code|one[- ]time (?:pass)?code|one[- ]time password"
               r"|passcode|otp|2fa(?: code)?|auth(?:entication)? code|login code|confirmation code")

# every repeat is bounded (at most 8 dashed groups of at most 64): "sk-sk-sk-…" cannot backtrack quadratically
_API_KEY = re.compile(r"(?<![A-Za-z0-9])sk-(?:[A-Za-z0-9]{1,64}-){0,8}[A-Za-z0-9_]{16,}")
_BEARER = re.compile(r"\bBearer\s+[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE)
_CODE = re.compile(
    rf"(?:{_CODE_WORDS})[^0-9A-Za-z\n]{{0,12}}(?:is|为|是|:|：)?[^0-9A-Za-z\n]{{0,6}}[0-9]{{4,8}}(?![0-9])"
    rf"|(?<![0-9])[0-9]{{4,8}}[^0-9A-Za-z\n]{{0,8}}(?:is your|为您的|是你的|是您的)?"
    rf"[^0-9A-Za-z\n]{{0,4}}(?:{_CODE_WORDS})",
    re.IGNORECASE)
_LONG = re.compile(rf"(?<![0-9])[0-9]{{15,}}(?![0-9])|(?<![0-9])[0-9]{{4}}(?:{_SEP}[0-9]{{4}}){{3,}}(?![0-9])")
_DIGIT_RUN = re.compile(r"(?<![0-9+])[0-9]{13,19}(?![0-9])")  # after join_digits; "+…" is a phone number
# the issuer prefixes of the card networks (Visa, Mastercard, Amex, Discover, UnionPay, JCB, Diners, Maestro)
_CARD_PREFIX = re.compile(r"4|5[0-8]|2(?:22[1-9]|2[3-9][0-9]|[3-6][0-9]{2}|7[01][0-9]|720)|3[0-9]|6")
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}[0-9]{2}(?: ?[A-Z0-9]){11,30}(?![A-Za-z0-9])")

_WHY_KEY = "it contains what looks like an API key (sk-…)"
_WHY_BEARER = "it contains what looks like an access token (Bearer …)"
_WHY_CODE = "it contains what looks like a verification code"
_WHY_CARD = "it contains what looks like a payment card number (it passes the card check digit)"
_WHY_LONG = "it contains a long number (15 or more digits: a card, account or ID number?)"


def _ibans(text: str) -> list[tuple[int, int]]:
    """The spans of valid IBANs in ``text`` (a candidate that runs into the
    next word is shortened word by word until its checksum holds)."""
    spans: list[tuple[int, int]] = []
    for m in _IBAN.finditer(text):
        cand = m.group()
        while cand and not iban_ok(cand):
            cand = cand.rpartition(" ")[0] if " " in cand else ""
        if cand:
            spans.append((m.start(), m.start() + len(cand)))
    return spans


def _without_ibans(text: str) -> str:
    """``text`` with valid IBANs blanked (they are marked sensitive, not refused as long numbers)."""
    pieces, done = [], 0
    for start, end in _ibans(text):  # one pass: a text of many IBANs is not copied once per IBAN
        pieces += [text[done:start], " " * (end - start)]
        done = end
    return "".join(pieces) + text[done:]


def secrets_in(text: str) -> list[Finding]:
    """What in ``text`` must never be stored (empty when it may be).

    :param text: any text a write would store (a field or the entity's text).
    :returns: the findings, on the normalised text, in the order of the checks.
    """
    norm = normalise(text)
    found = [Finding("api_key", m.group(), _WHY_KEY) for m in _API_KEY.finditer(norm)]
    found += [Finding("bearer_token", m.group(), _WHY_BEARER) for m in _BEARER.finditer(norm)]
    plain = _without_ibans(norm)
    joined = join_digits(plain)
    found += [Finding("verification_code", m.group(), _WHY_CODE) for m in _CODE.finditer(joined)]
    found += [Finding("card_number", m.group(), _WHY_CARD) for m in _DIGIT_RUN.finditer(joined)
              if _CARD_PREFIX.match(m.group()) and luhn_ok(m.group())]
    found += [Finding("long_number", m.group(), _WHY_LONG) for m in _LONG.finditer(plain)]
    return found


# -- sensitivity (marked) ------------------------------------------------------------------------

_WORDS = re.compile(
    r"过敏|病史|病历|诊断|处方|药物|用药|抑郁|焦虑症|住院|手术|体检|血型|怀孕|癌|糖尿病|哮喘|心理咨询|精神科"
    r"|紧急联系人|身份证|护照|家庭住址|住址|银行卡|工资|密码"
    r"|\b(?:allerg|diagnos|medication|prescri|medical|emergency contact|passport|home address|salary|password"
    r"|symptom|therap|surgery|surgical|hospitali[sz]|depress|anxiety disorder|psychiatr|blood type|pregnan"
    r"|cancer|chemotherapy|diabet|asthma|epilep|insulin|hiv\b|disabilit|health insurance)",
    re.IGNORECASE)
# starts only where a run of address characters starts, with the RFC 5321 lengths (64 before the @, 255
# after it): a long run without an @ is read once, not once per character
_EMAIL = re.compile(r"(?<![A-Za-z0-9._%+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,255}\.[A-Za-z]{2,}")
_CN_MOBILE = re.compile(r"(?<![0-9])1[3-9][0-9][- ]?[0-9]{4}[- ]?[0-9]{4}(?![0-9])")
_CARD_MENTION = re.compile(
    r"(?:[*xX•]{4}[ -]?){2,3}[0-9]{4}(?![0-9])"
    r"|\b(?:card|visa|mastercard|amex)\b[^0-9\n]{0,20}(?:ending|ends)(?: in| with)?[^0-9\n]{0,3}[0-9]{4}(?![0-9])"
    r"|(?:卡|银行卡|信用卡)[^0-9\n]{0,6}尾号[^0-9\n]{0,3}[0-9]{4}(?![0-9])",
    re.IGNORECASE)
_STREET_TYPES = (r"Street|St\.?|Road|Rd\.?|Avenue|Ave\.?|Boulevard|Blvd\.?|Lane|Ln\.?|Drive|Dr\.?|Way|Court|Ct\.?"
                 r"|Place|Pl\.?|Terrace|Close|Crescent|Highway|Hwy")
_ADDRESS = re.compile(
    rf"\b[0-9]{{1,5}}[A-Za-z]?,? (?:[A-Z][A-Za-z'.-]+ ){{1,4}}(?:{_STREET_TYPES})(?![A-Za-z])"      # 221B Baker Street
    # Hauptstraße 5
    r"|\b[A-ZÄÖÜ][a-zäöüß-]+(?:straße|strasse|str\.|weg|gasse|platz|allee|ring|damm)\s+[0-9]{1,4}[a-z]?\b"
    r"|\b(?:[A-ZÄÖÜ][a-zäöüß]+ )?(?:Straße|Strasse|Platz|Weg|Allee) [0-9]{1,4}[a-z]?\b"
    # 12 rue …
    r"|\b[0-9]{1,4}(?: ?(?:bis|ter))?,? (?:rue|avenue|av\.|boulevard|bd|place|chemin|allée|impasse|quai)\s+\w+"
    r"|\b(?:Calle|C/|Avenida|Avda\.?|Plaza|Paseo|Via|Viale|Piazza|Corso|Rua|Travessa)\s+[\w .'-]{2,40}?,?\s+"
    r"(?:n[º°o.]\s*)?[0-9]{1,4}\b"
    r"|\b[A-Z][a-z]+(?:straat|laan|weg|plein|gracht|kade)\s+[0-9]{1,4}[a-z]?\b"                   # Dutch
    # the Chinese and Japanese forms start only where a digit follows within 24 letters (read without
    # backtracking): long text of Han characters is not tried 120 ways at every character
    r"|(?=[\u4e00-\u9fff][\u4e00-\u9fff\u3040-\u30ff]{0,23}+[0-9])(?:"
    r"[\u4e00-\u9fff]{1,12}(?:路|街|大道|道|巷|弄|胡同)[0-9]{1,5}(?:号|號)"                             # 中关村大街27号
    r"|[\u4e00-\u9fff]{1,10}[都道府県市区町村][\u4e00-\u9fff\u3040-\u30ff]{0,12}[0-9]{1,4}丁目"      # 1丁目
    r"|[\u4e00-\u9fff]{1,10}[市区町村][\u4e00-\u9fff\u3040-\u30ff]{0,12}[0-9]{1,4}-[0-9]{1,4}(?:-[0-9]{1,4})?)")
#: countries whose national phone formats are recognised (international ``+…`` numbers always are)
PHONE_REGIONS = ("CN", "US", "GB", "DE", "FR", "JP", "IN", "BR", "ES", "IT", "NL", "KR", "AU", "RU", "MX", "CH", "AT")
_PHONE_WORDS = (r"(?:phone|tel|call|mobile|cell|fax|whatsapp|telefon|téléphone|portable|handy|móvil|celular|telefono"
                r"|電話|电话|手机|携帯|联系|号码)")
_PHONE_WORD = re.compile(_PHONE_WORDS + r"[^\n]{0,16}$", re.IGNORECASE)
_MAYBE_PHONE = re.compile(r"[0-9](?:[ ().\-/]{0,2}[0-9]){5,}")

_WHY_WORD = "health, identity, money or password words"
_WHY_PHONE = "a phone number"
_WHY_EMAIL = "an e-mail address"
_WHY_IBAN = "a bank account number (IBAN)"
_WHY_CARD_MENTION = "a payment card reference"
_WHY_ADDRESS = "a street address"
_WHY_NUMBERS = "a number that may be a phone number (one of too many to read each)"


#: the most distinct phone-like snippets one text's phone check reads with libphonenumber (about a millisecond
#: each); a further one counts as a phone number by itself (``numbers``) rather than being read for minutes
PHONE_RUNS_CHECKED = 300
_PHONE_RUN = re.compile(r"[0-9](?:[ ().\-/]{0,3}[0-9])*")  # digits and what separates a phone number's groups
_RUN_PIECE = 48  # a longer run is read in pieces of 48 characters, overlapping by half: no phone number is longer
_PHONE_BEFORE, _PHONE_AFTER = 8, 24  # context read with a run: a leading + or (, an extension ("ext. 12")

# numbers that are never phone numbers, blanked before the runs are found: dates (2026-01-03, 03.01.2026,
# 01/03/2026) and IPv4 addresses, and amounts with cents (1234.56, 1.234,56) standing apart from other digits;
# never the middle of a longer run of digits (a dotted phone number such as 06.12.34.56.78 stays whole)
_DAY, _MONTH, _YEAR = r"(?:0?[1-9]|[12][0-9]|3[01])", r"(?:0?[1-9]|1[0-2])", r"(?:19|20)[0-9]{2}"
_OCTET = r"(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
_APART_BEFORE = r"(?<![0-9+])" + "".join(rf"(?<![0-9+][ ().\-/]{{{n}}})" for n in (1, 2, 3))
_NOT_PHONE = re.compile(
    rf"(?<![0-9+])(?<![0-9+][.\-/])(?:{_YEAR}([-/.]){_MONTH}\1{_DAY}|{_DAY}([-/.]){_MONTH}\2{_YEAR}"
    rf"|{_MONTH}/{_DAY}/{_YEAR}|{_OCTET}(?:\.{_OCTET}){{3}})(?![0-9])(?![.\-/][0-9])"
    rf"|{_APART_BEFORE}(?:[0-9]{{1,3}}(?:\.[0-9]{{3}})+,[0-9]{{2}}|[0-9]{{1,12}}\.[0-9]{{2}})"
    r"(?![0-9])(?![ ().\-/]{1,3}[0-9])")
_BLANK = "_"  # neither a digit nor anything libphonenumber reads as part of a number
# what lets libphonenumber read a bare digit run as more than its digits (the one case it counts without a
# phone word): a leading + or bracket, another block of digits behind phone punctuation, an extension
_VALID_PUNCT = r"\-x‐-―−ー－-／ \u00a0\u00ad\u200b\u2060\u3000()（）［］.\[\]/~⁓∼～"
_EXT_LABEL = r"(?:e?xt[a-zó]*|ｅ?ｘｔｎ?|доб|anexo|[xｘ#＃~～]|int|ｉｎｔ|;ext=)"  # libphonenumber's, loosely
_LEADS_IN = re.compile(rf"[+＋(\[（［]|[0-9][{_VALID_PUNCT}]{{1,4}}$|{_EXT_LABEL}[:.．]?[ \u00a0\t,\-]*$",
                       re.IGNORECASE)
_LEADS_ON = re.compile(rf"[{_VALID_PUNCT}]{{1,4}}[0-9]|[ \u00a0\t,]*{_EXT_LABEL}", re.IGNORECASE)
_PHONE_WORD_AT = re.compile(_PHONE_WORDS, re.IGNORECASE)


def _mask_non_phones(norm: str) -> str:
    """``norm`` with dates, IPv4 addresses and amounts blanked (same length: every index still points at the
    same character)."""
    return _NOT_PHONE.sub(lambda m: _BLANK * len(m.group()), norm)


def _phone_matches(snippet: str) -> list[tuple[int, str, bool]]:
    """``(start, raw, international)`` for each valid phone number libphonenumber finds in ``snippet`` in any
    of :data:`PHONE_REGIONS` (``international``: found as a ``+…`` number)."""
    import phonenumbers  # on the first write with digits in it: an idle daemon never loads its metadata

    return [(m.start, m.raw_string, region == "ZZ") for region in ("ZZ", *PHONE_REGIONS)
            for m in phonenumbers.PhoneNumberMatcher(snippet, region, leniency=phonenumbers.Leniency.VALID)]


class _Window(NamedTuple):
    """One span the phone check reads: a piece of a run of digits (``piece_start, piece_end``; the whole
    run unless it is longer than a phone number) with a little context either side (``start, end``).
    ``bare``: the whole run is digits only; ``run_start, run_end``: the whole run's span."""

    run_start: int
    run_end: int
    bare: bool
    piece_start: int
    piece_end: int
    start: int
    end: int


def _phone_windows(masked: str) -> Iterable[_Window]:
    """The spans of ``masked`` the phone check reads: each run of six or more digits (with separators), with
    a little context either side; a run longer than a phone number in overlapping pieces."""
    for m in _PHONE_RUN.finditer(masked):
        start, end = m.span()
        run = m.group()
        if sum(ch.isdigit() for ch in run) < 6:
            continue
        bare = run.isdigit()
        for a in range(start, max(start + 1, end - _RUN_PIECE // 2), _RUN_PIECE // 2):
            b = min(end, a + _RUN_PIECE)
            yield _Window(start, end, bare, a, b, max(0, a - _PHONE_BEFORE), min(len(masked), b + _PHONE_AFTER))


def _needs_reading(masked: str, w: _Window, word_ends: list[int]) -> bool:
    """False for a bare run of digits that libphonenumber could only read as an all-digit number with no
    phone word before it, which never counts: no + or bracket, no more digits behind phone punctuation,
    no extension, no phone word near ``w``; True for every other run."""
    if not w.bare:
        return True
    near = bisect.bisect_left(word_ends, w.start - 40)  # a counted phone word is at most 40 characters before
    if near < len(word_ends) and word_ends[near] <= w.end:
        return True
    return bool(_LEADS_IN.search(masked, w.start, w.run_start) or _LEADS_ON.match(masked, w.run_end))


def _phones(norm: str) -> list[Finding]:
    """Phone numbers in ``norm``: any ``+``-international number, and a
    national number of :data:`PHONE_REGIONS` written with separators or after
    a word such as "phone" / 电话 (a bare 10-digit run is too often a ticket
    or order number).  Dates, IPv4 addresses and amounts with cents are
    never phone numbers.

    Each run of digits is classified once, in time bounded by its length:
    a bare digit run that could only count after a phone word, with none
    near, is not read; every other run is read by libphonenumber (slow: a
    millisecond a run) with a little context, each distinct such snippet
    once (a long run in overlapping pieces).  Past
    :data:`PHONE_RUNS_CHECKED` distinct snippets a further run counts as a
    phone number by itself (a ``numbers`` finding naming the run, or its
    piece), so a phone number is never left unmarked and a run that was
    there before is not new.  A national number counts after a phone word within 40
    characters before it.
    """
    masked = _mask_non_phones(norm)
    if not _MAYBE_PHONE.search(masked):
        return []
    word_ends = [m.end() for m in _PHONE_WORD_AT.finditer(norm)]
    seen: dict[str, list[tuple[int, str, bool]]] = {}
    found: dict[int, Finding] = {}
    unread: dict[int, Finding] = {}  # by the piece's start
    for w in _phone_windows(masked):
        if not _needs_reading(masked, w, word_ends):
            continue
        snippet = masked[w.start:w.end]
        if snippet not in seen:
            if len(seen) >= PHONE_RUNS_CHECKED:
                unread[w.piece_start] = Finding("numbers", masked[w.piece_start:w.piece_end], _WHY_NUMBERS)
                continue
            seen[snippet] = _phone_matches(snippet)
        for rel, raw, international in seen[snippet]:
            at = w.start + rel
            if at in found:
                continue
            if international or raw.startswith("+") or not raw.isdigit() \
                    or _PHONE_WORD.search(norm[max(0, at - 40):at]):  # a phone word in the 40 characters before it
                found[at] = Finding("phone", raw, _WHY_PHONE)
    return [*found.values(), *unread.values()]


def sensitive_in(text: str) -> list[Finding]:
    """The personal details in ``text`` that make an entity ``sensitivity: sensitive``.

    :returns: the findings on the normalised text (empty: nothing personal seen).
    """
    norm = normalise(text)
    found = [Finding("words", m.group().lower(), _WHY_WORD) for m in _WORDS.finditer(norm)]
    found += [Finding("email", m.group(), _WHY_EMAIL) for m in _EMAIL.finditer(norm)]
    found += [Finding("iban", norm[a:b], _WHY_IBAN) for a, b in _ibans(norm)]
    found += [Finding("card", m.group(), _WHY_CARD_MENTION) for m in _CARD_MENTION.finditer(norm)]
    found += [Finding("address", m.group(), _WHY_ADDRESS) for m in _ADDRESS.finditer(norm)]
    found += _phones(norm)
    found += [Finding("phone", m.group(), _WHY_PHONE) for m in _CN_MOBILE.finditer(norm)]  # bare 138…
    return found


def added(before: Iterable[Finding], after: Iterable[Finding]) -> list[Finding]:
    """The findings of ``after`` that ``before`` does not have (as many times
    as they were added): what a write brings in.  A number not read one by
    one (``numbers``) names its run, so it is new only where that run is."""
    return list((Counter(after) - Counter(before)).elements())


def find_secret(text: str) -> str | None:
    """Why ``text`` must not be stored, or None when it may be.

    :param text: any text a write would store (title, observation, context, tags…).
    :returns: a sentence naming the kind of secret (never the secret itself).
    """
    found = secrets_in(text)
    return found[0].why if found else None


def looks_sensitive(text: str) -> bool:
    """True when ``text`` holds personal data that should be marked ``sensitive``
    (health, contacts, identity documents, addresses, money, passwords)."""
    return bool(sensitive_in(text))
