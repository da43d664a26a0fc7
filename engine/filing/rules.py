"""Filing rules for the drop folder (docs/architecture.md §8, config ``[filing]``).

Pure functions, no I/O.  The name rules it re-exports (:func:`split_name`,
:func:`fit_name`, :func:`is_partial_name`, :func:`is_ignored_name`,
:func:`has_partial_sibling`) live in :mod:`.names`; whether a file is
finished (still downloading, open for writing) is the daemon's
:mod:`ohsync.daemon.stability`.

* :func:`parse_rules` turns the config's ``rules = [{match, dest}]`` into
  :class:`FilingRule` values.  ``match`` is a glob (``*.pdf``, matched
  case-insensitively against the file name, or against the path inside the
  drop folder when the glob contains ``/``), ``re:`` + a regular expression
  (searched in the file name; add ``(?i)`` for case-insensitivity), or
  ``dir:`` + a subfolder of the drop folder (the file sits in it or below).
* :func:`choose_rule` / :func:`render_dest` pick the first matching rule and
  expand its destination template: ``{yyyy}``, ``{mm}``, ``{dd}``,
  ``{stem}``, ``{ext}`` (without the dot), ``{name}``, ``{term}`` (the
  Tsinghua term, :func:`tsinghua_term`) and ``{dir}`` (the drop subfolder
  the file came from, ``""`` at the top).  A destination ending in ``/`` is
  a folder and the file keeps its name; otherwise the last component is the
  new file name.
* :func:`unique_name` resolves name clashes with `` (1)``, `` (2)``…
"""

from __future__ import annotations

import fnmatch
import re
import string
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import PurePosixPath
from typing import Any

from ..names import (
    MAX_NAME_BYTES,
    PARTIAL_SUFFIXES,
    fit_name,
    has_partial_sibling,
    is_ignored_name,
    is_partial_name,
    split_name,
)

__all__ = [
    "DEFAULT_DEST",
    "PARTIAL_SUFFIXES",
    "PLACEHOLDERS",
    "FilingRule",
    "RuleError",
    "choose_rule",
    "fit_name",
    "has_partial_sibling",
    "is_ignored_name",
    "is_partial_name",
    "parse_dest",
    "parse_rules",
    "render_dest",
    "split_name",
    "tsinghua_term",
    "unique_name",
]

#: Where a file goes when no rule matches (config ``[filing] default``).
DEFAULT_DEST = "/Files/_inbox/"

#: Placeholders a destination template may use.
PLACEHOLDERS: frozenset[str] = frozenset({"yyyy", "mm", "dd", "stem", "ext", "name", "term", "dir"})



class RuleError(ValueError):
    """A filing rule or destination in the config is invalid.

    The message names the rule (``rules[2]``) and says what is wrong.
    """


@dataclass(frozen=True)
class FilingRule:
    """One ``{match, dest}`` rule.

    :ivar kind: ``"glob"``, ``"re"`` or ``"dir"``.
    :ivar pattern: the glob, regular expression or drop subfolder (POSIX,
        no leading/trailing slash) without the ``re:``/``dir:`` prefix.
    :ivar dest: the destination template, library-absolute (``/Files/…``).
    :ivar source: the original ``match`` string (for messages).
    """

    kind: str
    pattern: str
    dest: str
    source: str = ""

    def matches(self, name: str, drop_rel: str | None) -> bool:
        """Tell whether this rule takes a file.

        :param name: the file name (``x.pdf``).
        :param drop_rel: the file's path inside the drop folder (POSIX,
            ``数据结构/x.pdf``), or None when it is not in the drop folder
            (``ohsync file PATH`` on a file elsewhere): ``dir:`` rules then
            never match and path globs see only the name.
        :returns: True on a match.
        """
        name = unicodedata.normalize("NFC", name)
        if self.kind == "re":
            return re.search(self.pattern, name) is not None
        if self.kind == "dir":
            if drop_rel is None:
                return False
            folder = PurePosixPath(unicodedata.normalize("NFC", drop_rel)).parent.as_posix()
            folder = "" if folder == "." else folder
            return folder.casefold() == self.pattern.casefold() or \
                folder.casefold().startswith(self.pattern.casefold() + "/")
        subject = name
        if "/" in self.pattern:
            subject = unicodedata.normalize("NFC", drop_rel) if drop_rel is not None else name
        return fnmatch.fnmatchcase(subject.casefold(), self.pattern.casefold())


def parse_dest(template: str, *, what: str = "dest") -> str:
    """Check a destination template and return it normalised.

    :param template: e.g. ``/Files/learn/{term}/`` (a leading ``/`` is added
        when missing).
    :param what: names the setting in error messages.
    :returns: the template with a leading ``/``.
    :raises RuleError: empty, an unknown placeholder, bad braces, or ``..``.
    """
    if not isinstance(template, str) or not template.strip():
        raise RuleError(f"{what} must be a non-empty path such as \"/Files/_inbox/\"")
    template = template.strip()
    if not template.startswith("/"):
        template = "/" + template
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as exc:
        raise RuleError(f"{what} {template!r}: {exc} (write {{{{ and }}}} for literal braces)") from None
    for field in fields:
        if field not in PLACEHOLDERS:
            known = ", ".join("{" + p + "}" for p in sorted(PLACEHOLDERS))
            raise RuleError(f"{what} {template!r}: unknown placeholder {{{field}}} (known: {known})")
    if any(part in (".", "..") for part in template.split("/")):
        raise RuleError(f"{what} {template!r}: '.' and '..' are not allowed")
    return template


def parse_rules(raw: Iterable[Mapping[str, Any]]) -> list[FilingRule]:
    """Parse the config's ``rules`` list.

    :param raw: ``[{"match": "*.pdf", "dest": "/Files/x/"}, …]`` as read
        from TOML.
    :returns: the rules in order (first match wins).
    :raises RuleError: a rule is not a table, lacks ``match``/``dest``, has
        an invalid regular expression, an empty ``dir:`` or an invalid
        destination.  The message names the rule by index.
    """
    rules: list[FilingRule] = []
    for i, item in enumerate(raw):
        where = f"[filing] rules[{i}]"
        if not isinstance(item, Mapping):
            raise RuleError(f"{where} must be a table like {{ match = \"*.pdf\", dest = \"/Files/pdf/\" }}")
        match, dest = item.get("match"), item.get("dest")
        if not isinstance(match, str) or not match:
            raise RuleError(f"{where}: `match` must be a glob, \"re:<regex>\" or \"dir:<subfolder>\"")
        dest = parse_dest(dest, what=f"{where} dest")  # type: ignore[arg-type]
        if match.startswith("re:"):
            pattern = match[3:]
            try:
                re.compile(pattern)
            except re.error as exc:
                raise RuleError(f"{where}: invalid regular expression {pattern!r}: {exc}") from None
            rules.append(FilingRule("re", unicodedata.normalize("NFC", pattern), dest, match))
        elif match.startswith("dir:"):
            folder = "/".join(p for p in match[4:].replace("\\", "/").split("/") if p not in ("", "."))
            if not folder or ".." in folder.split("/"):
                raise RuleError(f"{where}: `dir:` needs a subfolder of the drop folder, e.g. \"dir:数据结构\"")
            rules.append(FilingRule("dir", unicodedata.normalize("NFC", folder), dest, match))
        else:
            rules.append(FilingRule("glob", unicodedata.normalize("NFC", match), dest, match))
    return rules


def choose_rule(rules: Iterable[FilingRule], name: str, drop_rel: str | None) -> FilingRule | None:
    """The first rule that matches, or None (then the default applies)."""
    for rule in rules:
        if rule.matches(name, drop_rel):
            return rule
    return None


def tsinghua_term(day: date | datetime) -> str:
    """The Tsinghua term a date falls in, e.g. ``2026-2027-1``.

    Approximated by month (the registrar's calendar shifts by a week or two
    each year): September–January is the autumn term ``Y-(Y+1)-1``,
    February–June the spring term ``(Y-1)-Y-2``, July–August the summer
    term ``(Y-1)-Y-3`` of the school year that began the September before.

    :param day: a date, or a datetime (its own date is used; pass a +08:00
        time to get Beijing's date).
    :returns: ``"<first year>-<second year>-<1|2|3>"``.
    """
    year, month = day.year, day.month
    if month >= 9:
        return f"{year}-{year + 1}-1"
    if month == 1:
        return f"{year - 1}-{year}-1"
    if month <= 6:
        return f"{year - 1}-{year}-2"
    return f"{year - 1}-{year}-3"


def render_dest(template: str, *, name: str, when: datetime, drop_rel: str | None = None) -> tuple[str, str]:
    """Expand a destination template for one file.

    :param template: a template checked by :func:`parse_dest`.
    :param name: the dropped file's name.
    :param when: the filing time (its calendar fields are used as is; pass
        a +08:00 time).
    :param drop_rel: the file's path inside the drop folder (for ``{dir}``).
    :returns: ``(folder, file_name)``: the library-absolute folder without a
        trailing slash (``/Files/learn/2026-2027-1/数据结构``) and the target
        name (the dropped name unless the template names the file).
    :raises RuleError: the expansion is empty or contains ``..``.
    """
    stem, ext = split_name(name)
    folder = ""
    if drop_rel:
        parent = PurePosixPath(drop_rel).parent.as_posix()
        folder = "" if parent == "." else parent
    values = {
        "yyyy": f"{when.year:04d}", "mm": f"{when.month:02d}", "dd": f"{when.day:02d}",
        "stem": stem, "ext": ext[1:], "name": name, "term": tsinghua_term(when), "dir": folder,
    }
    expanded = unicodedata.normalize("NFC", template.format(**values))
    is_folder = template.endswith("/")
    parts = [p for p in expanded.split("/") if p != ""]
    if any(p in (".", "..") for p in parts):
        raise RuleError(f"destination {template!r} expands to {expanded!r}, which contains '..'")
    if is_folder:
        target_name = name
    else:
        if not parts:
            raise RuleError(f"destination {template!r} expands to an empty path")
        target_name = parts.pop().rstrip(".").rstrip() or name
    return "/" + "/".join(parts), unicodedata.normalize("NFC", target_name)


def unique_name(name: str, taken: Callable[[str], bool], *, reserve: int = 0) -> str:
    """The first free name among ``name``, ``stem (1).ext``, ``stem (2).ext``…

    :param name: the wanted name.
    :param taken: tells whether a candidate name is already used.
    :param reserve: bytes to keep free for a suffix the caller adds later
        (3 for the sidecar's ``.md``): candidates are kept within
        ``255 - reserve`` bytes by shortening the stem.
    :returns: a name for which ``taken`` answered False.
    """
    stem, ext = split_name(name)
    n = 0
    while True:
        tail = ext if n == 0 else f" ({n}){ext}"
        candidate = fit_name(stem, tail, limit=MAX_NAME_BYTES - reserve)
        if not taken(candidate):
            return candidate
        n += 1
