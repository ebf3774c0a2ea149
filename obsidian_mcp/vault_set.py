# pyright: strict
"""Which vaults one server serves, and the settings of each.

One vault, as always: the environment's `OBSIDIAN_*` variables, with `--vault PATH` for
its folder. Several: a TOML file (`--config FILE`, `OBSIDIAN_CONFIG`) with one
`[vaults.NAME]` table each, and `--vault NAME=PATH` for folders named on the command line.
Each vault gets the global settings (budgets, timeouts, cache folder) with its own folder
and REST API; a vault's API key is never given to another vault's host. Beside its vaults
the file may set the server's usage log (`SERVER_KEYS`); every other global setting stays in
the environment.
"""

import difflib
import logging
import tomllib
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

from obsidian_mcp.config import ApiKey, Fingerprint, RestUrl, Settings, api_key_problem
from obsidian_mcp.index.location import vault_identity
from obsidian_mcp.limits import excerpt
from obsidian_mcp.sources.tls import unverified_tls_refusal

logger = logging.getLogger(__name__)

# What a [vaults.NAME] table may set; everything else is global (OBSIDIAN_* variables).
_VAULT_KEYS = ("path", "url", "api_key", "cert", "cert_sha256", "default")
# What the file may set for the whole server, beside its vaults: the settings of these
# names (`usage_log = true` is OBSIDIAN_USAGE_LOG=on). The environment's variable, when
# set, wins: a one-off `OBSIDIAN_USAGE_LOG=off obsidian-mcp serve` needs no edit.
SERVER_KEYS = ("usage_log", "usage_log_max_bytes")
# What names the REST API of a single vault; with several, each vault's table does.
_PER_VAULT_VARIABLES = {
    "vault_path": "OBSIDIAN_VAULT_PATH",
    "api_key": "OBSIDIAN_API_KEY",
    "url": "OBSIDIAN_URL",
    "cert": "OBSIDIAN_CERT",
    "cert_sha256": "OBSIDIAN_CERT_SHA256",
}
# A name is typed as the tools' `vault` argument and written before a path (`lore:Note.md`):
# no colon or slash in it, and short enough to read in every result.
MAX_NAME_CHARS = 40
_NAME_EXAMPLE = "like lore or work-notes"


def name_key(name: str) -> str:
    """A vault name as names are compared: ignoring case and Unicode form (macOS writes
    NFD: `Café` typed there matches `Café` typed elsewhere)."""
    return unicodedata.normalize("NFC", name.strip()).casefold()


class VaultConfigError(ValueError):
    """The vaults cannot be configured as written; the message says what to change."""


@dataclass(frozen=True, slots=True)
class NamedVault:
    name: str
    settings: Settings
    # What in this vault's own settings cannot work (its table's mistake, a key no header
    # can carry, a pin switched off): the vault is listed and every call on it says this,
    # and no request is made for it; the other vaults are served as usual.
    problem: str | None = None
    # Where its settings are written: a table of the vaults file (its path), a --vault
    # argument ("--vault"), or the environment (""). Fixes name those settings
    # (`in_its_terms`), not the OBSIDIAN_* variables a vaults file ignores.
    origin: str = ""

    def in_its_terms(self, text: str) -> str:
        """`text` with each OBSIDIAN_* variable that configures one vault named as this
        vault's own setting where that is not the environment."""
        if not self.origin:
            return text
        if self.origin == "--vault":
            words = {
                "OBSIDIAN_VAULT_PATH": f"--vault {self.name}=PATH",
                "OBSIDIAN_API_KEY": f"api_key (a [vaults.{self.name}] table of a vaults "
                "file: --vault gives a folder only)",
            }
        else:
            table = f"[vaults.{self.name}] of {self.origin}"
            words = {
                "OBSIDIAN_URL (or OBSIDIAN_HOST/PORT)": f"url in {table}",
                "OBSIDIAN_CERT_SHA256": f"cert_sha256 in {table}",
                "OBSIDIAN_VAULT_PATH": f"path in {table}",
                "OBSIDIAN_API_KEY": f"api_key in {table}",
                "OBSIDIAN_URL": f"url in {table}",
                "OBSIDIAN_CERT": f"cert in {table}",
            }
        for variable, setting in words.items():
            text = text.replace(variable, setting)
        return text


@dataclass(frozen=True, slots=True)
class VaultSet:
    """The configured vaults in the order given; `default` answers what names no vault;
    `settings` the server's own (the environment's, with the file's `SERVER_KEYS`)."""

    vaults: tuple[NamedVault, ...]
    default: str
    settings: Settings

    @property
    def names(self) -> list[str]:
        return [vault.name for vault in self.vaults]

    @property
    def several(self) -> bool:
        return len(self.vaults) > 1

    def find(self, name: str) -> NamedVault | None:
        """The vault of this name, in any case ("Lore" finds lore)."""
        wanted = name_key(name)
        return next((v for v in self.vaults if name_key(v.name) == wanted), None)


def check_name(name: str) -> str:
    """The name, or VaultConfigError saying why it cannot name a vault."""
    if not name.strip():
        raise VaultConfigError(f"a vault needs a name, {_NAME_EXAMPLE}.")
    if name != name.strip() or any(ch in name for ch in ":/\\") or not name.isprintable():
        raise VaultConfigError(
            f"the vault name {excerpt(name)} cannot hold a colon, a slash, a control "
            f"character or spaces at its ends; name it {_NAME_EXAMPLE}."
        )
    if len(name) > MAX_NAME_CHARS:
        raise VaultConfigError(
            f"the vault name {excerpt(name)} is longer than {MAX_NAME_CHARS} characters."
        )
    return name


class _VaultTable(BaseModel):
    """One `[vaults.NAME]` table of the file."""

    model_config = ConfigDict(extra="forbid")

    path: Path | None = None
    url: RestUrl | None = None
    api_key: ApiKey = None
    cert: Path | None = None
    cert_sha256: Fingerprint | None = None
    default: bool = False


def _did_you_mean(key: str, known: Sequence[str]) -> str:
    guess = difflib.get_close_matches(key, known, n=1)
    return f" (did you mean {guess[0]!r}?)" if guess else ""


def _message(error: ErrorDetails) -> str:
    return error["msg"].removeprefix("Value error, ")


def _table_problem(name: str, exc: ValidationError) -> str:
    problems: list[str] = []
    for error in exc.errors():
        key = ".".join(str(part) for part in error["loc"]) or name
        if error["type"] == "extra_forbidden":
            problems.append(
                f"there is no setting {key!r} for a vault{_did_you_mean(key, _VAULT_KEYS)}; "
                f"it takes {', '.join(_VAULT_KEYS)} (global settings stay in the OBSIDIAN_* "
                "variables)"
            )
        else:
            problems.append(f"{key}: {_message(error)}")
    return f"[vaults.{name}] " + "; ".join(problems)


def _table_settings(name: str, raw: object, base: Settings, folder: Path) -> tuple[Settings, bool]:
    """One `[vaults.NAME]` table's settings and whether it is the default;
    VaultConfigError saying what in the table to change."""
    if not isinstance(raw, dict):
        raise VaultConfigError(f"vaults.{name} must be a table: [vaults.{name}] then its settings.")
    try:
        table = _VaultTable.model_validate(raw)
    except ValidationError as exc:
        raise VaultConfigError(_table_problem(name, exc)) from None
    if table.url is not None and table.api_key is None:
        raise VaultConfigError(
            f"[vaults.{name}] has a url but no api_key; copy the key from Obsidian > "
            "Settings > Local REST API."
        )
    if table.path is None and table.api_key is None:
        raise VaultConfigError(
            f"[vaults.{name}] names no source: give it path (the vault's folder on this "
            "machine), or api_key and url (its Local REST API), or both."
        )

    def beside_file(path: Path | None) -> Path | None:
        # A relative path is read from the file's folder, wherever the server starts.
        return None if path is None else folder / path.expanduser()

    settings = base.model_copy(
        update={
            "vault_path": beside_file(table.path),
            "api_key": table.api_key,
            "url": table.url,
            "cert": beside_file(table.cert),
            "cert_sha256": table.cert_sha256,
        }
    )
    return settings, table.default


def _without_sources(settings: Settings) -> Settings:
    return settings.model_copy(
        update={"vault_path": None, "api_key": None, "url": None, "cert": None, "cert_sha256": None}
    )


def rest_problem(settings: Settings, key_setting: str) -> str | None:
    """What would send this vault's API key where it does not belong, if anything: a key
    no HTTP header can carry (named by `key_setting`, never shown), or
    OBSIDIAN_VERIFY_TLS=false where it is refused (`unverified_tls_refusal`)."""
    if settings.api_key is None:
        return None
    problem = api_key_problem(settings.api_key)
    if problem is not None:
        return f"{key_setting} {problem}."
    return unverified_tls_refusal(settings)


def _from_table(
    name: str, raw: object, base: Settings, folder: Path, file: Path
) -> tuple[NamedVault, bool]:
    """The vault of one table; a mistake in the table is this vault's problem only."""
    check_name(name)
    try:
        settings, default = _table_settings(name, raw, base, folder)
    except VaultConfigError as exc:
        said_default = isinstance(raw, dict) and cast(dict[str, object], raw).get("default") is True
        problem = f"the vaults file {file}: {exc}"
        return NamedVault(name, _without_sources(base), problem, str(file)), said_default
    problem = rest_problem(settings, f"api_key in [vaults.{name}] of {file}")
    return NamedVault(name, settings, problem, str(file)), default


def _server_settings(file: Path, data: dict[str, Any], base: Settings) -> Settings:
    """`base` with the file's server-level settings, each validated as its variable is;
    one the environment sets keeps the environment's value."""
    settings = base.model_copy()
    for key in SERVER_KEYS:
        if key not in data:
            continue
        if key in base.model_fields_set:
            logger.warning(
                "OBSIDIAN_%s is set in the environment and overrides %s = %r in %s.",
                key.upper(),
                key,
                data[key],
                file,
            )
            continue
        try:
            validator = Settings.__pydantic_validator__
            settings = cast(Settings, validator.validate_assignment(settings, key, data[key]))
        except ValidationError as exc:
            problem = "; ".join(_message(error) for error in exc.errors())
            raise VaultConfigError(
                f"the vaults file {file}: {key} = {repr(data[key])[:80]} is refused: "
                f"{problem} (the README's OBSIDIAN_{key.upper()} says what it takes)."
            ) from None
    return settings


def _from_file(file: Path, base: Settings) -> tuple[Settings, list[tuple[NamedVault, bool]]]:
    """The server's settings with the file's (`_server_settings`), and its vaults."""
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise VaultConfigError(
            f"the vaults file {file} cannot be read ({exc.strerror or exc}); check "
            "--config or OBSIDIAN_CONFIG."
        ) from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise VaultConfigError(
            f"the vaults file {file} is not valid TOML: {exc}. Text goes in quotes (path = "
            '"/home/me/Lore"), true and false without; each [vaults.NAME] table once.'
        ) from None
    known = ("vaults", *SERVER_KEYS)
    extra = sorted(key for key in data if key not in known)
    if extra:
        raise VaultConfigError(
            f"the vaults file {file} has {', '.join(map(repr, extra))}"
            f"{_did_you_mean(extra[0], known)} beside [vaults.NAME] tables; it holds vaults "
            f"and {' and '.join(SERVER_KEYS)} only (every other global setting stays in the "
            "OBSIDIAN_* variables)."
        )
    tables = data.get("vaults")
    if not isinstance(tables, dict) or not tables:
        raise VaultConfigError(
            f"the vaults file {file} names no vault; add a [vaults.NAME] table with path "
            "= the vault's folder."
        )
    folder = file.expanduser().resolve().parent
    settings = _server_settings(file, data, base)
    try:
        return settings, [
            _from_table(name, raw, settings, folder, file)
            for name, raw in cast(dict[str, object], tables).items()
        ]
    except VaultConfigError as exc:
        raise VaultConfigError(f"the vaults file {file}: {exc}") from None


def split_vault_argument(argument: str) -> tuple[str | None, str]:
    """A `--vault` argument as (its NAME, or None for a bare PATH; the PATH). A folder
    whose own name holds `=` (`~/Notes=2024`) is that folder, not a name and a path."""
    name, sep, path = argument.partition("=")
    if not sep or Path(argument).expanduser().is_dir() or "/" in name or "\\" in name:
        return None, argument
    return name, path


def _from_argument(argument: str, base: Settings) -> NamedVault:
    """`NAME=PATH`, or a bare PATH named after its folder."""
    name, path = split_vault_argument(argument)
    if name is None:
        name = Path(argument).expanduser().resolve().name
    folder = Path(path).expanduser()
    if not path.strip():
        raise VaultConfigError(f"--vault {excerpt(argument)} names no folder; write NAME=PATH.")
    settings = base.model_copy(
        update={
            "vault_path": folder,
            "api_key": None,
            "url": None,
            "cert": None,
            "cert_sha256": None,
        }
    )
    return NamedVault(check_name(name), settings, origin="--vault")


def _one_vault(settings: Settings) -> NamedVault:
    """Today's single vault, from the environment; named after its folder."""
    folder = settings.vault_path
    name = folder.expanduser().resolve().name if folder is not None else ""
    return NamedVault(name if name and ":" not in name else "vault", settings)


def _ignored_variables(settings: Settings) -> Iterable[str]:
    return (
        variable
        for field, variable in _PER_VAULT_VARIABLES.items()
        if field in settings.model_fields_set and getattr(settings, field) is not None
    )


def _check_distinct(vaults: Sequence[NamedVault]) -> None:
    """Refuse two vaults of one name (a bare PATH is named after its folder, so /a/Notes
    and /b/Notes collide) or of one source: one folder or one REST API served twice would
    share an index and a memory store under two names."""
    names: dict[str, str] = {}
    sources: dict[str, str] = {}
    for vault in vaults:
        if name_key(vault.name) in names:
            raise VaultConfigError(
                f"two vaults are named {vault.name!r} (names are compared ignoring case, and "
                "a bare --vault PATH is named after its folder); give each its own name: "
                "--vault NAME=PATH, or its own [vaults.NAME] table."
            )
        names[name_key(vault.name)] = vault.name
        if vault.problem is not None:
            continue  # never served, so it shares nothing with another vault
        identity, _ = vault_identity(vault.settings)
        if identity in sources:
            where = identity.split(":", 1)[1]
            raise VaultConfigError(
                f"{sources[identity]} and {vault.name} are the same vault ({where}); keep "
                "one of them."
            )
        sources[identity] = vault.name
    _refuse_nested([vault for vault in vaults if vault.problem is None])


def _refuse_nested(vaults: Sequence[NamedVault]) -> None:
    """Refuse a vault whose folder is inside another's: the outer vault's searches, tree
    and reads would show the inner one's notes and memories as its own."""
    folders = [
        (vault.name, vault.settings.vault_path.expanduser().resolve())
        for vault in vaults
        if vault.settings.vault_path is not None
    ]
    for name, folder in folders:
        for other, outer in folders:
            if other != name and folder.is_relative_to(outer):
                raise VaultConfigError(
                    f"the vault {name} ({folder}) is inside the vault {other} ({outer}): "
                    f"{other}'s searches would show {name}'s notes and memories as its own. "
                    f"Serve one of them, or point {name} at a folder outside {outer}."
                )


def configured_vaults(settings: Settings, arguments: Sequence[str] = ()) -> VaultSet:
    """The vaults of `settings.config` (a TOML file) and of `--vault` arguments; without a
    file and with at most one argument, the single vault of the environment (the argument
    its folder). VaultConfigError says what to change."""
    if settings.config is None and len(arguments) <= 1:
        single = settings
        if arguments:
            name, folder = split_vault_argument(arguments[0])
            single = settings.model_copy(update={"vault_path": Path(folder).expanduser()})
            vault = NamedVault(
                check_name(name) if name is not None else _one_vault(single).name, single
            )
        else:
            vault = _one_vault(single)
        problem = rest_problem(single, "OBSIDIAN_API_KEY")
        if problem is not None:
            vault = NamedVault(vault.name, single, problem)
        return VaultSet((vault,), vault.name, settings)
    found: list[tuple[NamedVault, bool]] = []
    if settings.config is not None:
        settings, found = _from_file(settings.config.expanduser(), settings)
    found += [(_from_argument(argument, settings), False) for argument in arguments]
    _check_distinct([vault for vault, _ in found])
    defaults = [vault.name for vault, default in found if default]
    if len(defaults) > 1:
        raise VaultConfigError(
            f"{' and '.join(defaults)} both say default = true; keep it on one vault."
        )
    ignored = list(_ignored_variables(settings))
    if ignored:
        logger.warning(
            "%s configure a single vault and are ignored with several: each vault's own "
            "table (or --vault NAME=PATH) says where it is.",
            ", ".join(ignored),
        )
    vaults = tuple(vault for vault, _ in found)
    return VaultSet(vaults, defaults[0] if defaults else vaults[0].name, settings)
