"""Shared fixtures: the bundled vault, copied so tests may change it, and the stand-in."""

import fcntl
import os
import shutil
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from obsidian_mcp.config import Settings
from obsidian_mcp.index import store as store_module
from obsidian_mcp.index.embedder import OnnxEmbedder
from obsidian_mcp.index.location import index_path
from obsidian_mcp.index.store import StoredNote
from obsidian_mcp.opening import model_loader, open_retriever
from obsidian_mcp.retrieval import corpus as corpus_module
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.text.markdown import ParsedNote
from obsidian_mcp.vault import Vault
from tests.fixture_vault import copy_fixture_vault
from tests.standin.process import StandinProcess

# The files that take longest, measured with `pytest --durations=100` on an idle machine,
# longest first. The two workers take whole files in collection order (`--dist loadfile`
# without xdist's reordering by test count, which put the longest file, a single test,
# last): a long file started last leaves one core idle while it runs; started first,
# the other worker takes the short files meanwhile.
LONGEST_FILES = (
    "test_bench_report.py",
    "test_memory_compaction_race.py",
    "test_cli.py",
    "test_search_tools.py",
    "test_memory_races.py",
    "test_install.py",
    "test_memory_concurrency.py",
    "test_edit_races.py",
    "test_memory_store.py",
    "test_http.py",
    "test_index.py",
    "test_edit_corpus.py",
    "test_embedder.py",
    "test_crash.py",
    "test_abuse.py",
    "test_fuzz.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The longest files first (LONGEST_FILES), the others after in their own order."""
    rank = {name: position for position, name in enumerate(LONGEST_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


@pytest.fixture(scope="session", autouse=True)
def index_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Caches (passage indexes, memory indexes) go to a cache folder of this test session,
    never the user's; child processes inherit it. Queries list the vault's stats every
    time unless a test says otherwise, so a test that edits a note sees the edit at once;
    a first query waits for the whole vault to be read (a loaded machine reads the bundled
    vault over REST in more than the default 2 s), unless a test says otherwise."""
    cache = tmp_path_factory.mktemp("cache")
    saved = {name: os.environ.get(name) for name in _TEST_ENV}
    os.environ.update(
        {
            "XDG_CACHE_HOME": str(cache),
            "OBSIDIAN_INDEX_REFRESH_SECONDS": "0",
            "OBSIDIAN_INDEX_READ_WAIT_SECONDS": "600",
        }
    )
    yield cache
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


_TEST_ENV = ("XDG_CACHE_HOME", "OBSIDIAN_INDEX_REFRESH_SECONDS", "OBSIDIAN_INDEX_READ_WAIT_SECONDS")


@pytest.fixture(scope="session")
def fixture_index(
    index_cache: Path, tmp_path_factory: pytest.TempPathFactory, worker_id: str
) -> Path:
    """A complete passage index of the fixture vault, built once per test run (the model's
    work); `seed_index` copies it for a test's own copy of the vault. With several pytest
    workers the first to ask builds it and the others wait for it: each building its own
    doubled the model's work at the start of the run."""
    if worker_id == "master":
        return _built_fixture_index(tmp_path_factory)
    run_root = tmp_path_factory.getbasetemp().parent  # this run's, shared by its workers
    shared = run_root / "fixture-index.sqlite3"
    with (run_root / "fixture-index.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not shared.exists():
            partial = shared.with_suffix(".partial")
            shutil.copyfile(_built_fixture_index(tmp_path_factory), partial)
            partial.replace(shared)
    return shared


def _built_fixture_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    vault = tmp_path_factory.mktemp("indexed") / "vault"
    copy_fixture_vault(vault)
    settings = folder_settings(vault, vault.parent, index_dir=vault.parent / "index")

    async def build() -> Path:
        model = model_loader(settings)
        retriever = open_retriever(Vault(None, FolderSource(vault)), settings, model)
        try:
            await retriever.build_index()
        finally:
            retriever.close()
        return index_path(settings)

    return anyio.run(build)


def seed_index(settings: Settings, fixture_index: Path) -> Settings:
    """Give the server of `settings` the fixture vault's complete index: it re-reads the
    notes of its copy (their modification times differ) and reuses every vector."""
    target = index_path(settings)
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(fixture_index, target)
    return settings


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


# A small vault's first query waits for its meaning index (up to 30 s by default): tests of
# other things on a fresh vault answer at once instead; the wait's own tests set it.
NO_MEANING_WAIT: dict[str, object] = {"index_meaning_wait_seconds": 0}


def rest_settings(process: StandinProcess, config_dir: Path, **overrides: object) -> Settings:
    """Settings that point the server at a running stand-in, trusting its certificate."""
    values: dict[str, object] = {
        **NO_MEANING_WAIT,
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
    return Settings.model_validate(
        {"vault_path": vault, "config_dir": config_dir, **NO_MEANING_WAIT, **overrides}
    )


@pytest.fixture(scope="session")
def embedder() -> OnnxEmbedder:
    """The bundled all-MiniLM-L6-v2, loaded once per test run: the very instance the
    servers of this process share (opening.model_loader), not a second session."""
    load = model_loader(Settings())
    assert load is not None, "the bundled embedding model is not installed"
    model = load()
    assert isinstance(model, OnnxEmbedder)
    return model


def free_port() -> int:
    """A port nothing listens on now: for an address that answers only later, or never."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def count_parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The paths of the notes the corpus parses from now on, in order (a parse is a
    note's whole structure: the work a stored index spares)."""
    parses: list[str] = []
    parse = corpus_module.parse_note

    def counted(path: str, content: str) -> ParsedNote:
        parses.append(path)
        return parse(path, content)

    monkeypatch.setattr(corpus_module, "parse_note", counted)
    return parses


def drop_note_snapshots(db: sqlite3.Connection) -> None:
    """Take away what schema 7 added to an index file (the notes' snapshot and the log of
    the notes changed since), as in a file a version before it made."""
    for trigger in ("notes_logged_inserted", "notes_logged_deleted", "notes_logged_updated"):
        db.execute(f"DROP TRIGGER {trigger}")
    db.execute("DROP TABLE note_changes")
    db.execute("DROP TABLE note_snapshot")


def drop_vector_shortlists(db: sqlite3.Connection) -> None:
    """Take away what schema 8 added to an index file (the vector snapshots' shortlists)."""
    db.execute("DROP TABLE vector_shortlists")


@pytest.fixture
def loads_from_rows(monkeypatch: pytest.MonkeyPatch) -> list[list[str] | None]:
    """The `paths` of every load of notes from their rows in the passage index (None: every
    note), as a new process makes them without the notes' snapshot."""
    calls: list[list[str] | None] = []
    from_rows = store_module._notes_from_rows  # pyright: ignore[reportPrivateUsage]

    def counted(db: sqlite3.Connection, paths: list[str] | None) -> dict[str, StoredNote]:
        calls.append(paths)
        return from_rows(db, paths)

    monkeypatch.setattr(store_module, "_notes_from_rows", counted)
    return calls
