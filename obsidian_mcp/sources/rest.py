"""Obsidian's Local REST API plugin, versions 3.x to 6.x.

The contract moved between versions (see shared/reference/local-rest-api.md); the client
reads `versions.self` from `GET /` once and branches only where it must. Requests that are
safe to repeat are retried on transport errors, 429 and 5xx with jittered backoff, bounded
in total time; appends are never retried blindly, because a POST that timed out may have
landed already.
"""

import hashlib
import json
import logging
import ssl
from collections.abc import Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal, cast
from urllib.parse import quote

import anyio
import httpx
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    retry_never,
    wait_exponential_jitter,
)
from tenacity.stop import stop_base

from obsidian_mcp.config import Settings, api_key_problem, is_loopback
from obsidian_mcp.errors import (
    AuthRejected,
    CertificatePinMismatch,
    CertificateUntrusted,
    CertificateUnusable,
    IsAFolder,
    NoteNotFound,
    NotText,
    ObsidianConnectionLost,
    ObsidianTimeout,
    ObsidianUnreachable,
    RestSettingsRefused,
    UpstreamError,
    VaultError,
)
from obsidian_mcp.paths import is_markdown
from obsidian_mcp.sources.base import FileBytes, FileStat, NoteData, TextMatch, TextSearchHit
from obsidian_mcp.sources.folder import decode_text, looks_binary
from obsidian_mcp.sources.handshake import handshake_safe_transport
from obsidian_mcp.sources.swap import NoteChanged, decode_exact
from obsidian_mcp.sources.tls import (
    configured_pin,
    pin_mismatch_in,
    pinned_context,
    unverified_tls_refusal,
)

logger = logging.getLogger(__name__)

# `GET /active/` with no note open answers 404 from 3.4.3 (LRA 7274276); before, it hangs.
_ACTIVE_ANSWERS_WHEN_NONE_OPEN = (3, 4, 3)


class UnknownActiveNote(VaultError):
    def __init__(self, url: str) -> None:
        super().__init__(f"The plugin at {url} cannot say which note is open (before 3.4.3).")


NOTE_JSON = "application/vnd.olrapi.note+json"
JSONLOGIC = "application/vnd.olrapi.jsonlogic+json"
SMART_SEARCH_ROUTE = "/search/smart"


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What `GET /` says about the running plugin."""

    version: tuple[int, ...]
    version_text: str
    authenticated: bool
    extension_routes: frozenset[str]
    extension_ids: frozenset[str]
    # 6.0+: whether Obsidian has resolved the vault's links; None before 6.0 (always known).
    link_index_ready: bool | None = None

    @property
    def has_smart_search(self) -> bool:
        # 3.x lists extension manifests without routes; the plugin id is the only clue there.
        return SMART_SEARCH_ROUTE in self.extension_routes or "mcp-tools" in self.extension_ids


def parse_version(text: str) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in text.split("."):
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def encode_path(path: str) -> str:
    """Percent-encode each segment: 5.x decodes per segment, so `%2F` is never a separator."""
    return "/".join(quote(segment, safe="") for segment in path.split("/"))


# The extension's 503s mean Smart Connections is not loaded, or failed on this query (after
# polling 5 s for it): asking again only repeats the wait (1.5 s of retries per query on
# the stand-in, seen in python -m bench.speed.index).
_SMART_SEARCH_FINAL = frozenset({503})


class RetryableStatus(Exception):
    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        super().__init__(f"HTTP {response.status_code}")


def _is_transient(exc: BaseException) -> bool:
    # A read timeout is not retried: a plugin that hung once (3.x handler exceptions never
    # answer) hangs again, and a retry would only double the agent's wait.
    if isinstance(exc, httpx.ReadTimeout):
        return False
    # A certificate refused (untrusted, or not the pinned one) is refused again: retrying
    # spent the whole retry budget before the agent heard what to do (11 s a call in
    # test_several_vaults' refused pins).
    if _is_certificate_failure(exc) or pin_mismatch_in(exc) is not None:
        return False
    return isinstance(exc, httpx.TransportError | RetryableStatus)


def _is_dropped(exc: BaseException | None) -> bool:
    """A connection that broke after it was made and before an answer: the server, or a
    NAT or proxy on the way (Docker, WSL), closed or reset it. It fails in milliseconds."""
    return isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | httpx.WriteError)


# Waits before another attempt: a server that failed (5xx, 429, refused) gets time; a
# dropped connection is tried again at once on a new one, waits growing to half a second.
# 30 vault_read_note calls with the stand-in dropping every third request took 8.5-12.6 s
# with the first alone (jitter up to 1 s per retry), 3.8-6.6 s with both (python -m
# bench.retrieval.several_vaults --part drops, three and two runs on the shared 2-core machine).
_FAILURE_BACKOFF = wait_exponential_jitter(multiplier=0.1, max=2.0)
_DROP_BACKOFF = wait_exponential_jitter(multiplier=0.05, jitter=0.05, max=0.5)


def _outcome_dropped(retry_state: RetryCallState) -> bool:
    outcome = retry_state.outcome
    return _is_dropped(outcome.exception() if outcome is not None else None)


def _backoff(retry_state: RetryCallState) -> float:
    backoff = _DROP_BACKOFF if _outcome_dropped(retry_state) else _FAILURE_BACKOFF
    return backoff(retry_state)


class _RetryStop(stop_base):
    """When to give up: after `attempts` failures, a dropped connection not counted, or
    when the next attempt would start after `budget` seconds. A dropped connection is
    retried while a new connection (`connect` seconds) still fits in the budget after the
    wait, so that the last attempt's failure, not the budget's end, is what is reported.
    Counting drops, three attempts were not enough: with the stand-in dropping every third
    request and the index read running beside the agent's calls, all three attempts of one
    read were dropped (issue 28)."""

    def __init__(self, attempts: int, budget: float, connect: float) -> None:
        self._attempts = attempts
        self._counted = 0
        self._budget = budget
        self._connect = connect

    def __call__(self, retry_state: RetryCallState) -> bool:
        elapsed: float = retry_state.seconds_since_start or 0.0
        starts_at = elapsed + float(retry_state.upcoming_sleep)
        if _outcome_dropped(retry_state):
            return starts_at + self._connect >= self._budget
        self._counted += 1
        return self._counted >= self._attempts or starts_at >= self._budget


def _is_certificate_failure(exc: BaseException) -> bool:
    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, ssl.SSLCertVerificationError):
            return True
        if "CERTIFICATE_VERIFY_FAILED" in str(current):
            return True
        current = current.__cause__ or current.__context__
    return False


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:200] or response.reason_phrase
    if isinstance(body, dict):
        envelope = cast(dict[str, object], body)
        return str(envelope.get("message") or envelope.get("error") or envelope)[:300]
    return str(cast(object, body))[:300]


def _is_folder_listing(response: httpx.Response) -> bool:
    if not response.headers.get("content-type", "").startswith("application/json"):
        return False
    try:
        body = response.json()
    except ValueError:
        return False
    return isinstance(body, dict) and set(cast(dict[str, object], body)) == {"files"}


def tls_verification(settings: Settings) -> ssl.SSLContext | bool:
    """What the REST client verifies against: the certificate pinned for the address (by
    `cert_sha256`, else by `trust --url`), else the plugin's own stored certificate, else
    the system's authorities; nothing only for a REST API on this machine with nothing
    pinned (`unverified_tls_refusal` refuses every other case)."""
    if not settings.uses_https:
        if settings.api_key is not None and not is_loopback(settings.rest_host):
            logger.warning(
                "The Local REST API at %s is reached over plain HTTP: the API key and every "
                "note cross the network unencrypted. Use its HTTPS port (27124) and pin its "
                "certificate: `obsidian-mcp trust --url https://%s:27124`.",
                settings.base_url,
                settings.rest_host,
            )
        return True
    refusal = unverified_tls_refusal(settings)
    if refusal is not None:
        raise RestSettingsRefused(refusal)
    if not settings.verify_tls:
        logger.warning(
            "TLS verification of the Local REST API at %s is OFF (OBSIDIAN_VERIFY_TLS=false; "
            "accepted on this machine only); only this server's REST client is affected.",
            settings.base_url,
        )
        return False
    pin = configured_pin(settings)
    if pin is not None:
        return pinned_context(pin)
    cert = settings.trusted_cert()
    if cert is None:
        return True
    try:
        return ssl.create_default_context(cafile=str(cert))
    except (OSError, ssl.SSLError) as exc:
        # A missing file, or one without a PEM certificate in it.
        raise CertificateUnusable(str(cert), exc.strerror or str(exc)) from exc


def build_http_client(
    settings: Settings,
    *,
    transport: httpx.AsyncBaseTransport | None = None,
    unverified: bool = False,
) -> httpx.AsyncClient:
    """The REST client. `unverified`: a client that checks no certificate and so carries
    no key, for what needs none (`trust` downloads the certificate it is about to show).
    Settings that would send the key where it does not belong raise RestSettingsRefused
    before any request."""
    headers: dict[str, str] = {}
    if settings.api_key is not None and not unverified:
        problem = api_key_problem(settings.api_key)
        if problem is not None:
            raise RestSettingsRefused(f"The Local REST API key {problem}.")
        headers["Authorization"] = f"Bearer {settings.api_key.get_secret_value()}"
    verification = False if unverified else tls_verification(settings)
    return httpx.AsyncClient(
        base_url=settings.base_url,
        headers=headers,
        verify=verification,
        timeout=httpx.Timeout(settings.request_timeout, connect=settings.connect_timeout),
        transport=transport or handshake_safe_transport(verification),
    )


class RestSource:
    def __init__(self, http: httpx.AsyncClient, settings: Settings) -> None:
        self._http = http
        self._settings = settings
        self._info: ServerInfo | None = None

    @property
    def kind(self) -> Literal["rest"]:
        return "rest"

    @property
    def url(self) -> str:
        return self._settings.base_url

    def describe(self) -> str:
        version = self._info.version_text if self._info else "version not yet read"
        return f"Local REST API at {self.url} (plugin {version})"

    # -- transport -------------------------------------------------------------------------

    async def _send(
        self,
        method: str,
        url: str,
        *,
        idempotent: bool,
        headers: Mapping[str, str] | None = None,
        content: str | bytes | None = None,
        params: Mapping[str, str | int] | None = None,
        final_statuses: frozenset[int] = frozenset(),
    ) -> httpx.Response:
        """One request with the retry policy; transport failures become VaultErrors.
        `final_statuses`: server errors this route means for good, never retried."""
        settings = self._settings

        async def attempt_once() -> httpx.Response:
            response = await self._http.request(
                method, url, headers=headers, content=content, params=params
            )
            status = response.status_code
            if idempotent and (status == 429 or status >= 500) and status not in final_statuses:
                raise RetryableStatus(response)
            return response

        try:
            with anyio.fail_after(settings.retry_budget):
                async for attempt in AsyncRetrying(
                    retry=retry_if_exception(_is_transient) if idempotent else retry_never,
                    stop=_RetryStop(
                        settings.retry_attempts, settings.retry_budget, settings.connect_timeout
                    ),
                    wait=_backoff,
                    reraise=True,
                ):
                    with attempt:
                        return await attempt_once()
        except RetryableStatus as exc:
            return exc.response
        except TimeoutError:
            raise ObsidianTimeout(self.url, settings.retry_budget) from None
        except httpx.TimeoutException:
            raise ObsidianTimeout(self.url, settings.request_timeout) from None
        except httpx.TransportError as exc:
            mismatch = pin_mismatch_in(exc)
            if mismatch is not None:
                fix = self._repin(mismatch.seen)
                raise CertificatePinMismatch(self.url, mismatch.seen, fix) from None
            if _is_certificate_failure(exc):
                raise CertificateUntrusted(self.url) from None
            detail = type(exc).__name__ + (f": {exc}" if str(exc) else "")
            if isinstance(exc, httpx.ConnectError):
                raise ObsidianUnreachable(self.url, detail) from None
            raise ObsidianConnectionLost(self.url, detail) from None
        raise AssertionError("tenacity ends with a return or a raise")

    def _repin(self, seen: str) -> str:
        """How to trust the certificate seen instead, where the pin came from."""
        # A running server keeps the pin it started with (issue 35, item 14).
        restart = ", then restart the server (your MCP client starts it)"
        if self._settings.cert_sha256 is not None:
            return (
                f"set OBSIDIAN_CERT_SHA256 to {seen} after checking it in Obsidian, or "
                f"remove it and run `obsidian-mcp trust --url {self.url}`{restart}"
            )
        return f"run `obsidian-mcp trust --url {self.url}` to pin the new one{restart}"

    def _check(self, response: httpx.Response, path: str = "") -> httpx.Response:
        status = response.status_code
        if status < 400:
            return response
        if status == 401:
            raise AuthRejected()
        if status == 404 and path:
            raise NoteNotFound(path)
        if status == 405 and path:
            raise IsAFolder(path)
        raise UpstreamError(self.url, status, _error_message(response))

    async def _json(self, response: httpx.Response) -> Any:
        try:
            return response.json()
        except ValueError as exc:
            raise UpstreamError(self.url, response.status_code, f"not JSON: {exc}") from None

    async def answers_within(self, seconds: float) -> bool:
        """Whether Obsidian answers `GET /` within `seconds`, without retries: the cheap
        check that an outage is over."""
        try:
            # httpx's own timeout, not a cancellation: a request cancelled while it
            # connects leaves its socket open (anyio's connect tasks), one per probe.
            response = await self._http.get("/", timeout=seconds)
        except httpx.HTTPError:
            return False
        return response.status_code < 500

    # -- server info -----------------------------------------------------------------------

    async def server_info(self, *, refresh: bool = False) -> ServerInfo:
        if self._info is not None and not refresh:
            return self._info
        response = self._check(await self._send("GET", "/", idempotent=True))
        body = cast(dict[str, Any], await self._json(response))
        extensions = cast(list[dict[str, Any]], body.get("apiExtensions") or [])
        routes = {
            str(route.get("path", ""))
            for ext in extensions
            for route in cast(list[dict[str, Any]], ext.get("routes") or [])
        }
        version_text = str(cast(dict[str, Any], body.get("versions") or {}).get("self", "0"))
        self._info = ServerInfo(
            version=parse_version(version_text),
            version_text=version_text,
            authenticated=bool(body.get("authenticated")),
            extension_routes=frozenset(routes),
            extension_ids=frozenset(str(ext.get("id", "")) for ext in extensions),
            link_index_ready=(bool(body["linkIndexReady"]) if "linkIndexReady" in body else None),
        )
        return self._info

    async def fetch_certificate(self) -> str:
        """The plugin's certificate as PEM (needs no auth)."""
        response = self._check(
            await self._send("GET", "/obsidian-local-rest-api.crt", idempotent=True)
        )
        return response.text

    # -- listing ---------------------------------------------------------------------------

    async def _list_folder(self, folder: str) -> list[str]:
        # A trailing slash lists on every version; 3.x treats a path without it as a file.
        url = "/vault/" + (encode_path(folder) + "/" if folder else "")
        response = await self._send("GET", url, idempotent=True)
        if response.status_code == 404:
            return []
        body = cast(dict[str, Any], await self._json(self._check(response)))
        return [str(entry) for entry in cast(list[object], body.get("files") or [])]

    async def list_folder(self, folder: str) -> list[str]:
        """The names directly in `folder` (subfolders end with '/'); [] if it is missing."""
        return await self._list_folder(folder)

    async def list_tree(self) -> list[str]:
        entries: list[str] = []
        pending = [""]
        limiter = anyio.CapacityLimiter(8)

        async def visit(folder: str, found: list[str]) -> None:
            async with limiter:
                children = await self._list_folder(folder)
            prefix = folder + "/" if folder else ""
            found.extend(prefix + child for child in children)

        while pending:
            found: list[str] = []
            try:
                async with anyio.create_task_group() as group:
                    for folder in pending:
                        group.start_soon(visit, folder, found)
            except ExceptionGroup as failures:
                # One failed listing explains them all (Obsidian closed, key rejected).
                raise failures.exceptions[0] from None
            entries.extend(found)
            pending = [entry.rstrip("/") for entry in found if entry.endswith("/")]
        return sorted(entries)

    async def note_stats(self) -> dict[str, FileStat]:
        # One JsonLogic request returns every note's stat; no per-note round trips.
        response = await self._send(
            "POST",
            "/search/",
            idempotent=True,
            headers={"Content-Type": JSONLOGIC},
            content=json.dumps({"var": "stat"}),
        )
        rows = cast(list[dict[str, Any]], await self._json(self._check(response)))
        stats: dict[str, FileStat] = {}
        for row in rows:
            path = str(row["filename"])
            stat = cast(dict[str, Any], row.get("result") or {})
            stats[path] = FileStat(path, int(stat.get("mtime", 0)), int(stat.get("size", 0)))
        return stats

    # -- reading ---------------------------------------------------------------------------

    async def _raise_missing(self, path: str) -> None:
        """A 404 on a file path may be a folder (3.x answers 404 without the slash)."""
        if await self._list_folder(path):
            raise IsAFolder(path)
        raise NoteNotFound(path)

    async def read_bytes(self, path: str) -> FileBytes:
        response = await self._send("GET", "/vault/" + encode_path(path), idempotent=True)
        if response.status_code == 404:
            await self._raise_missing(path)
        data = self._check(response, path).content
        if _is_folder_listing(response):
            raise IsAFolder(path)  # 5.x lists a folder even without the trailing slash
        return FileBytes(path, data, FileStat(path, 0, len(data)))

    async def read_note(self, path: str) -> NoteData:
        url = "/vault/" + encode_path(path)
        if not is_markdown(path):
            file = await self.read_bytes(path)
            if looks_binary(file.data[:8192]):
                raise NotText(path)
            return NoteData(path, decode_text(file.data), file.stat)
        response = await self._send("GET", url, idempotent=True, headers={"Accept": NOTE_JSON})
        if response.status_code == 404:
            await self._raise_missing(path)
        if _is_folder_listing(response):
            raise IsAFolder(path)
        body = cast(dict[str, Any], await self._json(self._check(response, path)))
        stat = cast(dict[str, Any], body.get("stat") or {})
        backlinks = body.get("backlinks")
        return NoteData(
            path=path,
            content=str(body.get("content", "")),
            stat=FileStat(path, int(stat.get("mtime", 0)), int(stat.get("size", 0))),
            backlinks=(
                tuple(str(b) for b in cast(list[object], backlinks))
                if isinstance(backlinks, list)
                else None
            ),
            # 6.0+: the key is there but null until Obsidian has resolved the vault's links.
            link_index_pending="backlinks" in body and backlinks is None,
        )

    async def stat(self, path: str) -> FileStat | None:
        try:
            return (await self.read_note(path)).stat
        except NoteNotFound:
            return None

    # -- writing ---------------------------------------------------------------------------

    async def _send_text(self, method: str, path: str, content: str, *, idempotent: bool) -> None:
        response = await self._send(
            method,
            "/vault/" + encode_path(path),
            idempotent=idempotent,
            headers={"Content-Type": "text/markdown"},
            content=content.encode("utf-8"),
        )
        self._check(response, path)

    async def write(self, path: str, content: str) -> None:
        await self._send_text("PUT", path, content, idempotent=True)

    async def append(self, path: str, content: str) -> None:
        await self._send_text("POST", path, content, idempotent=False)

    def key_digest(self) -> str | None:
        """A digest of the API key (which names the vault the plugin serves); never the key."""
        key = self._settings.api_key
        if key is None:
            return None
        return hashlib.sha256(key.get_secret_value().encode("utf-8")).hexdigest()[:32]

    async def _raw_bytes(self, path: str) -> bytes | None:
        """The file's bytes as they are on disk, None when there is no file. The plain GET
        sends the file as read (`adapter.readBinary`, every version); the note JSON's
        `content` is decoded text, in which bytes that are not UTF-8 are already U+FFFD."""
        response = await self._send("GET", "/vault/" + encode_path(path), idempotent=True)
        if response.status_code == 404:
            return None
        if _is_folder_listing(response):
            raise IsAFolder(path)
        return self._check(response, path).content

    async def read_exact(self, path: str) -> NoteData:
        """The note for an edit: its stat from the note JSON and its text from its bytes,
        refused (NotUtf8) where an edit would lose bytes, as the folder refuses it."""
        note = await self.read_note(path)
        data = await self._raw_bytes(path)
        if data is None:
            raise NoteNotFound(path)
        return replace(note, content=decode_exact(path, data))

    async def replace_if(self, path: str, expected: str | None, content: str) -> None:
        """Write the note only if it holds `expected` (None: only if it does not exist).

        The plugin has no conditional write: PUT ignores If-Match in every version (LRA
        #286), and 5.x's PATCH checks `ifMatch` before a read-modify-write that is no more
        atomic (`vaultOperations.ts`, `patchFileSection`). So the check is a read of the
        bytes right before the PUT: this server's own processes hold the vault's lock
        around both (`locking.py`), but a save in Obsidian landing between the two is lost;
        with the vault folder known, `Vault` edits on disk instead (`swap.py`).

        The text goes as bytes (`application/octet-stream`): the plugin writes a binary
        body as it is (`adapter.writeBinary`), whereas a `text/*` body is decoded first
        (express's text parser, iconv-lite), which drops a leading byte-order mark."""
        await self._expect(path, expected)
        response = await self._send(
            "PUT",
            "/vault/" + encode_path(path),
            idempotent=True,
            headers={"Content-Type": "application/octet-stream"},
            content=content.encode("utf-8"),
        )
        self._check(response, path)

    async def remove_if(self, path: str, expected: str) -> None:
        """Delete the note (5.x: to Obsidian's trash) only if it holds `expected`."""
        await self._expect(path, expected)
        await self.delete(path)

    async def _expect(self, path: str, expected: str | None) -> None:
        """NoteChanged unless the note's bytes are `expected`'s (None: unless there is no
        note)."""
        data = await self._raw_bytes(path)
        if data is None and expected is None:
            return
        if data is None or expected is None or data != expected.encode("utf-8"):
            raise NoteChanged(path, None if data is None else decode_exact(path, data))

    async def active_note(self) -> str | None:
        """The vault path of the note open in Obsidian, None when none is (404, 3.4.3+).
        Before 3.4.3 the request hangs when no note is open (its handler throws), so those
        versions are not asked: UnknownActiveNote."""
        if (await self.server_info()).version < _ACTIVE_ANSWERS_WHEN_NONE_OPEN:
            raise UnknownActiveNote(self._settings.base_url)
        response = await self._send(
            "GET", "/active/", idempotent=True, headers={"Accept": NOTE_JSON}
        )
        if response.status_code == 404:
            return None
        body = cast(dict[str, Any], await self._json(self._check(response, "/active/")))
        path = body.get("path")
        return path if isinstance(path, str) else None

    async def delete(self, path: str) -> None:
        """Remove a file (5.x moves it to Obsidian's trash); a missing one is no error."""
        response = await self._send("DELETE", "/vault/" + encode_path(path), idempotent=True)
        if response.status_code != 404:
            self._check(response, path)

    # -- search ----------------------------------------------------------------------------

    async def search_text(
        self, query: str, context_length: int, leaving_out: Collection[str] = ()
    ) -> list[TextSearchHit]:
        del leaving_out  # Obsidian searches the whole vault, on its own side
        if not query.split():
            raise VaultError("The search query is empty; give one or more words.")
        # contextLength is always sent: plugins up to 3.2 return empty contexts without it.
        response = await self._send(
            "POST",
            "/search/simple/",
            idempotent=True,
            params={"query": query, "contextLength": context_length},
        )
        rows = cast(list[dict[str, Any]], await self._json(self._check(response)))
        hits: list[TextSearchHit] = []
        for row in rows:
            matches: list[TextMatch] = []
            contexts: dict[int, str] = {}
            for entry in cast(list[dict[str, Any]], row.get("matches") or []):
                span = cast(dict[str, Any], entry.get("match") or {})
                source = "filename" if span.get("source") == "filename" else "content"
                contexts[len(matches)] = str(entry.get("context", ""))
                matches.append(
                    TextMatch(int(span.get("start", 0)), int(span.get("end", 0)), source)
                )
            hits.append(TextSearchHit(str(row["filename"]), tuple(matches), contexts))
        return hits

    async def smart_search(
        self, query: str, *, folders: list[str] | None, limit: int
    ) -> list[dict[str, Any]]:
        """`POST /search/smart` (the mcp-tools extension); raw result rows."""
        filter_: dict[str, Any] = {"limit": limit}
        if folders:
            filter_["folders"] = folders
        payload = json.dumps({"query": query, "filter": filter_})
        # The original plugin parses the body from a JSON *string* (a text/* request); its
        # fork from 0.3.8 on also takes application/json, which the original refuses.
        response = await self._send(
            "POST",
            SMART_SEARCH_ROUTE,
            idempotent=True,
            headers={"Content-Type": "text/plain"},
            content=payload,
            final_statuses=_SMART_SEARCH_FINAL,
        )
        if response.status_code == 400 and "string" in response.text:
            response = await self._send(
                "POST",
                SMART_SEARCH_ROUTE,
                idempotent=True,
                headers={"Content-Type": "application/json"},
                content=payload,
                final_statuses=_SMART_SEARCH_FINAL,
            )
        body = cast(dict[str, Any], await self._json(self._check(response)))
        return cast(list[dict[str, Any]], body.get("results") or [])

    async def post_json(self, route: str, payload: Mapping[str, object]) -> Any:
        """A user-configured bridge route (e.g. /smart-connections/search/)."""
        response = await self._send(
            "POST",
            route,
            idempotent=True,
            headers={"Content-Type": "application/json"},
            content=json.dumps(payload),
        )
        return await self._json(self._check(response))
