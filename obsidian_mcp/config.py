"""Settings, read from the environment.

The `OBSIDIAN_*` names match other Obsidian MCP servers, so a user can switch without
rewriting their client configuration.
"""

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


def default_config_dir() -> Path:
    return Path.home() / ".config" / "obsidian-mcp"


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="OBSIDIAN_", extra="ignore")

    api_key: SecretStr | None = Field(
        default=None,
        description="Local REST API key (Obsidian > Settings > Local REST API). "
        "Without it the server reads the vault folder only.",
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
        description="Verify the REST API's certificate. Turning this off is an explicit "
        "opt-in; it affects only this server's REST client.",
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

    index_dir: Path | None = Field(
        default=None,
        description="Folder of the persistent passage index (one SQLite file per vault). "
        "Default: the user's cache folder ($XDG_CACHE_HOME/obsidian-mcp/index or "
        "~/.cache/obsidian-mcp/index). Never inside the vault: vaults are synced.",
    )
    index_refresh_seconds: float = Field(
        default=2.0,
        ge=0,
        le=600,
        description="How often, at most, a query lists the vault's note stats to find notes "
        "changed outside this server: an edit in Obsidian or on disk is used by every query "
        "that starts this many seconds after it (0: every query checks).",
    )
    index_embeddings: bool = Field(
        default=True,
        description="Rank passages by meaning with the local embedding model (vectors kept in "
        "the passage index). false: keywords and the other semantic sources only.",
    )

    @property
    def base_url(self) -> str:
        return f"{self.protocol}://{self.host}:{self.port}"

    @property
    def stored_cert(self) -> Path:
        return self.config_dir / "obsidian-local-rest-api.pem"

    def trusted_cert(self) -> Path | None:
        """The certificate to verify against: `OBSIDIAN_CERT`, else the stored one."""
        if self.cert is not None:
            return self.cert
        return self.stored_cert if self.stored_cert.is_file() else None
