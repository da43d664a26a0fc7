"""The URL map of devserver: seahub (``/api2``, ``/api/v2.1``) and
fileserver (``/seafhttp``) routes, as ``(methods, template, handler name,
auth)`` rows.

``template`` uses ``{id}`` (library UUID, lower case), ``{token}`` and
``{name}``, ``{commit}`` placeholders; it is also the counter key of the endpoint (``"GET
/api2/repos/{id}/dir/"``).  ``auth`` is ``"token"`` (API token required),
``"none"`` or ``"optional"``.  The handler name is ``"<component>.<method>"``
with component ``account``, ``history``, ``file_history``, ``dirs``, ``files``, ``fs``
or ``notify`` (the notification server, ``devserver/notification_server.py``).

``SOURCES`` names, for every endpoint, the upstream code whose behaviour it
follows (seahub for ``/api2`` and ``/api/v2.1``, the Go fileserver of
seafile-server for ``/seafhttp``; URL maps in ``seahub/api2/urls.py``,
``seahub/urls.py`` and ``fileserver/fileserver.go``).  Where a transcript in
``tests/data/seafile-transcripts/`` shows the real server answering differently from
that reading of the source, the transcript wins.
"""
from __future__ import annotations

import re
from typing import Any

ROUTES: list[tuple[tuple[str, ...], str, str, str]] = [
    (("POST",), "/api2/auth-token/", "account.auth_token", "none"),
    (("GET",), "/api2/ping/", "account.ping", "none"),
    (("GET",), "/api2/auth/ping/", "account.ping", "token"),
    (("GET",), "/api2/account/info/", "account.account_info", "token"),
    (("GET",), "/api2/server-info/", "account.server_info", "none"),
    (("GET",), "/api2/repos/", "account.list_repos", "token"),
    (("POST",), "/api2/repos/", "account.create_repo", "token"),
    (("GET",), "/api2/repos/{id}/", "account.repo_info", "token"),
    (("POST",), "/api2/repos/{id}/", "account.repo_post", "token"),
    (("DELETE",), "/api2/repos/{id}/", "account.repo_delete", "token"),
    (("GET",), "/api2/repos/{id}/download-info/", "account.download_info_view", "token"),
    (("GET",), "/api2/repos/{id}/history/", "history.history", "token"),
    (("GET",), "/api2/repos/{id}/dir/", "dirs.list_dir", "token"),
    (("POST",), "/api2/repos/{id}/dir/", "dirs.dir_post", "token"),
    (("DELETE",), "/api2/repos/{id}/dir/", "dirs.dir_delete", "token"),
    (("GET",), "/api2/repos/{id}/dir/metadata/", "dirs.dir_metadata", "token"),
    (("GET",), "/api2/repos/{id}/file/", "files.download_link", "token"),
    (("POST",), "/api2/repos/{id}/file/", "files.file_post", "token"),
    (("DELETE",), "/api2/repos/{id}/file/", "files.file_delete", "token"),
    (("GET",), "/api2/repos/{id}/file/detail/", "files.file_detail", "token"),
    (("GET",), "/api2/repos/{id}/file/history/", "file_history.file_history", "token"),
    (("GET",), "/api2/repos/{id}/file/revision/", "file_history.file_revision", "token"),
    (("GET",), "/api2/repos/{id}/file/metadata/", "files.file_metadata", "token"),
    (("GET",), "/api2/repos/{id}/upload-link/", "files.upload_link", "token"),
    (("GET",), "/api2/repos/{id}/update-link/", "files.update_link", "token"),
    (("DELETE",), "/api/v2.1/repos/{id}/", "account.v21_repo_delete", "token"),
    (("GET",), "/api/v2.1/repos/{id}/history/", "history.v21_history", "token"),
    (("GET",), "/api/v2.1/repos/{id}/commits/{commit}/", "history.commit_diff", "token"),
    (("GET",), "/api/v2.1/repos/{id}/dir/", "dirs.v21_list_dir", "token"),
    (("POST",), "/api/v2.1/repos/{id}/dir/", "dirs.v21_dir_post", "token"),
    (("DELETE",), "/api/v2.1/repos/{id}/dir/", "dirs.v21_dir_delete", "token"),
    (("GET",), "/api/v2.1/repos/{id}/dir/detail/", "dirs.v21_dir_detail", "token"),
    (("GET",), "/api/v2.1/repos/{id}/file/", "files.v21_file_get", "token"),
    (("GET",), "/api/v2.1/repos/{id}/file/history/", "file_history.v21_file_history", "token"),
    (("POST",), "/api/v2.1/repos/{id}/file/", "files.v21_file_post", "token"),
    (("DELETE",), "/api/v2.1/repos/{id}/file/", "files.v21_file_delete", "token"),
    (("GET",), "/api/v2.1/repos/{id}/file-uploaded-bytes/", "files.uploaded_bytes", "optional"),
    (("GET", "POST"), "/api/v2.1/repos/{id}/zip-task/", "files.zip_task", "token"),
    (("GET",), "/api/v2.1/query-zip-progress/", "files.zip_progress", "none"),
    (("POST",), "/api/v2.1/repos/sync-batch-move-item/", "files.sync_batch_move", "token"),
    (("POST",), "/api/v2.1/repos/sync-batch-copy-item/", "files.sync_batch_copy", "token"),
    (("DELETE",), "/api/v2.1/repos/batch-delete-item/", "files.batch_delete", "token"),
    (("GET", "POST", "PUT", "DELETE"), "/seafhttp/upload-api/{token}", "fs.upload", "none"),
    (("GET", "POST", "PUT", "DELETE"), "/seafhttp/upload-aj/{token}", "fs.upload_aj", "none"),
    (("GET", "POST", "PUT", "DELETE"), "/seafhttp/update-api/{token}", "fs.update", "none"),
    (("GET", "POST", "PUT", "DELETE"), "/seafhttp/update-aj/{token}", "fs.update_aj", "none"),
    (("GET", "HEAD"), "/seafhttp/files/{token}/{name}", "fs.download", "none"),
    (("GET", "HEAD"), "/seafhttp/zip/{token}", "fs.zip", "none"),
    (("GET",), "/api/v2.1/repos/{id}/repo-notification-jwt-token/", "notify.jwt_token", "token"),
    (("GET",), "/notification/ping", "notify.ping", "none"),
    (("GET",), "/notification", "notify.websocket", "none"),
]

_API2 = "seahub/api2/views.py"
_FILEOP = "seafile-server fileserver/fileop.go"

#: endpoint template -> the upstream file (and view / handler) it follows
SOURCES: dict[str, str] = {
    "/api2/auth-token/": f"{_API2}: ObtainAuthToken (seahub/api2/serializers.py: AuthTokenSerializer)",
    "/api2/ping/": f"{_API2}: Ping",
    "/api2/auth/ping/": f"{_API2}: AuthPing",
    "/api2/account/info/": f"{_API2}: AccountInfo",
    "/api2/server-info/": "seahub/api2/views_misc.py: ServerInfoView",
    "/api2/repos/": f"{_API2}: Repos",
    "/api2/repos/{id}/": f"{_API2}: Repo",
    "/api2/repos/{id}/download-info/": f"{_API2}: DownloadRepo",
    "/api2/repos/{id}/history/": f"{_API2}: RepoHistory",
    "/api2/repos/{id}/dir/": f"{_API2}: DirView",
    "/api2/repos/{id}/dir/metadata/": f"{_API2}: DirMetaDataView",
    "/api2/repos/{id}/file/": f"{_API2}: FileView",
    "/api2/repos/{id}/file/detail/": f"{_API2}: FileDetailView",
    "/api2/repos/{id}/file/metadata/": f"{_API2}: FileMetaDataView",
    "/api2/repos/{id}/file/history/": f"{_API2}: FileHistory",
    "/api2/repos/{id}/file/revision/": f"{_API2}: FileRevision",
    "/api/v2.1/repos/{id}/file/history/": "seahub/api2/endpoints/file_history.py: FileHistoryView",
    "/api2/repos/{id}/upload-link/": f"{_API2}: UploadLinkView",
    "/api2/repos/{id}/update-link/": f"{_API2}: UpdateLinkView",
    "/api/v2.1/repos/{id}/": "seahub/api2/endpoints/repos.py: RepoView",
    "/api/v2.1/repos/{id}/history/": "seahub/api2/endpoints/repo_history.py: RepoHistory",
    "/api/v2.1/repos/{id}/commits/{commit}/": "seahub/api2/endpoints/repo_commit.py: RepoCommitView",
    "/api/v2.1/repos/{id}/dir/": "seahub/api2/endpoints/dir.py: DirView",
    "/api/v2.1/repos/{id}/dir/detail/": "seahub/api2/endpoints/dir.py: DirDetailView",
    "/api/v2.1/repos/{id}/file/": "seahub/api2/endpoints/file.py: FileView",
    "/api/v2.1/repos/{id}/file-uploaded-bytes/":
        "seahub/api2/endpoints/repo_file_uploaded_bytes.py: RepoFileUploadedBytesView",
    "/api/v2.1/repos/{id}/zip-task/": "seahub/api2/endpoints/zip_task.py: ZipTaskView",
    "/api/v2.1/query-zip-progress/": "seahub/api2/endpoints/query_zip_progress.py: QueryZipProgressView",
    "/api/v2.1/repos/sync-batch-move-item/": "seahub/api2/endpoints/repos_batch.py: ReposSyncBatchMoveItemView",
    "/api/v2.1/repos/sync-batch-copy-item/": "seahub/api2/endpoints/repos_batch.py: ReposSyncBatchCopyItemView",
    "/api/v2.1/repos/batch-delete-item/": "seahub/api2/endpoints/repos_batch.py: ReposBatchDeleteItemView",
    "/seafhttp/upload-api/{token}": f"{_FILEOP}: uploadAPICB (resumable: Content-Range)",
    "/seafhttp/upload-aj/{token}": f"{_FILEOP}: uploadAjaxCB",
    "/seafhttp/update-api/{token}": f"{_FILEOP}: updateAPICB",
    "/seafhttp/update-aj/{token}": f"{_FILEOP}: updateAjaxCB",
    "/seafhttp/files/{token}/{name}": f"{_FILEOP}: accessCB",
    "/seafhttp/zip/{token}": f"{_FILEOP}: the /zip/ download handler",
    "/api/v2.1/repos/{id}/repo-notification-jwt-token/":
        "seahub/api2/endpoints/repo_api_tokens.py: RepoNotificationJwtTokenView",
    "/notification/ping": "seafile-server notification-server/server.go: /ping (behind the proxy's /notification)",
    "/notification": "seafile-server notification-server/server.go, client.go: the WebSocket at /",
}

_PLACEHOLDERS = {"{id}": r"(?P<repo_id>[-0-9a-f]{36})", "{token}": r"(?P<token>[^/]*)",
                 "{name}": r"(?P<name>.*)", "{commit}": r"(?P<commit_id>[0-9a-f]{40})"}


def _compile(template: str) -> re.Pattern[str]:
    rx = re.escape(template)
    for ph, sub in _PLACEHOLDERS.items():
        rx = rx.replace(re.escape(ph), sub)
    return re.compile("^" + rx + "$")


COMPILED = [(methods, template, _compile(template), handler, auth) for methods, template, handler, auth in ROUTES]


#: One matching route: ``(methods, template, handler, auth, params)``.
Candidate = tuple[tuple[str, ...], str, str, str, dict[str, Any]]


def match(path: str) -> list[Candidate]:
    """All routes whose template matches ``path``: ``(methods, template, handler, auth, params)``."""
    out = []
    for methods, template, rx, handler, auth in COMPILED:
        m = rx.match(path)
        if m:
            out.append((methods, template, handler, auth, m.groupdict()))
    return out
