"""Command line: serve (stdio or HTTP MCP), call one tool, index, memory, doctor, trust,
model fetch, stats.

stdout is the MCP channel under `serve`, so everything else goes to stderr; `call`,
`doctor` and `trust` print their answer on stdout for people and scripts.
"""

import argparse
import json
import logging
import os
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import anyio
from pydantic import ValidationError

from obsidian_mcp import __version__
from obsidian_mcp.config import MCP_HTTP_HOST, MCP_HTTP_PORT, Settings, is_loopback, rest_url
from obsidian_mcp.doctor import (
    describe_index,
    download_certificate,
    presented_certificate_at,
    run_checks,
    store_certificate,
)
from obsidian_mcp.errors import VaultError
from obsidian_mcp.index.bulk import collector_paused, freeze_first_loads
from obsidian_mcp.index.location import index_path
from obsidian_mcp.index.model_fetch import ModelFetchError, fetch_model
from obsidian_mcp.index.recipe import how_pooled_and_prompted
from obsidian_mcp.memory.model import Tombstone, encode
from obsidian_mcp.memory.render import format_memory
from obsidian_mcp.memory.store import UnknownMemoryId
from obsidian_mcp.memory.timespec import parse_moment
from obsidian_mcp.opening import model_loader, open_memory, open_retriever, open_vault
from obsidian_mcp.qualified import split_qualified
from obsidian_mcp.sources.rest import build_http_client
from obsidian_mcp.sources.tls import fingerprint, store_pin
from obsidian_mcp.usage.log import LogFiles
from obsidian_mcp.usage.report import html_report, terminal_report
from obsidian_mcp.usage.stats import read_log, usage_stats
from obsidian_mcp.validation import describe_invalid_arguments
from obsidian_mcp.vault_set import (
    NamedVault,
    VaultConfigError,
    VaultSet,
    configured_vaults,
    name_key,
    split_vault_argument,
)

logger = logging.getLogger("obsidian_mcp")

_MEANING_TOOLS = frozenset({"vault_semantic_query", "vault_quick_context"})
_MARKS = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL", "skip": "skip"}
# doctor's exit status: scripts can tell "works with less" from "does not work".
_DOCTOR_EXIT = {"healthy": 0, "broken": 1, "degraded": 2}
_VERDICT_ORDER = ["healthy", "degraded", "broken"]


def _settings(args: argparse.Namespace) -> tuple[Settings, VaultSet | None, str | None]:
    """The settings and the vaults they name, and what is wrong with them if they cannot
    be read: the server then runs on defaults and answers every call with that problem.
    Said once, by the command that meets it (serve's log, call's reply, the others' exit)."""
    problem: str | None = None
    try:
        settings = Settings()
    except ValidationError as exc:
        problem = describe_invalid_arguments(exc, Settings.model_json_schema(), "OBSIDIAN_")
        settings = Settings.model_construct()
    config: Path | None = getattr(args, "config", None)
    if config is not None:
        settings = settings.model_copy(update={"config": config})
    if problem is not None:
        return settings, None, problem
    named: list[str] = getattr(args, "vault", None) or []
    try:
        vaults = configured_vaults(settings, named)
    except VaultConfigError as exc:
        return settings, None, str(exc)
    return vaults.settings, vaults, None


def _argument_pairs(pairs: Sequence[str]) -> list[tuple[str, str]]:
    split = [pair.partition("=") for pair in pairs]
    for pair, (key, sep, _) in zip(pairs, split, strict=True):
        if not sep or not key:
            raise SystemExit(f"obsidian-mcp call: expected key=value, got {pair!r}")
    return [(key, raw) for key, _, raw in split]


def is_text_parameter(spec: dict[str, object]) -> bool:
    """Whether a parameter of a listed tool schema takes text: a string, or one of a few
    words (an enum of strings)."""
    choices = spec.get("enum")
    if isinstance(choices, list):
        return all(isinstance(choice, str) for choice in cast(list[object], choices))
    return spec.get("type") == "string"


def tool_arguments(pairs: Sequence[tuple[str, str]], schema: dict[str, Any]) -> dict[str, object]:
    """key=value pairs as the tool's arguments: a text parameter gets the text typed
    (`content=null` is the word null); any other value is read as JSON (numbers, booleans,
    lists), or else passed as the text typed."""
    properties = cast(dict[str, dict[str, object]], schema.get("properties", {}))
    arguments: dict[str, object] = {}
    for key, raw in pairs:
        if is_text_parameter(properties.get(key, {})):
            arguments[key] = raw
            continue
        try:
            arguments[key] = json.loads(raw)
        except json.JSONDecodeError:
            arguments[key] = raw
    return arguments


async def _call(
    settings: Settings,
    vaults: VaultSet | None,
    tool: str,
    pairs: list[tuple[str, str]],
    problem: str | None,
) -> int:
    # Here, not at the top: the SDK takes over a second to import, and only `call` and
    # `serve` need it (every other command starts without it).
    from mcp import Client
    from mcp.types import TextContent

    from obsidian_mcp.server import build_server

    # One call is the whole life of this server, too short for the background build: a tool
    # that ranks by meaning brings the index up to date first (with a progress bar, once;
    # later calls find it done).
    # A vault that cannot be indexed is said on stderr; with several, the call still
    # answers from the others, as the server does.
    if vaults is not None and tool in _MEANING_TOOLS and settings.index_embeddings:
        refreshed = await _refresh_indexes(vaults, dict(pairs).get("vault"))
        if not any(refreshed.values()):
            return 1
    server = build_server(settings, configuration_error=problem, vaults=vaults)
    async with Client(server) as client:
        schemas = {t.name: t.input_schema for t in (await client.list_tools()).tools}
        if tool not in schemas:
            print(
                f"obsidian-mcp call: no tool named {tool!r}. The tools are: "
                + ", ".join(sorted(schemas)),
                file=sys.stderr,
            )
            return 2
        result = await client.call_tool(tool, tool_arguments(pairs, schemas[tool]))
    for block in result.content:
        if isinstance(block, TextContent):
            print(block.text)
    return 1 if result.is_error else 0


_NUMBERS = re.compile(r"[\d,.]+")


class ProgressBar:
    """A one-line progress bar on stderr, redrawn in place; a finished phase (reading
    notes, then embedding passages) keeps its line. When stderr is not a terminal (a log
    file, a client's pipe), one plain line per tenth instead of redraws."""

    WIDTH = 30

    def __init__(self) -> None:
        self._width = 0
        self._redraw = sys.stderr.isatty()
        self._tenths_shown = -1
        self._phase = ""

    async def __call__(self, done: float, total: float | None, message: str | None) -> None:
        fraction = min(done / total, 1.0) if total else 1.0
        if not self._redraw:
            tenths = int(fraction * 10)
            # A phase is known by its message without the numbers ("indexed 5 of 10 notes",
            # "embedded 2 of 2 passages"); a new one is shown from its first report.
            phase = _NUMBERS.sub("", message or "")
            if phase != self._phase or tenths < self._tenths_shown:
                self._phase = phase
                self._tenths_shown = -1
            if tenths > self._tenths_shown:
                # Reports may repeat a tenth (or the end) many times; each shows once.
                self._tenths_shown = tenths
                sys.stderr.write(f"{message or ''}\n")
                sys.stderr.flush()
            return
        filled = round(self.WIDTH * fraction)
        line = f"[{'#' * filled}{'-' * (self.WIDTH - filled)}] {message or ''}"
        sys.stderr.write("\r" + line.ljust(self._width))
        self._width = len(line)
        if fraction >= 1.0:
            sys.stderr.write("\n")
            self._width = 0
        sys.stderr.flush()


async def _refresh_index(named: NamedVault) -> bool:
    """Bring the vault's passage index up to date, with a progress bar on stderr; False
    (with the reason on stderr) when the vault cannot be opened."""
    settings = named.settings
    if named.problem is not None:
        print(f"No vault to index: {named.problem}", file=sys.stderr)
        return False
    try:
        async with build_http_client(settings) as http:
            vault, note = await open_vault(settings, http)
            if vault is None:
                print(f"No vault to index: {note}", file=sys.stderr)
                return False
            retriever = open_retriever(vault, settings, model_loader(settings))
            try:
                await retriever.build_index(ProgressBar())
                return True
            finally:
                retriever.close()
    except VaultError as exc:
        print(f"The index was not brought up to date: {exc}", file=sys.stderr)
        return False


def _chosen(vaults: VaultSet, name: object) -> list[NamedVault]:
    """The vault a command names (None: every vault); exit with the names if none is it."""
    if name is None:
        return list(vaults.vaults)
    found = vaults.find(str(name))
    if found is None:
        raise SystemExit(
            f"obsidian-mcp: there is no vault {name!r}; the vaults are {', '.join(vaults.names)}."
        )
    return [found]


async def _refresh_indexes(vaults: VaultSet, name: object = None) -> dict[str, bool]:
    """Each chosen vault's index brought up to date (`_refresh_index`), one vault's
    failure leaving the others' to do: by vault name, whether it was."""
    refreshed: dict[str, bool] = {}
    for named in _chosen(vaults, name):
        if vaults.several:
            print(f"vault {named.name}:", file=sys.stderr)
        refreshed[named.name] = await _refresh_index(named)
    return refreshed


async def _index(vaults: VaultSet) -> int:
    refreshed = await _refresh_indexes(vaults)
    for named in vaults.vaults:
        if not refreshed[named.name]:
            continue
        # Said once the index is closed (its write-ahead log folded in), as doctor says it.
        where = f"{named.name}: " if vaults.several else ""
        print(f"{where}passage index {describe_index(index_path(named.settings))}")
    return 0 if all(refreshed.values()) else 1


async def _memory(vaults: VaultSet, args: argparse.Namespace) -> int:
    """What the agent remembers, for a person without an agent: list, forget, export."""
    name: str | None = args.name
    memory_id: str = getattr(args, "id", "")
    # An id as a search over several vaults shows it, `journal:<id>`, names its vault.
    prefixed, memory_id = split_qualified(memory_id, vaults.names)
    if prefixed is not None and name is not None and name_key(name) != name_key(prefixed):
        raise SystemExit(
            f"obsidian-mcp memory: the id {args.id!r} is in vault {prefixed}, but --name "
            f"{name}; leave one of them out."
        )
    named = _chosen(vaults, prefixed or name or vaults.default)[0]
    settings = named.settings
    if named.problem is not None:
        print(f"No vault: {named.problem}", file=sys.stderr)
        return 1
    async with build_http_client(settings) as http:
        vault, note = await open_vault(settings, http)
        if vault is None:
            print(f"No vault: {note}", file=sys.stderr)
            return 1
        store = open_memory(settings, vault, None)
        try:
            if args.memory_command == "forget":
                forgotten = await store.forget(memory_id)
                if isinstance(forgotten, Tombstone):
                    print(f"{forgotten.id} was already forgotten; nothing changed.")
                    return 0
                print(f"Forgot {forgotten.id}: {forgotten.content}")
                await store.write_view()
                return 0
            memories = await store.export(include_superseded=args.all)
            if args.memory_command == "export":
                for memory in memories:
                    sys.stdout.write(encode(memory))
                return 0
            now = store.now()
            shown = [
                memory
                for memory in memories
                if args.scope is None or memory.scope in (None, args.scope.lower())
            ]
            for memory in shown:
                print(format_memory(memory, now))
            where = f" in vault {named.name}" if vaults.several else ""
            print(
                f"{len(shown)} memories{where}; the page {store.files.view} shows them by "
                "scope and tag.",
                file=sys.stderr,
            )
            return 0
        except UnknownMemoryId as exc:
            print(
                f"obsidian-mcp memory: no memory has the id {exc.memory_id!r}; `obsidian-mcp "
                "memory list` shows the ids (with --all, superseded ones too).",
                file=sys.stderr,
            )
            return 1
        except VaultError as exc:
            print(f"obsidian-mcp memory: {exc}", file=sys.stderr)
            return 1
        finally:
            store.close()


async def _doctor(vaults: VaultSet) -> int:
    """Every vault's checks; with several, each line names its vault, and the worst
    verdict is the exit status."""
    worst = "healthy"
    for named in vaults.vaults:
        report = await run_checks(named.settings, named.problem)
        where = f"{named.name}: " if vaults.several else ""
        for check in report.checks:
            fix = f" -> {named.in_its_terms(check.fix)}" if check.fix else ""
            detail = named.in_its_terms(check.detail)
            print(f"[{_MARKS[check.outcome]}] {where}{check.name}: {detail}{fix}")
        print(f"{where}{report.verdict}: {report.summary}")
        worst = max(worst, report.verdict, key=_VERDICT_ORDER.index)
    return _DOCTOR_EXIT[worst]


def _confirmed(question: str, command: str) -> bool:
    """Whether the user says yes on the terminal; no terminal: no, and how to say yes."""
    if not sys.stdin.isatty():
        print(
            f"Not stored: no terminal to confirm on. Run `{command} --yes` to store it "
            "without asking.",
            file=sys.stderr,
        )
        return False
    if input(f"{question} [y/N] ").strip().lower() in ("y", "yes"):
        return True
    print("Not stored.")
    return False


async def _trust(settings: Settings, assume_yes: bool) -> int:
    try:
        pem = await download_certificate(settings)
    except VaultError as exc:
        print(f"Could not fetch the certificate: {exc}", file=sys.stderr)
        return 1
    print(f"Certificate offered by {settings.base_url}")
    print(f"SHA-256 fingerprint: {fingerprint(pem)}")
    print("Compare it with the one in Obsidian > Settings > Local REST API if unsure.")
    if not assume_yes and not _confirmed(
        f"Store it in {settings.stored_cert}?", "obsidian-mcp trust"
    ):
        return 1
    path = store_certificate(settings, pem)
    print(f"Stored in {path}")
    return 0


async def _trust_url(settings: Settings, url: str, assume_yes: bool) -> int:
    """Pin the certificate the REST API at `url` presents, once the user confirms it."""
    try:
        address = rest_url(url)
        pem = await presented_certificate_at(address, settings.connect_timeout)
    except (ValueError, VaultError) as exc:
        print(f"Could not fetch the certificate: {exc}", file=sys.stderr)
        return 1
    print(f"Certificate presented by {address}")
    print(f"SHA-256 fingerprint: {fingerprint(pem)}")
    print(
        "Compare it with the certificate in Obsidian > Settings > Local REST API (on the "
        "machine Obsidian runs on) before you confirm."
    )
    if not assume_yes and not _confirmed(
        f"Pin it for {address}?", f"obsidian-mcp trust --url {address}"
    ):
        return 1
    path = store_pin(settings.config_dir, address, fingerprint(pem))
    print(f"Pinned for {address} in {path}; its host name is not checked, its certificate is.")
    return 0


def _fetch(settings: Settings, name: str) -> int:
    try:
        fetched = fetch_model(name, cache_dir=settings.cache_dir, hub_url=settings.model_hub_url)
    except ModelFetchError as exc:
        print(f"Could not fetch {name}: {exc}", file=sys.stderr)
        return 1
    recipe = fetched.recipe
    how = how_pooled_and_prompted(recipe, None if fetched.pooled_by_model else recipe.pooling)
    print(f"{name} stored in {fetched.folder}")
    if recipe.described_by is None:
        print(
            "Its pooling and prompts were not found (no sentence-transformers files, no upstream "
            f"repository that has them, no family we know): {how} are assumed. If its model "
            f"card says otherwise, set them in {fetched.folder}/model.json (README, 'Another "
            "embedding model')."
        )
    else:
        print(f"Run with {how}, read from {recipe.described_by}.")
    print(f"Use it with OBSIDIAN_MODEL={name}")
    return 0


def _stats(settings: Settings, args: argparse.Namespace) -> int:
    """The usage log's figures: a table, JSON, and an HTML page if asked."""
    since: datetime | None = None
    if args.since:
        try:
            now = datetime.now(UTC)
            since = parse_moment(args.since, now=now, name="--since", end_of_day=False)
        except VaultError as exc:
            print(f"obsidian-mcp stats: {exc}", file=sys.stderr)
            return 2
    log = read_log(LogFiles(settings.usage_log_dir))
    if not log.files:
        print(
            f"obsidian-mcp stats: no usage log in {settings.usage_log_dir}. Set "
            "OBSIDIAN_USAGE_LOG=on (or full) in the server's environment, use your agent, "
            "then run stats again.",
            file=sys.stderr,
        )
        return 1
    stats = usage_stats(log, since)
    if args.html is not None:
        try:
            args.html.write_text(html_report(stats), "utf-8")
        except OSError as exc:
            print(f"obsidian-mcp stats: cannot write {args.html}: {exc}", file=sys.stderr)
            return 1
        print(f"HTML report written to {args.html}", file=sys.stderr)
    if args.json:
        print(json.dumps(stats.data(), ensure_ascii=False, indent=1))
    else:
        print(terminal_report(stats))
    return 0


def _serve(
    settings: Settings, vaults: VaultSet | None, args: argparse.Namespace, problem: str | None
) -> None:
    freeze_first_loads()  # this process serves until it exits
    with collector_paused(frozen_after=True):  # as the CLI's own import is (`launch.py`)
        from obsidian_mcp.http_transport import HttpOptions, serve_http  # as in _call
        from obsidian_mcp.server import build_server

    if problem is not None:
        logger.error("invalid settings, every call will say so: %s", problem)
    server = build_server(settings, configuration_error=problem, vaults=vaults)
    if not args.http:
        server.run()
        return
    if not is_loopback(args.host):
        if not args.allow_remote:
            raise SystemExit(
                f"obsidian-mcp serve: --host {args.host} would let other machines reach your "
                "vault. Add --allow-remote if you mean it (keep the token secret and use a "
                "firewall or TLS proxy), or leave --host at 127.0.0.1."
            )
        logger.warning(
            "Serving on %s: other machines can reach this server; only the bearer token "
            "protects the vault, and HTTP is not encrypted.",
            args.host,
        )
    token = settings.mcp_http_token.get_secret_value() if settings.mcp_http_token else None
    options = HttpOptions(host=args.host, port=args.port, token=token)
    anyio.run(serve_http, server, options)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="obsidian-mcp",
        description="An MCP server for an Obsidian vault: passages, not files.",
        epilog="Configuration comes from OBSIDIAN_* environment variables (see the README). "
        "`obsidian-mcp COMMAND --help` explains each command.",
    )
    parser.add_argument("--version", action="version", version=f"obsidian-mcp {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def vault_options(command: argparse.ArgumentParser, default: object = None) -> None:
        command.add_argument(
            "--vault",
            action="append",
            default=default,
            metavar="[NAME=]PATH",
            help="a vault folder (overrides OBSIDIAN_VAULT_PATH); repeat it as NAME=PATH for "
            "several vaults in one server (a bare PATH is named after its folder)",
        )
        command.add_argument(
            "--config",
            type=Path,
            default=default,
            metavar="FILE",
            help="a TOML file of vaults, one [vaults.NAME] table each (OBSIDIAN_CONFIG)",
        )

    serve = commands.add_parser(
        "serve",
        help="run the MCP server (stdio; --http for clients that connect by URL)",
        description="Run the MCP server. By default it speaks stdio to the client that "
        "started it. With --http it serves streamable HTTP at http://HOST:PORT/mcp for "
        "clients that connect by URL; they must send 'Authorization: Bearer <token>' "
        "(OBSIDIAN_MCP_HTTP_TOKEN, or the one printed at start).",
    )
    vault_options(serve)
    serve.add_argument("--http", action="store_true", help="serve streamable HTTP, not stdio")
    serve.add_argument(
        "--host",
        default=MCP_HTTP_HOST,
        help=f"address to bind with --http (default {MCP_HTTP_HOST})",
    )
    serve.add_argument(
        "--port",
        type=int,
        default=MCP_HTTP_PORT,
        help=f"port with --http (default {MCP_HTTP_PORT})",
    )
    serve.add_argument(
        "--allow-remote",
        action="store_true",
        help="allow a --host other than this machine's loopback address",
    )

    call = commands.add_parser(
        "call",
        help="run one tool and print what the model sees",
        description="Run one tool and print the text the model would read (for the tools "
        "that rank by meaning, the passage index is brought up to date first). Exit status 1 "
        "when the tool reports an error, 2 for an unknown tool (the names are listed).",
    )
    vault_options(call)
    call.add_argument("tool", help="tool name, e.g. vault_semantic_query")
    call.add_argument(
        "arguments", nargs="*", help="key=value (values parsed as JSON if they can be)"
    )

    index = commands.add_parser(
        "index",
        help="build or refresh the vault's passage index, with a progress bar",
        description="Build or refresh the vault's passage index (keywords and meaning) in "
        "the cache directory, with a progress bar; the server otherwise builds it in the "
        "background on its first query.",
    )
    vault_options(index)

    doctor = commands.add_parser(
        "doctor",
        help="check the configuration, one line per check",
        description="Check the configuration, one line per check with its fix. Exit status "
        "0 healthy, 2 degraded (the tools work with less, e.g. Obsidian closed but the "
        "vault folder serves), 1 broken (no source can serve the vault).",
    )
    vault_options(doctor)

    trust = commands.add_parser(
        "trust",
        help="show the plugin's certificate fingerprint, then store it",
        description="Download the Local REST API plugin's self-signed certificate, show its "
        "SHA-256 fingerprint, and store it once you confirm, so TLS stays verified.",
    )
    vault_options(trust)
    trust.add_argument(
        "--name",
        help="which configured vault's REST API (default: the default vault); each address's "
        "certificate is kept apart, so trusting one plugin keeps the others'",
    )
    trust.add_argument("--yes", action="store_true", help="store without asking")
    trust.add_argument(
        "--url",
        help="pin the certificate of the Local REST API at this address (any host, e.g. "
        "https://host.docker.internal:27124): the one it presents, by its SHA-256 fingerprint",
    )

    memory = commands.add_parser(
        "memory",
        help="list, forget or export what the agent remembers",
        description="What the agent remembers, without an agent: list the current memories "
        "(with ids), forget one by id (for good, on every device once synced), or export them "
        "as JSON lines. Reads the vault folder, else Obsidian's REST API.",
    )
    vault_options(memory)
    memory_name = "which configured vault's memories (default: the default vault)"
    memory.add_argument("--name", help=memory_name)
    memory_commands = memory.add_subparsers(dest="memory_command", required=True)
    listing = memory_commands.add_parser("list", help="current memories, newest last")
    listing.add_argument("--scope", help="one scope's memories and the shared ones")
    listing.add_argument("--all", action="store_true", help="superseded memories too")
    forget = memory_commands.add_parser("forget", help="forget one memory by its id")
    forget.add_argument("id", help="the memory's id, as list shows it")
    export = memory_commands.add_parser("export", help="current memories as JSON lines")
    export.add_argument("--all", action="store_true", help="superseded memories too")
    for command in (listing, forget, export):
        # `memory list --vault V` as well as `memory --vault V list`, like every command;
        # no default here, or it would undo a --vault given before the subcommand.
        vault_options(command, default=argparse.SUPPRESS)
        command.add_argument("--name", default=argparse.SUPPRESS, help=memory_name)

    stats = commands.add_parser(
        "stats",
        help="what the agent spent and where it missed, from the usage log",
        description="Read the usage log (kept when the server runs with "
        "OBSIDIAN_USAGE_LOG=on or full) and print, for a period: calls and reply tokens per "
        "tool (count, median, p90, total), errors by kind, the context spent on tool "
        "definitions, and the follow-ups that signal retrieval misses (a second search on "
        "similar words, a read of a note the search had not returned; with full, the "
        "questions and notes themselves). A table by default.",
    )
    stats.add_argument(
        "--since",
        help="only calls since then: an age ('7d', '12h', '2w') or a date ('2026-05-01'); "
        "default: everything logged",
    )
    stats.add_argument("--json", action="store_true", help="the same figures as JSON")
    stats.add_argument(
        "--html",
        type=Path,
        metavar="FILE",
        help="also write a self-contained HTML page with charts to FILE (no server needed)",
    )

    model = commands.add_parser("model", help="manage the embedding model")
    model_commands = model.add_subparsers(dest="model_command", required=True)
    fetch = model_commands.add_parser(
        "fetch", help="download a model by name into the cache (needs internet access)"
    )
    fetch.add_argument("name", help="the model's name on the hub, e.g. Xenova/all-MiniLM-L6-v2")
    return parser


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line; `call`'s key=value pairs may come before or after its options
    (`call vault_tree --vault V depth=1`)."""
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    if extra and (args.command != "call" or any(item.startswith("-") for item in extra)):
        parser.parse_args(argv)  # exits, naming what it did not recognise
    if extra:
        args.arguments = [*args.arguments, *extra]
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = _parse(argv)
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    named: list[str] = getattr(args, "vault", None) or []
    for vault in named:
        folder = Path(split_vault_argument(vault)[1]).expanduser()
        if args.command in ("serve", "call") and not folder.is_dir():
            raise SystemExit(
                f"obsidian-mcp {args.command}: --vault {vault} is not a folder; give the "
                "vault's root folder (the one that holds your notes), as PATH or NAME=PATH."
            )
    settings, vaults, problem = _settings(args)
    if args.command == "serve":
        _serve(settings, vaults, args, problem)
        return
    if args.command == "call":
        code = anyio.run(
            _call, settings, vaults, args.tool, _argument_pairs(args.arguments), problem
        )
        sys.exit(code)
    if problem is not None or vaults is None:
        raise SystemExit(f"obsidian-mcp: the settings are invalid: {problem}")
    try:
        code = _run(args, settings, vaults)
    except BrokenPipeError:
        # The reader stopped reading (`memory export | head -3`): it has what it wanted.
        # stdout goes nowhere from here, so the exit's own flush finds no closed pipe.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 0
    sys.exit(code)


def _run(args: argparse.Namespace, settings: Settings, vaults: VaultSet) -> int:
    if args.command == "index":
        return anyio.run(_index, vaults)
    if args.command == "doctor":
        return anyio.run(_doctor, vaults)
    if args.command == "memory":
        return anyio.run(_memory, vaults, args)
    if args.command == "model":
        return _fetch(settings, args.name)
    if args.command == "stats":
        return _stats(settings, args)
    if args.url is not None:
        return anyio.run(_trust_url, settings, args.url, args.yes)
    named = _chosen(vaults, args.name or vaults.default)[0]
    if named.problem is not None:
        print(f"obsidian-mcp trust: {named.problem}", file=sys.stderr)
        return 1
    return anyio.run(_trust, named.settings, args.yes)
