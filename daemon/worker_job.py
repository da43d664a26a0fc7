"""Run one function on a mirror's sync worker and wait for its answer.

For socket methods that change what the engine holds and must answer only
once it is done (``restore_deletes``, conflict resolutions, memory writes,
``file``): the function runs between passes on
the worker thread (``SyncWorker.submit``); the caller's thread waits up to
a timeout.  A job still queued when the wait ends is cancelled (it never
runs); one already running goes on and the caller hears so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from .socket.methods import CannotNow

__all__ = ["run_job"]


def run_job(submit: Callable[[Callable[[], None]], None], fn: Callable[[], Any], timeout: float, what: str, *,
            timed_out: Callable[[bool], BaseException] | None = None) -> Any:
    """``fn()`` on the worker; its result, or its exception re-raised here.

    :param what: names the work in the sentences of a timeout.
    :param timed_out: ``timed_out(started)`` builds the error raised when the
        wait ends (``started``: False when the job was still queued, and is
        now cancelled); default: the :class:`CannotNow` sentences below.
    :raises CannotNow: not started within ``timeout`` (cancelled: nothing
        done) or not finished within it (it goes on in the background).
    """
    done = threading.Event()
    lock = threading.Lock()
    state = {"phase": "queued"}
    answer: dict[str, Any] = {}

    def job() -> None:
        with lock:
            if state["phase"] == "cancelled":
                return
            state["phase"] = "running"
        try:
            answer["result"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            answer["error"] = exc
        finally:
            done.set()

    submit(job)
    if not done.wait(timeout):
        with lock:
            queued = state["phase"] == "queued"
            if queued:
                state["phase"] = "cancelled"
        if timed_out is not None:
            raise timed_out(not queued)
        if queued:
            raise CannotNow(f"nothing was done: ohsync was busy syncing for {timeout:g} s; try again")
        raise CannotNow(f"{what} did not finish within {timeout:g} s; it goes on in the background")
    if "error" in answer:
        raise answer["error"]
    return answer.get("result")
