"""Folder calls of the Seafile client (a call group of
:class:`~ohsync.engine.client.SeafileClient`): listing and creating folders.

``GET /api2/repos/{id}/dir/`` (with ``oid`` for the one-request "uptodate"
check and ``recursive=1``) and ``POST …/dir/`` ``operation=mkdir``
(``docs/seafile-api.md`` §4).  Listings are parsed by
:mod:`ohsync.engine.client.listing`; unsafe names are left out and kept in
:attr:`~ohsync.engine.client.dirs.DirCalls.last_rejected`.
"""

from __future__ import annotations

import logging

from .answers import check_repo_id, location_path
from .transport import SeafileHTTP
from .listing import parse_listing
from .paths import normalize_remote_path, split_remote
from ..errors import NotFoundError, RemoteOperationError
from ..models import DirListing

__all__ = ["DirCalls"]

log = logging.getLogger("ohsync.client")


class DirCalls:
    """List and create folders (see the module docstring)."""

    def __init__(self, http: SeafileHTTP) -> None:
        self.http = http
        #: after each ``list_dir``: ``(path, reason)`` for every entry left out (see SeafileClient)
        self.last_rejected: list[tuple[str, str]] = []

    def list_dir(
        self, repo_id: str, path: str, *, oid: str | None = None, recursive: bool = False
    ) -> DirListing:
        """``GET /api2/repos/{id}/dir/?p=<path>[&oid=][&recursive=1]``.

        :param path: the remote folder.
        :param oid: the folder id seen last time: if unchanged the server
            answers ``"uptodate"`` and the result has ``uptodate=True`` and no
            entries (one cheap request).
        :param recursive: list every descendant (pre-order); paths are rebuilt
            from the server's ``parent_dir`` (``/`` for root entries, ``/x/``
            directly under ``p=/x``, ``/x/y`` deeper).  Not sent again after a
            drop, a 5xx or a timeout (only after a 429's ``Retry-After``): the
            caller lists folder by folder instead.
        :returns: :class:`DirListing` with full remote paths and the folder's
            ``oid`` header.  Entries with unsafe names are left out and listed
            in :attr:`last_rejected`.
        :raises NotFoundError: the folder (or library) does not exist, or
            ``path`` names a file.
        """
        listing, rejected = self.listing(
            check_repo_id(repo_id), normalize_remote_path(path), oid=oid, recursive=recursive
        )
        self.last_rejected = rejected
        for rejected_path, reason in rejected:
            log.warning("skipping unsafe remote name %r: %s", rejected_path, reason)
        return listing

    def listing(self, repo: str, folder: str, *, oid: str | None = None,
                recursive: bool = False) -> tuple[DirListing, list[tuple[str, str]]]:
        """One listing without touching :attr:`last_rejected` (checks of other calls): ``(listing, rejected)``."""
        params: dict[str, str] = {"p": folder}
        if oid:
            params["oid"] = oid
        if recursive:
            params["recursive"] = "1"
        what = "listing a folder"
        # a recursive walk is sent once after a drop, a 5xx or a timeout: its callers fall back to
        # per-folder listings, and sending again a walk that outlasted the read timeout repeats it
        resp = self.http.request("GET", f"/api2/repos/{repo}/dir/", params=params, what=what, path=folder,
                                 idempotent=not recursive)
        return parse_listing(resp, folder, recursive=recursive, requested_oid=oid)

    def mkdir(self, repo_id: str, path: str, *, parents: bool = True) -> None:
        """Create a folder: ``POST /api2/repos/{id}/dir/?p=`` form ``operation=mkdir``
        (``create_parents=true`` when ``parents``).

        An existing folder is not an error and never produces ``x (1)``: the
        parent is listed first, and an existing folder returns at once.

        :param parents: create missing ancestors (``mkdir -p``); without it a
            missing parent raises NotFoundError.
        :raises RemoteOperationError: a file stands at ``path``, or the
            server created the folder under another name (a race).
        :raises NotFoundError: parent missing and ``parents`` is False.
        """
        repo = check_repo_id(repo_id)
        folder = normalize_remote_path(path)
        if folder == "/":
            return
        parent, name = split_remote(folder)
        try:
            siblings, _ = self.listing(repo, parent)
        except NotFoundError:
            if not parents:
                raise
        else:
            for entry in siblings.entries:
                if entry.name == name:
                    if entry.is_dir:
                        return
                    raise RemoteOperationError(
                        f"Cannot create the folder {folder}: a file with that name exists.",
                        path=folder,
                        status=None,
                    )
        data = {"operation": "mkdir"}
        if parents:
            data["create_parents"] = "true"
        resp = self.http.request(
            "POST", f"/api2/repos/{repo}/dir/", params={"p": folder}, data=data,
            what="creating a folder", path=folder, expect=(200, 201),
        )
        created = location_path(resp)
        if created is not None and created != folder:
            raise RemoteOperationError(
                f"The server created the folder as {created} instead of {folder} "
                f"(someone created {folder} at the same time).",
                path=folder,
            )

