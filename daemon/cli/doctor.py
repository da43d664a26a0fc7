"""``ohsync doctor``: print the findings of :mod:`ohsync.daemon.doctor`, as text or ``--json``.

Exit 0 when nothing stops syncing (warnings allowed), 1 when a check is an
error.  A config file that cannot be loaded is itself the one finding.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from .common import Subparsers, add_command

__all__ = ["register", "cmd_doctor", "format_findings"]

_MARK = {"ok": "ok", "warning": "warning", "error": "ERROR", "skipped": "skipped"}


def format_findings(findings: list[Any]) -> str:
    """The text report: one block per check, the fix indented under it, a summary line."""
    lines = []
    for f in findings:
        lines.append(f"{_MARK.get(f.level, f.level):<8} {f.check.replace('_', ' ')}: {f.message}")
        if f.fix and f.level in ("warning", "error"):
            lines.append(f"         fix: {f.fix}")
    errors = sum(1 for f in findings if f.level == "error")
    warnings = sum(1 for f in findings if f.level == "warning")
    if errors:
        lines.append(f"\n{errors} error(s), {warnings} warning(s): syncing cannot fully work until the errors "
                     "are fixed.")
    elif warnings:
        caveats = [f.summary for f in findings if f.level == "warning" and f.summary]
        if caveats:  # "syncing works" would hide that nothing runs, or that something needs the person
            lines.append(f"\n{warnings} warning(s), no errors: the setup can sync, but {'; '.join(caveats)}.")
        else:
            lines.append(f"\n{warnings} warning(s), no errors: syncing works.")
    else:
        lines.append("\nEverything looks right.")
    return "\n".join(lines)


def cmd_doctor(args: argparse.Namespace) -> int:
    """Run the checks and print them."""
    from ..config import ConfigError, config_path, load_config
    from ..doctor import ERROR, Finding, exit_code, run_checks

    path = config_path(args.config)
    try:
        findings = run_checks(load_config(path))
    except ConfigError as exc:
        # the fix line says what to do; the message's own advice would say it twice
        message = exc.message.removesuffix(" Fix the file or move it away.")
        findings = [Finding("config", ERROR, message, f"Fix {path}, or move it away and run `ohsync setup`.")]
    code = exit_code(findings)
    if args.json:
        print(json.dumps({"ok": code == 0, "checks": [f.as_dict() for f in findings]}, ensure_ascii=False))
    else:
        print(format_findings(findings))
    return code


def register(subparsers: Subparsers) -> None:
    """Add ``doctor``."""
    help_ = "check everything syncing depends on, and say how to fix what is wrong"
    sp = add_command(subparsers, "doctor", cmd_doctor, help_, description=help_ + ". Exit 0 when syncing can work "
                     "(warnings only limit comfort), 1 when a check failed.")
    sp.add_argument("--json", action="store_true", help='print {"ok", "checks": [{check, level, message, fix}]}')
