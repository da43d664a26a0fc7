"""devserver driven by rclone, a real Seafile client written by others.

rclone's ``seafile`` backend (Debian's rclone 1.60; install with
``bash .ci/rclone-deps.sh``) is pointed at the ``devserver`` fixture with
``--config /dev/null`` and ``RCLONE_CONFIG_DS_*`` variables (password
obscured with ``rclone obscure``).  It creates a library, copies the sample
trees (CJK names, nested folders, a 249-byte name, binary files) up, lists,
checks, syncs local modifications and deletions, renames a file and a
folder, deletes a file, purges a folder, copies everything back and
compares byte for byte, then runs ``rclone bisync`` for two rounds with a
change on each side.  After every step devserver's tree must equal the
expected tree, and rclone must report no error (``--retries 1
--low-level-retries 1``: a retried request would hide a devserver bug).

bisync: rclone 1.60's bisync refuses any remote without modification-time
support ("modification time support is missing on path1"), and its seafile
backend has none (``Precision() = ModTimeNotSupported``), so bisync runs
against ``rclone serve webdav ds:LIB`` (the seafile backend behind rclone's
WebDAV server, vendor ``owncloud`` for 1 s mtimes).  Every byte still goes
through the seafile backend to devserver; the front is restarted between the
rounds so its directory cache cannot hide the server-side change.
"""
from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from daemon_helpers import wait_for

USER, PASSWORD = "user@example.edu.cn", "secret"  # the ``devserver`` fixture's account (conftest.py)
LIB = "rclone-测试"
RCLONE = shutil.which("rclone")
TIMEOUT = 60


SAMPLES = Path(__file__).resolve().parent / "data" / "samples"


def local_tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` as ``{"/a/b.md": content}`` (devserver.tree's shape)."""
    return {"/" + p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def local_dirs(root: Path) -> set[str]:
    """Every folder under ``root`` as ``/a/b`` (devserver.dirs' shape)."""
    return {"/" + p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_dir()}


class Rclone:
    """Runs rclone with a throw-away environment and reports failures readably."""

    def __init__(self, url: str, work: Path) -> None:
        self.work = work
        env = {k: v for k, v in os.environ.items() if not k.startswith("RCLONE_")}
        obscured = subprocess.run([RCLONE, "obscure", PASSWORD], capture_output=True, text=True,
                                  check=True, timeout=TIMEOUT).stdout.strip()
        env.update({
            "RCLONE_CONFIG_DS_TYPE": "seafile",
            "RCLONE_CONFIG_DS_URL": url + "/",
            "RCLONE_CONFIG_DS_USER": USER,
            "RCLONE_CONFIG_DS_PASS": obscured,
            "RCLONE_CONFIG_DS_CREATE_LIBRARY": "true",
            "HOME": str(work),
            "XDG_CACHE_HOME": str(work / "cache"),
        })
        self.env = env
        self.last_log = ""
        self.base = [RCLONE, "--config", "/dev/null", "--cache-dir", str(work / "cache"),
                     "--retries", "1", "--low-level-retries", "1", "-v"]

    def __call__(self, *args: str, allow: tuple[str, ...] = ()) -> str:
        """Run one rclone command; it must exit 0 and log no ERROR (except ``allow``)."""
        cmd = self.base + list(args)
        proc = subprocess.run(cmd, capture_output=True, text=True, env=self.env, timeout=TIMEOUT,
                              cwd=self.work, check=False)
        self.last_log = proc.stderr
        errors = [line for line in proc.stderr.splitlines()
                  if (" ERROR " in line or "Failed to" in line) and not any(a in line for a in allow)]
        assert proc.returncode == 0 and not errors, (
            f"rclone {' '.join(args)} exited {proc.returncode}:\n{proc.stderr[-4000:]}")
        return proc.stdout

    @contextmanager
    def webdav_front(self, remote: str, port: int) -> Iterator[str]:
        """``rclone serve webdav <remote>`` on ``port``; yields its URL."""
        log = self.work / f"webdav-{time.monotonic_ns()}.log"
        with log.open("w") as fh:
            proc = subprocess.Popen(self.base + ["serve", "webdav", remote, "--addr", f"127.0.0.1:{port}"],
                                    stdout=fh, stderr=subprocess.STDOUT, env=self.env, cwd=self.work)
        try:
            m = wait_for(lambda: re.search(r"Server started on (http://\S+?)/?$", log.read_text(), re.MULTILINE)
                         or proc.poll() is not None, timeout=20, what="rclone serve webdav to start",
                         seen=lambda: log.read_text()[-3000:])
            assert isinstance(m, re.Match), f"rclone serve webdav exited:\n{log.read_text()[-3000:]}"
            yield m.group(1)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def require_rclone() -> None:
    """A missing rclone FAILS the suite (never skips): CI must install it."""
    if RCLONE is None:
        pytest.fail("rclone is not installed: run `bash .ci/rclone-deps.sh` (Debian package rclone) "
                    "before the test suite", pytrace=False)


@pytest.fixture
def rclone(devserver, tmp_path) -> Rclone | None:
    return Rclone(devserver.url, tmp_path) if RCLONE else None


@pytest.fixture
def samples(tmp_path) -> Path:
    """A writable copy of the sample trees: ``OH-Memory/`` and ``Files/``."""
    shared = SAMPLES
    if not (shared / "OH-Memory").is_dir():
        pytest.fail(f"sample trees not found under {shared}", pytrace=False)
    src = tmp_path / "src"
    for name in ("OH-Memory", "Files"):
        shutil.copytree(shared / name, src / name)
    return src


def test_rclone_round_trip(devserver, rclone, samples, tmp_path):
    require_rclone()
    remote = f"ds:{LIB}"

    def server_matches(local: Path, what: str) -> None:
        tree = devserver.tree(rid)
        want = local_tree(local)
        assert sorted(tree) == sorted(want), what
        assert tree == want, what
        assert devserver.dirs(rid) == local_dirs(local), what

    # create the library through rclone (create_library = true)
    rclone("mkdir", remote)
    rid = devserver.library_id(LIB)
    assert rid is not None and devserver.tree(rid) == {}

    # copy the tree up; names with CJK, emoji, full-width punctuation, 249 bytes
    assert max(len(p.name.encode()) for p in samples.rglob("*")) > 240
    rclone("copy", str(samples), remote)
    server_matches(samples, "after copy")

    # list it
    listed = set(rclone("lsf", "-R", remote).splitlines())
    want = {p.lstrip("/") for p in local_tree(samples)} | {d.lstrip("/") + "/" for d in local_dirs(samples)}
    assert listed == want

    # check it (sizes: the seafile backend has no hash rclone knows)
    rclone("check", str(samples), remote, allow=("No common hash found",))
    assert "0 differences found" in rclone.last_log
    assert f"{len(local_tree(samples))} matching files" in rclone.last_log

    # sync after local modifications, additions and deletions
    with (samples / "OH-Memory" / "index.md").open("ab") as fh:
        fh.write("\n- [note] 同步测试追加的一行 #rclone\n".encode())
    (samples / "Files" / "learn" / "2026-2027-1" / "数据结构" / "作业1.docx").write_bytes(bytes(range(256)) * 64)
    new_dir = samples / "OH-Memory" / "新建文件夹" / "第二层"
    new_dir.mkdir(parents=True)
    (new_dir / "新笔记 (1).md").write_bytes("# 新笔记\n".encode())
    (samples / "OH-Memory" / "journal" / "2026-09.md").unlink()
    shutil.rmtree(samples / "Files" / "im")
    rclone("sync", str(samples), remote)
    server_matches(samples, "after sync")

    # rename a file (same folder), move a file (other folder), rename a folder
    tasks = samples / "OH-Memory" / "tasks"
    rclone("moveto", f"{remote}/OH-Memory/tasks/申请 SRT 项目.md",
           f"{remote}/OH-Memory/tasks/申请 SRT 项目（已提交）.md")
    (tasks / "申请 SRT 项目.md").rename(tasks / "申请 SRT 项目（已提交）.md")
    rclone("moveto", f"{remote}/OH-Memory/tasks/待办速记.md", f"{remote}/OH-Memory/knowledge/待办速记.md")
    (tasks / "待办速记.md").rename(samples / "OH-Memory" / "knowledge" / "待办速记.md")
    rclone("moveto", f"{remote}/OH-Memory/preferences", f"{remote}/OH-Memory/偏好设置")
    (samples / "OH-Memory" / "preferences").rename(samples / "OH-Memory" / "偏好设置")
    server_matches(samples, "after renames")

    # delete a file, purge a folder
    rclone("deletefile", f"{remote}/OH-Memory/journal/2026-10.md")
    (samples / "OH-Memory" / "journal" / "2026-10.md").unlink()
    rclone("purge", f"{remote}/Files/learn")
    shutil.rmtree(samples / "Files" / "learn")
    server_matches(samples, "after delete and purge")
    rclone("check", str(samples), remote, allow=("No common hash found",))
    assert "0 differences found" in rclone.last_log

    # copy it all back into a fresh folder: byte for byte
    back = tmp_path / "back"
    rclone("copy", remote, str(back))
    assert local_tree(back) == local_tree(samples) == devserver.tree(rid)


def test_rclone_bisync_two_rounds(devserver, rclone, samples, tmp_path):
    require_rclone()
    rid = devserver.create_library(USER, LIB, from_tree=samples)
    local, workdir = tmp_path / "bisync-local", tmp_path / "bisync-work"
    local.mkdir()
    # one port for both rounds: bisync names its listings after the remote's
    # config (the URL included), so the front must come back at the same URL
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    rclone.env.update({"RCLONE_CONFIG_WD_TYPE": "webdav", "RCLONE_CONFIG_WD_VENDOR": "owncloud",
                       "RCLONE_CONFIG_WD_URL": f"http://127.0.0.1:{port}/"})

    # round 1: --resync fills the empty local side from the library
    devserver.reset_counters()
    with rclone.webdav_front(f"ds:{LIB}", port):
        rclone("bisync", "wd:", str(local), "--resync", "--workdir", str(workdir))
    assert local_tree(local) == devserver.tree(rid) == local_tree(samples)
    # every non-empty file came through the seafile backend's downloads
    downloads = devserver.request_count("GET /seafhttp/files/{token}/{name}")
    assert downloads >= sum(1 for data in local_tree(samples).values() if data)

    # a change on each side
    devserver.put_file(rid, "/OH-Memory/tasks/服务器端新增.md", "# 另一台设备写的\n".encode())
    devserver.put_file(rid, "/OH-Memory/index.md", devserver.read_file(rid, "/OH-Memory/index.md") + b"- remote\n")
    devserver.delete_path(rid, "/Files/im/2026-11/群聊记录_数据结构互助小组_2026-11-18.txt.md")
    (local / "OH-Memory" / "journal" / "本地新增 2026-12.md").write_bytes("- [note] 本地\n".encode())
    with (local / "OH-Memory" / "courses" / "我的课表 2026 秋.md").open("ab") as fh:
        fh.write(b"\n- local edit\n")
    (local / "OH-Memory" / "tasks" / "待办速记.md").unlink()
    expected = devserver.tree(rid)
    del expected["/OH-Memory/tasks/待办速记.md"]
    for p in ("/OH-Memory/journal/本地新增 2026-12.md", "/OH-Memory/courses/我的课表 2026 秋.md"):
        expected[p] = (local / p.lstrip("/")).read_bytes()

    # round 2: a fresh front (no stale directory cache), changes flow both ways
    with rclone.webdav_front(f"ds:{LIB}", port):
        rclone("bisync", "wd:", str(local), "--workdir", str(workdir))
    assert devserver.tree(rid) == expected
    assert local_tree(local) == expected
