"""Health checks for `obsidian-mcp doctor`, and certificate trust for `obsidian-mcp trust`."""

import os
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

import anyio.to_thread

from obsidian_mcp.config import Settings
from obsidian_mcp.errors import (
    CertificatePinMismatch,
    CertificateUntrusted,
    ObsidianUnreachable,
    RestSettingsRefused,
    VaultError,
)
from obsidian_mcp.index.embedder import load_embedder
from obsidian_mcp.index.location import index_path
from obsidian_mcp.index.store import IndexStore
from obsidian_mcp.memory.files import MemoryFiles
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.sources.identity import IdentityCheck, compare_sources, recovery_log
from obsidian_mcp.sources.rest import RestSource, ServerInfo, build_http_client
from obsidian_mcp.sources.tls import configured_pin, presented_certificate

Outcome = Literal["ok", "warn", "fail", "skip"]
# healthy: everything works. degraded: the tools answer, with less (Obsidian closed but the
# folder serves, no semantic source). broken: no source can serve the vault.
Verdict = Literal["healthy", "degraded", "broken"]
OLDEST_TESTED_PLUGIN = (3, 0, 0)


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    outcome: Outcome
    detail: str
    fix: str = ""


@dataclass(frozen=True, slots=True)
class Report:
    checks: list[Check]
    verdict: Verdict
    summary: str


async def download_certificate(settings: Settings) -> str:
    """Fetch the plugin's certificate (trust on first use) as PEM, without storing it.

    The download itself cannot be verified (that is what it is for), so it carries no API
    key: the plugin serves its certificate to anyone, and whoever answers at an address
    that is not Obsidian's learns nothing from the request.
    """
    async with build_http_client(settings, unverified=True) as http:
        pem = await RestSource(http, settings).fetch_certificate()
    if "BEGIN CERTIFICATE" not in pem:
        raise VaultError("Obsidian answered, but not with a PEM certificate; is it the plugin?")
    return pem


async def presented_certificate_at(url: str, timeout: float) -> str:
    """The certificate the REST API at `url` presents in its TLS handshake, as PEM, not
    verified (it is what the user is asked to trust); VaultError when none can be had."""
    parts = urlsplit(url)
    if parts.scheme != "https" or parts.hostname is None or parts.port is None:
        raise VaultError(f"{url} is not an https address; only a TLS certificate can be pinned.")
    host, port = parts.hostname, parts.port
    try:
        return await anyio.to_thread.run_sync(presented_certificate, host, port, timeout)
    except (OSError, ssl.SSLError) as exc:
        raise ObsidianUnreachable(url, exc.strerror or str(exc) or type(exc).__name__) from None


def store_certificate(settings: Settings, pem: str) -> Path:
    target = settings.stored_cert
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(pem, encoding="ascii")
    return target


def plugin_changes(info: ServerInfo) -> str:
    """What the running plugin version changes for this server, in a clause."""
    major = info.version[0] if info.version else 0
    if major >= 6:
        ready = (
            "ready"
            if info.link_index_ready
            else "NOT ready yet: links and backlinks come from the notes' text until it is"
        )
        return (
            f"6.x: links are null until Obsidian's link index is ready (now {ready}); "
            "header-based PATCH is gone (this server never uses it)"
        )
    if major == 5:
        return "5.x: Obsidian's links, backlinks and unresolved links are used"
    if major == 4:
        return "4.x: Obsidian's links and backlinks are used"
    return (
        "3.x: no backlinks from Obsidian (they come from the notes' text); a failing "
        "request can hang, so timeouts guard every call"
    )


def _rest_checks(
    info: ServerInfo | None, error: VaultError | None, settings: Settings
) -> list[Check]:
    url = settings.base_url
    if error is not None:
        if isinstance(error, RestSettingsRefused):
            # Refused before any request: whether Obsidian answers is not known, nor asked.
            return [Check("REST settings", "fail", str(error))]
        if isinstance(error, CertificateUntrusted | CertificatePinMismatch):
            return [
                Check("Obsidian reachable", "ok", f"{url} answered"),
                Check(
                    "certificate trusted",
                    "fail",
                    str(error),
                    f"run `obsidian-mcp trust --url {url}`"
                    if isinstance(error, CertificateUntrusted)
                    else "",
                ),
            ]
        detail = (
            f"no answer at {error.url} ({error.detail})"
            if isinstance(error, ObsidianUnreachable)
            else str(error)
        )
        return [
            Check(
                "Obsidian reachable",
                "fail",
                detail,
                "open Obsidian and enable the Local REST API plugin; check OBSIDIAN_URL (or "
                "OBSIDIAN_HOST/PORT); on another host, set its 'Binding host' (README)",
            )
        ]
    assert info is not None
    checks = [Check("Obsidian reachable", "ok", f"{url} answered")]
    if settings.uses_https:
        pin = configured_pin(settings)
        checks.append(
            Check("certificate trusted", "ok", f"pinned: SHA-256 {pin}, host name not checked")
            if pin is not None
            else Check("certificate trusted", "ok", "verified")
            if settings.verify_tls
            else Check(
                "certificate trusted",
                "warn",
                "verification is OFF (OBSIDIAN_VERIFY_TLS=false, accepted on this machine only)",
                "run `obsidian-mcp trust` and remove OBSIDIAN_VERIFY_TLS",
            )
        )
    version_ok = info.version >= OLDEST_TESTED_PLUGIN
    checks.append(
        Check(
            "plugin version",
            "ok" if version_ok else "warn",
            f"{info.version_text} ({plugin_changes(info)})" if version_ok else info.version_text,
            "" if version_ok else "update the Local REST API plugin to 3.x or later",
        )
    )
    checks.append(
        Check("API key accepted", "ok", "authenticated")
        if info.authenticated
        else Check(
            "API key accepted",
            "fail",
            "Obsidian rejected the key",
            "copy the key from Obsidian > Settings > Local REST API into OBSIDIAN_API_KEY",
        )
    )
    return checks


def _plugin_semantic_source(info: ServerInfo | None, settings: Settings) -> str | None:
    """The semantic source beside the local index that the server would use, if any."""
    if info is not None and info.has_smart_search:
        return "POST /search/smart (mcp-tools extension)"
    if settings.semantic_route:
        return f"custom route {settings.semantic_route}"
    vault = settings.vault_path
    if vault is not None and (vault / ".smart-env").is_dir():
        return f"Smart Connections vectors in {vault}/.smart-env"
    return None


def _semantic_check(info: ServerInfo | None, rest_ok: bool, settings: Settings) -> Check:
    other = _plugin_semantic_source(info, settings)
    if settings.index_embeddings:
        local = "the local passage index (embedding model below)"
        if other is None and settings.api_key is not None and not rest_ok:
            # Obsidian lists its extensions only to an accepted key: the rest is unknown.
            other = "the plugin's sources unknown until Obsidian answers and accepts the key"
        return Check("semantic source", "ok", f"{local} + {other}" if other else local)
    if other is not None:
        return Check("semantic source", "ok", other)
    if settings.api_key is not None and not rest_ok:
        # Obsidian lists its extensions only to an accepted key: nothing is known yet.
        return Check(
            "semantic source", "skip", "unknown until Obsidian answers and accepts the key"
        )
    return Check(
        "semantic source",
        "warn",
        "none found: searches will be keyword-only (lexical-fallback)",
        "remove OBSIDIAN_INDEX_EMBEDDINGS=false to rank by meaning with the local model, "
        "or install Smart Connections or the MCP Tools plugin for /search/smart",
    )


def _model_check(settings: Settings) -> Check:
    embedder, note = load_embedder(settings)
    if embedder is not None:
        return Check("embedding model", "ok", note)
    return Check("embedding model", "warn", "none: search by meaning falls back to keywords", note)


def _folder_checks(settings: Settings) -> list[Check]:
    vault = settings.vault_path
    if vault is None:
        if settings.api_key is None:
            return [Check("vault folder", "skip", "OBSIDIAN_VAULT_PATH not set")]
        return [
            # A choice, not a fault: the tools work fully through Obsidian.
            Check(
                "vault folder",
                "skip",
                "OBSIDIAN_VAULT_PATH not set: Obsidian decides what a symbolic link shows "
                "(it follows links that leave the vault), and reads fail while it is closed",
                "set OBSIDIAN_VAULT_PATH to the vault folder to refuse links that leave it",
            )
        ]
    if not vault.is_dir() or not os.access(vault, os.R_OK | os.X_OK):
        return [
            Check(
                "vault folder",
                "fail",
                f"{vault} is not a readable folder",
                "point OBSIDIAN_VAULT_PATH (or --vault) at the vault's root folder",
            )
        ]
    checks = [Check("vault folder", "ok", f"{vault} readable")]
    # Memories live in the writers' folder; the configured path is the legacy single file.
    memory_folder = MemoryFiles(settings.memory_path).folder
    existing = vault / memory_folder
    while not existing.exists() and existing != vault:
        existing = existing.parent
    writable = os.access(existing, os.W_OK)
    checks.append(
        Check(
            "memory path writable",
            "ok" if writable else "fail",
            f"{memory_folder}/ in {vault}",
            "" if writable else f"make {existing} writable, or set OBSIDIAN_MEMORY_PATH",
        )
    )
    return checks


def _index_check(settings: Settings) -> Check:
    if settings.api_key is None and settings.vault_path is None:
        return Check("passage index", "skip", "no vault configured")
    path = index_path(settings)
    if not path.exists():
        # Normal before the first query, which builds it in the background.
        return Check(
            "passage index",
            "skip",
            f"not built yet ({path}); the first query builds it in the background",
            "run `obsidian-mcp index` to build it now",
        )
    # Passages without vectors are a build under way (or stopped with its server), not a
    # fault: queries rank them by words meanwhile.
    return Check("passage index", "ok", describe_index(path))


def describe_index(path: Path) -> str:
    """The passage index in one line, as `doctor` and `obsidian-mcp index` both say it."""
    store = IndexStore(path)
    try:
        stats = store.stats()
    finally:
        store.close()
    updated = (
        datetime.fromtimestamp(stats.last_updated, UTC).isoformat(timespec="seconds")
        if stats.last_updated is not None
        else "never"
    )
    return (
        f"{path}: {stats.notes:,} notes, {stats.passages:,} passages, "
        f"{stats.embedded_passages:,} with vectors ({stats.model or 'no model yet'}), "
        f"{stats.bytes_on_disk / 1e6:.1f} MB, updated {updated}"
    )


def _identity_check(check: IdentityCheck | None) -> Check | None:
    if check is None:
        return None
    if check.verdict == "same":
        return Check("same vault", "ok", f"the folder and Obsidian's API agree ({check.evidence})")
    if check.verdict == "different":
        return Check(
            "same vault",
            "fail",
            f"the vault folder and the vault Obsidian serves differ ({check.evidence}): reads "
            "show one, so edits are refused",
            "point OBSIDIAN_VAULT_PATH at the folder of the vault open in Obsidian, or "
            "OBSIDIAN_API_KEY at this folder's key",
        )
    return Check("same vault", "skip", f"cannot tell ({check.evidence})")


def _interrupted_edits_check(settings: Settings) -> Check | None:
    """Edits a stopped server left half written, and previous texts kept from them."""
    if settings.vault_path is None:
        return None
    log = recovery_log(settings)
    pending, kept = log.pending(), log.kept_files()
    if not pending and not kept:
        return Check("interrupted edits", "ok", "none")
    said: list[str] = []
    if pending:
        said.append(
            f"{len(pending):,} edits were cut short ({', '.join(w.path for w in pending)}); "
            "the server settles them when it starts"
        )
    if kept:
        said.append(
            "texts from before edits cut short, kept because the note changed since: "
            + ", ".join(str(file) for file in kept)
        )
    return Check(
        "interrupted edits",
        "warn",
        "; ".join(said),
        "start the server to put back what it can; take what you need from the kept files, "
        "then delete them",
    )


def _verdict(checks: list[Check], rest_ok: bool, folder_ok: bool) -> tuple[Verdict, str]:
    if not rest_ok and not folder_ok:
        return "broken", "no source can serve the vault; fix a FAIL line above"
    if any(check.outcome in ("fail", "warn") for check in checks):
        served_by = "Obsidian" if rest_ok else "the vault folder"
        return "degraded", f"the tools work through {served_by}; see the lines above"
    return "healthy", "every check passed"


async def run_checks(settings: Settings, problem: str | None = None) -> Report:
    """Every check of one vault; `problem`: what in its own settings cannot work
    (`NamedVault.problem`), reported instead of anything its REST API would be asked."""
    checks: list[Check] = []
    info: ServerInfo | None = None
    identity: IdentityCheck | None = None
    if problem is not None:
        checks.append(Check("vault settings", "fail", problem))
        return Report(checks, "broken", "this vault is not served until its settings are fixed")
    if settings.api_key is None:
        checks.append(
            Check("Obsidian reachable", "skip", "no API key (OBSIDIAN_API_KEY): vault folder only")
        )
    else:
        error: VaultError | None = None
        try:
            # An unusable OBSIDIAN_CERT fails here, before any request; it is a check's
            # failure to report, not a reason for doctor itself to crash.
            http = build_http_client(settings)
        except VaultError as exc:
            error = exc
        else:
            async with http:
                rest = RestSource(http, settings)
                try:
                    info = await rest.server_info()
                    if info.authenticated and settings.vault_path is not None:
                        folder = settings.vault_path
                        if folder.is_dir():
                            identity = await compare_sources(rest, FolderSource(folder))
                except VaultError as exc:
                    error = exc
        checks.extend(_rest_checks(info, error, settings))
    rest_ok = info is not None and info.authenticated
    checks.append(_semantic_check(info, rest_ok, settings))
    checks.append(await anyio.to_thread.run_sync(_model_check, settings))
    folder_checks = _folder_checks(settings)
    checks.extend(folder_checks)
    folder_ok = folder_checks[0].outcome == "ok"
    checks.append(_index_check(settings))
    checks += [
        check
        for check in (_identity_check(identity), _interrupted_edits_check(settings))
        if check is not None
    ]
    if settings.api_key is None and settings.vault_path is None:
        checks.append(
            Check(
                "vault configured",
                "fail",
                "no source",
                "set OBSIDIAN_API_KEY (Obsidian open) or OBSIDIAN_VAULT_PATH",
            )
        )
    verdict, summary = _verdict(checks, rest_ok, folder_ok)
    return Report(checks, verdict, summary)
