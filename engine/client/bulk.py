"""Bulk and resumable transfers of the Seafile client (a mixin of
:class:`~ohsync.engine.client.SeafileClient`).

Three transfers that the one-shot ``upload``/``download`` cannot do well
(``docs/seafile-api.md`` §5.1, §5.5, §5.9 and §7, the facts verified on real
servers), each in its own module:

* :meth:`~ohsync.engine.client_zip.ZipDownloads.download_zip`: many small
  files as one zip stream (``zip-task`` → ``query-zip-progress`` →
  ``{FS}/zip/{token}``);
* :meth:`~ohsync.engine.client_chunked.ChunkedUploads.upload_chunked`: a
  large file in ``Content-Range`` chunks to an upload link (new file) or an
  update link (existing file), resumable from the server's
  ``file-uploaded-bytes`` after a dropped connection or a restart;
* :meth:`~ohsync.engine.client_resume.ResumableDownloads.download_resumable`:
  a ``reuse=1`` link fetched with ``Range: bytes=N-`` so a dropped
  connection continues where it stopped.

Memory use of each is bounded by the chunk buffers (uploads) or 1 MiB
(downloads), whatever the file size.  Errors are the typed ones of
:mod:`ohsync.engine.errors`, mapped by :mod:`ohsync.engine.client_errors`;
``NetworkError``, ``ServerError`` (incl. an expired link) and a short
``ThrottledError`` are retried with backoff, everything else is raised.
"""

from __future__ import annotations

from .chunked import CHUNK_SIZE, ChunkedUploads, Progress
from .resume import ResumableDownloads
from .zips import ZipDownloads

__all__ = ["BulkTransfers", "CHUNK_SIZE", "Progress"]


class BulkTransfers(ZipDownloads, ChunkedUploads, ResumableDownloads):
    """Zip download, chunked upload and resumable download (see the module docstring)."""
