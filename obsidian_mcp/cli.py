"""Command line: serve (stdio MCP), call one tool, doctor, trust, model fetch.

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
from obsidian_mcp.index.model_fetch import ModelFetchError, fetch_model
from obsidian_mcp.server import build_server

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
    async with Client(build_server(settings)) as client:
        result = await client.call_tool(tool, arguments)
    for block in result.content:
        if isinstance(block, TextContent):
            print(block.text)
    return 1 if result.is_error else 0


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


def _fetch(settings: Settings, name: str) -> int:
    try:
        folder = fetch_model(name, cache_dir=settings.cache_dir, hub_url=settings.model_hub_url)
    except ModelFetchError as exc:
        print(f"Could not fetch {name}: {exc}", file=sys.stderr)
        return 1
    print(f"{name} stored in {folder}")
    print(f"Use it with OBSIDIAN_MODEL={name}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="obsidian-mcp", description="An MCP server for an Obsidian vault."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    vault_help = "the vault folder (overrides OBSIDIAN_VAULT_PATH)"
    serve = commands.add_parser("serve", help="run the MCP server on stdio")
    serve.add_argument("--vault", type=Path, help=vault_help)
    call = commands.add_parser("call", help="run one tool and print what the model sees")
    call.add_argument("--vault", type=Path, help=vault_help)
    call.add_argument("tool", help="tool name, e.g. vault_semantic_query")
    call.add_argument(
        "arguments", nargs="*", help="key=value (values parsed as JSON if they can be)"
    )
    doctor = commands.add_parser("doctor", help="check the configuration, one line per check")
    doctor.add_argument("--vault", type=Path, help=vault_help)
    trust = commands.add_parser("trust", help="download and store the plugin's certificate")
    trust.add_argument("--vault", type=Path, help=argparse.SUPPRESS)
    model = commands.add_parser("model", help="manage the embedding model")
    model.add_argument("--vault", type=Path, help=argparse.SUPPRESS)
    model_commands = model.add_subparsers(dest="model_command", required=True)
    fetch = model_commands.add_parser(
        "fetch", help="download a model by name into the cache (needs internet access)"
    )
    fetch.add_argument("name", help="the model's name on the hub, e.g. Xenova/all-MiniLM-L6-v2")
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
    elif args.command == "doctor":
        code = anyio.run(_doctor, settings)
    elif args.command == "model":
        code = _fetch(settings, args.name)
    else:
        code = anyio.run(_trust, settings)
    sys.exit(code)
