"""A download hashed on a pool while it arrives (``ohsync.engine.client.hash_feed``)."""
from __future__ import annotations

import hashlib
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from ohsync.engine.client.hash_feed import PIECE, HashFeed
from ohsync.engine.ids import ContentHasher, seafile_file_id


def _pieces(data: bytes, size: int = 65536) -> list[bytes]:
    return [data[i:i + size] for i in range(0, len(data), size)]


def test_feed_on_a_pool_gives_the_same_hashes_as_hashing_inline():
    data = os.urandom(2 * PIECE + 12345) + os.urandom(9 * 1024 * 1024)  # crosses 8 MiB blocks
    with ThreadPoolExecutor(2) as pool:
        feed = HashFeed(ContentHasher(), pool)
        for chunk in _pieces(data):
            feed.add(chunk)
        hasher = feed.finish()
    assert hasher.sha1() == hashlib.sha1(data).hexdigest()
    assert hasher.file_id() == seafile_file_id(data)
    assert hasher.size == len(data)


def test_a_busy_pool_never_blocks_the_feed():
    """Every worker busy (here: waiting for the feed itself): the pieces are hashed on the caller's thread."""
    release = threading.Event()
    data = os.urandom(3 * PIECE + 7)
    with ThreadPoolExecutor(1) as pool:
        blocker = pool.submit(release.wait, 30)
        feed = HashFeed(ContentHasher(), pool)
        for chunk in _pieces(data):
            feed.add(chunk)
        hasher = feed.finish()
        assert not blocker.done()  # everything above ran while the only worker was taken
        release.set()
    assert hasher.sha1() == hashlib.sha1(data).hexdigest()
    assert hasher.file_id() == seafile_file_id(data)


def test_reset_forgets_what_was_fed_and_keeps_small_content():
    with ThreadPoolExecutor(2) as pool:
        feed = HashFeed(ContentHasher(keep=1024), pool)
        feed.add(os.urandom(PIECE + 1))
        feed.reset()
        feed.add(b"hello\n")
        hasher = feed.finish()
    assert hasher.kept() == b"hello\n"
    assert hasher.sha1() == hashlib.sha1(b"hello\n").hexdigest()
    assert hasher.file_id() == "4226e5b3d7da1a4575241f9501f9882aee9b5ea9"


class _CountingPool(ThreadPoolExecutor):
    """A pool that counts the jobs handed to it."""

    def __init__(self) -> None:
        super().__init__(2)
        self.jobs = 0

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        self.jobs += 1
        return super().submit(fn, *args, **kwargs)


def test_a_hasher_without_blocks_hashes_each_piece_once():
    """A download's hasher (``blocks=False``) costs one sha1 pass: one job per piece, no block ids."""
    data = os.urandom(3 * PIECE)
    with _CountingPool() as pool:
        feed = HashFeed(ContentHasher(blocks=False), pool)
        for chunk in _pieces(data):
            feed.add(chunk)
        hasher = feed.finish()
    assert pool.jobs == 3
    assert hasher.sha1() == hashlib.sha1(data).hexdigest() and hasher.size == len(data)
    with pytest.raises(ValueError):
        hasher.file_id()
