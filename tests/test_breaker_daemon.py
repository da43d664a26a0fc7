"""Breaker: the real daemon with bad config values, and the mirror root removed while it runs."""

from __future__ import annotations

import os
import shutil
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import USER, wait_for


@pytest.fixture
def env(seed_daemon):
    return seed_daemon(put={f"/n/f{i}.md": f"file {i}\n".encode() for i in range(12)}, config=False)


def _base_toml(s, extra_top: str = "", mirror_extra: str = "", tail: str = "") -> str:
    return (f'server = "{s.srv.url}"\nusername = "{USER}"\npoll_interval = 1\n'
            f'state_dir = "{s.env.root / "state"}"\n{extra_top}\n'
            f'[[mirror]]\nlibrary = "OH-Memory"\nlocal = "{s.mirror}"\n{mirror_extra}\n{tail}\n')


BAD = {
    "negative_backup_days": dict(tail="[safety]\nbackup_days = -1\n"),
    "nan_poll_interval": dict(extra_top="", tail=""),  # patched below
    "empty_local": dict(),  # patched below
    "rules_not_tables": dict(tail='[filing]\nrules = ["*.pdf"]\n'),
    "bad_ignore_pattern": dict(mirror_extra='ignore = ["a/**/[", "!"]\n'),
    "drop_dir_is_mirror": dict(),  # patched below
    "negative_delete_percent": dict(tail="[safety]\nmax_delete_percent = -5\n"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_config_is_a_clear_error(env, case):
    s = env
    text = _base_toml(s, **BAD[case])
    if case == "nan_poll_interval":
        text = text.replace("poll_interval = 1", "poll_interval = nan")
    if case == "empty_local":
        text = text.replace(f'local = "{s.mirror}"', 'local = ""')
    if case == "drop_dir_is_mirror":
        text += f'[filing]\ndrop_dir = "{s.mirror}"\n'
    s.env.config.write_text(text, encoding="utf-8")
    p = s.start()
    filing_case = case in ("drop_dir_is_mirror", "rules_not_tables")
    # until it exits or, for a filing value, says it runs with filing off (it then keeps running)
    wait_for(lambda: p.proc.poll() is not None or (filing_case and "filing is off:" in p.output()), timeout=12,
             interval=0.2, what=f"the daemon to refuse the config ({case})", seen=lambda: p.output()[-1500:])
    out = p.output()
    assert "Traceback" not in out, out[-3000:]
    if filing_case and "filing is off:" in out:
        return  # refused with a clear message, filing off: acceptable
    assert p.proc.poll() is not None and p.proc.returncode != 0, \
        f"daemon accepted the config ({case}); output:\n{out[-1500:]}"


def test_mirror_root_removed_while_daemon_runs(env):
    s = env
    s.configure(poll_interval=1.0)
    p = s.start(wait="idle", timeout=60)
    before = s.srv.tree(s.repo_id)
    shutil.rmtree(s.mirror)
    st = p.wait_state("stopped", "error", timeout=30)
    time.sleep(3)  # why: a quiet period of three poll intervals: nothing deleted on the server
    assert s.srv.tree(s.repo_id) == before
    assert "Traceback" not in p.output()
    # the folder comes back empty (mount point): still nothing deleted on the server
    s.mirror.mkdir()
    p.cli("refresh")
    time.sleep(5)  # why: a quiet period of five poll intervals after the refresh: still nothing deleted
    after = s.srv.tree(s.repo_id)
    assert {k: v for k, v in after.items() if not k.startswith("/.trash/")} == before, st
