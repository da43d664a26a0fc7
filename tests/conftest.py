"""Shared pytest fixtures of ohsync.

devserver fixtures (owned by the devserver work; add other fixtures below):

* ``devserver`` — a started ``ohsync.devserver.DevServer`` on 127.0.0.1 with a
  free port and its data in ``tmp_path / "devserver"``; one account
  ``user@example.edu.cn`` / ``secret`` (``DEVSERVER_USER``,
  ``DEVSERVER_PASSWORD``).  Function-scoped; stopped afterwards.
* ``devserver_token`` — that user's API token (40 hex) on that server.
"""
from __future__ import annotations

import pytest

DEVSERVER_USER = "user@example.edu.cn"
DEVSERVER_PASSWORD = "secret"


@pytest.fixture
def devserver(tmp_path):
    """A started DevServer (``.url`` is ``http://127.0.0.1:PORT``)."""
    from ohsync.devserver import DevServer

    srv = DevServer(tmp_path / "devserver", users={DEVSERVER_USER: DEVSERVER_PASSWORD})
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def devserver_token(devserver) -> str:
    """The API token of ``DEVSERVER_USER`` on the ``devserver`` fixture."""
    return devserver.token_for(DEVSERVER_USER)
