"""The journal line a filed document leaves in ``journal/<yyyy-mm>.md``.

Pure text functions: the line itself, a new month file in the journal
format, appending a line with the file's own line ending, and telling
whether a line is already there (so a resumed job never adds it twice).
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta, timezone

__all__ = ["BEIJING", "append_line", "has_line", "journal_line", "new_journal"]

#: The journal's and the sidecars' clock: China Standard Time, +08:00.
BEIJING = timezone(timedelta(hours=8), "CST")


#: The words of the texts filing writes, per language (``"zh"``, ``"en"``).
_WORDS = {"zh": {"filed": "归档", "attachment": "附件", "journal": "日志"},
          "en": {"filed": "filed", "attachment": "attachment", "journal": "journal"}}


def journal_line(name: str, remote_path: str, when: datetime, language: str = "zh") -> str:
    """``- [file] YYYY-MM-DD HH:MM 归档 <name> → <path> #附件`` (the journal's
    observation format; ``when`` is shown as given), in English
    ``- [file] … filed <name> → <path> #attachment`` for ``language="en"``."""
    words = _WORDS.get(language, _WORDS["en"])
    return f"- [file] {when:%Y-%m-%d %H:%M} {words['filed']} {name} → {remote_path} #{words['attachment']}"


def new_journal(month: str, when: datetime, first_line: str, language: str = "zh") -> bytes:
    """A new ``journal/<yyyy-mm>.md`` in the samples' format, with one line
    (its tag ``日志`` or, in English, ``journal``)."""
    permalink = f"journal-{month}-{hashlib.sha1(month.encode('utf-8')).hexdigest()[:4]}"
    stamp = when.isoformat(timespec="seconds")
    text = (
        "---\n"
        f"title: {month}\n"
        "type: journal\n"
        f"permalink: {permalink}\n"
        f"tags: [{_WORDS.get(language, _WORDS['en'])['journal']}, {month[:4]}]\n"
        f"created: {stamp}\n"
        f"modified: {stamp}\n"
        "origin: desktop\n"
        "sensitivity: normal\n"
        "---\n"
        "\n"
        f"# {month}\n"
        "\n"
        "## Observations\n"
        f"{first_line}\n"
    )
    return text.encode("utf-8")


def append_line(data: bytes, line: str) -> bytes:
    """``data`` with ``line`` appended as the last line (the file's own EOL)."""
    eol = b"\r\n" if b"\r\n" in data[:4096] else b"\n"
    if data and not data.endswith((b"\n", b"\r")):
        data += eol
    return data + line.encode("utf-8") + eol


def has_line(data: bytes, line: str) -> bool:
    """True when ``data`` has a line equal to ``line`` (ignoring surrounding blanks)."""
    target = line.strip()
    text = data.decode("utf-8", errors="replace")
    return any(existing.strip() == target for existing in text.splitlines())
