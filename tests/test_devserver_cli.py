"""``python -m ohsync.devserver`` runs as a separate process, seeds libraries
and keeps its state in ``--data`` across restarts."""
from __future__ import annotations

import subprocess
import sys

import httpx


def _start(data, tmp_path, *extra):
    proc = subprocess.Popen([sys.executable, "-m", "ohsync.devserver", "--host", "127.0.0.1", "--port", "0",
                             "--data", str(data), "--user", "me@example.edu.cn:pw", *extra],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    assert line.startswith("devserver ready at http://127.0.0.1:"), (line, proc.stderr.read() if proc.poll() else "")
    return proc, line.rsplit(" ", 1)[1].strip()


def test_cli_seeds_library_and_persists(tmp_path):
    tree = tmp_path / "tree"
    (tree / "Files").mkdir(parents=True)
    (tree / "Files" / "a.md").write_text("hello\n")
    data = tmp_path / "data"
    proc, url = _start(data, tmp_path, "--library", f"OH-Memory={tree}")
    try:
        tok = httpx.post(f"{url}/api2/auth-token/", data={"username": "me@example.edu.cn", "password": "pw"}).json()
        h = {"Authorization": f"Token {tok['token']}"}
        repos = httpx.get(f"{url}/api2/repos/", headers=h).json()
        assert [r["name"] for r in repos] == ["OH-Memory"]
        r = httpx.get(f"{url}/api2/repos/{repos[0]['id']}/dir/", params={"p": "/Files"}, headers=h)
        assert r.json()[0]["id"] == "4226e5b3d7da1a4575241f9501f9882aee9b5ea9"
        assert httpx.get(f"{url}/_devserver/counters").json()["total"] == 3
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    proc, url = _start(data, tmp_path, "--library", f"OH-Memory={tree}")
    try:
        r = httpx.get(f"{url}/api2/repos/", headers=h)
        assert [x["id"] for x in r.json()] == [repos[0]["id"]]  # not seeded twice, token kept
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_cli_usage_errors(tmp_path):
    r = subprocess.run([sys.executable, "-m", "ohsync.devserver", "--data", str(tmp_path), "--user", "nocolon"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "EMAIL:PASSWORD" in r.stderr


def test_help_names_the_default_account_and_who_owns_a_seeded_library(capsys):
    import pytest

    from ohsync.devserver.__main__ import parse_args

    with pytest.raises(SystemExit):
        parse_args(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "default user@example.edu.cn:secret" in out and "owned by the first --user" in out
