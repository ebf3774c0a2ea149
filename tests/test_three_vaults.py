"""Three vaults in one server, through a real MCP client (issue 35, must-show 3): `lore`,
the fixture vault through its folder (the default); `work`, a few of ledgerline's notes
through the stand-in, pinned; and `journal`, a field journal through its folder. Each kind
of one vault answering for another (items 6-11) is tried where a third vault is what
could answer: a name, a hint, an id or a topic that only one of the two others holds.
And a REST vault that was down when the server started and turns out to be a folder vault
served again is refused when it comes up (item 4)."""

import json
import re
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from mcp import Client
from mcp.types import TextContent

from obsidian_mcp.config import Settings
from obsidian_mcp.server import build_server
from obsidian_mcp.sources.tls import fingerprint
from obsidian_mcp.usage.log import LOG_FILE
from obsidian_mcp.vault_set import configured_vaults
from tests.conftest import NO_MEANING_WAIT, free_port, seed_index
from tests.standin.certs import generate_certificate
from tests.standin.process import StandinProcess
from tests.test_several_vaults import (
    call,
    lore_and_work,
    refused,
    run_cli,
    write_vault,
)

pytestmark = pytest.mark.anyio

# What only the journal holds: a topic, a note's name, a section.
JOURNAL_NOTES = {
    "Home.md": "# Home\n\nMy field journal: surveys, tides and the days between.\n",
    "Projects/Seagrass Survey.md": (
        "# Seagrass Survey\n\nMonthly transects of the eelgrass beds at Wren Point and Gull "
        "Bay, to see whether the meadow recovers after the dredging.\n\n## Method\n\nTwenty "
        "quadrats per transect, photographed and scored for eelgrass cover.\n\n## Findings\n\n"
        "Eelgrass cover at Wren Point fell by a third between April and October; Gull Bay "
        "held steady.\n"
    ),
    "Journal/2026-11-02.md": (
        "# 2 November\n\nSeagrass survey at Wren Point at low water: fourteen quadrats "
        "counted before the tide turned. The eelgrass is thinner on the dredged side.\n"
    ),
    "Tide Log.md": "# Tide Log\n\nSpring tides on the 4th and the 19th; neaps between.\n",
}
TOPIC = "Seagrass Survey eelgrass transects at Wren Point"


@dataclass
class ThreeVaults:
    lore: Path
    work: Path
    journal: Path
    config: Path
    config_dir: Path

    def settings(self) -> Settings:
        return Settings.model_validate(
            {"config": self.config, "config_dir": self.config_dir, **NO_MEANING_WAIT}
        )

    def files(self) -> dict[str, bytes]:
        """Every file of the three vaults (the server's own folder aside), by path."""
        found: dict[str, bytes] = {}
        for root in (self.lore, self.work, self.journal):
            for file in root.rglob("*"):
                if file.is_file() and "obsidian-mcp" not in file.parts:
                    found[str(file)] = file.read_bytes()
        return found


@pytest.fixture(scope="module")
def three_vaults(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ThreeVaults]:
    root = tmp_path_factory.mktemp("three-vaults")
    lore, work = lore_and_work(root)
    journal = write_vault(root / "Journal", JOURNAL_NOTES)
    cert = generate_certificate(root / "cert")
    with StandinProcess(work, binding_host="127.0.0.2", cert_dir=root / "cert") as standin:
        config = root / "vaults.toml"
        config.write_text(
            f"[vaults.lore]\npath = {json.dumps(str(lore))}\ndefault = true\n\n"
            f'[vaults.work]\nurl = "https://127.0.0.2:{standin.port}"\n'
            f"api_key = {json.dumps(standin.api_key)}\n"
            f'cert_sha256 = "{fingerprint(cert.pem.decode())}"\n\n'
            f"[vaults.journal]\npath = {json.dumps(str(journal))}\n",
            "utf-8",
        )
        yield ThreeVaults(lore, work, journal, config, root / "config")


@pytest.fixture(scope="module")
async def client(three_vaults: ThreeVaults, fixture_index: Path) -> AsyncIterator[Client]:
    settings = three_vaults.settings()
    vaults = configured_vaults(settings)
    seed_index(vaults.find("lore").settings, fixture_index)  # type: ignore[union-attr]
    async with Client(build_server(settings, vaults=vaults)) as connected:
        yield connected


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


def _vaults_in(reply: str) -> set[str]:
    """The vaults whose notes a search reply shows, by its `## vault:path` headers."""
    return set(re.findall(r"^## (\w+):", reply, re.MULTILINE))


async def test_three_vaults_are_listed_once_with_the_default(client: Client) -> None:
    assert "lore (default), work, journal" in (client.instructions or "")
    answer = await refused(client, "vault_read_note", path="Home.md", vault="jornal")
    assert "the vaults are lore (the default), work, journal" in answer


async def test_a_misspelt_prefix_writes_in_none_of_three(
    client: Client, three_vaults: ThreeVaults
) -> None:
    """Item 6: `jornal:` names no vault, and no vault holds that path: refused with the
    three names, and not one file of any vault changes."""
    before = three_vaults.files()
    for tool, arguments in (
        ("vault_read_note", {"path": "jornal:Tide Log.md"}),
        ("vault_edit_note", {"path": "jornal:Tide Log.md", "operation": "create", "content": "x"}),
        ("vault_peek_file", {"path": "Jorunal:Tide Log.md"}),
        ("vault_semantic_query", {"query": "tides", "folder": "jornal:Journal"}),
        ("vault_tree", {"folder": "jornal:"}),
    ):
        answer = await refused(client, tool, **arguments)
        assert "which names no vault (the vaults are lore, work, journal)" in answer, answer
    assert three_vaults.files() == before
    # The vault's name in another case is that vault.
    assert "Spring tides" in await call(client, "vault_read_note", path="JOURNAL:Tide Log.md")


async def test_hints_keep_the_third_vault(client: Client) -> None:
    """Item 7: a search of journal suggests calls on journal; following one searches
    journal alone."""
    one_vault = await call(client, "vault_semantic_query", query=TOPIC, vault="journal", limit=1)
    assert _vaults_in(one_vault) == {"journal"}
    hint = re.search(r'folder="(journal:[^"]*)"', one_vault)
    assert hint is not None, one_vault
    followed = await call(client, "vault_semantic_query", query="tides", folder=hint[1])
    assert _vaults_in(followed) <= {"journal"} and "journal:" in followed
    exact = await call(client, "vault_smart_search", query="eelgrass", vault="journal", limit=1)
    assert 'folder="journal:")' in exact


async def test_quick_context_gives_a_topic_to_the_vault_that_holds_it(client: Client) -> None:
    """Item 8: with two other vaults, the one that holds the topic fills the overview."""
    overview = await call(client, "vault_quick_context", topic=TOPIC)
    counts = {name: overview.count(f"{name}:") for name in ("lore", "work", "journal")}
    assert counts["journal"] > 0 and counts["lore"] + counts["work"] < counts["journal"], counts


async def test_prompts_and_resources_reach_the_third_vault(client: Client) -> None:
    """Item 9: journal's handover lists journal's memories, not work's or lore's."""
    await call(
        client,
        "vault_remember",
        content="Wren Point needs a recount",
        tags=["survey"],
        vault="journal",
    )
    await call(
        client, "vault_remember", content="Invoices freeze on Friday", tags=["ops"], vault="work"
    )
    handover = await client.get_prompt(
        "handover", {"task": "survey", "note": "journal:Projects/Seagrass Survey.md"}
    )
    text = handover.messages[0].content
    assert isinstance(text, TextContent)
    assert "Wren Point needs a recount" in text.text
    assert "Invoices freeze" not in text.text
    assert "vault_remember(vault='journal', ...)" in text.text
    recent = str((await client.read_resource("obsidian://memory/recent?vault=journal")).contents)
    assert "Wren Point needs a recount" in recent and "Invoices freeze" not in recent


async def test_ids_name_the_vault_that_has_them(client: Client, three_vaults: ThreeVaults) -> None:
    """Item 10: a memory or edit id of journal, given bare (the default vault's) or with
    the wrong vault, is refused naming journal; as shown, it works; an id a message names
    reads back as shown."""
    stored = await call(
        client, "vault_remember", content="Gull Bay held steady", tags=["survey"], vault="journal"
    )
    found = re.search(r"Remembered as ([0-9a-z]+)\.", stored)
    assert found is not None, stored
    bare = await refused(client, "vault_forget", id=found[1])
    assert f"vault journal has it: vault_forget(id='journal:{found[1]}')" in bare
    wrong = await refused(client, "vault_forget", id=found[1], vault="work")
    assert "vault journal has it" in wrong
    assert "Forgot" in await call(client, "vault_forget", id=f"journal:{found[1]}")

    receipt = await call(
        client,
        "vault_edit_note",
        path="journal:Tide Log.md",
        operation="append",
        target="Tide Log",
        content="Neaps on the 11th.",
    )
    edit_id = re.search(r"edit_id (\S+)", receipt)
    assert edit_id is not None and edit_id[1].startswith("journal:")
    bare_id = edit_id[1].partition(":")[2]
    refusal = await refused(client, "vault_undo_edit", edit_id=bare_id, vault="work")
    assert f"vault journal has it: vault_undo_edit(edit_id='{edit_id[1]}')" in refusal
    undone = await call(client, "vault_undo_edit", edit_id=edit_id[1])
    undo_id = re.search(r"edit_id (\S+)", undone)
    assert undo_id is not None and undo_id[1].startswith("journal:")
    again = await refused(client, "vault_undo_edit", edit_id=edit_id[1])
    assert f"already undone (by {undo_id[1]})" in again
    await call(client, "vault_undo_edit", edit_id=undo_id[1])  # works as the message shows it
    assert "Neaps on the 11th." in (three_vaults.journal / "Tide Log.md").read_text("utf-8")


async def test_a_bare_name_is_found_in_the_vault_that_has_it(client: Client) -> None:
    """Item 11: a note only journal has, asked of the default vault by its name or path,
    is named where it is; a search over every vault names the vault it found it in."""
    by_name = await refused(client, "vault_read_note", path="Tide Log")
    assert "Closest existing paths: journal:Tide Log.md." in by_name
    by_path = await refused(client, "vault_read_note", path="Projects/Seagrass Survey.md")
    assert "journal:Projects/Seagrass Survey.md" in by_path
    everywhere = await call(client, "vault_smart_search", query="Wren Point")
    assert _vaults_in(everywhere) == {"journal"}


async def test_a_rest_vault_down_at_start_is_checked_for_a_twin_when_it_comes_up(
    three_vaults: ThreeVaults, tmp_path: Path
) -> None:
    """Item 4: `api`, the journal's folder through a REST API that is down when the server
    starts, is compared with the folder vaults when it first answers, and refused as the
    journal served twice; the journal's folder vault answers throughout."""
    port = free_port()
    cert = generate_certificate(tmp_path / "cert")
    config = tmp_path / "twins.toml"
    config.write_text(
        f"[vaults.journal]\npath = {json.dumps(str(three_vaults.journal))}\n\n"
        f'[vaults.api]\nurl = "https://127.0.0.1:{port}"\napi_key = "k"\n'
        f'cert_sha256 = "{fingerprint(cert.pem.decode())}"\n',
        "utf-8",
    )
    settings = Settings.model_validate(
        {"config": config, "config_dir": tmp_path / "config", "retry_budget": 1.0} | NO_MEANING_WAIT
    )
    async with Client(build_server(settings)) as connected:
        down = await refused(connected, "vault_read_note", path="api:Home.md")
        assert "same vault" not in down
        with StandinProcess(
            three_vaults.journal, port=port, api_key="k", cert_dir=tmp_path / "cert"
        ):
            twin = await refused(connected, "vault_read_note", path="api:Home.md")
            assert "it serves the same vault as journal" in twin
            search = await call(connected, "vault_smart_search", query="Wren Point")
            assert _vaults_in(search) == {"journal"}
        assert "field journal" in await call(connected, "vault_read_note", path="Home.md")


def test_the_memory_command_takes_the_vault_after_its_subcommand(
    three_vaults: ThreeVaults, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Items 17 and 10: `memory list --config F --name journal` lists journal's memories
    and says so; `memory forget journal:<id>` forgets in journal, a bare id in the default."""
    env = {"OBSIDIAN_CONFIG_DIR": str(three_vaults.config_dir)}
    config = str(three_vaults.config)
    cli = (monkeypatch, capsys)
    content = "content=The dredger returns in March"
    stored = run_cli(
        *cli,
        "call",
        "vault_remember",
        content,
        'tags=["survey"]',
        "vault=journal",
        "--config",
        config,
        env=env,
    )
    assert stored.returncode == 0, stored.stderr
    found = re.search(r"Remembered as ([0-9a-z]+)\.", stored.stdout)
    assert found is not None, stored.stdout
    listed = run_cli(*cli, "memory", "list", "--config", config, "--name", "journal", env=env)
    assert listed.returncode == 0, listed.stderr
    assert "memories in vault journal" in listed.stderr
    assert found[1] in listed.stdout and "The dredger returns in March" in listed.stdout
    bare = run_cli(*cli, "memory", "--config", config, "forget", found[1], env=env)
    assert bare.returncode == 1 and "no memory has the id" in bare.stderr
    crossed = run_cli(
        *cli,
        "memory",
        "forget",
        f"journal:{found[1]}",
        "--config",
        config,
        "--name",
        "work",
        env=env,
    )
    assert crossed.returncode == 1 and "is in vault journal, but --name work" in crossed.stderr
    forgot = run_cli(*cli, "memory", "forget", f"journal:{found[1]}", "--config", config, env=env)
    assert forgot.returncode == 0, forgot.stderr
    # The command prints the whole id; the receipt named it by its shortest unique ending.
    forgotten = forgot.stdout.split(":")[0].removeprefix("Forgot ")
    assert forgot.stdout.startswith("Forgot ") and forgotten.endswith(found[1])


def test_call_and_index_answer_from_the_vaults_that_answer(
    three_vaults: ThreeVaults,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Item 13: with one REST vault unreachable, `call` of a tool that ranks by meaning
    answers from the folder vault and names the one it could not search, and `index`
    indexes the folder vault and exits 1 naming the other; neither ends in a traceback."""
    config = tmp_path / "down.toml"
    config.write_text(
        f"[vaults.journal]\npath = {json.dumps(str(three_vaults.journal))}\n\n"
        f'[vaults.away]\nurl = "https://127.0.0.1:{free_port()}"\napi_key = "k"\n'
        f'cert_sha256 = "{"AB" * 32}"\n',
        "utf-8",
    )
    env = {
        "OBSIDIAN_CONFIG_DIR": str(tmp_path / "config"),
        "OBSIDIAN_CACHE_DIR": str(tmp_path / "cache"),
        "OBSIDIAN_RETRY_BUDGET": "1",
        "OBSIDIAN_USAGE_LOG": "on",
    }
    cli = (monkeypatch, capsys)
    asked = run_cli(
        *cli,
        "call",
        "vault_semantic_query",
        "query=eelgrass cover",
        "--config",
        str(config),
        env=env,
    )
    assert asked.returncode == 0, asked.stderr
    assert "journal:Projects/Seagrass Survey.md" in asked.stdout
    assert "(not searched: In vault away: " in asked.stdout
    # Item 11: the usage log counts the search for the vault that answered only.
    logged = (tmp_path / "cache" / "usage" / LOG_FILE).read_text("utf-8").splitlines()
    assert [json.loads(line)["vaults"] for line in logged] == [["journal"]]
    indexed = run_cli(*cli, "index", "--config", str(config), env=env)
    assert indexed.returncode == 1
    assert "journal: passage index" in indexed.stdout
    assert "vault away:" in indexed.stderr and "The index was not brought up to date" in (
        indexed.stderr
    )
    assert "Traceback" not in asked.stderr + indexed.stderr
