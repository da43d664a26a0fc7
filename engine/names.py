"""Name rules, in one place: what a file name may be, and what it means.

* :func:`path_problem`: why a library-relative path cannot exist on both
  sides (the sync and filing refuse such paths and report them);
* :func:`server_name_problem`: why a name the *server* handed back is unsafe
  to use (the client drops such entries from listings and reports them);
* :func:`upload_name_problem`: why a name cannot go through the upload form
  faithfully (the client refuses instead of letting the server mangle it);
* :func:`fit_name` / :func:`split_name`: generated names within
  :data:`MAX_NAME_BYTES`, and ``(stem, ext)``;
* :func:`is_partial_name` / :func:`has_partial_sibling` /
  :func:`is_ignored_name`: downloads in progress, lock files and desktop
  plumbing (the drop folder never files them).

:mod:`.paths`, :mod:`.client.paths` and :mod:`.filing.rules` re-export
these under their older names.  A new rule about names goes here.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "MAX_NAME_BYTES",
    "PARTIAL_SUFFIXES",
    "SIBLING_SUFFIXES",
    "fit_name",
    "has_partial_sibling",
    "is_desktop_junk",
    "is_ignored_name",
    "is_partial_name",
    "path_problem",
    "server_name_problem",
    "split_name",
    "upload_name_problem",
]

#: Longest file name, in UTF-8 bytes, Seafile and common file systems accept
#: (256 bytes are refused).
MAX_NAME_BYTES = 255

#: Name endings of downloads still in progress (browsers, download managers).
PARTIAL_SUFFIXES: tuple[str, ...] = (
    ".part",        # Firefox, wget2, many others
    ".crdownload",  # Chrome, Edge
    ".download",    # Safari (a bundle folder), some Linux tools
    ".tmp",
    ".partial",     # IE/old Edge, Transmission option
    ".opdownload",  # Opera
    ".!ut",         # uTorrent
    ".!qb",         # qBittorrent
    ".aria2",       # aria2 control file
    ".filepart",    # WinSCP
    ".dtapart",     # DownThemAll
)
#: Suffixes that, appended to a file's own name, mean that file is still
#: being written (``x.pdf`` + ``x.pdf.part`` from Firefox, ``x.zip.aria2``).
SIBLING_SUFFIXES: tuple[str, ...] = (".part", ".crdownload", ".aria2", ".download", ".filepart")

_DOUBLE_EXTS = (".tar.gz", ".tar.bz2", ".tar.xz", ".tar.zst")
_IGNORED_NAMES = {".ds_store", "thumbs.db", "desktop.ini", ".directory", "icon\r"}


# --------------------------------------------------------------------------- paths and names on both sides


def path_problem(rel_path: str) -> str | None:
    """Why ``rel_path`` cannot exist on both sides, or None when it can.

    Checks each component for ``.``/``..``, empty parts, NUL, ``/`` or
    ``\\`` (Seafile refuses backslashes in folder names), control
    characters and names over 255 UTF-8 bytes.
    """
    if rel_path.startswith("/") or not rel_path:
        return "absolute or empty path"
    for part in rel_path.split("/"):
        if part in ("", ".", ".."):
            return f"'{part}' is not a valid name"
        if "\x00" in part or "\\" in part:
            return f"'{part}' contains a character Seafile does not accept"
        if any(ord(c) < 32 for c in part):
            return f"'{part}' contains a control character"
        if len(part.encode("utf-8")) > MAX_NAME_BYTES:
            return f"name longer than {MAX_NAME_BYTES} bytes"
    return None


def server_name_problem(name: object) -> str | None:
    """Why ``name`` (one path component from the server) is unsafe, or None.

    Unsafe: not a string, empty, ``.``/``..``, containing ``/`` or NUL,
    not encodable as UTF-8 (lone surrogates), longer than 255 UTF-8 bytes.
    """
    if not isinstance(name, str):
        return "name is not a string"
    if name == "":
        return "empty name"
    if name in (".", ".."):
        return f"reserved name {name!r}"
    if "/" in name:
        return "name contains '/'"
    if "\x00" in name:
        return "name contains a NUL character"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "name is not valid UTF-8"
    if size > MAX_NAME_BYTES:
        return f"name is {size} bytes long (more than {MAX_NAME_BYTES})"
    return None


def upload_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be uploaded faithfully through a multipart form.

    Besides :func:`server_name_problem`: ``"`` arrives as ``%22`` (it is
    percent-encoded in the part header and the server does not decode it),
    ``\\`` is escaped by httpx and cut by the C file server, and control
    characters are percent-encoded.  Such names would be stored under a
    different name, so they are refused instead of mangled silently.
    """
    problem = server_name_problem(name)
    if problem:
        return problem
    if '"' in name:
        return "name contains '\"', which the upload form cannot carry"
    if "\\" in name:
        return "name contains '\\', which the upload form cannot carry"
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name):
        return "name contains a control character"
    return None


# --------------------------------------------------------------------------- generated names


def split_name(name: str) -> tuple[str, str]:
    """``(stem, ext)`` with ``ext`` including its dot (``""`` when none).

    Dot-files have no extension (``.bashrc`` → ``(".bashrc", "")``) and
    ``.tar.gz``-style double extensions stay together.
    """
    lower = name.lower()
    for double in _DOUBLE_EXTS:
        if lower.endswith(double) and len(name) > len(double):
            return name[: -len(double)], name[-len(double):]
    dot = name.rfind(".")
    if dot <= 0 or dot == len(name) - 1:
        return name, ""
    return name[:dot], name[dot:]


def fit_name(stem: str, suffix: str, *, limit: int = MAX_NAME_BYTES) -> str:
    """``stem + suffix`` within ``limit`` UTF-8 bytes (default 255),
    shortening the stem only, on a character boundary."""
    budget = limit - len(suffix.encode("utf-8"))
    raw = stem.encode("utf-8")
    if len(raw) <= budget:
        return stem + suffix
    return raw[:max(0, budget)].decode("utf-8", errors="ignore") + suffix


# --------------------------------------------------------------------------- unfinished and plumbing files


def is_partial_name(name: str) -> bool:
    """True for names of downloads in progress and editor lock files.

    Partial-download suffixes (:data:`PARTIAL_SUFFIXES`, case-insensitive),
    Office lock files (``~$x.docx``), LibreOffice locks (``.~lock.x#``),
    our own temp files (``.ohsync-tmp-*``) and editor backups (``x~``).
    """
    lower = name.lower()
    if lower.endswith(PARTIAL_SUFFIXES):
        return True
    if name.startswith(("~$", ".~lock.", ".ohsync-tmp-")):
        return True
    if name.startswith("Unconfirmed ") and lower.endswith(".crdownload"):
        return True
    return name.endswith("~") or (name.startswith(".#"))


def is_ignored_name(name: str) -> bool:
    """True for names that are never filed: partial downloads (see
    :func:`is_partial_name`), hidden files (a leading ``.``) and desktop
    plumbing (``.DS_Store``, ``Thumbs.db``, ``desktop.ini``)."""
    return is_partial_name(name) or name.startswith(".") or name.lower() in _IGNORED_NAMES


def is_desktop_junk(name: str) -> bool:
    """True for the files a desktop leaves in every folder it shows
    (``.DS_Store``, ``Thumbs.db``, ``desktop.ini``, ``.directory``, ``Icon\\r``):
    never anyone's work, so they do not keep a folder from being replaced."""
    return name.lower() in _IGNORED_NAMES


def has_partial_sibling(path: Path) -> bool:
    """True when a partial-download companion of ``path`` exists beside it
    (Firefox keeps an empty ``x.pdf`` while writing ``x.pdf.part``; aria2
    keeps ``x.zip.aria2`` until done).  A companion whose name would be too
    long for the file system cannot exist: False for it, never an error."""
    # os.path.lexists answers False for any OSError (ENAMETOOLONG for a 251-255 byte name)
    return any(os.path.lexists(path.with_name(path.name + suffix)) for suffix in SIBLING_SUFFIXES)
