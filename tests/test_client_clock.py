"""The client notes how far the server's clock is from ours (Date header)."""

from __future__ import annotations

import email.utils
import time

import httpx

from ohsync.engine.client import SeafileClient


def test_clock_offset_comes_from_the_date_header():
    server_now = time.time() + 7200

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json="pong", headers={"Date": email.utils.formatdate(server_now, usegmt=True)})

    client = SeafileClient("https://seafile.example.edu", "t" * 40, transport=httpx.MockTransport(handler))
    assert client.clock_offset is None
    client.ping()
    assert 7195 < client.clock_offset < 7205
