"""A plaintext keyring backend in one JSON file: the file store.

Two uses:

* a machine without a usable OS keyring (headless, SSH, a container): the
  config's ``keyring = "file"`` (chosen by ``ohsync setup``/``login`` with
  ``--keyring file``) makes :mod:`ohsync.daemon.credentials` keep the token in
  ``state_dir/credentials.json`` through this class, and ``ohsync doctor``
  warns while it is in use;
* the demo and tests, with keyring's own switch::

    PYTHON_KEYRING_BACKEND=ohsync.daemon.file_keyring.FileKeyring
    OHSYNC_KEYRING_FILE=/some/private/dir/keyring.json

**The token is stored in plain text**, readable only by the user (the file is
created ``0600`` in a folder created ``0700``); anyone who can read the user's
files can read it, which is why the OS keyring is preferred where one works.
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

from .atomic_file import replace_file

__all__ = ["ENV_VAR", "FileKeyring"]

ENV_VAR = "OHSYNC_KEYRING_FILE"


def _file(path: Path | None = None) -> Path:
    if path is not None:
        return path
    value = os.environ.get(ENV_VAR)
    if not value:
        raise RuntimeError(f"the file keyring needs {ENV_VAR} set to the JSON file it should use")
    return Path(value).expanduser()


class FileKeyring(KeyringBackend):
    """Passwords in one JSON file as ``{service: {username: password}}`` (plaintext, ``0600``).

    :param path: the file; ``None``: ``$OHSYNC_KEYRING_FILE`` (keyring's own
        loader constructs the class without arguments).
    """

    def __init__(self, path: Path | None = None) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # keyring leaves KeyringBackend.__init__ unannotated
        self.path = path

    @properties.classproperty
    def priority(cls) -> float:
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
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not data:  # the last login removed: leave no file (and no empty section) behind
            path.unlink(missing_ok=True)
            return
        text = json.dumps(data, indent=1, sort_keys=True)
        replace_file(path, text.encode("utf-8"), mode=0o600, prefix=".keyring-")

    def _lock(self, path: Path) -> FileLock:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return FileLock(str(path) + ".lock", timeout=10)

    def get_password(self, service: str, username: str) -> str | None:
        path = _file(self.path)
        with self._lock(path):
            return self._load(path).get(service, {}).get(username)

    def set_password(self, service: str, username: str, password: str) -> None:
        path = _file(self.path)
        with self._lock(path):
            data = self._load(path)
            data.setdefault(service, {})[username] = password
            self._store(path, data)

    def delete_password(self, service: str, username: str) -> None:
        path = _file(self.path)
        with self._lock(path):
            data = self._load(path)
            if username not in data.get(service, {}):
                raise PasswordDeleteError("No such password!")
            del data[service][username]
            if not data[service]:
                del data[service]
            self._store(path, data)
