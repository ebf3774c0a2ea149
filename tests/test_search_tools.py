"""End-to-end tests of the search tools through a real MCP client: on the fixture vault's
folder (with and without stored vectors) and through the stand-in Local REST API (plugin
5.x with /search/smart, 3.x without)."""

import json
import os
import re
import shutil
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from mcp import Client

from obsidian_mcp.config import Settings
from obsidian_mcp.server import build_server
from obsidian_mcp.text.tokens import estimate_tokens
from tests.conftest import rest_settings, seed_index
from tests.fixture_vault import FIXTURE_VAULT
from tests.standin.process import StandinProcess
from tests.test_read_tools import text_of

ProgressEvents = list[tuple[float, float | None, str | None]]


async def call(client: Client, tool: str, **args: object) -> str:
    result = await client.call_tool(tool, args)
    assert not result.is_error, text_of(result)
    return text_of(result)


@pytest.fixture
async def folder_client(
    vault_copy: Path, tmp_path: Path, fixture_index: Path
) -> AsyncIterator[Client]:
    """The folder with Smart Connections' vectors and a complete passage index."""
    settings = seed_index(
        Settings(vault_path=vault_copy, config_dir=tmp_path / "config"), fixture_index
    )
    async with Client(build_server(settings), raise_exceptions=True) as client:
        yield client


@pytest.fixture
async def keyword_client(vault_copy: Path, tmp_path: Path) -> AsyncIterator[Client]:
    shutil.rmtree(vault_copy / ".smart-env")
    settings = Settings(
        vault_path=vault_copy, config_dir=tmp_path / "config", index_embeddings=False
    )
    async with Client(build_server(settings), raise_exceptions=True) as client:
        yield client


@pytest.fixture(scope="module", params=[("5.1.0", "upstream"), ("5.1.0", "fork"), ("3.2.0", "off")])
def standin(request: pytest.FixtureRequest, shared_vault: Path) -> Iterator[StandinProcess]:
    """Plugin 5.x with the mcp-tools /search/smart extension (original and fork), and
    3.x without any semantic route."""
    version, smart = request.param
    with StandinProcess(shared_vault, plugin_version=version, smart=smart) as process:
        yield process


def has_smart_search(standin: StandinProcess) -> bool:
    return standin.plugin_version.startswith("5")


@pytest.fixture
async def rest_client(standin: StandinProcess, tmp_path: Path) -> AsyncIterator[Client]:
    # Without the local model: the source labels of the plugin's routes are what is tested.
    settings = rest_settings(standin, tmp_path, index_embeddings=False)
    async with Client(build_server(settings), raise_exceptions=True) as client:
        yield client


def group_paths(markdown: str) -> list[str]:
    return [
        line[3:].split(" · ")[0].split(" (")[0]
        for line in markdown.splitlines()
        if line.startswith("## ")
    ]


# -- tool surface ------------------------------------------------------------------------


@pytest.mark.anyio
async def test_tools_are_listed_read_only_with_guidance(folder_client: Client) -> None:
    tools = {tool.name: tool for tool in (await folder_client.list_tools()).tools}
    for name in (
        "vault_semantic_query",
        "vault_smart_search",
        "vault_find_related",
        "vault_quick_context",
    ):
        tool = tools[name]
        assert tool.annotations is not None and tool.annotations.read_only_hint
        assert tool.description and len(tool.description) > 50
    assert "default" in (tools["vault_semantic_query"].description or "").lower()
    schema = tools["vault_semantic_query"].input_schema["properties"]
    assert schema["limit"]["default"] == 5
    assert {"include_context", "folder", "max_tokens", "format", "concise"} <= set(schema)


# -- folder source -----------------------------------------------------------------------


@pytest.mark.anyio
async def test_concise_replies_are_packed_at_the_size_they_are_shown(
    folder_client: Client,
) -> None:
    """concise=true said "left out to stay within max_tokens=1000" of a 250-token reply:
    it was packed as if each passage's text were shown."""
    for tool in ("vault_semantic_query", "vault_smart_search"):
        text = await call(folder_client, tool, query="Rook", concise=True, limit=20)
        assert "left out" not in text, text
        assert estimate_tokens(text) <= 1000
        data = json.loads(
            await call(folder_client, tool, query="Rook", concise=True, limit=20, format="json")
        )
        assert data["left_out_for_budget"] == [] and data["shown"] == 20, (tool, data["shown"])
    # Past its budget a concise reply still says what it left out.
    tight = await call(
        folder_client, "vault_semantic_query", query="Rook", concise=True, limit=40, max_tokens=150
    )
    assert "left out to stay within max_tokens=150" in tight and estimate_tokens(tight) <= 150


@pytest.mark.anyio
async def test_semantic_query_groups_passages_within_budget(folder_client: Client) -> None:
    text = await call(folder_client, "vault_semantic_query", query="What is Kettle's real name?")
    # The local index is complete: Smart Connections' vectors of the same model are left out.
    assert "semantic: the server's local passage index, fused" in text.splitlines()[0]
    assert "Characters/Kettle.md" in group_paths(text)
    assert estimate_tokens(text) <= 1000
    # Passages counted as passages, files as files (not "(3 shown)" after a file count).
    assert re.search(r"showing \d+ of \d+ passages, from \d+ of \d+ files", text), text
    assert "next: vault_semantic_query(" in text
    assert "· passage" in text and "summary:" in text
    paths = group_paths(text)
    assert len(paths) == len(set(paths)), "each file is one group"


@pytest.mark.anyio
async def test_smart_connections_vectors_answer_by_meaning_until_the_index_is_built(
    vault_copy: Path, tmp_path: Path
) -> None:
    # No wait for the meaning index, as in a vault too big to wait for.
    settings = Settings(
        vault_path=vault_copy, config_dir=tmp_path / "config", index_meaning_wait_seconds=0
    )
    async with Client(build_server(settings), raise_exceptions=True) as client:
        # A new vault: its first query starts the build and finds no passage vector yet.
        text = await call(client, "vault_semantic_query", query="What is Kettle's real name?")
    first = text.splitlines()[0]
    assert "stored Smart Connections vectors (the query embedded by the local model)" in first
    assert re.search(r"meaning index: \d+ of 95 notes", first), first
    assert "Characters/Kettle.md" in group_paths(text)


@pytest.mark.anyio
async def test_keyword_only_says_lexical_fallback(keyword_client: Client) -> None:
    text = await call(
        keyword_client, "vault_semantic_query", query="What does Æsa keep her reading-salt in?"
    )
    assert "lexical-fallback" in text.splitlines()[0]
    assert "walrus-ivory box" in text


@pytest.mark.anyio
async def test_budget_and_limit_are_respected(folder_client: Client) -> None:
    text = await call(
        folder_client, "vault_semantic_query", query="Mira lamp sea Rook", limit=50, max_tokens=300
    )
    assert estimate_tokens(text) <= 300
    assert "left out to stay within max_tokens=300" in text or "showing" in text
    few = await call(folder_client, "vault_semantic_query", query="Mira", limit=2)
    assert few.count("· passage") <= 2


@pytest.mark.anyio
async def test_json_has_the_same_passages(folder_client: Client) -> None:
    query = "Who replaces Rook in the novel?"
    markdown = await call(folder_client, "vault_semantic_query", query=query)
    data = json.loads(await call(folder_client, "vault_semantic_query", query=query, format="json"))
    assert [group["path"] for group in data["groups"]] == group_paths(markdown)
    assert data["source"] == "local-index"
    for group in data["groups"]:
        for passage in group["passages"]:
            assert passage["label"] == "passage"
            assert passage["text"].strip() in markdown
    assert data["next"]


@pytest.mark.anyio
async def test_concise_gives_paths_and_scores_only(folder_client: Client) -> None:
    text = await call(folder_client, "vault_semantic_query", query="Kettle", concise=True)
    assert "· passage" not in text
    assert re.search(r"^- Characters/Kettle\.md \(Kettle\) · score", text, re.MULTILINE)


@pytest.mark.anyio
async def test_folder_scopes_results(folder_client: Client) -> None:
    data = json.loads(
        await call(
            folder_client,
            "vault_semantic_query",
            query="Mira lamps",
            folder="Writing",
            format="json",
        )
    )
    assert data["groups"]
    assert all(group["path"].startswith("Writing/") for group in data["groups"])
    exact = json.loads(
        await call(
            folder_client,
            "vault_smart_search",
            query="Mira",
            folder="Characters/Companion",
            format="json",
        )
    )
    assert all(g["path"].startswith("Characters/Companion/") for g in exact["groups"])


@pytest.mark.anyio
@pytest.mark.timeout(900)  # the meaning wait's bound below, and the rest of the test
async def test_cold_query_reports_progress(tmp_path: Path) -> None:
    # The fixture vault's places and items (14 notes): a first question on a vault with no
    # index, without the whole vault's model work.
    vault = tmp_path / "vault"
    for folder in ("Places", "Items"):
        shutil.copytree(FIXTURE_VAULT / folder, vault / folder)
    events: ProgressEvents = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        events.append((progress, total, message))

    # The first question's wait for the meaning index is a bound, not a deadline: on a busy
    # machine the build takes longer than the default 30 s, and the wait still ends with it.
    settings = Settings(
        vault_path=vault, config_dir=tmp_path / "config", index_meaning_wait_seconds=600
    )
    async with Client(build_server(settings), raise_exceptions=True) as client:
        await client.call_tool(
            "vault_semantic_query", {"query": "lighthouse"}, progress_callback=on_progress
        )
        assert events and events[-1][0] == events[-1][1]
        # A small vault: the first question waits for the meaning index, and says how far.
        assert any("meaning index:" in (message or "") for _, _, message in events), events
        events.clear()
        await client.call_tool(
            "vault_semantic_query", {"query": "lighthouse"}, progress_callback=on_progress
        )
        assert events == []  # warm: nothing re-read


@pytest.mark.anyio
async def test_a_changed_note_is_never_served_stale(
    folder_client: Client, vault_copy: Path
) -> None:
    query = "What colour is the weathervane on the Tallow House?"
    before = await call(folder_client, "vault_semantic_query", query=query)
    assert "zinnober-striped" not in before
    note = vault_copy / "Places" / "The Tallow House.md"
    note.write_text(
        note.read_text() + "\n\n## Roof\n\nThe weathervane is zinnober-striped "
        "and shaped like a herring.\n"
    )
    stat = note.stat()
    os.utime(note, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10_000_000))
    after = await call(folder_client, "vault_semantic_query", query=query)
    assert "zinnober-striped" in after


@pytest.mark.anyio
async def test_smart_search_matches_phrases_with_counts(folder_client: Client) -> None:
    text = await call(folder_client, "vault_smart_search", query='"sluice keys"')
    assert "exact terms" in text.splitlines()[0]
    assert "Sessions/Session 11 - What the Ferryman Carries.md" in group_paths(text)
    assert re.search(r"· \d+ matches ·", text)
    assert "keeper of the sluice keys" in text
    none = await call(folder_client, "vault_smart_search", query='"no such phrase anywhere"')
    assert "No note contains every term" in none


@pytest.mark.anyio
async def test_smart_search_with_thousands_of_matches_stays_in_budget(
    folder_client: Client,
) -> None:
    text = await call(folder_client, "vault_smart_search", query="the", max_tokens=500)
    assert estimate_tokens(text) <= 500
    counts = re.search(r"showing (\d+) of ([\d,]+) matches", text)
    assert counts, text
    shown, total = int(counts[1]), int(counts[2].replace(",", ""))
    assert total > 1000 and shown <= 10


@pytest.mark.anyio
async def test_find_related_lists_links_backlinks_and_similar(folder_client: Client) -> None:
    text = await call(folder_client, "vault_find_related", path="Characters/Kettle.md")
    assert "## links to" in text and "## linked from" in text and "## similar" in text
    assert "Kettle's Mother (no such note)" in text
    data = json.loads(
        await call(folder_client, "vault_find_related", path="Characters/Kettle", format="json")
    )
    assert any(link["path"] is None for link in data["outlinks"])
    assert any(b["path"] == "Characters/Hobb Marrow.md" for b in data["backlinks"])
    linked = {n["path"] for n in data["outlinks"] + data["backlinks"]}
    assert all(s["path"] not in linked for s in data["similar"])
    assert all(n["why"] for n in data["backlinks"])


@pytest.mark.anyio
async def test_find_related_unknown_note_suggests(folder_client: Client) -> None:
    result = await folder_client.call_tool("vault_find_related", {"path": "Characters/Ketle"})
    assert result.is_error
    assert "Kettle" in text_of(result)


@pytest.mark.anyio
async def test_quick_context_is_labelled_and_bounded(folder_client: Client) -> None:
    text = await call(
        folder_client, "vault_quick_context", topic="the Drowning of Caddow Reach", max_tokens=700
    )
    assert estimate_tokens(text) <= 700 + 50
    assert "## main notes" in text
    assert "summary" in text and "· passage" in text
    assert "next: vault_semantic_query(" in text
    data = json.loads(
        await call(folder_client, "vault_quick_context", topic="Caddow Reach", format="json")
    )
    assert data["main_files"] and data["themes"]
    assert len(data["key_passages"]) <= 3


@pytest.mark.anyio
async def test_quick_context_holds_small_budgets_in_both_formats(folder_client: Client) -> None:
    # The fuzzer found 325 tokens under max_tokens=100: entities and themes were never cut.
    for max_tokens in (100, 150, 300):
        text = await call(folder_client, "vault_quick_context", topic="Rook", max_tokens=max_tokens)
        assert estimate_tokens(text) <= max_tokens, (max_tokens, text)
        assert "Characters/Rook.md" in text  # the main note is the last thing cut
        raw = await call(
            folder_client, "vault_quick_context", topic="Rook", max_tokens=max_tokens, format="json"
        )
        assert estimate_tokens(raw) <= max_tokens, (max_tokens, raw)
        assert json.loads(raw)["main_files"][0]["path"] == "Characters/Rook.md"


# -- through the REST API (stand-in) -----------------------------------------------------


@pytest.mark.anyio
async def test_rest_source_label_and_passages(rest_client: Client, standin: StandinProcess) -> None:
    text = await call(
        rest_client, "vault_semantic_query", query="What does Æsa keep her reading-salt in?"
    )
    first = text.splitlines()[0]
    if has_smart_search(standin):
        assert "/search/smart" in first
    else:
        assert "lexical-fallback" in first
    assert "Characters/Æsa Þórdóttir.md" in group_paths(text)
    assert estimate_tokens(text) <= 1000


@pytest.mark.anyio
async def test_rest_smart_search_uses_simple_search(rest_client: Client) -> None:
    text = await call(rest_client, "vault_smart_search", query='"sluice keys" Tomas')
    assert "Sessions/Session 11 - What the Ferryman Carries.md" in group_paths(text)
    assert "sluice keys" in text


@pytest.mark.anyio
async def test_rest_edit_is_seen_by_the_next_query(
    rest_client: Client, standin: StandinProcess
) -> None:
    path = f"Inbox/Staleness {standin.plugin_version}.md"
    query = "Which bird pecked the harbourmaster's quarterdeck clock?"
    with standin.client() as http:
        http.put(
            f"/vault/{path}",
            content="# Clock\n\nA cormorant pecked the clock.\n",
            headers={"Content-Type": "text/markdown"},
        ).raise_for_status()
        first = await call(rest_client, "vault_semantic_query", query=query, folder="Inbox")
        assert "cormorant" in first
        http.put(
            f"/vault/{path}",
            content="# Clock\n\nA heron pecked the clock at noon.\n",
            headers={"Content-Type": "text/markdown"},
        ).raise_for_status()
        second = await call(rest_client, "vault_semantic_query", query=query, folder="Inbox")
        assert "heron" in second and "cormorant" not in second
        http.delete(f"/vault/{path}").raise_for_status()


@pytest.mark.anyio
async def test_rest_cold_query_reports_progress(standin: StandinProcess, tmp_path: Path) -> None:
    events: ProgressEvents = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        events.append((progress, total, message))

    # An index of its own: the module's other tests have indexed this vault already.
    server = build_server(rest_settings(standin, tmp_path, index_dir=tmp_path / "index"))
    async with Client(server, raise_exceptions=True) as client:
        await client.call_tool(
            "vault_semantic_query", {"query": "lighthouse"}, progress_callback=on_progress
        )
    assert events and events[-1][0] == events[-1][1]
    assert "notes" in (events[-1][2] or "")


@pytest.mark.anyio
async def test_rest_find_related_and_quick_context(rest_client: Client) -> None:
    related = await call(rest_client, "vault_find_related", path="Characters/Kettle.md")
    assert "Characters/Hobb Marrow.md" in related
    overview = await call(rest_client, "vault_quick_context", topic="Kettle")
    assert "Characters/Kettle.md" in overview
