"""Shared fixtures: the bundled vault, copied so tests may change it, and the stand-in."""

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from obsidian_mcp.config import Settings
from obsidian_mcp.index.embedder import OnnxEmbedder, default_model_files
from tests.fixture_vault import copy_fixture_vault
from tests.standin.process import StandinProcess

# Caches (the memory index) go to a scratch folder, never the user's ~/.cache; server
# processes the tests start inherit it.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="obsidian-mcp-test-cache-")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def vault_copy(tmp_path: Path) -> Path:
    return copy_fixture_vault(tmp_path / "vault")


@pytest.fixture(scope="module")
def shared_vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One copy of the fixture vault per module, for tests that only read."""
    return copy_fixture_vault(tmp_path_factory.mktemp("vault") / "vault")


@pytest.fixture(scope="module", params=["3.2.0", "5.1.0", "6.0.0"])
def standin(request: pytest.FixtureRequest, shared_vault: Path) -> Iterator[StandinProcess]:
    """The stand-in Local REST API over the module's vault copy, for plugin 3.x, 5.x and
    6.x (its link index ready; tests switch it with `set_faults(link_index_pending=...)`)."""
    with StandinProcess(shared_vault, plugin_version=request.param) as process:
        yield process


def rest_settings(process: StandinProcess, config_dir: Path, **overrides: object) -> Settings:
    """Settings that point the server at a running stand-in, trusting its certificate."""
    values: dict[str, object] = {
        "api_key": process.api_key,
        "host": "127.0.0.1",
        "port": process.port,
        "cert": Path(process.cert),
        "config_dir": config_dir,
        "request_timeout": 2.0,
        "connect_timeout": 1.0,
        "retry_budget": 5.0,
    }
    values.update(overrides)
    return Settings.model_validate(values)


def folder_settings(vault: Path, config_dir: Path, **overrides: object) -> Settings:
    return Settings.model_validate({"vault_path": vault, "config_dir": config_dir, **overrides})


@pytest.fixture(scope="session")
def embedder() -> OnnxEmbedder:
    """The bundled all-MiniLM-L6-v2, loaded once per test run."""
    return OnnxEmbedder(default_model_files())
