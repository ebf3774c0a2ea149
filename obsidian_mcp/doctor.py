"""Health checks for `obsidian-mcp doctor`, and certificate trust for `obsidian-mcp trust`."""

import hashlib
import os
import ssl
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from obsidian_mcp.config import Settings
from obsidian_mcp.errors import CertificateUntrusted, VaultError
from obsidian_mcp.index.embedder import DEFAULT_MODEL_ID
from obsidian_mcp.index.location import index_path
from obsidian_mcp.index.store import IndexStore
from obsidian_mcp.paths import parent_folder
from obsidian_mcp.sources.rest import RestSource, ServerInfo, build_http_client

Outcome = Literal["ok", "warn", "fail", "skip"]
OLDEST_TESTED_PLUGIN = (3, 0, 0)


@dataclass(frozen=True, slots=True)
class Check:
    name: str
    outcome: Outcome
    detail: str
    fix: str = ""


def fingerprint(pem: str) -> str:
    digest = hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest().upper()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


async def download_certificate(settings: Settings) -> tuple[str, Path]:
    """Fetch the plugin's certificate (trust on first use) and store it; returns PEM and path.

    The download itself cannot be verified (that is what it is for), so it goes to the
    configured host only, which is 127.0.0.1 unless the user changed it.
    """
    unverified = settings.model_copy(update={"verify_tls": False, "cert": None})
    async with build_http_client(unverified) as http:
        pem = await RestSource(http, unverified).fetch_certificate()
    if "BEGIN CERTIFICATE" not in pem:
        raise VaultError("Obsidian answered, but not with a PEM certificate; is it the plugin?")
    target = settings.stored_cert
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(pem, encoding="ascii")
    return pem, target


def _rest_checks(
    info: ServerInfo | None, error: VaultError | None, settings: Settings
) -> list[Check]:
    url = settings.base_url
    if error is not None:
        if isinstance(error, CertificateUntrusted):
            return [
                Check("Obsidian reachable", "ok", f"{url} answered"),
                Check("certificate trusted", "fail", str(error), "run `obsidian-mcp trust`"),
            ]
        return [
            Check(
                "Obsidian reachable",
                "fail",
                str(error),
                "open Obsidian and enable the Local REST API plugin; check OBSIDIAN_HOST/PORT",
            )
        ]
    assert info is not None
    checks = [Check("Obsidian reachable", "ok", f"{url} answered")]
    if settings.protocol == "https":
        checks.append(
            Check("certificate trusted", "ok", "verified")
            if settings.verify_tls
            else Check(
                "certificate trusted",
                "warn",
                "verification is OFF (OBSIDIAN_VERIFY_TLS=false)",
                "run `obsidian-mcp trust` and remove OBSIDIAN_VERIFY_TLS",
            )
        )
    version_ok = info.version >= OLDEST_TESTED_PLUGIN
    checks.append(
        Check(
            "plugin version",
            "ok" if version_ok else "warn",
            info.version_text,
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


def _semantic_check(info: ServerInfo | None, settings: Settings) -> Check:
    other = _plugin_semantic_source(info, settings)
    if settings.index_embeddings:
        local = f"the local passage index ({DEFAULT_MODEL_ID})"
        return Check("semantic source", "ok", f"{local} + {other}" if other else local)
    if other is not None:
        return Check("semantic source", "ok", other)
    return Check(
        "semantic source",
        "warn",
        "none found: searches will be keyword-only (lexical-fallback)",
        "remove OBSIDIAN_INDEX_EMBEDDINGS=false to rank by meaning with the local model, "
        "or install Smart Connections or the MCP Tools plugin for /search/smart",
    )


def _folder_checks(settings: Settings) -> list[Check]:
    vault = settings.vault_path
    if vault is None:
        return [Check("vault folder", "skip", "OBSIDIAN_VAULT_PATH not set")]
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
    memory_folder = vault / parent_folder(settings.memory_path)
    existing = memory_folder
    while not existing.exists() and existing != vault:
        existing = existing.parent
    writable = os.access(existing, os.W_OK)
    checks.append(
        Check(
            "memory path writable",
            "ok" if writable else "fail",
            f"{settings.memory_path} in {vault}",
            "" if writable else f"make {existing} writable, or set OBSIDIAN_MEMORY_PATH",
        )
    )
    return checks


def _index_check(settings: Settings) -> Check:
    if settings.api_key is None and settings.vault_path is None:
        return Check("passage index", "skip", "no vault configured")
    path = index_path(settings)
    if not path.exists():
        return Check(
            "passage index",
            "warn",
            f"not built yet ({path}); the first query builds it in the background",
            "run `obsidian-mcp index` to build it now",
        )
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
    detail = (
        f"{path}: {stats.notes} notes, {stats.passages} passages, {stats.embedded_passages} "
        f"with vectors ({stats.model or 'no model yet'}), {stats.bytes_on_disk / 1e6:.1f} MB, "
        f"updated {updated}"
    )
    if stats.embedded_passages < stats.passages:
        return Check("passage index", "warn", detail, "run `obsidian-mcp index` to finish it")
    return Check("passage index", "ok", detail)


async def run_checks(settings: Settings) -> list[Check]:
    checks: list[Check] = []
    info: ServerInfo | None = None
    if settings.api_key is None:
        checks.append(
            Check("Obsidian reachable", "skip", "OBSIDIAN_API_KEY not set: vault folder only")
        )
    else:
        error: VaultError | None = None
        async with build_http_client(settings) as http:
            try:
                info = await RestSource(http, settings).server_info()
            except VaultError as exc:
                error = exc
        checks.extend(_rest_checks(info, error, settings))
    checks.append(_semantic_check(info, settings))
    checks.extend(_folder_checks(settings))
    checks.append(_index_check(settings))
    if settings.api_key is None and settings.vault_path is None:
        checks.append(
            Check(
                "vault configured",
                "fail",
                "no source",
                "set OBSIDIAN_API_KEY (Obsidian open) or OBSIDIAN_VAULT_PATH",
            )
        )
    return checks
