"""Turn Seahub and file-server answers into engine values.

Helpers of :mod:`ohsync.engine.client`: each takes a parsed body or an
``httpx.Response`` and returns a value from :mod:`ohsync.engine.models` (or
a path), raising :class:`ProtocolError` when the answer has the wrong shape.
"""

from __future__ import annotations

import io
import os
import re
from typing import Any, BinaryIO

import httpx

from ..errors import NotFoundError, ProtocolError
from ..models import RepoInfo, UploadResult
from .errors import check_id, parse_json
from .paths import join_remote, name_problem, normalize_remote_path, split_remote

__all__ = [
    "REPO_ID",
    "as_int",
    "as_str",
    "check_repo_id",
    "location_path",
    "move_result",
    "parse_update_answer",
    "parse_upload_answer",
    "payload_size",
    "repo_from_json",
    "tell_or_none",
]

#: A library id: lowercase UUID (the URL patterns refuse upper case).
REPO_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def check_repo_id(repo_id: str) -> str:
    """``repo_id`` in its canonical form (a lower-case UUID).

    :raises NotFoundError: not a Seafile library id (no request can find it).
    """
    repo = repo_id.strip().lower() if isinstance(repo_id, str) else ""
    if not REPO_ID.match(repo):
        raise NotFoundError(f"{repo_id!r} is not a Seafile library id (a UUID).")
    return repo


def as_str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def as_int(value: Any, what: str) -> int:
    if isinstance(value, bool):
        return int(value)
    try:
        return int(value if not isinstance(value, str) else float(value))
    except (TypeError, ValueError, OverflowError) as exc:
        raise ProtocolError(f"The server sent a non-number in {what}.") from exc


def _count(value: Any) -> int:
    """A count the engine only estimates costs from: anything odd reads as 0 (unknown)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _encrypted(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() not in ("", "0", "false")
    return bool(value)


def repo_from_json(item: Any, what: str) -> RepoInfo:
    if not isinstance(item, dict):
        raise ProtocolError(f"An entry in {what} is not a JSON object.")
    repo_id, name = item.get("id"), item.get("name")
    if not isinstance(repo_id, str) or not REPO_ID.match(repo_id) or not isinstance(name, str):
        raise ProtocolError(f"An entry in {what} has no valid library id or name.")
    head = item.get("head_commit_id") or ""
    return RepoInfo(
        id=repo_id,
        name=name,
        head_commit_id=check_id(head, what=what) if head else "",
        root=as_str(item.get("root")),
        size=as_int(item.get("size") or 0, what),
        mtime=as_int(item.get("mtime") or 0, what),
        encrypted=_encrypted(item.get("encrypted", False)),
        permission=as_str(item.get("permission")) or "rw",
        file_count=_count(item.get("file_count")),
    )


def location_path(resp: httpx.Response) -> str | None:
    """The normalized ``p`` of a ``Location`` header (``?p=//x`` → ``/x``)."""
    location = resp.headers.get("Location")
    if not location:
        return None
    try:
        p = httpx.URL(location).params.get("p")
        return normalize_remote_path(p) if p is not None else None
    except (ValueError, httpx.InvalidURL) as exc:
        raise ProtocolError("The server sent an unsafe path in a Location header.") from exc


def move_result(resp: httpx.Response, dst: str, name: str, remote: str) -> str:
    body = parse_json(resp.content, what="the move answer", path=remote)
    if isinstance(body, dict) and "obj_name" in body:
        obj_name = body["obj_name"]
        problem = name_problem(obj_name)
        if problem:
            raise ProtocolError(f"The move answer names an unsafe result: {problem}.", path=remote)
        return join_remote(dst, obj_name)
    result = location_path(resp)
    if result is not None and split_remote(result)[0] == dst:
        return result
    if body == "success":  # the server's same-folder shortcut at the root
        return join_remote(dst, name)
    raise ProtocolError("The move answer does not say where the file went.", path=remote)


def parse_update_answer(content: bytes, target: str) -> str:
    """The update answer: a bare id (Go/C), maybe quoted, or a JSON array."""
    text = content.decode("utf-8", "replace").strip().strip('"').strip()
    if text.startswith("["):
        body = parse_json(content, what="the update answer", path=target)
        if isinstance(body, list) and body and isinstance(body[0], dict):
            return check_id(body[0].get("id"), what="the update answer", path=target)
    return check_id(text, what="the update answer", path=target)


def parse_upload_answer(content: bytes, parent: str, target: str, *, size: int | None = None) -> UploadResult:
    """The upload answer (``POST <upload link>?ret-json=1``): a one-item JSON
    array ``[{"name", "id", "size"}]``.

    :param parent: the folder uploaded into; ``target`` the path asked for
        (named in errors).
    :param size: bytes sent, when the answer's size must equal it.
    :returns: :class:`UploadResult` with the path the server actually stored.
    :raises ProtocolError: another shape, an unsafe stored name, or fewer
        bytes stored than ``size``.
    """
    body = parse_json(content, what="the upload", path=target)
    if not isinstance(body, list) or len(body) != 1 or not isinstance(body[0], dict):
        raise ProtocolError("The upload answer has an unexpected shape.", path=target)
    stored = body[0].get("name")
    problem = name_problem(stored)
    if problem:
        raise ProtocolError(f"The server stored the upload under an unsafe name: {problem}.", path=target)
    stored_size = as_int(body[0].get("size", size or 0), "the upload answer")
    if size is not None and stored_size != size:
        raise ProtocolError(f"The server stored {stored_size} of {size} bytes.", path=target)
    return UploadResult(path=join_remote(parent, str(stored)),
                        id=check_id(body[0].get("id"), what="the upload answer", path=target), size=stored_size)


def payload_size(data: bytes | BinaryIO) -> int:
    if isinstance(data, (bytes, bytearray, memoryview)):
        return len(data)
    try:
        return os.fstat(data.fileno()).st_size
    except (AttributeError, OSError, io.UnsupportedOperation):
        pass
    here = data.tell()
    end = data.seek(0, os.SEEK_END)
    data.seek(here)
    return end


def tell_or_none(dest: BinaryIO) -> int | None:
    try:
        if dest.seekable():
            return dest.tell()
    except (AttributeError, OSError, ValueError):
        pass
    return None
