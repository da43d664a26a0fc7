"""Why a connection to the server could not be made, in one sentence that names the address.

"Offline" is said only when there is no route at all (no network, no route to
the host); a port that cannot exist (over 65535), a refused port, an unknown
host name, a server that does not answer in time and a TLS failure each say so, with the address tried, so a typo in the
port or host is recognisable at once.
"""

from __future__ import annotations

import errno
import socket
import ssl

import httpx

from ..errors import NetworkError, UnreachableError

__all__ = ["address_of", "connect_error", "timeout_error"]

_CHECK = "Check the server address (`server` in the config, or what you typed)."


def address_of(exc: httpx.HTTPError) -> str:
    """``scheme://host:port`` of the request that failed ("the server" when unknown)."""
    try:
        url = exc.request.url
    except RuntimeError:  # an error raised before a request existed
        return "the server"
    port = url.port or {"https": 443, "http": 80}.get(url.scheme)
    return f"{url.scheme}://{url.host}:{port}" if port else f"{url.scheme}://{url.host}"


def _port_of(exc: httpx.HTTPError) -> int | None:
    """The port written in the failed request's URL (None: none written, or no request)."""
    try:
        return exc.request.url.port
    except RuntimeError:
        return None


def _chain(exc: BaseException) -> list[BaseException]:
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not c for c in found):
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def _errno(chain: list[BaseException]) -> int | None:
    for err in chain:
        if isinstance(err, OSError) and err.errno is not None:
            return err.errno
        for code, name in ((errno.ECONNREFUSED, "connection refused"), (errno.ENETUNREACH, "network is unreachable"),
                           (errno.EHOSTUNREACH, "no route to host")):
            if name in str(err).lower():
                return code
        if "name or service not known" in str(err).lower() or "nodename nor servname" in str(err).lower():
            return socket.EAI_NONAME
        if "temporary failure in name resolution" in str(err).lower():
            return socket.EAI_AGAIN
    return None


def connect_error(exc: httpx.ConnectError, what: str, path: str | None) -> NetworkError:
    """The error for a connection that could not be made.

    :param exc: httpx's error (its cause chain holds the socket or TLS error).
    :param what: the operation ("signing in").
    :param path: the remote path concerned, if any.
    :returns: an :class:`UnreachableError` (mirror-wide) whose title and sentence name the cause:
        refused, unknown host, no route (the only "Offline"), or TLS.
    """
    where = address_of(exc)
    host = where.split("://", 1)[-1].rsplit(":", 1)[0]
    port = _port_of(exc)
    if port is not None and not 1 <= port <= 65535:
        # the OS refuses such a port at once, and says "connection refused": name the typo instead
        return UnreachableError(f"{where} has an invalid port, {port} (while {what}): ports go from 1 to 65535. "
                                f"{_CHECK}", path=path, title="Invalid server address")
    chain = _chain(exc)
    for err in chain:
        if isinstance(err, ssl.SSLCertVerificationError):
            reason = err.verify_message or err.reason or str(err)
            return UnreachableError(f"The TLS certificate of {where} is not valid ({reason}) while {what}. Check "
                                    "the address and this computer's date; a private CA must be installed in the "
                                    "system store (or named with SSL_CERT_FILE).", path=path, title="TLS error")
        if isinstance(err, ssl.SSLError):
            return UnreachableError(f"The TLS handshake with {where} failed ({err.reason or err}) while {what}. "
                                    f"{_CHECK}", path=path, title="TLS error")
    code = _errno(chain)
    if code == errno.ECONNREFUSED:
        return UnreachableError(f"{where} refused the connection while {what}: nothing accepts connections on "
                                f"that port (a wrong port, or the server is not running). {_CHECK}",
                                path=path, title="Server unreachable")
    if code in (socket.EAI_NONAME, getattr(socket, "EAI_NODATA", socket.EAI_NONAME)):
        return UnreachableError(f"There is no host named {host} (while {what}): a typo in the address, or a name "
                                f"this network's DNS does not know. {_CHECK}", path=path, title="Unknown host")
    if code == socket.EAI_AGAIN:
        return UnreachableError(f"The name {host} could not be looked up while {what} (no answer from DNS): "
                                "check the network connection.", path=path, title="Offline")
    if code in (errno.ENETUNREACH, errno.EHOSTUNREACH, errno.ENETDOWN):
        return UnreachableError(f"No route to {where} while {what}: this computer seems to be offline. Check the "
                                "network connection.", path=path)
    detail = str(exc) or type(exc).__name__
    return UnreachableError(f"Could not connect to {where} while {what} ({detail}). {_CHECK}", path=path,
                            title="Server unreachable")


def timeout_error(exc: httpx.TimeoutException, what: str, path: str | None) -> NetworkError:
    """The error for a request the server did not answer in time (connect, read or write)."""
    where = address_of(exc)
    if isinstance(exc, httpx.ConnectTimeout):
        return NetworkError(f"{where} did not accept the connection in time while {what} (a firewall, a wrong "
                            f"address, or the network is down). {_CHECK}", path=path, title="Server unreachable")
    return NetworkError(f"{where} did not answer in time while {what}. Check the network connection; the server "
                        "may be overloaded.", path=path, title="Server not answering")
