"""The lines ``ohsync mcp`` reads, checked before the MCP SDK sees them.

The SDK's stdio transport drops a line it cannot validate (it logs it and
answers nothing), so a client waiting on that request's id would hang.
:func:`line_problem` names what is wrong with a line in JSON-RPC terms, and
:class:`CheckedLines` passes the good lines on and answers every bad one
with the error it deserves (JSON-RPC 2.0 §5.1):

* -32700 parse error: not JSON;
* -32600 invalid request: JSON but not a message object (``[]``, ``123``, a
  batch: MCP has none since 2025-06-18), an id that is not a string or an
  integer, a method that is not a string, or a shape the protocol refuses;
* -32602 invalid params: a request whose ``params`` is not an object.

A notification (a method and no id) is never answered, as JSON-RPC says; a
malformed one is only logged.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from .protocol import INVALID_PARAMS, INVALID_REQUEST, PARSE_ERROR, json_type

__all__ = ["PARSE_ERROR", "INVALID_REQUEST", "INVALID_PARAMS", "line_problem", "CheckedLines"]

log = logging.getLogger(__name__)



def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))




def line_problem(line: str, validate: Callable[[str], Any]) -> tuple[Any, int, str] | None:
    """What makes one line of the client's input no acceptable MCP message, or None.

    :param line: one line as read (its newline included or not).
    :param validate: the SDK's own check of a message (raises when it refuses one).
    :returns: ``(id, code, sentence)`` for the error answer (``id`` None when
        the line names none), ``(None, 0, sentence)`` for a malformed
        notification (logged, never answered), or None when the line is fine.
    """
    try:
        obj = json.loads(line)
    except ValueError as exc:
        return None, PARSE_ERROR, f"Parse error: {exc}"
    if isinstance(obj, list):
        return None, INVALID_REQUEST, ("Invalid request: batches are not supported; send one JSON-RPC "
                                       "object per line" if obj else "Invalid request: an empty array")
    if not isinstance(obj, dict):
        return None, INVALID_REQUEST, f"Invalid request: a message must be a JSON object, not {json_type(obj)}"
    req_id = obj.get("id")
    if "id" in obj and not _valid_id(req_id):
        return None, INVALID_REQUEST, "Invalid request: the id must be a string or an integer"
    method = obj.get("method")
    if "method" in obj and not isinstance(method, str):
        return (req_id, INVALID_REQUEST, "Invalid request: the method must be a string") if "id" in obj else (
            None, 0, "a notification whose method is not a string")
    params = obj.get("params")
    if "method" in obj and params is not None and not isinstance(params, dict):
        if "id" not in obj:
            return None, 0, f"a notification {method!r} whose params are not an object"
        return req_id, INVALID_PARAMS, f"Invalid params: params must be an object, not {json_type(params)}"
    try:
        validate(line)
    except Exception as exc:  # noqa: BLE001 - the SDK's refusal, whatever its type
        if "method" in obj and "id" not in obj:
            return None, 0, f"a malformed notification ({type(exc).__name__})"
        return (req_id if "id" in obj else None), INVALID_REQUEST, "Invalid request: not a valid JSON-RPC message"
    return None


class CheckedLines:
    """The client's input lines with the bad ones answered instead of passed on.

    Iterate it (``async for line in checked``) where the SDK reads its stdin;
    every bad line is given to ``answer(id, code, message)`` (an async
    callable that writes the error answer) and not passed on.

    :param source: the async iterable of input lines (text).
    :param validate: the SDK's check of one message (see :func:`line_problem`).
    :param answer: writes one JSON-RPC error answer.
    """

    def __init__(self, source: Any, validate: Callable[[str], Any],
                 answer: Callable[[Any, int, str], Any]) -> None:
        self._source = source
        self._validate = validate
        self._answer = answer

    async def __aiter__(self) -> AsyncIterator[str]:
        async for line in self._source:
            if not line.strip():
                continue
            problem = line_problem(line, self._validate)
            if problem is None:
                yield line
                continue
            req_id, code, message = problem
            if code == 0:
                log.warning("ignored %s", message)
                continue
            await self._answer(req_id, code, message)
