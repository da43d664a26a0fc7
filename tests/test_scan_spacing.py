"""Periodic full scans are spaced by their cost (daemon/scheduler.py)."""
from ohsync.daemon.scheduler import MAX_SCAN_INTERVAL, full_scan_every


def test_a_cheap_scan_keeps_the_configured_interval() -> None:
    assert full_scan_every(100.0, 0.01) == 100.0


def test_an_expensive_scan_takes_at_most_a_thousandth_of_the_time() -> None:
    every = full_scan_every(100.0, 2.0)  # a 30,000-file mirror
    assert every == 2000.0
    assert 2.0 / every <= 0.001


def test_a_missed_watcher_event_waits_at_most_the_cap() -> None:
    assert full_scan_every(100.0, 60.0) == MAX_SCAN_INTERVAL
