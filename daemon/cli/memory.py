"""``ohsync memory …`` and ``ohsync mcp``: the memory tools for people, scripts and agents.

``ohsync memory search|read|list|write|append|edit|delete|refresh`` call the
daemon's ``memory.*`` socket methods and print a short text (or, with
``--json``, exactly the method's result).  ``ohsync mcp`` runs the MCP server
of :mod:`ohsync.daemon.mcp_server` over stdio.  Exit codes as every command:
0 ok, 1 refused or failed (the message says why), 2 usage, 3 daemon not running.
"""
from __future__ import annotations

import argparse
import json
import math
import re
from collections.abc import Callable
from typing import Any

from ..protocol import Method, RpcError
from .common import Subparsers, add_command, add_mirror_option

__all__ = ["register"]


#: The MCP tool names the daemon's sentences use, and the commands that do the same here.
_TOOL_COMMANDS = {f"memory_{name}": f"`ohsync memory {name}`"
                  for name in ("search", "read", "list", "write", "append", "edit", "delete", "refresh")}
_TOOL_NAME = re.compile(r"`?\b(" + "|".join(_TOOL_COMMANDS) + r")\b`?")


def cli_words(message: str) -> str:
    """``message`` with each MCP tool name (``memory_search``) put as its command (`ohsync memory search`)."""
    return _TOOL_NAME.sub(lambda m: _TOOL_COMMANDS[m.group(1)], message)


def _call(args: argparse.Namespace, method: str, params: dict[str, Any], *, write: bool = False) -> Any:
    try:
        return _call_daemon(args, method, params, write=write)
    except RpcError as exc:
        raise RpcError(exc.code, cli_words(exc.message)) from None


def _seconds(text: str) -> float:
    """``--timeout``: seconds from 1 to 3600 (the socket's own wait is derived from it).

    :raises argparse.ArgumentTypeError: anything else, with the range.
    """
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 1 <= value <= 3600:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds from 1 to 3600")
    return value


def _call_daemon(args: argparse.Namespace, method: str, params: dict[str, Any], *, write: bool) -> Any:
    from ..config import config_path, load_config
    from ..protocol import MIRROR_PARAM, RpcClient

    cfg = load_config(config_path(args.config))
    timeout = getattr(args, "timeout", None)
    if write:
        timeout = timeout or cfg.memory.write_timeout
        params = {**params, "timeout": timeout}
    if getattr(args, "mirror", None):
        params = {**params, MIRROR_PARAM: args.mirror}
    client = RpcClient(cfg.socket, timeout=(timeout or 30.0) + 10.0)
    return client.call(method, params)


def _out(args: argparse.Namespace, result: Any, text: Callable[[Any], str]) -> int:
    if args.json:
        print(json.dumps(result, ensure_ascii=False, indent=2))
    else:
        print(text(result))
    return 0


def _search_text(result: dict[str, Any]) -> str:
    rows = result.get("results") or []
    if not rows:
        return "No matching memory entities."
    out = []
    for r in rows:
        out.append(f"{r['title']}  ({r['permalink']}, {r.get('type') or 'note'}, modified {r.get('modified') or '?'})")
        out.extend("    " + line for line in (r.get("snippet") or "").splitlines())
        # one name per entity: a link both ways, or under two relation types, is listed once
        names: dict[str, str] = {}
        for x in r.get("related") or []:
            names.setdefault(x["permalink"] or x["target"], x["title"] or x["target"])
        linked = list(names.values())[:6]
        if linked:
            out.append("    related: " + " · ".join(linked))
    return "\n".join(out)


def _list_text(result: dict[str, Any]) -> str:
    rows = result.get("results") or []
    if not rows:
        return "No memory entities here."
    return "\n".join(f"{r.get('modified') or '-':<25}  {r['permalink']:<32}  {r['title']}" for r in rows)


def _saved_text(verb: str) -> Callable[[dict[str, Any]], str]:
    def text(r: dict[str, Any]) -> str:
        line = f"{verb} {r.get('title')} ({r.get('permalink')}): verified on the server."
        if r.get("added") is False:
            line = f"{r.get('title')} ({r.get('permalink')}) already has this observation; nothing changed."
        if r.get("marked_sensitive"):
            line += " Marked sensitive."
        if r.get("archived"):
            line += f" The server's differing version was kept as {r['archived']}."
        if r.get("in_place"):
            line += f" {r.get('message', '')}"
        return line
    return text


def cmd_search(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"limit": args.limit, "include_sensitive": args.sensitive}
    if args.query:
        params["query"] = " ".join(args.query)
    if args.tag:
        params["tags"] = args.tag
    if args.type:
        params["type"] = args.type
    if args.since:
        params["since"] = args.since
    return _out(args, _call(args, Method.MEMORY_SEARCH, params), _search_text)


def cmd_read(args: argparse.Namespace) -> int:
    return _out(args, _call(args, Method.MEMORY_READ, {"permalink": args.permalink}), lambda r: r["content"])


def cmd_list(args: argparse.Namespace) -> int:
    params = {k: v for k, v in (("folder", args.folder), ("tag", args.tag)) if v}
    return _out(args, _call(args, Method.MEMORY_LIST, params), _list_text)


def cmd_write(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {
        "title": args.title,
        "observations": [{"category": c, "text": t} for c, t in args.obs],
        "relations": [{"rel": r, "target": t} for r, t in args.rel or []],
        "tags": args.tag or [], "type": args.type}
    if args.folder:
        params["folder"] = args.folder
    if args.sensitive:
        params["sensitivity"] = "sensitive"
    return _out(args, _call(args, Method.MEMORY_WRITE, params, write=True), _saved_text("Saved"))


def cmd_append(args: argparse.Namespace) -> int:
    params = {"permalink": args.permalink, "category": args.category, "text": args.text}
    if args.context:
        params["context"] = args.context
    return _out(args, _call(args, Method.MEMORY_APPEND, params, write=True), _saved_text("Added to"))


def cmd_edit(args: argparse.Namespace) -> int:
    params = {"permalink": args.permalink, "find": args.find, "replace": args.replace}
    return _out(args, _call(args, Method.MEMORY_EDIT, params, write=True), _saved_text("Edited"))


def cmd_delete(args: argparse.Namespace) -> int:
    params = {"permalink": args.permalink}
    if args.reason:
        params["reason"] = args.reason

    def text(r: dict[str, Any]) -> str:
        if r.get("in_place"):
            return f"Marked {r['deleted']} as trashed in place: {r.get('message', '')}"
        return f"Moved {r['deleted']} to {r.get('trash')} on the server (restore it from there)."
    return _out(args, _call(args, Method.MEMORY_DELETE, params, write=True), text)


def cmd_refresh(args: argparse.Namespace) -> int:
    result = _call(args, Method.MEMORY_REFRESH, {}, write=True)
    return _out(args, result,
                lambda r: f"{'Up to date' if r['refreshed'] else 'Not refreshed: ' + r.get('message', '')}"
                          f"; {r['entities']} memory entities.")


def cmd_mcp(args: argparse.Namespace) -> int:
    from ..mcp_server import run_stdio

    return run_stdio(args.config, mirror=getattr(args, "mirror", None))


def register(subparsers: Subparsers) -> None:
    """Add ``memory`` (with its actions, each taking its own ``--mirror``) and ``mcp`` (acting on one mirror)."""
    mem = add_command(subparsers, "memory", lambda a: 2,
                     "search and change the memory library (the agents' memory tools)")
    sub = mem.add_subparsers(dest="memory_command", metavar="ACTION", required=True)

    def action(name: str, fn: Callable[[argparse.Namespace], int], help_: str, *, write: bool = False
               ) -> argparse.ArgumentParser:
        sp = add_command(sub, name, fn, help_)
        sp.add_argument("--json", action="store_true", help="print the result object")
        sp.add_argument("--mirror", metavar="NAME", help="the memory library's mirror (its name, library or "
                                                         "folder), when the config has several [[mirror]]")
        if write:
            sp.add_argument("--timeout", type=_seconds, default=None, metavar="S",
                            help="seconds to wait for the server (default: [memory] write_timeout)")
        return sp

    sp = action("search", cmd_search, "find entities by keywords, tags, type and date")
    sp.add_argument("query", nargs="*", metavar="WORD", help="words to find (all must match; none: the newest)")
    sp.add_argument("--tag", action="append", metavar="TAG", help="must carry this tag (repeatable)")
    sp.add_argument("--type", metavar="TYPE", help="only entities of this type (note, person, course, …)")
    sp.add_argument("--since", metavar="DATE", help="modified on or after this ISO date")
    sp.add_argument("--sensitive", action="store_true", help="include sensitive entities")
    sp.add_argument("--limit", type=int, default=8, metavar="N", help="at most N results (default: %(default)s)")
    sp = action("read", cmd_read, "print one entity")
    sp.add_argument("permalink", help="the entity's permalink (as search and list print it)")
    sp = action("list", cmd_list, "list entities of a folder or a tag")
    sp.add_argument("--folder", metavar="FOLDER", help="entities in this folder of the library")
    sp.add_argument("--tag", metavar="TAG", help="entities carrying this tag")
    sp = action("write", cmd_write, "create an entity (one fact per observation)", write=True)
    sp.add_argument("title", help="the entity's title (its permalink is made from it)")
    sp.add_argument("--obs", nargs=2, action="append", required=True, metavar=("CATEGORY", "TEXT"),
                    help="one observation, `- [CATEGORY] TEXT` (repeatable; at least one)")
    sp.add_argument("--rel", nargs=2, action="append", metavar=("RELATION", "TARGET"),
                    help="one relation, `- RELATION [[TARGET]]` (repeatable)")
    sp.add_argument("--tag", action="append", metavar="TAG", help="a tag (repeatable; \"a, b\" is two tags)")
    sp.add_argument("--type", default="note", help="the entity type (default: %(default)s)")
    sp.add_argument("--folder", metavar="FOLDER", help="the library folder to write it in (default: by type)")
    sp.add_argument("--sensitive", action="store_true", help="mark it sensitive")
    sp = action("append", cmd_append, "add one observation to an entity", write=True)
    sp.add_argument("permalink", help="the entity to add to")
    sp.add_argument("category", help="the observation's category, e.g. fact, preference, todo")
    sp.add_argument("text", help="the observation's text")
    sp.add_argument("--context", help="where it came from or when it applies (kept in parentheses)")
    sp = action("edit", cmd_edit, "replace one exact piece of text in an entity", write=True)
    sp.add_argument("permalink", help="the entity to edit")
    sp.add_argument("--find", required=True, help="the exact text to replace (it must occur once)")
    sp.add_argument("--replace", required=True, help="what replaces it")
    sp = action("delete", cmd_delete, "move an entity into /.trash/ on the server", write=True)
    sp.add_argument("permalink", help="the entity to delete")
    sp.add_argument("--reason", help="why, recorded in the activity")
    sp = action("refresh", cmd_refresh, "check the server for changes now", write=True)
    sp = add_command(subparsers, "mcp", cmd_mcp, "serve the memory tools to an MCP client over stdio (the daemon "
                     "must run)")
    add_mirror_option(sp)
