"""Logging for the daemon: a rotating file plus stderr, with secrets redacted.

The log file is ``user_log_dir/ohsync.log`` (or ``state_dir/logs`` when the
config sets ``state_dir``, so tests and the demo never write into the
person's real log folder).  :func:`redact` registers a string (the token)
that must never reach a log line: any record containing it is rewritten with
``[redacted]`` — a second line of defence, since nothing logs the token on
purpose.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
import threading
from pathlib import Path

__all__ = ["setup_logging", "redact"]

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
            log_file = log_dir / "ohsync.log"
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
