"""``ohsync login`` and ``ohsync logout``: the server's token in the keyring (or the credentials file).

``login`` gets a token (password, two-factor code or a token on standard
input), saves it in the keyring and the account in the config, and tells a
running daemon of this config to sign in with it; ``logout`` removes it.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ...engine.errors import OhsyncError
from ..protocol import DaemonNotRunning, Method, RpcError
from .common import EXIT_OK, Subparsers, UsageError, add_command, add_mirror_option, daemon_client, read_config
from .setup import add_keyring_option

__all__ = ["register", "cmd_login", "cmd_logout"]


def _yes_or_no(question: str) -> bool:
    """Ask at the terminal; only "y"/"yes" is yes (the input ending is no)."""
    try:
        return input(f"{question} [y/N]: ").strip().lower() in ("y", "yes")
    except EOFError:
        return False


def _read_secret_line(what: str) -> str:
    line = sys.stdin.readline()
    value = line.rstrip("\r\n")
    if not value:
        raise OhsyncError(f"No {what} on standard input.", title="Login failed")
    return value


#: how many times ``ohsync login`` at a terminal asks for the password
_PASSWORD_TRIES = 3


def _typed_password(prompt: str) -> str:
    """The password typed at the terminal (not echoed).

    :raises OhsyncError: the input was closed, or nothing was typed.
    """
    try:
        password = getpass.getpass(prompt)
    except EOFError:
        print(file=sys.stderr)
        raise OhsyncError("No password given (the input was closed). Type it at the prompt, or "
                          "pipe it in with --password-stdin.", title="Login failed") from None
    if not password:
        raise OhsyncError("No password given.", title="Login failed")
    return password


@contextmanager
def _scheme_named(entered: str, server: str) -> Iterator[None]:
    """A failure of signing in at ``server`` says that ``https://`` was guessed
    when the address ``entered`` had no scheme (``login.without_scheme``)."""
    from ..login import without_scheme

    try:
        yield
    except OhsyncError as exc:
        explained = without_scheme(entered, server, exc)
        if explained is exc:
            raise
        raise explained from exc


def cmd_login(args: argparse.Namespace) -> int:
    """``ohsync login``: get a token (password and two-factor code, or ``--token-stdin``), save it in
    the keyring and the account in the config; a running daemon of this config signs in with it.

    :raises UsageError: no server or username, or both stdin options.
    :raises OhsyncError: the server refused (the message says why), or the keyring is unusable."""
    from ...engine.errors import AuthError, TwoFactorRequired
    from ..config import config_path, normalize_server_url, update_config
    from ..credentials import load_token, save_token
    from ..login import check_token, token_from_password, token_owner_note

    path = config_path(args.config)
    cfg = read_config(args)
    mirror = _config_mirror(cfg, args.mirror) if getattr(args, "mirror", None) else None
    own_account = mirror is not None and bool(mirror.server or mirror.username)
    default_server, default_username = cfg.account(mirror)
    server = normalize_server_url(args.server or default_server)
    username = (args.username or default_username).strip()
    if not server or not username:
        raise UsageError("login needs --server URL and --username EMAIL (or both set in the config)")
    if args.password_stdin and args.token_stdin:
        raise UsageError("give only one of --password-stdin and --token-stdin")
    from ..token_store import settle_token_store, token_store_name

    # fail early, before any prompt: no usable keyring is said (and the file store offered) first
    asked = not (args.password_stdin or args.token_stdin) and sys.stdin.isatty()
    pending: dict[str, Any] = {}  # the store's choice is written once the login succeeded
    note = settle_token_store(cfg, path, getattr(args, "keyring", None), _yes_or_no if asked else None, pending)
    if note:
        print(note, file=sys.stderr)
    load_token(server, username)  # a locked or broken keyring says so here

    entered = args.server or default_server
    if args.token_stdin:
        token = _read_secret_line("token")
        with _scheme_named(entered, server):
            account = check_token(server, token)
        note = token_owner_note(username, account)
        if note:
            print(note, file=sys.stderr)
    else:
        if not args.password_stdin and not sys.stdin.isatty():
            # getpass would warn that it cannot hide the typing, then read it
            raise OhsyncError("No terminal to type the password at (standard input is not one). Pipe it "
                              "in with --password-stdin, or an API token with --token-stdin.",
                              title="Login failed")

        def ask_code() -> str:
            if args.password_stdin and not sys.stdin.isatty():
                otp = sys.stdin.readline().strip()  # an optional second line: the code
                if not otp:
                    raise TwoFactorRequired(
                        "This account uses two-factor authentication: give the current code from your "
                        "authenticator app as a second line on standard input, after the password.")
                return otp
            return input("Two-factor code: ").strip()

        tries = 1 if args.password_stdin else _PASSWORD_TRIES
        for attempt in range(1, tries + 1):
            password = (_read_secret_line("password") if args.password_stdin
                        else _typed_password(f"Password for {username} at {server}"
                                             + (" again" if attempt > 1 else "") + ": "))
            try:
                with _scheme_named(entered, server):
                    token = token_from_password(server, username, password, ask_code)
                break
            except (AuthError, TwoFactorRequired) as exc:
                # at a terminal only the password is asked again: server and username are kept
                if attempt == tries:
                    raise
                print(f"{exc.title}: {exc.message}", file=sys.stderr)
            finally:
                password = ""
    save_token(server, username, token)
    if not own_account:  # a mirror's own account stays in its [[mirror]] table
        pending.update({"server": server, "username": username})
    if pending:
        update_config(path, pending)
    print(f"Logged in as {username} at {server}. The token is in {token_store_name()}; the config is {path}.")
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
    from ..config import config_path
    from ..running import running_daemon

    running = running_daemon(read_config(args).socket, config_path(args.config))
    return bool(running and running.same)


def _tell_daemon_to_refresh(args: argparse.Namespace) -> None:
    """A running daemon of this config waiting for a login signs in with the new token now."""
    if not _this_configs_daemon(args):
        return  # no daemon (or another config's): it reads the keyring when it starts
    try:
        daemon_client(args, timeout=5.0).call(Method.REFRESH)
    except (DaemonNotRunning, RpcError, OSError, OhsyncError):
        return
    print("The running ohsync daemon signs in with it now.")


def cmd_logout(args: argparse.Namespace) -> int:
    """``ohsync logout``: remove the saved token of the account from the keyring."""
    from ..config import normalize_server_url
    from ..credentials import delete_token

    cfg = read_config(args)
    server = normalize_server_url(args.server or cfg.server)
    username = (args.username or cfg.username).strip()
    if not server or not username:
        raise UsageError("logout needs --server and --username (or both set in the config)")
    from ..token_store import token_store_name

    if delete_token(server, username):
        print(f"Logged out: removed the token of {username} at {server} from {token_store_name()}.")
        if _this_configs_daemon(args):
            print("The running ohsync daemon keeps the token it holds until it stops (`ohsync stop`).")
    else:
        print(f"No saved login for {username} at {server}.")
    return EXIT_OK


def register(subparsers: Subparsers) -> None:
    """Add ``login`` and ``logout``."""
    sp = add_command(subparsers, "login", cmd_login, "sign in and store the token in the keyring")
    sp.add_argument("--server", metavar="URL", help="the Seafile server's address (default: the config's)")
    sp.add_argument("--username", metavar="EMAIL", help="your Seafile login (default: the config's)")
    g = sp.add_mutually_exclusive_group()
    g.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    g.add_argument("--token-stdin", action="store_true", help="read an API token from standard input")
    add_keyring_option(sp)
    add_mirror_option(sp)
    sp = add_command(subparsers, "logout", cmd_logout, "remove the stored token")
    sp.add_argument("--server", metavar="URL", help="the server of the login to remove (default: the config's)")
    sp.add_argument("--username", metavar="EMAIL", help="the login to remove (default: the config's)")
