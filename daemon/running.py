"""Which daemon answers on a config's socket: this config's, another one's, or none.

Messages such as "the running daemon signs in with it now" are only true for
a daemon started with the same config file; two configs can name one socket.
The daemon's ``ping`` answer carries the config path it runs with.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["Running", "running_daemon", "same_file"]


@dataclass(frozen=True)
class Running:
    """A daemon that answered ``ping`` on a socket.

    :ivar config: the config file it runs with (None: it did not say).
    :ivar same: True when that is the config asked about.
    :ivar settings: what that file set when the daemon started, ``{dotted key: value as JSON}``
        (``daemon/config/settings.py``); None: it did not say.
    """

    config: Path | None
    same: bool
    settings: Mapping[str, str] | None = field(default=None, compare=False)

    def changed(self, settings: Mapping[str, str]) -> list[str]:
        """The keys the config file now sets otherwise than when this daemon started
        (``settings``: ``Config.settings`` of the file as it is now); empty when it did not say."""
        from .config.settings import changed_settings

        if self.settings is None or not self.same:
            return []
        return changed_settings(self.settings, settings)


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
    settings = answer.get("settings")
    if not isinstance(settings, dict) or not all(isinstance(v, str) for v in settings.values()):
        settings = None
    return Running(Path(theirs), same_file(Path(theirs), config), settings)
