"""The conflict resolver's table (engine/merge/resolve.py), one case per row,
plus where each copy goes and under which name."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from ohsync.engine.merge.choose import merge_versions
from ohsync.engine.merge.resolve import FIGHT_LIMIT, REASONS, Copy, Decision, Facts, Outcome, Situation, decide
from ohsync.engine.merge.text import MergeResult

WHEN = datetime(2026, 12, 1, 8, 2, 24, tzinfo=timezone.utc)
SF = "notes/plan (SFConflict anna@example.org 2026-12-01-08-02-24).md"

OURS, THEIRS, MERGED, PARTIAL = b"ours\n", b"theirs\n", b"ours\ntheirs\n", b"ours, merged parts\n"
CLEAN = MergeResult(MERGED, [])
TO_THEIRS = MergeResult(THEIRS, [])
TO_OURS = MergeResult(OURS, [])
PARTLY = MergeResult(None, ["frontmatter field 'sensitivity'"], partial=PARTIAL,
                     details=["field 'sensitivity': the live file keeps 'low'; the conflict copy holds 'high'"])
NOT_AT_ALL = MergeResult(None, ["lines 1-1"])
BINARY = MergeResult(None, ["binary or non-UTF-8 content"])


def _upload(reason: str, fields: tuple[str, ...], origin: str = "remote", source: str = "notes/plan.md") -> Copy:
    return Copy("upload", source, origin, reason, fields)


ROWS = [
    pytest.param(Facts(Situation.EDIT, "notes/plan.md", OURS, THEIRS, TO_THEIRS),
                 Decision(Outcome.THEIRS_WINS, live=THEIRS), id="edit-clean-to-theirs"),
    pytest.param(Facts(Situation.EDIT, "notes/plan.md", OURS, THEIRS, CLEAN),
                 Decision(Outcome.MERGED, live=MERGED), id="edit-clean-merge"),
    pytest.param(Facts(Situation.EDIT, "notes/plan.md", OURS, THEIRS, TO_OURS),
                 Decision(Outcome.MERGED, live=OURS), id="edit-clean-theirs-already-in-ours"),
    pytest.param(Facts(Situation.EDIT, "notes/plan.md", OURS, THEIRS, PARTLY),
                 Decision(Outcome.BOTH_KEPT, live=PARTIAL, copy=_upload(
                     "everything else merged into the live file; not merged: " + PARTLY.details[0],
                     ("frontmatter field 'sensitivity'",))), id="edit-partial"),
    pytest.param(Facts(Situation.EDIT, "notes/plan.md", OURS, THEIRS, NOT_AT_ALL),
                 Decision(Outcome.OURS_WINS, copy=_upload(REASONS[Situation.EDIT], ("lines 1-1",))),
                 id="edit-no-merge"),
    pytest.param(Facts(Situation.EDIT, "Files/a.bin", b"\x00a", b"\x00b", BINARY),
                 Decision(Outcome.OURS_WINS, copy=_upload(REASONS[Situation.EDIT], ("binary or non-UTF-8 content",),
                                                          source="Files/a.bin")), id="edit-binary"),
    pytest.param(Facts(Situation.LARGE, "Files/video.mp4"),
                 Decision(Outcome.OURS_WINS, copy=Copy("move", "Files/video.mp4", "remote",
                                                       REASONS[Situation.LARGE], ("content",))), id="large"),
    pytest.param(Facts(Situation.SEAFILE_COPY, "notes/plan.md", OURS, THEIRS, CLEAN, source=SF),
                 Decision(Outcome.MERGED, live=MERGED, drop_source=True), id="seafile-clean"),
    pytest.param(Facts(Situation.SEAFILE_COPY, "notes/plan.md", OURS, THEIRS, PARTLY, source=SF),
                 Decision(Outcome.BOTH_KEPT, live=PARTIAL, copy=Copy(
                     "move", SF, "anna", REASONS[Situation.SEAFILE_COPY], ("frontmatter field 'sensitivity'",),
                     "Seafile conflict file archived as {stored}")), id="seafile-partial"),
    pytest.param(Facts(Situation.SEAFILE_COPY, "notes/plan.md", OURS, THEIRS, NOT_AT_ALL, source=SF),
                 Decision(Outcome.OURS_WINS, copy=Copy(
                     "move", SF, "anna", REASONS[Situation.SEAFILE_COPY], ("lines 1-1",),
                     "Seafile conflict file archived as {stored}")), id="seafile-no-merge"),
    pytest.param(Facts(Situation.SEAFILE_COPY, "notes/plan.md", source=SF),
                 Decision(Outcome.OURS_WINS, copy=Copy(
                     "move", SF, "anna", REASONS[Situation.SEAFILE_COPY], ("content",),
                     "Seafile conflict file archived as {stored}")), id="seafile-not-merged"),
    pytest.param(Facts(Situation.ROLLBACK, "notes/plan.md", OURS, THEIRS),
                 Decision(Outcome.OURS_WINS, copy=_upload(REASONS[Situation.ROLLBACK],
                                                          ("older server version after a restore",))),
                 id="rollback"),
]


@pytest.mark.parametrize(("facts", "expected"), ROWS)
def test_resolver_table_row(facts: Facts, expected: Decision) -> None:
    assert decide(facts) == expected


def _memory(origin: str, body: str) -> bytes:
    return f"---\ntitle: Plan\norigin: {origin}\n---\n\n{body}\n".encode()


def test_copy_is_named_after_the_origin_of_theirs() -> None:
    decision = decide(Facts(Situation.EDIT, "notes/plan.md", _memory("laptop", "a"), _memory("android", "b"),
                            NOT_AT_ALL))
    assert decision.copy is not None and decision.copy.origin == "android"
    assert decision.copy.path("notes/plan.md", lambda p: False, WHEN) == \
        ".conflict/notes/plan__android__20261201T080224Z.md"


def test_copy_is_named_remote_when_the_live_version_carries_the_same_origin() -> None:
    decision = decide(Facts(Situation.ROLLBACK, "notes/plan.md", _memory("android", "a"), _memory("android", "b")))
    assert decision.copy is not None and decision.copy.origin == "remote"


def test_partial_merge_origin_is_compared_with_what_stays_live() -> None:
    partial = _memory("android", "merged")
    merge = MergeResult(None, ["lines 6-6"], partial=partial, details=["x"])
    decision = decide(Facts(Situation.EDIT, "notes/plan.md", _memory("laptop", "a"), _memory("android", "b"), merge))
    assert decision.live == partial
    assert decision.copy is not None and decision.copy.origin == "remote"


def test_copy_name_is_numbered_when_taken_and_goes_into_the_working_conflict_folder() -> None:
    copy = decide(Facts(Situation.LARGE, "Files/video.mp4")).copy
    assert copy is not None
    taken = {".conflict_ohsync/Files/video__remote__20261201T080224Z.mp4"}
    assert copy.path("Files/video.mp4", taken.__contains__, WHEN, ".conflict_ohsync") == \
        ".conflict_ohsync/Files/video__remote__20261201T080224Z-2.mp4"


def test_seafile_user_is_made_safe_for_a_file_name() -> None:
    source = "a (SFConflict j.doe+x@example.org 2026-12-01-08-02-24).txt"
    copy = decide(Facts(Situation.SEAFILE_COPY, "a.txt", source=source)).copy
    assert copy is not None and copy.origin == "j-doe-x"


def test_edit_and_rollback_need_theirs_bytes() -> None:
    with pytest.raises(ValueError):
        decide(Facts(Situation.EDIT, "a.md", OURS, None, NOT_AT_ALL))
    with pytest.raises(ValueError):
        decide(Facts(Situation.ROLLBACK, "a.md", OURS, None))


def test_real_memory_merge_with_one_conflicting_field_keeps_both() -> None:
    base = b"---\ntitle: Plan\nsensitivity: low\n---\n\n## Observations\n- [fact] one\n"
    ours = b"---\ntitle: Plan\nsensitivity: medium\n---\n\n## Observations\n- [fact] one\n- [fact] ours\n"
    theirs = b"---\ntitle: Plan\nsensitivity: high\n---\n\n## Observations\n- [fact] one\n- [fact] theirs\n"
    result = merge_versions("notes/plan.md", base, ours, theirs)
    decision = decide(Facts(Situation.EDIT, "notes/plan.md", ours, theirs, result))
    assert decision.outcome is Outcome.BOTH_KEPT
    assert decision.live is not None and b"- [fact] ours" in decision.live and b"- [fact] theirs" in decision.live
    assert decision.copy is not None and decision.copy.how == "upload"
    assert decision.copy.reason.startswith("everything else merged into the live file; not merged: ")


def test_a_path_that_keeps_conflicting_is_paused_and_nothing_is_archived() -> None:
    facts = Facts(Situation.EDIT, "notes/plan.md", OURS, THEIRS, NOT_AT_ALL, recent_conflicts=FIGHT_LIMIT)
    assert decide(facts) == Decision(Outcome.PAUSED)


def test_fewer_recent_conflicts_still_archive_and_a_clean_merge_is_never_paused() -> None:
    below = Facts(Situation.EDIT, "notes/plan.md", OURS, THEIRS, NOT_AT_ALL, recent_conflicts=FIGHT_LIMIT - 1)
    assert decide(below).outcome is Outcome.OURS_WINS
    clean = Facts(Situation.EDIT, "notes/plan.md", OURS, THEIRS, CLEAN, recent_conflicts=FIGHT_LIMIT + 5)
    assert decide(clean) == Decision(Outcome.MERGED, live=MERGED)
