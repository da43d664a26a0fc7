"""Tree operations on a library: every change rewrites the directory objects
from the changed folder up to the root (bumping ancestor mtimes, so every
ancestor id changes) and makes exactly one commit.

All operations take ``Store.lock`` for their whole read-modify-commit cycle,
so concurrent writers are serialised like on the real server: two uploads
to the same path both succeed and the later one wins.
"""
from __future__ import annotations

import time
from typing import Any, Callable, TypeGuard, TypeVar

from . import ids
from .names import join_path, nfc, parent_and_name, seahub_unique_name, split_path
from .store import Store

#: What a folder rewrite's function returns besides "changed" (see :meth:`RepoOps.rewrite`).
R = TypeVar("R")
#: A folder's entries by name, as a rewrite function edits them.
Entries = dict[str, dict[str, Any]]


class OpError(Exception):
    """Base of tree operation errors."""


class FolderNotFound(OpError):
    """A folder on the way does not exist; ``path`` is that folder."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class NotAFolder(OpError):
    """A path component names a file where a folder was needed."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class EntryNotFound(OpError):
    """The entry an operation acts on does not exist."""


def is_dir(entry: dict[str, Any] | None) -> TypeGuard[dict[str, Any]]:
    """True when ``entry`` is a directory entry (so not None)."""
    return entry is not None and entry["mode"] == ids.DIR_MODE


def now() -> int:
    """Current time in whole seconds."""
    return int(time.time())


def desc_added(names: list[str]) -> str:
    """Commit description of an upload: ``Added "a".`` or ``Added "a" and 2 more files.``"""
    if len(names) == 1:
        return f'Added "{names[0]}".'
    return f'Added "{names[0]}" and {len(names) - 1} more files.'


class RepoOps:
    """Operations on the libraries of one ``Store``."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.on_commit: list[Callable[[str, dict[str, Any]], None]] = []

    # ------------------------------------------------------------------ reading
    def lookup(self, repo_id: str, path: str, root: str | None = None) -> dict[str, Any] | None:
        """Entry at ``path`` (byte-exact names) or None; ``/`` gives a synthetic dir entry."""
        did = self.store.root_id(repo_id) if root is None else root
        entry: dict[str, Any] = {"id": did, "mode": ids.DIR_MODE, "name": "", "mtime": 0}
        for part in split_path(path):
            if not is_dir(entry):
                return None
            found = None
            for e in self.store.read_dir(entry["id"]):
                if e["name"] == part:
                    found = e
                    break
            if found is None:
                return None
            entry = found
        return entry

    def walk(self, repo_id: str) -> tuple[dict[str, dict[str, Any]], set[str]]:
        """All file entries by path and all folder paths (``/a/b``) of a head tree."""
        files: dict[str, dict[str, Any]] = {}
        dirs: set[str] = set()
        stack = [("", self.store.root_id(repo_id))]
        while stack:
            prefix, did = stack.pop()
            for e in self.store.read_dir(did):
                p = f"{prefix}/{e['name']}"
                if is_dir(e):
                    dirs.add(p)
                    stack.append((p, e["id"]))
                else:
                    files[p] = e
        return files, dirs

    # ------------------------------------------------------------------ core
    def _rewrite(self, did: str, parts: list[str], fn: Callable[[Entries], tuple[R, bool]], t: int,
                 create_parents: bool, done: list[str]) -> tuple[str, R, bool]:
        entries = {e["name"]: e for e in self.store.read_dir(did)}
        if not parts:
            result, changed = fn(entries)
        else:
            name = parts[0]
            here = done + [name]
            child = entries.get(name)
            if child is None:
                if not create_parents:
                    raise FolderNotFound(join_path(here))
                child = {"id": ids.EMPTY_ID, "mode": ids.DIR_MODE, "mtime": t, "name": name}
                created = True
            elif not is_dir(child):
                raise NotAFolder(join_path(here))
            else:
                created = False
            new_id, result, changed = self._rewrite(child["id"], parts[1:], fn, t, create_parents, here)
            changed = changed or created
            if changed:
                entries[name] = dict(child, id=new_id, mtime=t)
        if not changed:
            return did, result, False
        return self.store.write_dir(list(entries.values())), result, True

    def rewrite(self, root: str, dir_path: str, fn: Callable[[Entries], tuple[R, bool]],
                create_parents: bool = False) -> tuple[str, R]:
        """Apply ``fn(entries_by_name) -> (result, changed)`` to the folder at ``dir_path``.

        Returns ``(new_root_id, result)``.  Raises ``FolderNotFound`` /
        ``NotAFolder`` for a missing or non-folder component.
        """
        new_root, result, _ = self._rewrite(root, split_path(dir_path), fn, now(), create_parents, [])
        return new_root, result

    def commit(self, repo_id: str, new_root: str, desc: str, user: str, force: bool = False,
               keep_desc: bool = True) -> dict[str, Any] | None:
        """Make a commit when the root changed (or ``force``); returns it or None."""
        repo = self.store.repos[repo_id]
        head = self.store.head_commit(repo_id)
        if new_root == head["root_id"] and not force:
            return None
        if not keep_desc:
            repo.desc = ""
        c = self.store.write_commit(repo_id, new_root, repo.head, user, desc, repo.name, repo.desc)
        repo.head = c["commit_id"]
        self.store.save()
        for cb in list(self.on_commit):
            cb(repo_id, c)
        return c

    # ------------------------------------------------------------------ operations
    def mkdir(self, repo_id: str, path: str, user: str, create_parents: bool = False) -> str:
        """Create a folder; returns its final path (auto-renamed ``x (1)`` unless ``create_parents``).

        Raises FolderNotFound (parent missing), NotAFolder (a file in the way).
        """
        path = nfc(path)
        parent, name = parent_and_name(path)
        with self.store.lock:
            root = self.store.root_id(repo_id)
            if create_parents:
                def fn(entries: Entries) -> tuple[str, bool]:
                    e = entries.get(name)
                    if e is not None:
                        if not is_dir(e):
                            raise NotAFolder(path)
                        return name, False
                    entries[name] = {"id": ids.EMPTY_ID, "mode": ids.DIR_MODE, "mtime": now(), "name": name}
                    return name, True
                new_root, final = self.rewrite(root, parent, fn, create_parents=True)
                self.commit(repo_id, new_root, f'Added directory "{path.strip("/")}"', user)
                return path
            def fn2(entries: Entries) -> tuple[str, bool]:
                final = seahub_unique_name(name, entries.__contains__, is_dir=True)
                entries[final] = {"id": ids.EMPTY_ID, "mode": ids.DIR_MODE, "mtime": now(), "name": final}
                return final, True
            new_root, final = self.rewrite(root, parent, fn2)
            self.commit(repo_id, new_root, f'Added directory "{final}"', user)
            return join_path(split_path(parent) + [final])

    def put_files(self, repo_id: str, parent: str, files: list[tuple[str, str, int]], user: str, *,
                  replace: bool, mtime: int | None = None, create_parents: bool = False,
                  unique: Callable[..., Any] | None = None, keep_desc: bool = False) -> list[str]:
        """Add files ``(name, file_id, size)`` to folder ``parent`` in one commit.

        ``replace`` overwrites an entry of the same name (even a folder); else the
        name is made unique with ``unique(name, exists)`` (fileserver rule by
        default).  Returns the final names in order.
        """
        from .names import fs_unique_name
        unique = unique or fs_unique_name
        with self.store.lock:
            root = self.store.root_id(repo_id)
            t = now()

            def fn(entries: Entries) -> tuple[list[str], bool]:
                finals = []
                for name, fid, size in files:
                    name = nfc(name)
                    if not replace:
                        free = unique(name, entries.__contains__)
                        if free is None:
                            raise OpError("Too many files with same name.")
                        name = free
                    entries[name] = {"id": fid, "mode": ids.FILE_MODE, "modifier": user,
                                     "mtime": t if mtime is None else int(mtime), "name": name,
                                     "size": size}
                    finals.append(name)
                return finals, True
            new_root, finals = self.rewrite(root, nfc(parent), fn, create_parents=create_parents)
            self.commit(repo_id, new_root, desc_added(finals), user, keep_desc=keep_desc)
            return finals

    def update_file(self, repo_id: str, path: str, fid: str, size: int, user: str,
                    mtime: int | None = None) -> str:
        """Replace the content of an existing file; no commit when the id is unchanged.

        Raises EntryNotFound when no file is at ``path``.
        """
        parent, name = parent_and_name(path)
        with self.store.lock:
            e = self.lookup(repo_id, path)
            if e is None or is_dir(e):
                raise EntryNotFound(path)
            if e["id"] == fid:
                return fid
            root = self.store.root_id(repo_id)

            def fn(entries: Entries) -> tuple[None, bool]:
                entries[name] = dict(entries[name], id=fid, size=size, modifier=user,
                                     mtime=now() if mtime is None else int(mtime))
                return None, True
            new_root, _ = self.rewrite(root, parent, fn)
            self.commit(repo_id, new_root, f'Modified "{name}"', user, keep_desc=False)
            return fid

    def delete(self, repo_id: str, parent: str, names: list[str], user: str) -> list[str]:
        """Delete entries of folder ``parent`` in one commit; returns the names deleted.

        Missing names are skipped; a missing parent raises FolderNotFound.
        """
        with self.store.lock:
            root = self.store.root_id(repo_id)
            removed: list[tuple[str, bool]] = []

            def fn(entries: Entries) -> tuple[None, bool]:
                for n in names:
                    e = entries.pop(n, None)
                    if e is not None:
                        removed.append((n, is_dir(e)))
                return None, bool(removed)
            new_root, _ = self.rewrite(root, parent, fn)
            if removed:
                first, first_dir = removed[0]
                if len(removed) > 1:
                    desc = f'Deleted "{first}" and {len(removed) - 1} more files.'
                else:
                    desc = f'Removed directory "{first}"' if first_dir else f'Deleted "{first}"'
                self.commit(repo_id, new_root, desc, user)
            return [n for n, _ in removed]

    def rename(self, repo_id: str, path: str, newname: str, user: str) -> str:
        """Rename an entry within its folder (auto-renamed on a clash); keeps id and mtime.

        Returns the final name.  Raises EntryNotFound.
        """
        parent, old = parent_and_name(path)
        newname = nfc(newname)
        with self.store.lock:
            root = self.store.root_id(repo_id)

            def fn(entries: Entries) -> tuple[str, bool]:
                e = entries.pop(old, None)
                if e is None:
                    raise EntryNotFound(path)
                final = seahub_unique_name(newname, entries.__contains__, is_dir=is_dir(e))
                entries[final] = dict(e, name=final)
                return final, True
            new_root, final = self.rewrite(root, parent, fn)
            self.commit(repo_id, new_root, f'Renamed "{old}"', user)
            return final

    def _clone_for_repo(self, entry: dict[str, Any], cross_repo: bool) -> dict[str, Any]:
        e = dict(entry)
        if cross_repo and not is_dir(e) and e["id"] == ids.EMPTY_ID:
            e["id"], _ = self.store.write_blob(b"", explicit_empty=True)
        return e

    def move_copy(self, src_repo: str, src_path: str, dst_repo: str, dst_dir: str, user: str,
                  copy: bool, rename_clash: bool = True) -> str | None:
        """Move or copy an entry to folder ``dst_dir`` (possibly in another library).

        Clashes at the destination are auto-renamed (``a (1).txt``).  Returns the
        final name, or None when the source is missing (nothing changes).
        Raises FolderNotFound for a missing destination folder.
        """
        src_parent, name = parent_and_name(src_path)
        with self.store.lock:
            entry = self.lookup(src_repo, src_path)
            if entry is None:
                return None
            entry = self._clone_for_repo(entry, src_repo != dst_repo)

            def add(entries: Entries) -> tuple[str, bool]:
                final = name
                if rename_clash:
                    final = seahub_unique_name(name, entries.__contains__, is_dir=is_dir(entry))
                entries[final] = dict(entry, name=final)
                return final, True

            def remove(entries: Entries) -> tuple[None, bool]:
                entries.pop(name, None)
                return None, True
            if src_repo == dst_repo:
                root = self.store.root_id(src_repo)
                if not copy:
                    root, _ = self.rewrite(root, src_parent, remove)
                root, final = self.rewrite(root, nfc(dst_dir), add)
                verb = "Added" if copy else "Moved"
                self.commit(src_repo, root, f'{verb} "{final}"' + ("" if not copy else ""), user)
                return final
            droot, final = self.rewrite(self.store.root_id(dst_repo), nfc(dst_dir), add)
            self.commit(dst_repo, droot, f'Added "{final}"', user)
            if not copy:
                sroot, _ = self.rewrite(self.store.root_id(src_repo), src_parent, remove)
                self.commit(src_repo, sroot, f'Deleted "{name}"', user)
            return final

    def read_file(self, repo_id: str, path: str) -> bytes:
        """Content of the file at ``path``; raises EntryNotFound."""
        e = self.lookup(repo_id, path)
        if e is None or is_dir(e):
            raise EntryNotFound(path)
        return self.store.read_blob(e["id"])
