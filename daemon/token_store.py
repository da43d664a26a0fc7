"""Where ``setup`` and ``login`` keep the token: the OS keyring, or the file store.

On a machine with no usable OS keyring (headless, over SSH, in a container)
the person is told so and offered a file only their user can read
(``state_dir/credentials.json``, ``0600``; config ``keyring = "file"``), as
Maestral falls back to a plain-text keyring with a warning.  Scripts choose
with ``--keyring file`` (or ``system``).  ``ohsync doctor`` warns for as long
as the file store is in use.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import update_config
from .credentials import KeyringUnavailable, system_keyring_problem, use_file_store

__all__ = ["settle_token_store", "file_store_note", "token_store_name"]


def file_store_note(path: Path, *, kept: bool = True) -> str:
    """The sentence about the file store (``kept``: the login is in it now; else it will be
    once signing in succeeded, the form said before anything is sent to the server)."""
    where = f"The login is kept in {path}" if kept else f"Once you are signed in, the login will be kept in {path}"
    return (f"{where}, a file only your user can read (in plain text: anyone with "
            "access to your account's files can read it). `ohsync doctor` reminds you while it is in use; "
            "once a keyring works here, `ohsync logout`, then `ohsync login --keyring system`, moves it there.")


def token_store_name() -> str:
    """Where the token is kept, for a sentence: ``the credentials file <path>`` or ``the keyring``."""
    from .credentials import file_store

    path = file_store()
    return f"the credentials file {path}" if path is not None else "the keyring"


def settle_token_store(cfg: Any, config_file: Path, choice: str | None,
                       confirm: Callable[[str], bool] | None,
                       pending: dict[str, Any] | None = None) -> str | None:
    """Make sure the token can be stored before anything is asked or sent to the server.

    :param cfg: the :class:`~ohsync.daemon.config.Config` read from ``config_file``.
    :param config_file: where ``keyring = "file"``/``"system"`` is written when it changes.
    :param pending: when given, that change is put here instead of written, for the caller to
        write once signing in succeeded (a failed setup or login leaves the config as it was).
    :param choice: ``--keyring``: ``"system"``, ``"file"``, or None (the config's choice, else
        the OS keyring, else ask).
    :param confirm: asks the person a yes/no question (True: yes); None when there is no one to
        ask (standard input is not a terminal, or it carries the password or token).
    :returns: a sentence to show when the file store is in use, else None.
    :raises KeyringUnavailable: the OS keyring cannot be used and the file store was not chosen
        (the message says how to choose it).
    """
    def change(keys: dict[str, Any]) -> None:
        if pending is not None:
            pending.update(keys)
        else:
            update_config(config_file, keys)

    wanted = choice or cfg.keyring
    if wanted == "file":
        return _use_file(cfg, change, kept=pending is None)
    use_file_store(None)
    problem = system_keyring_problem()
    if problem is None:
        if choice == "system" and cfg.keyring != "system":
            change({"keyring": "system"})  # only once it works: a failed switch keeps the file
        return None
    if cfg.keyring == "file":
        use_file_store(cfg.credentials_file)  # the switch failed: the login in the file stays usable
    explained = (f"No usable keyring to store the ohsync login ({problem}): this machine has no Secret "
                 "Service (usual on a headless machine, over SSH or in a container).")
    if choice == "system" or confirm is None:
        raise KeyringUnavailable(f"{explained} Install and unlock one (for example GNOME Keyring or KeePassXC), "
                                 "or keep the token in a file only your user can read with `--keyring file`.")
    if confirm(f"{explained}\nKeep the token in {cfg.credentials_file}, a file only you can read, instead?"):
        return _use_file(cfg, change, kept=pending is None)
    raise KeyringUnavailable(f"{explained} Nothing was stored. Install and unlock a keyring, or run this "
                             "again and choose the file store (or pass `--keyring file`).")


def _use_file(cfg: Any, change: Callable[[dict[str, Any]], None], *, kept: bool) -> str:
    if cfg.keyring != "file":
        change({"keyring": "file"})
    use_file_store(cfg.credentials_file)
    return file_store_note(cfg.credentials_file, kept=kept)
