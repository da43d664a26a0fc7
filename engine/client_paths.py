"""Remote path arithmetic and name checks for the Seafile client.

Remote paths are absolute in the library, ``/``-separated, with no trailing
slash except the root ``/`` (see :mod:`ohsync.engine.models`).  Paths the
*caller* passes are normalized strictly (:func:`normalize_remote_path` raises
``ValueError`` for ``..``, NUL, …: a programming error).  Names the *server*
hands back are checked with :func:`name_problem`; the client drops unsafe
ones from listings and reports them instead of raising.
"""

from __future__ import annotations

from .errors import RemoteOperationError

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

#: Longest name (UTF-8 bytes) Seafile stores; 256 bytes are refused.
MAX_NAME_BYTES = 255


def name_problem(name: object) -> str | None:
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

    Besides :func:`name_problem`: ``"`` arrives as ``%22`` (it is
    percent-encoded in the part header and the server does not decode it),
    ``\\`` is escaped by httpx and cut by the C file server, and control
    characters are percent-encoded.  Such names would be stored under a
    different name, so they are refused instead of mangled silently.
    """
    problem = name_problem(name)
    if problem:
        return problem
    if '"' in name:
        return "name contains '\"', which the upload form cannot carry"
    if "\\" in name:
        return "name contains '\\', which the upload form cannot carry"
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in name):
        return "name contains a control character"
    return None


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
