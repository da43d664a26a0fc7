"""Fixtures for tests that speak HTTP to devserver directly.

Import them into a test module (``from devserver_fixtures import c, rid``):

* ``c`` — an ``httpx.Client`` on the ``devserver`` fixture, authorised with
  the test user's token;
* ``rid`` — the id of a fresh library ``lib`` owned by the test user.
"""
from __future__ import annotations

import httpx
import pytest

USER = "user@example.edu.cn"


@pytest.fixture
def c(devserver, devserver_token):
    """An authorised HTTP client on devserver (60 s timeout)."""
    with httpx.Client(base_url=devserver.url, headers={"Authorization": f"Token {devserver_token}"},
                      timeout=60) as client:
        yield client


@pytest.fixture
def rid(devserver):
    """A fresh empty library of the test user."""
    return devserver.create_library(USER, "lib")
