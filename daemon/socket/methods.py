"""The method table of the daemon's JSON-RPC socket: which handler answers a request, and how.

The daemon passes a table ``name → handler(params) → result``
(:class:`MethodTable`); the transport (``daemon/socket/server.py``) hands it
each decoded request and sends back what :meth:`MethodTable.answer` builds.
Handlers raise :class:`InvalidParams` (-32602) or :class:`CannotNow`
(-32000); an ohsync error or an OSError is answered -32000 with the sentence
of its one classification (``engine.errors.classify``; ``data`` carries its
scope, behaviour and needs); unknown names get -32601; anything else is
logged and answered -32603.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from ...engine.errors import OhsyncError, classify
from ..protocol import (
    CANNOT_NOW,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    json_type,
)

__all__ = ["Handler", "InvalidParams", "CannotNow", "MethodTable", "error_answer", "request_problem"]

log = logging.getLogger("ohsync.daemon.socket.server")  # one logger for all the socket says

Handler = Callable[[dict[str, Any]], Any]


class InvalidParams(Exception):
    """The request's params are missing or of the wrong type (-32602)."""


class CannotNow(Exception):
    """The daemon cannot do this in its current state (-32000)."""


class MethodTable:
    """The socket's methods: name → handler, and which of them are quick.

    :param handlers: method name → handler; the handler gets the params
        object (``{}`` when absent) and returns a JSON-serialisable result.
    """

    def __init__(self, handlers: Mapping[str, Handler]) -> None:
        self._handlers = dict(handlers)
        self._quick: set[str] = set()
        self._members: dict[str, Any] = {}

    def stamp(self, **members: Any) -> None:
        """Add ``members`` to every answer beside ``result``/``error`` (the daemon's
        ``config``: a client learns whose daemon answered without a ``ping`` of its own;
        JSON-RPC clients ignore members they do not know)."""
        self._members.update(members)

    def add(self, handlers: Mapping[str, Handler], *, quick: Iterable[str] = ()) -> None:
        """Answer more methods; ``quick`` names among them may run on the
        selector thread (they read facts in memory and never block)."""
        self._handlers.update(handlers)
        self._quick.update(name for name in quick if name in handlers)

    def is_quick(self, method: Any) -> bool:
        """True when ``method`` (any JSON value a peer sent) is answered on the selector thread."""
        return isinstance(method, str) and method in self._quick

    def answer(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        """Run the handler of one decoded request and build its answer.

        :param msg: the request object (``method``, ``params``, ``id``).
        :returns: the JSON-RPC answer (a result or an error object), or None
            for a notification (no ``id``) that succeeded; never raises for
            a handler's failure (logged, answered -32603).
        """
        reply = self._answer(msg)
        if reply is not None and self._members:
            reply.update({k: v for k, v in self._members.items() if k not in reply})
        return reply

    def _answer(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        """:meth:`answer` without the stamped members."""
        problem = request_problem(msg)
        if problem is not None:
            code, message = problem
            return error_answer(msg.get("id") if _valid_id(msg) else None, code, message)
        req_id = msg.get("id")
        method = msg["method"]
        params = msg.get("params") or {}
        handler = self._handlers.get(method)
        if handler is None:
            return error_answer(req_id, METHOD_NOT_FOUND, f"unknown method: {method}")
        try:
            result = handler(params)
        except InvalidParams as exc:
            return error_answer(req_id, INVALID_PARAMS, str(exc) or "invalid params")
        except CannotNow as exc:
            return error_answer(req_id, CANNOT_NOW, str(exc))
        except (OhsyncError, OSError) as exc:  # a failure ohsync knows: its one classification answers
            failure = classify(exc)
            log.warning("socket method %s: %s: %s", method, failure.title, failure.message)
            answer = error_answer(req_id, CANNOT_NOW, f"{failure.title}: {failure.message}")
            answer["error"]["data"] = {"scope": failure.scope, "behaviour": failure.behaviour, "needs": failure.needs}
            return answer
        except Exception as exc:  # answer, log, keep serving
            log.exception("socket method %s failed", method)
            return error_answer(req_id, INTERNAL_ERROR, f"internal error: {type(exc).__name__}")
        if "id" not in msg:
            return None  # a notification from the client: no answer
        try:
            json.dumps(result)
        except (TypeError, ValueError):
            log.error("socket method %s returned a non-JSON result", method)
            return error_answer(req_id, INTERNAL_ERROR, "internal error: result not serialisable")
        return {"jsonrpc": "2.0", "id": req_id, "result": result}


def _valid_id(msg: dict[str, Any]) -> bool:
    req_id = msg.get("id")
    return req_id is None or (isinstance(req_id, (str, int, float)) and not isinstance(req_id, bool))


def request_problem(msg: dict[str, Any]) -> tuple[int, str] | None:
    """What makes the decoded object ``msg`` no valid request, or None.

    :returns: ``(code, sentence)``: -32600 when ``method`` is not a string or
        ``id`` is not a string, number or null (the answer's ``id`` is then
        null: JSON-RPC 2.0 §5); -32602 when ``params`` is neither an object
        nor absent/null.
    """
    method = msg.get("method")
    if not isinstance(method, str):
        shown = "no method" if method is None else f"the method must be a string, not {json_type(method)}"
        return INVALID_REQUEST, f"invalid request: {shown}"
    if not _valid_id(msg):
        return INVALID_REQUEST, f"invalid request: the id must be a string, a number or null, not " \
                                f"{json_type(msg.get('id'))}"
    params = msg.get("params")
    if params is not None and not isinstance(params, dict):
        return INVALID_PARAMS, f"params must be an object, not {json_type(params)}"
    return None




def error_answer(req_id: Any, code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error answer to request ``req_id``."""
    return {"jsonrpc": "2.0", "id": req_id, "error": {"code": code, "message": message}}
