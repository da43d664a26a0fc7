"""Errors raised by the engine and its Seafile client.

Every error carries a short ``title`` and a ``message`` a person can act on,
so the daemon, the CLI and the tray can show it without a traceback.  The
tree, classified by behaviour (what the scheduler should do next)::

    OhsyncError                      title + message
    ├── RemoteError                  anything the server or the network did
    │   ├── AuthError                401/403 on a token view: stop, ask for login
    │   ├── NotFoundError            404: folder or file missing
    │   │   └── LibraryGoneError     404 "Library … not found": the whole mirror
    │   ├── QuotaError               443 (or 442 too large): stop uploading
    │   ├── ThrottledError           429: retry after ``retry_after`` seconds
    │   ├── ServerError              5xx/520, FS errors: retry with backoff
    │   ├── NetworkError             read failure, dropped connection, timeout
    │   │   └── UnreachableError     no connection at all (refused, DNS): offline
    │   ├── ProtocolError            garbage from the server (bad JSON, shape)
    │   └── RemoteOperationError     4xx the request itself caused (bad name…)
    ├── LibraryNotFound              the configured library does not exist
    ├── TwoFactorRequired            auth-token asks for an OTP code
    ├── StateTooNew                  the state database is from a newer ohsync
    └── LocalError                   an OSError on the mirror side
        ├── BackupError              the backup of a local file could not be written
        └── MirrorMissingError       the mirror root is gone or not ours

Every error also says, once, what kind of failure it is (:func:`classify`
returns a :class:`Failure`): its **scope** (``path``: only this file fails;
``mirror``: this mirror cannot sync now; ``daemon``: nothing can run) and its
**behaviour** (``retry_soon``: back off and try again; ``retry_after``: wait
the time the server gave; ``needs_person``: retrying the same thing cannot
help until the person acts, and ``needs`` says how: ``login``, ``space``,
``name``, ``limit``, ``quota``, ``permission``), and whether it is
**transient** (a failure of one attempt, not of the request: a drop, a 5xx,
a 429, an answer we could not read; the client's retry loops decide from
that, through ``engine/failures.py`` ``resend_wait``).  The engine, its failure
book (``engine/failures.py``), the worker, filing, the socket and the CLI
read that instead of their own isinstance chains.  Translators per boundary
turn foreign failures into these classes: HTTP answers in
``client.errors.error_for_response``, local file-system errors in
:func:`local_error`.

A failed request (a 5xx, a dropped connection, a 429) concerns the path it
was for: the pass goes on with the other paths.  Only when the server fails
several requests in a row does the engine widen the failure to the mirror
(:func:`server_down`) and end the pass; a connection that cannot be made at
all (:class:`UnreachableError`) ends it at once.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass

__all__ = [
    "Failure",
    "classify",
    "local_error",
    "server_down",
    "UnreachableError",
    "LibraryGoneError",
    "TooLargeError",
    "NameRejectedError",
    "DiskFullError",
    "ReadOnlyError",
    "LocalPermissionError",
    "LocalNameError",
    "BackupError",
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
    "StateTooNew",
]


class OhsyncError(Exception):
    """Root of all ohsync errors.

    :param message: a sentence saying what happened and what to do.
    :param title: a short heading (tray notices, CLI first line).
    :param path: the library-relative path concerned, when there is one.
    """

    title = "Sync error"
    #: True for a failure of one attempt rather than of the request (a drop,
    #: a 5xx, a 429, an answer we could not read): the same request sent
    #: again may succeed.  Read through :func:`classify` (``Failure.transient``).
    transient = False
    #: ``path``, ``mirror`` or ``daemon`` (see the module docstring).
    scope = "mirror"
    #: ``retry_soon``, ``retry_after`` or ``needs_person``.
    behaviour = "retry_soon"
    #: what the person must do for ``needs_person``: ``login``, ``space``,
    #: ``name``, ``limit``, ``quota``, ``permission`` (else None).
    needs: str | None = None

    def __init__(self, message: str, *, title: str | None = None, path: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if title is not None:
            self.title = title
        self.path = path

    def __str__(self) -> str:
        return self.message

    @property
    def retryable(self) -> bool:
        """True when repeating the same operation later may succeed (``classify(self).transient``)."""
        return classify(self).transient


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
    scope = "daemon"
    behaviour = "needs_person"
    needs = "login"


class NotFoundError(RemoteError):
    """A library, folder or file does not exist on the server (404)."""

    title = "Not found"
    scope = "path"


class LibraryGoneError(NotFoundError):
    """The server answered that the library itself is not found (deleted,
    or no longer shared with this account): every request would fail."""

    title = "Library gone"
    scope = "mirror"


class QuotaError(RemoteError):
    """The account is out of quota (443) or the file is too large (442)."""

    title = "Out of quota"
    scope = "path"
    behaviour = "needs_person"
    needs = "quota"


class TooLargeError(QuotaError):
    """The upload is larger than the server (442) or a proxy in front of it (413) accepts."""

    title = "File too large"
    needs = "limit"


class ThrottledError(RemoteError):
    """The server throttled us (429): this request waits ``retry_after``.

    :param retry_after: seconds to wait, from ``Retry-After`` (default 1).
    """

    title = "Server busy"
    transient = True
    scope = "path"
    behaviour = "retry_after"

    def __init__(self, message: str, *, retry_after: float = 1.0, **kw: object) -> None:
        super().__init__(message, **kw)  # type: ignore[arg-type]
        self.retry_after = retry_after


class ServerError(RemoteError):
    """The server failed one request (5xx, 520, a file-server error): retry with backoff."""

    transient = True
    scope = "path"


class NetworkError(RemoteError):
    """No (complete) answer to one request: connection reset or dropped, timeout."""

    title = "Offline"
    transient = True
    scope = "path"


class UnreachableError(NetworkError):
    """No connection could be made at all (refused, DNS failure, no route):
    every request would fail the same way."""

    scope = "mirror"


class ProtocolError(RemoteError):
    """The server answered something we cannot understand (bad JSON, shape)."""

    title = "Unexpected server answer"
    transient = True
    scope = "path"


class RemoteOperationError(RemoteError):
    """A request the server refused for a reason of its own (400/409/441…)."""

    scope = "path"


class NameRejectedError(RemoteOperationError):
    """The server cannot hold this name (``\\`` in a name, too long, invalid)."""

    title = "Name not allowed on the server"
    behaviour = "needs_person"
    needs = "name"


class LibraryNotFound(OhsyncError):
    """The configured library does not exist (and creating it is not allowed), or its name is ambiguous.

    :ivar ambiguous: True when several libraries carry the name (the message then says what to set);
        otherwise the message states only what is missing and the caller adds the fix it knows.
    """

    title = "Library not found"
    ambiguous = False
    scope = "daemon"
    behaviour = "needs_person"


class TwoFactorRequired(OhsyncError):
    """``/api2/auth-token/`` answered that a two-factor code is required."""

    title = "Two-factor code needed"
    scope = "daemon"
    behaviour = "needs_person"
    needs = "login"


class StateTooNew(OhsyncError):
    """The mirror's state database was written by a newer ohsync than this one
    (``engine/state_schema.py``); nothing was changed in it.

    :param db_path: the database file.
    :param found: its schema version; ``known``: the newest this build knows.
    """

    title = "State from a newer ohsync"
    scope = "mirror"
    behaviour = "needs_person"

    def __init__(self, db_path: object, found: int, known: int) -> None:
        super().__init__(
            f"The state database {db_path} was written by a newer ohsync (state version {found}; this "
            f"ohsync knows up to {known}), so this one leaves it untouched. Upgrade ohsync, or run "
            "`ohsync resync` to set it aside and compare both sides afresh: nothing is deleted, files "
            "equal on both sides are kept as they are.")
        self.db_path, self.found, self.known = db_path, found, known


class LocalError(OhsyncError):
    """A local file operation failed (permissions, disk full, bad name)."""

    title = "Local file error"
    scope = "path"


class DiskFullError(LocalError):
    """The local disk (or the person's disk quota) is full (ENOSPC, EDQUOT)."""

    title = "Disk full"
    behaviour = "needs_person"
    needs = "space"


class ReadOnlyError(LocalError):
    """The mirror is on a read-only file system (EROFS)."""

    title = "Read-only folder"
    behaviour = "needs_person"
    needs = "permission"


class LocalPermissionError(LocalError):
    """The operating system refused access to a mirror file (EACCES, EPERM)."""

    title = "Permission denied"
    behaviour = "needs_person"
    needs = "permission"


class LocalNameError(LocalError):
    """This file system cannot hold the name (ENAMETOOLONG, EILSEQ, EINVAL)."""

    title = "Name not allowed here"
    behaviour = "needs_person"
    needs = "name"


class BackupError(LocalError):
    """The backup copy of a local file could not be written (its disk full,
    no permission there…).  A local file is replaced or removed only after
    its backup, so the file is left as it is; retried with backoff."""

    title = "Backup not written"


class MirrorMissingError(LocalError):
    """The mirror root is missing or is not the folder we synced (mount gone)."""

    title = "Mirror folder missing"
    scope = "mirror"
    behaviour = "needs_person"


@dataclass(frozen=True)
class Failure:
    """How one failure should be handled (see the module docstring).

    :ivar scope: ``path``, ``mirror`` or ``daemon``.
    :ivar behaviour: ``retry_soon``, ``retry_after`` or ``needs_person``.
    :ivar needs: for ``needs_person``: ``login``, ``space``, ``name``,
        ``limit``, ``quota``, ``permission`` (None otherwise or unknown).
    :ivar retry_after: seconds the server asked us to wait (``retry_after``).
    :ivar title: a short heading.
    :ivar message: a sentence saying what happened and what to do.
    :ivar transient: the failure is of one attempt, not of the request: the
        same request sent again may succeed (a drop, a 5xx, a 429, garbage);
        :func:`ohsync.engine.failures.resend_wait` decides whether and when.
    :ivar origin: where it happened: ``network`` (no answer from the
        server: offline), ``server`` (the server answered, with a refusal or
        garbage), ``local`` (this computer's files), ``internal`` (a bug in
        ohsync: the message says to see the log), ``ohsync`` (a state of
        ohsync's own, such as a missing library or login).
    """

    scope: str
    behaviour: str
    needs: str | None
    retry_after: float | None
    title: str
    message: str
    origin: str = "ohsync"
    transient: bool = False

    @property
    def permanent(self) -> bool:
        """True when retrying the same thing cannot help until someone acts."""
        return self.behaviour == "needs_person"


def classify(exc: BaseException) -> Failure:
    """The one classification of a failure (an ohsync error, an OSError, anything).

    OSErrors are first translated (:func:`local_error`); anything else that
    is not an :class:`OhsyncError` is an internal error of the mirror, retried
    with backoff.
    """
    if isinstance(exc, OSError) and not isinstance(exc, OhsyncError):
        exc = local_error(exc)
    if isinstance(exc, OhsyncError):
        retry_after = getattr(exc, "retry_after", None) if exc.behaviour == "retry_after" else None
        origin = "network" if isinstance(exc, NetworkError) else "server" if isinstance(exc, RemoteError) \
            else "local" if isinstance(exc, LocalError) else "ohsync"
        return Failure(exc.scope, exc.behaviour, exc.needs, retry_after, exc.title, exc.message, origin,
                       exc.transient)
    return Failure("mirror", "retry_soon", None, None, "Internal error", f"Internal error: {exc!r}; see the log",
                   "internal")


_ERRNO_CLASSES: dict[int, tuple[type[LocalError], str]] = {
    errno.ENOSPC: (DiskFullError, "the disk is full; free some space (ohsync retries when there is room)"),
    errno.EDQUOT: (DiskFullError, "your disk quota is used up; free some space (ohsync retries when there "
                                  "is room)"),
    errno.EROFS: (ReadOnlyError, "the folder is on a read-only file system; make it writable, then run "
                                 "`ohsync refresh`"),
    errno.EACCES: (LocalPermissionError, "permission denied; fix the file's permissions, then run "
                                         "`ohsync refresh`"),
    errno.EPERM: (LocalPermissionError, "the operation is not permitted; fix the file's permissions, then run "
                                        "`ohsync refresh`"),
    errno.ENAMETOOLONG: (LocalNameError, "the name or path is too long for this file system; rename it on "
                                         "the server (shorter name or fewer folders)"),
    errno.EILSEQ: (LocalNameError, "this file system cannot hold the name; rename it on the server"),
    # FAT, NTFS and SMB disks answer EINVAL for a name with a character they refuse (: ? * " < > |)
    errno.EINVAL: (LocalNameError, "this file system cannot hold the name (a character it refuses); rename it "
                                   "on the server"),
}


def local_error(exc: OSError, rel_path: str | None = None, *, what: str = "") -> LocalError:
    """Translate an OSError on the mirror side into the :class:`LocalError` class of its errno.

    :param rel_path: the library-relative path concerned, named in the message.
    :param what: the operation ("writing the file"), named in the message.
    :returns: a :class:`DiskFullError`, :class:`ReadOnlyError`,
        :class:`LocalPermissionError`, :class:`LocalNameError` or a plain
        :class:`LocalError` (retried with backoff), with ``exc`` as ``__cause__``.
    """
    cls, advice = _ERRNO_CLASSES.get(exc.errno or 0, (LocalError, ""))
    reason = exc.strerror or str(exc)
    where = f"{rel_path}: " if rel_path else ""
    during = f" while {what}" if what else ""
    message = f"{where}{reason}{during}" + (f"; {advice}" if advice else "")
    err = cls(message, path=rel_path)
    err.__cause__ = exc
    return err


def server_down(exc: RemoteError, failures: int) -> RemoteError:
    """Widen a failed request to the whole mirror: the server failed
    ``failures`` requests in a row, so the pass ends and the worker retries
    it with backoff.  Returns ``exc`` itself (type, status and
    ``retry_after`` kept; scope ``mirror``; the message says so)."""
    exc.scope = "mirror"
    exc.message = f"The server failed {failures} requests in a row; the last: {exc.message}"
    exc.args = (exc.message,)
    return exc
