"""The memory tools end to end, through a real MCP client, over the vault folder and over
the stand-in Local REST API (plugin 3.x, 5.x and 6.x)."""

import json
import re
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from itertools import count
from pathlib import Path

import anyio
import httpx
import pytest
from mcp import Client
from mcp.types import TextContent, TextResourceContents

from obsidian_mcp.config import Settings
from obsidian_mcp.memory.model import Memory, Tombstone, encode
from obsidian_mcp.server import build_server
from tests.conftest import folder_settings, rest_settings
from tests.standin.process import StandinProcess

_names = count()


class Setup:
    """One server configuration, and where its memory file lands on disk."""

    def __init__(self, settings: Settings, file: Path, standin: StandinProcess | None) -> None:
        self.settings = settings
        self.file = file
        self.standin = standin

    def client(self, transport: httpx.AsyncBaseTransport | None = None) -> Client:
        return Client(build_server(self.settings, transport=transport), raise_exceptions=True)

    def entries(self) -> list[dict[str, object]]:
        if not self.file.exists():
            return []
        return [json.loads(line) for line in self.file.read_text("utf-8").splitlines() if line]

    def seed(self, lines: list[str]) -> None:
        self.file.parent.mkdir(parents=True, exist_ok=True)
        self.file.write_text("".join(lines), "utf-8")


@pytest.fixture(scope="module")
def rest_vault(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("rest-vault")


@pytest.fixture(scope="module")
def standins(rest_vault: Path) -> Iterator[dict[str, StandinProcess]]:
    """Stand-ins by plugin version, started on first use, one per module."""
    with ExitStack() as stack:
        started: dict[str, StandinProcess] = {}

        class Lazy(dict[str, StandinProcess]):
            def __missing__(self, version: str) -> StandinProcess:
                process = StandinProcess(rest_vault, plugin_version=version)
                started[version] = stack.enter_context(process)
                return started[version]

        yield Lazy()


# 6.0 removed header-based PATCH: writes passing there show nothing depends on it.
@pytest.fixture(params=["folder", "3.2.0", "5.1.0", "6.0.0"])
def setup(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    rest_vault: Path,
    standins: dict[str, StandinProcess],
) -> Setup:
    memory_path = f"agents/memory-{next(_names)}.jsonl"  # one file per test on a shared vault
    if request.param == "folder":
        vault = tmp_path / "vault"
        vault.mkdir()
        settings = folder_settings(vault, tmp_path / "cfg", memory_path=memory_path)
        return Setup(settings, vault / memory_path, None)
    standin = standins[request.param]
    settings = rest_settings(standin, tmp_path / "cfg", memory_path=memory_path)
    return Setup(settings, rest_vault / memory_path, standin)


async def call(client: Client, tool: str, **arguments: object) -> tuple[bool, str]:
    result = await client.call_tool(tool, arguments)
    block = result.content[0]
    assert isinstance(block, TextContent)
    return result.is_error, block.text


async def ok(client: Client, tool: str, **arguments: object) -> str:
    is_error, text = await call(client, tool, **arguments)
    assert not is_error, text
    return text


def memory_id(text: str) -> str:
    found = re.search(r"\b([0-9a-z]{13})\b", text)
    assert found, text
    return found[1]


def old_entry(memory_id: str, days: float, content: str, tags: tuple[str, ...]) -> str:
    ts = datetime.now(UTC) - timedelta(days=days)
    return encode(Memory(memory_id, ts, content, tags, "seeded"))


@pytest.mark.anyio
async def test_remember_needs_only_content_and_tags(setup: Setup) -> None:
    """Agents call it so; the design makes context optional."""
    async with setup.client() as client:
        text = await ok(client, "vault_remember", content="Rook hates the cold.", tags=["rook"])
        recalled = await ok(client, "vault_recall", tags=["rook"])
    assert text.startswith("Remembered as ")
    assert memory_id(text) in recalled and "Rook hates the cold." in recalled
    [entry] = setup.entries()
    assert entry["content"] == "Rook hates the cold." and entry["tags"] == ["rook"]


@pytest.mark.anyio
async def test_remember_recall_forget_through_the_client(setup: Setup) -> None:
    setup.seed([
        old_entry("0seedmonth000", 20, "The Wren sank in the spring storm.", ("gale", "ship")),
        old_entry("0seedweek0000", 3, "Gale keeps a storm journal.", ("gale",)),
    ])
    async with setup.client() as client:
        text = await ok(
            client, "vault_remember", content="Gale agreed to captain the new ship.",
            tags=["#Gale", "Ship"], context="drives the next session", type="decision",
            source="Sessions/Session 12.md",
        )
        new_id = memory_id(text)
        again = await ok(
            client, "vault_remember", content="Gale agreed to captain the new ship.",
            tags=["ship", "gale"], context="said twice",
        )
        assert memory_id(again) == new_id and "nothing written" in again
        assert len(setup.entries()) == 3

        by_tag = await ok(client, "vault_recall", tags=["gale"])
        first_line, *rest = by_tag.splitlines()
        assert first_line == "3 memories tagged gale, newest just now, oldest 2 weeks ago"
        assert rest[0].startswith(f"- {new_id} · just now · decision · #gale #ship")
        assert "source: [[Session 12]] (Sessions/Session 12.md)" in by_tag

        by_text = await ok(client, "vault_recall", query="storm journal")
        assert by_text.splitlines()[1].startswith("- 0seedweek0000 · 3 days ago")
        assert (await ok(client, "vault_recall", time_range="week")).startswith("2 memories from")
        assert (await ok(client, "vault_recall", time_range="today")).startswith("1 memory")
        assert (await ok(client, "vault_recall", since="4w", until="4d")).startswith("1 memory")
        data = json.loads(await ok(client, "vault_recall", tags=["ship"], format="json"))
        assert [m["id"] for m in data["memories"]] == [new_id, "0seedmonth000"]

        forgot = await ok(client, "vault_forget", id=new_id)
        assert forgot.startswith("Forgot:") and "captain" in forgot
        assert (await ok(client, "vault_recall", tags=["ship"])).startswith("1 memory")
        is_error, text = await call(client, "vault_forget", id="0nosuchid0000")
        assert is_error and "No memory has the id '0nosuchid0000'" in text

        nothing = await ok(client, "vault_recall", tags=["mira"])
        assert nothing.startswith("No memories tagged mira")
        assert "Known tags: gale (2), ship (1)" in nothing and "vault_semantic_query" in nothing

        resource = await client.read_resource("obsidian://memory/recent")
        overview = resource.contents[0]
        assert isinstance(overview, TextResourceContents)
        assert "2 memories, 2 tags" in overview.text and "0seedweek0000" in overview.text

        handover = await client.get_prompt("handover", {"task": "Plan session 13"})
        message = handover.messages[0].content
        assert isinstance(message, TextContent)
        assert "Plan session 13" in message.text and "0seedweek0000" in message.text
        learned = await client.get_prompt("update-knowledge", {"work": "Mapped the reef"})
        message = learned.messages[0].content
        assert isinstance(message, TextContent)
        assert "vault_remember" in message.text and "gale (2)" in message.text

    entries = setup.entries()
    assert entries[-1] == {"id": new_id, "ts": entries[-1]["ts"], "forgotten": True}


@pytest.mark.anyio
async def test_compaction_through_the_client(setup: Setup) -> None:
    live = [old_entry(f"0live{n:08d}", 2, f"live {n}", ("keep",)) for n in range(10)]
    retired: list[str] = []
    for n in range(110):
        retired.append(old_entry(f"0dead{n:08d}", 2, f"dead {n}", ("gone",)))
        tombstone = Tombstone(f"0dead{n:08d}", datetime.now(UTC) - timedelta(days=1))
        retired.append(encode(tombstone))
    setup.seed(live + retired)
    async with setup.client() as client:
        new_id = memory_id(await ok(client, "vault_remember", content="fresh", tags=["keep"],
                                    context=""))
        recall = await ok(client, "vault_recall", tags=["keep"], limit=20)
        assert recall.startswith("11 memories tagged keep")
        assert (await ok(client, "vault_recall", tags=["gone"])).startswith("No memories")
    ids = [entry["id"] for entry in setup.entries()]
    if setup.standin is None:
        assert ids == [f"0live{n:08d}" for n in range(10)] + [new_id]
    else:  # REST alone never rewrites the file: another client could be appending
        assert len(ids) == 10 + 2 * 110 + 1 and ids[-1] == new_id
        async with setup.client() as client:
            status = await client.read_resource("obsidian://status")
        assert "compact" in str(status.contents[0])


@pytest.mark.anyio
async def test_bad_input_gets_a_clear_error_and_writes_nothing(setup: Setup) -> None:
    bad_calls: list[tuple[str, dict[str, object], str]] = [
        ("vault_remember", {"content": "", "tags": ["a"], "context": ""}, "content is empty"),
        ("vault_remember", {"content": "x" * 50_000, "tags": ["a"], "context": ""},
         "the limit is 4,000"),
        ("vault_remember", {"content": "ok", "tags": [f"t{n}" for n in range(1000)],
                            "context": ""}, "tags has 1,000 items; give at most 20."),
        ("vault_remember", {"content": "ok", "tags": ["#my tag"], "context": ""},
         "write it as 'my-tag'"),
        ("vault_recall", {"time_range": "yesterday"},
         "time_range must be one of 'today', 'week', 'month', 'all'; you gave 'yesterday'."),
        ("vault_recall", {"since": "last tuesday"}, "since='last tuesday' is not a date"),
        ("vault_recall", {"until": "soon"}, "until='soon' is not a date"),
    ]
    async with setup.client() as client:
        for tool, arguments, message in bad_calls:
            is_error, text = await call(client, tool, **arguments)
            assert is_error and message in text, text
    assert not setup.file.exists()


class LandedButLost(httpx.AsyncBaseTransport):
    """Forwards every request, but answers every third POST to the memory file with a read
    timeout after it landed: the case where a blind retry would store an entry twice."""

    def __init__(self, inner: httpx.AsyncBaseTransport, memory_path: str) -> None:
        self._inner = inner
        self._memory_path = memory_path
        self._posts = 0
        self.lost = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        if request.method == "POST" and request.url.path.endswith(self._memory_path):
            self._posts += 1
            if self._posts % 3 == 0:
                await response.aread()
                self.lost += 1
                raise httpx.ReadTimeout("answer lost", request=request)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


async def remember_concurrently(client: Client, how_many: int) -> None:
    async def one(n: int) -> None:
        await ok(client, "vault_remember", content=f"concurrent fact {n}", tags=["load"],
                 context="")

    async with anyio.create_task_group() as group:
        for n in range(how_many):
            group.start_soon(one, n)


@pytest.fixture
def own_standin(tmp_path: Path) -> Iterator[tuple[StandinProcess, Path]]:
    vault = tmp_path / "vault"
    vault.mkdir()
    with StandinProcess(vault, plugin_version="5.1.0") as process:
        yield process, vault


@pytest.fixture
async def rest_setup(own_standin: tuple[StandinProcess, Path], tmp_path: Path
                     ) -> AsyncIterator[Setup]:
    process, vault = own_standin
    settings = rest_settings(process, tmp_path / "cfg")
    yield Setup(settings, vault / settings.memory_path, process)


@pytest.mark.anyio
@pytest.mark.parametrize("drop_every", [None, 10])
async def test_200_concurrent_remembers_through_the_standin(
    rest_setup: Setup, drop_every: int | None
) -> None:
    assert rest_setup.standin is not None
    async with rest_setup.client() as client:
        rest_setup.standin.set_faults(drop_every=drop_every)
        await remember_concurrently(client, 200)
        rest_setup.standin.clear_faults()
        assert (await ok(client, "vault_recall", tags=["load"])).startswith("200 memories")
    entries = rest_setup.entries()
    assert len(entries) == len({e["id"] for e in entries}) == 200
    if drop_every:
        assert rest_setup.standin.stats()["injected"]["drop"] > 0


@pytest.mark.anyio
async def test_a_post_that_landed_before_its_answer_was_lost_is_not_sent_again(
    rest_setup: Setup,
) -> None:
    assert rest_setup.standin is not None
    inner = httpx.AsyncHTTPTransport(verify=rest_setup.standin.ssl_context())
    transport = LandedButLost(inner, rest_setup.settings.memory_path)
    async with rest_setup.client(transport) as client:
        for n in range(30):
            await ok(client, "vault_remember", content=f"fact {n}", tags=["lost"], context="")
    assert transport.lost == 10
    contents = [str(entry["content"]) for entry in rest_setup.entries()]
    assert sorted(contents) == sorted(f"fact {n}" for n in range(30))
