"""Rename and move of the Seafile client (a call group of
:class:`~ohsync.engine.client.SeafileClient`), ``docs/seafile-api.md`` §5.7 (files) and §4.2 (folders).

File renames and moves answer 301 with a ``Location`` naming the result
(never followed); folder renames and moves do not name it, so the folder is
listed before and, on a clash, after to learn the name the server gave.
"""

from __future__ import annotations

import re

import httpx

from ..errors import NotFoundError, ProtocolError, RemoteOperationError, ServerError
from .answers import check_repo_id, location_path, move_result
from .dirs import DirCalls
from .paths import join_remote, name_problem, normalize_remote_path, split_remote
from .transport import SeafileHTTP

__all__ = ["MoveCalls"]


class MoveCalls:
    """Rename and move files and folders (see the module docstring)."""

    def __init__(self, http: SeafileHTTP, dirs: DirCalls) -> None:
        self.http = http
        self._dirs = dirs

    def rename(self, repo_id: str, path: str, new_name: str, *, is_dir: bool = False) -> str:
        """Rename in place.

        Files: ``POST /api2/repos/{id}/file/?p=`` form ``operation=rename``,
        ``newname``; success is **301** and the ``Location`` names the result.
        Folders (``is_dir=True``): ``POST /api2/repos/{id}/dir/?p=`` (same
        form; the answer does not name the result, so the parent is listed
        before and, on a clash, after).

        :returns: the resulting path; the server appends `` (1)`` when
            ``new_name`` is taken. Renaming to the same name returns ``path``.
        :raises NotFoundError: the source is missing (the server's 404/520
            for a missing file are both mapped here).
        :raises RemoteOperationError: ``new_name`` is invalid.
        """
        repo = check_repo_id(repo_id)
        remote = normalize_remote_path(path)
        parent, old_name = split_remote(remote)
        problem = name_problem(new_name)
        if problem or not old_name:
            raise RemoteOperationError(
                f"Cannot rename {remote} to {new_name!r}: {problem or 'the root'}.", path=remote
            )
        if new_name == old_name:
            return remote
        form = {"operation": "rename", "newname": new_name}
        if is_dir:
            before = self._names(repo, parent)
            self.http.request(
                "POST", f"/api2/repos/{repo}/dir/", params={"p": remote}, data=form,
                what="renaming a folder", path=remote,
            )
            if new_name not in before:
                return join_remote(parent, new_name)
            return join_remote(parent, self._new_name(repo, parent, before, new_name, remote))
        resp = self._mutate_file(
            repo, remote, form, what="renaming a file", expect=(301, 200)
        )
        # Only the final name is taken from Location (it differs from
        # new_name after an auto-rename): seahub 12 drops the slash between
        # folder and name (``?p=/subagain.txt``), 13 doubles it at the root.
        result = location_path(resp)
        final = split_remote(result)[1] if result is not None else ""
        if result is not None and split_remote(result)[0] != parent:
            final = _final_name(result, parent, new_name)
        if not final or name_problem(final):
            raise ProtocolError("The rename answer does not say where the file went.", path=remote)
        return join_remote(parent, final)

    def move(self, repo_id: str, path: str, dst_dir: str, *, is_dir: bool = False) -> str:
        """Move into another folder of the same library.

        Files: ``POST /api2/repos/{id}/file/?p=`` form ``operation=move``,
        ``dst_repo``, ``dst_dir`` (success 301 with ``{"parent_dir",
        "obj_name"}``).  Folders (``is_dir=True``): ``POST
        /api/v2.1/repos/sync-batch-move-item/`` (JSON), with the destination
        listed before and, on a clash, after to learn the final name.

        A move into the folder the item is already in returns ``path``
        without a request (the server would make a copy named ``x (1)``).
        Note: the server answers success for a missing source and changes
        nothing; check existence first where it matters.

        :returns: the new path (``name (1)`` when the name was taken).
        :raises NotFoundError: the destination folder does not exist.
        """
        repo = check_repo_id(repo_id)
        remote = normalize_remote_path(path)
        dst = normalize_remote_path(dst_dir)
        parent, name = split_remote(remote)
        if not name:
            raise ValueError("cannot move the library root")
        if dst == parent:
            return remote
        if dst == remote or dst.startswith(remote + "/"):
            raise RemoteOperationError(f"Cannot move {remote} into itself.", path=remote)
        if is_dir:
            before = self._names(repo, dst)
            self.http.request(
                "POST", "/api/v2.1/repos/sync-batch-move-item/",
                json={"src_repo_id": repo, "src_parent_dir": parent, "src_dirents": [name],
                      "dst_repo_id": repo, "dst_parent_dir": dst},
                what="moving a folder", path=remote,
            )
            if name not in before:
                return join_remote(dst, name)
            return join_remote(dst, self._new_name(repo, dst, before, name, remote))
        resp = self._mutate_file(
            repo, remote, {"operation": "move", "dst_repo": repo, "dst_dir": dst},
            what="moving a file", expect=(301, 200),
        )
        return move_result(resp, dst, name, remote)

    def _mutate_file(self, repo: str, remote: str, form: dict[str, str], *, what: str,
                     expect: tuple[int, ...]) -> httpx.Response:
        try:
            return self.http.request(
                "POST", f"/api2/repos/{repo}/file/", params={"p": remote}, data=form,
                what=what, path=remote, expect=expect,
            )
        except ServerError as exc:
            # 520 "Failed to rename file: file does not exist"
            if exc.status == 520 and "not exist" in str(exc).lower():
                raise NotFoundError(
                    f"The file {remote} does not exist (while {what}).", status=520, path=remote
                ) from exc
            raise

    def _names(self, repo: str, folder: str) -> set[str]:
        return {entry.name for entry in self._dirs.listing(repo, folder)[0].entries}

    def _new_name(self, repo: str, folder: str, before: set[str], wanted: str, source: str) -> str:
        """After an operation that auto-renamed on a clash: find the new name."""
        after = self._names(repo, folder)
        stem, dot, ext = wanted.rpartition(".") if "." in wanted[1:] else (wanted, "", "")
        patterns = [  # "x (1).ext" (files) or "x.ext (1)" (Python splitext on dirs)
            re.compile(re.escape(stem) + r" \(\d+\)" + re.escape(dot + ext) + "$"),
            re.compile(re.escape(wanted) + r" \(\d+\)$"),
        ]
        appeared = after - before
        new = sorted(n for n in appeared if any(p.match(n) for p in patterns))
        if not new and len(appeared) == 1:
            new = sorted(appeared)
        if len(new) != 1:
            raise ProtocolError(
                f"Could not tell the name the server gave {source} in {folder}.", path=source
            )
        return new[0]



def _final_name(location: str, parent: str, wanted: str) -> str:
    """The new name in a seahub 12 rename ``Location`` (``parent`` + name with
    no slash between): the text after ``parent``; "" when it does not fit."""
    glued = location[len(parent):] if parent != "/" and location.startswith(parent) else ""
    stem = wanted.rsplit(".", 1)[0] if "." in wanted[1:] else wanted
    if glued and (glued == wanted or glued.startswith(stem)):
        return glued
    return ""

