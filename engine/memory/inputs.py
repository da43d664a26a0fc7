"""The one check of the memory tools' text input, before anything is planned or written.

Every string a tool call brings (titles, folders, categories, observation
text, contexts, tags, relations, edit text, trash reasons) passes through
:func:`check_input`.  It refuses, with a sentence naming the field and what
to do, what would make a memory file no longer text or a name the server
cannot hold:

* a lone UTF-16 surrogate (valid in JSON, not a character: it cannot be
  written as UTF-8);
* NUL (a file holding one counts as binary, so two writers' edits no
  longer merge) and other control characters (tab and line breaks aside:
  whether a field may span lines is said where it is used);
* in a name (``title``, ``folder``): any control character, ``\\`` (which
  Seafile does not accept in names), and for a folder a leading ``/``
  (folders are inside the memory library, never absolute).

Names come back in composed Unicode (NFC), as Seafile stores them and as
the mirror spells them: a decomposed title would be written under a name
that sync then renames under the tool's feet.
"""
from __future__ import annotations

import unicodedata
from typing import Any, Literal

from .edit import MemoryToolError

__all__ = ["check_input", "InputKind"]

#: ``text``: content (tab and line breaks allowed); ``name``: a title or
#: folder (becomes a path); ``find``: text matched against the file (only
#: encodable: a damaged file may hold control characters to edit away).
InputKind = Literal["text", "name", "find"]

_ALLOWED_IN_TEXT = frozenset("\t\n\r")


def check_input(field: str, value: Any, kind: InputKind = "text") -> Any:
    """Refuse ``value`` when it cannot be written as field ``field``.

    :param field: the parameter's name as the caller sent it
        (``observations[0].text``), quoted in the sentence.
    :param value: the value; anything that is not a string is returned as
        is (type checks are the caller's).
    :param kind: see :data:`InputKind`.
    :returns: ``value``; for ``kind="name"`` in composed Unicode (NFC).
    :raises MemoryToolError: "`field` holds …; what to do".
    """
    if not isinstance(value, str):
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = value[exc.start]
        raise MemoryToolError(f"`{field}` holds a lone UTF-16 surrogate (U+{ord(bad):04X}), which is not a "
                              "character and cannot be saved; send valid Unicode text (a \\uD800-\\uDBFF "
                              "escape must be followed by its \\uDC00-\\uDFFF pair)") from None
    if kind == "find":
        return value
    if "\x00" in value:
        raise MemoryToolError(f"`{field}` holds a NUL character (U+0000); memory files are plain text, so "
                              "leave it out")
    for ch in value:
        if (ord(ch) < 0x20 or ord(ch) == 0x7F) and (kind == "name" or ch not in _ALLOWED_IN_TEXT):
            where = "a file or folder name on the server" if kind == "name" else "a memory file"
            raise MemoryToolError(f"`{field}` holds the control character U+{ord(ch):04X}, which {where} "
                                  "should not hold; leave it out")
    if kind != "name":
        return value
    if "\\" in value:
        what = "separate folders with '/'" if field == "folder" else "use another character"
        raise MemoryToolError(f"`{field}` holds '\\', which Seafile does not accept in a file or folder name; "
                              f"{what}")
    if field == "folder" and value.strip().startswith("/"):
        raise MemoryToolError(f"`folder` {value!r} is an absolute path; give a folder inside the memory "
                              "library without the leading '/', such as 'knowledge' or 'courses/2026-2027-1'")
    return unicodedata.normalize("NFC", value)
