"""Response builders in the exact shapes of seahub (DRF / Django) and the Go
fileserver, plus a byte-exact multipart parser.

Content types matter to clients and to the transcript replays:

* ``drf(...)``        -> ``application/json`` and compact, ASCII-escaped JSON
  (Django REST framework ``Response``, also every ``api_error``);
* ``django_json(...)`` -> ``application/json; charset=utf-8`` and ``", "``
  separators (views that return ``HttpResponse(json.dumps(...))``);
* ``go_json(...)``    -> ``application/json; charset=utf-8``, compact, raw
  UTF-8 with ``& < >`` escaped (Go's ``json.Marshal``);
* ``fs_error(...)``   -> ``text/plain; charset=utf-8`` body
  ``{"error": "<msg>"}`` + newline, the message copied raw (Go ``http.Error``).
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any
from urllib.parse import quote

from werkzeug.wrappers import Response

JSON = "application/json"
JSON_UTF8 = "application/json; charset=utf-8"
TEXT_UTF8 = "text/plain; charset=utf-8"


def drf(obj, status: int = 200, headers: dict[str, Any] | None = None) -> Response:
    """A DRF ``Response``: compact JSON, ``Content-Type: application/json``."""
    body = json.dumps(obj, separators=(",", ":"), ensure_ascii=True)
    return Response(body, status=status, content_type=JSON, headers=headers)


def django_json(obj, status: int = 200, headers: dict[str, Any] | None = None) -> Response:
    """``HttpResponse(json.dumps(obj), content_type=application/json; charset=utf-8)``."""
    return Response(json.dumps(obj), status=status, content_type=JSON_UTF8, headers=headers)


def api_error(status: int, msg: str) -> Response:
    """Seahub ``api_error``: ``{"error_msg": msg}`` with a DRF content type."""
    return drf({"error_msg": msg}, status)


def html_500() -> Response:
    """Django's page for an uncaught exception in a view (``DEBUG = False``): HTML, status 500."""
    body = ("<!doctype html>\n<html lang=\"en\">\n<head>\n  <title>Server Error (500)</title>\n</head>\n"
            "<body>\n  <h1>Server Error (500)</h1><p></p>\n</body>\n</html>\n")
    return Response(body, status=500, content_type="text/html; charset=utf-8")


def drf_detail(status: int, msg: str, headers: dict[str, Any] | None = None) -> Response:
    """A DRF exception body ``{"detail": msg}`` (auth errors, throttling)."""
    return drf({"detail": msg}, status, headers)


def go_json(obj, status: int = 200) -> Response:
    """Go ``json.Marshal`` output: compact, UTF-8, ``&<>`` escaped as ``\\u00XX``."""
    body = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    body = body.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    body = body.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return Response(body.encode("utf-8"), status=status, content_type=JSON_UTF8)


def fs_error(status: int, msg: str) -> Response:
    """A Go fileserver error: ``{"error": "<msg>"}`` + ``\\n`` as text/plain (msg copied raw)."""
    return Response(('{"error": "%s"}\n' % msg).encode("utf-8"), status=status, content_type=TEXT_UTF8)


def text(body: str | bytes, status: int = 200, content_type: str = TEXT_UTF8) -> Response:
    """A plain text response."""
    return Response(body, status=status, content_type=content_type)


def iso_time(ts: float) -> str:
    """ISO 8601 with the server's UTC offset, e.g. ``2026-08-01T10:00:00+08:00``."""
    return datetime.fromtimestamp(ts, timezone.utc).astimezone().isoformat(timespec="seconds")


def location_quote(path: str) -> str:
    """Quote a path for a ``Location: ...?p=`` value (``/`` kept, ``( )`` escaped)."""
    return quote(path, safe="/")


def content_disposition(name: str) -> str:
    """The Go fileserver's ``Content-Disposition`` of a download (raw UTF-8 in ``filename=``)."""
    enc = quote(name, safe="$&+:=@")
    value = f"attachment;filename*=utf-8''{enc};filename=\"{name}\""
    return value.encode("utf-8").decode("latin-1")  # WSGI: raw UTF-8 bytes on the wire


def size_formatted(n: int) -> str:
    """Seahub's ``filesizeformat`` (decimal units, non-breaking space): ``0\\xa0bytes``, ..."""
    if n < 1000:
        return "1\xa0byte" if n == 1 else f"{n}\xa0bytes"
    size = float(n)
    for unit in ("KB", "MB", "GB", "TB"):
        size /= 1000.0
        if size < 1000:
            return f"{size:.1f}\xa0{unit}"
    return f"{size:.1f}\xa0PB"


# ---------------------------------------------------------------- multipart
_PARAM_RE = re.compile(rb';\s*([A-Za-z0-9_*.-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^;]*))')


class Part:
    """One multipart part: ``name``, ``filename`` (None for fields), ``headers``, ``data``."""

    def __init__(self, name: str, filename: str | None, headers: dict[str, str], data: bytes):
        self.name = name
        self.filename = filename
        self.headers = headers
        self.data = data

    def text(self) -> str:
        """The part's data decoded as UTF-8."""
        return self.data.decode("utf-8", "replace")


_TSPECIALS = frozenset(b'()<>@,;:\\"/[]?=')


def _unquote(raw: bytes) -> bytes:
    """Go's ``mime.ParseMediaType`` reading of a quoted string: a backslash
    before a tspecial (``\\``, ``\"``, ...) escapes it; before anything else
    it is a literal backslash (how browsers send ``C:\\dir\\a.txt``)."""
    out = bytearray()
    i = 0
    while i < len(raw):
        if raw[i] == 0x5C and i + 1 < len(raw) and raw[i + 1] in _TSPECIALS:
            out.append(raw[i + 1])
            i += 2
            continue
        out.append(raw[i])
        i += 1
    return bytes(out)


def header_params(value: bytes) -> dict[str, str]:
    """Parameters of a header value; quoted strings are unescaped the way Go's
    ``mime`` package does it (see :func:`_unquote`), nothing is percent-decoded."""
    out = {}
    for m in _PARAM_RE.finditer(value):
        raw = _unquote(m.group(2)) if m.group(2) is not None else (m.group(3) or b"").strip()
        out[m.group(1).decode("ascii", "replace").lower()] = raw.decode("utf-8", "surrogateescape")
    return out


def parse_multipart(body: bytes, content_type: str) -> list[Part] | None:
    """Split a ``multipart/form-data`` body into parts; None when it is not multipart.

    File names are kept as sent (raw UTF-8, ``%22`` not decoded, a lone ``\\``
    kept, ``\\\\`` read as one backslash), like the Go fileserver.
    """
    m = re.search(r'boundary="?([^";]+)"?', content_type or "")
    if not (content_type or "").lower().startswith("multipart/") or not m:
        return None
    delim = b"--" + m.group(1).encode("latin-1")
    parts: list[Part] = []
    pos = body.find(delim)
    if pos < 0:
        return None
    while True:
        pos += len(delim)
        if body[pos:pos + 2] == b"--":
            break
        if body[pos:pos + 2] == b"\r\n":
            pos += 2
        nxt = body.find(b"\r\n" + delim, pos)
        if nxt < 0:
            break
        chunk = body[pos:nxt]
        head, sep, data = chunk.partition(b"\r\n\r\n")
        if not sep:
            head, data = chunk, b""
        headers: dict[str, str] = {}
        disp = b""
        for line in head.split(b"\r\n"):
            k, _, v = line.partition(b":")
            headers[k.strip().decode("latin-1").lower()] = v.strip().decode("utf-8", "surrogateescape")
            if k.strip().lower() == b"content-disposition":
                disp = v
        params = header_params(disp)
        parts.append(Part(params.get("name", ""), params.get("filename"), headers, data))
        pos = nxt + 2
    return parts
