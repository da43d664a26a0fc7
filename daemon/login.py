"""Signing in: a password (and a two-factor code) or a pasted token, turned into a checked API token.

Shared by ``ohsync login`` and ``ohsync setup``, which differ only in where
the answers come from.  Password login is ``POST /api2/auth-token/``
(:meth:`SeafileClient.obtain_token`), repeated with ``X-SEAFILE-OTP`` when
the server asks for a two-factor code; a pasted token is checked with
``GET /api2/account/info/``.  Nothing here stores anything: the caller
saves the token (:mod:`ohsync.daemon.credentials`) once it has what it needs.
"""

from __future__ import annotations

from collections.abc import Callable

from ohsync.engine.client import SeafileClient
from ohsync.engine.errors import AuthError, TwoFactorRequired
from ohsync.engine.models import AccountInfo

__all__ = ["TOKEN_REJECTED", "token_from_password", "check_token", "token_owner_note"]

#: The sentence for a pasted token the server refuses.
TOKEN_REJECTED = ("The server did not accept this token. Copy it again from the web interface "
                  "(Settings → Web API Auth Token).")


def token_from_password(server: str, username: str, password: str, ask_code: Callable[[], str]) -> str:
    """Sign in with a password; ask for a two-factor code only when the server wants one.

    :param server: normalized server URL (``https://host``).
    :param ask_code: returns the current two-factor code; called at most once,
        after the server answered that the account needs one. It may raise
        (for example :class:`TwoFactorRequired` when no code can be had).
    :returns: the API token.
    :raises AuthError: wrong username or password, disabled account.
    :raises TwoFactorRequired: the code was refused.
    :raises RemoteError: network, TLS, throttling, server failure.
    """
    try:
        return SeafileClient.obtain_token(server, username, password)
    except TwoFactorRequired:
        code = ask_code()
        return SeafileClient.obtain_token(server, username, password, otp=code)


def check_token(server: str, token: str) -> AccountInfo:
    """The account a token belongs to (``GET /api2/account/info/``).

    :raises AuthError: the server refuses the token (message: :data:`TOKEN_REJECTED`).
    :raises RemoteError: network, TLS, server failure.
    """
    client = SeafileClient(server, token)
    try:
        return client.account_info()
    except AuthError as exc:
        raise AuthError(TOKEN_REJECTED, status=exc.status) from exc
    finally:
        client.close()


def token_owner_note(username: str, account: AccountInfo) -> str | None:
    """A sentence when the token belongs to another address than ``username``, else None."""
    if username.lower() in {account.email.lower(), account.contact_email.lower()}:
        return None
    return (f"Note: this token belongs to {account.contact_email or account.email}; it is saved "
            f"for {username} as you asked.")
