"""vault_semantic_query on both development vaults (issue 26, items 1 and 2): the best
passage leads, and the `next:` hint names it where its section holds more than the reply
shows (`packing.next_read`); a reply whose best match is weak says so, in words
and in JSON, and one that answers does not.

Fusion seats each ranking's best few passages first, which decides what gets into a reply;
the reply then shows its notes by score (`packing.group_by_file`). The weak-match floor is
calibrated by `python -m bench.retrieval.weak_match`, which reports the rates on every
answerable and off-vault question; here a sample of each is pinned.
"""

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bench.shared.harness import QUESTIONS, REPO_ROOT, load_questions
from obsidian_mcp.opening import model_loader, open_retriever
from obsidian_mcp.reading import read_note_window
from obsidian_mcp.retrieval.cutting import PassageHit
from obsidian_mcp.retrieval.render import format_search, read_call, search_data
from obsidian_mcp.retrieval.search import Retriever
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.text.markdown import parse_note
from obsidian_mcp.vault import Vault
from tests.conftest import folder_settings, seed_index
from tests.fixture_vault import copy_fixture_vault

LEDGERLINE = REPO_ROOT / "fixtures" / "ledgerline"
# Questions of each vault's dev split (and the three of the issue), asked with the tool's
# defaults.
ORDER_QUESTIONS = {
    "fixtures": [
        "Why didn't we use embeddings in the project?",
        "What food does Mira hate?",
        "Who is Kettle?",
        *(q.question for q in load_questions(QUESTIONS) if q.id in ("q05", "q12", "q30", "q55")),
    ],
    "ledgerline": [
        q.question
        for q in load_questions(LEDGERLINE / "questions.jsonl")
        if q.id in ("l10", "l15", "l46", "l55", "l64", "l80")
    ],
}
# Ledgerline without its devlogs, meetings, handovers and dailies (255 of its 360 KB): its
# index is built here, and this keeps that to a few seconds of the model's work. The
# questions above are answered in what is left; python -m bench.retrieval.weak_match and
# python -m bench.retrieval.vaults ask every question of the whole vault.
_LEDGERLINE_LEFT_OUT = ("Devlog", "Meetings", "Handover", "Daily")
# The examples, each listed a note before the one that answers it.
LEADS = {
    "Why didn't we use embeddings in the project?": "Dev/ADR/ADR-003 No embeddings for now.md",
    "What food does Mira hate?": "Characters/Companion/Likes and Dislikes.md",
    "Who is Kettle?": "Characters/Kettle.md",
}
# Questions about neither vault whose best match is far below the floor on both
# (fixtures/off_vault_questions.jsonl; python -m bench.retrieval.weak_match --dump lists each).
OFF_VAULT = [
    "spaceship warp drive quantum",
    "How many calories are in a banana?",
    "How do I set up a VPN on my home router?",
    "What is the capital of Australia?",
    "How do I replace the battery in an iPhone 12?",
]


async def _retriever(vault: Path, tmp_path: Path, index: Path | None) -> Retriever:
    settings = folder_settings(vault, tmp_path, index_dir=tmp_path / "index")
    if index is not None:
        seed_index(settings, index)
    retriever = open_retriever(Vault(None, FolderSource(vault)), settings, model_loader(settings))
    await retriever.build_index()
    return retriever


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module", params=["fixtures", "ledgerline"])
async def retriever(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    fixture_index: Path,
) -> AsyncIterator[tuple[str, Retriever]]:
    """Each development vault with its complete passage index (the fixture vault's is
    built once per test run; ledgerline's here)."""
    name: str = request.param
    root = tmp_path_factory.mktemp(name)
    if name == "fixtures":
        built = await _retriever(copy_fixture_vault(root / "vault"), root, fixture_index)
    else:
        left_out = shutil.ignore_patterns(*_LEDGERLINE_LEFT_OUT)
        shutil.copytree(LEDGERLINE / "vault", root / "vault", ignore=left_out)
        built = await _retriever(root / "vault", root, None)
    yield name, built
    built.close()


async def _unshown_blocks(found: Retriever, hit: PassageHit, reply: str) -> list[str]:
    """The blocks of text (paragraphs, lists...) that vault_read_note gives for the hit's
    section and the reply does not hold."""
    window = await read_note_window(
        found.vault,
        hit.path,
        heading=" > ".join(hit.section) or None,
        offset=0,
        max_chars=found.settings.read_max_chars,
    )
    read = parse_note(hit.path, window.text)
    blocks = (read.content[block.start : block.end] for block in read.paragraphs)
    return [block for block in blocks if block not in reply]


@pytest.mark.anyio
async def test_the_best_passage_leads_and_the_hint_reads_what_is_not_shown(
    retriever: tuple[str, Retriever],
) -> None:
    name, found = retriever
    moved = 0
    for question in ORDER_QUESTIONS[name]:
        result = await found.semantic_query(question, limit=5)
        scores = [group.score for group in result.groups]
        assert scores == sorted(scores, reverse=True), (question, scores)
        best = result.best
        assert best is not None and best in result.groups[0].passages, question
        assert best.score == max(h.score for g in result.groups for h in g.passages)
        if question in LEADS:  # the examples: the note that answers leads
            assert result.groups[0].context.path == LEADS[question], (question, scores)
        # The hint reads the best passage when its section, as vault_read_note gives it,
        # has text the reply lacks; else another passage whose section has.
        text = format_search(result)
        hint = result.read_next
        assert hint is not None, question
        assert f"or {read_call(hint.path, hint.section)}" in text.splitlines()[-1], question
        assert search_data(result)["next"][-1] == read_call(hint.path, hint.section)
        assert await _unshown_blocks(found, hint, text), (question, hint)
        if hint != best:  # only when reading the best section would add nothing
            assert not await _unshown_blocks(found, best, text), (question, best)
        moved += hint != best
    # Among these questions the rule names another passage than the best at least once.
    assert moved, name


@pytest.mark.anyio
async def test_a_weak_best_match_is_said_in_words_and_in_json(
    retriever: tuple[str, Retriever],
) -> None:
    _, found = retriever
    for question in OFF_VAULT:
        result = await found.semantic_query(question, limit=5)
        assert result.groups, question  # the nearest passages are still shown
        assert result.weak, (question, result.strength)
        assert format_search(result).splitlines()[1].startswith("weak match: nothing here is "
                                                                "close in meaning"), question
        data = search_data(result)
        assert data["weak_match"] is True
        assert data["match_strength"]["measure"] == "meaning"


@pytest.mark.anyio
async def test_an_answered_question_has_no_weak_match_label(
    retriever: tuple[str, Retriever],
) -> None:
    name, found = retriever
    for question in ORDER_QUESTIONS[name]:
        result = await found.semantic_query(question, limit=5)
        assert not result.weak, (question, result.strength)
        assert "weak match" not in format_search(result)
        assert search_data(result)["weak_match"] is False
