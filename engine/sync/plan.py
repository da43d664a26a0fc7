"""The planning steps of a pass: look at both sides of each path and pick its action.

:class:`PlanSteps` is the lowest layer of :class:`~ohsync.engine.sync.engine.SyncEngine`
(``PlanSteps`` → ``RunSteps`` → ``FolderSteps`` → ``SyncEngine``): it stats
local paths, classifies each side against the base (same, changed, gone,
absent), and turns the pair into a :class:`~ohsync.engine.sync.valve.Plan` through
the reconciliation table (``reconcile.action_for``).  It writes nothing but a
refreshed fingerprint of a file that was touched and not changed.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

from .. import local_limits
from ..context import EngineOptions, MirrorContext
from ..errors import LocalError, LocalNameError, local_error
from ..events import SyncEvent, SyncReport
from ..failures import FailureBook
from ..ignore import IgnoreRules
from ..library import probe_case_insensitive
from ..local_lookups import stat_or_none
from ..localfs import LocalFile, find_decomposed, hash_file, stat_fingerprint
from ..models import RemoteEntry
from ..nofollow import OutsideMirrorError, special_kind, symlink_on_the_way
from ..paths import name_problem
from ..state import Base, StateStore
from .pending import PendingLedger
from .reconcile import Action, Side, action_for
from .valve import Plan

__all__ = ["PlanSteps"]

#: What a path too long for this disk is remembered against in the failure
#: book: its name, not its content, is the trouble (a rename makes a new path).
_TOO_LONG = ("too long here",)


class PlanSteps:
    """Planning helpers shared by the layers of the sync engine (no public API).

    The attributes below are set by ``SyncEngine.__init__``.
    """

    ctx: MirrorContext
    state: StateStore
    options: EngineOptions
    local_root: Path
    ignore: IgnoreRules
    failure_book: FailureBook
    executor: Any
    _case_insensitive: bool | None
    _skipped_remote: list[tuple[str, str]]
    _paused_paths: dict[str, tuple[Any, str]]
    _quiet_pauses: set[str]
    #: files of this pass a program holds open, which a folder of the server's would replace
    _writer_held: set[str]
    _pending: PendingLedger

    def _case_clashes(self, bases: dict[str, Base], report: SyncReport) -> set[str]:
        """Remote paths this disk cannot hold because they differ only by case.

        On a case-insensitive file system (macOS, Windows defaults) ``A.md``
        and ``a.md`` would overwrite each other: the one already synced (or
        the first in sort order) is kept, the others are skipped and listed.
        """
        if self._case_insensitive is None:
            self._case_insensitive = probe_case_insensitive(self.local_root)
        if not self._case_insensitive:
            return set()
        groups: dict[str, list[str]] = {}
        for path in self.ctx.snapshot:
            groups.setdefault(path.casefold(), []).append(path)
        clashing: set[str] = set()
        for paths in groups.values():
            if len(paths) < 2:
                continue
            keep = next((p for p in sorted(paths) if p in bases), sorted(paths)[0])
            for other in paths:
                if other != keep:
                    clashing.add(other)
                    report.skipped.append((other, f"differs only by letter case from {keep}; "
                                                  "this disk cannot hold both"))
        self._skipped_remote = [s for s in self._skipped_remote if s[0] not in clashing] + \
            [s for s in report.skipped if s[0] in clashing]
        return clashing

    def _too_long_here(self, candidates: set[str], local: dict[str, LocalFile], report: SyncReport) -> set[str]:
        """Remote paths this disk cannot hold (a name or the whole path too long):
        skipped, so the rest of the pass goes on, and named once as a failure.

        Every such path is charged to the shallowest folder (or file) on its
        way that is too long, so a folder too deep for this disk is one
        failure however many files it holds.  The failure needs the person
        (a rename on the server) and is not looked at again until it changes
        or the person runs ``ohsync refresh``; no request is made for it.

        :returns: the candidates to leave out of this pass.
        """
        for item in self.failure_book.items():
            if item.version == _TOO_LONG and item.path not in self.ctx.snapshot:
                self.failure_book.succeeded(item.path)  # renamed or removed on the server: settled
        name_max, path_max = local_limits.limits(self.local_root)
        root_bytes = len(os.fsencode(str(self.local_root)))
        out: set[str] = set()
        tops: set[str] = set()
        for rel in candidates:
            if rel in local or rel not in self.ctx.snapshot:
                continue
            size = len(rel.encode("utf-8", "surrogateescape"))
            if size + root_bytes + 1 < path_max and size <= name_max:
                continue  # the usual case, decided without looking at each name
            top = self._first_too_long(rel)
            if top is not None:
                out.add(rel)
                tops.add(top)
        for top in sorted(tops):
            if self.failure_book.held(top, _TOO_LONG) is not None:
                continue
            problem = local_limits.path_too_long(self.local_root, self.ctx.local_path(top)) or "too long for this disk"
            inside = sum(1 for p, e in self.ctx.snapshot.items() if not e.is_dir and p.startswith(top + "/"))
            held = "" if not inside else " (1 file inside waits with it)" if inside == 1 else \
                f" ({inside:,} files inside wait with it)"
            exc = LocalNameError(f"{top}: {problem}; rename it on the server (a shorter name or fewer "
                                 f"folders){held}", path=top)
            self.failure_book.record(top, exc, _TOO_LONG)
            message = f"{exc} (not retried until it changes or you run `ohsync refresh`)"
            report.errors.append((top, message))
            self.ctx.emit(SyncEvent("error", top, message=message))
        return out

    def _first_too_long(self, rel: str) -> str | None:
        """The shallowest of ``rel`` and its folders that this disk cannot hold, or None."""
        parts = rel.split("/")
        for i in range(1, len(parts) + 1):
            sub = "/".join(parts[:i])
            if local_limits.path_too_long(self.local_root, self.ctx.local_path(sub)) is not None:
                return sub
        return None

    def _remote_differences(self, bases: dict[str, Base]) -> set[str]:
        """Rel paths (files and folders) whose remote entry differs from its base."""
        snap = self.ctx.snapshot
        out = {p for p, e in snap.items()
               if p not in bases or bases[p].is_dir != e.is_dir or (not e.is_dir and bases[p].remote_id != e.id)}
        out |= {p for p in bases if p not in snap}
        return out

    def _stat_paths(self, paths: set[str]) -> dict[str, LocalFile]:
        found: dict[str, LocalFile] = {}
        for rel in paths:
            if not rel or name_problem(rel) or self._through_symlink(rel):
                continue
            try:
                st = os.lstat(self.ctx.local_path(rel))
            except FileNotFoundError:
                # the watcher names paths composed (NFC); the file may be written decomposed
                if not find_decomposed(self.local_root, rel):
                    continue
                renamed = stat_or_none(self.ctx.local_path(rel), follow=False)
                if renamed is None:
                    continue
                st = renamed
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                found[rel] = LocalFile(rel, True)
            elif stat.S_ISREG(st.st_mode):
                found[rel] = LocalFile(rel, False, stat_fingerprint(st))
        return found

    def _classify_local(self, rel: str, entry: LocalFile | None,
                        base: Base | None) -> tuple[Side, tuple[int, int, int] | None]:
        if entry is None:
            return (Side.GONE if base is not None else Side.ABSENT), None
        if base is None:
            return Side.CHANGED, entry.fingerprint
        if entry.fingerprint == base.fingerprint():
            return Side.SAME, entry.fingerprint
        sha1, _, _, fp = hash_file(self.ctx.local_path(rel), root=self.local_root)
        if sha1 == base.sha1:
            # Touched, not changed: remember the new fingerprint.
            self.state.set_base(Base(rel, False, base.sha1, base.remote_id, *fp),
                                self.state.base_content(base))
            return Side.SAME, fp
        return Side.CHANGED, fp

    @staticmethod
    def _classify_remote(remote: RemoteEntry | None, base: Base | None) -> Side:
        if remote is None:
            return Side.GONE if base is not None and base.remote_id else Side.ABSENT
        if base is not None and base.remote_id == remote.id:
            return Side.SAME
        return Side.CHANGED

    def _special_entry(self, rel: str) -> str | None:
        """Why ``rel`` is skipped when its local entry is a link, FIFO, socket or device
        (:func:`~ohsync.engine.nofollow.special_kind`); None for a file, a folder or nothing."""
        st = stat_or_none(self.ctx.local_path(rel), follow=False)
        return special_kind(st.st_mode) if st is not None else None

    def _through_symlink(self, rel: str) -> bool:
        """True when a folder on the way to ``rel`` is a symbolic link here:
        writing or deleting there would touch files outside the mirror."""
        return symlink_on_the_way(self.local_root, rel) is not None

    def _plan_file(self, rel: str, entry: LocalFile | None, remote: RemoteEntry | None,
                   base: Base | None, report: SyncReport) -> Plan | None:
        """Classify both sides of one file and pick its action."""
        if self._through_symlink(rel):
            report.skipped.append((rel, "inside a symbolic link to a folder (not followed)"))
            return None
        kind = self._special_entry(rel) if entry is None else None
        if kind is not None:
            # a link, FIFO, socket or device where a file is (or could be) synced: left alone on
            # both sides (neither a delete on the server nor a download over it) until it is a file again
            report.skipped.append((rel, kind))
            return None
        try:
            local_side, fp = self._classify_local(rel, entry, base)
        except OutsideMirrorError as exc:  # became a link or a FIFO since the scan
            st = stat_or_none(self.ctx.local_path(rel), follow=False)
            report.skipped.append((rel, (special_kind(st.st_mode) if st is not None else None) or str(exc)))
            return None
        except LocalError as exc:
            report.errors.append((rel, str(exc)))
            return None
        except OSError as exc:
            report.errors.append((rel, str(local_error(exc, rel, what="reading the file"))))
            return None
        action = action_for(local_side, self._classify_remote(remote, base))
        if action is Action.NOTHING:
            return None
        return Plan(rel, action, entry, remote, base, fp)
