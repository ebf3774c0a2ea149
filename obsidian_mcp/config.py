"""Settings, read from the environment.

The `OBSIDIAN_*` names match other Obsidian MCP servers, so a user can switch without
rewriting their client configuration.
"""

import ipaddress
import os
import re
import sys
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator, Field, SecretStr, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from obsidian_mcp.limits import excerpt

# Characters kept in a certificate file's name made from an address (an IPv6 address's
# colons are not allowed in Windows file names).
_UNSAFE_IN_FILE_NAMES = re.compile(r"[^A-Za-z0-9.-]")
# Before certificates were kept per address, `trust` stored one file for every vault.
_CERT_STORED_FOR_EVERY_ADDRESS = "obsidian-local-rest-api.pem"

# The retrieval stages that can be switched off one at a time, for the benchmark's ablation
# table (`python -m bench.retrieval.ablation`); `obsidian_mcp.retrieval.stages` says what each does.
StageName = Literal["keyword", "dense", "semantic", "seats", "currency", "cutting"]

# The tool families OBSIDIAN_TOOLS picks from, and their tools. Clients send every listed
# tool's definition with every request, so a client that only remembers and searches
# should not pay for the rest.
ToolFamily = Literal["search", "read", "memory", "scratch", "edit"]
TOOL_FAMILIES: dict[ToolFamily, tuple[str, ...]] = {
    "search": (
        "vault_semantic_query",
        "vault_smart_search",
        "vault_quick_context",
        "vault_find_related",
        "vault_search_map",
    ),
    "read": ("vault_read_note", "vault_peek_file", "vault_tree"),
    "memory": ("vault_remember", "vault_recall", "vault_forget"),
    "scratch": ("vault_scratch_append",),
    "edit": ("vault_edit_note", "vault_undo_edit"),
}


# The plugin's ports, for a URL that names none (`DEFAULT_SETTINGS` in its src/constants.ts).
PLUGIN_PORTS = {"https": 27124, "http": 27123}
# Where `serve --http` listens unless told otherwise: this machine only.
MCP_HTTP_HOST = "127.0.0.1"
MCP_HTTP_PORT = 8765
_HEX_FINGERPRINT = re.compile(r"[0-9A-F]{64}")
_LOOPBACK_NAMES = frozenset({"localhost"})


def is_loopback(host: str) -> bool:
    """Whether a host name or address is this machine's loopback (127.0.0.0/8, ::1,
    localhost): what nobody else can answer for."""
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def rest_url(value: str) -> str:
    """A Local REST API address as `scheme://host:port[/path]`, the port the plugin's when
    the URL names none; ValueError saying what is wrong."""
    parts = urlsplit(value.strip())
    example = "like https://192.168.65.254:27124"
    if parts.scheme not in PLUGIN_PORTS:
        raise ValueError(f"{excerpt(value)} is not an http(s) URL; write it {example}.")
    if not parts.hostname or parts.query or parts.fragment or parts.username:
        raise ValueError(f"{excerpt(value)} must name a host and nothing else; write it {example}.")
    try:
        port = parts.port or PLUGIN_PORTS[parts.scheme]
    except ValueError:
        raise ValueError(f"{excerpt(value)} has no valid port; write it {example}.") from None
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return f"{parts.scheme}://{host}:{port}{parts.path.rstrip('/')}"


def normalized_fingerprint(value: str) -> str:
    """A SHA-256 fingerprint as `AB:CD:...` (upper case, colons), whatever its spelling;
    ValueError if it is not one."""
    digits = re.sub(r"[\s:]", "", value).upper()
    if not _HEX_FINGERPRINT.fullmatch(digits):
        raise ValueError(
            "a SHA-256 fingerprint is 64 hexadecimal digits, colons optional (`obsidian-mcp "
            "trust --url URL` shows it)."
        )
    return ":".join(digits[i : i + 2] for i in range(0, 64, 2))


def trimmed_key(value: object) -> object:
    """An API key as typed or pasted, without the white space around it; an empty one is
    no key. What is left is judged by `api_key_problem`, never here: a validation error
    would carry the key into every message that shows what was given."""
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if isinstance(value, str):
        value = value.strip()
        return value or None
    return value


def api_key_problem(key: SecretStr) -> str | None:
    """Why this key cannot be sent in an HTTP header, said without a character of it
    (its kind of fault and where it stands); None for a usable key. The plugin's keys are
    64 hexadecimal digits: a line break or a non-ASCII character is a paste gone wrong,
    and the HTTP library would refuse it with the whole header in its message."""
    text = key.get_secret_value()
    for position, char in enumerate(text, 1):
        if char.isascii() and char.isprintable():
            continue
        if char in "\r\n":
            kind = "a line break"
        elif char.isascii() or (not char.isprintable() and ord(char) < 0xA0):
            kind = "a control character"
        else:
            kind = "a non-ASCII character"
        return (
            f"holds {kind} (character {position:,} of {len(text):,}); copy the key again "
            "from Obsidian > Settings > Local REST API"
        )
    return None


# A REST API address, a certificate fingerprint and an API key, as the settings and a
# vault's table (`vault_set`) take them: normalised, or refused saying what is wrong.
RestUrl = Annotated[str, AfterValidator(rest_url)]
Fingerprint = Annotated[str, AfterValidator(normalized_fingerprint)]
ApiKey = Annotated[SecretStr | None, BeforeValidator(trimmed_key)]

# What the usage log keeps (`obsidian_mcp.usage`): nothing, hashes of the questions and
# note paths, or the questions and note paths themselves.
UsageLogMode = Literal["off", "on", "full"]

# Yes/no words a switch setting accepts besides its own values.
_SWITCH_WORDS = {"true": "on", "yes": "on", "1": "on", "false": "off", "no": "off", "0": "off"}


def default_config_dir() -> Path:
    return Path.home() / ".config" / "obsidian-mcp"


def default_cache_dir() -> Path:
    """The user's cache folder (`$XDG_CACHE_HOME`, else the platform's usual place) plus
    `obsidian-mcp`: outside every vault."""
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    if xdg and Path(xdg).is_absolute():  # the XDG spec: a relative path is ignored
        base = Path(xdg)
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    else:
        base = Path.home() / ".cache"
    return base / "obsidian-mcp"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="OBSIDIAN_", extra="ignore")

    api_key: ApiKey = Field(
        default=None,
        description="Local REST API key (Obsidian > Settings > Local REST API). "
        "Without it (or empty) the server reads the vault folder only. White space around "
        "it is ignored; a key with a line break, another control character or a non-ASCII "
        "character is refused, and never shown.",
    )
    host: str = Field(
        default="127.0.0.1",
        description="Host of the Local REST API. Keep 127.0.0.1: the plugin's certificate "
        "names that IP only, not localhost.",
    )
    port: int = Field(default=27124, ge=1, le=65535, description="Local REST API port.")
    protocol: Literal["https", "http"] = Field(
        default="https", description="https (the plugin's default, port 27124) or http (27123)."
    )
    url: RestUrl | None = Field(
        default=None,
        description="The Local REST API's address on any host, e.g. "
        "https://host.docker.internal:27124 (the port defaults to the plugin's). Replaces "
        "OBSIDIAN_HOST, OBSIDIAN_PORT and OBSIDIAN_PROTOCOL.",
    )
    cert_sha256: Fingerprint | None = Field(
        default=None,
        description="The SHA-256 fingerprint of the REST API's certificate (`obsidian-mcp "
        "trust --url URL` shows it and stores it): the certificate must be exactly that one, "
        "and the host name it names is not checked (the plugin's names 127.0.0.1 only).",
    )
    config: Path | None = Field(
        default=None,
        description="A TOML file naming several vaults, one [vaults.NAME] table each (path, "
        "url, api_key, cert, cert_sha256, default); `serve --config FILE` sets it too.",
    )
    vault_path: Path | None = Field(
        default=None,
        description="The vault folder on disk. Used when Obsidian is closed, and for what "
        "only the disk has (Smart Connections vectors, empty folders).",
    )
    cert: Path | None = Field(
        default=None,
        description="PEM certificate to trust for the REST API. Default: the one stored by "
        "`obsidian-mcp trust`.",
    )
    verify_tls: bool = Field(
        default=True,
        description="Verify the REST API's certificate. false is accepted only for a REST "
        "API on this machine (127.0.0.1, ::1, localhost) with no pinned certificate: a pin "
        "is never switched off, and the key never goes unverified to another host (pin its "
        "certificate with `obsidian-mcp trust --url URL` instead).",
    )
    config_dir: Path = Field(
        default_factory=default_config_dir,
        description="Where `obsidian-mcp trust` stores the plugin certificate.",
    )
    connect_timeout: float = Field(
        default=3.0, gt=0, description="Seconds to wait for a connection to Obsidian."
    )
    request_timeout: float = Field(
        default=10.0,
        gt=0,
        description="Seconds to wait for one REST response; a 3.x plugin can hang forever.",
    )
    retry_attempts: int = Field(
        default=3,
        ge=1,
        le=10,
        description="Attempts for an idempotent REST request on transport errors, 429 or 5xx.",
    )
    retry_budget: float = Field(
        default=20.0,
        gt=0,
        description="Upper bound in seconds on all attempts of one request, waits included.",
    )
    memory_path: str = Field(
        default="obsidian-mcp/memory.jsonl",
        description="Vault path of the memory file. Not hidden, so Obsidian and sync see it.",
    )
    memory_device: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]{1,32}$",
        description="This installation's name in the memory files' names (lower-case "
        "letters and digits). Default: a random id kept in the config folder; set it where "
        "that folder does not last (a container started afresh each time).",
    )
    memory_meaning: bool = Field(
        default=True,
        description="Rank recalled memories by meaning too, with the local embedding model "
        "(loaded in the background; its vectors are cached outside the vault).",
    )
    scratch_path: str = Field(
        default="obsidian-mcp/scratch.md",
        description="Vault path of the scratch note that vault_scratch_append writes to.",
    )
    max_tokens: int = Field(
        default=1000,
        ge=100,
        le=20000,
        description="Default token budget of one tool response (tokens ~ characters / 4).",
    )
    read_max_chars: int = Field(
        default=6000,
        ge=200,
        le=100_000,
        description="Default characters vault_read_note returns before it cuts and says how "
        "to continue.",
    )
    semantic_route: str | None = Field(
        default=None,
        description="A custom semantic-search route on the REST API (e.g. "
        "/smart-connections/search/), answered with {query}; tried after /search/smart.",
    )
    related_route: str | None = Field(
        default=None,
        description="A custom find-similar route on the REST API (e.g. "
        "/smart-connections/find-similar/), answered with {path}.",
    )
    cache_dir: Path = Field(
        default_factory=default_cache_dir,
        description="Where the server keeps what it can rebuild (fetched models, the index); "
        "never inside the vault, which users sync.",
    )
    model_path: Path | None = Field(
        default=None,
        description="A folder holding another embedding model: model.onnx (an ONNX export "
        "that outputs a vector per word piece, or one per text) and tokenizer.json, plus "
        'optionally model.json {"model_id", "max_tokens", "pooling", "prompts", '
        '"described_by"} (README, "Another embedding model"). Default: the bundled '
        "all-MiniLM-L6-v2.",
    )
    model: str | None = Field(
        default=None,
        description="A model fetched by name with `obsidian-mcp model fetch NAME` (e.g. "
        "Xenova/all-MiniLM-L6-v2), used from the cache. OBSIDIAN_MODEL_PATH wins if both.",
    )
    model_threads: int = Field(
        default=1,
        ge=1,
        le=16,
        description="CPU threads for the embedding model. 1 keeps a core free for the event "
        "loop on small machines; more makes the first index build faster.",
    )
    model_hub_url: str = Field(
        default="https://huggingface.co",
        description="Where `obsidian-mcp model fetch` downloads from (the Hugging Face hub "
        "URL layout: <url>/<name>/resolve/main/<file>); a mirror works too.",
    )
    tools: Annotated[frozenset[ToolFamily], NoDecode] = Field(
        default=frozenset(TOOL_FAMILIES),
        description="The tool families a client sees, comma-separated (default: all of "
        "them): "
        + "; ".join(f"{family} ({', '.join(names)})" for family, names in TOOL_FAMILIES.items())
        + ". The server's instructions mention only the tools listed.",
    )
    edits: bool = Field(
        default=True,
        description="Offer the editing tools (vault_edit_note, vault_undo_edit). off: the "
        "server never changes a note, whatever OBSIDIAN_TOOLS lists.",
    )
    stages_off: frozenset[StageName] = Field(
        default=frozenset(),
        description='Retrieval stages to switch off, as JSON (e.g. ["seats"]; [] runs them '
        "all, the default): for measuring what each stage is worth (`python -m "
        "bench.retrieval.ablation`).",
    )

    mcp_http_token: SecretStr | None = Field(
        default=None,
        description="Bearer token HTTP clients must send to `serve --http`. Unset: a new one "
        "is generated at each start and printed to stderr.",
    )

    index_dir: Path | None = Field(
        default=None,
        description="Folder of the persistent passage index (one SQLite file per vault). "
        "Default: OBSIDIAN_CACHE_DIR/index. Never inside the vault: vaults are synced.",
    )
    index_refresh_seconds: float = Field(
        default=2.0,
        ge=0,
        le=600,
        description="How often, at most, a query lists the vault's note stats to find notes "
        "changed outside this server: an edit in Obsidian or on disk is used by every query "
        "that starts this many seconds after it (a listing's age counts from its start); 0: "
        "every query checks. During a first build, by the first such query after the build "
        "has read every note; meanwhile a question's search of a folder vault's notes not "
        "read yet may reuse a scan this recent. While calls come (one within 5 minutes), the "
        "server lists in the background a little more often than this (at most half the "
        "time, in a vault whose listing takes longer) and takes an edit in before the next "
        "question; idle, it lists nothing.",
    )
    index_read_wait_seconds: float = Field(
        default=2.0,
        ge=0,
        le=3600,
        description="How long a session's first vault_semantic_query (or "
        "vault_find_related) waits for notes not yet read into the index (the first build "
        "of a big vault), and then, if they were all read, for Smart Connections' stored "
        "vectors, before it answers from what is read and says how much; it stops waiting "
        "as soon as the read's pace says it will not end in time. "
        "Later ones do not wait. Reading goes on in the background, about 400 notes a "
        "second on a 2-core machine through the folder.",
    )
    index_meaning_wait_seconds: float = Field(
        default=30.0,
        ge=0,
        le=600,
        description="A small vault's first vault_semantic_query waits for the meaning index "
        "when what is left to embed fits in this many seconds (about 50 passages a second on "
        "a 2-core machine), so the first session ranks by meaning from its first answer; a "
        "vault with more left answers at once from what is ready and says how far it is. "
        "0: never wait.",
    )
    index_on_demand_passages: int = Field(
        default=30,
        ge=0,
        le=500,
        description="While the meaning index is incomplete and no Smart Connections source "
        "ranks by meaning, a vault_semantic_query first embeds the first text of this many of "
        "its best keyword passages that lack vectors (about 0.4 s for 30 on two cores), so what "
        "the words found is ranked by meaning too; fewer (16 at least) when the last ones' pace "
        "says all would not be done within 0.75 s of the question's start. 0: rank with what "
        "the build has done.",
    )
    index_embeddings: bool = Field(
        default=True,
        description="Rank passages by meaning with the local embedding model (vectors kept in "
        "the passage index). false: keywords and the other semantic sources only.",
    )

    usage_log: UsageLogMode = Field(
        default="off",
        description="Keep a usage log for `obsidian-mcp stats`: one JSON line per tool call "
        "in OBSIDIAN_CACHE_DIR/usage (outside the vault; nothing is sent anywhere). on: "
        "questions, note paths and headings as keyed hashes; full: as written, so stats can "
        "list the misses. true and false mean on and off.",
    )
    usage_log_max_bytes: int = Field(
        default=10_000_000,
        ge=1000,
        le=10**12,
        description="The usage log is rotated at this size; two files are kept, so it takes "
        "at most twice this on disk.",
    )

    @field_validator("usage_log", mode="before")
    @classmethod
    def _usage_log_switch(cls, value: object) -> object:
        """on/off/full in any case, and a yes/no as a switch: `true` from the environment,
        or `usage_log = true` from a configuration file (a TOML boolean)."""
        if isinstance(value, bool):
            return "on" if value else "off"
        if isinstance(value, str):
            word = value.strip().lower()
            return _SWITCH_WORDS.get(word, word)
        return value

    @field_validator("tools", mode="before")
    @classmethod
    def _tool_families(cls, value: object) -> object:
        """`search,memory` from the environment; a family it does not know is refused with
        the ones it does."""
        if not isinstance(value, str):
            return value
        names = [name.strip().lower() for name in value.split(",") if name.strip()]
        unknown = [name for name in names if name not in TOOL_FAMILIES]
        known = ", ".join(TOOL_FAMILIES)
        if unknown:
            named = ", ".join(excerpt(name) for name in unknown)
            raise ValueError(f"there is no tool family {named}; the families are {known}.")
        if not names:
            raise ValueError(f"name at least one tool family, comma-separated: {known}.")
        return frozenset(names)

    @property
    def listed_tools(self) -> frozenset[str]:
        """The names of the tools in the families OBSIDIAN_TOOLS lists."""
        return frozenset(name for family in self.families for name in TOOL_FAMILIES[family])

    @property
    def families(self) -> frozenset[ToolFamily]:
        """The tool families served: OBSIDIAN_TOOLS, without editing when OBSIDIAN_EDITS
        is off."""
        return self.tools if self.edits else self.tools - {"edit"}

    @property
    def usage_log_dir(self) -> Path:
        """Where the usage log and its rotated file are kept: the cache folder, never the
        vault, which users sync."""
        return self.cache_dir / "usage"

    @property
    def base_url(self) -> str:
        return self.url if self.url is not None else f"{self.protocol}://{self.host}:{self.port}"

    @property
    def uses_https(self) -> bool:
        return self.base_url.startswith("https://")

    @property
    def rest_host(self) -> str:
        """The REST API's host name or address, as configured."""
        return urlsplit(self.base_url).hostname or ""

    @property
    def rest_address(self) -> str:
        """The REST API's address without its scheme: host:port, and a path if it has one."""
        return self.base_url.split("://", 1)[1]

    @property
    def stored_cert(self) -> Path:
        """Where `trust` keeps this REST API's certificate: a file per address, so that
        trusting a second plugin (another vault, another port) keeps the first one's."""
        parts = urlsplit(self.base_url)
        address = f"{parts.hostname}_{parts.port or 443}"
        return self.config_dir / "certificates" / (_UNSAFE_IN_FILE_NAMES.sub("_", address) + ".pem")

    def trusted_cert(self) -> Path | None:
        """The certificate to verify against: `OBSIDIAN_CERT`, else the one stored for this
        address, else the one earlier versions stored for every address (a certificate it
        does not match is still refused, so it sends no key anywhere new)."""
        if self.cert is not None:
            return self.cert
        for stored in (self.stored_cert, self.config_dir / _CERT_STORED_FOR_EVERY_ADDRESS):
            if stored.is_file():
                return stored
        return None
