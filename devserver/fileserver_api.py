"""Fileserver routes (``/seafhttp/...``), modelled on the Go fileserver of
Seafile 13: multipart upload (``upload-api``/``upload-aj``), resumable
chunked upload (``Content-Range``), update (``update-api``/``update-aj``),
download (``files``) with Range/HEAD/304 quirks, and folder zip (``zip``).

Errors use Go's ``http.Error`` shape (``fs_error``): ``text/plain`` with a
``{"error": "..."}`` body whose message may end in a raw newline.
"""
from __future__ import annotations

import contextlib
import io
import mimetypes
import os
import re
import threading
import time
import zipfile
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote_plus

from werkzeug.wrappers import Request, Response

from . import ids
from .head_merge import HeadUnknown, update_at_head
from .http_util import content_disposition, fs_error, go_json, header_params, parse_multipart, text
from .names import fs_name_invalid, join_path, nfc, norm_path, split_path
from .repo_ops import EntryNotFound, FolderNotFound, NotAFolder, is_dir
from .store import WebToken

_RANGE_RE = re.compile(r"^\s*bytes\s+(\d+)-(\d+)/(\d+)\s*$")


def parse_last_modify(value: str | None) -> int | None:
    """RFC 3339 time -> Unix seconds; None when absent or unparsable (ignored)."""
    if not value:
        return None
    try:
        return int(datetime.fromisoformat(value.strip().replace("Z", "+00:00")).timestamp())
    except ValueError:
        return None


def mime_for(name: str) -> str:
    """Content type of a download: guessed from the extension; text types get ``charset=gbk``."""
    guess, _ = mimetypes.guess_type(name, strict=False)
    if not guess:
        return "application/octet-stream"
    if guess.startswith("text/"):
        return f"{guess}; charset=gbk"
    return guess


#: WSGI environ key of the ``trailing_cr`` fault (``faults.py``): the file name to damage.
TRAILING_CR = "devserver.trailing_cr"


def stray_cr(req: Request, name: str, data: bytes) -> bytes:
    """``data`` as stored: with one extra trailing ``\r`` when the ``trailing_cr``
    fault names this file (the C fileserver's stray ``\r``), else unchanged."""
    return data + b"\r" if req.environ.get(TRAILING_CR) == name else data


class _UnflaggedName(zipfile.ZipInfo):
    """A zip member whose name is stored as UTF-8 bytes without the UTF-8 flag
    (general purpose bit 11), as the C file server's libarchive writes it on a
    host without the en_US.UTF-8 locale.  Overrides the private hook through
    which :mod:`zipfile` encodes a name and sets that flag."""

    def _encodeFilenameFlags(self) -> tuple[bytes, int]:
        return self.filename.encode("utf-8"), self.flag_bits & ~0x800


class Fileserver:
    """Handlers of the ``/seafhttp`` routes; ``app`` is the ``DevServer``."""

    def __init__(self, app) -> None:
        self.app = app
        self.store = app.store
        self.ops = app.ops
        self.tmp = Path(self.store.root) / "tmp"
        self.tmp.mkdir(exist_ok=True)
        self._chunks: dict[tuple[str, str], dict[str, Any]] = {}
        self._chunk_lock = threading.Lock()

    # ------------------------------------------------------------ chunked state
    def pending_bytes(self, repo_id: str, parent: str, name: str) -> int:
        """Bytes received so far of an unfinished chunked upload (0 when none)."""
        key = (repo_id, norm_path(join_path(split_path(parent) + split_path(name))))
        st = self._chunks.get(key)
        return st["received"] if st else 0

    def _token(self, token: str, ops: tuple[str, ...]) -> tuple[WebToken | None, Response | None]:
        """The upload/download link token for one of ``ops``: ``(token, None)``, or ``(None, the error answer)``."""
        if len(token) != 36:
            return None, fs_error(400, "Invalid URL")
        tok = self.store.use_web_token(token)
        if tok is None:
            return None, fs_error(403, "Access token not found")
        if tok.op not in ops:
            return None, fs_error(403, "Operation does not match access token.")
        if tok.repo_id not in self.store.repos:
            return None, fs_error(400, "Repo not found.\n")
        return tok, None

    def _quota_ok(self, user: str, extra: int) -> bool:
        quota: int = self.store.users.get(user, {}).get("quota", -2)
        return quota <= 0 or self.store.usage(user) + extra < quota

    def _upload_answer(self, results: list[dict[str, Any]], ret_json: bool) -> Response:
        if ret_json:
            return go_json(results)
        return text("\t".join(r["id"] for r in results))

    def _form(self, req: Request, token: str, kind: str) -> Response | tuple[Any, ...]:
        """Check the link token and parse the multipart body: ``(token, fields,
        file parts)``, or the fileserver's error answer."""
        if len(token) != 36:
            return fs_error(400, "Invalid URL")
        if req.method != "POST":
            return text("\n", 400)
        tok, err = self._token(token, (kind.replace("-api", ""),))
        if err:
            return err
        parts = parse_multipart(req.get_data(), req.headers.get("Content-Type", "")) or []
        fields = {p.name: p.text() for p in parts if p.filename is None}
        files = [p for p in parts if p.filename is not None and p.name == "file"]
        return tok, fields, files

    # ------------------------------------------------------------ upload
    def upload(self, req: Request, token: str, kind: str = "upload-api") -> Response:
        """``POST <FS>/upload-api/<token>`` (and ``upload-aj``): multipart upload.

        Fields ``parent_dir`` (must equal the link's folder), ``relative_path``,
        ``replace`` (query wins), ``last_modify``, ``ret-json``; one or more
        ``file`` parts; optional ``Content-Range`` + ``Content-Disposition``
        headers for a resumable chunk.
        """
        form = self._form(req, token, kind)
        if isinstance(form, Response):
            return form
        tok, fields, files = form
        parent_dir = fields.get("parent_dir")
        if not parent_dir:
            return fs_error(400, "No parent_dir given.\n")
        replace = req.args.get("replace")
        if replace is None:
            replace = fields.get("replace", "0")
        if replace not in ("0", "1"):
            return fs_error(400, "Invalid argument replace.\n")
        ret_json = "ret-json" in req.args or "ret-json" in fields or kind == "upload-aj"
        mtime = parse_last_modify(fields.get("last_modify"))
        if "//" in parent_dir:
            return fs_error(400, "parent_dir contains // sequence.\n")
        parent = norm_path(parent_dir)
        if not is_dir(self.ops.lookup(tok.repo_id, parent)):
            return fs_error(400, "Parent dir doesn't exist.\n")
        if parent != tok.obj:
            return fs_error(403, "Parent dir doesn't match.")
        rel = fields.get("relative_path", "")
        if rel.startswith("/") or rel.startswith("\\"):
            return fs_error(400, "Invalid relative path")
        if ".." in split_path(rel):
            return fs_error(500, "Internal error.\n")
        target = norm_path(join_path(split_path(parent) + split_path(nfc(rel))))
        crange = req.headers.get("Content-Range")
        m = _RANGE_RE.match(crange) if crange else None
        if m and int(m.group(1)) <= int(m.group(2)) < int(m.group(3)):
            return self._chunk(req, tok, files, target, m, bool(replace == "1"), mtime, ret_json)
        if not files:
            return fs_error(400, "No file in multipart form.\n")
        items = []
        for p in files:
            name = nfc(p.filename.rsplit("/", 1)[-1])
            if fs_name_invalid(name):
                return fs_error(400, f"invalid fileName: {name}.\n")
            items.append((name, stray_cr(req, name, p.data)))
        return self._commit_upload(tok, target, items, replace == "1", mtime, ret_json)

    def _commit_upload(self, tok, target: str, items: list[tuple[str, bytes]], replace: bool,
                       mtime: int | None, ret_json: bool) -> Response:
        if not self._quota_ok(tok.user, sum(len(d) for _, d in items)):
            return fs_error(443, "Out of quota.\n")
        stored = [(name,) + self.store.write_blob(data) for name, data in items]
        try:
            finals = self.ops.put_files(tok.repo_id, target, stored, tok.user, replace=replace, mtime=mtime,
                                        create_parents=True)
        except NotAFolder:
            return fs_error(500, "Internal error.\n")
        except FolderNotFound:
            return fs_error(400, "Parent dir doesn't exist.\n")
        except EntryNotFound:
            return fs_error(500, "Internal error.\n")
        except Exception as exc:  # "Too many files with same name."
            if "Too many" in str(exc):
                return fs_error(400, "Too many files with same name.\n")
            raise
        results = [{"id": fid, "name": final, "size": size}
                   for final, (_, fid, size) in zip(finals, stored, strict=True)]
        return self._upload_answer(results, ret_json)

    def _chunk(self, req: Request, tok, files, target: str, m, replace: bool, mtime, ret_json) -> Response:
        disp = req.headers.get("Content-Disposition")
        fname = header_params((";" + disp.split(";", 1)[1]).encode()).get("filename") if disp and ";" in disp else None
        if not fname:
            return fs_error(500, "Internal error.\n")
        if len(files) != 1:
            return fs_error(400, "No file in multipart form.\n")
        name = nfc(unquote_plus(fname))
        if fs_name_invalid(name):
            return fs_error(400, f"invalid fileName: {name}.\n")
        content = self._assemble(tok, files[0].data, norm_path(join_path(split_path(target) + [name])), m)
        if isinstance(content, Response):
            return content
        return self._commit_upload(tok, target, [(name, content)], replace, mtime, ret_json)

    def _assemble(self, tok, data: bytes, path: str, m) -> bytes | Response:
        """Store one ``Content-Range`` chunk for ``path``; the whole content
        once the last chunk arrived, else the interim ``{"success": true}``."""
        start, end, total = int(m.group(1)), int(m.group(2)), int(m.group(3))
        data = data[:end - start + 1]
        key = (tok.repo_id, path)
        with self._chunk_lock:
            st = self._chunks.get(key)
            if st is None or st["total"] != total:
                tmp = self.tmp / f"chunk-{ids.sha1_hex(repr(key).encode())}"
                st = self._chunks[key] = {"path": tmp, "total": total, "received": 0}
                tmp.write_bytes(b"")
            with open(st["path"], "r+b") as fh:
                fh.seek(start)
                fh.write(data)
            st["received"] = max(st["received"], start + len(data)) if start <= st["received"] else st["received"]
            if end < total - 1:
                return go_json({"success": True})
            content: bytes = st["path"].read_bytes()[:total]
            self._chunks.pop(key, None)
            with contextlib.suppress(OSError):
                os.unlink(st["path"])
        return content

    # ------------------------------------------------------------ update
    def update(self, req: Request, token: str, kind: str = "update-api") -> Response:
        """``POST <FS>/update-api/<token>``: field ``target_file`` + one ``file`` part.

        With ``Content-Range`` the part is one chunk of a resumable update
        (as the Go fileserver's ``doUpdate``): interim chunks answer
        ``{"success": true}``, the last one commits the assembled file.

        Answers the new file id as bare text (``update-aj``: a JSON array);
        identical content makes no commit.  With ``head`` (a commit id, in the
        query or the form) the update is based on that commit: a concurrent
        edit of the file stays live and the upload becomes an SFConflict file
        beside it (``head_merge``); ``DevServer.honour_head = False`` ignores
        ``head`` like a server without that merge.
        """
        form = self._form(req, token, kind)
        if isinstance(form, Response):
            return form
        tok, fields, files = form
        target = fields.get("target_file")
        if not target:
            return fs_error(400, "No target_file given.\n")
        if not files:
            return fs_error(400, "No file in multipart form.\n")
        e = self.ops.lookup(tok.repo_id, target)
        if (e is None or is_dir(e)) and not (req.args.get("head") or fields.get("head")):
            return fs_error(441, "File does not exist.\n")
        data = stray_cr(req, split_path(target)[-1] if split_path(target) else "", files[0].data)
        crange = req.headers.get("Content-Range")
        m = _RANGE_RE.match(crange) if crange else None
        if m and int(m.group(1)) <= int(m.group(2)) < int(m.group(3)):
            assembled = self._assemble(tok, data, norm_path(target), m)
            if isinstance(assembled, Response):
                return assembled
            data = assembled
        if not self._quota_ok(tok.user, len(data)):
            return fs_error(443, "Out of quota.\n")
        fid, size = self.store.write_blob(data)
        mtime = parse_last_modify(fields.get("last_modify"))
        head = req.args.get("head") or fields.get("head")
        try:
            if head and getattr(self.app, "honour_head", True):
                update_at_head(self.ops, tok.repo_id, norm_path(target), fid, size, tok.user, head, mtime=mtime)
            else:
                self.ops.update_file(tok.repo_id, norm_path(target), fid, size, tok.user, mtime=mtime)
        except HeadUnknown:
            return fs_error(500, "Internal error.\n")
        except EntryNotFound:
            return fs_error(441, "File does not exist.\n")
        if kind == "update-aj":
            return go_json([{"id": fid, "name": split_path(target)[-1], "size": size}])
        return text(fid)

    # ------------------------------------------------------------ download
    def download(self, req: Request, token: str, name: str = "") -> Response:
        """``GET|HEAD <FS>/files/<token>/<name>``: the file pinned to the token.

        One-time tokens are used up by any request (HEAD too).  Any
        ``If-Modified-Since`` gives 304.  Single ``Range`` -> 206 / 416.
        """
        tok = self.store.use_web_token(token) if len(token) == 36 else None
        if tok is None:
            return text("Access token not found\n", 403)
        if tok.op != "download":
            return text("Operation does not match access token.\n", 403)
        if "If-Modified-Since" in req.headers:
            resp = Response(b"", status=304)
            del resp.headers["Content-Type"]
            return resp
        fid = tok.obj
        size = self.store.file_object(fid)["size"]
        headers = {"Content-Disposition": content_disposition(tok.name), "ETag": fid,
                   "Last-Modified": time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime()),
                   "Cache-Control": "max-age=3600", "Access-Control-Allow-Origin": "*",
                   "X-Content-Type-Options": "nosniff"}
        ctype = mime_for(tok.name)
        start, end, status = 0, size, 200
        rng = req.headers.get("Range")
        if rng and size > 0:
            parsed = self._parse_range(rng, size)
            if parsed is None:
                resp = text("\n", 416)
                resp.headers["Content-Range"] = f"bytes */{size}"
                return resp
            start, end = parsed
            status = 206
            headers["Content-Range"] = f"bytes {start}-{end - 1}/{size}"
            headers["Accept-Ranges"] = "bytes"
        headers["Content-Length"] = str(end - start)
        body = [] if req.method == "HEAD" else self.store.iter_range(fid, start, end)
        return Response(body, status=status, headers=headers, content_type=ctype, direct_passthrough=True)

    @staticmethod
    def _parse_range(value: str, size: int) -> tuple[int, int] | None:
        """``bytes=a-b`` / ``a-`` / ``-n`` -> ``(start, end_exclusive)``; None = unsatisfiable."""
        m = re.match(r"^\s*bytes=(\d*)-(\d*)\s*$", value)
        if not m or (not m.group(1) and not m.group(2)):
            return 0, size
        a, b = m.group(1), m.group(2)
        if not a:
            n = int(b)
            return (max(0, size - n), size) if n > 0 else None
        start = int(a)
        end = min(int(b), size - 1) if b else size - 1
        if start >= size or start > end:
            return None
        return start, end + 1

    # ------------------------------------------------------------ zip
    def zip(self, req: Request, token: str) -> Response:
        """``GET <FS>/zip/<zip token>``: a deflated zip of the requested items."""
        tok = self.store.use_web_token(token) if len(token) == 36 else None
        if tok is None:
            return text("Access token not found\n", 403)
        if tok.op != "zip":
            return text("Operation does not match access token.\n", 403)
        parent, root, *dirents = tok.obj.split("\n")
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
            for d in dirents:
                e = self.ops.lookup(tok.repo_id, join_path(split_path(parent) + [d]), root=root)
                if e is not None:
                    self._zip_add(zf, e, d)
        if len(dirents) == 1:
            zname = f"{dirents[0]}.zip"
        else:
            t = time.localtime()
            zname = f"documents-export-{t.tm_year}-{t.tm_mon}-{t.tm_mday}.zip"
        headers = {"Content-Disposition": content_disposition(zname)}
        return Response(buf.getvalue(), status=200, headers=headers, content_type="application/octet-stream")

    def _zip_add(self, zf: zipfile.ZipFile, e: dict[str, Any], arc: str) -> None:
        ts = time.localtime(max(e["mtime"], 315532800))[:6]
        if is_dir(e):
            children = self.store.read_dir(e["id"])
            if not children:
                zf.writestr(zipfile.ZipInfo(arc + "/", ts), b"")
            for c in children:
                self._zip_add(zf, c, f"{arc}/{c['name']}")
        else:
            info = (zipfile.ZipInfo if getattr(self.app, "zip_utf8_flag", True) else _UnflaggedName)(arc, ts)
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, self.store.read_blob(e["id"]))

    def upload_aj(self, req: Request, token: str) -> Response:
        """``POST <FS>/upload-aj/<token>``: like ``upload-api``, always answers JSON."""
        return self.upload(req, token, "upload-aj")

    def update_aj(self, req: Request, token: str) -> Response:
        """``POST <FS>/update-aj/<token>``: like ``update-api``, answers a JSON array."""
        return self.update(req, token, "update-aj")
