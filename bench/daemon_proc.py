"""A benchmarked ``ohsync run --no-tray`` for ``bench/run.py``'s daemon scenarios.

:class:`BenchDaemon` runs the real daemon in an isolated environment (own
config, state dir, socket, the plaintext file keyring; no display, so no
tray), reads its CPU and memory from ``/proc`` and talks to its socket.
:class:`EventTap` subscribes to the socket's events, so a scenario can wait
for the daemon's own ``synced`` event of a path (sent after the read-back
that verifies the upload) instead of guessing with sleeps.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from common import LIB, SETTLED, daemon_env, stop_process

__all__ = ["BenchDaemon", "EventTap"]


class EventTap:
    """Collects the ``synced`` events of one daemon from its own thread.

    :param rpc: an ``RpcClient`` of the daemon's socket.
    """

    def __init__(self, rpc: Any) -> None:
        self._rpc = rpc
        self._cond = threading.Condition()
        #: path -> perf_counter() of its last ``synced`` event with direction ``up``
        self.up: dict[str, float] = {}
        self.live = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-events", daemon=True)
        self._thread.start()
        if not self.live.wait(30):
            raise RuntimeError("could not subscribe to the daemon's events")

    def _run(self) -> None:
        try:
            for event in self._rpc.subscribe():
                if event.get("type") == "subscribed":
                    self.live.set()
                elif event.get("type") == "synced" and event.get("direction") == "up":
                    with self._cond:
                        self.up[str(event.get("path"))] = time.perf_counter()
                        self._cond.notify_all()
        except Exception:  # noqa: BLE001, S110 - the daemon went away: the stream ends
            pass

    def wait_up(self, paths: set[str], since: float, timeout: float) -> float | None:
        """Wait until every path of ``paths`` had a ``synced`` (up) event after ``since``.

        :returns: perf_counter() of the last of them, or None after ``timeout`` seconds.
        """
        deadline = time.perf_counter() + timeout
        with self._cond:
            while True:
                times = [self.up.get(p, 0.0) for p in paths]
                if all(t > since for t in times):
                    return max(times)
                left = deadline - time.perf_counter()
                if left <= 0:
                    return None
                self._cond.wait(min(left, 1.0))


class BenchDaemon:
    """``ohsync run --no-tray`` on the bench's library, in ``work/name``.

    :param srv: the bench's ``DevServerProc``.
    :param config: extra config keys (``poll_interval`` …).
    """

    def __init__(self, srv: Any, work: Path, name: str, config: dict[str, Any]) -> None:
        import tomli_w

        from ohsync.daemon.protocol import RpcClient

        self.root = work / name
        self.root.mkdir()
        self.mirror = self.root / "mirror"
        self.sock_dir = Path(tempfile.mkdtemp(prefix="ohb-", dir="/tmp"))
        self.env = daemon_env(self.root, self.sock_dir)
        (self.root / "config.toml").write_text(tomli_w.dumps({
            "server": srv.url, "username": srv.user, "state_dir": str(self.root / "state"),
            "mirror": [{"library": srv.lib_name(LIB), "local": str(self.mirror)}],
            "filing": {"drop_dir": str(self.root / "drop")}, **config}), encoding="utf-8")
        subprocess.run([sys.executable, "-c", "import sys; from ohsync.daemon import credentials; "
                        "credentials.save_token(sys.argv[1], sys.argv[2], sys.argv[3])",
                        srv.url, srv.user, srv.token], env=self.env, check=True, timeout=60)
        self.rpc = RpcClient(self.sock_dir / "ohsync" / "ohsync.sock", timeout=30)
        self.proc: subprocess.Popen[bytes] | None = None
        self._out = open(self.root / "daemon-output.log", "ab")  # noqa: SIM115 - for each start(), closed by stop()
        self.clk = os.sysconf("SC_CLK_TCK")
        self.events: EventTap | None = None
        self._srv = srv
        if not srv.counts_requests:  # a server of one's own: the daemon counts its passes' requests
            srv.watch(f"daemon {name}", lambda: int(self.status().get("requests") or 0))

    def start(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "ohsync.daemon.cli", "run", "--no-tray"], env=self.env,
                                     stdout=self._out, stderr=subprocess.STDOUT, cwd=self.root)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def cpu_s(self) -> float:
        """utime + stime of the daemon so far, in seconds (``/proc/<pid>/stat``)."""
        assert self.proc is not None
        f = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(f[11]) + int(f[12])) / self.clk

    def status_mib(self, name: str) -> int:
        """A ``/proc/<pid>/status`` memory field (``VmRSS``, ``VmHWM``) in MiB."""
        assert self.proc is not None
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(name + ":"):
                return int(line.split()[1]) // 1024
        return 0

    def status(self) -> dict[str, Any]:
        from ohsync.daemon.protocol import Method

        try:
            return dict(self.rpc.call(Method.STATUS))
        except Exception:  # noqa: BLE001 - not up yet
            return {}

    def wait_settled(self, timeout: float, after_poll: str | None = None,
                     after_scan: str | None = None, min_polls: int = 0) -> dict[str, Any]:
        """Wait for a settled state (idle, or attention for named files) with a scan done
        and nothing pending; with ``after_poll`` / ``after_scan``, a poll / full scan
        later than that ISO time; with ``min_polls``, at least that many polls done.

        :raises RuntimeError: the daemon exited or did not settle within ``timeout`` s.
        """
        deadline = time.monotonic() + timeout
        st: dict[str, Any] = {}
        while time.monotonic() < deadline:
            if not self.alive():
                raise RuntimeError(f"the daemon exited; see {self.root / 'daemon-output.log'}")
            st = self.status()
            if st.get("state") in SETTLED and st.get("last_scan") and not st.get("pending_up") and \
                    not st.get("pending_down") and \
                    (after_poll is None or (st.get("last_poll") or "") > after_poll) and \
                    (after_scan is None or (st.get("last_scan") or "") > after_scan) and \
                    (st.get("polls") or 0) >= min_polls:
                return st
            time.sleep(0.2)
        raise RuntimeError(f"the daemon did not settle within {timeout:.0f} s (last state {st.get('state')!r}); "
                           f"see {self.root / 'daemon-output.log'}")

    def tap(self) -> EventTap:
        """The event subscription (opened on first use)."""
        if self.events is None:
            self.events = EventTap(self.rpc)
        return self.events

    def pause(self) -> None:
        """No polls and no pushes until :meth:`resume` (so another tool's run is counted alone)."""
        from ohsync.daemon.protocol import Method

        self.rpc.call(Method.PAUSE)

    def resume(self, timeout: float) -> None:
        """Resume and wait until the daemon has polled and settled again."""
        from ohsync.daemon.protocol import Method

        before = self.status().get("last_poll") or ""
        time.sleep(1.1)  # last_poll has one-second resolution
        self.rpc.call(Method.RESUME)
        self.wait_settled(timeout, after_poll=before)

    def stop(self) -> None:
        if not self._srv.counts_requests:
            self._srv.unwatch(f"daemon {self.root.name}")
        if self.proc is not None:
            stop_process(self.proc)
        self._out.close()
        shutil.rmtree(self.sock_dir, ignore_errors=True)
