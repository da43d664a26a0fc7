"""Sidecar texts of filed documents: the summary line and the sidecar file.

:func:`summarize` reads the first meaningful line of a text file or a PDF
(plain or FlateDecode content streams, simple fonts, else ``/Title``) and
adds the type and size; :func:`sidecar_text` wraps it in the sidecar's
YAML frontmatter (samples/README "Attachment sidecars").
"""

from __future__ import annotations

import json
import mimetypes
import re
import zlib
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

import yaml

from ..local_lookups import read_bytes_or_none
from .rules import split_name

__all__ = ["SUMMARY_READ", "human_size", "sidecar_text", "summarize"]

#: How much of a file the summary reads.
SUMMARY_READ = 2 * 1024 * 1024

_TYPE_LABELS = {
    ".pdf": "PDF 文档", ".doc": "Word 文档", ".docx": "Word 文档", ".odt": "文档", ".rtf": "RTF 文档",
    ".ppt": "PowerPoint 演示文稿", ".pptx": "PowerPoint 演示文稿", ".key": "Keynote 演示文稿",
    ".xls": "Excel 表格", ".xlsx": "Excel 表格", ".csv": "CSV 表格", ".ods": "表格",
    ".png": "PNG 图片", ".jpg": "JPEG 图片", ".jpeg": "JPEG 图片", ".gif": "GIF 图片", ".webp": "WebP 图片",
    ".heic": "HEIC 图片", ".svg": "SVG 图片", ".mp4": "MP4 视频", ".mov": "视频", ".mkv": "视频",
    ".mp3": "MP3 音频", ".m4a": "音频", ".wav": "WAV 音频", ".zip": "ZIP 压缩包", ".rar": "RAR 压缩包",
    ".7z": "7z 压缩包", ".tar.gz": "tar.gz 压缩包", ".gz": "gzip 压缩包", ".txt": "文本文件",
    ".md": "Markdown 文档", ".json": "JSON 文件", ".py": "Python 源代码", ".c": "C 源代码",
    ".cpp": "C++ 源代码", ".java": "Java 源代码", ".ipynb": "Jupyter 笔记本", ".epub": "EPUB 电子书",
}
#: The English labels (the Chinese ones above are the default texts).
_TYPE_LABELS_EN = {
    ".pdf": "PDF document", ".doc": "Word document", ".docx": "Word document", ".odt": "document",
    ".rtf": "RTF document", ".ppt": "PowerPoint presentation", ".pptx": "PowerPoint presentation",
    ".key": "Keynote presentation", ".xls": "Excel spreadsheet", ".xlsx": "Excel spreadsheet",
    ".csv": "CSV spreadsheet", ".ods": "spreadsheet", ".png": "PNG image", ".jpg": "JPEG image",
    ".jpeg": "JPEG image", ".gif": "GIF image", ".webp": "WebP image", ".heic": "HEIC image", ".svg": "SVG image",
    ".mp4": "MP4 video", ".mov": "video", ".mkv": "video", ".mp3": "MP3 audio", ".m4a": "audio", ".wav": "WAV audio",
    ".zip": "ZIP archive", ".rar": "RAR archive", ".7z": "7z archive", ".tar.gz": "tar.gz archive",
    ".gz": "gzip archive", ".txt": "text file", ".md": "Markdown document", ".json": "JSON file",
    ".py": "Python source", ".c": "C source", ".cpp": "C++ source", ".java": "Java source",
    ".ipynb": "Jupyter notebook", ".epub": "EPUB e-book",
}
_TEXT_EXTS = {".txt", ".md", ".csv", ".json", ".py", ".c", ".h", ".cpp", ".java", ".tex", ".log",
              ".yaml", ".yml", ".toml", ".html", ".htm", ".xml", ".rst", ".ini", ".js", ".ts", ".sh"}


def human_size(size: int) -> str:
    """``size`` bytes for people: ``512 B``, ``1.5 KB``, ``20.0 MB``."""
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover


def _type_label(name: str, language: str = "zh") -> str:
    ext = split_name(name)[1].lower()
    labels = _TYPE_LABELS if language == "zh" else _TYPE_LABELS_EN
    if ext in labels:
        return labels[ext]
    guess, _ = mimetypes.guess_type(name, strict=False)
    if guess:
        return guess
    if language == "zh":
        return f"{ext[1:].upper()} 文件" if ext else "文件"
    return f"{ext[1:].upper()} file" if ext else "file"


def _meaningful(lines: Iterable[str]) -> str | None:
    """The first line with letters or digits, markup stripped, ≤ 120 chars."""
    for raw in lines:
        line = raw.strip().lstrip("#>*-•+|= \t").strip()
        if line and any(ch.isalnum() for ch in line):
            line = " ".join(line.split())
            return line if len(line) <= 120 else line[:119] + "…"
    return None


def _text_first_line(data: bytes, name: str) -> str | None:
    """The first meaningful line of a text file, or None when not text."""
    if b"\x00" in data[:8192] and not data.startswith((b"\xff\xfe", b"\xfe\xff")):
        return None
    text = None
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            return None
    else:
        raw = data[3:] if data.startswith(b"\xef\xbb\xbf") else data
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.start >= len(raw) - 3 and len(raw) == SUMMARY_READ:
                text = raw[:exc.start].decode("utf-8")  # cut inside a character
            elif split_name(name)[1].lower() in _TEXT_EXTS:
                try:
                    text = raw.decode("gb18030")
                except UnicodeDecodeError:
                    return None
            else:
                return None
    lines = text.splitlines()
    if lines and lines[0].strip() == "---":  # skip YAML frontmatter
        for i in range(1, len(lines)):
            if lines[i].strip() in ("---", "..."):
                lines = lines[i + 1:]
                break
    return _meaningful(lines)


_PDF_STREAM = re.compile(rb"<<(?P<dict>(?:(?!>>\s*stream).){0,2048}?)>>\s*stream\r?\n", re.DOTALL)
_PDF_TEXT_OP = re.compile(rb"\((?P<s>(?:\\.|[^\\()]|\((?:\\.|[^\\()])*\))*)\)\s*(?:Tj|'|\")"  # (string) Tj, ' or "
                          rb"|\[(?P<a>[^\]]*)\]\s*TJ"  # [array] TJ
                          rb"|(?P<br>T\*|Td|TD|Tm|ET)")  # the operators that start a new line
_PDF_STR = re.compile(rb"\((?P<s>(?:\\.|[^\\()])*)\)")
_PDF_TITLE = re.compile(rb"/Title\s*\((?P<s>(?:\\.|[^\\()])*)\)")
_PDF_ESC = {b"n": b"\n", b"r": b"\r", b"t": b"\t", b"b": b"\b", b"f": b"\f"}


def _pdf_string(raw: bytes) -> str:
    out = bytearray()
    i = 0
    while i < len(raw):
        c = raw[i:i + 1]
        if c == b"\\" and i + 1 < len(raw):
            nxt = raw[i + 1:i + 2]
            if nxt in _PDF_ESC:
                out += _PDF_ESC[nxt]
                i += 2
            elif nxt.isdigit():
                m = re.match(rb"[0-7]{1,3}", raw[i + 1:i + 4])
                digits = m.group(0) if m else b"0"
                out.append(int(digits, 8) & 0xFF)
                i += 1 + len(digits)
            elif nxt in (b"\n", b"\r"):
                i += 2
            else:
                out += nxt
                i += 2
        else:
            out += c
            i += 1
    data = bytes(out)
    if data.startswith(b"\xfe\xff"):
        return data[2:].decode("utf-16-be", errors="ignore")
    return data.decode("cp1252", errors="replace")


def _pdf_first_line(data: bytes) -> str | None:
    """Best-effort: the first text line of a PDF's content streams (plain or
    FlateDecode, simple fonts), else its ``/Title``.  None when nothing
    readable is found (CID fonts, encrypted files…)."""
    if not data.startswith(b"%PDF"):
        return None
    lines: list[str] = []
    for m in _PDF_STREAM.finditer(data):
        start = m.end()
        end = data.find(b"endstream", start)
        if end < 0:
            break
        body = data[start:end]
        if b"/FlateDecode" in m.group("dict"):
            try:
                body = zlib.decompressobj().decompress(body, 4 * 1024 * 1024)
            except zlib.error:
                continue
        elif b"/Filter" in m.group("dict"):
            continue
        if b"Tj" not in body and b"TJ" not in body:
            continue
        current: list[str] = []
        for op in _PDF_TEXT_OP.finditer(body):
            if op.group("br"):
                if current:
                    lines.append("".join(current))
                    current = []
            elif op.group("s") is not None:
                current.append(_pdf_string(op.group("s")))
            elif op.group("a") is not None:
                current.append("".join(_pdf_string(s.group("s")) for s in _PDF_STR.finditer(op.group("a"))))
        if current:
            lines.append("".join(current))
        found = _meaningful(lines)
        if found:
            return found
    title = _PDF_TITLE.search(data)
    if title:
        return _meaningful([_pdf_string(title.group("s"))])
    return None


def summarize(source: Path | bytes, name: str, size: int, language: str = "zh") -> str:
    """The sidecar's short body for a file.

    Text and PDF files: their first meaningful line, then the type and
    size; other files: the type and size.  Reads at most 2 MiB.

    :param source: the file to read, or its first :data:`SUMMARY_READ` bytes
        (the planner reads them from the descriptor it hashed).
    :param name: the name it is filed under (its extension picks the type).
    :param size: bytes.
    :param language: ``"zh"`` or ``"en"``: the words of the type-and-size line.
    :returns: one or two lines of text, without a trailing newline.
    """
    label = _type_label(name, language)
    if language == "zh":
        tail = f"{label}，{human_size(size)}；由 ohsync 从投递文件夹归档。"
    else:
        tail = f"{label}, {human_size(size)}; filed by ohsync from the drop folder."
    head = source[:SUMMARY_READ] if isinstance(source, bytes) else read_bytes_or_none(source, limit=SUMMARY_READ)
    if head is None:
        return tail
    first = None
    if head.startswith(b"%PDF"):
        first = _pdf_first_line(head)
    elif head:
        first = _text_first_line(head, name)
    return f"{first}\n{tail}" if first else tail



def _yaml_scalar(value: str) -> str:
    """``value`` as a YAML scalar: plain when that reads back identically,
    else double-quoted (JSON strings are valid YAML)."""
    if value and "\n" not in value and value == value.strip():
        try:
            if yaml.safe_load(f"k: {value}") == {"k": value}:
                return value
        except yaml.YAMLError:
            pass
    return json.dumps(value, ensure_ascii=False)


def sidecar_text(*, name: str, sha1: str, size: int, filed: datetime, original_name: str,
                 summary: str, source: str = "drop") -> bytes:
    """The sidecar ``<name>.md`` of a filed document (samples/README
    "Attachment sidecars").

    :param name: the document's name in ``/Files/`` (the sidecar's title).
    :param filed: the filing time (written with its offset, +08:00).
    :param original_name: the name it had in the drop folder.
    :param summary: the body (see :func:`summarize`).
    :returns: UTF-8 bytes, LF line endings, ending in a newline.
    """
    lines = [
        "---",
        f"title: {_yaml_scalar(name)}",
        "type: file",
        f"source: {source}",
        f"sha1: {sha1}",
        f"size: {size}",
        f"filed: {filed.isoformat(timespec='seconds')}",
        f"original_name: {_yaml_scalar(original_name)}",
        "---",
        "",
        summary.rstrip("\n"),
        "",
    ]
    return "\n".join(lines).encode("utf-8")

