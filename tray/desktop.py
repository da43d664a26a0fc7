"""The desktop around the tray: loading pystray safely, opening files.

``import pystray`` picks a backend at import time and may raise things other
than ImportError (Xlib's ``DisplayNameError`` with no display, ``ValueError``
for a missing typelib).  :func:`load_pystray` imports it lazily, on Linux
first choosing a backend with a real menu (appindicator where its typelib is
installed, else gtk; the xorg fallback has no menu), and turns every failure
into :class:`TrayUnavailable` with a sentence a person can act on.
"""

from __future__ import annotations

import importlib
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Iterable
from types import ModuleType

from .install_hint import install_hint

__all__ = ["TrayUnavailable", "choose_linux_backend", "load_pystray",
           "open_command", "open_path", "open_paths"]

log = logging.getLogger(__name__)


class TrayUnavailable(RuntimeError):
    """The tray icon cannot be shown here; the message says why and what to do."""


def choose_linux_backend() -> str:
    """``appindicator`` if an AppIndicator typelib is installed, else ``gtk``.

    :raises TrayUnavailable: PyGObject or GTK 3's typelib is missing.
    """
    try:
        import gi
    except ImportError as exc:
        raise TrayUnavailable(f"PyGObject is missing. {install_hint()}") from exc
    try:
        gi.require_version("Gtk", "3.0")
    except ValueError as exc:
        raise TrayUnavailable("GTK 3 introspection data is missing (Debian/Ubuntu: "
                              "apt install gir1.2-gtk-3.0)") from exc
    for namespace in ("AyatanaAppIndicator3", "AppIndicator3"):
        try:
            gi.require_version(namespace, "0.1")
            return "appindicator"
        except ValueError:
            continue
    return "gtk"


def load_pystray(backend: str | None = None) -> ModuleType:
    """Import pystray with a backend that has a menu.

    :param backend: force a pystray backend (``appindicator``, ``gtk``,
        ``dummy``…); default: ``PYSTRAY_BACKEND``, else chosen here.
    :raises TrayUnavailable: no display, PyGObject missing, or pystray failed.
    """
    backend = backend or os.environ.get("PYSTRAY_BACKEND") or None
    if sys.platform.startswith("linux") and backend != "dummy":
        if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
            raise TrayUnavailable("no graphical display (DISPLAY and WAYLAND_DISPLAY are unset)")
        if backend is None:
            backend = choose_linux_backend()
        elif backend == "xorg":
            log.warning("pystray's xorg backend has no menu; use appindicator or gtk")
    if backend:
        os.environ["PYSTRAY_BACKEND"] = backend  # read by pystray at import time
    try:
        pystray = importlib.import_module("pystray")
    except Exception as exc:  # not only ImportError: Xlib errors, ValueError from gi
        hint = f". {install_hint()}" if isinstance(exc, ImportError) and "gi" in str(exc) else ""
        raise TrayUnavailable(f"cannot start the tray icon (pystray backend {backend or 'default'}): "
                              f"{exc}{hint}") from exc
    return pystray


def open_command(path: str, platform: str = sys.platform) -> list[str] | None:
    """The command that opens ``path`` in the desktop's default app (``None``: use os.startfile)."""
    if platform == "darwin":
        return ["open", path]
    if platform.startswith("win"):
        return None
    return ["xdg-open", path]


def open_path(path: str) -> None:
    """Open a file or folder with the desktop's default app, without waiting.

    :raises OSError: the opener could not be started.
    """
    command = open_command(path)
    if command is None:
        os.startfile(path)  # type: ignore[attr-defined]  # Windows only
        return
    subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)


def open_paths(paths: Iterable[str], fallback: str | None = None, *,
               opener: Callable[[str], None] = open_path) -> list[str]:
    """Open each path that exists; if none does, open ``fallback`` (created if missing).

    :returns: the paths handed to the opener.
    """
    existing = [p for p in paths if os.path.exists(p)]
    if not existing and fallback:
        try:
            os.makedirs(fallback, exist_ok=True)
        except OSError as exc:
            log.warning("cannot create %s: %s", fallback, exc)
        existing = [fallback]
    for path in existing:
        try:
            opener(path)
        except OSError as exc:
            log.warning("cannot open %s: %s", path, exc)
    return existing
