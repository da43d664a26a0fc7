"""The person's own place: the computer's time offset and the language of the
texts ohsync writes into the library (sidecar summaries, journal lines).

Both are defaults a config key overrides (``[memory] time_offset``,
``[memory] language``); this module only reads the computer's settings.
"""
from __future__ import annotations

import os
import time
from collections.abc import Mapping

__all__ = ["LANGUAGES", "local_offset", "text_language"]

#: The languages ohsync writes texts in: Chinese, English.
LANGUAGES = ("zh", "en")


def local_offset(when: float | None = None) -> str:
    """The computer's UTC offset at ``when`` (POSIX seconds, default now) as ``±HH:MM``
    (it follows ``TZ`` and the system time zone, daylight saving included)."""
    seconds = time.localtime(when).tm_gmtoff
    sign = "-" if seconds < 0 else "+"
    minutes = abs(int(seconds)) // 60
    return f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"


def text_language(setting: str = "auto", environ: Mapping[str, str] | None = None) -> str:
    """The language of the texts ohsync writes: ``"zh"`` or ``"en"``.

    :param setting: ``"zh"``, ``"en"``, or ``"auto"``: the locale's
        (``LC_ALL``, else ``LC_MESSAGES``, else ``LANG``, as POSIX orders
        them): Chinese for ``zh*``, English otherwise.
    :param environ: the environment (default ``os.environ``).
    :raises ValueError: ``setting`` is none of these.
    """
    if setting in LANGUAGES:
        return setting
    if setting != "auto":
        raise ValueError(f"the language is 'auto', 'zh' or 'en', not {setting!r}")
    env = os.environ if environ is None else environ
    for name in ("LC_ALL", "LC_MESSAGES", "LANG"):
        value = env.get(name, "")
        if value:
            return "zh" if value.lower().startswith("zh") else "en"
    return "en"
