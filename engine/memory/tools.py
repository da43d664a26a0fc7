"""The memory tools' semantics over a :class:`~ohsync.engine.memory.index.MemoryIndex`.

Reads (``search``, ``read``, ``list``) answer from the index and the files;
writes are planned here as pure byte transforms (``plan_write``,
``plan_append``, ``plan_edit``, ``plan_trash``) that the daemon applies on
its sync worker and pushes by read-merge-write.  The contract (issue 15):

* ``search``: structure filters first (``tags``: all of them; ``type``:
  exact; ``since``: ``modified`` at or after; ``sensitivity: sensitive`` left
  out unless ``include_sensitive``; trashed entities never), then keyword
  scoring per space-separated word, case-insensitive substring, title ×4,
  permalink ×3, tag ×2, body ×1 (CJK works as plain substrings, no word
  segmentation), ``modified`` descending breaking ties; each result carries
  its one-hop links both ways as ``related`` (not ranked): its own
  ``[[relations]]`` (``direction: out``) and the links of other entities to
  it (``direction: in``), each with its relation type; and a snippet: the
  best hit line with one line either side.
* ``read`` by permalink (found after renames and moves: the index follows
  the files), text past 8 KB truncated with a marker; ``list`` by folder or
  tag without bodies.

Errors are :class:`~ohsync.engine.memory.edit.MemoryToolError` with a
sentence.
"""
from __future__ import annotations

import os
import stat
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..local_limits import path_too_long
from ..names import path_problem, upload_name_problem
from ..nofollow import OutsideMirrorError, entry_stat, read_file
from .edit import (
    MemoryToolError,
    append_observation,
    entity_filename,
    journal_text,
    make_permalink,
    observation_line,
    render_entity,
    replace_once,
    set_fields,
    yaml_scalar,
)
from .format import MemoryParseError, parse_memory
from .guard import added, secrets_in, sensitive_in
from .index import Entity, MemoryIndex, is_indexed, to_timestamp
from .inputs import check_input
from .merge import is_journal_file

__all__ = ["MemoryTools", "MemoryToolError", "WritePlan", "READ_LIMIT", "DEFAULT_LIMIT", "TYPE_FOLDERS"]

#: Bytes of an entity ``read`` returns before it truncates.
READ_LIMIT = 8 * 1024
#: Results ``search`` returns unless asked for another number.
DEFAULT_LIMIT = 8
#: Where ``write`` puts an entity of a type when no folder is given.
TYPE_FOLDERS = {"preference": "preferences", "course": "courses", "task": "tasks", "journal": "journal"}
_DEFAULT_FOLDER = "knowledge"
_MAX_RELATED = 20
_SNIPPET_LINE = 300


class WritePlan:
    """What a write does to one file.

    :ivar path: library-relative path.
    :ivar data: the file's new bytes.
    :ivar result: the JSON result to return once the server holds them.
    :ivar create: True for a new file (it must not exist yet).
    """

    def __init__(self, path: str, data: bytes, result: dict[str, Any], create: bool = False) -> None:
        self.path, self.data, self.result, self.create = path, data, result, create


def _text_list(value: Any, what: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, (str, int)) and not isinstance(v, bool)
                                                       for v in value):
        raise MemoryToolError(f"`{what}` must be a list of strings")
    return [check_input(what, str(v), "find") for v in value]


def _tag_list(value: Any, what: str) -> list[str]:
    """Tags given as a list of strings or one string, each split at commas: ``["a, b"]`` is the tags ``a`` and
    ``b``, as a frontmatter ``tags: a, b`` is read (a full-width ， counts too); empty pieces are dropped.

    :raises MemoryToolError: not a string or a list of strings.
    """
    return [t.strip() for v in _text_list(value, what) for t in v.replace("，", ",").split(",") if t.strip()]


def _opt_str(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise MemoryToolError(f"`{what}` must be a string")
    return check_input(what, value, "find").strip() or None


_NEVER = "Never store secrets in memory; leave them out or describe them without the value"
_MARGIN = 512  # characters around a change that the result check reads (longer than any secret pattern)


def _guard(*fields: tuple[str, Any]) -> None:
    """Refuse when one of the ``(field name, value)`` pairs holds a secret.

    :raises MemoryToolError: "refused: `field`: why", naming the first such field.
    """
    for name, value in fields:
        if value is None:
            continue
        found = secrets_in(str(value))
        if found:
            raise MemoryToolError(f"refused: `{name}`: {found[0].why}. {_NEVER}")


def _window(before: bytes, after: bytes) -> tuple[str, str]:
    """The changed part of a file with :data:`_MARGIN` characters either side,
    as ``(before, after)`` text: what a write added, in its surroundings."""
    b = before.decode("utf-8", errors="replace")
    a = after.decode("utf-8", errors="replace")
    limit = min(len(a), len(b))
    lo, hi = 0, limit  # the common prefix, by halving (slice compares run in C: a 1 MB journal stays fast)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if a[:mid] == b[:mid] else (lo, mid - 1)
    head = lo
    lo, hi = 0, limit - head  # the common suffix, not overlapping the prefix
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if a[len(a) - mid:] == b[len(b) - mid:] else (lo, mid - 1)
    tail = lo
    start = max(0, head - _MARGIN)
    return b[start:len(b) - tail + _MARGIN], a[start:len(a) - tail + _MARGIN]


def _guard_result(before: bytes, after: bytes, what: str) -> tuple[str, str]:
    """Refuse a write whose resulting entity text holds a secret it did not
    hold before (two edits that assemble a key, a code split over an edit
    boundary); text that was there already never blocks a write.

    :returns: the changed window ``(before, after)`` (for the sensitivity check).
    :raises MemoryToolError: "refused: the entity's text after this …".
    """
    b, a = _window(before, after)
    new = added(secrets_in(b), secrets_in(a))
    if new:
        raise MemoryToolError(f"refused: the entity's text after this {what}: {new[0].why}. {_NEVER}")
    return b, a


def _adds_sensitive(window: tuple[str, str]) -> bool:
    """True when the changed window brings in a personal detail it did not hold."""
    return bool(added(sensitive_in(window[0]), sensitive_in(window[1])))


def _refuse_link(root: Path, rel: str) -> os.stat_result | None:
    """The stat of ``rel`` in the mirror (None when absent), refusing a
    symbolic link there or on the way.

    :raises MemoryToolError: "refused: …" naming the link.
    """
    try:
        return entry_stat(root, rel)
    except OutsideMirrorError as exc:
        raise MemoryToolError(f"refused: {exc}") from None


def _place_problem(root: Path, rel: str) -> str | None:
    """Why a new entity cannot be saved at ``rel`` (its folders are created on the way), or None.

    The same name checks as every other path the mirror uploads (``path_problem``), this disk's name and path
    lengths (``path_too_long``), and no folder on the way that is a file.
    """
    problem = path_problem(rel) or path_too_long(root, root / rel)
    if problem:
        return problem
    parts = rel.split("/")
    for i in range(1, len(parts)):
        folder = "/".join(parts[:i])
        try:
            st = entry_stat(root, folder)
        except OutsideMirrorError:
            return None  # a link on the way: refused with its own sentence when the file is looked at
        if st is None:
            return None
        if not stat.S_ISDIR(st.st_mode):
            return f"{folder} is a file, not a folder"
    return None


class MemoryTools:
    """The memory tools over one index.

    :param index: the mirror's index (kept current by the caller).
    :param tz: the offset written into new times (config ``[memory] time_offset``).
    :param now: the clock (tests pass a fixed one).
    :param origin: written into ``origin`` of new entities.
    """

    def __init__(self, index: MemoryIndex, tz: timezone, *, now: Callable[[], datetime] | None = None,
                 origin: str = "desktop") -> None:
        self.index = index
        self.tz = tz
        self._now = now or (lambda: datetime.now(tz))
        self.origin = origin

    def _refuse_ignored(self, rel: str) -> None:
        """Refuse a path the mirror's ignore rules take: it would never sync, and the tools leave it alone.

        :raises MemoryToolError: "… is ignored …".
        """
        if self.index.ignored(rel):
            raise MemoryToolError(f"refused: {rel} is ignored (.ohsyncignore or the `ignore` setting), so it never "
                                  "syncs and the memory tools neither read nor change it; choose another folder or "
                                  "change the ignore rules")

    def _refuse_place(self, rel: str) -> None:
        """Refuse a new entity at ``rel`` before anything is written (see :func:`_place_problem`).

        :raises MemoryToolError: "refused: … cannot be saved here (…)".
        """
        problem = _place_problem(self.index.root, rel)
        if problem:
            raise MemoryToolError(f"refused: {rel!r} cannot be saved here ({problem}); change the title or "
                                  "folder. Nothing was written.")

    def now(self) -> datetime:
        """The current time in the configured offset, to the second."""
        return self._now().astimezone(self.tz).replace(microsecond=0)

    # -- reads ----------------------------------------------------------------------

    def search(self, query: Any = None, tags: Any = None, type: Any = None, since: Any = None,
               include_sensitive: Any = False, limit: Any = DEFAULT_LIMIT) -> dict[str, Any]:
        """Ranked entities: ``{"results": [{permalink, title, type, tags, modified, snippet, related}]}``.

        :param query: space-separated keywords (none: newest first).
        :param tags: entities must carry every one of these.
        :param type: exact entity type.
        :param since: ISO date or time; ``modified`` must be at or after it.
        :param include_sensitive: also return ``sensitivity: sensitive`` entities.
        :param limit: at most this many results (1–100).
        :raises MemoryToolError: a parameter of the wrong type.
        """
        words = list(dict.fromkeys(w.lower().replace("\x00", "").replace("\x01", "")
                                   for w in (_opt_str(query, "query") or "").split()))
        words = [w for w in words if w]
        want_tags = [t.lower().lstrip("#") for t in _tag_list(tags, "tags")]
        want_type = _opt_str(type, "type")
        floor = None
        if since is not None:
            floor = to_timestamp(since, self.tz) if isinstance(since, str) else None
            if floor is None:
                raise MemoryToolError("`since` must be an ISO date such as 2026-11-01 (or a full ISO time)")
        if not isinstance(include_sensitive, bool):
            raise MemoryToolError("`include_sensitive` must be true or false")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 100:
            raise MemoryToolError("`limit` must be a whole number from 1 to 100")
        ranked: list[tuple[int, Entity]] = []
        for _ in range(3):  # again when files vanished under the first picks
            ranked = self.index.search(words, tags=want_tags, type_=want_type, since=floor,
                                       include_sensitive=include_sensitive, limit=limit)
            gone = [e.path for _, e in ranked if not (self.index.root / e.path).is_file()]
            if not gone:
                break
            self.index.update(gone)  # moved or deleted without an event naming it
        results: list[dict[str, Any]] = []
        # every result's own links resolved in one query
        targets = self.index.resolve_links(t for _, e in ranked for _, t in e.links[:_MAX_RELATED * 2])
        for score, e in ranked:
            if not (self.index.root / e.path).is_file():
                continue
            item: dict[str, Any] = {"permalink": e.permalink, "title": e.title, "type": e.type, "tags": list(e.tags),
                    "modified": e.modified, "snippet": _snippet(e.body, words),
                    "related": self._related(e, include_sensitive, targets)}
            if words:
                item["score"] = score
            results.append(item)
        return {"results": results}

    def _related(self, e: Entity, include_sensitive: bool,
                 targets: dict[str, Entity | None] | None = None) -> list[dict[str, Any]]:
        """``e``'s links both ways: its own (``direction: out``, in the file's order), then the
        links of other entities that lead to it (``direction: in``, by their path).  Each
        ``(direction, relation type, entity)`` once: two link texts naming one entity (its
        title and its permalink, say) are one link.  ``targets``: link texts already resolved
        (:meth:`MemoryIndex.resolve_links`), for several results at once."""
        out: list[dict[str, Any]] = []
        listed: set[tuple[str, str, str]] = set()

        def add(rel: str, target: str, direction: str, other: Entity | None) -> None:
            if other is not None and other.sensitivity == "sensitive" and not include_sensitive:
                return
            key = (direction, rel, other.path if other is not None else "\0" + target)
            if key in listed:
                return
            listed.add(key)
            item: dict[str, Any] = {"rel": rel, "direction": direction, "target": target,
                                    "permalink": other.permalink if other else None,
                                    "title": other.title if other else None}
            if other is not None and other.status == "trashed":
                item["status"] = "trashed"
            out.append(item)

        if targets is None:
            targets = self.index.resolve_links(t for _, t in e.links[:_MAX_RELATED * 2])
        for rel, target in e.links:
            other = targets[target] if target in targets else self.index.resolve_link(target)
            if other is not None and other.path == e.path:
                continue
            add(rel, target, "out", other)
            if len(out) >= _MAX_RELATED:
                break
        incoming = 0
        for rel, target, source in self.index.backlinks(e, _MAX_RELATED):
            if incoming >= _MAX_RELATED:
                break
            before = len(out)
            add(rel, target, "in", source)
            incoming += len(out) - before
        return out

    def entity(self, permalink: Any) -> Entity:
        """The entity with this permalink (or, as a courtesy, this path or exact title).

        :raises MemoryToolError: none matches.
        """
        key = _opt_str(check_input("permalink", permalink), "permalink")  # no NUL: it may name a path
        if not key:
            raise MemoryToolError("`permalink` is required (as returned by memory_search or memory_list)")
        e = self.index.by_permalink(key)
        if e is None:
            path = key.strip("/")
            if not path.lower().endswith(".md"):
                path += ".md"
            if is_indexed(path):
                self._refuse_ignored(path)
                self.index.update([path])
                e = self.index.get(path)
            if e is None and is_indexed(path):
                _refuse_link(self.index.root, path)  # not indexed because it is a link: say so
        if e is None:
            found = self.index.resolve_link(key)
            e = found if found is not None and found.title == key else None
        if e is None:
            raise MemoryToolError(f"no memory entity has the permalink {key!r}; it may have been deleted. "
                                  "Use memory_search to find it")
        return e

    def read(self, permalink: Any) -> dict[str, Any]:
        """One entity with its text: ``{permalink, title, type, tags, path, created, modified,
        sensitivity, status, content, size, truncated}``; ``content`` stops after
        :data:`READ_LIMIT` bytes with a marker line.

        :raises MemoryToolError: unknown permalink, or the file cannot be read.
        """
        e = self.entity(permalink)
        try:
            data = read_file(self.index.root, e.path)[0]
        except OutsideMirrorError as exc:
            self.index.update([e.path])
            raise MemoryToolError(f"refused: {exc}") from None
        except OSError as exc:
            self.index.update([e.path])
            raise MemoryToolError(f"cannot read {e.path}: {exc.strerror or exc}") from None
        text = data.decode("utf-8", errors="replace")
        truncated = len(data) > READ_LIMIT
        if truncated:
            head = data[:READ_LIMIT].decode("utf-8", errors="ignore")
            cut = head.rfind("\n")
            head = head[:cut + 1] if cut > READ_LIMIT // 2 else head + "\n"
            shown = len(head.encode("utf-8"))
            text = head + (f"…[truncated: showing {shown} of {len(data)} bytes; use memory_search with keywords "
                           "to find the rest]")
        out = {"permalink": e.permalink, "title": e.title, "type": e.type, "tags": list(e.tags), "path": e.path,
               "created": e.created, "modified": e.modified, "sensitivity": e.sensitivity, "status": e.status,
               "content": text, "size": len(data), "truncated": truncated}
        if e.damaged:
            out["damaged"] = e.damaged
        return out

    def list(self, folder: Any = None, tag: Any = None, include_sensitive: Any = True,
             limit: Any = 500) -> dict[str, Any]:
        """Entities by folder and/or tag, newest first, without bodies:
        ``{"results": [{permalink, title, type, modified, path}], "total": n}``.

        :raises MemoryToolError: a parameter of the wrong type.
        """
        where = (_opt_str(folder, "folder") or "").strip("/")
        want = (_opt_str(tag, "tag") or "").lower().strip().lstrip("#")
        if "," in want.replace("，", ","):  # tags are split at commas when read: none holds one
            raise MemoryToolError("`tag` names one tag (tags never hold a comma); for entities with any of "
                                  "several tags, use memory_search with `tags`")
        if not isinstance(include_sensitive, bool):
            raise MemoryToolError("`include_sensitive` must be true or false")
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise MemoryToolError("`limit` must be a positive whole number")
        rows, total = self.index.listing(where, want, include_sensitive, limit)
        results = [{"permalink": e.permalink, "title": e.title, "type": e.type, "modified": e.modified,
                    "path": e.path} for e in rows]
        return {"results": results, "total": total}

    # -- writes (planned here, applied and pushed by the daemon) -------------------

    def plan_write(self, title: Any, observations: Any, relations: Any = None, tags: Any = None,
                   type: Any = "note", folder: Any = None, sensitivity: Any = None) -> WritePlan:
        """A new entity file.

        :raises MemoryToolError: bad parameters, a secret in the text, or an
            entity with this title already exists.
        """
        title = check_input("title", title, "name")
        folder = check_input("folder", folder, "name")
        title_s = _opt_str(title, "title")
        if not title_s:
            raise MemoryToolError("`title` is required: a short name for the entity")
        type_s = _opt_str(type, "type") or "note"
        if not isinstance(observations, list) or not observations \
                or not all(isinstance(o, Mapping) for o in observations):
            raise MemoryToolError("`observations` must be a non-empty list of {category, text, tags?, context?}")
        rels = relations or []
        if not isinstance(rels, list) or not all(isinstance(r, Mapping) for r in rels):
            raise MemoryToolError("`relations` must be a list of {rel, target, context?}")
        tag_list = _tag_list(tags, "tags")
        fields: list[tuple[str, Any]] = [("title", title_s), ("type", type_s), ("folder", folder),
                                         *(("tags", t) for t in tag_list)]
        observations = [{**o, "tags": _tag_list(o.get("tags"), "observations[].tags")} for o in observations]
        for i, o in enumerate(observations):
            o_tags = o["tags"]
            fields += [(f"observations[{i}].category", o.get("category")), (f"observations[{i}].text", o.get("text")),
                       (f"observations[{i}].context", o.get("context")),
                       *((f"observations[{i}].tags", t) for t in o_tags)]
        for i, r in enumerate(rels):
            fields += [(f"relations[{i}].rel", r.get("rel")), (f"relations[{i}].target", r.get("target")),
                       (f"relations[{i}].context", r.get("context"))]
        for name, value in fields:
            check_input(name, value)
        _guard(*fields)
        sens = _opt_str(sensitivity, "sensitivity")
        if sens not in (None, "normal", "sensitive"):
            raise MemoryToolError("`sensitivity` must be 'normal' or 'sensitive'")
        # one field per line: digits are never joined across two fields
        auto = sens != "sensitive" and bool(sensitive_in("\n".join(str(v) for _, v in fields if v is not None)))
        sens = "sensitive" if auto or sens == "sensitive" else "normal"
        where = (_opt_str(folder, "folder") or TYPE_FOLDERS.get(type_s, _DEFAULT_FOLDER)).strip("/")
        parts = where.split("/")
        if any(p in ("", ".", "..") or p.startswith(".") for p in parts) or parts[0] == "Files":
            raise MemoryToolError(f"the folder {folder!r} cannot hold memory entities (a relative folder such as "
                                  "'knowledge' or 'courses/2026-2027-1', not Files/ or a hidden folder)")
        rel = f"{where}/{entity_filename(title_s)}"
        for part in rel.split("/"):  # what the mirror holds must upload under the same name
            problem = upload_name_problem(part)
            if problem:
                raise MemoryToolError(f"refused: {rel!r} cannot be saved on the server ({problem}); change the "
                                      "title or folder")
        self._refuse_place(rel)
        self._refuse_ignored(rel)
        existing = self.index.resolve_link(title_s)
        if existing is not None and existing.title == title_s:
            raise MemoryToolError(f"an entity titled {title_s!r} already exists (permalink {existing.permalink}); "
                                  "add to it with memory_append or change it with memory_edit")
        if _refuse_link(self.index.root, rel) is not None:
            raise MemoryToolError(f"{rel} already exists; add to it with memory_append")
        permalink = make_permalink(title_s, type_s, self.index.has_permalink)
        data = render_entity(title=title_s, permalink=permalink, type_=type_s, tags=tag_list,
                             created=self.now(), origin=self.origin, sensitivity=sens,
                             observations=observations, relations=rels)
        # the permalink is ours (a slug of the title and hex of its hash: "otp-7-2682" is no code)
        _guard_result(b"", data.replace(f"permalink: {permalink}\n".encode(), b""), "write")
        result: dict[str, Any] = {"permalink": permalink, "title": title_s, "path": rel, "sensitivity": sens}
        if auto:
            result["marked_sensitive"] = True
        return WritePlan(rel, data, result, create=True)

    def plan_append(self, entity: Entity, data: bytes, category: Any, text: Any, context: Any = None) -> WritePlan:
        """One more observation in ``entity`` (whose current bytes are ``data``).

        Journal months get the ``YYYY-MM-DD HH:MM`` prefix when the text has none.

        :raises MemoryToolError: bad parameters, a secret, or a file that does not parse.
        """
        for name, value in (("category", category), ("text", text), ("context", context)):
            check_input(name, value)
        _guard(("category", category), ("text", text), ("context", context))
        if not isinstance(text, str):
            raise MemoryToolError("`text` must be a string")
        now = self.now()
        body = journal_text(text, now) if is_journal_file(entity.path) else text
        line = observation_line(category, body, None, context)
        new, appended = append_observation(data, line)
        result: dict[str, Any] = {"permalink": entity.permalink, "title": entity.title, "path": entity.path,
                                  "appended": line, "added": appended}
        if appended:
            window = _guard_result(data, new, "append")
            fields = {"modified": now.isoformat()}
            if entity.sensitivity != "sensitive" and _adds_sensitive(window):
                fields["sensitivity"] = "sensitive"
                result["marked_sensitive"] = True
            new = set_fields(new, fields)
        return WritePlan(entity.path, new, result)

    def plan_edit(self, entity: Entity, data: bytes, find: Any, replace: Any) -> WritePlan:
        """A literal find/replace in ``entity``.

        :raises MemoryToolError: ``find`` absent or ambiguous, a secret in
            ``replace``, or an edit that breaks the file or its permalink.
        """
        if not isinstance(find, str) or not isinstance(replace, str):
            raise MemoryToolError("`find` and `replace` must be strings")
        check_input("find", find, "find")
        check_input("replace", replace)
        _guard(("replace", replace))
        new = replace_once(data, find, replace)
        window = _guard_result(data, new, "edit")
        try:
            before = parse_memory(data)
        except MemoryParseError:
            before = None
        try:
            after = parse_memory(new)
        except MemoryParseError as exc:
            if before is not None:
                raise MemoryToolError(f"refused: the edit would break the file ({exc.reason})") from None
            after = None
        result: dict[str, Any] = {"permalink": entity.permalink, "title": entity.title, "path": entity.path}
        if after is not None:
            fm_before = before.frontmatter.data if before and before.frontmatter else {}
            fm_after = after.frontmatter.data if after.frontmatter else {}
            if fm_before.get("permalink") != fm_after.get("permalink"):
                raise MemoryToolError("refused: an edit must not change the permalink (other notes refer to it)")
            fields = {}
            if fm_before.get("modified") == fm_after.get("modified"):
                fields["modified"] = self.now().isoformat()
            if str(fm_after.get("sensitivity", "normal")) != "sensitive" and _adds_sensitive(window):
                fields["sensitivity"] = "sensitive"
                result["marked_sensitive"] = True
            new = set_fields(new, fields)
        return WritePlan(entity.path, new, result)

    def plan_trash(self, entity: Entity, data: bytes, reason: Any = None) -> WritePlan:
        """Mark ``entity`` trashed (``status``, ``trashed_at``, ``original_path``, ``modified``);
        the daemon then moves it into ``/.trash/``.

        :raises MemoryToolError: a secret in ``reason``.
        """
        why = _opt_str(check_input("reason", reason), "reason")
        _guard(("reason", why))
        now = self.now().isoformat()
        fields = {"status": "trashed", "trashed_at": now, "original_path": yaml_scalar(entity.path),
                  "modified": now}
        if why:
            fields["trash_reason"] = yaml_scalar(why.replace("\n", " "))
        new = set_fields(data, fields)
        return WritePlan(entity.path, new, {"permalink": entity.permalink, "title": entity.title,
                                            "path": entity.path, "deleted": entity.title})


def _snippet(body: str, words: Sequence[str]) -> str:
    """The body line with the most query words, with one line either side."""
    lines = [ln.rstrip("\r\n") for ln in body.splitlines()]
    best, best_hits = -1, 0
    for i, line in enumerate(lines):
        if not words:
            break
        low = line.lower()
        hits = sum(1 for w in words if w in low)
        if hits > best_hits:
            best, best_hits = i, hits
            if hits == len(words):
                break
    if best < 0:  # no body hit (title or tag matched): the first line of content
        best = next((i for i, ln in enumerate(lines) if ln.strip() and not ln.lstrip().startswith("#")), -1)
        if best < 0:
            return ""
    part = [ln if len(ln) <= _SNIPPET_LINE else ln[:_SNIPPET_LINE] + "…"
            for ln in lines[max(0, best - 1):best + 2]]
    return "\n".join(part).strip("\n")
