"""Replayer for the recorded Seafile transcripts in ``tests/data/seafile-transcripts``.

Implements the README of that folder: placeholder substitution, captures,
byte-exact multipart bodies (raw UTF-8 file names, ``"`` as ``%22``), the
normalisation of live responses (volatile keys, numbered commit/dir ids,
string rules) and the field-by-field comparison that ignores only a step's
``version_dependent`` fields.

Use::

    result = replay_file(path, base_url, "user@example.edu.cn", "secret")
    assert result.mismatches == []

The transcripts were recorded on a real Seafile 13 server (see that folder's
README); they are test data of this repository.
"""
from __future__ import annotations

import base64
import json
import random
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import httpx

TRANSCRIPTS = Path(__file__).resolve().parent / "data" / "seafile-transcripts"

ZERO_ID = "0" * 40
ZERO_UUID = "00000000-0000-0000-0000-000000000000"
HEX40 = re.compile(r"^[0-9a-f]{40}$")
UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
ISO_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T")
LINK_RE = re.compile(r"https?://[^/\s\"]+(?:/seafhttp)?/(upload-api|upload-aj|update-api|files|upload-blks-api|zip)"
                     r"/([^/?#\s\"]+)")
HOST_RE = re.compile(r"https?://[^/\s\"?#]+")
LINK_KIND = {"upload-api": "upload", "upload-aj": "upload-aj", "update-api": "update", "files": "download",
             "upload-blks-api": "upload-blks", "zip": "zip"}
FS_SEGMENTS = ("/upload-api/", "/upload-aj/", "/update-api/", "/update-aj/", "/files/", "/zip/",
               "/upload-blks-api/")

VOLATILE = {"mtime", "ctime", "last_modified", "mtime_relative", "last_update", "time", "token", "avatar_url",
            "contact_email", "modifier_contact_email", "owner_contact_email", "last_modifier_contact_email",
            "sync_token", "encrypted_version", "usage", "space_usage", "relay_id", "relay_addr", "relay_port"}
COMMIT_KEYS = {"head_commit_id", "commit_id", "parent_id", "second_parent_id", "last_modifier_commit_id",
               "repo_version_id"}
DIR_KEYS = {"root", "root_id", "dir_id"}
LISTED_HEADERS = ("oid", "dir_perm", "location", "retry-after", "content-range", "content-disposition",
                  "accept-ranges")


def load_steps(path: Path) -> list[dict]:
    """The exchanges of one scenario file, in order."""
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def scenario_files() -> list[Path]:
    """Every ``*.jsonl`` scenario in the transcripts folder, sorted."""
    return sorted(TRANSCRIPTS.glob("*.jsonl"))


# ------------------------------------------------------------------ normalisation
class Normaliser:
    """Numbers ids and rewrites strings of one replay (state shared by all its steps)."""

    def __init__(self, variables: dict[str, str]) -> None:
        self.vars = variables
        self.numbers: dict[str, int] = {}

    def number(self, kind: str, value: str) -> str:
        if value not in self.numbers:
            self.numbers[value] = len(self.numbers) + 1
        return f"<{kind}:{self.numbers[value]}>"

    def string(self, s: str) -> str:
        """String rules: times, run, account, token, links, hosts, UUIDs."""
        if ISO_RE.match(s):
            return "<time>"
        v = self.vars
        if v.get("run"):
            s = s.replace(v["run"], "<run>")
        if v.get("username"):
            if s == v["username"].split("@")[0]:
                return "<user_name>"
            s = s.replace(v["username"], "<username>")
        if v.get("token"):
            s = s.replace(v["token"], "<token>")
        s = LINK_RE.sub(lambda m: f"<link:{LINK_KIND[m.group(1)]}>", s)
        s = HOST_RE.sub("<host>", s)

        def uu(m: re.Match) -> str:
            val = m.group(0)
            if val == ZERO_UUID:
                return val
            for name, cap in v.items():
                if cap == val and name not in ("run", "username", "password"):
                    return f"<{name}>"
            return self.number("uuid", val)
        return UUID_RE.sub(uu, s)

    def body(self, value, exact: set[str], extra_volatile: set[str], dir_metadata: bool = False):
        """Normalise a parsed JSON body (keys visited in sorted order)."""
        def walk(val, top: bool = False):
            if isinstance(val, dict):
                out = {}
                for k in sorted(val):
                    out[k] = entry(k, val[k], val, top)
                return out
            if isinstance(val, list):
                return [walk(x) for x in val]
            if isinstance(val, str):
                return val if HEX40.match(val) else self.string(val)
            return val

        def volatile(k, x):
            if isinstance(x, bool) or x is None:
                return x
            if isinstance(x, str):
                return f"<{k}>"
            return f"<{k}#{type(x).__name__}>"

        def entry(k, x, obj, top):
            if k in extra_volatile:
                return volatile(k, x)
            if k in VOLATILE and k not in exact:
                return volatile(k, x)
            if isinstance(x, str) and HEX40.match(x) and x != ZERO_ID:
                if k in COMMIT_KEYS or (k == "id" and "root_id" in obj):
                    return self.number("commit_id", x)
                if k in DIR_KEYS or (k == "id" and obj.get("type") == "dir") or (k == "id" and dir_metadata and top):
                    return self.number("dir_id", x)
                return x
            return walk(x)
        return walk(value, top=True)


# ------------------------------------------------------------------ requests
def _subst(value, variables: dict[str, str]):
    if isinstance(value, str):
        return re.sub(r"\{([A-Za-z0-9_]+)\}", lambda m: str(variables.get(m.group(1), m.group(0))), value)
    if isinstance(value, dict):
        return {k: _subst(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [_subst(v, variables) for v in value]
    return value


def _file_bytes(spec: dict) -> bytes:
    if "text" in spec:
        return spec["text"].encode("utf-8")
    if "base64" in spec:
        return base64.b64decode(spec["base64"])
    g = spec["generate"]
    rep = g["repeat"].encode("utf-8")
    size = g["size"]
    data = (rep * (size // len(rep) + 1))[:size]
    off = g.get("offset", 0)
    length = g.get("length", size - off)
    return data[off:off + length]


def build_multipart(spec: dict, variables: dict[str, str]) -> tuple[bytes, str]:
    """Multipart body as browsers send it: fields first, then files; raw UTF-8 names."""
    boundary = "----ohsyncReplay" + uuid.uuid4().hex
    out = bytearray()
    for k, v in spec.get("fields", {}).items():
        out += f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n'.encode("utf-8")
        out += _subst(v, variables).encode("utf-8") + b"\r\n"
    for f in spec.get("files", []):
        name = f["filename"].replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")
        ctype = f.get("content_type") or "application/octet-stream"
        out += (f'--{boundary}\r\nContent-Disposition: form-data; name="{f["field"]}"; filename="{name}"\r\n'
                f"Content-Type: {ctype}\r\n\r\n").encode("utf-8")
        out += _file_bytes(f) + b"\r\n"
    out += f"--{boundary}--\r\n".encode()
    return bytes(out), f"multipart/form-data; boundary={boundary}"


# ------------------------------------------------------------------ replay
@dataclass
class StepResult:
    step: int
    note: str
    expected: dict
    actual: dict
    mismatches: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


@dataclass
class ReplayResult:
    scenario: str
    steps: list[StepResult]

    @property
    def mismatches(self) -> list[str]:
        """``"step N (note): field: expected X, got Y"`` lines for every real mismatch."""
        return [m for s in self.steps for m in s.mismatches]


class Replayer:
    """Replays one scenario file against ``base_url`` with one account."""

    def __init__(self, base_url: str, username: str, password: str, client: httpx.Client | None = None):
        self.base_url = base_url.rstrip("/")
        run = "run" + "".join(random.choice("ghijkmnpqrstuvwxyz") for _ in range(8))
        self.vars: dict[str, str] = {"username": username, "password": password, "run": run}
        self.link_vars: list[str] = []
        self.client = client or httpx.Client(follow_redirects=False, timeout=60)
        self.norm = Normaliser(self.vars)

    def _fileserver(self) -> str | None:
        for name in reversed(self.link_vars):
            link = self.vars.get(name, "")
            for seg in FS_SEGMENTS:
                if seg in link:
                    return link.split(seg, 1)[0]
        return None

    def send(self, req: dict) -> httpx.Response:
        """Send one recorded request after placeholder substitution (429 -> wait and resend)."""
        variables = dict(self.vars)
        fs = self._fileserver()
        if fs:
            variables["fileserver"] = fs
        path = _subst(req["path"], variables)
        url = httpx.URL(path if path.startswith("http") else self.base_url + path)
        if req.get("query"):
            url = url.copy_merge_params(_subst(req["query"], variables))
        headers = _subst(req.get("headers", {}), variables)
        kwargs: dict = {}
        if "form" in req:
            kwargs["data"] = _subst(req["form"], variables)
            if not kwargs["data"]:
                kwargs = {"content": b"", "headers": {"Content-Type": "application/x-www-form-urlencoded"}}
        elif "json" in req:
            kwargs["content"] = json.dumps(_subst(req["json"], variables)).encode()
            headers = {**headers, "Content-Type": "application/json"}
        elif "multipart" in req:
            body, ctype = build_multipart(req["multipart"], variables)
            kwargs["content"] = body
            headers = {**headers, "Content-Type": ctype}
        if "headers" in kwargs:
            headers = {**kwargs.pop("headers"), **headers}
        for _ in range(5):
            resp = self.client.request(req["method"], url, headers=headers, **kwargs)
            if resp.status_code != 429:
                return resp
            time.sleep(float(resp.headers.get("Retry-After", "1")))  # why: the server asked us to wait
        return resp

    def normalise(self, step: dict, resp: httpx.Response) -> dict:
        """The live response in the recorded (normalised) shape."""
        req = step["request"]
        exact = set(step.get("exact_keys", []))
        extra = set(step.get("volatile_keys", []))
        is_dir_req = "/dir/" in req["path"] and "/dir/metadata/" not in req["path"] and not req["path"].startswith("{")
        headers = {}
        for h in LISTED_HEADERS:
            if h in resp.headers:
                val = resp.headers[h]
                if h == "oid" and HEX40.match(val) and val != ZERO_ID and is_dir_req:
                    headers[h] = self.norm.number("dir_id", val)
                elif HEX40.match(val):
                    headers[h] = val
                else:
                    headers[h] = self.norm.string(val)
        raw = resp.content
        ctype = resp.headers.get("content-type")
        try:
            txt: str | None = raw.decode("utf-8")
        except UnicodeDecodeError:
            txt = None
        kind, body = None, None
        if txt is not None and (("json" in (ctype or "")) or txt[:1] in ("{", "[", '"')):
            try:
                parsed = json.loads(txt, strict=False)
                kind = "json"
                body = self.norm.body(parsed, exact, extra, dir_metadata="/dir/metadata/" in req["path"])
            except ValueError:
                pass
        if kind is None:
            if txt is None or len(raw) > 2048:
                import hashlib
                kind, body = "digest", {"sha1": hashlib.sha1(raw).hexdigest(), "length": len(raw)}
            elif "html" in (ctype or "") and len(txt) > 200:
                kind, body = "html", "<html page>"
            else:
                kind, body = "text", (txt if HEX40.match(txt) else self.norm.string(txt))
        out = {"status": resp.status_code, "content_type": ctype, "body_kind": kind, "body": body}
        if headers:
            out["headers"] = headers
        return out

    def capture(self, step: dict, resp: httpx.Response) -> None:
        """Store the step's captures from the raw response."""
        for name, where in step.get("captures", {}).items():
            try:
                if where.startswith("header:"):
                    val = resp.headers[where.split(":", 1)[1]]
                else:
                    val = resp.json()
                    for part in re.findall(r"\.([A-Za-z0-9_]+)|\[(\d+)\]", where[1:]):
                        val = val[part[0]] if part[0] else val[int(part[1])]
            except (KeyError, IndexError, TypeError, ValueError):
                continue
            if isinstance(val, str):
                self.vars[name] = val
                if any(seg in val for seg in FS_SEGMENTS):
                    self.link_vars.append(name)

    def run_step(self, step: dict) -> StepResult:
        """Send, normalise, capture and compare one exchange."""
        resp = self.send(step["request"])
        self.capture(step, resp)
        actual = self.normalise(step, resp)
        expected = step["response"]
        res = StepResult(step["step"], step.get("note", ""), expected, actual)
        vd = set(step.get("version_dependent", []))
        for fld in ("status", "content_type", "headers", "body_kind", "body"):
            exp, act = expected.get(fld), actual.get(fld)
            if fld == "content_type":
                exp = exp.replace(" ", "").lower() if exp else exp
                act = act.replace(" ", "").lower() if act else act
            if fld == "headers":
                exp, act = exp or {}, act or {}
            if fld == "body" and isinstance(exp, dict) and isinstance(act, dict):
                for p in vd:
                    if p.startswith("body."):
                        k = p.split(".", 1)[1]
                        if exp.get(k) != act.get(k):
                            res.ignored.append(f"{p}: expected {exp.get(k)!r}, got {act.get(k)!r}")
                        exp = {a: b for a, b in exp.items() if a != k}
                        act = {a: b for a, b in act.items() if a != k}
            if exp != act:
                msg = f"step {res.step} ({res.note}): {fld}: expected {exp!r}, got {act!r}"
                (res.ignored if fld in vd else res.mismatches).append(msg)
        return res


def replay_file(path: Path, base_url: str, username: str, password: str) -> ReplayResult:
    """Replay every exchange of one scenario file; returns per-step results."""
    rp = Replayer(base_url, username, password)
    try:
        return ReplayResult(path.stem, [rp.run_step(s) for s in load_steps(path)])
    finally:
        rp.client.close()
