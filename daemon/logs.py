"""Logging for the daemon: a rotating file plus stderr, with secrets redacted.

The log file is ``state_dir/logs/ohsync.log`` (``~/.local/state/ohsync/logs/``
on Linux; the config's ``log_dir`` moves it) for ``ohsync run``, autostarted
daemons and ``ohsync demo`` alike; ``ohsync log [-f]`` prints it.  It rotates
at 2 MB, keeping three old files (``ohsync.log.1`` …).

Every sync action is one INFO line from the ``ohsync.sync`` logger
(:func:`log_action`): direction, action, result and path, e.g.
``up   upload   ok       journal/2026-11.md``.  ``--verbose`` adds DEBUG
lines (idle polls, timings).  :func:`redact` registers a string (the token)
that must never reach a log line: any record containing it is rewritten with
``[redacted]`` — a second line of defence, since nothing logs the token on
purpose.  Request lines of httpx are kept out at every level: they would
name one-time download and upload links, which are credentials.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
import threading
from pathlib import Path

__all__ = ["setup_logging", "redact", "log_action", "LOG_NAME"]

LOG_NAME = "ohsync.log"

_FORMAT = "%(asctime)s %(levelname)-7s %(threadName)s %(name)s: %(message)s"
_secrets: set[str] = set()
_lock = threading.Lock()


def redact(secret: str | None) -> None:
    """Never let ``secret`` appear in a log line."""
    if secret and len(secret) >= 8:
        with _lock:
            _secrets.add(secret)


class _RedactFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        with _lock:
            secrets = list(_secrets)
        if secrets:
            text = record.getMessage()
            if any(s in text for s in secrets):
                for s in secrets:
                    text = text.replace(s, "[redacted]")
                record.msg, record.args = text, None
        return True


def setup_logging(log_dir: Path | None, *, verbose: bool = False, stderr: bool = True) -> Path | None:
    """Configure the root logger once for a daemon process.

    :param log_dir: folder of ``ohsync.log``; None = stderr only.
    :returns: the log file, or None when it could not be opened.
    """
    root = logging.getLogger()
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    for h in list(root.handlers):
        if getattr(h, "_ohsync", False):
            root.removeHandler(h)
            h.close()
    redact_filter = _RedactFilter()
    fmt = logging.Formatter(_FORMAT)
    log_file: Path | None = None
    if log_dir is not None:
        try:
            log_dir.mkdir(parents=True, exist_ok=True)
            log_file = log_dir / LOG_NAME
            fh = logging.handlers.RotatingFileHandler(log_file, maxBytes=2_000_000, backupCount=3,
                                                      encoding="utf-8")
            fh.setFormatter(fmt)
            fh.addFilter(redact_filter)
            fh._ohsync = True  # type: ignore[attr-defined]
            root.addHandler(fh)
        except OSError as exc:
            print(f"ohsync: cannot write the log file in {log_dir}: {exc.strerror}", file=sys.stderr)
            log_file = None
    if stderr:
        sh = logging.StreamHandler(sys.stderr)
        sh.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s", "%H:%M:%S"))
        sh.addFilter(redact_filter)
        sh._ohsync = True  # type: ignore[attr-defined]
        root.addHandler(sh)
    # request lines of httpx name one-time upload/download links; keep them out of INFO
    logging.getLogger("httpx").setLevel(logging.WARNING)
    logging.getLogger("httpcore").setLevel(logging.WARNING)
    logging.getLogger("watchdog").setLevel(logging.WARNING)
    logging.getLogger("filelock").setLevel(logging.WARNING)
    return log_file


_actions = logging.getLogger("ohsync.sync")


def log_action(path: str, action: str, result: str, direction: str | None = "", message: str | None = "") -> None:
    """One log line for one sync action.

    :param path: library-relative path (or a local path for filing).
    :param action: ``upload``, ``download``, ``merge``, ``delete``, ``move``,
        ``conflict``, ``file``, ``error``…
    :param result: ``ok``, ``conflict``, ``error``, ``skipped``…
    :param direction: ``up`` (to the server), ``down`` (to this computer) or
        ``""``/``None`` (neither / not known).
    :param message: the reason or detail, if any (``""``/``None``: none).
    """
    level = logging.WARNING if result in ("error", "skipped") else logging.INFO
    _actions.log(level, "%-4s %-8s %-8s %s%s", direction or "-", action, result, path,
                 f"  ({message})" if message else "")
