"""What memory writes may contain: the secrets blocklist and the sensitivity marker.

Memory files travel to the cloud and into assistants' context, so the memory
tools refuse text that looks like a secret (:func:`find_secret`): API keys
such as ``sk-…``, ``Bearer …`` tokens, verification codes (a 4–8 digit code
next to a word such as 验证码 / verification code / OTP), and runs of 15 or
more digits (card and ID numbers).  Personal but legitimate content (health,
phone numbers, addresses) is not refused: :func:`looks_sensitive` tells the
writer to mark the entity ``sensitivity: sensitive``, which keeps it out of
search results unless a caller asks for sensitive entries.
"""
from __future__ import annotations

import re

__all__ = ["BLOCKLIST", "find_secret", "looks_sensitive"]

_CODE_WORDS = (r"验证码|校验码|动态码|动态密码|短信码|登录码|安全码|确认码|激活码"
               r"|verification code|verify code|security code|one[- ]time (?:pass)?code|one[- ]time password"
               r"|passcode|otp|2fa(?: code)?|auth(?:entication)? code|login code|confirmation code")

#: ``(name, pattern, sentence)``: what is refused and how the refusal reads.
BLOCKLIST: tuple[tuple[str, re.Pattern[str], str], ...] = (
    ("api_key", re.compile(r"(?<![A-Za-z0-9])sk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_]{16,}"),
     "it contains what looks like an API key (sk-…)"),
    ("bearer_token", re.compile(r"\bBearer\s+[A-Za-z0-9._~+/=-]{8,}", re.IGNORECASE),
     "it contains what looks like an access token (Bearer …)"),
    ("verification_code", re.compile(
        rf"(?:{_CODE_WORDS})[^0-9A-Za-z\n]{{0,12}}(?:is|为|是|:|：)?[^0-9A-Za-z\n]{{0,6}}[0-9]{{4,8}}(?![0-9])"
        rf"|(?<![0-9])[0-9]{{4,8}}[^0-9A-Za-z\n]{{0,8}}(?:is your|为您的|是你的|是您的)?[^0-9A-Za-z\n]{{0,4}}(?:{_CODE_WORDS})",
        re.IGNORECASE),
     "it contains what looks like a verification code"),
    ("long_number", re.compile(r"(?<![0-9])[0-9]{15,}(?![0-9])|(?<![0-9])[0-9]{4}(?:[ -][0-9]{4}){3,}(?![0-9])"),
     "it contains a long number (15 or more digits: a card, account or ID number?)"),
)

_SENSITIVE = re.compile(
    r"过敏|病史|病历|诊断|处方|药物|用药|抑郁|焦虑症|住院|手术|体检|血型|紧急联系人|身份证|护照|家庭住址|住址|银行卡|工资|密码"
    r"|allerg|diagnos|medication|prescription|medical|emergency contact|passport|home address|salary|password"
    r"|(?<![0-9])1[3-9][0-9][- ]?[0-9]{4}[- ]?[0-9]{4}(?![0-9])"          # a mainland mobile number
    r"|[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}",                  # an e-mail address
    re.IGNORECASE)


def find_secret(text: str) -> str | None:
    """Why ``text`` must not be stored, or None when it may be.

    :param text: any text a write would store (title, observation, context, tags…).
    :returns: a sentence naming the kind of secret (never the secret itself).
    """
    for _name, pattern, sentence in BLOCKLIST:
        if pattern.search(text):
            return sentence
    return None


def looks_sensitive(text: str) -> bool:
    """True when ``text`` holds personal data that should be marked ``sensitive``
    (health, contacts, identity documents, addresses, money, passwords)."""
    return bool(_SENSITIVE.search(text))
