"""``python -m ohsync.devserver``: run a Seafile-compatible test server.

    python -m ohsync.devserver --host 127.0.0.1 --port 8000 --data DIR \\
        --user user@example.edu.cn:secret [--user ...] [--library NAME=LOCAL_TREE ...] \\
        [--seahub-version 12] [--ignore-head] [--notifications up]

``--library`` seeds a library (owned by the first user) from a local folder
in one commit, unless a library of that name already exists in ``--data``.
Prints one line ``devserver ready at http://HOST:PORT`` when listening.
"""
from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import tempfile
from pathlib import Path

from .server import DevServer


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line arguments."""
    ap = argparse.ArgumentParser(prog="python -m ohsync.devserver", description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="0 = pick a free port")
    ap.add_argument("--data", type=Path, default=None, help="state directory (default: a temp dir)")
    ap.add_argument("--user", action="append", default=[], metavar="EMAIL:PASSWORD",
                    help="an account that signs in with this password (repeatable; default "
                         "user@example.edu.cn:secret)")
    ap.add_argument("--library", action="append", default=[], metavar="NAME=LOCAL_TREE",
                    help="a library NAME holding a copy of the folder LOCAL_TREE, owned by the first --user "
                         "(repeatable; kept as it is when --data already has it)")
    ap.add_argument("--notifications", choices=("absent", "up", "down"), default="absent",
                    help="emulate Seafile's notification server (push); default: none")
    ap.add_argument("--seahub-version", type=int, choices=(12, 13), default=13,
                    help="12: file renames answer with seahub 12's Location path (no slash before the name)")
    ap.add_argument("--ignore-head", action="store_true",
                    help="the update link ignores `head` (no SFConflict files), like a server without that merge")
    ap.add_argument("--zip-names-unflagged", action="store_true",
                    help="zip member names without the UTF-8 flag, like the C file server on a host "
                         "without the en_US.UTF-8 locale")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    args = parse_args(argv)
    users: dict[str, str] = {}
    for spec in args.user:
        email, sep, pw = spec.partition(":")
        if not sep or not email:
            print(f"--user needs EMAIL:PASSWORD, got {spec!r}", file=sys.stderr)
            return 2
        users[email] = pw
    if not users:
        users = {"user@example.edu.cn": "secret"}
    data = args.data or Path(tempfile.mkdtemp(prefix="ohsync-devserver-"))
    srv = DevServer(data, users=users, host=args.host, port=args.port, notifications=args.notifications)
    srv.seahub_version = args.seahub_version
    srv.honour_head = not args.ignore_head
    srv.zip_utf8_flag = not args.zip_names_unflagged
    owner = next(iter(users))
    for spec in args.library:
        name, sep, tree = spec.partition("=")
        if not sep or not Path(tree).is_dir():
            print(f"--library needs NAME=EXISTING_FOLDER, got {spec!r}", file=sys.stderr)
            return 2
        if srv.library_id(name) is None:
            srv.create_library(owner, name, from_tree=Path(tree))
    srv.bind()
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    print(f"devserver ready at {srv.url}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        srv.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
