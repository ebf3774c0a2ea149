"""Several vaults in one server (issue 28), through a real MCP client: `lore`, the fixture
vault through its folder, and `work`, a few of ledgerline's notes through the stand-in
listening on 127.0.0.2 with a certificate that names 127.0.0.1 only (the plugin's, made
before its binding host changed), trusted by a SHA-256 pin. Both vaults hold `Home.md`."""

import json
import os
import re
import time
import tomllib
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.types import TextContent

from bench.economy.definitions import measure_definitions
from obsidian_mcp.cli import main
from obsidian_mcp.config import Settings
from obsidian_mcp.server import build_server
from obsidian_mcp.sources.tls import fingerprint, stored_pin
from obsidian_mcp.vault_set import VaultSet, configured_vaults
from tests.conftest import NO_MEANING_WAIT, seed_index
from tests.fixture_vault import REPO_ROOT, copy_fixture_vault
from tests.standin.certs import generate_certificate
from tests.standin.process import StandinProcess
from tests.test_status import read_status

pytestmark = pytest.mark.anyio

LEDGERLINE = REPO_ROOT / "fixtures" / "ledgerline" / "vault"
WORK_NOTES = (
    "Decisions/ADR-0010 Gapless invoice numbering.md",
    "People/Adaeze Okonkwo.md",
    "Reference/Runbook - dunning-worker.md",
    "Incidents/2026-07-09 Duplicate dunning reminders.md",
)
WORK_HOME = "# Home\n\nThe Ledgerline work vault: decisions, runbooks and incidents.\n"
# What each vault alone holds.
LORE_QUESTION = "What did Mira promise at the lighthouse?"
LORE_ANSWER = "I'll light every lamp on the coast"
WORK_QUESTION = "Why were dunning reminders sent twice?"
WORK_NOTE = "Incidents/2026-07-09 Duplicate dunning reminders.md"


@dataclass
class TwoVaults:
    lore: Path
    work: Path
    standin: StandinProcess
    config: Path
    config_dir: Path
    pem: str

    def settings(self, **overrides: object) -> Settings:
        return Settings.model_validate(
            {"config": self.config, "config_dir": self.config_dir, **NO_MEANING_WAIT, **overrides}
        )

    def write_config(self, **work: object) -> None:
        """The vaults file: lore by its folder (the default), work by its REST API."""
        table = {
            "url": f"https://127.0.0.2:{self.standin.port}",
            "api_key": self.standin.api_key,
            "cert_sha256": fingerprint(self.pem),
            **work,
        }
        lines = ["[vaults.lore]", f"path = {json.dumps(str(self.lore))}", "default = true", ""]
        lines += ["[vaults.work]"]
        lines += [
            f"{key} = {json.dumps(value)}" for key, value in table.items() if value is not None
        ]
        self.config.write_text("\n".join(lines) + "\n", "utf-8")
        tomllib.loads(self.config.read_text("utf-8"))  # the test's own file must be valid


def write_vault(folder: Path, notes: dict[str, str]) -> Path:
    """A vault folder of these notes, written an hour ago: nobody is typing in them, so an
    edit is not told to wait (through the REST API alone it would be, even with force)."""
    long_ago = time.time() - 3600
    for note, text in notes.items():
        (folder / note).parent.mkdir(parents=True, exist_ok=True)
        (folder / note).write_text(text, "utf-8")
        os.utime(folder / note, (long_ago, long_ago))
    return folder


def lore_and_work(root: Path) -> tuple[Path, Path]:
    """The folders of `lore` (the fixture vault) and `work` (a few of ledgerline's notes and
    a `Home.md` of its own) under `root`."""
    work_notes = {note: (LEDGERLINE / note).read_text("utf-8") for note in WORK_NOTES}
    work = write_vault(root / "Work", work_notes | {"Home.md": WORK_HOME})
    return copy_fixture_vault(root / "Lore"), work


@pytest.fixture(scope="module")
def two_vaults(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoVaults]:
    root = tmp_path_factory.mktemp("two-vaults")
    lore, work = lore_and_work(root)
    # The plugin made its certificate while it listened on 127.0.0.1; it keeps it when the
    # binding host changes, so the certificate does not name the address it answers on.
    cert = generate_certificate(root / "cert")
    with StandinProcess(work, binding_host="127.0.0.2", cert_dir=root / "cert") as standin:
        assert standin.url.startswith("https://127.0.0.2:")
        vaults = TwoVaults(
            lore, work, standin, root / "vaults.toml", root / "config", cert.pem.decode()
        )
        vaults.write_config()
        yield vaults


@pytest.fixture
async def client(two_vaults: TwoVaults, fixture_index: Path) -> AsyncIterator[Client]:
    two_vaults.write_config()
    settings = two_vaults.settings()
    vaults = configured_vaults(settings)
    seed_index(vaults.find("lore").settings, fixture_index)  # type: ignore[union-attr]
    async with Client(build_server(settings, vaults=vaults)) as connected:
        yield connected


def _text(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def run_cli(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    *args: str,
    env: dict[str, str],
) -> Ran:
    """The command line run in this process, in the environment `test_cli.run_cli` gives
    its subprocess (no OBSIDIAN_* variable but `env`): a new process costs seconds."""
    for name in [name for name in os.environ if name.startswith("OBSIDIAN_")]:
        monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    capsys.readouterr()
    said = ""
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
        said = exc.code if isinstance(exc.code, str) else ""  # what Python prints at exit
    captured = capsys.readouterr()
    return Ran(code, captured.out, captured.err + said)


async def call(client: Client, tool: str, **arguments: object) -> str:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, _text(result)
    return _text(result)


async def refused(client: Client, tool: str, **arguments: object) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, _text(result)
    return _text(result)


# -- the listing -----------------------------------------------------------------------------


async def test_every_tool_takes_vault_described_once_with_the_names(client: Client) -> None:
    tools = (await client.list_tools()).tools
    assert tools and all("vault" in tool.input_schema["properties"] for tool in tools)
    instructions = client.instructions or ""
    assert "lore (default), work" in instructions
    assert all("lore" not in json.dumps(tool.input_schema) for tool in tools)  # said once
    assert (await measure_definitions(client)).tokens <= 2_650  # issue 35's bound
    assert all(tool.input_schema["properties"]["vault"] == {"type": "string"} for tool in tools)
    status = await read_status(client)
    assert status["default_vault"] == "lore"
    vaults = status["vaults"]
    assert isinstance(vaults, dict) and set(vaults) == {"lore", "work"}
    assert "127.0.0.2" in vaults["work"]["live_source"]


async def test_one_vault_lists_no_vault_and_refuses_it(two_vaults: TwoVaults) -> None:
    settings = Settings.model_validate(
        {"vault_path": two_vaults.lore, "config_dir": two_vaults.config_dir, **NO_MEANING_WAIT}
    )
    async with Client(build_server(settings)) as client:
        tools = (await client.list_tools()).tools
        assert all("vault" not in tool.input_schema["properties"] for tool in tools)
        answer = await refused(client, "vault_tree", vault="lore")
    assert answer.startswith("vault_tree has no argument 'vault'")


# -- questions, with and without the vault named ---------------------------------------------


async def test_each_vault_answers_its_questions_named_or_not(client: Client) -> None:
    everywhere = await call(client, "vault_semantic_query", query=LORE_QUESTION)
    assert LORE_ANSWER in everywhere
    headers = re.findall(r"^## (\S+?):", everywhere, re.MULTILINE)
    assert headers and headers[0] == "lore"
    named = await call(client, "vault_semantic_query", query=LORE_QUESTION, vault="lore")
    assert LORE_ANSWER in named
    assert set(re.findall(r"^## (\S+?):", named, re.MULTILINE)) == {"lore"}

    work = await call(client, "vault_semantic_query", query=WORK_QUESTION)
    assert f"work:{WORK_NOTE}" in work
    only_work = await call(client, "vault_semantic_query", query=WORK_QUESTION, vault="WORK")
    assert set(re.findall(r"^## (\S+?):", only_work, re.MULTILINE)) == {"work"}

    exact = await call(client, "vault_smart_search", query="dunning", limit=3)
    assert "## work:" in exact and "## lore:" not in exact  # only work has the word
    both = json.loads(await call(client, "vault_search_map", query="home", format="json"))
    rows = {row["path"].partition(":")[0] for row in both["rows"]}
    assert rows == {"lore", "work"}
    topic = await call(client, "vault_quick_context", topic="dunning reminders")
    assert "work:" in topic
    # A folder given with its vault's name searches that vault's folder only.
    scoped = await call(client, "vault_semantic_query", query="invoice", folder="work:Decisions")
    assert set(re.findall(r"^## (\S+?)/", scoped, re.MULTILINE)) == {"work:Decisions"}


def _paths(data: object, key: str = "path") -> Iterator[str]:
    """Every value of a `key` key in a JSON reply, a list's items one by one."""
    if isinstance(data, dict):
        for name, value in data.items():
            if name == key and isinstance(value, str):
                yield value
            elif name == key and isinstance(value, list):
                yield from (str(item) for item in value)
            else:
                yield from _paths(value, key)
    elif isinstance(data, list):
        for item in data:
            yield from _paths(item, key)


async def test_every_path_shown_reads_back_as_shown(client: Client) -> None:
    shown: set[str] = set()
    folders: set[str] = set()
    for tool, arguments in (
        ("vault_semantic_query", {"query": LORE_QUESTION}),
        ("vault_semantic_query", {"query": WORK_QUESTION, "limit": 8}),
        ("vault_smart_search", {"query": "Home"}),
        ("vault_quick_context", {"topic": "dunning"}),
        ("vault_find_related", {"path": "lore:Characters/Kettle.md"}),
        ("vault_find_related", {"path": f"work:{WORK_NOTE}"}),
    ):
        data = json.loads(await call(client, tool, format="json", **arguments))
        shown.update(_paths(data))
    tree = json.loads(await call(client, "vault_tree", vault="work", depth=3, format="json"))
    shown.update(_paths(tree, "files"))
    folders.update(_paths(tree))
    mapped = json.loads(await call(client, "vault_search_map", query="invoice", format="json"))
    for row in mapped["rows"]:
        (folders if row["is_folder"] else shown).add(row["path"])
    markdown = await call(client, "vault_read_note", path=f"work:{WORK_NOTE}", max_chars=300)
    shown.update(re.findall(r'vault_read_note\(path="([^"]+)"', markdown))
    assert {path.partition(":")[0] for path in shown | folders} == {"lore", "work"}
    for path in sorted(shown):
        header = await call(client, "vault_read_note", path=path, max_chars=200)
        assert header.startswith(f"{path} · "), (path, header[:120])
    for folder in sorted(folders):
        await call(client, "vault_tree", folder=folder, depth=1)


# -- isolation -------------------------------------------------------------------------------


async def test_the_same_path_is_two_notes(client: Client, two_vaults: TwoVaults) -> None:
    lore_home = await call(client, "vault_read_note", path="Home.md")
    work_home = await call(client, "vault_read_note", path="Home.md", vault="work")
    assert lore_home.startswith("lore:Home.md · [[Home]]")
    assert "Lanterns of the Hollow Sea" in lore_home and "Ledgerline" not in lore_home
    assert work_home.startswith("work:Home.md · [[Home]]") and "Ledgerline" in work_home
    assert await call(client, "vault_read_note", path="work:Home.md") == work_home
    conflict = await refused(client, "vault_read_note", path="work:Home.md", vault="lore")
    assert "is in vault work, but vault='lore'" in conflict
    # A note only the other vault has: the default vault says where it is, by its path
    # or by its name alone (issue 35, item 11).
    missing = await refused(client, "vault_read_note", path=WORK_NOTE)
    assert f"Closest existing paths: work:{WORK_NOTE}." in missing
    by_name = await refused(client, "vault_read_note", path="Adaeze Okonkwo")
    assert "Closest existing paths: work:People/Adaeze Okonkwo.md." in by_name
    folder = await refused(client, "vault_read_note", path="work:Decisions")
    assert "Call vault_tree(folder='work:Decisions')" in folder


@pytest.mark.parametrize(
    "path", ["../Work/Home.md", "work:../Lore/Home.md", "lore:../Work/Home.md", "work:/etc/hosts"]
)
async def test_no_path_leaves_its_vault(client: Client, path: str) -> None:
    answer = await refused(client, "vault_read_note", path=path)
    assert "leaves the vault" in answer or "is absolute" in answer


async def test_memory_scopes_and_scratch_stay_in_their_vault(
    client: Client, two_vaults: TwoVaults
) -> None:
    stored = await call(
        client, "vault_remember", content="Ade leads the dunning fix", tags=["team"], vault="work"
    )
    assert "Recall with vault_recall(vault='work', tags=['team'])" in stored  # followed as is
    await call(
        client, "vault_remember", content="Mira fears deep water", tags=["mira"], scope="mira"
    )
    lore = await call(client, "vault_recall", query="dunning Ade")
    work = await call(client, "vault_recall", query="dunning Ade", vault="work")
    assert "Ade leads the dunning fix" in work and "Ade leads" not in lore
    assert "Mira fears" not in await call(client, "vault_recall", scope="mira", vault="work")
    assert "Mira fears" in await call(client, "vault_recall", scope="mira")
    assert (await call(client, "vault_scratch_append", text="lore only")) == (
        "Appended to lore:obsidian-mcp/scratch.md."
    )
    await call(client, "vault_scratch_append", text="work only", vault="work")
    lore_scratch = (two_vaults.lore / "obsidian-mcp" / "scratch.md").read_text("utf-8")
    work_scratch = (two_vaults.work / "obsidian-mcp" / "scratch.md").read_text("utf-8")
    assert "lore only" in lore_scratch and "work only" not in lore_scratch
    assert "work only" in work_scratch and "lore only" not in work_scratch
    lore_memories = "".join(
        p.read_text("utf-8") for p in (two_vaults.lore / "obsidian-mcp").rglob("*.jsonl")
    )
    assert "Mira fears" in lore_memories and "Ade leads" not in lore_memories


async def test_an_edit_and_its_undo_stay_in_their_vault(
    client: Client, two_vaults: TwoVaults
) -> None:
    lore_home = (two_vaults.lore / "Home.md").read_bytes()
    receipt = await call(
        client,
        "vault_edit_note",
        path="work:Home.md",
        operation="append",
        target="Home",
        content="Added by the agent.",
    )
    assert receipt.startswith("Edited work:Home.md · append at Home")
    edit_id = re.search(r"edit_id (\S+)", receipt)
    assert edit_id is not None and edit_id[1].startswith("work:")
    assert "Added by the agent." in (two_vaults.work / "Home.md").read_text("utf-8")
    assert (two_vaults.lore / "Home.md").read_bytes() == lore_home
    # The id without its vault's name is the default vault's, whose journal lacks it: the
    # refusal names the vault that has it, and the call that works (issue 35, item 10).
    bare = await refused(client, "vault_undo_edit", edit_id=edit_id[1].partition(":")[2])
    assert f"vault work has it: vault_undo_edit(edit_id='{edit_id[1]}')" in bare
    undone = await call(client, "vault_undo_edit", edit_id=edit_id[1])
    assert f"undo at undo of {edit_id[1]}" in undone  # the id it names reads back as shown
    assert (two_vaults.work / "Home.md").read_text("utf-8") == WORK_HOME
    assert (two_vaults.lore / "Home.md").read_bytes() == lore_home
    again = await refused(client, "vault_undo_edit", edit_id=edit_id[1])
    undo_id = re.search(r"edit_id (\S+)", undone)
    assert undo_id is not None and undo_id[1].startswith("work:")
    assert f"already undone (by {undo_id[1]})" in again


async def test_a_misspelt_vault_prefix_is_refused_and_nothing_is_written(
    client: Client, two_vaults: TwoVaults
) -> None:
    """Issue 35, item 6: text before the first colon names a vault, or is a real path in
    the vaults in scope, or is refused with the names; it is never part of a note name."""
    before = sorted(p.relative_to(two_vaults.lore) for p in two_vaults.lore.rglob("*"))
    for tool, arguments in (
        ("vault_read_note", {"path": "jornal:Home.md"}),
        ("vault_read_note", {"path": "Ledger:Home.md", "vault": "work"}),
        ("vault_peek_file", {"path": "x:Rook"}),
        (
            "vault_edit_note",
            {"path": "jornal:Plans/New idea.md", "operation": "create", "content": "idea"},
        ),
        ("vault_smart_search", {"query": "lamp", "folder": "jornal:Journal"}),
        ("vault_tree", {"folder": "jornal:Journal"}),
    ):
        answer = await refused(client, tool, **arguments)
        assert "which names no vault (the vaults are lore, work)" in answer, (tool, answer)
    assert sorted(p.relative_to(two_vaults.lore) for p in two_vaults.lore.rglob("*")) == before
    # A real note whose name holds a colon is that note, shown with its vault's name.
    (two_vaults.lore / "10:30 standup.md").write_text("# Standup\n\nShip zephyrine.\n", "utf-8")
    try:
        standup = await call(client, "vault_read_note", path="10:30 standup.md")
        assert standup.startswith("lore:10:30 standup.md · [[10:30 standup]]"), standup
        assert "Ship zephyrine." in standup
        found = await call(client, "vault_smart_search", query="zephyrine", vault="lore")
        assert "### [[10:30 standup]] · " in found, found
    finally:
        (two_vaults.lore / "10:30 standup.md").unlink()


async def test_a_searchs_next_call_searches_where_it_did(client: Client) -> None:
    """Issue 35, item 7: every continuation reads back as shown; following it searches the
    same vault and folder, never mixing in the other vault."""
    one_folder = await call(
        client, "vault_semantic_query", query="lamp", folder="lore:Characters", limit=1
    )
    assert 'folder="lore:Characters")' in one_folder
    one_vault = await call(client, "vault_semantic_query", query="lamp", vault="lore", limit=1)
    assert 'folder="lore:")' in one_vault
    exact = await call(client, "vault_smart_search", query="the", vault="work", limit=1)
    assert 'folder="work:")' in exact
    everywhere = await call(client, "vault_semantic_query", query="lamp", limit=1)
    assert "folder=" not in everywhere.partition("next:")[2].partition("vault_read_note")[0]


async def test_a_memory_id_works_as_shown_or_the_refusal_names_its_vault(client: Client) -> None:
    """Issue 35, item 10: `work:<id>` forgets in work; a bare id the default vault lacks
    is refused naming the vault that has it."""
    stored = await call(
        client,
        "vault_remember",
        content="The billing freeze ends Friday",
        tags=["ops"],
        vault="work",
    )
    found = re.search(r"Remembered as ([0-9a-z]+)\.", stored)
    assert found is not None, stored
    memory_id = found.group(1)
    bare = await refused(client, "vault_forget", id=memory_id)
    assert f"vault work has it: vault_forget(id='work:{memory_id}')" in bare
    assert "Forgot" in await call(client, "vault_forget", id=f"work:{memory_id}")


async def test_prompts_and_resources_reach_the_vault_they_name(client: Client) -> None:
    """Issue 35, item 9: the handover prompt for `work:Home.md` lists work's memories and
    says to remember in work; update-knowledge and the recent memories take a vault."""
    await call(
        client,
        "vault_remember",
        content="Dunning retries back off hourly",
        tags=["dunning"],
        vault="work",
    )
    handover = await client.get_prompt("handover", {"task": "ship", "note": "work:Home.md"})
    text = handover.messages[0].content
    assert isinstance(text, TextContent)
    assert "Dunning retries back off hourly" in text.text
    assert "vault_read_note(path='work:Home.md')" in text.text
    assert "vault_remember(vault='work', ...)" in text.text
    learned = await client.get_prompt("update-knowledge", {"work": "w", "vault": "work"})
    learned_text = learned.messages[0].content
    assert isinstance(learned_text, TextContent)
    assert "dunning (" in learned_text.text and "vault_remember with vault='work'" in (
        learned_text.text
    )
    recent = await client.read_resource("obsidian://memory/recent?vault=work")
    assert "Dunning retries back off hourly" in str(recent.contents[0])
    assert "Dunning retries" not in str(
        (await client.read_resource("obsidian://memory/recent")).contents[0]
    )


async def test_one_vault_through_its_folder_and_its_api_is_served_once(
    two_vaults: TwoVaults, tmp_path: Path
) -> None:
    """Issue 35, item 4: `work`'s folder configured as a vault of its own beside work's REST
    API is one vault under two names: the REST one is refused, the folder one served."""
    config = tmp_path / "twins.toml"
    pin = fingerprint(two_vaults.pem)
    config.write_text(
        f"[vaults.folder]\npath = {json.dumps(str(two_vaults.work))}\n\n"
        f'[vaults.api]\nurl = "https://127.0.0.2:{two_vaults.standin.port}"\n'
        f'api_key = {json.dumps(two_vaults.standin.api_key)}\ncert_sha256 = "{pin}"\n',
        "utf-8",
    )
    settings = Settings.model_validate(
        {"config": config, "config_dir": two_vaults.config_dir, **NO_MEANING_WAIT}
    )
    async with Client(build_server(settings)) as connected:
        twin = await refused(connected, "vault_read_note", path="api:Home.md")
        assert "it serves the same vault as folder" in twin
        assert "Ledgerline" in await call(connected, "vault_read_note", path="folder:Home.md")


async def test_quick_context_over_every_vault_weighs_the_vaults(client: Client) -> None:
    """Issue 35, item 8: a topic only work holds fills the overview with work's notes, not
    every other note with lore's."""
    overview = await call(client, "vault_quick_context", topic=WORK_QUESTION)
    lore = len(re.findall(r"lore:", overview))
    work = len(re.findall(r"work:", overview))
    assert work > 0 and lore < work / 2, overview


async def test_an_unknown_vault_is_refused_with_the_names(client: Client) -> None:
    for tool, arguments in (
        ("vault_read_note", {"path": "Home.md"}),
        ("vault_semantic_query", {"query": "lamps"}),
        ("vault_recall", {}),
    ):
        answer = await refused(client, tool, vault="journal", **arguments)
        assert answer.endswith(
            ": There is no vault 'journal'; the vaults are lore (the default), work. Leave "
            "vault out for lore (a search then covers every vault)."
        )


# -- the certificate pin ---------------------------------------------------------------------


async def _work_answer(two_vaults: TwoVaults, **work: object) -> tuple[str, bool, int]:
    """What a call on work answers with this [vaults.work] table, and how many requests
    reached the stand-in meanwhile. The other vault answers whatever work does, and a
    search over every vault answers from it, saying when work could not be searched."""
    two_vaults.write_config(**work)
    before = two_vaults.standin.stats()["total"]
    settings = two_vaults.settings(retry_budget=3.0)
    async with Client(build_server(settings)) as client:
        result = await client.call_tool("vault_read_note", {"path": "work:Home.md"})
        lore = await client.call_tool("vault_read_note", {"path": "Home.md"})
        assert not lore.is_error, _text(lore)
        search = await call(client, "vault_smart_search", query="Vellmouth", limit=1)
    assert "## lore:" in search
    assert ("(not searched: In vault work: " in search) == bool(result.is_error)
    reached = two_vaults.standin.stats()["total"] - before
    return _text(result), bool(result.is_error), reached


async def test_a_wrong_pin_is_refused_with_the_fingerprint_seen(two_vaults: TwoVaults) -> None:
    seen = fingerprint(two_vaults.pem)
    answer, failed, reached = await _work_answer(two_vaults, cert_sha256="AB" * 32)
    assert failed
    assert f"presented SHA-256 {seen}" in answer
    # Said in the vault's own terms: its table's setting, not a variable a file ignores.
    assert f"set cert_sha256 in [vaults.work] of {two_vaults.config} to {seen}" in answer
    assert f"obsidian-mcp trust --url https://127.0.0.2:{two_vaults.standin.port}" in answer
    assert reached <= 1  # the stats call itself; nothing, not the key, went to the server


async def test_no_pin_is_refused_naming_trust_url(two_vaults: TwoVaults) -> None:
    url = f"https://127.0.0.2:{two_vaults.standin.port}"
    answer, failed, _ = await _work_answer(two_vaults, cert_sha256=None)
    assert failed
    assert f"Run `obsidian-mcp trust --url {url}` once" in answer
    # The certificate file itself does not help: it names 127.0.0.1, not 127.0.0.2.
    answer, failed, _ = await _work_answer(
        two_vaults, cert_sha256=None, cert=two_vaults.standin.cert
    )
    assert failed and "not trusted" in answer


def test_trust_url_pins_what_the_server_presents(
    two_vaults: TwoVaults,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = f"https://127.0.0.2:{two_vaults.standin.port}"
    cli = (monkeypatch, capsys)
    done = run_cli(*cli, "trust", "--url", url, "--yes", env={"OBSIDIAN_CONFIG_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert f"SHA-256 fingerprint: {fingerprint(two_vaults.pem)}" in done.stdout
    assert stored_pin(tmp_path, url) == fingerprint(two_vaults.pem)
    unconfirmed = run_cli(
        *cli, "trust", "--url", url, env={"OBSIDIAN_CONFIG_DIR": str(tmp_path / "x")}
    )
    assert unconfirmed.returncode == 1
    assert f"obsidian-mcp trust --url {url} --yes" in unconfirmed.stderr
    assert stored_pin(tmp_path / "x", url) is None


async def test_a_stored_pin_is_used_for_its_address(two_vaults: TwoVaults) -> None:
    url = f"https://127.0.0.2:{two_vaults.standin.port}"
    from obsidian_mcp.sources.tls import store_pin

    store_pin(two_vaults.config_dir, url, fingerprint(two_vaults.pem))
    try:
        answer, failed, _ = await _work_answer(two_vaults, cert_sha256=None)
    finally:
        (two_vaults.config_dir / "certificate-pins.json").unlink()
    assert not failed, answer
    assert answer.startswith("work:Home.md · ")


# -- the command line ------------------------------------------------------------------------


def test_doctor_checks_every_vault_and_names_it(
    two_vaults: TwoVaults, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    two_vaults.write_config()
    env = {
        "OBSIDIAN_CONFIG": str(two_vaults.config),
        "OBSIDIAN_CONFIG_DIR": str(two_vaults.config_dir),
    }
    done = run_cli(monkeypatch, capsys, "doctor", env=env)
    lines = done.stdout.splitlines()
    assert any(line.startswith("[ok  ] lore: vault folder:") for line in lines), done.stdout
    assert f"[ok  ] work: Obsidian reachable: https://127.0.0.2:{two_vaults.standin.port}" in (
        done.stdout
    )
    assert "[ok  ] work: certificate trusted: pinned: SHA-256" in done.stdout
    assert all(
        re.match(r"\[.{4}\] (lore|work): ", line) or line.startswith(("lore: ", "work: "))
        for line in lines
    ), done.stdout
    # Issue 35, item 16: with a vaults file, the fixes name the table's settings.
    two_vaults.write_config(api_key="wrong-key")
    try:
        wrong = run_cli(monkeypatch, capsys, "doctor", env=env)
    finally:
        two_vaults.write_config()
    table = f"[vaults.work] of {two_vaults.config}"
    assert f"copy the key from Obsidian > Settings > Local REST API into api_key in {table}" in (
        wrong.stdout
    )
    assert "OBSIDIAN_API_KEY" not in wrong.stdout


def test_vault_name_path_repeated_serves_several_folders(
    two_vaults: TwoVaults, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    done = run_cli(
        monkeypatch,
        capsys,
        "call",
        "--vault",
        f"lore={two_vaults.lore}",
        "--vault",
        str(two_vaults.work),
        "vault_tree",
        "vault=Work",
        "depth=1",
        env={"OBSIDIAN_CONFIG_DIR": str(two_vaults.config_dir)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Work:/: ")  # a bare PATH is named after its folder
    assert "\nDecisions/ (1 note)\n" in done.stdout and "\nWork:Home.md\n" in done.stdout


def _vaults(settings: Settings, *arguments: str) -> VaultSet:
    return configured_vaults(settings, arguments)


def test_the_environment_still_configures_one_vault(tmp_path: Path) -> None:
    settings = Settings.model_validate({"api_key": "k", "port": 27125, "vault_path": tmp_path})
    one = _vaults(settings)
    assert not one.several and one.vaults[0].settings is settings
    named = _vaults(settings, f"notes={tmp_path}")
    assert named.names == ["notes"] and named.vaults[0].settings.api_key is not None


def test_a_vault_folder_whose_name_holds_an_equals_sign_is_that_folder(tmp_path: Path) -> None:
    """Issue 35, item 17: `--vault ~/Notes=2024` is that folder, alone or beside another,
    not the vault `~/Notes` at `2024`; NAME=PATH still names a vault."""
    dated = tmp_path / "Notes=2024"
    dated.mkdir()
    other = tmp_path / "Other"
    other.mkdir()
    settings = Settings.model_validate({"api_key": None, "vault_path": None})
    alone = _vaults(settings, str(dated))
    assert alone.names == ["Notes=2024"] and alone.vaults[0].settings.vault_path == dated
    both = _vaults(settings, str(dated), f"other={other}")
    assert both.names == ["Notes=2024", "other"]
    assert both.vaults[0].settings.vault_path == dated
    named = _vaults(settings, f"dated={dated}")
    assert named.names == ["dated"] and named.vaults[0].settings.vault_path == dated
