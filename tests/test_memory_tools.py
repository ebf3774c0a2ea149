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
from mcp import Client, MCPError
from mcp.types import TextContent, TextResourceContents

from obsidian_mcp.config import Settings
from obsidian_mcp.memory.files import MemoryFiles
from obsidian_mcp.memory.model import Memory, Tombstone, encode
from obsidian_mcp.server import build_server
from obsidian_mcp.server.memory_tools import handover_note
from tests.conftest import folder_settings, rest_settings
from tests.fixture_vault import REPO_ROOT
from tests.memory_files import memory_entries, memory_paths, writer_paths
from tests.standin.process import StandinProcess

_names = count()


class Setup:
    """One server configuration, and where its memory files land on disk."""

    def __init__(self, settings: Settings, vault: Path, standin: StandinProcess | None) -> None:
        self.settings = settings
        self.vault = vault
        self.memory = settings.memory_path
        self.standin = standin

    def client(self, transport: httpx.AsyncBaseTransport | None = None) -> Client:
        return Client(build_server(self.settings, transport=transport), raise_exceptions=True)

    @property
    def legacy(self) -> Path:
        """The single file of earlier versions: read, never written."""
        return self.vault / self.memory

    @property
    def folder(self) -> Path:
        """The writers' folder: each process's file."""
        return self.vault / MemoryFiles(self.memory).folder

    def entries(self) -> list[dict[str, object]]:
        """Every line of every memory file, as the store reads them."""
        return memory_entries(self.vault, self.memory)

    def writers(self) -> list[Path]:
        return writer_paths(self.vault, self.memory)

    def seed(self, lines: list[str]) -> None:
        """Lines in the legacy file, as an earlier version left it."""
        self.legacy.parent.mkdir(parents=True, exist_ok=True)
        self.legacy.write_text("".join(lines), "utf-8")

    def device(self, name: str) -> str:
        """Give the server's installation this device id (kept in its config folder)."""
        config = self.settings.config_dir
        config.mkdir(parents=True, exist_ok=True)
        (config / "device-id").write_text(name + "\n", "utf-8")
        return name


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
        return Setup(settings, vault, None)
    standin = standins[request.param]
    settings = rest_settings(standin, tmp_path / "cfg", memory_path=memory_path)
    return Setup(settings, rest_vault, standin)


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
    """The id a receipt names (by its shortest unique ending)."""
    found = re.search(r"remembered as ([0-9a-z]+)\b", text, re.IGNORECASE)
    assert found, text
    return found[1]


def old_entry(memory_id: str, days: float, content: str, tags: tuple[str, ...]) -> str:
    ts = datetime.now(UTC) - timedelta(days=days)
    return encode(Memory(memory_id, ts, content, tags, "seeded"))


def test_the_handover_prompt_names_the_vaults_own_handover_note() -> None:
    def notes(vault: Path) -> list[str]:
        return [p.relative_to(vault).as_posix() for p in vault.rglob("*.md")]

    assert handover_note(notes(REPO_ROOT / "fixtures" / "vault")) == "Dev/Handover.md"
    ledgerline = REPO_ROOT / "fixtures" / "ledgerline" / "vault"
    assert handover_note(notes(ledgerline)) == "Handover/Handover (living).md"
    dated = ["N/2026-01-02 handover.md", "N/2026-03-04 handover.md", "T/Handover template.md"]
    assert handover_note(dated) == "N/2026-03-04 handover.md"
    assert handover_note(["Home.md"]) == "Handover.md"


@pytest.mark.anyio
async def test_remember_needs_only_content_and_tags(setup: Setup) -> None:
    """Agents call it so; the design makes context optional."""
    async with setup.client() as client:
        text = await ok(client, "vault_remember", content="Rook hates the cold.", tags="rook")
        recalled = await ok(client, "vault_recall", tags=["rook"])
    assert text.startswith("Remembered as ")
    assert memory_id(text) in recalled and "Rook hates the cold." in recalled
    [entry] = setup.entries()
    assert entry["content"] == "Rook hates the cold." and entry["tags"] == ["rook"]
    [written] = setup.writers()  # the process's own file, in the writers' folder
    assert written.parent == setup.folder and not setup.legacy.exists()


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
        assert await ok(client, "vault_recall", tags="gale") == by_tag  # one tag, not a list
        first_line, *rest = by_tag.splitlines()
        assert first_line == "3 memories tagged gale, newest just now, oldest 2 weeks ago"
        # The tag the recall named is not repeated on each entry.
        assert rest[0].startswith(f"- {new_id} just now · decision · #ship")
        assert "source: [[Session 12]] (Sessions/Session 12.md)" in by_tag

        by_text = await ok(client, "vault_recall", query="storm journal")
        # An id is shown by the shortest ending (of 5 or more) no other id has.
        assert by_text.splitlines()[1] == "- k0000 3 days ago · #gale"
        assert (await ok(client, "vault_recall", time_range="week")).startswith("2 memories from")
        assert (await ok(client, "vault_recall", time_range="today")).startswith("1 memory")
        assert (await ok(client, "vault_recall", since="4w", until="4d")).startswith("1 memory")
        # One grammar for every date: remember's occurred takes 'yesterday', so does until.
        assert (await ok(client, "vault_recall", until="yesterday")).startswith("2 memories")
        data = json.loads(await ok(client, "vault_recall", tags=["ship"], format="json"))
        # JSON names each by its whole id.
        ids = [m["id"] for m in data["memories"]]
        assert ids[0].endswith(new_id) and ids[1:] == ["0seedmonth000"]

        forgot = await ok(client, "vault_forget", id=new_id)
        assert forgot.startswith("Forgot:") and "captain" in forgot
        assert (await ok(client, "vault_recall", tags=["ship"])).startswith("1 memory")
        # Idempotent, as annotated: forgetting it again changes nothing and says so.
        forgot_again = await ok(client, "vault_forget", id=new_id)
        assert forgot_again == f"{new_id} was already forgotten (just now); nothing changed."
        is_error, text = await call(client, "vault_forget", id="0nosuchid0000")
        assert is_error and "No memory has the id '0nosuchid0000'" in text

        nothing = await ok(client, "vault_recall", tags=["mira"])
        assert nothing.startswith("No memories tagged mira")
        assert "Known tags: gale (2), ship (1)" in nothing and "vault_semantic_query" in nothing

        resource = await client.read_resource("obsidian://memory/recent")
        overview = resource.contents[0]
        assert isinstance(overview, TextResourceContents)
        assert "2 memories, 2 tags" in overview.text and "- k0000 " in overview.text

        handover = await client.get_prompt("handover", {"task": "Plan session 13"})
        message = handover.messages[0].content
        assert isinstance(message, TextContent)
        assert "Plan session 13" in message.text and "- k0000 " in message.text
        # Saved with the tool that exists for it, not "your file-writing tool".
        assert "vault_edit_note(path=" in message.text and "file-writing" not in message.text
        learned = await client.get_prompt("update-knowledge", {"work": "Mapped the reef"})
        message = learned.messages[0].content
        assert isinstance(message, TextContent)
        assert "vault_remember" in message.text and "gale (2)" in message.text
        with pytest.raises(MCPError, match=r"The prompt update-knowledge needs work \("):
            await client.get_prompt("update-knowledge", {})
        is_error, text = await call(client, "vault_serch", query="x")
        assert is_error and "No tool named 'vault_serch'" in text
        assert "the tools are: vault_edit_note, " in text and "vault_remember" in text

    [written] = setup.writers()
    entries = [json.loads(line) for line in written.read_text("utf-8").splitlines()]
    # The file holds the whole id, of which replies show the shortest unique ending.
    whole_id = entries[0]["id"]
    assert whole_id.endswith(new_id) and [entry["id"] for entry in entries] == [whole_id] * 2
    assert entries[-1] == {"id": whole_id, "ts": entries[-1]["ts"], "forgotten": True}
    # The seeded file of an earlier version is read, never written.
    legacy = [json.loads(line)["id"] for line in setup.legacy.read_text("utf-8").splitlines()]
    assert legacy == ["0seedmonth000", "0seedweek0000"]


@pytest.mark.anyio
async def test_compaction_through_the_client(setup: Setup) -> None:
    """Files that earlier processes of this installation left (slots no process holds now)
    are folded at the server's first write, through the folder and through the REST API
    alike: their live memories and every tombstone appended to the server's own file (not
    rewritten), dead lines dropped, the folded files removed; another device's file and the
    legacy file are left alone."""
    device = setup.device("devtest")
    live = [old_entry(f"0live{n:08d}", 2, f"live {n}", ("keep",)) for n in range(10)]
    retired: list[str] = []
    for n in range(110):
        retired.append(old_entry(f"0dead{n:08d}", 2, f"dead {n}", ("gone",)))
        tombstone = Tombstone(f"0dead{n:08d}", datetime.now(UTC) - timedelta(days=1))
        retired.append(encode(tombstone))
    setup.folder.mkdir(parents=True, exist_ok=True)
    (setup.folder / f"{device}-1-0.jsonl").write_text("".join(live[:5] + retired[:100]))
    (setup.folder / f"{device}-2-7.jsonl").write_text("".join(live[5:] + retired[100:]))
    foreign = setup.folder / "otherdev-0-3.jsonl"
    foreign.write_text(old_entry("0foreign00000", 1, "another device's", ("keep",)))
    setup.seed([old_entry("0legacy000000", 3, "from the single file", ("keep",))])
    async with setup.client() as client:
        new_id = memory_id(await ok(client, "vault_remember", content="fresh", tags=["keep"],
                                    context=""))
        recall = await ok(client, "vault_recall", tags=["keep"], limit=20)
        assert recall.startswith("13 memories tagged keep")
        assert (await ok(client, "vault_recall", tags=["gone"])).startswith("No memories")
        status = await client.read_resource("obsidian://status")
    contents = status.contents[0]
    assert isinstance(contents, TextResourceContents)
    memory = json.loads(contents.text)["memory"]
    folded = setup.folder / f"{device}-0-0.jsonl"
    assert setup.writers() == sorted([folded, foreign])
    assert memory["own_file"] == f"{MemoryFiles(setup.memory).folder}/{folded.name}"
    assert (memory["files"], memory["dead_lines"]) == (3, 0)
    entries = [json.loads(line) for line in folded.read_text("utf-8").splitlines()]
    memories = sorted(e["id"] for e in entries if not e.get("forgotten"))
    tombstones = sorted(e["id"] for e in entries if e.get("forgotten"))
    minted = [m for m in memories if not m.startswith("0live")]
    assert len(minted) == 1 and minted[0].endswith(new_id)
    assert memories == sorted([f"0live{n:08d}" for n in range(10)] + minted)
    assert tombstones == [f"0dead{n:08d}" for n in range(110)]  # kept for good
    assert setup.legacy.read_text("utf-8").count("\n") == 1


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
    assert memory_paths(setup.vault, setup.memory) == []
    assert not setup.folder.exists()


class LandedButLost(httpx.AsyncBaseTransport):
    """Forwards every request, but answers every third POST to a memory file with a read
    timeout after it landed: the case where a blind retry would store an entry twice."""

    def __init__(self, inner: httpx.AsyncBaseTransport, memory_path: str) -> None:
        self._inner = inner
        self._folder = f"/vault/{MemoryFiles(memory_path).folder}/"
        self._posts = 0
        self.lost = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self._inner.handle_async_request(request)
        if request.method == "POST" and request.url.path.startswith(self._folder):
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
    yield Setup(settings, vault, process)


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
    assert len(rest_setup.writers()) == 1  # one process, one file
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
    assert len(rest_setup.writers()) == 1
