"""Which paths sync: built-in ignore defaults, config patterns, .ohsyncignore.

Patterns use gitignore syntax (matched by the ``pathspec`` library).  An
ignored path is never uploaded, downloaded or deleted; changing the rules
never deletes anything, a newly ignored path simply stops being tracked.

The library's trash (``/.trash/`` at the mirror's root, or the working name it
gets when a file occupies ``.trash``) lives on the server only
(docs/architecture.md §4): it is never mirrored down nor up, whatever the
patterns say, so a deleted file frees its space locally.  ``ohsync trash``
lists, restores and purges it (``engine/trash.py``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from pathlib import Path

import pathspec

from .local_lookups import stat_or_none
from .special_dirs import is_under

__all__ = ["TEMP_PREFIX", "DEFAULT_IGNORES", "IGNORE_FILE", "SERVER_ONLY", "IgnoreRules", "pattern_problem",
           "server_only"]

#: Prefix of the daemon's own temp files (atomic writes, partial downloads).
TEMP_PREFIX = ".ohsync-tmp-"
#: Per-mirror ignore file at the mirror root, gitignore syntax.
IGNORE_FILE = ".ohsyncignore"

#: Folders at the mirror's root that stay on the server (with their working alternatives).
SERVER_ONLY = (".trash",)


def server_only(rel_path: str) -> bool:
    """True for a server-only folder (:data:`SERVER_ONLY`) and everything in it."""
    return any(is_under(rel_path, name) for name in SERVER_ONLY)


DEFAULT_IGNORES: tuple[str, ...] = (
    f"{TEMP_PREFIX}*",
    ".DS_Store",
    "Thumbs.db",
    "desktop.ini",
    "*.swp",
    "*.swx",
    "*.swo",
    "*~",
    ".#*",
    "~$*",
    "*.part",
    "*.crdownload",
    ".obsidian/workspace*.json",
    ".obsidian/cache",
    ".trash-*",
)


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a valid gitignore pattern, or None."""
    try:
        pathspec.GitIgnoreSpec.from_lines([pattern])
    except Exception as exc:  # noqa: BLE001 - pathspec raises several types for bad patterns
        return str(exc) or type(exc).__name__
    return None


def _compile(lines: list[str]) -> tuple[pathspec.GitIgnoreSpec, list[str]]:
    """Compile the valid lines; return the spec and a sentence per invalid one."""
    good, problems = [], []
    for line in lines:
        problem = pattern_problem(line)
        if problem is None:
            good.append(line)
        else:
            problems.append(f"ignore pattern {line!r} is invalid and was left out ({problem})")
    return pathspec.GitIgnoreSpec.from_lines(good), problems


class IgnoreRules:
    """Matches rel paths against the defaults, config patterns and the file.

    :param patterns: extra gitignore-style patterns (config ``ignore``).
    :param local_root: mirror root; its ``.ohsyncignore`` is read when present.

    Invalid patterns (e.g. a lone ``!`` from another device's ignore file)
    are left out and described in :attr:`problems`, never fatal.
    """

    def __init__(self, patterns: Iterable[str] = (), local_root: Path | None = None) -> None:
        self._patterns = list(DEFAULT_IGNORES) + list(patterns)
        self._local_root = local_root
        self._file_mtime: int | None = None
        self._spec, self.problems = _compile(self._patterns)
        self.reload()

    def reload(self) -> None:
        """Re-read ``.ohsyncignore`` if it changed since the last read."""
        if self._local_root is None:
            return
        path = self._local_root / IGNORE_FILE
        st = stat_or_none(path, follow=True)
        mtime = None if st is None else st.st_mtime_ns
        if mtime == self._file_mtime:
            return
        self._file_mtime = mtime
        lines = list(self._patterns)
        if mtime is not None:
            with contextlib.suppress(OSError):
                lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
        self._spec, self.problems = _compile(lines)

    def match(self, rel_path: str, is_dir: bool = False) -> bool:
        """True when ``rel_path`` (or one of its folders) is ignored, or server-only."""
        if not rel_path:
            return False
        if server_only(rel_path):
            return True
        return self._spec.match_file(rel_path + "/" if is_dir else rel_path)
