"""``ohsync doctor``: every check a working mirror depends on, each with its fix.

:func:`run_checks` returns one :class:`Finding` per check, in this order:
config, keyring, server (``GET /api2/server-info/``), TLS, login (``GET
/api2/account/info/`` with the saved token), clock (the ``Date`` header the
client reads), library (``GET /api2/repos/``), then the local checks of
:mod:`ohsync.daemon.doctor_local` (mirror and drop folder, inotify limit,
display and tray host, a running instance, the state database).  The
library, mirror folder and state database are checked for every
``[[mirror]]``: the first's as ``library``, ``mirror_folder`` and
``state_db`` (as with one mirror), each other's with its name
(``library:Notes``, :func:`~ohsync.daemon.doctor_local.check_name`).

Levels: ``ok``; ``warning`` (comfort only: syncing works); ``error``
(syncing cannot work, or not fully); ``skipped`` (an earlier error makes the
check meaningless).  :func:`exit_code` is 1 when any check is an error.
Everything the checks look at outside the config comes through
:class:`Probes`, so tests can fake it.  The doctor writes nothing to the
server; locally it only creates and removes ``.ohsync-tmp-doctor*`` probe
files, which the watcher ignores.
"""

from __future__ import annotations

import os
import ssl
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.errors import AuthError, LibraryNotFound, NetworkError, RemoteError
from ..engine.models import RepoInfo
from .config import Config
from .credentials import KeyringUnavailable, describe_backend, file_store, load_token
from .doctor_findings import ERROR, OK, SKIPPED, WARNING, Finding
from .doctor_local import check_name, find_tray_host, local_checks, tray_libraries_problem
from .status import CLOCK_SKEW_WARN

__all__ = ["OK", "WARNING", "ERROR", "SKIPPED", "Finding", "Probes", "run_checks", "exit_code", "tls_problem"]

_LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


def _default_client(server: str, token: str | None) -> Any:
    from ..engine.client import SeafileClient

    return SeafileClient(server, token, timeout=10.0, retries=0)


def _default_tray_host(environ: Mapping[str, str]) -> str | None:
    return find_tray_host(environ)


def _default_tray_libraries() -> str | None:
    return tray_libraries_problem()


def _default_tray_install_hint() -> str:
    from ..tray.install_hint import install_hint

    return install_hint()


@dataclass
class Probes:
    """What the checks read besides the config (tests replace any of it).

    :ivar inotify_limit_file: the file holding the inotify watch limit.
    :ivar socket: the daemon's socket (default: the config's).
    :ivar environ: environment variables (display, D-Bus session).
    :ivar platform: ``sys.platform`` value.
    :ivar find_tray_host: ``environ → description`` of the tray host, None when none.
    :ivar tray_libraries: ``() → problem`` with the tray's Python packages, None when fine.
    :ivar tray_install_hint: ``() → sentence`` naming the command that installs them on this machine.
    :ivar client_factory: ``(server, token) → SeafileClient``.
    :ivar clock_warn: seconds of clock offset worth a warning.
    """

    inotify_limit_file: Path = Path("/proc/sys/fs/inotify/max_user_watches")
    socket: Path | None = None
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))
    platform: str = field(default_factory=lambda: sys.platform)
    find_tray_host: Callable[[Mapping[str, str]], str | None] = _default_tray_host
    tray_libraries: Callable[[], str | None] = _default_tray_libraries
    tray_install_hint: Callable[[], str] = _default_tray_install_hint
    client_factory: Callable[[str, str | None], Any] = _default_client
    clock_warn: float = CLOCK_SKEW_WARN


#: OpenSSL's words for a TLS hello answered in plain HTTP (not a certificate problem).
_PLAIN_HTTP = ("wrong version number", "wrong_version_number", "record layer failure", "http_request")


def tls_problem(exc: BaseException) -> str | None:
    """The TLS failure inside an error's cause chain (an untrusted or wrong certificate), or None.

    :returns: the reason as OpenSSL words it ("certificate has expired"…).
    """
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not c for c in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    if any(sign in str(err).lower() for err in chain for sign in _PLAIN_HTTP):
        return None  # no certificate at all: the port speaks plain HTTP (the error's own sentence says so)
    for err in chain:
        if isinstance(err, ssl.SSLError):
            return getattr(err, "verify_message", None) or err.reason or str(err)
    for err in chain:
        if "CERTIFICATE_VERIFY_FAILED" in str(err) or "[SSL" in str(err):
            return str(err)
    return None


class _Remote:
    """The config, keyring and server checks; keeps what later checks need."""

    def __init__(self, cfg: Config, probes: Probes, out: list[Finding]) -> None:
        self.cfg = cfg
        self.probes = probes
        self.out = out
        self.token: str | None = None
        #: each mirror's library as the server names it (None: not found or not checked), in config order
        self.repos: list[RepoInfo | None] = [None] * len(cfg.mirrors)

    def add(self, check: str, level: str, message: str, fix: str = "") -> None:
        self.out.append(Finding(check, level, message, fix))

    def config(self) -> bool:
        cfg = self.cfg
        if not cfg.path.exists() and not (cfg.server and cfg.username):
            self.add("config", ERROR, f"The config file {cfg.path} does not exist: ohsync is not set up "
                     "with it.", f"Run `ohsync setup` (with `--config {cfg.path}` to create this one), or "
                     "check the path given to --config or in OHSYNC_CONFIG.")
            return False
        if not cfg.server or not cfg.username:
            self.add("config", ERROR, f"{cfg.path} names no server or username: ohsync is not set up.",
                     "Run `ohsync setup`.")
            return False
        if cfg.warnings:
            self.add("config", WARNING, "; ".join(cfg.warnings),
                     f"Remove or fix the keys named in {cfg.path}.")
        else:
            labels = ", ".join(m.label for m in cfg.mirrors)
            more = (f" ({len(cfg.mirrors)} mirrors; each after the first checked below as library:NAME, "
                    "mirror_folder:NAME and state_db:NAME)" if len(cfg.mirrors) > 1 else "")
            self.add("config", OK, f"{cfg.path}: {labels} at {cfg.server} as {cfg.username}{more}.")
        return True

    def keyring(self) -> None:
        cfg = self.cfg
        try:
            backend, plaintext = describe_backend()
            self.token = load_token(cfg.server, cfg.username)
        except KeyringUnavailable as exc:
            self.add("keyring", ERROR, "The keyring cannot be used, so the daemon cannot read its login.",
                     exc.message)
            return
        if not self.token:
            self.add("keyring", ERROR, f"No saved login for {cfg.username} at {cfg.server} in the keyring "
                     f"({backend}).", f"Run `ohsync login --server {cfg.server} --username {cfg.username}` "
                     "(or `ohsync setup`).")
        elif plaintext:
            where = file_store()
            self.add("keyring", WARNING, (f"The login is stored in plain text in {where} (keyring = \"file\"): "
                     "only your user can read it, but anyone with access to your account's files can."
                     if where else f"The login is stored in a plain file by {backend}: anyone who can "
                     "read your files can read the token."),
                     "Install and unlock a Secret Service keyring (GNOME Keyring, KeePassXC), then run "
                     "`ohsync logout` and `ohsync login --keyring system`.")
        else:
            self.add("keyring", OK, f"The login of {cfg.username} is in the keyring ({backend}).")

    def server(self) -> Any:
        """Reachability and TLS; returns an unauthenticated client, or None."""
        cfg = self.cfg
        host = cfg.server.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[0].lower()
        client = self.probes.client_factory(cfg.server, None)
        try:
            info = client.server_info()
        except NetworkError as exc:
            reason = tls_problem(exc)
            if reason:
                self.add("server", OK, f"{cfg.server} answers, but its certificate cannot be trusted.")
                self.add("tls", ERROR, f"The TLS certificate of {host} is not valid: {reason}.",
                         "Check the server address (a typo, a proxy or a captive portal can present another "
                         "certificate) and this computer's date; a private CA must be installed in the system "
                         "store (or named with SSL_CERT_FILE).")
            else:
                self.add("server", ERROR, f"{cfg.server} cannot be reached: {exc.message}",
                         f"Check the network connection and the address (`server` in {cfg.path}).")
                self.add("tls", SKIPPED, "Not checked: the server cannot be reached.")
            client.close()
            return None
        except RemoteError as exc:
            self.add("server", ERROR, f"{cfg.server} does not answer as a Seafile server: {exc.message}",
                     f"Check `server` in {cfg.path}: it must be the Seafile base address, such as "
                     "https://cloud.tsinghua.edu.cn.")
            self.add("tls", SKIPPED, "Not checked: the server does not answer as Seafile.")
            client.close()
            return None
        version = info.get("version", "?") if isinstance(info, dict) else "?"
        self.add("server", OK, f"{cfg.server} answers (Seafile {version}).")
        if cfg.server.startswith("https://"):
            self.add("tls", OK, f"The TLS certificate of {host} is valid.")
        elif host in _LOOPBACK:
            self.add("tls", OK, "Plain http to a server on this computer.")
        else:
            self.add("tls", WARNING, f"{cfg.server} uses plain http: the token and your files travel "
                     "unencrypted.", f"Use https:// in `server` ({cfg.path}) if the server offers it.")
        return client

    def login(self) -> Any:
        """Whether the server accepts the saved token; returns an authenticated client, or None."""
        if not self.token:
            self.add("login", SKIPPED, "Not checked: there is no saved login.")
            return None
        client = self.probes.client_factory(self.cfg.server, self.token)
        try:
            account = client.account_info()
        except AuthError:
            client.close()
            self.add("login", ERROR, f"The server rejects the saved token of {self.cfg.username}.",
                     f"Sign in again: `ohsync login --server {self.cfg.server} --username {self.cfg.username}`.")
            return None
        except RemoteError as exc:
            client.close()
            self.add("login", ERROR, f"Checking the login failed: {exc.message}", "Try again later.")
            return None
        self.add("login", OK, f"The server accepts the token of {account.email}.")
        return client

    def clock(self, client: Any) -> None:
        offset = getattr(client, "clock_offset", None)
        if offset is None:
            self.add("clock", SKIPPED, "The server sent no Date header to compare clocks with.")
        elif abs(offset) > self.probes.clock_warn:
            side = "behind" if offset > 0 else "ahead of"
            self.add("clock", WARNING, f"This computer's clock is {abs(offset) / 60:.0f} min {side} the "
                     "server's. Syncing does not depend on it, but conflict-copy and backup times will look "
                     "wrong.", "Turn on automatic time: `timedatectl set-ntp true` (Linux), or System "
                     "Settings → General → Date & Time (macOS).")
        else:
            self.add("clock", OK, f"This computer's clock is within {max(1, round(abs(offset)))} s of the "
                     "server's.")

    def library(self, client: Any, index: int) -> None:
        """Whether the library of the ``index``-th mirror exists and is writable (``client``: signed in
        with the top-level account); its :class:`RepoInfo` is kept in :attr:`repos` for the local checks."""
        from ..engine.library import resolve_library

        mirror = self.cfg.mirrors[index]
        check = check_name("library", self.cfg, index)
        try:
            repo = resolve_library(client, name=None if mirror.library_id else mirror.library,
                                   library_id=mirror.library_id, create=False)
        except LibraryNotFound as exc:
            if self.cfg.create_library and not mirror.library_id:
                self.add(check, WARNING, f"The library '{mirror.label}' does not exist yet; ohsync "
                         "creates it when it starts (create_library = true).")
            elif len(self.cfg.mirrors) == 1:
                self.add(check, ERROR, exc.message, "Run `ohsync setup` to pick or create the library.")
            else:
                self.add(check, ERROR, f"Mirror {mirror.label}: {exc.message}",
                         f"Fix `library` of this [[mirror]] in {self.cfg.path}, or create the library in the "
                         "web interface.")
            return
        except RemoteError as exc:
            self.add(check, ERROR, f"Listing the libraries failed: {exc.message}", "Try again later.")
            return
        self.repos[index] = repo
        if repo.encrypted:
            self.add(check, ERROR, f"'{repo.name}' is an encrypted library, which ohsync cannot sync.",
                     "Run `ohsync setup` and pick or create an unencrypted library.")
        elif repo.permission != "rw":
            self.add(check, ERROR, f"'{repo.name}' is read-only for {self.cfg.username}: local edits "
                     "cannot be uploaded.", "Ask the library's owner for write access, or run `ohsync setup` "
                     "and pick another library.")
        else:
            self.add(check, OK, f"'{repo.name}' ({repo.id}) is there and writable.")

    def _skip_libraries(self, why: str) -> None:
        for index in range(len(self.cfg.mirrors)):
            self.add(check_name("library", self.cfg, index), SKIPPED, why)

    def run(self) -> None:
        if not self.config():
            for check in ("keyring", "server", "tls", "login", "clock"):
                self.add(check, SKIPPED, "Not checked: ohsync is not set up.")
            self._skip_libraries("Not checked: ohsync is not set up.")
            return
        self.keyring()
        client = self.server()
        if client is None:
            for check in ("login", "clock"):
                self.add(check, SKIPPED, "Not checked: the server cannot be used.")
            self._skip_libraries("Not checked: the server cannot be used.")
            return
        client.close()
        client = self.login()
        if client is None:
            self.add("clock", SKIPPED, "Not checked: no accepted login.")
            self._skip_libraries("Not checked: no accepted login.")
            return
        try:
            self.mirror_library(client, 0)
            self.clock(client)
            for index in range(1, len(self.cfg.mirrors)):
                self.mirror_library(client, index)
        finally:
            client.close()

    def mirror_library(self, client: Any, index: int) -> None:
        """The library check of the ``index``-th mirror (``library``, or ``library:NAME`` after the
        first); one signed in with another account than the top-level one is only checked for a saved
        login (the daemon signs it in on its own)."""
        mirror = self.cfg.mirrors[index]
        if self.cfg.account(mirror) == self.cfg.account():
            self.library(client, index)
            return
        check = check_name("library", self.cfg, index)
        server, username = self.cfg.account(mirror)
        try:
            token = load_token(server, username)
        except KeyringUnavailable:
            token = None
        if token:
            self.add(check, SKIPPED, f"Not checked: mirror {mirror.label} signs in as {username} at {server}.")
        else:
            self.add(check, ERROR, f"No saved login for {username} at {server}, which mirror {mirror.label} "
                     "uses.", f"Run `ohsync login --mirror {mirror.label}`.")


def run_checks(cfg: Config, probes: Probes | None = None) -> list[Finding]:
    """Run every check.

    :param cfg: the loaded config (a config that cannot be loaded is the
        caller's finding: see :mod:`ohsync.daemon.cli.doctor`).
    :param probes: what to look at besides the config (default: this machine).
    :returns: the findings, in check order; never raises for a failed check.
    """
    probes = probes or Probes()
    out: list[Finding] = []
    remote = _Remote(cfg, probes, out)
    remote.run()
    out.extend(local_checks(cfg, probes, remote.repos))
    return out


def exit_code(findings: list[Finding]) -> int:
    """1 when any finding is an error (syncing cannot fully work), else 0."""
    return 1 if any(f.level == ERROR for f in findings) else 0
