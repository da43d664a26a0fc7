"""Which daemon answers on a config's socket: this config's, another one's, or none.

Messages such as "the running daemon signs in with it now" are only true for
a daemon started with the same config file; two configs can name one socket.
The daemon's ``ping`` answer carries the config path it runs with.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Running", "running_daemon", "same_file"]


@dataclass(frozen=True)
class Running:
    """A daemon that answered ``ping`` on a socket.

    :ivar config: the config file it runs with (None: it did not say).
    :ivar same: True when that is the config asked about.
    """

    config: Path | None
    same: bool


def same_file(a: Path, b: Path) -> bool:
    """True when the paths ``a`` and ``b`` name one file (by inode; by resolved path when one is missing)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return a.expanduser().resolve() == b.expanduser().resolve()


def running_daemon(socket: Path, config: Path, timeout: float = 2.0) -> Running | None:
    """Ping the daemon on ``socket`` and compare its config file with ``config``.

    :param socket: the config's socket path (``Config.socket``).
    :param config: the config file the command runs with.
    :param timeout: seconds to wait for the answer.
    :returns: None when nothing answers there, else what answered.
    """
    from .protocol import Method, RpcClient

    try:
        answer = RpcClient(socket, timeout=timeout).call(Method.PING)
    except Exception:  # noqa: BLE001 - no answer of any kind means no daemon there
        return None
    theirs = answer.get("config") if isinstance(answer, dict) else None
    if not isinstance(theirs, str) or not theirs:
        return Running(None, False)
    return Running(Path(theirs), same_file(Path(theirs), config))
