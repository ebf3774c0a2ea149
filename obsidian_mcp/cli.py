"""Command line: serve (stdio MCP), call one tool, index, doctor, trust.

stdout is the MCP channel under `serve`, so everything else goes to stderr; `call`,
`doctor` and `trust` print their answer on stdout for people and scripts.
"""

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import anyio
from mcp import Client
from mcp.types import TextContent

from obsidian_mcp.config import Settings
from obsidian_mcp.doctor import download_certificate, fingerprint, run_checks
from obsidian_mcp.errors import VaultError
from obsidian_mcp.server import build_server
from obsidian_mcp.server.app import open_retriever, open_vault
from obsidian_mcp.sources.rest import build_http_client

_MEANING_TOOLS = frozenset({"vault_semantic_query", "vault_quick_context"})
_MARKS = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "skip"}


def _settings(args: argparse.Namespace) -> Settings:
    settings = Settings()
    vault: Path | None = args.vault
    if vault is not None:
        settings = settings.model_copy(update={"vault_path": vault})
    return settings


def _tool_arguments(pairs: Sequence[str]) -> dict[str, object]:
    arguments: dict[str, object] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise SystemExit(f"obsidian-mcp call: expected key=value, got {pair!r}")
        try:
            # Numbers, booleans, lists and null as JSON; anything else is a string.
            arguments[key] = json.loads(raw)
        except json.JSONDecodeError:
            arguments[key] = raw
    return arguments


async def _call(settings: Settings, tool: str, arguments: dict[str, object]) -> int:
    # One call is the whole life of this server, too short for the background build: a tool
    # that ranks by meaning brings the index up to date first (with a progress bar, once;
    # later calls find it done).
    if (
        tool in _MEANING_TOOLS
        and settings.index_embeddings
        and await _refresh_index(settings) is None
    ):
        return 1
    async with Client(build_server(settings)) as client:
        result = await client.call_tool(tool, arguments)
    for block in result.content:
        if isinstance(block, TextContent):
            print(block.text)
    return 1 if result.is_error else 0


class ProgressBar:
    """A one-line progress bar on stderr, redrawn in place; a finished phase (reading
    notes, then embedding passages) keeps its line."""

    WIDTH = 30

    def __init__(self) -> None:
        self._width = 0

    async def __call__(self, done: float, total: float | None, message: str | None) -> None:
        fraction = min(done / total, 1.0) if total else 1.0
        filled = round(self.WIDTH * fraction)
        line = f"[{'#' * filled}{'-' * (self.WIDTH - filled)}] {message or ''}"
        sys.stderr.write("\r" + line.ljust(self._width))
        self._width = len(line)
        if fraction >= 1.0:
            sys.stderr.write("\n")
            self._width = 0
        sys.stderr.flush()


async def _refresh_index(settings: Settings) -> dict[str, object] | None:
    """Bring the vault's passage index up to date, with a progress bar on stderr; its
    status, or None (with the reason on stderr) when no vault is configured."""
    async with build_http_client(settings) as http:
        vault, note = await open_vault(settings, http)
        if vault is None:
            print(f"No vault to index: {note}", file=sys.stderr)
            return None
        retriever = open_retriever(vault, settings)
        try:
            await retriever.build_index(ProgressBar())
            return retriever.index_status()
        finally:
            retriever.close()


async def _index(settings: Settings) -> int:
    status = await _refresh_index(settings)
    if status is None:
        return 1
    print(
        f"passage index {status['path']}: {status['notes']} notes, {status['passages']} "
        f"passages, {status['embedded_passages']} with vectors ({status['model']}), "
        f"{int(str(status['bytes_on_disk'])) / 1e6:.1f} MB"
    )
    return 0


async def _doctor(settings: Settings) -> int:
    checks = await run_checks(settings)
    for check in checks:
        fix = f" -> {check.fix}" if check.fix else ""
        print(f"[{_MARKS[check.outcome]}] {check.name}: {check.detail}{fix}")
    return 1 if any(check.outcome == "fail" for check in checks) else 0


async def _trust(settings: Settings) -> int:
    try:
        pem, path = await download_certificate(settings)
    except VaultError as exc:
        print(f"Could not fetch the certificate: {exc}", file=sys.stderr)
        return 1
    print(f"Certificate of {settings.base_url} stored in {path}")
    print(f"SHA-256 fingerprint: {fingerprint(pem)}")
    print("Compare it with the one in Obsidian > Settings > Local REST API if unsure.")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="obsidian-mcp", description="An MCP server for an Obsidian vault."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    vault_help = "the vault folder (overrides OBSIDIAN_VAULT_PATH)"
    serve = commands.add_parser("serve", help="run the MCP server on stdio")
    serve.add_argument("--vault", type=Path, help=vault_help)
    call = commands.add_parser(
        "call",
        help="run one tool and print what the model sees (for the tools that rank by "
        "meaning, the passage index is brought up to date first)",
    )
    call.add_argument("--vault", type=Path, help=vault_help)
    call.add_argument("tool", help="tool name, e.g. vault_semantic_query")
    call.add_argument(
        "arguments", nargs="*", help="key=value (values parsed as JSON if they can be)"
    )
    index = commands.add_parser(
        "index", help="build or refresh the vault's passage index, with a progress bar"
    )
    index.add_argument("--vault", type=Path, help=vault_help)
    doctor = commands.add_parser("doctor", help="check the configuration, one line per check")
    doctor.add_argument("--vault", type=Path, help=vault_help)
    trust = commands.add_parser("trust", help="download and store the plugin's certificate")
    trust.add_argument("--vault", type=Path, help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    settings = _settings(args)
    if args.command == "serve":
        build_server(settings).run()
        return
    if args.command == "call":
        code = anyio.run(_call, settings, args.tool, _tool_arguments(args.arguments))
    elif args.command == "index":
        code = anyio.run(_index, settings)
    elif args.command == "doctor":
        code = anyio.run(_doctor, settings)
    else:
        code = anyio.run(_trust, settings)
    sys.exit(code)
