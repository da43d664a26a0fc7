"""Errors raised by the engine and its Seafile client.

Every error carries a short ``title`` and a ``message`` a person can act on,
so the daemon, the CLI and the tray can show it without a traceback.  The
tree, classified by behaviour (what the scheduler should do next)::

    OhsyncError                      title + message
    ├── RemoteError                  anything the server or the network did
    │   ├── AuthError                401/403 on a token view: stop, ask for login
    │   ├── NotFoundError            404: library, folder or file missing
    │   ├── QuotaError               443 (or 442 too large): stop uploading
    │   ├── ThrottledError           429: retry after ``retry_after`` seconds
    │   ├── ServerError              5xx/520, FS errors: retry with backoff
    │   ├── NetworkError             connect/read failure, timeout: offline
    │   ├── ProtocolError            garbage from the server (bad JSON, shape)
    │   └── RemoteOperationError     4xx the request itself caused (bad name…)
    ├── LibraryNotFound              the configured library does not exist
    ├── TwoFactorRequired            auth-token asks for an OTP code
    └── LocalError                   an OSError on the mirror side
        └── MirrorMissingError       the mirror root is gone or not ours
"""

from __future__ import annotations

__all__ = [
    "OhsyncError",
    "RemoteError",
    "AuthError",
    "NotFoundError",
    "QuotaError",
    "ThrottledError",
    "ServerError",
    "NetworkError",
    "ProtocolError",
    "RemoteOperationError",
    "LibraryNotFound",
    "TwoFactorRequired",
    "LocalError",
    "MirrorMissingError",
]


class OhsyncError(Exception):
    """Root of all ohsync errors.

    :param message: a sentence saying what happened and what to do.
    :param title: a short heading (tray notices, CLI first line).
    :param path: the library-relative path concerned, when there is one.
    """

    title = "Sync error"
    #: True when repeating the same operation later may succeed.
    retryable = False

    def __init__(self, message: str, *, title: str | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if title is not None:
            self.title = title
        self.path = path

    def __str__(self) -> str:
        return self.message


class RemoteError(OhsyncError):
    """The server or the network failed a request.

    :param status: the HTTP status, or None when no answer arrived.
    """

    title = "Server error"

    def __init__(self, message: str, *, status: int | None = None, **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.status = status


class AuthError(RemoteError):
    """The token was rejected (401) or missing (403 without credentials)."""

    title = "Login needed"


class NotFoundError(RemoteError):
    """A library, folder or file does not exist on the server (404)."""

    title = "Not found"


class QuotaError(RemoteError):
    """The account is out of quota (443) or the file is too large (442)."""

    title = "Out of quota"


class ThrottledError(RemoteError):
    """The server throttled us (429).

    :param retry_after: seconds to wait, from ``Retry-After`` (default 1).
    """

    title = "Server busy"
    retryable = True

    def __init__(self, message: str, *, retry_after: float = 1.0, **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.retry_after = retry_after


class ServerError(RemoteError):
    """The server failed (5xx, 520, a file-server error): retry with backoff."""

    retryable = True


class NetworkError(RemoteError):
    """No answer: connection refused/reset, DNS failure, timeout."""

    title = "Offline"
    retryable = True


class ProtocolError(RemoteError):
    """The server answered something we cannot understand (bad JSON, shape)."""

    title = "Unexpected server answer"
    retryable = True


class RemoteOperationError(RemoteError):
    """A request the server refused for a reason of its own (400/409/441…)."""


class LibraryNotFound(OhsyncError):
    """The configured library does not exist (and creating it is not allowed)."""

    title = "Library not found"


class TwoFactorRequired(OhsyncError):
    """``/api2/auth-token/`` answered that a two-factor code is required."""

    title = "Two-factor code needed"


class LocalError(OhsyncError):
    """A local file operation failed (permissions, disk full, bad name)."""

    title = "Local file error"


class MirrorMissingError(LocalError):
    """The mirror root is missing or is not the folder we synced (mount gone)."""

    title = "Mirror folder missing"
