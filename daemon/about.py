"""What this installation of ohsync is: its version, from the installed metadata."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _dist_version

__all__ = ["version"]


def version() -> str:
    """The installed distribution's version (``pyproject.toml``'s ``version``).

    :returns: e.g. ``"0.1.0"``; ``"unknown"`` when ohsync runs from a source
        tree that was never installed (no metadata to read).
    """
    try:
        return _dist_version("ohsync")
    except PackageNotFoundError:
        return "unknown"
