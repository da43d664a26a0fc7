"""The ``ohsync`` command: argument parsing and exit codes, nothing else.

Every command is a thin function: daemon commands are clients of the socket
(:class:`~ohsync.daemon.protocol.RpcClient`), ``login``/``logout`` talk to the
server and the keyring, ``run`` and ``demo`` start the daemon.  Heavy imports
happen inside the commands.  Exit codes (docs/architecture.md §10): 0 ok, 1 failed (the
message says why and what to do), 2 usage error, 3 daemon not running.
Expected errors print ``title: message``, never a traceback.
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from ohsync.daemon import cli_autostart, cli_log
from ohsync.daemon.about import version
from ohsync.daemon.attention import natural_key
from ohsync.daemon.cli_resync import add_resync
from ohsync.daemon.cli_status import cmd_status, shown as _shown
from ohsync.daemon.protocol import MIRROR_PARAM, DaemonNotRunning, Method, RpcClient, RpcError
from ohsync.engine.errors import OhsyncError, classify, local_error

__all__ = ["main", "build_parser", "EXIT_OK", "EXIT_FAILED", "EXIT_USAGE", "EXIT_NOT_RUNNING"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_RUNNING = 0, 1, 2, 3


# ohsync is installed from its source folder (it is on no package index), so name commands that work there
TRAY_EXTRA_HINT = ("Install the [tray] extra from the ohsync source folder: `pipx install --force '.[tray]'` "
                   "(or `pip install --user '.[tray]'`); it needs PyGObject's system packages, see the README.")


class UsageError(Exception):
    """A usage mistake found after parsing (exit 2)."""


def _err(text: str) -> None:
    print(f"ohsync: {text}", file=sys.stderr)


def _config(args: argparse.Namespace) -> Any:
    from ohsync.daemon.config import config_path, load_config

    cfg = load_config(config_path(args.config))
    return cfg


class _MirrorClient(RpcClient):
    """An :class:`RpcClient` that adds ``--mirror NAME`` to every request's params."""

    def __init__(self, path: Any, timeout: float | None, mirror: str | None) -> None:
        super().__init__(path, timeout=timeout)
        self.mirror = mirror

    def call(self, method: str, params: dict[str, Any] | None = None, *, timeout: float | None = None) -> Any:
        if self.mirror:
            params = {**(params or {}), MIRROR_PARAM: self.mirror}
        return super().call(method, params, timeout=timeout)


def _client(args: argparse.Namespace, timeout: float | None = 10.0) -> RpcClient:
    return _MirrorClient(_config(args).socket, timeout, getattr(args, "mirror", None))


#: Commands that act on one mirror take ``--mirror NAME`` (daemon/daemon_methods.py says what
#: each does without it when there are several).
MIRROR_COMMANDS = ("login", "status", "refresh", "pause", "resume", "wait", "conflicts", "damaged", "activity",
                   "confirm-deletes", "resync", "mcp")


# --------------------------------------------------------------------------- login / logout


def _read_secret_line(what: str) -> str:
    line = sys.stdin.readline()
    value = line.rstrip("\r\n")
    if not value:
        raise OhsyncError(f"No {what} on standard input.", title="Login failed")
    return value


def cmd_login(args: argparse.Namespace) -> int:
    from ohsync.daemon.config import config_path, normalize_server_url, update_config
    from ohsync.daemon.credentials import load_token, save_token
    from ohsync.daemon.login import check_token, token_from_password, token_owner_note, without_scheme
    from ohsync.engine.errors import TwoFactorRequired

    path = config_path(args.config)
    cfg = _config(args)
    mirror = _config_mirror(cfg, args.mirror) if getattr(args, "mirror", None) else None
    own_account = mirror is not None and bool(mirror.server or mirror.username)
    default_server, default_username = cfg.account(mirror)
    server = normalize_server_url(args.server or default_server)
    username = (args.username or default_username).strip()
    if not server or not username:
        raise UsageError("login needs --server URL and --username EMAIL (or both set in the config)")
    if args.password_stdin and args.token_stdin:
        raise UsageError("give only one of --password-stdin and --token-stdin")
    load_token(server, username)  # fail early, before any prompt, when there is no usable keyring

    entered = args.server or default_server
    if args.token_stdin:
        token = _read_secret_line("token")
        try:
            account = check_token(server, token)
        except OhsyncError as exc:
            explained = without_scheme(entered, server, exc)
            if explained is exc:
                raise
            raise explained from exc
        note = token_owner_note(username, account)
        if note:
            print(note, file=sys.stderr)
    else:
        if args.password_stdin:
            password = _read_secret_line("password")
        else:
            try:
                password = getpass.getpass(f"Password for {username} at {server}: ")
            except EOFError:
                print(file=sys.stderr)
                raise OhsyncError("No password given (the input was closed). Type it at the prompt, or "
                                  "pipe it in with --password-stdin.", title="Login failed") from None
            if not password:
                raise OhsyncError("No password given.", title="Login failed")

        def ask_code() -> str:
            if args.password_stdin and not sys.stdin.isatty():
                otp = sys.stdin.readline().strip()  # an optional second line: the code
                if not otp:
                    raise TwoFactorRequired(
                        "This account uses two-factor authentication: give the current code from your "
                        "authenticator app as a second line on standard input, after the password.")
                return otp
            return input("Two-factor code: ").strip()

        try:
            token = token_from_password(server, username, password, ask_code)
        except OhsyncError as exc:
            explained = without_scheme(entered, server, exc)
            if explained is exc:
                raise
            raise explained from exc
        finally:
            password = ""
    save_token(server, username, token)
    if not own_account:  # a mirror's own account stays in its [[mirror]] table
        update_config(path, {"server": server, "username": username})
    print(f"Logged in as {username} at {server}. The token is in the keyring; the config is {path}.")
    _tell_daemon_to_refresh(args)
    return EXIT_OK


def _config_mirror(cfg: Any, selector: str) -> Any:
    """The ``[[mirror]]`` of ``cfg`` that ``selector`` names (its name, library, library id or folder).

    :raises UsageError: none or several do.
    """
    folder = os.path.realpath(os.path.expanduser(selector))
    named = [m for m in cfg.mirrors if selector in (m.label, m.library, m.library_id)
             or os.path.realpath(m.local) == folder]
    if len(named) != 1:
        listed = ", ".join(f"{m.label} ({m.local})" for m in cfg.mirrors)
        raise UsageError(f"{'no' if not named else 'more than one'} [[mirror]] is called {selector!r}; "
                         f"the mirrors are: {listed}")
    return named[0]


def _this_configs_daemon(args: argparse.Namespace) -> bool:
    """True when the daemon answering on this config's socket runs this config file."""
    from ohsync.daemon.config import config_path
    from ohsync.daemon.running import running_daemon

    running = running_daemon(_config(args).socket, config_path(args.config))
    return bool(running and running.same)


def _tell_daemon_to_refresh(args: argparse.Namespace) -> None:
    """A running daemon of this config waiting for a login signs in with the new token now."""
    if not _this_configs_daemon(args):
        return  # no daemon (or another config's): it reads the keyring when it starts
    try:
        _client(args, timeout=5.0).call(Method.REFRESH)
    except (DaemonNotRunning, RpcError, OSError, OhsyncError):
        return
    print("The running ohsync daemon signs in with it now.")


def cmd_logout(args: argparse.Namespace) -> int:
    from ohsync.daemon.config import normalize_server_url
    from ohsync.daemon.credentials import delete_token

    cfg = _config(args)
    server = normalize_server_url(args.server or cfg.server)
    username = (args.username or cfg.username).strip()
    if not server or not username:
        raise UsageError("logout needs --server and --username (or both set in the config)")
    if delete_token(server, username):
        print(f"Logged out: removed the token of {username} at {server} from the keyring.")
        if _this_configs_daemon(args):
            print("The running ohsync daemon keeps the token it holds until it stops (`ohsync stop`).")
    else:
        print(f"No saved login for {username} at {server}.")
    return EXIT_OK


# --------------------------------------------------------------------------- run / tray / demo


def cmd_run(args: argparse.Namespace) -> int:
    from ohsync.daemon.app import Daemon
    from ohsync.daemon.crash_at import install_from_env
    from ohsync.daemon.credentials import load_token
    from ohsync.daemon.logs import setup_logging
    from ohsync.daemon.session import no_login_message

    install_from_env()  # crash tests: die at the engine's named point
    cfg = _config(args)
    # with several mirrors, one without a login stops alone (its status says so); none at all: refuse
    if not any(all(account) and load_token(*account) for account in map(cfg.account, cfg.mirrors)):
        raise OhsyncError(no_login_message(cfg), title="Not logged in")
    # OHSYNC_LOG_STDERR=0: stderr is kept for the last words (the tray's Start item reads them)
    log_file = setup_logging(cfg.log_dir, verbose=args.verbose, stderr=os.environ.get("OHSYNC_LOG_STDERR") != "0")
    if log_file:
        import logging

        logging.getLogger(__name__).info("log file: %s", log_file)
    return Daemon(cfg, tray=not args.no_tray).run()


def cmd_tray(args: argparse.Namespace) -> int:
    cfg = _config(args)
    try:
        from ohsync.tray.app import default_start_command, run_tray
    except ImportError as exc:
        raise OhsyncError(f"The tray is not available ({exc}). {TRAY_EXTRA_HINT}", title="No tray") from exc
    try:
        start = default_start_command(args.config) if args.config else None
        run_tray(cfg.socket, owns_daemon=False, start_command=start)
    except RuntimeError as exc:  # TrayUnavailable: no display, no PyGObject…; its message says what to do
        raise OhsyncError(str(exc), title="No tray") from exc
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from ohsync.daemon.demo import run_demo

    return run_demo(seconds=args.seconds, directory=args.dir, tray=not args.no_tray,
                    poll_interval=args.poll_interval, verbose=args.verbose)


# --------------------------------------------------------------------------- socket clients


#: Most reasons ``ohsync wait`` lists one per line (the summary line names them all by count).
WAIT_LINES = 10


def _simple(method: str, done: str) -> Callable[[argparse.Namespace], int]:
    def command(args: argparse.Namespace) -> int:
        _client(args).call(method)
        print(done)
        return EXIT_OK
    return command


def _pause_resume(method: str, done: str) -> Callable[[argparse.Namespace], int]:
    """``pause`` / ``resume``: the answer names the mirror when ``--mirror`` picked one (the others
    keep their state, so "Syncing paused." alone would say more than happened)."""
    def command(args: argparse.Namespace) -> int:
        _client(args).call(method)
        mirror = getattr(args, "mirror", None)
        if not mirror:
            print(f"Syncing {done}.")
        elif method == Method.PAUSE:
            print(f"Syncing of {mirror} paused (the other mirrors go on); "
                  f"`ohsync resume --mirror {shlex.quote(mirror)}` continues it.")
        else:
            print(f"Syncing of {mirror} resumed.")
        return EXIT_OK
    return command


def cmd_wait(args: argparse.Namespace) -> int:
    result = _client(args, timeout=args.timeout + 30).call(Method.WAIT, {"timeout": args.timeout})
    if result.get("synced"):
        print("Everything is synced.")
        return EXIT_OK
    _err(f"not everything is synced: {result.get('message') or 'see `ohsync status`'}")
    reasons = result.get("reasons") or []
    for item in reasons[:WAIT_LINES]:
        print(f"  {item.get('kind')}: {_shown(item.get('path'))} — {item.get('reason')}", file=sys.stderr)
    if len(reasons) > WAIT_LINES:
        print(f"  … and {len(reasons) - WAIT_LINES} more (`ohsync status --json` lists them all)", file=sys.stderr)
    return EXIT_FAILED


def _print_items(args: argparse.Namespace, items: list[dict[str, Any]], empty: str,
                 show: Callable[[dict[str, Any]], str]) -> int:
    """Print a socket list as JSON (``--json``) or one block per item."""
    if args.json:
        print(json.dumps(items, ensure_ascii=False))
    elif not items:
        print(empty)
    else:
        for item in items:  # with several mirrors, each item names its own
            print(f"[{item['mirror']}] {show(item)}" if item.get("mirror") else show(item))
    return EXIT_OK


def _conflict_text(c: dict[str, Any]) -> str:
    text = f"{c['time']}  {c['path']}\n    other version kept as {c['archived']}\n    {c['reason']}"
    if c.get("fields"):
        text += f"\n    could not merge: {', '.join(c['fields'])}"
    return text + (f"\n    to settle it: copy what you need from {c['archived']} into {c['path']}, then "
                   f"delete {c['archived']}")


def cmd_conflicts(args: argparse.Namespace) -> int:
    return _print_items(args, _client(args).call(Method.CONFLICTS), "No conflicts.", _conflict_text)


def cmd_damaged(args: argparse.Namespace) -> int:
    damaged = sorted(_client(args).call(Method.DAMAGED), key=lambda d: natural_key(str(d.get("path"))))
    return _print_items(args, damaged, "No damaged files.",
                        lambda d: f"{d['path']}: {d['reason']}")


def _activity_text(a: dict[str, Any]) -> str:
    action, notes = a["action"], [a["message"]] if a.get("message") else []
    if a.get("result") == "conflict":  # a conflict's action is where the other version went
        action, notes = "conflict", [f"other version kept as {a['action']}", *notes]
    extra = f"  ({'; '.join(notes)})" if notes else ""
    return f"{a['time']}  {action:<9} {a['result']:<8} {a['path']}{extra}"


def cmd_activity(args: argparse.Namespace) -> int:
    return _print_items(args, _client(args).call(Method.ACTIVITY, {"limit": args.limit}), "No activity yet.",
                        _activity_text)


def cmd_file(args: argparse.Namespace) -> int:
    paths = [os.path.abspath(os.path.expanduser(p)) for p in args.paths]
    for p in paths:
        if not os.path.exists(p):
            raise UsageError(f"no such file: {p}")
        if not os.path.isfile(p):
            raise UsageError(f"{p} is not a file; `ohsync file` takes documents one by one "
                             "(to file a whole folder, move its files into the drop folder)")
    results = _client(args, timeout=args.timeout).call(Method.FILE, {"paths": paths}, timeout=args.timeout)
    ok = True
    for r in results:
        print(r.get("message") or f"{r.get('source')}: {r.get('status')}")
        ok = ok and r.get("status") in ("filed", "duplicate")
    return EXIT_OK if ok else EXIT_FAILED


def cmd_confirm_deletes(args: argparse.Namespace) -> int:
    client = _client(args)
    if args.list:
        held = client.call(Method.HELD_DELETES)
        if not held:
            print("No deletions are held.")
        for item in sorted(held, key=lambda h: natural_key(str(h.get("path")))):
            where = "on the server (into /.trash/)" if item["side"] == "remote" else "in this folder (backed up)"
            mirror = f"[{item['mirror']}] " if item.get("mirror") else ""
            print(f"{mirror}{item['path']}  — would be deleted {where}")
        return EXIT_OK
    result = client.call(Method.CONFIRM_DELETES)
    held = int(result.get("confirmed", 0))
    where = f" in {result['mirror']}" if result.get("mirror") else ""
    print(f"Carrying out {held} held deletion(s){where} now." if held else "No deletions were held.")
    return EXIT_OK


def cmd_stop(args: argparse.Namespace) -> int:
    client = _client(args)
    client.call(Method.SHUTDOWN)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        try:
            client.call(Method.PING, timeout=2)
        except (DaemonNotRunning, ConnectionError, OSError):
            print("ohsync stopped.")
            return EXIT_OK
        except RpcError:
            pass
        time.sleep(0.2)
    _err(f"the daemon is still finishing after {args.timeout:g} s; it will exit when its current "
         "transfer ends")
    return EXIT_FAILED


# --------------------------------------------------------------------------- parser


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ohsync", description="Two-way sync of a Seafile library with a local folder.")
    p.add_argument("--config", metavar="PATH", help="config file (default: $OHSYNC_CONFIG or the user config dir)")
    p.add_argument("--version", action="version", version=f"ohsync {version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add(name: str, fn: Callable[[argparse.Namespace], int], help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.set_defaults(func=fn)
        return sp

    sp = add("login", cmd_login, "sign in and store the token in the keyring")
    sp.add_argument("--server", metavar="URL")
    sp.add_argument("--username", metavar="EMAIL")
    g = sp.add_mutually_exclusive_group()
    g.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    g.add_argument("--token-stdin", action="store_true", help="read an API token from standard input")
    sp = add("logout", cmd_logout, "remove the stored token")
    sp.add_argument("--server", metavar="URL")
    sp.add_argument("--username", metavar="EMAIL")
    sp = add("run", cmd_run, "run the daemon in the foreground")
    sp.add_argument("--no-tray", action="store_true", help="no tray icon, even with a display")
    sp.add_argument("-v", "--verbose", action="store_true", help="also log debug lines (idle polls, timings)")
    add("tray", cmd_tray, "show the tray icon for a running daemon")
    sp = add("status", cmd_status, "show what the daemon is doing")
    sp.add_argument("--json", action="store_true", help="print the status object")
    add("refresh", _simple(Method.REFRESH, "Checking the server and the local folder now."),
        "check the server and the local folder now")
    add("pause", _pause_resume(Method.PAUSE, "paused"), "pause syncing")
    add("resume", _pause_resume(Method.RESUME, "resumed"), "resume syncing")
    sp = add("wait", cmd_wait, "wait until everything on disk now is synced")
    sp.add_argument("--timeout", type=float, default=60.0, metavar="S")
    sp = add("conflicts", cmd_conflicts, "list conflicts and where the other versions are")
    sp.add_argument("--json", action="store_true")
    sp = add("damaged", cmd_damaged, "list memory files that do not parse")
    sp.add_argument("--json", action="store_true")
    sp = add("activity", cmd_activity, "show recent sync activity")
    sp.add_argument("--limit", type=int, default=50)
    sp.add_argument("--json", action="store_true")
    sp = add("file", cmd_file, "file documents into /Files/ (as if dropped into the drop folder)")
    sp.add_argument("paths", nargs="+", metavar="PATH")
    sp.add_argument("--timeout", type=float, default=600.0, metavar="S")
    sp = add("confirm-deletes", cmd_confirm_deletes, "carry out deletions held by the safety valve")
    sp.add_argument("--list", action="store_true", help="only list the held deletions")
    add_resync(sub)
    sp = add("stop", cmd_stop, "stop the daemon")
    sp.add_argument("--timeout", type=float, default=130.0, metavar="S")
    sp = add("demo", cmd_demo, "try ohsync against a local test server with a sample library")
    sp.add_argument("--seconds", type=float, default=None, metavar="N", help="stop after N seconds")
    sp.add_argument("--dir", metavar="DIR", help="put the demo here and keep it (default: a temp dir, removed)")
    sp.add_argument("--poll-interval", type=float, default=2.0, metavar="S")
    sp.add_argument("--no-tray", action="store_true")
    sp.add_argument("-v", "--verbose", action="store_true")
    from ohsync.daemon import cli_doctor, cli_setup
    from ohsync.daemon.cli_memory import register as register_memory

    register_memory(add)
    cli_setup.register(sub)
    cli_doctor.register(sub)
    cli_autostart.register(add)
    cli_log.register(add)
    for name in MIRROR_COMMANDS:
        sub.choices[name].add_argument(
            "--mirror", metavar="NAME", help="the mirror to act on (its name, library or folder), "
                                             "when the config has several [[mirror]]")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """The console script. Returns (and exits with) the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except UsageError as exc:
        parser.print_usage(sys.stderr)
        _err(str(exc))
        code = EXIT_USAGE
    except DaemonNotRunning as exc:
        _err(f"{exc}. Start it with `ohsync run`.")
        code = EXIT_NOT_RUNNING
    except RpcError as exc:
        _err(f"the daemon refused: {exc.message.removeprefix('refused: ')}")
        code = EXIT_FAILED
    except OhsyncError as exc:
        failure = classify(exc)
        _err(f"{failure.title}: {failure.message}")
        code = EXIT_FAILED
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:  # `ohsync status | head -1`: the reader went away, not the daemon
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = EXIT_OK
    except (ConnectionError, TimeoutError) as exc:
        _err(f"lost the connection to the daemon ({exc}); check `ohsync status`")
        code = EXIT_FAILED
    except OSError as exc:  # a local file the command reads or writes (config, log, a path given)
        failure = classify(local_error(exc, exc.filename if isinstance(exc.filename, str) else None))
        _err(f"{failure.title}: {failure.message}")
        code = EXIT_FAILED
    if __name__ == "__main__" or argv is None:
        sys.exit(code)
    return code


if __name__ == "__main__":  # pragma: no cover
    main()
