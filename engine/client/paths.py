"""Remote path arithmetic and name checks for the Seafile client.

Remote paths are absolute in the library, ``/``-separated, with no trailing
slash except the root ``/`` (see :mod:`ohsync.engine.models`).  Paths the
*caller* passes are normalized strictly (:func:`normalize_remote_path` raises
``ValueError`` for ``..``, NUL, …: a programming error).  Names the *server*
hands back are checked with :func:`name_problem`; the client drops unsafe
ones from listings and reports them instead of raising.  The name rules live
in :mod:`.names` (``name_problem`` here is
:func:`~ohsync.engine.names.server_name_problem`).
"""

from __future__ import annotations

from ..errors import RemoteOperationError
from ..names import MAX_NAME_BYTES, upload_name_problem
from ..names import server_name_problem as name_problem

__all__ = [
    "MAX_NAME_BYTES",
    "is_within",
    "join_remote",
    "name_problem",
    "normalize_remote_path",
    "split_remote",
    "upload_name_problem",
    "upload_target",
]


def normalize_remote_path(path: str) -> str:
    """Return the canonical form of a caller-supplied remote path.

    A missing leading slash is added, repeated and trailing slashes are
    dropped (``"x//y/"`` → ``"/x/y"``; ``""`` → ``"/"``).

    :raises ValueError: a component is ``.``/``..``, holds NUL, or is too long.
    :raises TypeError: ``path`` is not a string.
    """
    if not isinstance(path, str):
        raise TypeError(f"remote path must be str, not {type(path).__name__}")
    parts = [part for part in path.split("/") if part]
    for part in parts:
        problem = name_problem(part)
        if problem:
            raise ValueError(f"invalid remote path {path!r}: {problem}")
    return "/" + "/".join(parts)


def join_remote(parent: str, name: str) -> str:
    """Join a normalized parent path and one name."""
    return ("" if parent == "/" else parent) + "/" + name


def split_remote(path: str) -> tuple[str, str]:
    """Split a normalized path into (parent, name); the root gives ("/", "")."""
    parent, _, name = path.rpartition("/")
    return (parent or "/", name)


def is_within(path: str, folder: str) -> bool:
    """True when normalized ``path`` equals ``folder`` or lies below it."""
    if folder == "/":
        return path.startswith("/")
    return path == folder or path.startswith(folder + "/")


def upload_target(remote_path: str) -> tuple[str, str, str]:
    """``(path, parent, name)`` of an upload target, normalized.

    The name is checked as given, before normalizing, so that a name the
    server cannot store faithfully (``..``, ``"``, ``\\``, control
    characters, > 255 bytes) is a :class:`RemoteOperationError` the engine
    skips and reports, never a silent rename.

    :raises RemoteOperationError: the name cannot be uploaded faithfully.
    :raises ValueError: the target is the library root, or the parent is
        malformed (a programming error).
    """
    raw_parent, _, raw_name = remote_path.rstrip("/").rpartition("/")
    problem = upload_name_problem(raw_name)
    if problem:
        if not raw_name:
            raise ValueError("cannot upload to the library root")
        raise RemoteOperationError(
            f"Cannot upload {remote_path!r}: {problem}.", path=remote_path, title="Name not allowed"
        )
    target = normalize_remote_path(raw_parent + "/" + raw_name)
    parent, name = split_remote(target)
    return target, parent, name
