"""Readiness for systemd (``Type=notify``): the ``sd_notify`` datagram protocol.

systemd hands a service the address of a Unix datagram socket in
``NOTIFY_SOCKET`` (a path, or ``@name`` for the abstract namespace) and
reads newline-separated ``KEY=value`` assignments from it: ``READY=1`` once
the service is up (here: the socket answers and the worker runs),
``STOPPING=1`` when it begins to shut down, ``STATUS=…`` as free text for
``systemctl status``.  Outside systemd (no ``NOTIFY_SOCKET``) every call is
a no-op, so the daemon calls these unconditionally.  The protocol is small
enough that a library would add more than it saves.
"""

from __future__ import annotations

import logging
import os
import socket

__all__ = ["notify", "ready", "stopping"]

log = logging.getLogger(__name__)


def notify(*assignments: str) -> bool:
    """Send ``assignments`` (e.g. ``"READY=1"``) to ``$NOTIFY_SOCKET``.

    :returns: True when a datagram was sent, False without ``NOTIFY_SOCKET``
        or when sending failed (logged; a lost notification must never stop
        the daemon — systemd then times the start out, which is visible).
    """
    address = os.environ.get("NOTIFY_SOCKET", "")
    if not address or not assignments:
        return False
    if address.startswith("@"):  # abstract namespace: a leading NUL byte
        address = "\0" + address[1:]
    elif not address.startswith("/"):
        log.warning("NOTIFY_SOCKET=%r is neither a path nor an abstract address; not notifying", address)
        return False
    payload = "\n".join(assignments).encode("utf-8")
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.sendto(payload, address)
    except OSError as exc:
        log.warning("could not notify systemd (%s)", exc.strerror or exc)
        return False
    return True


def ready(status: str = "") -> bool:
    """``READY=1`` (with ``STATUS=`` when given): the daemon serves its socket."""
    return notify("READY=1", *([f"STATUS={status}"] if status else []))


def stopping() -> bool:
    """``STOPPING=1``: the daemon finishes its current file and exits."""
    return notify("STOPPING=1")
