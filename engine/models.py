"""Engine-owned value types returned by the Seafile client.

Seafile's JSON never leaves ``client.py``: the client converts every answer
into these frozen dataclasses.  Paths here are *remote* paths: absolute in
the library, ``/``-separated, NFC, no trailing slash except the root ``/``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["EMPTY_ID", "RepoInfo", "RemoteEntry", "DirListing", "AccountInfo", "UploadResult"]

#: The id Seafile gives an empty file or an empty directory.
EMPTY_ID = "0" * 40


@dataclass(frozen=True)
class RepoInfo:
    """A library (Seafile "repo").

    :ivar id: library id, lowercase UUID.
    :ivar name: library name (not unique on a server).
    :ivar head_commit_id: 40-hex id of the head commit; changes on every change.
    :ivar root: root directory id ("" where the endpoint does not say).
    :ivar size: bytes (may lag on the server).
    :ivar mtime: last modification, Unix seconds.
    :ivar encrypted: True for an encrypted library (not supported by ohsync).
    :ivar permission: "rw" or "r".
    :ivar file_count: files in the library as the server last counted them
        (``file_count`` of ``GET /api2/repos/{id}/``; 0 when not given or not
        computed yet, and it may lag behind the head).
    """

    id: str
    name: str
    head_commit_id: str
    root: str = ""
    size: int = 0
    mtime: int = 0
    encrypted: bool = False
    permission: str = "rw"
    file_count: int = 0


@dataclass(frozen=True)
class RemoteEntry:
    """One file or folder in a listing.

    :ivar path: remote path, e.g. ``/journal/2026-11.md``.
    :ivar is_dir: True for a folder.
    :ivar id: file id (content hash) or directory id.
    :ivar size: bytes (0 for folders).
    :ivar mtime: Unix seconds as the server reports them.
    """

    path: str
    is_dir: bool
    id: str
    size: int = 0
    mtime: int = 0

    @property
    def name(self) -> str:
        """The last path component."""
        return self.path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class DirListing:
    """The answer of ``GET /api2/repos/{id}/dir/?p=``.

    :ivar path: the listed folder.
    :ivar oid: the folder's directory id (``oid`` response header).
    :ivar uptodate: True when the request carried ``oid=`` equal to the
        current one and the server answered ``"uptodate"``; entries is empty.
    :ivar entries: direct children (or all descendants for a recursive list).
    """

    path: str
    oid: str
    uptodate: bool = False
    entries: tuple[RemoteEntry, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class AccountInfo:
    """``GET /api2/account/info/``.

    :ivar total: quota in bytes; ``None`` when unlimited (server sends <= 0).
    :ivar usage: bytes used.
    """

    email: str
    name: str = ""
    contact_email: str = ""
    total: int | None = None
    usage: int = 0

    @property
    def free(self) -> int | None:
        """Bytes left, or None when unlimited."""
        return None if self.total is None else max(0, self.total - self.usage)


@dataclass(frozen=True)
class UploadResult:
    """What an upload or update answered.

    :ivar path: the remote path the content was stored at (may differ from the
        requested one when the server auto-renamed it).
    :ivar id: the new file id.
    :ivar size: bytes.
    """

    path: str
    id: str
    size: int
