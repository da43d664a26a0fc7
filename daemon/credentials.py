"""The login token in the OS keyring, and nowhere else.

Service ``ohsync``, user ``"<server-url> <username>"`` (docs/architecture.md §3).  The
backend is the file store when the config says ``keyring = "file"``
(:func:`use_file_store`, called by :func:`ohsync.daemon.config.load_config`),
else ``PYTHON_KEYRING_BACKEND`` when set (re-read on every call, so tests can
point it at :mod:`ohsync.daemon.file_keyring`), else keyring's own choice.  Every
keyring failure becomes a :class:`KeyringUnavailable` whose message says what
is wrong and what to install or unlock.  The token is never logged and never
part of an error message.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import keyring
import keyring.errors
from keyring.backend import KeyringBackend

from ..engine.errors import OhsyncError

__all__ = ["SERVICE", "KeyringUnavailable", "account_key", "load_token", "save_token",
           "delete_token", "describe_backend", "use_file_store", "file_store", "system_keyring_problem"]

SERVICE = "ohsync"

T = TypeVar("T")

_HOW_TO_FIX = (
    "Install and unlock a Secret Service keyring (for example `sudo apt install gnome-keyring` "
    "and log in to a desktop session, or KeePassXC with Secret Service enabled), or keep the token "
    "in a file only your user can read: `ohsync setup --keyring file` or `ohsync login --keyring file` "
    "(on a headless machine, over SSH or in a container)."
)

#: The file store this process uses instead of the OS keyring (None: the OS keyring).
_file_store: Path | None = None


def use_file_store(path: Path | None) -> None:
    """Keep tokens in the plaintext file ``path`` (``0600``) instead of the OS keyring
    (and instead of ``PYTHON_KEYRING_BACKEND``); ``None``: the OS keyring again."""
    global _file_store
    _file_store = path


def file_store() -> Path | None:
    """The file store in use (:func:`use_file_store`), or None for the OS keyring."""
    return _file_store


class KeyringUnavailable(OhsyncError):
    """No usable keyring backend, or the keyring is locked or broken."""

    title = "Keyring unavailable"


def account_key(server: str, username: str) -> str:
    """The keyring user name of one login: ``"<server-url> <username>"``."""
    return f"{server.rstrip('/')} {username}"


def _secret_service_cause() -> str:
    """Why the Secret Service backend is not viable (its ``priority`` says)."""
    try:
        from keyring.backends import SecretService

        SecretService.Keyring.priority  # noqa: B018 - raises the reason
    except Exception as exc:  # noqa: BLE001 - any failure is the reason we want to show
        text = str(exc) or type(exc).__name__
        if isinstance(exc, FileNotFoundError):
            text = "the D-Bus session bus address points to a socket that does not exist"
        return text
    return "no backend was selected"


def _system_backend() -> KeyringBackend:
    name = os.environ.get("PYTHON_KEYRING_BACKEND")
    if name:
        return keyring.core.load_keyring(name)
    return keyring.get_keyring()


def _backend() -> KeyringBackend:
    if _file_store is not None:
        from .file_keyring import FileKeyring

        return FileKeyring(_file_store)
    return _system_backend()


def system_keyring_problem() -> str | None:
    """Why the OS keyring (or the backend ``PYTHON_KEYRING_BACKEND`` names) cannot
    hold the login, or None when it can.  Asks nothing of the file store: this is
    what ``setup``/``login`` check before offering it.  A locked keyring is found
    only when it is used."""
    with _translated():
        kr = _system_backend()
    if type(kr).__module__.startswith("keyring.backends.fail"):
        return _secret_service_cause()
    return None


@contextmanager
def _translated() -> Iterator[None]:
    """Turn keyring's errors into one :class:`KeyringUnavailable` with a useful sentence."""
    try:
        yield
    except keyring.errors.NoKeyringError as exc:
        raise KeyringUnavailable(
            f"No usable keyring to store the ohsync login ({_secret_service_cause()}). {_HOW_TO_FIX}"
        ) from exc
    except keyring.errors.KeyringLocked as exc:
        raise KeyringUnavailable(
            "The keyring is locked. Unlock it in your desktop session (it usually unlocks at login), "
            "then try again."
        ) from exc
    except keyring.errors.InitError as exc:
        raise KeyringUnavailable(
            f"The keyring could not be opened ({exc}). Unlock or create the default keyring in your "
            f"desktop session. {_HOW_TO_FIX}"
        ) from exc
    except keyring.errors.KeyringError as exc:
        raise KeyringUnavailable(f"The keyring failed ({type(exc).__name__}: {exc}). {_HOW_TO_FIX}") from exc
    except (RuntimeError, ImportError, ValueError) as exc:
        # a backend named in PYTHON_KEYRING_BACKEND that cannot load or is not viable
        raise KeyringUnavailable(f"The keyring backend cannot be used ({exc}). {_HOW_TO_FIX}") from exc


def _call(fn: Callable[[KeyringBackend], T]) -> T:
    with _translated():
        return fn(_backend())


#: Backends that keep the token in a readable file (fine for tests, weak for a person's login).
_PLAINTEXT_BACKENDS = ("ohsync.daemon.file_keyring.FileKeyring", "keyrings.alt.file.PlaintextKeyring")


def describe_backend() -> tuple[str, bool]:
    """Which keyring backend is in use: ``(module.Class, keeps secrets in a plain file)``.

    :raises KeyringUnavailable: no usable backend.
    """
    def describe(kr: KeyringBackend) -> tuple[str, bool]:
        if type(kr).__module__.startswith("keyring.backends.fail"):
            raise keyring.errors.NoKeyringError("no recommended backend")
        chained = getattr(kr, "backends", None)  # ChainerBackend: the first one takes writes
        if chained:
            kr = chained[0]
        name = f"{type(kr).__module__}.{type(kr).__name__}"
        return name, name in _PLAINTEXT_BACKENDS

    return _call(describe)


def load_token(server: str, username: str) -> str | None:
    """The saved token of this login, or None when there is none.

    :raises KeyringUnavailable: no usable backend, locked, broken.
    """
    return _call(lambda kr: kr.get_password(SERVICE, account_key(server, username)))


def save_token(server: str, username: str, token: str) -> None:
    """Store (or replace) the token of this login.

    :raises KeyringUnavailable: no usable backend, locked, broken.
    """
    _call(lambda kr: kr.set_password(SERVICE, account_key(server, username), token))


def delete_token(server: str, username: str) -> bool:
    """Remove the token of this login.

    :returns: False when there was none.
    :raises KeyringUnavailable: no usable backend, locked, broken.
    """
    def delete(kr: KeyringBackend) -> bool:
        try:
            kr.delete_password(SERVICE, account_key(server, username))
        except keyring.errors.PasswordDeleteError:
            return False
        return True

    return _call(delete)
