"""What one ``ohsync doctor`` check found (:mod:`ohsync.daemon.doctor`), on
its own so the local checks (:mod:`ohsync.daemon.doctor_local`) and the
server checks share it without importing each other."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OK", "WARNING", "ERROR", "SKIPPED", "Finding"]

OK, WARNING, ERROR, SKIPPED = "ok", "warning", "error", "skipped"


@dataclass(frozen=True)
class Finding:
    """The outcome of one check.

    :ivar check: short id (``keyring``, ``mirror_folder``…).
    :ivar level: ``ok``, ``warning``, ``error`` or ``skipped``.
    :ivar message: what was found, as a sentence.
    :ivar fix: what to do about it (empty when nothing needs doing).
    :ivar summary: for a warning that makes "syncing works" untrue now (ohsync
        not running, something that needs the person), the words the report's
        last line says about it; empty otherwise.
    """

    check: str
    level: str
    message: str
    fix: str = ""
    summary: str = ""

    def as_dict(self) -> dict[str, str]:
        """``{"check", "level", "message", "fix"}`` for ``--json``."""
        return {"check": self.check, "level": self.level, "message": self.message, "fix": self.fix}
