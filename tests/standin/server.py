"""HTTP(S) front of the stand-in: routing, auth, body parsing, envelopes, faults, stats.

Emulated express behaviour of the plugin (express 4, default options):

* Routing is case-insensitive and **not strict about a trailing slash**: the plugin
  registers ``/search/``, ``/search/simple/`` and ``/tags/`` with a slash, but express 4's
  non-strict matching (path-to-regexp 0.1: a route ending in ``/`` gets ``/?``) also
  answers ``/search``, ``/search/simple`` and ``/tags``; ``/search/smart/`` reaches the
  extension route likewise. ``/vault`` without any slash is not ``/vault/*`` and is 404.
* Order: CORS, auth (exempt: ``/``, ``/obsidian-local-rest-api.crt``, ``/openapi.yaml``),
  body parsers (a bad JSON body under a JSON content type is 400/40015 on any route),
  built-in routes, extension routes, 404 ``{"message": "Not Found", "errorCode": 40400}``.
* Body parsers: ``text/*`` gives a string; ``application/json``, note+json and
  jsonlogic+json give parsed JSON; any other declared type gives raw bytes; no
  Content-Type gives an empty object.
* Handler exceptions answer 500 from 4.0.3 and **hang** (no answer) before, as upstream;
  e.g. ``POST /search/simple/`` without ``query`` on 3.2, a malformed ``%`` escape in a
  vault path before 4.1.3, or a PUT whose body is neither text nor binary (JSON types).

``PATCH /vault/{path}`` is emulated per version by ``patch`` (the 1.x header format on
3.x/4.x and behind ``Markdown-Patch-Version: 1`` on 5.x, the legacy ``Heading`` header up
to 4.0.0, the 2.0 JSON instruction on 5.x/6.x). ``GET /active/`` answers as ``GET
/vault/{active file}`` plus ``Content-Location``; the active file is set through the
control route below (none by default: 404, or a hang before 3.4.3).

Deliberate differences: what the stand-in does not emulate answers 501 ``{"message":
"Not emulated by the stand-in: ...", "errorCode": 50100}`` rather than pretending: MOVE,
COPY, section targeting via ``Target-Type`` or URL on GET/PUT/POST (and PATCH's 5.x
raw-content mode), PUT/POST/PATCH/DELETE on ``/active/`` and ``/active/heading/...``,
the PATCH cases listed in ``patch`` (table rows, scopes other than ``content``,
``within``, ``destination``, block ids outside top-level paragraphs and one-line list
items, CR line endings), ``/periodic/``, ``/commands/``, ``/open/``, ``/mcp/``,
``/openapi.yaml``, document-map and HTML representations; ``/search/smart`` answers its
503 immediately (the extension polls 5 s for Smart Connections first); Dataview DQL is
not emulated (501).

Control routes (same bearer key, exempt from faults and stats): ``GET|POST
/__standin__/faults``, ``GET|DELETE /__standin__/stats`` and ``GET|POST
/__standin__/active`` (``{"path": "note.md"}`` or ``{"path": null}``). Faults apply to
every other request, authenticated or not, in this order: ``hang_pattern``
(``re.search`` on the path, query string excluded), ``drop_every``, then ``latency_ms``
and ``fail_every`` (500 envelope); the Nth-request counters restart whenever the faults
are set. ``write_yield_ms`` is no fault but the width of the plugin's own race windows:
each ``await`` inside a PUT, POST or PATCH (after the truncating open; between a POST's
or PATCH's read and its write-back) pauses exactly that long instead of a random 0-3 ms
(see ``vault``).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import mimetypes
import posixpath
import re
import select
import ssl
import sys
import threading
import time
import traceback
import urllib.parse
from collections import OrderedDict
from dataclasses import dataclass, field
from email.utils import formatdate
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from . import jsonlogic
from .certs import CERT_NAME, CertificateFiles
from .jsstring import dumps, encode_string, finish, pretty
from .patch import NotEmulated, Patcher, PatchRequest
from .smart import SmartEnv
from .vault import FileEntry, LinkGraph, Snapshot, Vault
from .versions import Features, parse_version

OBSIDIAN_API_VERSION = "1.13.1"
NOTE_JSON = "application/vnd.olrapi.note+json"
JSONLOGIC = "application/vnd.olrapi.jsonlogic+json"
DATAVIEW_DQL = "application/vnd.olrapi.dataview.dql+txt"
SMART_OFF, SMART_UPSTREAM, SMART_FORK = "off", "upstream", "fork"

ERROR_MESSAGES: dict[int, str] = {
    40010: "Incoming content must be text data and have an appropriate text/* Content-type "
    "header set (e.g. text/markdown).",
    40011: "Content-Type header required; this API accepts data in multiple content-types "
    "and you must indicate the content-type of your request body via the Content-Type "
    "header.",
    40012: "Unknown or invalid Content-Type specified in Content-Type header.",
    40015: "Your request body could not be processed as the content-type specified in "
    "your Content-Type header.",
    40021: "Path traversal is not allowed. Paths must be relative and within the vault.",
    40070: "The query you provided could not be processed.",
    40090: "The search query you provided is not valid.",
    40510: "Request method is valid only for file paths, not directories.",
    50100: "Not emulated by the stand-in.",
}

_MIME_OVERRIDES = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".txt": "text/plain",
    ".json": "application/json",
    ".pdf": "application/pdf",
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".svg": "image/svg+xml",
    ".webp": "image/webp",
    ".csv": "text/csv",
    ".html": "text/html",
    ".js": "application/javascript",
    ".css": "text/css",
    ".yaml": "text/yaml",
    ".yml": "text/yaml",
}
_ENCODE_URI_SAFE = ";,/?:@&=+$-_.!~*'()#"
_PCT_MALFORMED = re.compile(r"%(?![0-9A-Fa-f]{2})")


# --- plumbing ----------------------------------------------------------------------


@dataclass
class Response:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


class Hang(Exception):
    """Raised to leave the request unanswered until the client goes away."""


def json_response(
    value: object, status: int = 200, content_type: str = "application/json"
) -> Response:
    return Response(status, dumps(value), {"Content-Type": f"{content_type}; charset=utf-8"})


def envelope(
    error_code: int | None = None, *, status: int | None = None, detail: str | None = None
) -> Response:
    """``returnCannedResponse``: canned message (+ ``"\\n" + detail``), status = code//100."""
    if error_code is not None:
        lines = [ERROR_MESSAGES.get(error_code, HTTPStatus(error_code // 100).phrase)]
        code = error_code
    else:
        assert status is not None
        lines = [HTTPStatus(status).phrase]
        code = status * 100
    if detail:
        lines.append(detail)
    return json_response({"message": "\n".join(lines), "errorCode": code}, code // 100)


def not_emulated(what: str) -> Response:
    return envelope(50100, detail=what)


def decode_uri_component(text: str) -> str:
    """JavaScript ``decodeURIComponent``: raises ValueError on malformed input."""
    if _PCT_MALFORMED.search(text):
        raise ValueError(f"URI malformed: {text}")
    return urllib.parse.unquote(text, errors="strict")


def parse_int_js(text: str | None) -> int | None:
    """JavaScript ``parseInt(text, 10)``; None stands for NaN."""
    m = re.match(r"\s*([+-]?\d+)", text or "")
    return int(m.group(1)) if m else None


def content_type_for(path: str) -> str:
    ext = posixpath.splitext(path)[1].lower()
    mime = _MIME_OVERRIDES.get(ext) or mimetypes.guess_type("x" + ext, strict=False)[0]
    if mime is None:
        return "false"  # what mime-types' lookup() yields, verbatim
    if mime.startswith("text/") or mime in ("application/json", "application/javascript"):
        return f"{mime}; charset=utf-8"
    return mime


def _route_is(path: str, route: str) -> bool:
    """Express 4 non-strict, case-insensitive match of a static route."""
    p, r = path.lower(), route.lower()
    return p in (r, r.rstrip("/"), r + "/") if r != "/" else p in ("", "/")


# --- faults and stats --------------------------------------------------------------


@dataclass
class Faults:
    latency_ms: float | None = None
    fail_every: int | None = None
    hang_pattern: re.Pattern[str] | None = None
    drop_every: int | None = None
    #: 6.x only: Obsidian has not resolved the vault's links yet (``linkIndexReady`` false,
    #: links null). Not a fault, but switched at run time the same way.
    link_index_pending: bool | None = None
    #: Milliseconds each ``await`` of a PUT, POST or PATCH lets other requests run
    #: (default: a random 0-3 ms); a wide one makes the plugin's write races happen
    #: every time.
    write_yield_ms: float | None = None
    #: Requests seen since the faults were last set; ``fail_every``/``drop_every`` count it.
    seen: int = 0

    def describe(self) -> dict[str, Any]:
        return {
            "latency_ms": self.latency_ms,
            "fail_every": self.fail_every,
            "hang_pattern": self.hang_pattern.pattern if self.hang_pattern else None,
            "drop_every": self.drop_every,
            "link_index_pending": self.link_index_pending,
            "write_yield_ms": self.write_yield_ms,
        }

    def update(self, changes: dict[str, Any]) -> None:
        """Apply a control-route body; raises ValueError on a bad field."""
        known = {
            "latency_ms",
            "fail_every",
            "hang_pattern",
            "drop_every",
            "link_index_pending",
            "write_yield_ms",
        }
        unknown = set(changes) - known
        if unknown:
            raise ValueError(f"unknown fault field(s): {sorted(unknown)}")
        for name in ("fail_every", "drop_every"):
            if name in changes:
                value = changes[name]
                if value is not None and (not isinstance(value, int) or value < 1):
                    raise ValueError(f"{name} must be a positive integer or null")
                setattr(self, name, value)
        for name in ("latency_ms", "write_yield_ms"):
            if name in changes:
                value = changes[name]
                if value is not None and (not isinstance(value, int | float) or value < 0):
                    raise ValueError(f"{name} must be a non-negative number or null")
                setattr(self, name, value)
        if "link_index_pending" in changes:
            value = changes["link_index_pending"]
            if value is not None and not isinstance(value, bool):
                raise ValueError("link_index_pending must be a boolean or null")
            self.link_index_pending = value
        if "hang_pattern" in changes:
            value = changes["hang_pattern"]
            if value is not None and not isinstance(value, str):
                raise ValueError("hang_pattern must be a string or null")
            try:
                self.hang_pattern = re.compile(value) if value else None
            except re.error as exc:
                raise ValueError(f"hang_pattern: {exc}") from exc
        self.seen = 0


@dataclass
class Stats:
    total: int = 0
    by_route: dict[str, int] = field(default_factory=dict)
    by_path: dict[str, int] = field(default_factory=dict)
    injected: dict[str, int] = field(
        default_factory=lambda: {"latency": 0, "fail": 0, "hang": 0, "drop": 0}
    )

    def record(self, method: str, path: str) -> None:
        self.total += 1
        lower = path.lower()
        label = next(
            (
                p
                for p in ("/vault/", "/active/", "/periodic/", "/commands/", "/open/", "/mcp")
                if lower.startswith(p)
            ),
            path,
        )
        for table, key in (
            (self.by_route, f"{method} {label}"),
            (self.by_path, f"{method} {path}"),
        ):
            table[key] = table.get(key, 0) + 1

    def describe(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "by_route": self.by_route,
            "by_path": self.by_path,
            "injected": self.injected,
        }


# --- configuration and shared state ----------------------------------------------


@dataclass(frozen=True)
class Config:
    vault: Path
    plugin_version: str
    api_key: str
    smart: str
    certificate: CertificateFiles
    query_vectors: Path | None = None


class State:
    def __init__(self, config: Config, faults: Faults) -> None:
        self.config = config
        self.features = Features.for_version(config.plugin_version)
        self.vault = Vault(config.vault)
        self.smart = SmartEnv(self.vault, config.query_vectors)
        self.faults = faults
        self.stats = Stats()
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        #: The note open in Obsidian's active pane (``app.workspace.getActiveFile()``),
        #: a vault path or None; set through ``POST /__standin__/active``.
        self.active_file: str | None = None


@dataclass
class Body:
    """``req.body`` after the plugin's parsers: kind is text, json, raw, none (no
    Content-Type: an empty object) or invalid (bad JSON, answered 400/40015)."""

    kind: str
    value: Any


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: Any
    body: Body

    def param(self, name: str) -> str | list[str] | None:
        """Express ``req.query[name]``: a string, or a list when repeated."""
        values = self.query.get(name)
        if not values:
            return None
        return values[0] if len(values) == 1 else values


# --- the plugin --------------------------------------------------------------------


class Plugin:
    """Route handlers; each returns a :class:`Response` or raises :class:`Hang`."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.f = state.features
        self.vault = state.vault
        self.patcher = Patcher(self.f.version, state.vault)
        #: Recent JsonLogic and simple-search answers by (kind, snapshot generation, query).
        self._responses: OrderedDict[tuple[Any, ...], Response] = OrderedDict()
        self._responses_lock = threading.Lock()

    def authenticated(self, req: Request) -> bool:
        return req.headers.get("Authorization") == f"Bearer {self.state.config.api_key}"

    def handle(self, req: Request) -> Response:
        if req.path not in ("/", f"/{CERT_NAME}", "/openapi.yaml") and not self.authenticated(req):
            return self.unauthorized()
        if req.body.kind == "invalid":
            return envelope(40015)
        try:
            return self.route(req)
        except Hang:
            raise
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)
            if not self.f.errors_answer_500:
                raise Hang from exc
            return envelope(status=500, detail=str(exc))

    def unauthorized(self) -> Response:
        message = (
            f"Authorization required.  Find your API Key in the '{self.f.auth_section}' "
            "section of your Obsidian settings."
        )
        return json_response({"message": message, "errorCode": 40101}, 401)

    def route(self, req: Request) -> Response:
        m, p = req.method, req.path
        lower = p.lower()
        if m == "GET" and _route_is(p, "/"):
            return self.root(req)
        if m == "GET" and _route_is(p, f"/{CERT_NAME}"):
            return Response(
                200,
                self.state.config.certificate.pem,
                {"Content-Type": f'application/octet-stream; filename="{CERT_NAME}"'},
            )
        if m == "GET" and _route_is(p, "/openapi.yaml"):
            return not_emulated("GET /openapi.yaml")
        if lower.startswith("/vault/"):
            return self.vault_route(req)
        if m == "POST" and _route_is(p, "/search/"):
            return self.search_jsonlogic(req)
        if m == "POST" and _route_is(p, "/search/simple/"):
            return self.search_simple(req)
        if m == "GET" and self.f.tags_route and _route_is(p, "/tags/"):
            return json_response({"tags": self.vault.tag_counts()})
        v = parse_version(self.f.version)
        if self._is_active_route(p):
            return self.active_route(req)
        unemulated = ["/commands/", "/open/"]
        if v < (5, 0, 2):
            unemulated.append("/periodic/")
        if v >= (4, 0, 0):
            unemulated.append("/mcp")
        if any(lower.startswith(prefix) for prefix in unemulated):
            return not_emulated(f"{m} {p}")
        if self.state.config.smart != SMART_OFF and m == "POST":
            if _route_is(p, "/search/smart"):
                return self.search_smart(req)
            if _route_is(p, "/templates/execute"):
                return json_response({"error": "Templater plugin is not available"}, 503)
        return envelope(status=404)

    @property
    def links_pending(self) -> bool:
        """6.x before Obsidian resolved the vault's links: links, backlinks are null."""
        return self.f.v6 and bool(self.state.faults.link_index_pending)

    # --- GET / ----------------------------------------------------------------------

    def root(self, req: Request) -> Response:
        body: dict[str, Any] = {
            "status": "OK",
            "manifest": self.f.manifest(),
            "versions": {"obsidian": OBSIDIAN_API_VERSION, "self": self.f.version},
            "service": "Obsidian Local REST API",
            "authenticated": self.authenticated(req),
        }
        if self.f.v6:
            body["linkIndexReady"] = not self.links_pending
        if body["authenticated"]:
            remaining = self.state.config.certificate.not_after - dt.datetime.now(dt.UTC)
            body["certificateInfo"] = {
                "validityDays": round(remaining.total_seconds() / 86400),
                "regenerateRecommended": False,
            }
            body["apiExtensions"] = self._extensions()
        return json_response(body)

    def _extensions(self) -> list[dict[str, Any]]:
        smart = self.state.config.smart
        if smart == SMART_OFF:
            return []
        if smart == SMART_UPSTREAM:
            manifest: dict[str, Any] = {
                "id": "mcp-tools",
                "name": "MCP Tools",
                "version": "0.2.31",
                "minAppVersion": "0.15.0",
                "description": "Securely connect Claude Desktop to your vault with semantic "
                "search, templates, and file management capabilities.",
                "author": "Jack Steam",
                "authorUrl": "https://github.com/jacksteamdev",
                "fundingUrl": "https://github.com/sponsors/jacksteamdev",
                "isDesktopOnly": True,
            }
        else:
            manifest = {
                "id": "mcp-tools-istefox",
                "name": "MCP Connector",
                "version": "0.3.8",
                "minAppVersion": "0.15.0",
                "description": "Connect MCP-compatible clients to your vault with semantic "
                "search, templates and file management.",
                "author": "Stefano Ferri",
                "authorUrl": "https://github.com/istefox",
                "isDesktopOnly": True,
            }
        if self.f.links:  # 4.0+: manifests carry the extension's routes and MCP tools
            manifest["routes"] = [
                {"path": "/search/smart", "authenticated": True},
                {"path": "/templates/execute", "authenticated": True},
            ]
            manifest["mcpTools"] = []
        return [manifest]

    # --- /vault/* -------------------------------------------------------------------

    def _vault_path(self, req: Request) -> str | Response:
        """The decoded vault path, or an error response (traversal, malformed)."""
        rest = req.path[req.path.index("/", 1) + 1 :]
        try:
            if self.f.v5:
                segments = [decode_uri_component(s) for s in rest.split("/")]
            else:
                segments = decode_uri_component(rest).split("/")
        except ValueError:
            if self.f.traversal_guard:
                return envelope(40021)
            raise  # URIError in the handler: 500 or a hang, by version
        joined = "/".join(segments)
        resolved = posixpath.normpath(posixpath.join("/vault", joined))
        if resolved != "/vault" and not resolved.startswith("/vault/"):
            return envelope(40021) if self.f.traversal_guard else envelope(status=404)
        if self.f.v5 and any("/" in s for s in segments):
            return envelope(status=404)  # a decoded %2F is never a separator on 5.x
        if any(s in (".", "..") for s in segments):
            return envelope(status=404)
        return joined

    def vault_route(self, req: Request) -> Response:
        path = self._vault_path(req)
        if isinstance(path, Response):
            return path
        if req.method == "PATCH":
            return self.vault_patch(req, path)
        if "Target-Type" in req.headers or "Target" in req.headers:
            return not_emulated("Target-Type/Target section targeting")
        m = req.method
        if m == "GET":
            return self.vault_get(req, path)
        if m in ("PUT", "POST", "DELETE") and (path == "" or path.endswith("/")):
            return envelope(40510)
        if m == "PUT":
            return self.vault_put(req, path)
        if m == "POST":
            if req.body.kind != "text":
                return envelope(40010)
            self.vault.append(path, req.body.value, yield_ms=self.state.faults.write_yield_ms)
            return Response(204)
        if m == "DELETE":
            permanent = req.param("permanent") == "true"
            if not self.vault.delete(path, to_trash=self.f.v5 and not permanent):
                return envelope(status=404)
            return Response(204)
        v = parse_version(self.f.version)
        if (m == "MOVE" and v >= (4, 1, 0)) or (m == "COPY" and self.f.v5):
            return not_emulated(f"{m} /vault/")
        return envelope(status=404)

    def vault_get(self, req: Request, path: str) -> Response:
        if not self.f.slash_optional_listing:
            if path == "" or path.endswith("/"):
                return self._listing(path.rstrip("/"))
            entry = self.vault.stat(path)
            return self._serve_file(req, entry) if entry else envelope(status=404)
        folder = path[:-1] if path.endswith("/") else path
        entry = self.vault.stat(folder) if folder else None
        if entry is not None:
            return self._serve_file(req, entry)
        if folder == "" or self.vault.has_folder(folder):
            return self._listing(folder)
        segments = folder.split("/")
        for i in range(1, len(segments) - 1):
            if segments[i] in ("heading", "block", "frontmatter") and self.vault.stat(
                "/".join(segments[:i])
            ):
                return not_emulated("URL section targeting")
        return envelope(status=404)

    def _listing(self, folder: str) -> Response:
        files = self.vault.list_dir(folder)
        if not files and (folder or not self.f.empty_root_listing):
            return envelope(status=404)
        return json_response({"files": files})

    def _serve_file(self, req: Request, entry: FileEntry) -> Response:
        accept = req.headers.get("Accept")
        if accept == "application/vnd.olrapi.document-map+json" and (
            parse_version(self.f.version) >= (3, 4, 0)
        ):
            return not_emulated("document-map representation")
        if accept == "text/html" and self.f.v5:
            return not_emulated("text/html representation")
        quoted = urllib.parse.quote(entry.path, safe=_ENCODE_URI_SAFE).replace(",", "%2C", 1)
        disposition = {"Content-Disposition": f'attachment; filename="{quoted}"'}
        if accept == NOTE_JSON:
            graph = self.vault.link_graph() if self.f.links else None
            note = self.vault.note_json(
                entry,
                graph=graph,
                unresolved=self.f.v5,
                content=None,
                links_pending=self.links_pending,
            )
            response = json_response(note, content_type=NOTE_JSON)
            response.headers.update(disposition)
            return response
        data = self.vault.read_bytes(entry.path)
        if data is None:
            return envelope(status=404)
        return Response(200, data, {"Content-Type": content_type_for(entry.path), **disposition})

    def vault_put(self, req: Request, path: str) -> Response:
        if req.body.kind == "text":
            data = str(req.body.value).encode("utf-8")
        elif req.body.kind == "raw":
            data = req.body.value
        else:
            raise TypeError("The request body is neither text nor binary data")
        self.vault.write(path, data, yield_ms=self.state.faults.write_yield_ms)
        return Response(204)

    # --- PATCH (see ``patch``) -----------------------------------------------------------

    def vault_patch(self, req: Request, path: str) -> Response:
        """``vaultPatch``: on 5.x a path that is an existing file followed by
        ``heading``/``block``/``frontmatter`` segments is URL targeting (raw-content
        mode, not emulated); such a keyword with no file before it is 404 (LRA 5.1
        ``vaultPatch`` ~L1098). 3.x and 4.x take the whole path as the file name."""
        url_target = url_keyword = False
        if self.f.v5 and path and self.vault.stat(path.rstrip("/")) is None:
            segments = path.rstrip("/").split("/")
            for i in range(len(segments) - 1, 0, -1):
                if segments[i] in ("heading", "block", "frontmatter") and self.vault.stat(
                    "/".join(segments[:i])
                ):
                    url_target = True
                    break
            else:
                url_keyword = any(s in ("heading", "block", "frontmatter") for s in segments)
        patch_request = PatchRequest(
            path=path,
            headers=req.headers,
            body_kind=req.body.kind,
            body=req.body.value,
            url_target=url_target,
            url_keyword=url_keyword,
        )
        try:
            reply = self.patcher.handle(patch_request, self.state.faults.write_yield_ms)
        except NotEmulated as exc:
            return not_emulated(f"PATCH: {exc}")
        return Response(reply.status, reply.body, reply.headers)

    # --- /active/ ----------------------------------------------------------------------

    def _is_active_route(self, path: str) -> bool:
        """``/active/`` until 3.6.0 (express non-strict: ``/active`` too), then
        ``/active/*`` (which needs the slash)."""
        lower = path.lower()
        if self.f.slash_optional_listing:
            return lower.startswith("/active/")
        return lower in ("/active", "/active/")

    def active_route(self, req: Request) -> Response:
        """``activeFileGet`` (LRA ``requestHandler.ts``): ``Content-Location:
        encodeURI(file.path)`` and then the ``/vault/`` answer for that path. No active
        file: 404 from 3.4.3 (``7274276``); before, ``file.path`` on null throws in the
        async handler and the request hangs."""
        if req.method != "GET":
            return not_emulated(f"{req.method} /active/")
        suffix = req.path[len("/active/") :] if len(req.path) > len("/active/") else ""
        if suffix:
            return not_emulated("URL section targeting on /active/")
        if "Target-Type" in req.headers or "Target" in req.headers:
            return not_emulated("Target-Type/Target section targeting")
        with self.state.lock:
            active = self.state.active_file
        if active is not None and self.vault.stat(active) is None:
            active = None  # a deleted note is no longer open
        if active is None:
            if parse_version(self.f.version) >= (3, 4, 3):
                return envelope(status=404)
            raise TypeError("Cannot read properties of null (reading 'path')")
        response = self.vault_get(req, active)
        response.headers["Content-Location"] = urllib.parse.quote(active, safe=_ENCODE_URI_SAFE)
        return response

    # --- search -----------------------------------------------------------------------

    def search_simple(self, req: Request) -> Response:
        query = req.param("query")
        if not isinstance(query, str):
            if self.f.search_fixes:
                return envelope(40090, detail="A single '?query=' parameter is required.")
            raise TypeError("Cannot read properties of undefined (reading 'toLowerCase')")
        raw_length = req.param("contextLength")
        length = parse_int_js(raw_length if isinstance(raw_length, str) else None)
        if length is None and self.f.search_fixes:
            length = 100
        snap = self.vault.snapshot()
        key = ("simple", snap.generation, query, length)
        cached = self._recall(key)
        if cached is not None:
            return cached
        results = self.vault.simple_search(
            query, length, with_filename=self.f.search_fixes, snapshot=snap
        )
        results.sort(key=lambda r: r["score"], reverse=self.f.links)
        return self._remember(key, json_response(results))

    def search_jsonlogic(self, req: Request) -> Response:
        content_type = req.headers.get("Content-Type")
        if content_type is None:
            return envelope(40011)
        if content_type == DATAVIEW_DQL and not self.f.links:
            return not_emulated("Dataview DQL search")
        if content_type != JSONLOGIC:
            return envelope(40012 if self.f.search_fixes else 40011)
        logic = req.body.value
        logic_text = json.dumps(logic)
        lazy_content = self.f.errors_answer_500 and '"content"' not in logic_text
        snap = self.vault.snapshot()
        pending = self.links_pending
        key = ("jsonlogic", snap.generation, logic_text, pending)
        cached = self._recall(key)
        if cached is not None:
            return cached
        graph = self.vault.link_graph(snap) if self.f.links else None
        var = logic.get("var") if isinstance(logic, dict) and len(logic) == 1 else None
        if isinstance(var, str) and var and "." not in var:
            return self._remember(key, self._search_var(snap, graph, var, lazy_content, pending))
        results: list[dict[str, Any]] = []
        for entry in snap.files.values():
            if not entry.is_markdown:
                continue
            note = self.vault.note_record(
                entry,
                graph=graph,
                unresolved=self.f.v5,
                content=not lazy_content,
                links_pending=pending,
            ).note
            try:
                value = jsonlogic.apply(logic, note)
            except Exception as exc:
                return self._remember(
                    key, envelope(40070, detail=f"{exc} (while processing {entry.path})")
                )
            if _sane_truthy(value):
                results.append({"filename": entry.path, "result": value})
        return self._remember(key, json_response(results))

    def _search_var(
        self,
        snap: Snapshot,
        graph: LinkGraph | None,
        var: str,
        lazy_content: bool,
        links_pending: bool,
    ) -> Response:
        """``{"var": "<top-level key>"}`` (e.g. ``stat``): the generic answer, spliced from
        per-note encoded items cached with each note."""
        items: list[str] = []
        for entry in snap.files.values():
            if not entry.is_markdown:
                continue
            record = self.vault.note_record(
                entry,
                graph=graph,
                unresolved=self.f.v5,
                content=not lazy_content,
                links_pending=links_pending,
            )
            cached = record.fragments.get(var)
            if cached is None:
                value = record.note.get(var)
                cached = (
                    _sane_truthy(value),
                    '{\n    "filename": '
                    + encode_string(entry.path)
                    + ',\n    "result": '
                    + pretty(value).replace("\n", "\n    ")
                    + "\n  }",
                )
                record.fragments[var] = cached
            if cached[0]:
                items.append(cached[1])
        text = "[\n  " + ",\n  ".join(items) + "\n]" if items else "[]"
        return Response(200, finish(text), {"Content-Type": "application/json; charset=utf-8"})

    def _recall(self, key: tuple[Any, ...]) -> Response | None:
        with self._responses_lock:
            hit = self._responses.get(key)
            if hit is None:
                return None
            self._responses.move_to_end(key)
        return Response(hit.status, hit.body, dict(hit.headers))

    def _remember(self, key: tuple[Any, ...], response: Response) -> Response:
        """Keep a deterministic answer for the snapshot generation in ``key``."""
        with self._responses_lock:
            self._responses[key] = Response(response.status, response.body, dict(response.headers))
            while len(self._responses) > 8:
                self._responses.popitem(last=False)
        return response

    def search_smart(self, req: Request) -> Response:
        if not self.state.smart.available:
            return json_response({"error": "Smart Connections plugin is not available"}, 503)
        parsed = self._smart_body(req.body)
        if isinstance(parsed, str):
            return json_response({"error": "Invalid request body", "summary": parsed}, 400)
        flt = parsed.get("filter") or {}
        try:
            results = self.state.smart.search(
                parsed["query"], flt.get("folders"), flt.get("excludeFolders"), flt.get("limit")
            )
        except Exception:
            traceback.print_exc(file=sys.stderr)
            return json_response(
                {"error": "An error occurred while processing the search request"}, 503
            )
        return json_response({"results": results})

    def _smart_body(self, body: Body) -> dict[str, Any] | str:
        """The validated search request, or an arktype-like error summary."""
        if body.kind == "text":
            try:
                value = json.loads(body.value)
            except ValueError as exc:
                return f"must be a JSON string (was {exc})"
        elif self.state.config.smart == SMART_FORK and body.kind == "json":
            value = body.value
        else:
            shown = body.value if body.kind == "json" else {}
            return f"must be a string (was {_js_type(shown)})"
        if not isinstance(value, dict):
            return f"must be an object (was {_js_type(value)})"
        query = value.get("query")
        if not isinstance(query, str):
            return f"query must be a string (was {_js_type(query, 'missing')})"
        if not query:
            return 'query must be non-empty (was "")'
        flt = value.get("filter")
        if flt is None and "filter" not in value:
            return value
        if not isinstance(flt, dict):
            return f"filter must be an object (was {_js_type(flt)})"
        for key in ("folders", "excludeFolders"):
            items = flt.get(key)
            if key in flt and not (
                isinstance(items, list) and all(isinstance(i, str) for i in items)
            ):
                return f"filter.{key} must be an array of strings (was {_js_type(items)})"
        if "limit" in flt:
            limit = flt["limit"]
            if not isinstance(limit, int | float) or isinstance(limit, bool):
                return f"filter.limit must be a number (was {_js_type(limit)})"
            if not limit > 0 or math.isnan(limit):
                return f"filter.limit must be more than 0 (was {limit})"
        return value


def _js_type(value: Any, missing: str = "undefined") -> str:
    if value is None:
        return missing if missing != "undefined" else "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "an array" if isinstance(value, list) else "an object"


def _sane_truthy(value: Any) -> bool:
    """The plugin's result filter: null, false, 0, "", [] and {} are dropped."""
    if value is None:
        return False
    if isinstance(value, list | dict):
        return len(value) > 0
    return bool(value) and not (isinstance(value, float) and math.isnan(value))


# --- the HTTP server ---------------------------------------------------------------


class StandinServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, state: State, host: str, port: int, tls: ssl.SSLContext | None) -> None:
        self.state = state
        self.plugin = Plugin(state)
        self.tls = tls
        super().__init__((host, port), Handler)

    def get_request(self) -> tuple[Any, Any]:
        sock, addr = super().get_request()
        if self.tls is None:
            return sock, addr
        # The handshake runs in the handler thread (finish_request), not the accept loop.
        return self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def finish_request(self, request: Any, client_address: Any) -> None:
        if isinstance(request, ssl.SSLSocket):
            try:
                request.settimeout(10)
                request.do_handshake()
                request.settimeout(None)
            except OSError:
                return
        super().finish_request(request, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes; without TCP_NODELAY, Nagle's algorithm and
    # the client's delayed ACK add ~40 ms to every response, which Node's server never does.
    disable_nagle_algorithm = True
    server: StandinServer

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"standin {self.address_string()} {format % args}\n")

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _parse_body(self, raw: bytes) -> Body:
        content_type = self.headers.get("Content-Type")
        if content_type is None:
            return Body("none", {})
        media = content_type.split(";", 1)[0].strip().lower()
        json_types = {"application/json", NOTE_JSON, JSONLOGIC}
        if self.server.state.features.v5:
            json_types.add("application/vnd.olrapi.patch-instruction+json")
        if media in json_types:
            if not raw:
                return Body("json", {})
            try:
                return Body("json", json.loads(raw.decode("utf-8")))
            except ValueError:
                return Body("invalid", None)
        if media.startswith("text/"):
            # express.text() (LRA `setupRouter`, `express.text({type: "text/*"})`) decodes
            # with body-parser's read.js, `iconv.decode(body, encoding)`; iconv-lite's utf8
            # codec is `bomAware`, so a leading byte-order mark is stripped, and bytes that
            # are not UTF-8 become U+FFFD.
            text = raw.decode("utf-8", errors="replace")
            return Body("text", text.removeprefix("\ufeff"))
        return Body("raw", raw)

    def _dispatch(self) -> None:
        started = time.perf_counter()
        state = self.server.state
        path, _, query_string = self.path.partition("?")
        raw = self._read_body()
        req = Request(
            method="GET" if self.command == "HEAD" else self.command,
            path=path,
            query=urllib.parse.parse_qs(query_string, keep_blank_values=True),
            headers=self.headers,
            body=self._parse_body(raw),
        )
        if path.startswith("/__standin__/"):
            self._send(self._control(req), started)
            return
        with state.lock:
            state.stats.record(req.method, path)
            faults = state.faults
            faults.seen += 1
            n = faults.seen
            hang = bool(faults.hang_pattern and faults.hang_pattern.search(path))
            drop = not hang and bool(faults.drop_every and n % faults.drop_every == 0)
            fail = not (hang or drop) and bool(faults.fail_every and n % faults.fail_every == 0)
            latency = faults.latency_ms
            for name, flag in (
                ("hang", hang),
                ("drop", drop),
                ("fail", fail),
                ("latency", bool(latency) and not (hang or drop)),
            ):
                state.stats.injected[name] += flag
        if hang:
            self._hang()
            return
        if drop:
            self.close_connection = True
            return
        if latency:
            time.sleep(latency / 1000)
        if fail:
            self._send(
                envelope(status=500, detail="Injected by the stand-in (fail_every)"), started
            )
            return
        if self.command == "OPTIONS":
            self._send(self._preflight(), started)
            return
        try:
            response = self.server.plugin.handle(req)
        except Hang:
            self._hang()
            return
        self._send(response, started)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _dispatch
    do_OPTIONS = do_MOVE = do_COPY = _dispatch

    def _preflight(self) -> Response:
        requested = self.headers.get("Access-Control-Request-Headers")
        headers = {"Access-Control-Allow-Methods": "GET,HEAD,PUT,PATCH,POST,DELETE,MOVE,COPY"}
        if requested:
            headers["Access-Control-Allow-Headers"] = requested
        return Response(204, b"", headers)

    def _control(self, req: Request) -> Response:
        state = self.server.state
        if not self.server.plugin.authenticated(req):
            return self.server.plugin.unauthorized()
        if req.path == "/__standin__/faults" and req.method in ("GET", "POST"):
            if req.method == "POST":
                if req.body.kind != "json" or not isinstance(req.body.value, dict):
                    return json_response({"error": "expected a JSON object"}, 400)
                with state.lock:
                    try:
                        state.faults.update(req.body.value)
                    except ValueError as exc:
                        return json_response({"error": str(exc)}, 400)
            with state.lock:
                return json_response(state.faults.describe())
        if req.path == "/__standin__/active" and req.method in ("GET", "POST"):
            if req.method == "POST":
                body = req.body.value
                if req.body.kind != "json" or not isinstance(body, dict) or set(body) != {"path"}:
                    return json_response({"error": 'expected {"path": string or null}'}, 400)
                if body["path"] is not None and not isinstance(body["path"], str):
                    return json_response({"error": "path must be a string or null"}, 400)
                with state.lock:
                    state.active_file = body["path"]
            with state.lock:
                return json_response({"path": state.active_file})
        if req.path == "/__standin__/stats" and req.method in ("GET", "DELETE"):
            with state.lock:
                if req.method == "DELETE":
                    state.stats = Stats()
                return json_response(state.stats.describe())
        return json_response({"error": "unknown control route"}, 404)

    def _send(self, response: Response, started: float) -> None:
        elapsed = (time.perf_counter() - started) * 1000
        self.log_request(response.status)
        self.send_response_only(response.status)
        self.send_header("Date", formatdate(usegmt=True))
        self.send_header("X-Powered-By", "Express")
        self.send_header("Access-Control-Allow-Origin", "*")
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.send_header("X-Response-Time", f"{elapsed:.3f}ms")
        if response.status not in (204, 304):
            self.send_header("Content-Length", str(len(response.body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and response.status not in (204, 304):
            self.wfile.write(response.body)
        self.wfile.flush()

    def _hang(self) -> None:
        """Answer nothing; return once the client disconnects or the server stops."""
        stopping = self.server.state.stopping
        conn = self.connection
        conn.settimeout(0.2)
        while not stopping.is_set():
            readable, _, _ = select.select([conn], [], [], 0.2)
            if not readable:
                continue
            try:
                if not conn.recv(4096):
                    break
            except (TimeoutError, ssl.SSLWantReadError):
                continue
            except OSError:
                break
        self.close_connection = True
