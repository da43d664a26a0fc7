"""``ohsync mcp``: the memory tools as an MCP server over stdio.

Built on the official ``mcp`` Python SDK (low-level ``Server``: the tools'
JSON schemas are written out here, not inferred).  Eight tools,
``memory_search`` … ``memory_refresh``, each a thin call of the running
daemon's ``memory.*`` socket method: the daemon owns the index and the
verified write path, so an agent's write returns once the server holds it.
When no daemon runs, every tool answers with a tool error that says so and
how to start it.  The descriptions carry the writing discipline (one fact per
observation, synonyms folded into title and tags, never secrets).  At the end
of its input the server answers the requests still pending before it exits;
started at a terminal it says on stderr what it is for.
"""
from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any, cast

from .protocol import Method

__all__ = ["TOOLS", "INSTRUCTIONS", "call_daemon", "build_server", "run_stdio"]

log = logging.getLogger(__name__)

INSTRUCTIONS = (
    "Long-term memory of the person you assist, kept as markdown entities in their OH-Memory library and "
    "synced to their cloud by ohsync. Search before you write: add to an existing entity (memory_append) "
    "rather than creating a near-duplicate. Write one fact per observation, short and self-contained. Fold "
    "synonyms, abbreviations and other names into the entity's title and tags so later searches find it. "
    "Never store secrets (API keys, tokens, passwords, verification codes, card or ID numbers): such writes "
    "are refused. Health, contact and similar personal details are stored marked sensitive and stay out of "
    "search results unless include_sensitive is set. A write returns only after the cloud copy is verified; "
    "if it reports an error, the memory is not saved in the cloud yet, so say so.")

_TIMEOUT = {"type": "number", "minimum": 1, "maximum": 3600,
            "description": "Seconds to wait for the cloud to confirm the write (default: the daemon's setting, 30)."}
_PERMALINK = {"type": "string", "description": "The entity's permalink, as returned by memory_search or memory_list."}
_OBSERVATION: dict[str, Any] = {
    "type": "object",
    "properties": {
        "category": {"type": "string", "description": "One word naming the kind of fact: pref, fact, task, "
                                                      "deadline, contact, idea…"},
        "text": {"type": "string", "description": "One fact, one line, self-contained."},
        "tags": {"type": "array", "items": {"type": "string"},
                 "description": "Extra #tags for this fact, one per item (\"a, b\" is split into a and b)."},
        "context": {"type": "string", "description": "Optional short context (where it came from, why)."},
    },
    "required": ["category", "text"],
    "additionalProperties": False,
}
_RELATION = {
    "type": "object",
    "properties": {
        "rel": {"type": "string", "description": "Relation type, e.g. relates_to, part_of, belongs_to."},
        "target": {"type": "string", "description": "Title of the other entity (it may not exist yet)."},
        "context": {"type": "string"},
    },
    "required": ["rel", "target"],
    "additionalProperties": False,
}


def _schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required or [], "additionalProperties": False}


#: ``name → (socket method, description, input schema)``.
TOOLS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "memory_search": (Method.MEMORY_SEARCH, (
        "Search the person's long-term memory. Filters first (tags: all must match; type: exact; since: "
        "modified on or after an ISO date; sensitive entities only with include_sensitive), then keywords "
        "scored per word by case-insensitive substring: title x4, permalink x3, tag x2, body x1 (Chinese "
        "works without word segmentation: use short substrings such as 哈希表). Newest first on ties. Each "
        "result has a snippet (the hit line with one line either side) and its related entities (one hop, links "
        "both ways: direction out or in, with the relation type)."),
        _schema({
            "query": {"type": "string", "description": "Space-separated keywords, including synonyms."},
            "tags": {"type": "array", "items": {"type": "string"},
                     "description": "Entities must carry all of these (\"a, b\" is split into a and b)."},
            "type": {"type": "string", "description": "note, course, task, preference, fact, journal…"},
            "since": {"type": "string", "description": "ISO date (2026-11-01) or time; modified on or after it."},
            "include_sensitive": {"type": "boolean", "default": False},
            "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 8},
        })),
    "memory_read": (Method.MEMORY_READ, (
        "Read one memory entity by permalink (found even after the person renamed or moved the file). Text "
        "past 8 KB is truncated with a marker; search with keywords to reach the rest."),
        _schema({"permalink": _PERMALINK}, ["permalink"])),
    "memory_list": (Method.MEMORY_LIST, (
        "List memory entities of a folder (preferences, courses, tasks, knowledge, journal, or a subfolder) "
        "and/or with one tag: title, permalink and modified time, newest first, no bodies."),
        _schema({"folder": {"type": "string"}, "tag": {"type": "string"}})),
    "memory_write": (Method.MEMORY_WRITE, (
        "Create a new memory entity. Search first: if a matching entity exists, use memory_append instead. "
        "One fact per observation. Fold synonyms and other names into the title and tags. Never include "
        "secrets (API keys, tokens, passwords, verification codes, card/ID numbers): the write is refused. "
        "Personal details (health, contacts) are marked sensitive automatically. Returns the permalink once "
        "the cloud copy is verified."),
        _schema({
            "title": {"type": "string", "description": "Short, specific title; it is also the file name."},
            "observations": {"type": "array", "items": _OBSERVATION, "minItems": 1},
            "relations": {"type": "array", "items": _RELATION},
            "tags": {"type": "array", "items": {"type": "string"},
                     "description": "The entity's tags, one per item; \"a, b\" is split into the tags a and b, "
                                    "and spaces inside a tag become _ (\"linear algebra\" is linear_algebra)."},
            "type": {"type": "string", "default": "note",
                     "description": "note, course, task, preference, fact…; picks the folder when none is given."},
            "folder": {"type": "string", "description": "e.g. knowledge, preferences, courses/2026-2027-1"},
            "sensitivity": {"type": "string", "enum": ["normal", "sensitive"]},
            "timeout": _TIMEOUT,
        }, ["title", "observations"])),
    "memory_append": (Method.MEMORY_APPEND, (
        "Add one observation (one fact, one line) to an existing entity. Concurrent appends from other "
        "devices are merged, never lost. Never include secrets. Returns once the cloud copy is verified."),
        _schema({"permalink": _PERMALINK, "category": _OBSERVATION["properties"]["category"],
                 "text": _OBSERVATION["properties"]["text"], "context": {"type": "string"}, "timeout": _TIMEOUT},
                ["permalink", "category", "text"])),
    "memory_edit": (Method.MEMORY_EDIT, (
        "Change an entity by replacing one exact piece of its text (read it first and copy the text). Fails "
        "when the text is absent or occurs more than once: include more surrounding text then. Never include "
        "secrets."),
        _schema({"permalink": _PERMALINK, "find": {"type": "string"}, "replace": {"type": "string"},
                 "timeout": _TIMEOUT}, ["permalink", "find", "replace"])),
    "memory_delete": (Method.MEMORY_DELETE, (
        "Soft-delete an entity: it moves into the library's /.trash/ (restorable), or stays in place marked "
        "status: trashed when the move fails. Returns the deleted title."),
        _schema({"permalink": _PERMALINK, "reason": {"type": "string"}, "timeout": _TIMEOUT}, ["permalink"])),
    "memory_refresh": (Method.MEMORY_REFRESH, (
        "Check the cloud for changes made on other devices now and wait for that check."),
        _schema({"timeout": _TIMEOUT})),
}


def call_daemon(socket_path: Path, name: str, arguments: dict[str, Any] | None,
                mirror: str | None = None) -> tuple[bool, Any]:
    """Call the daemon for one tool (blocking).

    :param mirror: the mirror holding the memory library (``ohsync mcp --mirror``),
        for a daemon with several.

    :returns: ``(True, result)`` or ``(False, sentence)`` for a tool error.
    """
    from .protocol import DaemonNotRunning, RpcClient, RpcError

    entry = TOOLS.get(name)
    if entry is None:
        return False, f"unknown tool {name!r}; the tools are {', '.join(TOOLS)}"
    method = entry[0]
    params = dict(arguments or {})
    params.pop("mirror", None)  # the person chose the mirror, not the agent
    if mirror:
        params["mirror"] = mirror
    asked = params.get("timeout", 30.0)
    # checked here (the SDK does not enforce the schema): the socket's own wait is derived from it
    if isinstance(asked, bool) or not isinstance(asked, (int, float)) or not 1 <= asked <= 3600:
        return False, f"`timeout` must be a number of seconds from 1 to 3600 (got {asked!r}); leave it out for 30"
    wait = float(asked)
    client = RpcClient(socket_path, timeout=wait + 15.0)
    try:
        return True, client.call(method, params)
    except DaemonNotRunning:
        return False, ("The ohsync daemon is not running, so the memory library cannot be reached. Ask the "
                       "person to start it (`ohsync run`, or the ohsync tray), then try again.")
    except RpcError as exc:  # RequestTooLarge among them: "the request is too large: …"
        return False, exc.message
    except (ConnectionError, TimeoutError, OSError) as exc:
        return False, f"lost the connection to the ohsync daemon ({exc}); check `ohsync status`"


def build_server(socket_path: Path, mirror: str | None = None) -> Any:
    """The MCP ``Server`` answering the eight memory tools through the daemon at ``socket_path``."""
    import anyio
    import mcp.types as types
    from mcp.server.lowlevel import Server

    tools = [types.Tool(name=name, description=desc, input_schema=schema)
             for name, (_method, desc, schema) in TOOLS.items()]

    async def list_tools(ctx: Any, params: Any) -> Any:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: Any) -> Any:
        ok, value = await anyio.to_thread.run_sync(call_daemon, socket_path, params.name, params.arguments,
                                                   mirror)
        if not ok:
            return types.CallToolResult(content=[types.TextContent(text=str(value))], is_error=True)
        text = json.dumps(value, ensure_ascii=False)
        return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=value)

    return Server("ohsync-memory", version=_version(), instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


class _Pending:
    """Request ids read from the client and not answered yet."""

    def __init__(self) -> None:
        import anyio

        self.ids: set[Any] = set()
        self.changed = anyio.Event()

    def done(self, key: Any) -> None:
        import anyio

        self.ids.discard(key)
        self.changed.set()
        self.changed = anyio.Event()


class _HeldReads:
    """The client's messages, passed on; at end of input the stream closes only once every
    request read has its answer (the SDK cancels handlers still running at end of input,
    so a piped ``tools/call`` would otherwise get none)."""

    #: Seconds to wait at end of input for the answers still owed (a write waits up to ~1 hour).
    DRAIN_SECONDS = 3700.0

    def __init__(self, source: Any, pending: _Pending) -> None:
        import anyio

        self.source = source
        self.pending = pending
        self._send, self.stream = anyio.create_memory_object_stream[Any](0)

    async def pump(self) -> None:
        import anyio

        async with self._send:
            async with self.source:
                async for item in self.source:
                    req_id = _request_id(item)
                    if req_id is not None:
                        self.pending.ids.add(req_id)
                    await self._send.send(item)
            with anyio.move_on_after(self.DRAIN_SECONDS):
                while self.pending.ids:
                    await self.pending.changed.wait()


def _request_id(item: Any) -> Any:
    """The id of a request (a message with a method and an id), else None."""
    message = getattr(item, "message", None)
    if message is None or getattr(message, "method", None) is None:
        return None
    return getattr(message, "id", None)


def _answer_id(item: Any) -> Any:
    """The id of an answer (a message with an id and no method), else None."""
    message = getattr(item, "message", None)
    if message is None or getattr(message, "method", None) is not None:
        return None
    return getattr(message, "id", None)


class _AnswerWrites:
    """The write stream, noting each answer (a message with an id and no method) as it goes out."""

    def __init__(self, target: Any, pending: _Pending) -> None:
        self._target = target
        self._pending = pending

    async def send(self, item: Any) -> None:
        await self._target.send(item)
        answer_id = _answer_id(item)
        if answer_id is not None:
            self._pending.done(answer_id)

    async def __aenter__(self) -> _AnswerWrites:
        await self._target.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> Any:
        return await self._target.__aexit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._target, name)


def _answer_before_closing(read_stream: Any, write_stream: Any) -> tuple[_HeldReads, _AnswerWrites]:
    pending = _Pending()
    return _HeldReads(read_stream, pending), _AnswerWrites(write_stream, pending)


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("ohsync")
    except Exception:  # noqa: BLE001 - an uninstalled checkout
        return "0"


def run_stdio(config: str | None = None, mirror: str | None = None) -> int:
    """Serve MCP on stdin/stdout until the client closes them (``ohsync mcp``).

    :param config: the ``--config`` value (the socket path comes from the config).
    :param mirror: the mirror holding the memory library (``--mirror``; needed
        when the daemon syncs several).
    :returns: the exit code.
    """
    import anyio

    try:
        from mcp.server.stdio import stdio_server
    except ImportError:
        print("ohsync: the MCP server needs the `mcp` package (pip install mcp)", file=sys.stderr)
        return 1
    from .config import config_path, load_config

    cfg = load_config(config_path(config))
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    server = build_server(cfg.socket, mirror)

    if sys.stdin.isatty():
        print("ohsync mcp is an MCP stdio server for the ohsync memory tools, meant to be started by an MCP "
              "client, not typed here: the client runs the command `ohsync mcp` itself (for example "
              "{\"command\": \"ohsync\", \"args\": [\"mcp\"]} in its list of MCP servers; see the README section "
              "\"Memory tools and MCP\"). It reads JSON-RPC on standard input (Ctrl-D ends it).",
              file=sys.stderr, flush=True)

    async def main() -> None:
        import io

        import mcp_types as types
        from mcp.shared.message import SessionMessage

        from .mcp_lines import CheckedLines

        wire: list[Any] = []  # the SDK's write stream, once the transport is up
        ready = anyio.Event()

        async def answer_error(req_id: Any, code: int, message: str) -> None:
            await ready.wait()
            error = types.JSONRPCError(jsonrpc="2.0", id=req_id, error=types.ErrorData(code=code, message=message))
            await wire[0].send(SessionMessage(error))

        source = anyio.wrap_file(io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
        checked = CheckedLines(source, lambda line: types.jsonrpc_message_adapter.validate_json(line, by_name=False),
                               answer_error)
        async with stdio_server(stdin=cast(Any, checked)) as (read_stream, write_stream):
            wire.append(write_stream)
            ready.set()
            reads, writes = _answer_before_closing(read_stream, write_stream)
            async with anyio.create_task_group() as tg:
                tg.start_soon(reads.pump)
                await server.run(reads.stream, writes, server.create_initialization_options())

    anyio.run(main)
    return 0
