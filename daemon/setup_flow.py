"""``ohsync setup``: from nothing to a configured mirror, one question at a time.

The steps, each answered by a flag or a question (:class:`SetupAnswers`,
:class:`~ohsync.daemon.setup_prompt.Prompter`): the server
(``GET /api2/server-info/`` proves it answers), the sign-in (a password
and, when asked, a two-factor code, or a pasted token: :mod:`.login`), the
library (``GET /api2/repos/``, created with ``POST /api2/repos/`` when the
person agrees), the mirror folder (a non-empty folder that is not already a
mirror of this library needs an explicit merge), the drop folder (never
overlapping the mirror).  Only then is anything stored: the token in the
keyring (or the credentials file), the keys in the config file (other keys
kept) — a setup that fails before writes nothing, not even the token store's
choice.  Autostart is offered last, through the function the caller passes,
with the default No where nothing would start it.

An answer that a flag gave and that cannot be used ends setup with a
sentence; the same answer typed at a prompt is explained and asked again.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO, TypeVar

from ..engine.errors import AuthError, OhsyncError, RemoteError, TwoFactorRequired
from ..engine.models import RepoInfo
from .config import (
    DEFAULT_LIBRARY,
    Config,
    ConfigError,
    load_config,
    normalize_server_url,
    read_document,
    update_config,
)
from .config.checks import overlap
from .credentials import describe_backend, file_store, load_token, save_token
from .login import check_token, token_from_password, token_owner_note
from .setup_prompt import MissingAnswer, Prompter
from .token_store import settle_token_store

__all__ = ["DEFAULT_SERVER", "SetupAnswers", "SetupResult", "SetupError", "run_setup"]

DEFAULT_SERVER = "https://cloud.tsinghua.edu.cn"
#: Servers that sign in through single sign-on only: a password login cannot work there.
_TOKEN_ONLY_HOSTS = {"cloud.tsinghua.edu.cn"}
_SIGN_IN_TRIES = 3

T = TypeVar("T")


class SetupError(OhsyncError):
    """Setup cannot go on; the message says why and what to do."""

    title = "Setup failed"


class _Refused(Exception):
    """This answer cannot be used (the message says why); ask again if it was typed."""


@dataclass
class SetupAnswers:
    """What the flags answered (``None``: ask, or take the default when scripted).

    :ivar create_library: True: create a missing library without asking.
    :ivar autostart: True/False: enable autostart or not, without asking.
    :ivar merge: True: a non-empty folder may be merged with the library.
    """

    server: str | None = None
    username: str | None = None
    password_stdin: bool = False
    token_stdin: bool = False
    library: str | None = None
    create_library: bool = False
    local: str | None = None
    drop: str | None = None
    autostart: bool | None = None
    #: ``--keyring``: "system", "file" (a file only the user can read), or None (ask when needed)
    keyring: str | None = None
    merge: bool = False


@dataclass
class SetupResult:
    """What setup stored.

    :ivar autostart: the autostart outcome sentence, or None when not asked for.
    :ivar autostart_failed: True when enabling autostart was asked for and failed.
    """

    config_path: Path
    server: str
    username: str
    library: RepoInfo
    local: Path
    drop: Path
    autostart: str | None = None
    autostart_failed: bool = False


def _folder(value: str) -> Path:
    return Path(os.path.abspath(os.path.expanduser(os.path.expandvars(value.strip()))))


def _overlap(a: Path, b: Path) -> bool:
    return a == b or a in b.parents or b in a.parents


def _entries(folder: Path) -> int:
    try:
        with os.scandir(folder) as it:
            return sum(1 for _ in it)
    except FileNotFoundError:
        return 0


def _unusable(folder: Path, what: str) -> str | None:
    """Why ``folder`` cannot be used as ``what`` ("the mirror"…), or None.

    Checked when the answer is given, not only when setup creates the folders at the
    end: a refusal there would throw away every answer given before it.
    """
    if folder.exists():
        if not folder.is_dir():
            return f"{folder} is a file, not a folder. Choose a folder for {what}."
        try:
            _entries(folder)
        except OSError as exc:
            return f"Cannot read {folder} ({exc.strerror}). Choose a folder you can read and write for {what}."
        if not os.access(folder, os.W_OK | os.X_OK):
            return f"{folder} is not writable for you. Choose a folder you can write to for {what}."
        return None
    parent = folder.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        return (f"{folder} cannot be made: {parent} is a file, not a folder. Choose a folder for {what} "
                "outside it.")
    if not os.access(parent, os.W_OK | os.X_OK):
        return (f"{folder} cannot be made: {parent} is not writable for you. Choose a folder for {what} "
                "where you can create one (for example in your home folder).")
    return None


class _Setup:
    def __init__(self, answers: SetupAnswers, prompter: Prompter, config_path: Path, *,
                 stdin: TextIO, enable_autostart: Callable[[Path], str] | None,
                 client_factory: Callable[..., Any],
                 autostart_unreachable: Callable[[], str | None] | None = None) -> None:
        self.a = answers
        self.autostart_unreachable = autostart_unreachable
        self.p = prompter
        self.path = config_path
        self.stdin = stdin
        self.enable_autostart = enable_autostart
        self.client_factory = client_factory
        self.cfg: Config = load_config(config_path)
        doc = read_document(config_path)
        self.configured = bool(doc)
        self.has_mirror = bool(doc.get("mirror"))
        # setup configures the first [[mirror]] table (``store`` rewrites it and keeps the others)
        self.mirror = self.cfg.mirrors[0]

    # -- helpers -------------------------------------------------------------

    def _answer(self, given: str | None, ask: Callable[[], str], accept: Callable[[str], T]) -> T:
        """A flag's answer must be usable; a typed one is explained and asked again."""
        while True:
            value = given if given is not None else ask()
            try:
                return accept(value)
            except _Refused as exc:
                if given is not None or self.p.scripted:
                    raise SetupError(str(exc)) from None
                self.p.say(str(exc))

    def _stdin_line(self, what: str) -> str:
        value = self.stdin.readline().rstrip("\r\n")
        if not value:
            raise SetupError(f"No {what} on standard input.")
        return value

    def _same_server(self, server: str) -> bool:
        return self.configured and self.cfg.server == server

    # -- steps ---------------------------------------------------------------

    def server(self) -> str:
        def accept(value: str) -> str:
            try:
                server = normalize_server_url(value)
            except ConfigError as exc:
                raise _Refused(exc.message) from None
            client = self.client_factory(server, None)
            try:
                client.server_info()
            except RemoteError as exc:
                from .doctor import tls_problem
                from .login import without_scheme

                explained = without_scheme(value, server, exc)
                if explained is not exc:
                    raise _Refused(explained.message) from None
                reason = tls_problem(exc)
                if reason:
                    raise _Refused(f"The TLS certificate of {server} is not valid ({reason}). Check the address "
                                   "and this computer's date; a private CA must be installed in the system "
                                   "store (or named with SSL_CERT_FILE).") from None
                raise _Refused(f"{server} does not answer as a Seafile server: {exc.message}") from None
            finally:
                client.close()
            return server

        default = self.cfg.server if self.configured and self.cfg.server else DEFAULT_SERVER
        return self._answer(self.a.server, lambda: self.p.ask("Seafile server", default=default,
                                                              flag="--server"), accept)

    def sign_in(self, server: str) -> tuple[str, str]:
        """``(username, token)``: from stdin, the saved login, or questions."""
        known = self.a.username or (self.cfg.username if self._same_server(server) else "")
        if self.a.token_stdin:
            return self._with_token(server, self._stdin_line("token"))
        if self.a.password_stdin:
            username = self.a.username or self.p.ask("Username (email)", default=known or None,
                                                     flag="--username")
            password = self._stdin_line("password")
            return username, token_from_password(server, username, password, self._stdin_code)
        saved = load_token(server, known) if known else None
        if saved:
            try:
                check_token(server, saved)
            except AuthError:
                self.p.say(f"The saved login of {known} at {server} is no longer accepted.")
            else:
                if self.p.scripted or self.p.confirm(f"Keep the saved login of {known}?", default=True,
                                                     flag="--password-stdin or --token-stdin"):
                    return known, saved
        if self.p.scripted:
            raise MissingAnswer("setup --yes needs --password-stdin or --token-stdin (no saved login "
                                f"for {known or 'this account'} at {server})")
        return self._ask_sign_in(server, known)

    def _ask_sign_in(self, server: str, known: str) -> tuple[str, str]:
        """Ask how to sign in, then the token or the username and password; a refused password
        is asked again alone (the username kept), :data:`_SIGN_IN_TRIES` tries in all."""
        host = server.split("://", 1)[1].split("/", 1)[0].lower()
        tries = 0

        def refused(exc: OhsyncError) -> None:
            self.p.say(f"{exc.title}: {exc.message}")
            if tries >= _SIGN_IN_TRIES:
                raise SetupError(f"Signing in to {server} failed {_SIGN_IN_TRIES} times.",
                                 title="Login failed") from None

        while True:
            choice = self.p.choose(
                "How do you sign in to this server?",
                ["with my password", "with an API token (single sign-on servers: web interface → "
                                     "Settings → Web API Auth Token)"],
                default=1 if host in _TOKEN_ONLY_HOSTS else 0, flag="--password-stdin or --token-stdin")
            if choice == 1:
                tries += 1
                try:
                    return self._with_token(server, self.p.secret("Paste the API token", flag="--token-stdin"))
                except AuthError as exc:
                    refused(exc)
                continue
            known = self.p.ask("Username (email)", default=known or None, flag="--username")
            password = self.p.secret(f"Password for {known}", flag="--password-stdin")
            while password:
                tries += 1
                try:
                    return known, token_from_password(
                        server, known, password,
                        lambda: self.p.ask("Two-factor code from your authenticator app", default=None,
                                           flag="--password-stdin (the code as a second line)"))
                except (AuthError, TwoFactorRequired) as exc:
                    refused(exc)
                # the username stays: a mistyped password is the usual reason
                password = self.p.secret(f"Password for {known} again (Enter alone: another username, or "
                                         "an API token)", flag="--password-stdin", allow_empty=True)

    def _with_token(self, server: str, token: str) -> tuple[str, str]:
        account = check_token(server, token)
        username = self.a.username or account.email
        note = token_owner_note(username, account)
        if note:
            self.p.say(note)
        return username, token

    def _stdin_code(self) -> str:
        code = self.stdin.readline().strip() if not self.stdin.isatty() else ""
        if code:
            return code
        if not self.stdin.isatty():
            raise TwoFactorRequired(
                "This account uses two-factor authentication: give the current code from your "
                "authenticator app as a second line on standard input, after the password.")
        return self.p.ask("Two-factor code from your authenticator app", default=None,
                          flag="--password-stdin (the code as a second line)")

    def library(self, client: Any, server: str) -> tuple[RepoInfo, bool]:
        """The library to mirror, and whether its name is shared with another one."""
        repos: list[RepoInfo] = client.list_repos()
        if repos:
            self.p.say("Libraries of this account:")
            for r in repos:
                flags = [t for t, on in (("read-only", r.permission != "rw"), ("encrypted", r.encrypted)) if on]
                self.p.say(f"  {r.name}" + (f"  ({', '.join(flags)})" if flags else ""))
        else:
            self.p.say("This account has no libraries yet.")

        def accept(wanted: str) -> RepoInfo:
            found = [r for r in repos if r.id == wanted.lower()] or [r for r in repos if r.name == wanted]
            if len(found) > 1:
                ids = "\n".join(f"  {r.id}  {r.name}" for r in found)
                raise _Refused(f"Several libraries are named '{wanted}'; give the id of the one to mirror:\n{ids}")
            if not found:
                if not (self.a.create_library or self.p.confirm(
                        f"There is no library named '{wanted}'. Create it?", default=True,
                        flag="--create-library")):
                    raise _Refused(f"The library '{wanted}' does not exist; name another one, or pass "
                                   "--create-library.")
                # created only once the folders are accepted (:meth:`create_library`)
                return RepoInfo(id="", name=wanted, head_commit_id="")
            repo = found[0]
            if repo.encrypted:
                raise _Refused(f"'{repo.name}' is an encrypted library; ohsync cannot sync encrypted "
                               "libraries. Pick or create another one.")
            if repo.permission != "rw":
                raise _Refused(f"'{repo.name}' is read-only for this account; ohsync syncs both ways "
                               "and needs a library it can write to.")
            return repo

        default = DEFAULT_LIBRARY
        if self._same_server(server):
            default = self.mirror.library_id or self.mirror.label
        repo = self._answer(self.a.library, lambda: self.p.ask("Library to mirror", default=default,
                                                               flag="--library"), accept)
        return repo, sum(1 for r in repos if r.name == repo.name) > 1

    def _mirrors_library(self, repo: RepoInfo, folder: Path) -> bool:
        """True when this config's state already holds a mirror of ``repo`` in ``folder``."""
        if not repo.id:  # a library still to be created has no mirror yet
            return False
        mirror = dataclasses.replace(self.mirror, local=folder)
        return (self.cfg.mirror_state_dir(repo.id, mirror) / "state.sqlite3").is_file()

    def local(self, repo: RepoInfo) -> Path:
        def accept(value: str) -> Path:
            folder = _folder(value)
            problem = _unusable(folder, "the mirror")
            if problem:
                raise _Refused(problem)
            for other in self.cfg.mirrors[1:] if self.has_mirror else []:
                # setup rewrites only the first [[mirror]]; the others keep syncing their folders
                if overlap(folder, other.local):
                    raise _Refused(f"{folder} overlaps the folder {other.local} of the mirror '{other.label}' "
                                   f"in {self.path}; two mirrors inside each other would sync each other's "
                                   "files. Choose a folder outside it for this mirror.")
            if _entries(folder):
                if self._mirrors_library(repo, folder):
                    self.p.say(f"{folder} already mirrors '{repo.name}'; syncing goes on from where it was.")
                elif not self.a.merge:
                    refusal = (f"{folder} is not empty and is not a mirror of '{repo.name}'. Choose an "
                               "empty or new folder, or pass --merge to merge its files with the library")
                    if self.p.scripted:
                        raise _Refused(refusal + ".")
                    if not self.p.confirm(
                            f"{folder} already holds files and is not a mirror of '{repo.name}'. Merge them "
                            "with the library? (Nothing is deleted: files only on one side are copied to "
                            "the other; where both differ, they are merged or one is kept as a conflict copy.)",
                            default=False, flag="--merge"):
                        raise _Refused(refusal + ".")
            return folder

        default = str(self.mirror.local) if self.has_mirror else str(Path.home() / repo.name)
        return self._answer(self.a.local, lambda: self.p.ask("Local folder for the mirror", default=default,
                                                             flag="--local"), accept)

    def drop(self, local: Path) -> Path:
        def accept(value: str) -> Path:
            folder = _folder(value)
            problem = _unusable(folder, "dropped documents")
            if problem:
                raise _Refused(problem)
            if _overlap(folder, local):
                raise _Refused(f"The drop folder {folder} overlaps the mirror {local}; it must be a "
                               "separate folder.")
            count = _entries(folder)
            if count and self.a.drop is None and not self.p.scripted and not self.p.confirm(
                    f"{folder} already holds {count} item(s); ohsync will file them into /Files/ when it "
                    "starts. Use this folder?", default=True, flag="--drop"):
                raise _Refused("Choose another drop folder.")
            return folder

        default = self.cfg.filing.drop_dir
        if _overlap(default, local):
            default = local.parent / "OH-Drop"
        return self._answer(self.a.drop, lambda: self.p.ask("Drop folder (documents put here are filed "
                                                            "into /Files/)", default=str(default),
                                                            flag="--drop"), accept)

    def create_library(self, client: Any, repo: RepoInfo) -> RepoInfo:
        """Create the library chosen by name (``POST /api2/repos/``) when it does not exist yet."""
        if repo.id:
            return repo
        created: RepoInfo = client.create_repo(repo.name)
        self.p.say(f"Created the library '{created.name}'.")
        return created

    def store(self, server: str, username: str, token: str, repo: RepoInfo, local: Path, drop: Path,
              ambiguous: bool, pending: dict[str, Any] | None = None) -> None:
        """Write the token and the config, once everything was accepted (``pending``: the
        token store's own keys, held back by :func:`settle_token_store` until now)."""
        for folder in (local, drop):
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise SetupError(f"Cannot create {folder}: {exc.strerror}. Choose another folder.") from exc
        doc = read_document(self.path)
        raw = doc.get("mirror", [])
        mirrors = [dict(m) for m in ([raw] if isinstance(raw, dict) else raw) if isinstance(m, dict)]
        first = mirrors[0] if mirrors else {}
        if first.get("library_id", repo.id) != repo.id or first.get("library", repo.name) != repo.name:
            first.pop("remote", None)  # a subtree of the old library means nothing in the new one
        first.update({"library": repo.name, "local": str(local)})
        if ambiguous:
            first["library_id"] = repo.id
        else:
            first.pop("library_id", None)
        filing = dict(doc.get("filing", {})) if isinstance(doc.get("filing"), dict) else {}
        filing["drop_dir"] = str(drop)
        save_token(server, username, token)
        update_config(self.path, {**(pending or {}), "server": server, "username": username,
                                  "mirror": [first] + mirrors[1:], "filing": filing})

    def autostart(self) -> tuple[str | None, bool]:
        wanted = self.a.autostart
        if wanted is None and self.enable_autostart is None:
            return "Start ohsync with `ohsync run`.", False
        if wanted is None and self.p.scripted:
            # --yes takes the answers a person would get by pressing Enter, but it does not
            # change what runs at login unless asked
            return ("Autostart is off (--yes leaves it off unless --autostart is given); start ohsync "
                    "with `ohsync run` (or later `ohsync autostart enable`)."), False
        if wanted is None:
            unreachable = self.autostart_unreachable() if self.autostart_unreachable is not None else None
            if unreachable:  # an entry nothing reads: offered, but not by default, and the reason said
                self.p.say(f"Autostart would not start ohsync on this machine: {unreachable}")
            wanted = self.p.confirm("Start ohsync automatically when you log in?", default=not unreachable,
                                    flag="--autostart or --no-autostart")
        if not wanted:
            return "Autostart is off; start ohsync with `ohsync run` (or later `ohsync autostart enable`).", False
        if self.enable_autostart is None:
            return "Autostart is not available in this version; start ohsync with `ohsync run`.", True
        try:
            return self.enable_autostart(self.path), False
        except OhsyncError as exc:
            return f"Autostart could not be enabled: {exc.message}", True

    # -- the whole flow ------------------------------------------------------

    def run(self) -> SetupResult:
        # no usable keyring: say so (and offer the file store) before any question
        # the choice is written with the rest: a setup that fails (a wrong password, no server) writes nothing
        pending: dict[str, Any] = {}
        note = settle_token_store(self.cfg, self.path, self.a.keyring, None if self.p.scripted else (
            lambda question: self.p.confirm(question, default=False, flag="--keyring file")), pending)
        if note:
            self.p.say(note)
        describe_backend()
        server = self.server()
        username, token = self.sign_in(server)
        self.p.say(f"Signed in as {username}.")
        client = self.client_factory(server, token)
        try:
            repo, ambiguous = self.library(client, server)
            # both folders are checked before anything is created on the server or on disk
            local = self.local(repo)
            drop = self.drop(local)
            repo = self.create_library(client, repo)
        finally:
            client.close()
        self.store(server, username, token, repo, local, drop, ambiguous, pending)
        kept = file_store()
        if kept is not None:  # said only now that the login is really there
            # what the file store means was said once, before signing in (settle_token_store's note)
            self.p.say(f"Saved the settings in {self.path} and the login in the credentials file {kept}.")
        else:
            self.p.say(f"Saved the settings in {self.path} and the login in the keyring.")
        message, failed = self.autostart()
        return SetupResult(self.path, server, username, repo, local, drop, message, failed)


def run_setup(answers: SetupAnswers, prompter: Prompter, config_path: Path, *,
              stdin: TextIO | None = None, enable_autostart: Callable[[Path], str] | None = None,
              client_factory: Callable[..., Any] | None = None,
              autostart_unreachable: Callable[[], str | None] | None = None) -> SetupResult:
    """Ask what is missing, sign in, and store the config and the token.

    :param answers: what the flags said.
    :param prompter: asks the rest (scripted: defaults only).
    :param config_path: the config file to write (other keys in it are kept).
    :param stdin: where ``--password-stdin``/``--token-stdin`` read (default ``sys.stdin``).
    :param enable_autostart: called with the config path when the person wants
        autostart; returns a sentence, raises :class:`OhsyncError` on failure.
    :param client_factory: makes the Seafile client as ``(server, token)``.
    :param autostart_unreachable: says why nothing on this machine would start ohsync at
        login (None: something will); autostart is then offered with the default No.
    :returns: what was stored.
    :raises MissingAnswer: scripted without a needed flag, or the input ended.
    :raises SetupError: an answer given by a flag cannot be used.
    :raises OhsyncError: sign-in refused, keyring unavailable, server errors.
    """
    if client_factory is None:
        from ..engine.client import SeafileClient

        def client_factory(server: str, token: str | None) -> Any:
            return SeafileClient(server, token, retries=1)  # a person is waiting at the prompt
    return _Setup(answers, prompter, config_path, stdin=stdin or sys.stdin,
                  enable_autostart=enable_autostart, client_factory=client_factory,
                  autostart_unreachable=autostart_unreachable).run()
