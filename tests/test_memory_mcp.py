"""`ohsync mcp` as a subprocess, driven by the `mcp` SDK's own client: the
eight tools are listed with schemas, search and append go through the
running daemon (append verified on the server), and without a daemon every
tool says so."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters

sys.path.insert(0, os.path.dirname(__file__))
from daemon_helpers import USER, ohsync_cmd, write_config
from engine_helpers import sample_library

TOOL_NAMES = {"memory_search", "memory_read", "memory_list", "memory_write", "memory_append", "memory_edit",
              "memory_delete", "memory_refresh"}


def _params(env) -> StdioServerParameters:
    cmd = ohsync_cmd()
    return StdioServerParameters(command=cmd[0], args=[*cmd[1:], "mcp"], env=env.vars(), cwd=str(env.root))


def test_mcp_lists_tools_searches_appends_and_reads_back(isolated_env, seed_daemon, devserver, tmp_path: Path) -> None:
    s = seed_daemon(tree=sample_library(tmp_path / "seed"), poll_interval=60.0)
    repo = s.repo_id
    s.start(wait="attention")  # synced; the sample's damaged file is named

    async def session() -> dict:
        async with Client(_params(isolated_env), read_timeout_seconds=60) as client:
            listed = await client.list_tools()
            tools = {t.name: t for t in listed.tools}
            found = await client.call_tool("memory_search", {"query": "沟通 风格"})
            appended = await client.call_tool("memory_append", {
                "permalink": "comm-style-pref-0e96", "category": "tone", "text": "回答里少用感叹号"})
            refused = await client.call_tool("memory_append", {
                "permalink": "comm-style-pref-0e96", "category": "key", "text": "Bearer abcdefgh12345678"})
            read = await client.call_tool("memory_read", {"permalink": "comm-style-pref-0e96"})
            return {"tools": tools, "found": found, "appended": appended, "refused": refused, "read": read}

    got = anyio.run(session)
    s.stop_all()
    tools = got["tools"]
    assert set(tools) == TOOL_NAMES
    assert tools["memory_write"].input_schema["required"] == ["title", "observations"]
    assert "one fact per observation" in tools["memory_write"].description.lower()
    assert "secrets" in tools["memory_append"].description
    found = got["found"]
    assert not found.is_error
    results = json.loads(found.content[0].text)["results"]
    assert results[0]["permalink"] == "comm-style-pref-0e96"
    assert found.structured_content["results"][0]["title"] == "沟通风格偏好"
    appended = got["appended"]
    assert not appended.is_error, appended.content[0].text
    assert appended.structured_content["verified"] is True
    assert "- [tone] 回答里少用感叹号" in devserver.read_file(repo, "/preferences/沟通风格偏好.md").decode()
    assert got["refused"].is_error and "refused" in got["refused"].content[0].text
    assert "回答里少用感叹号" in got["read"].structured_content["content"]


def test_mcp_without_a_daemon_says_it_is_not_running(isolated_env, tmp_path: Path) -> None:
    write_config(isolated_env, "http://127.0.0.1:9", USER, tmp_path / "mirror")

    async def session():
        async with Client(_params(isolated_env), read_timeout_seconds=60) as client:
            assert len((await client.list_tools()).tools) == 8
            return await client.call_tool("memory_search", {"query": "x"})

    result = anyio.run(session)
    assert result.is_error and "not running" in result.content[0].text and "ohsync run" in result.content[0].text


def test_piped_requests_are_answered_before_the_server_exits(isolated_env, tmp_path: Path) -> None:
    """stdin closes right after a tools/call: the answer still comes (here: the daemon is not running)."""
    import subprocess

    write_config(isolated_env, "http://127.0.0.1:9", USER, tmp_path / "mirror")
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "pipe", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "memory_search", "arguments": {"query": "x"}}},
    ]
    proc = subprocess.run([*ohsync_cmd(), "mcp"], input="".join(json.dumps(m) + "\n" for m in lines),
                          capture_output=True, text=True, env=isolated_env.vars(), cwd=str(isolated_env.root),
                          timeout=60)
    answers = {m.get("id"): m for m in map(json.loads, proc.stdout.splitlines())}
    assert 2 in answers, proc.stdout + proc.stderr
    assert "not running" in json.dumps(answers[2]["result"])


def test_mcp_in_a_terminal_says_what_it_is(isolated_env, tmp_path: Path) -> None:
    import pexpect

    write_config(isolated_env, "http://127.0.0.1:9", USER, tmp_path / "mirror")
    cmd = ohsync_cmd()
    child = pexpect.spawn(cmd[0], [*cmd[1:], "mcp"], env=isolated_env.vars(), cwd=str(isolated_env.root),
                          encoding="utf-8", timeout=30)
    try:
        child.expect("MCP stdio server for the ohsync memory tools, meant to be started by an MCP client")
        child.expect("the client runs the command `ohsync mcp` itself")
        child.expect("Memory tools and MCP")
        child.sendeof()
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)


def test_every_malformed_line_gets_the_error_it_deserves(isolated_env, tmp_path: Path) -> None:
    """Nothing is left unanswered (a client waiting on an id would hang); a write over the daemon's
    line limit says "too large", not "lost the connection"."""
    import subprocess

    write_config(isolated_env, "http://127.0.0.1:9", USER, tmp_path / "mirror")
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                       "clientInfo": {"name": "pipe", "version": "1"}}}
    huge = {"jsonrpc": "2.0", "id": "big", "method": "tools/call",
            "params": {"name": "memory_write",
                       "arguments": {"title": "t", "observations": [{"category": "c", "text": "a" * 1_100_000}]}}}
    lines = [json.dumps(init), json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
             "{not json", "[]", "123", '[{"jsonrpc":"2.0","id":3,"method":"tools/list"}]',
             '{"jsonrpc":"2.0","id":[4],"method":"tools/list"}',
             '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":"memory_search"}',
             '{"jsonrpc":"2.0","id":6,"method":7}',
             '{"jsonrpc":"2.0","method":"notifications/whatever","params":"x"}',  # a notification: no answer
             '{"jsonrpc":"2.0","id":8,"method":"tools/list"}', json.dumps(huge)]
    proc = subprocess.run([*ohsync_cmd(), "mcp"], input=("\n".join(lines) + "\n").encode() + b"\xff\xfe\n",
                          capture_output=True, env=isolated_env.vars(), cwd=str(isolated_env.root), timeout=60)
    answers = [json.loads(line) for line in proc.stdout.decode().splitlines()]
    codes = [(a["id"], a["error"]["code"]) for a in answers if "error" in a]
    assert codes == [(None, -32700), (None, -32600), (None, -32600), (None, -32600), (None, -32600),
                     (5, -32602), (6, -32600), (None, -32700)], proc.stdout.decode() + proc.stderr.decode()
    by_id = {a["id"]: a for a in answers if a["id"] is not None}
    assert len(by_id[8]["result"]["tools"]) == 8  # served on after every bad line
    big = by_id["big"]["result"]
    assert big["isError"] and "too large" in big["content"][0]["text"]
    assert "connection" not in big["content"][0]["text"]


def test_line_problem_names_each_malformed_shape() -> None:
    import mcp_types as types

    from ohsync.daemon.mcp_lines import line_problem

    def check(line: str):
        return line_problem(line, lambda text: types.jsonrpc_message_adapter.validate_json(text, by_name=False))

    assert check('{"jsonrpc":"2.0","id":1,"method":"tools/list"}') is None
    assert check('{"jsonrpc":"2.0","id":1,"method":"tools/list","params":null}') is None
    assert check('{"jsonrpc":"2.0","id":"a","result":{}}') is None  # the client answering us
    assert check("{not json")[:2] == (None, -32700)
    assert check("[]")[:2] == (None, -32600) and check("123")[:2] == (None, -32600)
    assert check('{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}')[:2] == (None, -32600)
    assert check('{"jsonrpc":"2.0","id":true,"method":"tools/list"}')[:2] == (None, -32600)
    assert check('{"jsonrpc":"2.0","id":3,"method":["x"]}')[:2] == (3, -32600)
    assert check('{"jsonrpc":"2.0","id":3,"method":"tools/call","params":[1]}')[:2] == (3, -32602)
    assert check('{"jsonrpc":"2.0","method":"notifications/x","params":"s"}')[:2] == (None, 0)  # never answered
    assert check('{"jsonrpc":"1.0","id":4,"method":"tools/list"}')[:2] == (4, -32600)


def test_a_timeout_out_of_range_is_a_tool_error(tmp_path: Path) -> None:
    """The SDK does not enforce the schema's bounds: ``call_daemon`` must, before the socket's wait is set."""
    import math
    import socket

    from ohsync.daemon.mcp_server import call_daemon

    path = tmp_path / "s.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)
    try:
        for bad in (1e308, math.inf, -math.inf, math.nan, -20, 0, 3601, True, "30"):
            ok, message = call_daemon(path, "memory_append", {"permalink": "p", "category": "k", "text": "v",
                                                               "timeout": bad})
            assert not ok and "`timeout` must be a number of seconds from 1 to 3600" in message, bad
    finally:
        listener.close()
