"""Which paths sync: built-in ignore defaults, config patterns, .ohsyncignore.

Patterns use gitignore syntax (matched by the ``pathspec`` library).  An
ignored path is never uploaded, downloaded or deleted; changing the rules
never deletes anything, a newly ignored path simply stops being tracked.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pathspec

__all__ = ["TEMP_PREFIX", "DEFAULT_IGNORES", "IGNORE_FILE", "IgnoreRules"]

#: Prefix of the daemon's own temp files (atomic writes, partial downloads).
TEMP_PREFIX = ".ohsync-tmp-"
#: Per-mirror ignore file at the mirror root, gitignore syntax.
IGNORE_FILE = ".ohsyncignore"

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


class IgnoreRules:
    """Matches rel paths against the defaults, config patterns and the file.

    :param patterns: extra gitignore-style patterns (config ``ignore``).
    :param local_root: mirror root; its ``.ohsyncignore`` is read when present.
    """

    def __init__(self, patterns: Iterable[str] = (), local_root: Path | None = None) -> None:
        self._patterns = list(DEFAULT_IGNORES) + list(patterns)
        self._local_root = local_root
        self._file_mtime: int | None = None
        self._spec = pathspec.GitIgnoreSpec.from_lines(self._patterns)
        self.reload()

    def reload(self) -> None:
        """Re-read ``.ohsyncignore`` if it changed since the last read."""
        if self._local_root is None:
            return
        path = self._local_root / IGNORE_FILE
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            mtime = None
        if mtime == self._file_mtime:
            return
        self._file_mtime = mtime
        lines = list(self._patterns)
        if mtime is not None:
            try:
                lines += path.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                pass
        self._spec = pathspec.GitIgnoreSpec.from_lines(lines)

    def match(self, rel_path: str, is_dir: bool = False) -> bool:
        """True when ``rel_path`` (or one of its folders) is ignored."""
        if not rel_path:
            return False
        return self._spec.match_file(rel_path + "/" if is_dir else rel_path)
