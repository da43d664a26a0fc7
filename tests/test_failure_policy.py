"""One failure policy, read everywhere: filing, its service, the socket and
the CLI decide from ``engine.errors.classify``, not from their own
isinstance checks."""

from __future__ import annotations

import errno
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import isolated_env, wait_for  # noqa: F401
from ohsync.daemon.cli import main as cli
from ohsync.daemon.cli import status as cli_status
from ohsync.daemon.filing_service import FilingService
from ohsync.daemon.protocol import CANNOT_NOW, RpcClient, RpcError
from ohsync.daemon.socket.server import SocketServer
from ohsync.engine.errors import DiskFullError, NameRejectedError, UnreachableError, classify
from ohsync.engine.filing.filer import FilingResult
from test_filing import WorkerThread, env  # noqa: F401 - the filing fixture and its worker stand-in

UPLOAD_LINK = r"/upload-link/"


def test_filing_a_throttled_upload_waits_what_the_server_asked(env) -> None:
    source = env.drop_file("throttled.txt", b"sent while the server throttled\n")
    env.server.inject_fault("GET", UPLOAD_LINK, status=429, retry_after=120, count=10)
    result = env.filer().file(source)
    assert result.status == "failed" and result.retryable and result.needs is None
    assert result.retry_after == 120
    assert source.exists()


def test_filing_with_a_rejected_login_waits_for_the_person(env) -> None:
    source = env.drop_file("login.txt", b"sent with a rejected token\n")
    env.server.inject_fault("GET", UPLOAD_LINK, status=401, count=10)
    result = env.filer().file(source)
    assert result.status == "failed" and not result.retryable and result.needs == "login"
    assert "refresh" in result.message and source.exists()


def test_the_filing_service_holds_what_needs_the_person_until_refresh(env) -> None:
    results: list[FilingResult] = []
    worker = WorkerThread()
    service = FilingService(env.drop, worker.submit, results.append, quiet_seconds=0.3)
    env.server.inject_fault("GET", UPLOAD_LINK, status=401, count=10_000)
    service.start()
    try:
        worker.call(lambda: service.attach(env.filer()))
        (env.drop / "note.txt").write_bytes(b"filed once the login is fixed\n")
        wait_for(lambda: results, what="the failed result")
        assert results[0].status == "failed" and results[0].needs == "login"
        assert [h["path"] for h in service.status()["held"]] == [str(env.drop / "note.txt")]
        env.server.clear_faults()  # the person signed in again, then runs `ohsync refresh`
        service.retry_held()
        wait_for(lambda: any(r.status == "filed" for r in results), what="filed after refresh")
        assert service.status()["held"] == []
    finally:
        service.stop()
        worker.stop()


def test_the_socket_answers_a_known_failure_with_its_classification(isolated_env) -> None:
    def full(params):
        raise OSError(errno.ENOSPC, "No space left on device")

    def rejected(params):
        raise NameRejectedError("The server cannot hold the name a\\b.md; rename it.")

    srv = SocketServer(isolated_env.socket, {"full": full, "rejected": rejected}, own_dir=True)
    srv.start()
    try:
        client = RpcClient(isolated_env.socket, timeout=10)
        with pytest.raises(RpcError) as info:
            client.call("full")
        assert info.value.code == CANNOT_NOW
        assert info.value.message.startswith(f"{DiskFullError.title}: ") and "free some space" in info.value.message
        with pytest.raises(RpcError) as info:
            client.call("rejected")
        assert info.value.code == CANNOT_NOW and "rename it" in info.value.message
    finally:
        srv.stop()


def test_the_cli_says_a_local_file_error_in_a_sentence(tmp_path, capsys, monkeypatch) -> None:
    def unreadable(args):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "config.toml"))

    monkeypatch.setattr(cli_status, "cmd_status", unreadable)
    code = cli.main(["--config", str(tmp_path / "config.toml"), "status"])
    err = capsys.readouterr().err
    assert code == cli.EXIT_FAILED
    assert "Permission denied" in err and "config.toml" in err and "Traceback" not in err


def test_an_unreachable_server_is_offline_for_the_whole_mirror() -> None:
    failure = classify(UnreachableError("Could not connect to the server."))
    assert (failure.scope, failure.origin, failure.permanent) == ("mirror", "network", False)


# -- one retry decision for requests (engine.failures.resend_wait) ------------------

from ohsync.engine.errors import (  # noqa: E402
    AuthError,
    LocalError,
    NetworkError,
    NotFoundError,
    ProtocolError,
    QuotaError,
    RemoteOperationError,
    ServerError,
    ThrottledError,
)
from ohsync.engine.failures import resend_wait  # noqa: E402

_ONE_ATTEMPT = [ServerError("x", status=502), NetworkError("x"), ThrottledError("x", retry_after=2.0),
                ProtocolError("x")]
_THE_REQUEST = [NotFoundError("x", status=404), RemoteOperationError("x", status=400), AuthError("x", status=401),
                QuotaError("x", status=443), LocalError("x"), ValueError("a bug")]


@pytest.mark.parametrize("exc", _ONE_ATTEMPT + _THE_REQUEST, ids=lambda e: type(e).__name__)
def test_retryable_and_resending_read_the_one_classification(exc: BaseException) -> None:
    transient = classify(exc).transient
    assert transient == (exc in _ONE_ATTEMPT)
    if hasattr(exc, "retryable"):
        assert exc.retryable == transient
    assert (resend_wait(exc, 1) is not None) == transient


def test_a_429_is_waited_out_for_any_request_up_to_the_cap() -> None:
    throttled = ThrottledError("x", retry_after=2.0)
    assert resend_wait(throttled, 1) == 2.0
    assert resend_wait(throttled, 3, idempotent=False) == 2.0  # nothing was done: an upload may go again
    assert resend_wait(throttled, 1, max_wait=1.5) is None  # longer: the failure book waits it
    assert resend_wait(ThrottledError("x", retry_after=0.0), 1) == 0.0


def test_other_transient_failures_back_off_only_for_idempotent_requests() -> None:
    failed = ServerError("x", status=503)
    assert [resend_wait(failed, n, base=0.5, cap=3.0) for n in (1, 2, 3, 4)] == [0.5, 1.0, 2.0, 3.0]
    assert resend_wait(failed, 1, idempotent=False) is None  # may have been stored: the engine re-plans
    assert resend_wait(NetworkError("x"), 1, idempotent=False) is None
