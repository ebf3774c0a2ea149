"""Which vault a configuration points at, told through the vault folder and through REST.

The Local REST API reports no vault identifier: `GET /` names the plugin and Obsidian
versions only, in every version 3.x-6.x (`shared/reference/local-rest-api.md` §1.2), and
its address says nothing, since another vault can be served on the same port later. What
does tell one vault from another:

- The plugin's API key. The plugin generates it when it is first enabled in a vault (the
  sha256 of random bytes) and stores it in that vault's
  `.obsidian/plugins/obsidian-local-rest-api/data.json` (`apiKey`), and it accepts no
  other (`requestIsAuthenticated`). So the key REST accepts names the vault it serves,
  and with the folder known, its `data.json` names the key the folder's vault accepts:
  two different keys are two different vaults. Copying a vault's `.obsidian` folder to
  start another copies its key too, so an equal key is evidence, never proof.
- The notes. The root listing (`GET /vault/`, every version: files, and folders that
  hold a file) against the folder's; and a sample of notes' sizes and modification times
  (the note JSON's `stat`, every version) against the folder's own stat.

Used for three things: the undo journal is keyed by the vault, not the address
(`journal_identity`); edits of one vault from several processes share a lock
(`lock_names`); and a folder and an API key that disagree are found at start, by
`obsidian-mcp doctor` and before edits, which are refused until they agree
(`compare_sources`).
"""

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, cast

from obsidian_mcp.config import Settings
from obsidian_mcp.errors import VaultError
from obsidian_mcp.index.store import index_file
from obsidian_mcp.paths import is_markdown
from obsidian_mcp.sources.folder import FolderSource, mtime_ms
from obsidian_mcp.sources.recovery import RecoveryLog
from obsidian_mcp.sources.rest import RestSource

logger = logging.getLogger(__name__)

PLUGIN_DATA = Path(".obsidian") / "plugins" / "obsidian-local-rest-api" / "data.json"
# Notes whose stat is compared through both: enough that a few notes changed between the
# two reads cannot decide, few enough to cost a dozen requests at start.
SAMPLE_NOTES = 8
# A note changed this recently may not be in Obsidian's cache yet: left out of the sample.
RECENT_SECONDS = 10.0
# Obsidian's stat is the file's, in milliseconds; a network filesystem may round it.
MTIME_SLACK_MS = 2000
# Of the sampled notes present on both sides, at least this share must match for "same",
# and at most the other for "different"; in between (a sync running) says nothing.
AGREE_SHARE = 0.75
DISAGREE_SHARE = 0.25

# Root listings smaller than this tell nothing alone (a new vault, a note just created).
MIN_LISTING = 3

Verdict = Literal["same", "different", "unknown"]


@dataclass(frozen=True, slots=True)
class IdentityCheck:
    verdict: Verdict
    evidence: str


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()[:32]


def key_on_disk(root: Path) -> str | None:
    """The API key the folder's vault accepts, from the plugin's settings; None without."""
    try:
        data: object = json.loads((root / PLUGIN_DATA).read_text("utf-8"))
    except (OSError, ValueError):
        return None
    key = cast(dict[str, object], data).get("apiKey") if isinstance(data, dict) else None
    return key if isinstance(key, str) and key else None


def journal_identity(settings: Settings) -> tuple[str, str]:
    """(identity, a readable name) of the vault whose edits a journal keeps: its folder
    when known (edits are written there), else the API key Obsidian accepts, which is that
    vault's own; never the address, which another vault may answer on later."""
    if settings.vault_path is not None:
        folder = settings.vault_path.expanduser().resolve()
        return f"folder:{folder}", folder.name
    if settings.api_key is not None:
        key = digest(settings.api_key.get_secret_value())
        return f"rest-key:{key}", f"obsidian-{settings.port}"
    return f"rest:{settings.host}:{settings.port}", f"obsidian-{settings.port}"


def journal_file(settings: Settings) -> Path:
    """The undo journal of the configured vault, in the cache folder."""
    identity, name = journal_identity(settings)
    return index_file(settings.cache_dir / "edits", identity, name)


def recovery_log(settings: Settings) -> RecoveryLog:
    """Where edits of the configured vault folder keep a note's previous text meanwhile."""
    return RecoveryLog(journal_file(settings).with_suffix(".pending"))


def lock_names(settings: Settings) -> list[str]:
    """Names of the vault whose edits must not overlap: its folder, and every API key it
    is known by (configured, or in the folder's plugin settings). Two processes serving the
    vault through different settings share one of them."""
    names: set[str] = set()
    if settings.api_key is not None:
        names.add("key:" + digest(settings.api_key.get_secret_value()))
    if settings.vault_path is not None:
        folder = settings.vault_path.expanduser().resolve()
        names.add(f"folder:{folder}")
        disk_key = key_on_disk(folder)
        if disk_key is not None:
            names.add("key:" + digest(disk_key))
    return sorted(names)


def _rest_listing_of(disk: FolderSource) -> set[str]:
    """The vault root as `GET /vault/` lists it: files, and folders holding some file."""
    root = disk.root
    listed: set[str] = set()
    for name in disk.names_in(""):
        if name.startswith("."):
            continue
        entry = root / name
        if entry.is_file():
            listed.add(name)
        elif entry.is_dir() and _holds_a_file(entry):
            listed.add(name + "/")
    return listed


def _holds_a_file(folder: Path) -> bool:
    for _, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        if any(not f.startswith(".") for f in files):
            return True
    return False


def _sample(disk: FolderSource, listing: set[str]) -> list[tuple[str, os.stat_result]]:
    """Notes to compare, spread over the vault: the root's notes first, then a few from
    each listed folder; none changed in the last RECENT_SECONDS."""
    now = time.time()
    picked: list[tuple[str, os.stat_result]] = []

    def take(path: str) -> None:
        try:
            st = (disk.root / path).stat()
        except OSError:
            return
        if now - st.st_mtime >= RECENT_SECONDS:
            picked.append((path, st))

    for name in sorted(listing):
        if len(picked) >= SAMPLE_NOTES:
            break
        if is_markdown(name):
            take(name)
        elif name.endswith("/"):
            for inner in disk.names_in(name.rstrip("/"))[:2]:
                if is_markdown(inner) and not inner.startswith("."):
                    take(name + inner)
    return picked[:SAMPLE_NOTES]


async def compare_sources(rest: RestSource, disk: FolderSource) -> IdentityCheck:
    """Whether Obsidian's API and the folder show one vault. VaultError when Obsidian does
    not answer (the caller says "unknown")."""
    configured = rest.key_digest()
    on_disk = key_on_disk(disk.root)
    if configured is not None and on_disk is not None and digest(on_disk) != configured:
        return IdentityCheck(
            "different",
            f"Obsidian accepts the configured API key, but the vault folder's own Local REST "
            f"API settings ({PLUGIN_DATA}) hold another key",
        )
    listing = _rest_listing_of(disk)
    served = set(await rest.list_folder(""))
    if not listing and not served:
        return IdentityCheck("unknown", "both are empty")
    overlap = len(listing & served) / max(1, len(listing | served))
    sample = _sample(disk, listing & served)
    matched = 0
    for path, st in sample:
        try:
            seen = await rest.stat(path)
        except VaultError:
            seen = None
        if (
            seen is not None
            and seen.size == st.st_size
            and abs(seen.mtime_ms - mtime_ms(st)) <= MTIME_SLACK_MS
        ):
            matched += 1
    share = matched / len(sample) if sample else None
    said = (
        f"{len(listing & served)} of {len(listing | served)} names at the vault root in "
        "common" + (f", {matched} of {len(sample)} sampled notes alike" if sample else "")
    )
    # Without a sample (every note changed a moment ago), only a root listing of some size
    # that mostly differs says anything.
    sizable = min(len(listing), len(served)) >= MIN_LISTING
    if (share is not None and share <= DISAGREE_SHARE) or (
        share is None and sizable and overlap < 0.5
    ):
        return IdentityCheck("different", said)
    if (share is not None and share >= AGREE_SHARE) or (share is None and overlap == 1.0):
        same = "same API key, " if on_disk is not None and configured is not None else ""
        return IdentityCheck("same", same + said)
    return IdentityCheck("unknown", said)
