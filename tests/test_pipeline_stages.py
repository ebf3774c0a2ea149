"""The stages of vault_semantic_query on plain data and through a retriever, each switched
off: candidates (keyword), fusion (seats) and passage cutting."""

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from obsidian_mcp.config import Settings
from obsidian_mcp.index.embedder import Matrix
from obsidian_mcp.index.recipe import ASSUMED_RECIPE, Pooling, TextRole
from obsidian_mcp.opening import open_retriever
from obsidian_mcp.retrieval.candidates import Candidates, DenseRanking
from obsidian_mcp.retrieval.fusion import fuse, reciprocal_rank_fusion, seated
from obsidian_mcp.retrieval.search import Retriever
from obsidian_mcp.retrieval.semantic import SemanticAnswer
from obsidian_mcp.retrieval.stages import Stages
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.vault import Vault
from tests.conftest import folder_settings

# -- fusion, on plain data ------------------------------------------------------------------


def test_seated_puts_each_ranking_s_best_first_taken_in_turn() -> None:
    fused = {1: 0.9, 2: 0.8, 3: 0.7, 4: 0.6, 5: 0.5}
    order = [item for item, _ in seated(fused, [[5, 4], [3]])]
    assert order == [5, 3, 4, 1, 2]
    assert [item for item, _ in seated(fused, [])] == [1, 2, 3, 4, 5]


def test_fusion_without_seats_is_the_fused_order() -> None:
    # The keyword's clear winner (7) and the semantic source's (9) are seated first; without
    # seats, the passage both rankings agree on (8) leads.
    candidates = Candidates(
        keyword=[7, 8],
        dense=None,
        semantic=[9, 8],
        answer=SemanticAnswer("smart-search", ()),
        whole_blocks={},
    )
    assert [c for c, _ in fuse(candidates, seats=True).ranked][:2] == [7, 9]
    plain = fuse(candidates, seats=False)
    assert plain.ranked[0][0] == 8
    assert dict(plain.ranked) == reciprocal_rank_fusion([([7, 8], 1.0), ([9, 8], 1.0)])
    assert plain.total == 3


class NoModel:
    """Where a dense ranking names its model: never called by fusion."""

    model_id = vector_space = "none"
    dims = 2
    recipe = ASSUMED_RECIPE
    pooling = Pooling.MEAN

    def embed(self, texts: Sequence[str], role: TextRole) -> Matrix:
        raise AssertionError("fusion does not embed")


def test_a_passage_both_rankings_put_near_the_top_is_seated() -> None:
    """Each ranking's own picks would fill the five places; the passage both the keywords
    and the local index rank in their first five (4) takes a seat after their best."""
    candidates = Candidates(
        keyword=[1, 2, 3, 4],
        dense=DenseRanking([5, 6, 7, 4], np.zeros(2, dtype=np.float32), NoModel(), ""),
        semantic=[],
        answer=SemanticAnswer("lexical-fallback", ()),
        whole_blocks={},
    )
    assert [c for c, _ in fuse(candidates, seats=True).ranked][:5] == [1, 4, 5, 2, 6]


# -- through the retriever, on a folder vault ---------------------------------------------


def write(vault: Path, path: str, text: str) -> None:
    target = vault / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, "utf-8")


@pytest.fixture
def small_vault(tmp_path: Path) -> Path:
    vault = tmp_path / "vault"
    write(
        vault,
        "People/Ada Quill.md",
        "---\naliases: [the engineer]\n---\n# Ada Quill\n\n## Work\n\n"
        "Ada carries a brass spanner everywhere. Nobody knows where she found it.\n",
    )
    write(
        vault,
        "People/Bo.md",
        "# Bo\n\nBo carries a lantern on the night shift at the engineer's old yard, "
        "where the cranes stand idle.\n",
    )
    for n in range(6):
        write(
            vault,
            f"Notes/Yard {n}.md",
            f"# Yard {n}\n\n## Day\n\nThe cranes at yard {n} lift crates of tea all day.\n\n"
            f"## Night\n\nAt night yard {n} is quiet, the cranes stand still and the gulls "
            "sleep on the booms.\n",
        )
    return vault


def retriever(vault: Path, tmp_path: Path, *, stages_off: tuple[str, ...] = ()) -> Retriever:
    """A retriever on a folder vault with every stage on but `stages_off` (keywords only:
    the stages under test work on words)."""
    settings = folder_settings(vault, tmp_path / "config", stages_off=list(stages_off))
    return open_retriever(Vault(None, FolderSource(vault)), settings, None)


@pytest.mark.anyio
async def test_without_the_keyword_ranking_a_vault_without_meaning_finds_nothing(
    small_vault: Path, tmp_path: Path
) -> None:
    query = "What does Ada carry?"
    on = await retriever(small_vault, tmp_path).semantic_query(query, limit=1)
    assert "brass spanner" in on.groups[0].passages[0].text
    off = await retriever(small_vault, tmp_path, stages_off=("keyword",)).semantic_query(
        query, limit=1
    )
    assert not off.groups and off.total_passages == 0


@pytest.mark.anyio
async def test_cutting_carries_a_passage_on_to_the_sentence_after_its_best(
    tmp_path: Path,
) -> None:
    vault = tmp_path / "vault"
    filler = [f"Line {n} of the harbour report says nothing new." for n in range(9)]
    # One paragraph, indexed as two passages: the comet ends the first one.
    paragraph = " ".join(
        [
            *filler,
            "The pilot saw a red comet.",
            "It means the tide will turn early tonight.",
            *filler,
        ]
    )
    write(vault, "Report.md", f"# Report\n\n{paragraph}\n")
    query = "red comet"
    cut = await retriever(vault, tmp_path).semantic_query(query, limit=1)
    whole = await retriever(vault, tmp_path, stages_off=("cutting",)).semantic_query(query, limit=1)
    assert "red comet. It means the tide will turn early tonight." in cut.groups[0].passages[0].text
    assert whole.groups[0].passages[0].text.endswith("The pilot saw a red comet.")


# -- the switches --------------------------------------------------------------------------


def test_stages_switched_on_and_off_by_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Stages.without(Settings().stages_off) == Stages()  # every stage runs by default
    monkeypatch.setenv("OBSIDIAN_STAGES_OFF", '["seats", "dense"]')
    assert Stages.without(Settings().stages_off) == Stages(seats=False, dense=False)


def test_an_unknown_stage_name_is_refused_with_the_names_allowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OBSIDIAN_STAGES_OFF", '["reranking"]')
    with pytest.raises(ValidationError, match="keyword"):
        Settings()
