"""``bench/run.py --server URL``: the bench pointed at a server of one's own.

devserver runs here as a separate process and is used only through the Web
API a real Seafile server has (no ``/_devserver/`` call, neither by the bench
nor by these tests): the run makes its scratch libraries, writes its table with
the server's version to the ``--results`` file (never ``bench/RESULTS.md``),
counts the requests on the tools' side and deletes the scratch libraries at
the end, also when it is interrupted.
"""
from __future__ import annotations

import hashlib
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[1]
USER, PASSWORD = "bench@example.org", "pw-of-bench"


@pytest.fixture
def server(tmp_path):
    """A devserver process reached like a real server: ``(url, token)``."""
    proc = subprocess.Popen([sys.executable, "-m", "ohsync.devserver", "--host", "127.0.0.1", "--port", "0",
                             "--data", str(tmp_path / "server-data"), "--user", f"{USER}:{PASSWORD}"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        m = re.search(r"ready at (\S+)", line)
        assert m, f"devserver did not start: {line!r}"
        url = m.group(1)
        token = httpx.post(f"{url}/api2/auth-token/", data={"username": USER, "password": PASSWORD}).json()["token"]
        yield url, token
    finally:
        proc.terminate()
        proc.wait(10)


def _libraries(url: str, token: str) -> list[str]:
    r = httpx.get(f"{url}/api2/repos/", headers={"Authorization": f"Token {token}"})
    r.raise_for_status()
    return sorted(lib["name"] for lib in r.json())


def _bench(url: str, tmp_path: Path, *extra: str) -> list[str]:
    return [sys.executable, str(REPO / "bench" / "run.py"), "--server", url, "--username", USER,
            "--files", "30", "--results", str(tmp_path / "RESULTS-real.md"), "--out", str(tmp_path / "out"), *extra]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_run_against_a_server_writes_its_table_and_deletes_its_scratch_libraries(server, tmp_path):
    url, token = server
    version = httpx.get(f"{url}/api2/server-info/").json()["version"]
    devserver_results = _digest(REPO / "bench" / "RESULTS.md")
    cp = subprocess.run(_bench(url, tmp_path, "--password-stdin", "--only", "cold,idle,push,daemon,save",
                               "--saves", "2", "--save-rclone-runs", "1"),
                        input=PASSWORD + "\n", capture_output=True, text=True, timeout=300, cwd=REPO)
    assert cp.returncode == 0, cp.stdout[-3000:] + cp.stderr[-3000:]
    assert "scratch library filled: 30 files" in cp.stdout       # made and filled through the Web API
    assert _libraries(url, token) == []                          # and deleted at the end
    table = (tmp_path / "RESULTS-real.md").read_text(encoding="utf-8")
    assert f"Server: {url}, Seafile {version}" in table           # the server's version in the header
    rows = {cells[1]: cells for cells in (
        [c.strip() for c in line.strip("|").split("|")] for line in table.splitlines() if line.startswith("| "))}
    for figure in ("cold mirror of 30 files", "idle poll (full pass)", "local save -> verified remote (1 file)",
                   "daemon start to idle, 30 files", "local save -> verified on server, daemon (p50 of 2)"):
        assert figure in rows, (figure, table)
        assert int(rows[figure][3]) > 0, rows[figure]            # requests counted by ohsync itself
    if shutil.which("rclone"):
        assert rows["cold mirror of 30 files"][4] == "rclone" and int(rows["cold mirror of 30 files"][6]) > 0
    assert "skipped" not in table and "ERR" not in table, table
    assert _digest(REPO / "bench" / "RESULTS.md") == devserver_results  # devserver's table untouched


def test_an_interrupted_run_still_deletes_its_scratch_libraries(server, tmp_path):
    url, token = server
    proc = subprocess.Popen(_bench(url, tmp_path, "--token-stdin", "--only", "upload", "--runs", "3"),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=REPO)
    assert proc.stdin and proc.stdout
    proc.stdin.write(token + "\n")
    proc.stdin.close()
    out = []
    deadline = time.monotonic() + 120
    for line in proc.stdout:  # interrupted once the scenario runs, while its libraries exist
        out.append(line)
        if "upload (no latency) run 1" in line or time.monotonic() > deadline:
            break
    assert any(n.startswith("ohsync-bench-") for n in _libraries(url, token)), "".join(out)
    proc.send_signal(signal.SIGINT)
    rest = proc.stdout.read()
    proc.wait(120)
    assert proc.returncode != 0
    assert "deleting the scratch libraries" in rest, "".join(out) + rest
    assert _libraries(url, token) == []


class _AnswerLostOnCreate(httpx.HTTPTransport):
    """Ctrl-C while ``POST /api2/repos/`` is in flight: the server makes the
    library, the run never reads the answer (nor the library's id)."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.method == "POST" and request.url.path == "/api2/repos/":
            response.read()
            response.close()
            raise KeyboardInterrupt
        return response


def test_a_library_whose_create_was_cut_short_is_deleted_by_its_name(server):
    sys.path.insert(0, str(REPO / "bench"))
    from real_server import RealServer

    url, token = server
    other = RealServer(url, USER, token=token)  # another run's library, same account and second
    other.repo_id("Main")
    srv = RealServer(url, USER, token=token)
    assert srv.prefix != other.prefix
    srv.repo_id("Main")
    srv.http = httpx.Client(base_url=srv.url, headers=srv.http.headers, transport=_AnswerLostOnCreate())
    with pytest.raises(KeyboardInterrupt):
        srv.repo_id("Upload-0-1")
    assert srv.lib_name("Upload-0-1") in _libraries(url, token) and "Upload-0-1" not in srv.created
    srv.stop()
    assert _libraries(url, token) == [other.lib_name("Main")]  # ours both gone, the other run's kept
    other.stop()
    assert _libraries(url, token) == []


def test_a_run_against_a_server_refuses_to_overwrite_devservers_table(tmp_path):
    cp = subprocess.run([sys.executable, str(REPO / "bench" / "run.py"), "--server", "http://127.0.0.1:9",
                         "--username", USER, "--password-stdin", "--results", str(REPO / "bench" / "RESULTS.md")],
                        input="x\n", capture_output=True, text=True, timeout=60, cwd=REPO)
    assert cp.returncode == 2 and "bench/RESULTS.md holds devserver's figures" in cp.stderr
    cp = subprocess.run([sys.executable, str(REPO / "bench" / "run.py"), "--server", "http://127.0.0.1:9",
                         "--username", USER, "--password-stdin", "--only", "quiet"],
                        input="x\n", capture_output=True, text=True, timeout=60, cwd=REPO)
    assert cp.returncode == 2 and "quiet need devserver" in cp.stderr


def test_file_server_requests_are_keyed_alike_below_seafhttp_or_on_a_port_of_its_own():
    sys.path.insert(0, str(REPO / "bench"))
    from real_server import endpoint_key

    tok = "0b4a5c1e-1111-2222-3333-444455556666"
    assert endpoint_key("get", f"http://h/seafhttp/files/{tok}/%E5%A4%A7.md") == "GET /seafhttp/files/{token}/…"
    assert endpoint_key("get", f"http://h:8082/files/{tok}/%E5%A4%A7.md") == "GET /seafhttp/files/{token}/…"
    assert endpoint_key("POST", f"http://h:8082/upload-api/{tok}?ret-json=1") == "POST /seafhttp/upload-api/{token}"
    assert endpoint_key("GET", f"http://h:8082/zip/{tok}") == "GET /seafhttp/zip/{token}"
    assert endpoint_key("GET", f"http://h/api2/repos/{tok}/file/?p=/x") == "GET /api2/repos/{id}/file/"
