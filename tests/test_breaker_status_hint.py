"""The attention summary's hint for names that cannot sync fits every reason they have."""

from __future__ import annotations

from ohsync.daemon.attention import summary


def test_cannot_sync_hint_points_to_the_reasons_not_to_a_rename() -> None:
    # the skipped list holds symbolic links and "two writers keep changing it" too:
    # renaming fixes neither, so the summary sends the person to the listed reasons (status,
    # the tray's Details and the panel list each one below it; naming `ohsync status` would be
    # circular where the summary is status's own first line)
    msg = summary(held=0, damaged=0, skipped=2)
    assert "2 names that cannot sync" in msg
    assert "rename" not in msg and "listed with its reason" in msg and "ohsync status" not in msg
