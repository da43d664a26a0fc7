"""``ohsync log [-f] [-n N]``: print the daemon's log file and follow it.

The file is the one :mod:`ohsync.daemon.logs` writes (``state_dir/logs/
ohsync.log`` unless the config sets ``log_dir``).  Following survives the
rotation (the file is renamed to ``ohsync.log.1`` and a new one begins) and
waits for a file that does not exist yet.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

from ...engine.errors import OhsyncError
from .common import Subparsers, add_command

__all__ = ["register", "last_lines", "follow"]


def last_lines(path: Path, count: int) -> list[bytes]:
    """The last ``count`` lines of ``path`` (bytes, each with its newline).

    :raises OSError: the file cannot be read.
    """
    if count <= 0:
        return []
    with open(path, "rb") as f:
        return list(collections.deque(f, maxlen=count))


def follow(path: Path, *, start_at_end: bool, interval: float = 0.5,
           should_stop: Callable[[], bool] = lambda: False) -> Iterator[bytes]:
    """Yield what is appended to ``path`` (``tail -F``): whole chunks as written.

    :param start_at_end: skip what the file holds now (it was printed already).
    :param interval: seconds between checks.
    :param should_stop: checked between checks; True ends the generator.
    """
    handle: BinaryIO | None = None
    inode = None
    try:
        while not should_stop():
            if handle is None:
                try:
                    handle = open(path, "rb")  # noqa: SIM115 - followed across loops, closed below
                except FileNotFoundError:
                    time.sleep(interval)
                    continue
                inode = os.fstat(handle.fileno()).st_ino
                if start_at_end:
                    handle.seek(0, os.SEEK_END)
                start_at_end = False  # a file that appears later is read from its start
            chunk = handle.read()
            if chunk:
                yield chunk
                continue
            try:
                now = os.stat(path)
            except FileNotFoundError:
                now = None
            if now is None or now.st_ino != inode or now.st_size < handle.tell():
                rest = handle.read()  # rotated or truncated: what the old file got last, then the new one
                handle.close()
                handle = None
                if rest:
                    yield rest
                continue
            time.sleep(interval)
    finally:
        if handle is not None:
            handle.close()


def cmd_log(args: argparse.Namespace) -> int:
    from ..config import config_path, load_config
    from ..logs import LOG_NAME

    path = load_config(config_path(args.config)).log_dir / LOG_NAME
    out = sys.stdout.buffer
    exists = path.exists()
    if not exists and not args.follow:
        raise OhsyncError(f"There is no log at {path} yet: the daemon writes it once `ohsync run` (or the "
                          "autostarted daemon) has started.", title="No log")
    if exists:
        try:
            out.writelines(last_lines(path, args.lines))
        except OSError as exc:
            raise OhsyncError(f"Cannot read {path}: {exc.strerror or exc}.", title="No log") from exc
        out.flush()
    else:
        print(f"(waiting for {path} to appear)", file=sys.stderr)
    if args.follow:
        for chunk in follow(path, start_at_end=exists):
            out.write(chunk)
            out.flush()
    return 0


def _line_count(text: str) -> int:
    """``-n``'s value: a whole number of lines, 0 or more (argparse turns the ValueError into a usage error)."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number of lines") from None
    if count < 0:
        raise argparse.ArgumentTypeError(f"{count} lines: give 0 or more")
    return count


def register(subparsers: Subparsers) -> None:
    """Add ``log``."""
    sp = add_command(subparsers, "log", cmd_log, "print the daemon's log (state_dir/logs/ohsync.log); -f follows it")
    sp.add_argument("-f", "--follow", action="store_true", help="keep printing what is appended (Ctrl-C stops)")
    sp.add_argument("-n", "--lines", type=_line_count, default=50, metavar="N",
                    help="how many lines to print first (0 or more)")
