"""The socket's folder must be ours alone before the daemon binds in it.

Whoever can write the folder that holds the socket can replace the socket
with their own and answer ``ohsync status`` for us.  The fallback location
``/tmp/ohsync-<uid>/`` (no ``XDG_RUNTIME_DIR``: root, a plain ssh session)
lives in a world-writable folder, so another user may have created it
first.  :func:`prepare_socket_dir` creates the folder ``0700`` when it is
missing and otherwise refuses it, naming the problem and the fix, when it is
not a real folder, not owned by us, or open to anyone else.  It never
``chmod``\\ s a folder it did not create: a folder that was open may already
hold someone else's socket.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from ...engine.errors import OhsyncError

__all__ = ["UnsafeSocketDir", "prepare_socket_dir", "check_socket_dir"]


class UnsafeSocketDir(OhsyncError):
    """The socket's folder could let another user replace the socket."""

    title = "Unsafe socket folder"


def _fix(directory: Path) -> str:
    return (f"Remove it (`rm -r {directory}`) so ohsync can create it again, or set `socket` in the "
            "config (or OHSYNC_SOCKET) to a path in a folder only you can use")


def check_socket_dir(directory: Path, uid: int | None = None) -> None:
    """Refuse ``directory`` unless it is a real folder owned by ``uid`` with mode ``0700``.

    :param uid: the owner required (default: ours).
    :raises UnsafeSocketDir: the sentence says which check failed and what to do.
    :raises OSError: the folder cannot be examined (e.g. it does not exist).
    """
    uid = os.getuid() if uid is None else uid
    st = os.lstat(directory)
    if stat.S_ISLNK(st.st_mode):
        raise UnsafeSocketDir(f"The socket folder {directory} is a symbolic link, which another user may "
                              f"control. {_fix(directory)}.")
    if not stat.S_ISDIR(st.st_mode):
        raise UnsafeSocketDir(f"The socket folder {directory} is not a folder. {_fix(directory)}.")
    if st.st_uid != uid:
        raise UnsafeSocketDir(f"The socket folder {directory} belongs to uid {st.st_uid}, not to you "
                              f"(uid {uid}): that user could replace ohsync's socket. {_fix(directory)}.")
    mode = stat.S_IMODE(st.st_mode)
    if mode != 0o700:
        raise UnsafeSocketDir(f"The socket folder {directory} has mode {mode:04o}, not 0700: other users "
                              f"could reach or replace ohsync's socket. Run `chmod 700 {directory}` "
                              "(or remove the folder) and start ohsync again.")


def prepare_socket_dir(directory: Path) -> None:
    """Create ``directory`` with mode ``0700`` when missing, then check it.

    Missing parents are created ``0700`` too.  A folder that already exists
    is only checked (:func:`check_socket_dir`), never changed.

    :raises UnsafeSocketDir: the folder exists but is not ours alone.
    :raises OSError: the folder cannot be created.
    """
    old = os.umask(0o077)
    try:
        directory.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass  # someone's: checked below
        else:
            os.chmod(directory, 0o700)  # the umask may have been stricter than 077 allows for us
    finally:
        os.umask(old)
    check_socket_dir(directory)
