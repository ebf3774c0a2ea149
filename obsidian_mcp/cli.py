"""Command line: serve (stdio MCP), call one tool, doctor, trust.

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
from pydantic import ValidationError

from obsidian_mcp.config import Settings
from obsidian_mcp.doctor import download_certificate, fingerprint, run_checks
from obsidian_mcp.errors import VaultError
from obsidian_mcp.server import build_server
from obsidian_mcp.validation import describe_invalid_arguments

_MARKS = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "skip"}


def _settings(args: argparse.Namespace) -> tuple[Settings, str | None]:
    """The settings, and what is wrong with the environment's if it cannot be read: the
    server then runs on defaults and answers every call with that problem."""
    problem: str | None = None
    try:
        settings = Settings()
    except ValidationError as exc:
        problem = describe_invalid_arguments(exc, Settings.model_json_schema(), "OBSIDIAN_")
        logging.getLogger(__name__).error("invalid settings: %s", problem)
        settings = Settings.model_construct()
    vault: Path | None = args.vault
    if vault is not None:
        settings = settings.model_copy(update={"vault_path": vault})
    return settings, problem


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


async def _call(
    settings: Settings, tool: str, arguments: dict[str, object], problem: str | None
) -> int:
    async with Client(build_server(settings, configuration_error=problem)) as client:
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
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    settings, problem = _settings(args)
    if args.command == "serve":
        build_server(settings, configuration_error=problem).run()
        return
    if problem is not None and args.command != "call":
        raise SystemExit(f"obsidian-mcp: the environment's settings are invalid: {problem}")
    if args.command == "call":
        code = anyio.run(_call, settings, args.tool, _tool_arguments(args.arguments), problem)
    elif args.command == "doctor":
        code = anyio.run(_doctor, settings)
    else:
        code = anyio.run(_trust, settings)
    sys.exit(code)
