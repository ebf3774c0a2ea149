"""The bundled demo vault, and copies of it for tests and benchmarks."""

import shutil
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
FIXTURE_VAULT = REPO_ROOT / "fixtures" / "vault"
# What a user's demo calls write into fixtures/vault (git-ignored there): the memory file and
# scratch note at their default paths. Copies leave it out, so every run starts from the
# fixture as committed.
DEMO_WRITES = "obsidian-mcp"


def copy_fixture_vault(target: Path) -> Path:
    shutil.copytree(FIXTURE_VAULT, target, ignore=_demo_writes)
    return target


def _demo_writes(folder: str, names: list[str]) -> list[str]:
    return [DEMO_WRITES] if Path(folder) == FIXTURE_VAULT and DEMO_WRITES in names else []
