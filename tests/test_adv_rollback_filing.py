"""Adversarial checks of a rollback's hold on pushes outside a sync pass and
of the status while a dropped document waits for the person."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

from daemon_helpers import wait_for
from test_filing import env  # noqa: F401  (env: the fixture)
from test_filing_drop_odd import run_service


def test_a_refused_link_in_a_folder_moved_out_of_the_drop_folder_leaves_the_status(env, tmp_path):
    results: list = []
    service, worker = run_service(env, results)
    try:
        target = tmp_path / "elsewhere.txt"
        target.write_bytes(b"not for filing\n")
        (env.drop / "scans").mkdir()
        os.symlink(target, env.drop / "scans" / "link.txt")
        wait_for(lambda: [Path(r["path"]).name for r in service.status()["refused"]] == ["link.txt"],
                 what="the link refused")
        shutil.move(env.drop / "scans", tmp_path / "scans-kept")  # one event: the folder left
        wait_for(lambda: service.status()["refused"] == [], what="the link left the status with its folder")
    finally:
        service.stop()
        worker.stop()
