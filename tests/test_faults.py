"""Each fault of the stand-in gives the model an actionable error within the configured
bound; the server stays up, and the first call after the fault clears succeeds."""

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from obsidian_mcp.config import Settings
from obsidian_mcp.server import build_server
from tests.conftest import rest_settings
from tests.standin.process import StandinProcess
from tests.test_read_tools import text_of

NOTE = "Characters/Companion/Mira Vessant.md"


@pytest.fixture
def faulty(standin: StandinProcess) -> Iterator[StandinProcess]:
    try:
        yield standin
    finally:
        standin.clear_faults()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("faults", "expected"),
    [
        ({"hang_pattern": "Mira"}, "gave no answer within"),
        ({"drop_every": 1}, "broke before it answered"),
        ({"fail_every": 1}, "HTTP 500"),
    ],
)
async def test_fault_gives_an_actionable_error_then_recovers(
    faulty: StandinProcess, tmp_path: Path, faults: dict[str, object], expected: str
) -> None:
    settings = rest_settings(faulty, tmp_path, request_timeout=1.0, retry_budget=3.0)
    async with Client(build_server(settings)) as client:
        faulty.set_faults(**faults)
        started = time.monotonic()
        failed = await client.call_tool("vault_read_note", {"path": NOTE})
        elapsed = time.monotonic() - started
        faulty.clear_faults()
        recovered = await client.call_tool("vault_read_note", {"path": NOTE})
    assert failed.is_error
    assert expected in text_of(failed)
    assert "127.0.0.1" in text_of(failed)
    # The bound is the configured retry budget; the slack is for process scheduling.
    assert elapsed < settings.retry_budget + 1.0
    assert not recovered.is_error
    assert "Mira" in text_of(recovered)


@pytest.mark.anyio
async def test_transient_faults_are_retried_transparently(
    faulty: StandinProcess, tmp_path: Path
) -> None:
    settings = rest_settings(faulty, tmp_path)
    async with Client(build_server(settings)) as client:
        # The server reads the vault in the background from its start, and a first question
        # waits for that (the tests' OBSIDIAN_INDEX_READ_WAIT_SECONDS): the stand-in counts
        # every request, so "every second one fails" must count this test's alone.
        await client.call_tool("vault_semantic_query", {"query": "Mira"})
        faulty.set_faults(fail_every=2)
        results = [await client.call_tool("vault_read_note", {"path": NOTE}) for _ in range(4)]
        faulty.set_faults(fail_every=None, drop_every=3)
        results += [await client.call_tool("vault_read_note", {"path": NOTE}) for _ in range(4)]
    assert not any(result.is_error for result in results)


@pytest.mark.anyio
async def test_latency_is_waited_out(faulty: StandinProcess, tmp_path: Path) -> None:
    settings = rest_settings(faulty, tmp_path)
    async with Client(build_server(settings)) as client:
        faulty.set_faults(latency_ms=400)
        started = time.monotonic()
        result = await client.call_tool("vault_read_note", {"path": NOTE})
        elapsed = time.monotonic() - started
    assert not result.is_error
    assert elapsed >= 0.4


@pytest.mark.anyio
async def test_obsidian_closed_names_the_url_and_the_fix(tmp_path: Path) -> None:
    # A port nothing listens on: the connection is refused at once.
    settings = Settings.model_validate(
        {"api_key": "secret-key", "port": 9, "config_dir": tmp_path, "retry_budget": 3.0}
    )
    async with Client(build_server(settings)) as client:
        result = await client.call_tool("vault_tree", {})
    text = text_of(result)
    assert result.is_error
    assert "https://127.0.0.1:9" in text
    assert "Is Obsidian open" in text
    assert "secret-key" not in text
