"""A plaintext keyring backend in one JSON file, for the demo and tests only.

Select it with keyring's own switch::

    PYTHON_KEYRING_BACKEND=ohsync.daemon.file_keyring.FileKeyring
    OHSYNC_KEYRING_FILE=/some/private/dir/keyring.json

**The token is stored in plain text** (the file is created ``0600``).  That is
fine for ``ohsync demo`` and pytest, which use throwaway servers; a person's
real login belongs in the OS keyring (Secret Service, macOS Keychain).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from filelock import FileLock
from jaraco.classes import properties
from keyring.backend import KeyringBackend
from keyring.errors import PasswordDeleteError

from ohsync.daemon.atomic_file import replace_file

__all__ = ["ENV_VAR", "FileKeyring"]

ENV_VAR = "OHSYNC_KEYRING_FILE"


def _file() -> Path:
    value = os.environ.get(ENV_VAR)
    if not value:
        raise RuntimeError(f"the file keyring needs {ENV_VAR} set to the JSON file it should use")
    return Path(value).expanduser()


class FileKeyring(KeyringBackend):
    """Passwords in ``$OHSYNC_KEYRING_FILE`` as ``{service: {username: password}}`` (plaintext)."""

    @properties.classproperty
    def priority(cls) -> float:  # type: ignore[override]
        """Viable only when ``OHSYNC_KEYRING_FILE`` is set; never preferred over a real keyring."""
        _file()
        return 0.1

    def _load(self, path: Path) -> dict[str, dict[str, str]]:
        try:
            data: Any = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        return data if isinstance(data, dict) else {}

    def _store(self, path: Path, data: dict[str, dict[str, str]]) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(data, indent=1, sort_keys=True)
        replace_file(path, text.encode("utf-8"), mode=0o600, prefix=".keyring-")

    def _lock(self, path: Path) -> FileLock:
        path.parent.mkdir(parents=True, exist_ok=True)
        return FileLock(str(path) + ".lock", timeout=10)

    def get_password(self, service: str, username: str) -> str | None:
        path = _file()
        with self._lock(path):
            return self._load(path).get(service, {}).get(username)

    def set_password(self, service: str, username: str, password: str) -> None:
        path = _file()
        with self._lock(path):
            data = self._load(path)
            data.setdefault(service, {})[username] = password
            self._store(path, data)

    def delete_password(self, service: str, username: str) -> None:
        path = _file()
        with self._lock(path):
            data = self._load(path)
            if username not in data.get(service, {}):
                raise PasswordDeleteError("No such password!")
            del data[service][username]
            if not data[service]:
                del data[service]
            self._store(path, data)
