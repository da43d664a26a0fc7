"""The one place that turns foreign failures into ohsync's typed errors.

The Seafile client (:mod:`ohsync.engine.client`) never lets an ``httpx``
exception, an ``OSError`` or a ``json`` error escape: every request runs
inside :func:`translate_errors`, and every non-success HTTP answer goes
through :func:`error_for_response`.  The original exception is always kept
as ``__cause__``.  Messages are sentences a person can act on; they never
contain the API token (every message built from server text is passed
through :func:`redact`) nor a file-server link (whose path is a one-time
credential).

Status classes (see ``docs/seafile-api.md`` §1.5)::

    401                               AuthError (token rejected)
    403 "credentials were not provided"  AuthError (token not sent)
    403 file server "Access token …"  ServerError (link expired/used: get a new one)
    403 other                         RemoteOperationError (permission)
    400 "… name invalid", 440 (FS)     NameRejectedError (fix the name)
    404, 441                          NotFoundError
    413 (a proxy's body limit)        TooLargeError (raise the limit)
    409 "GC Conflict"                 ServerError (retry)
    409 other, 400, 440, other 4xx    RemoteOperationError
    429                               ThrottledError(retry_after)
    442                               TooLargeError (a QuotaError)
    443, 447; 5xx/520 saying "quota"  QuotaError
    5xx, 520                          ServerError
    3xx, 304 (unexpected)             ProtocolError
    connect/read failure, timeout     NetworkError
    bad JSON / wrong shape            ProtocolError
"""

from __future__ import annotations

import contextlib
import email.utils
import json
import re
import time
from collections.abc import Iterable, Iterator
from typing import Any

import httpx

from ..errors import (
    AuthError,
    LibraryGoneError,
    NameRejectedError,
    NetworkError,
    NotFoundError,
    OhsyncError,
    ProtocolError,
    QuotaError,
    RemoteError,
    RemoteOperationError,
    ServerError,
    ThrottledError,
    TooLargeError,
    UnreachableError,
    local_error,
)
from .reach import connect_error, timeout_error

__all__ = [
    "AUTH_REJECTED_MESSAGE",
    "api_missing_error",
    "error_for_response",
    "parse_json",
    "parse_retry_after",
    "redact",
    "server_message",
    "translate_errors",
]

#: What the person sees when the saved token stops working.
AUTH_REJECTED_MESSAGE = "The server rejected the saved token. Run `ohsync login` to sign in again."
AUTH_MISSING_MESSAGE = (
    "The server says no login was sent with the request. Run `ohsync login` to sign in."
)

_MAX_MESSAGE = 200
_DEFAULT_RETRY_AFTER = 1.0


#: Shorter secrets are not searched for: replacing every "n" of a one-letter
#: password would mangle the server's message and show where the letter is.
REDACT_MIN_LENGTH = 8


def redact(text: str, secrets: Iterable[str | None]) -> str:
    """Return ``text`` with every secret of at least :data:`REDACT_MIN_LENGTH`
    characters replaced by ``<redacted>`` (tokens are 40; a password that
    short is not hidden inside other words)."""
    for secret in secrets:
        if secret and len(secret) >= REDACT_MIN_LENGTH:
            text = text.replace(secret, "<redacted>")
    return text


def parse_json(content: bytes, *, what: str, path: str | None = None) -> Any:
    """Decode a JSON body the way both Seafile servers need it.

    File-server error bodies carry raw newlines inside strings, so parsing
    is non-strict (``json.loads(..., strict=False)``).

    :param content: the raw body.
    :param what: names the request in the error message ("the folder listing").
    :raises ProtocolError: the body is not UTF-8 JSON.
    """
    try:
        return json.loads(content.decode("utf-8-sig"), strict=False)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolError(
            f"The server answered {what} with something that is not JSON.", path=path
        ) from exc


def server_message(response: httpx.Response, secrets: Iterable[str | None] = ()) -> str:
    """Extract the human message from a Seahub or file-server error body.

    Seahub sends ``{"error_msg": …}`` or ``{"detail": …}`` (DRF) or
    ``{"non_field_errors": [...]}``; the file server ``{"error": "…\\n"}``
    (not strict JSON) or plain text; an unhandled error an HTML page.
    Returns at most 200 characters, token redacted; ``""`` for an empty body.
    """
    raw = response.content or b""
    text = raw.decode("utf-8", "replace").strip()
    message = text
    if text[:1] in "{[\"":
        try:
            body = json.loads(text, strict=False)
        except ValueError:
            body = None
        message = _message_from_json(body) if body is not None else text
    elif text[:1] == "<" or "<html" in text[:200].lower():
        message = "(an HTML error page)"
    message = " ".join(message.split())  # collapse raw newlines, tabs
    message = redact(message, secrets)
    if len(message) > _MAX_MESSAGE:
        message = message[: _MAX_MESSAGE - 1] + "…"
    return message


def _message_from_json(body: Any) -> str:
    if isinstance(body, str):
        return body
    if isinstance(body, dict):
        for key in ("error_msg", "detail", "error", "err", "non_field_errors"):
            if key in body:
                return _message_from_json(body[key])
        parts = [f"{k}: {_message_from_json(v)}" for k, v in body.items()]
        return "; ".join(parts)
    if isinstance(body, list):
        return " ".join(_message_from_json(item) for item in body)
    return str(body)


def parse_retry_after(value: str | None, *, default: float = _DEFAULT_RETRY_AFTER) -> float:
    """Seconds to wait from a ``Retry-After`` header (delta-seconds or HTTP date).

    Missing or unreadable values give ``default``; negative values give 0.
    """
    if not value:
        return default
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return default
    if when is None:  # pragma: no cover - older Pythons
        return default
    return max(0.0, when.timestamp() - time.time())


#: seahub's answer for a library that does not exist: "Library not found." / "Library <id> not found."
_LIBRARY_NOT_FOUND = re.compile(r"^Library (?:[0-9a-f-]{36} )?not found\.?$", re.I)


def _is_fileserver_token_error(message: str) -> bool:
    lowered = message.lower()
    return "access token" in lowered or "invalid url" in lowered


def error_for_response(
    response: httpx.Response,
    *,
    what: str,
    path: str | None = None,
    fileserver: bool = False,
    secrets: Iterable[str | None] = (),
) -> RemoteError:
    """Build the typed error for a non-success HTTP answer.

    :param response: the answer (its body must have been read).
    :param what: names the request for the message ("listing the folder").
    :param path: the remote path concerned, if any.
    :param fileserver: True for ``/seafhttp`` upload/update/download links.
    :param secrets: strings to keep out of the message (token, password).
    :returns: an exception to raise (the caller chains nothing: the response
        is the cause).
    """
    secrets = tuple(secrets)
    status = response.status_code
    detail = server_message(response, secrets)
    said = f' The server said: "{detail}"' if detail else ""
    where = f" ({path})" if path else ""
    kw: dict[str, Any] = {"status": status, "path": path}

    if status == 401:
        return AuthError(AUTH_REJECTED_MESSAGE, **kw)
    if status == 403:
        if "credentials were not provided" in detail.lower():
            return AuthError(AUTH_MISSING_MESSAGE, **kw)
        if fileserver and _is_fileserver_token_error(detail):
            return ServerError(
                f"The file server refused the transfer link while {what}{where}: it expired or "
                f"was already used. A new link is needed.{said}",
                **kw,
            )
        return RemoteOperationError(
            f"Permission denied while {what}{where}.{said}", title="Permission denied", **kw
        )
    if status in (404, 441):
        if _LIBRARY_NOT_FOUND.search(detail):
            return LibraryGoneError(
                f"The library is not on the server any more (deleted, or no longer shared with this "
                f"account) while {what}.{said} Syncing waits until it is back; check it in Seafile's web "
                "page, or point the [[mirror]] at another library.", **kw)
        return NotFoundError(f"Not found on the server while {what}{where}.{said}", **kw)
    if status == 429:
        retry_after = parse_retry_after(response.headers.get("Retry-After"))
        return ThrottledError(
            f"The server is throttling requests; retrying in {retry_after:g} s ({what}).",
            retry_after=retry_after,
            **kw,
        )
    if status == 413:
        return TooLargeError(
            f"The upload is larger than the server (or a proxy in front of it) accepts (HTTP 413) while "
            f"{what}{where}. It is not retried until the file changes: make it smaller, or ask the server's "
            f"admin to raise the upload body limit (e.g. nginx client_max_body_size).{said}",
            **kw,
        )
    if status in (440, 400) and ("name invalid" in detail.lower() or "filename" in detail.lower()):
        return NameRejectedError(
            f"The server cannot hold this name ({what}{where}). Rename the file.{said}", **kw)
    if status >= 500 and "quota" in detail.lower():
        return QuotaError(f"The account is out of quota ({what}{where}).{said}", **kw)
    if status == 442:
        return TooLargeError(f"The file is larger than the server accepts ({what}{where}).{said}", **kw)
    if status in (443, 447):
        reason = {
            442: "The file is larger than the server accepts",
            443: "The account is out of quota",
            447: "The library holds too many files",
        }[status]
        title = "File too large" if status == 442 else "Out of quota"
        return QuotaError(f"{reason} ({what}{where}).{said}", title=title, **kw)
    if status == 409 and "gc conflict" in detail.lower():
        return ServerError(f"The server was busy (GC conflict) while {what}{where}.{said}", **kw)
    if status >= 500:
        return ServerError(f"The server failed (HTTP {status}) while {what}{where}.{said}", **kw)
    if 300 <= status < 400:
        location = "" if fileserver else redact(response.headers.get("Location", ""), secrets)
        to = f" to {location}" if location else ""
        return ProtocolError(
            f"The server answered HTTP {status}{to} while {what}{where}; check the server URL "
            f"(it must be the Seafile base URL, with the right scheme).",
            **kw,
        )
    return RemoteOperationError(
        f"The server refused {what}{where} (HTTP {status}).{said}", title="Request refused", **kw
    )


_CONNECT_HINT = "Check the network connection and the server URL."

#: What OpenSSL says when the other end answers a TLS hello in plain HTTP.
_PLAIN_HTTP_SIGNS = ("wrong version number", "record layer failure", "packet length too long",
                     "http request", "unknown protocol")


def _plain_http_answer(exc: BaseException) -> bool:
    text = f"{exc} {exc.__cause__ or ''} {exc.__context__ or ''}".lower()
    return "ssl" in text and any(sign in text for sign in _PLAIN_HTTP_SIGNS)


def api_missing_error(base_url: str, endpoint: str, status: int) -> ProtocolError:
    """The error for an API endpoint every Seafile server has answering 404 (or an
    HTML page): the server URL's path is wrong, or the host is no Seafile server.

    :param base_url: the server URL as configured (``https://host/path``).
    :param endpoint: the request path, e.g. ``/api2/auth-token/``.
    :param status: the HTTP status received.
    """
    url = httpx.URL(base_url)
    path = url.path.rstrip("/")
    root = str(url.copy_with(path="/", query=None, fragment=None)).rstrip("/")
    if path:
        message = (f"There is no Seafile API under {base_url} (HTTP {status} for {path}{endpoint}): the path "
                   f"'{path}' in the server address looks wrong. Use the address of the Seafile web page you "
                   f"sign in to, e.g. {root}, without /lib/… or other page paths.")
    else:
        message = (f"{base_url} answered HTTP {status} for {endpoint}, which every Seafile server has: this "
                   "address does not look like a Seafile server. Check it (it is the address of the Seafile "
                   "web page you sign in to).")
    return ProtocolError(message, status=status, title="Wrong server address")


@contextlib.contextmanager
def translate_errors(
    *, what: str, path: str | None = None, secrets: Iterable[str | None] = ()
) -> Iterator[None]:
    """Map ``httpx`` transport errors, ``OSError`` and ``json`` errors raised
    inside the block to ohsync errors, most specific first, original chained.

    ohsync's own errors pass through unchanged.

    :param what: names the operation for the message ("downloading a file").
    :param path: the remote path concerned, if any.
    """
    secrets = tuple(secrets)
    try:
        yield
    except OhsyncError:
        raise
    except httpx.TimeoutException as exc:
        raise timeout_error(exc, what, path) from exc
    except httpx.ConnectError as exc:
        if _plain_http_answer(exc):
            raise UnreachableError(
                f"The server answered in plain HTTP to an https:// address while {what}: this port does "
                "not speak HTTPS. Use http:// in the address if the server really is plain HTTP (a test "
                "server on this computer), or the server's HTTPS port.", path=path
            ) from exc
        raise connect_error(exc, what, path) from exc
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as exc:
        raise NetworkError(
            f"The connection dropped while {what}. {_CONNECT_HINT}", path=path
        ) from exc
    except httpx.TransportError as exc:
        detail = redact(str(exc), secrets)
        raise NetworkError(
            f"A network error interrupted {what}: {detail or type(exc).__name__}. {_CONNECT_HINT}",
            path=path,
        ) from exc
    except httpx.InvalidURL as exc:
        raise ProtocolError(f"The server handed out an invalid URL while {what}.", path=path) from exc
    except httpx.StreamError as exc:
        raise NetworkError(f"The transfer stream broke while {what}.", path=path) from exc
    except json.JSONDecodeError as exc:
        raise ProtocolError(f"The server answered {what} with invalid JSON.", path=path) from exc
    except OSError as exc:
        raise local_error(exc, path, what=what) from exc


_HEX40 = re.compile(r"^[0-9a-f]{40}$")


def check_id(value: Any, *, what: str, path: str | None = None) -> str:
    """Return ``value`` if it is a 40-hex object id, else raise ProtocolError."""
    if isinstance(value, str) and _HEX40.match(value):
        return value
    raise ProtocolError(f"The server sent an invalid object id in {what}.", path=path)
