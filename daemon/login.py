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

from ..engine.client import SeafileClient
from ..engine.errors import AuthError, NetworkError, OhsyncError, ProtocolError, TwoFactorRequired
from ..engine.models import AccountInfo

__all__ = ["TOKEN_REJECTED", "token_from_password", "check_token", "token_owner_note", "without_scheme"]

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


def without_scheme(entered: str, server: str, exc: OhsyncError) -> OhsyncError:
    """Say that the address had no scheme when the ``https://`` guess failed.

    ``normalize_server_url`` turns ``cloud.example.edu`` into
    ``https://cloud.example.edu``; when that address cannot be reached or
    does not answer as Seafile, the person should learn that ohsync guessed
    the scheme, not only that the guess failed.

    :param entered: the address as typed (``--server``, the setup prompt).
    :param server: the normalized address that was tried.
    :param exc: the failure of the attempt.
    :returns: an error whose message names the missing scheme, or ``exc``
        itself when the address had a scheme or the failure is of another kind.
    """
    if "://" in entered or not isinstance(exc, (NetworkError, ProtocolError)):
        return exc
    host = server.split("://", 1)[-1]
    return OhsyncError(
        f"The address '{entered.strip()}' has no scheme (https:// or http://), so ohsync tried {server}, "
        f"which failed: {exc.message} Write the address with its scheme: https://{host}, or http://{host} "
        "for a plain-HTTP server on this computer.", title="No scheme in the server address")
