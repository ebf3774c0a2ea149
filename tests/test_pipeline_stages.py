"""The optional stages of vault_semantic_query, each alone and each switched off: vocabulary
expansion, the per-note cap, the next-best menu and passage cutting."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from bench.economy import suggested_read
from obsidian_mcp.config import Settings
from obsidian_mcp.retrieval.expansion import (
    EXPANSION_WEIGHT,
    NoteNames,
    build_vocabulary,
    expand,
)
from obsidian_mcp.retrieval.keyword import terms
from obsidian_mcp.retrieval.packing import PassageHit, diversify, next_best
from obsidian_mcp.retrieval.render import format_search
from obsidian_mcp.retrieval.search import Retriever
from obsidian_mcp.retrieval.stages import Stages
from obsidian_mcp.server.app import open_retriever
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.text.markdown import parse_note
from obsidian_mcp.text.tokens import estimate_tokens
from obsidian_mcp.vault import Vault
from tests.conftest import folder_settings
from tests.fixture_vault import FIXTURE_VAULT


def fixture_names() -> list[NoteNames]:
    notes: list[NoteNames] = []
    for file in FIXTURE_VAULT.rglob("*.md"):
        path = file.relative_to(FIXTURE_VAULT).as_posix()
        if not path.startswith("."):
            parsed = parse_note(path, file.read_text("utf-8"))
            notes.append(NoteNames(path, parsed.title, parsed.aliases, parsed.tags))
    return notes


# -- vocabulary expansion ------------------------------------------------------------------


def test_roles_and_aliases_expand_to_the_names_the_vault_uses() -> None:
    vocabulary = build_vocabulary(fixture_names())

    def added(query: str) -> set[str]:
        return {term for term, _ in expand(terms(query), vocabulary)}

    assert added("How does the cartographer sign her maps?") == {"elodie", "brule"}
    assert added("What does the Magistrate wear on his hands?") == {"ilvane", "dusk"}
    assert added("What might little wick be christened?") == {"kettle"}
    # No note is aliased "the companion": the notes tagged character/companion are all
    # named after Mira.
    assert added("Which would the companion prefer?") == {"mira"}


def test_expansion_adds_nothing_to_a_question_that_uses_the_names() -> None:
    vocabulary = build_vocabulary(fixture_names())
    # "Mira" is an alias of Mira Vessant made of its own name; Kettle is a title.
    assert expand(terms("What does Mira think of Kettle?"), vocabulary) == []


def test_expanded_terms_weigh_less_than_the_question_s_own() -> None:
    vocabulary = build_vocabulary(
        [NoteNames("People/Ada Quill.md", "Ada Quill", ("the engineer", "Quill"), ())]
    )
    assert expand(terms("what did the engineer build"), vocabulary) == [
        ("ada", EXPANSION_WEIGHT),
        ("quill", EXPANSION_WEIGHT),
    ]
    assert 0 < EXPANSION_WEIGHT < 1


def test_a_tag_stands_only_for_names_most_of_its_notes_share() -> None:
    notes = [
        NoteNames("a.md", "Ada's Lab", (), ("crew/engineer",)),
        NoteNames("b.md", "Ada Quill", (), ("crew/engineer",)),
        NoteNames("c.md", "Workshop 2026", (), ("crew/engineer",)),
        NoteNames("d.md", "Log 2026", (), ("crew/engineer",)),
        NoteNames("e.md", "Bo", (), ("npc",)),
        NoteNames("f.md", "Cy", (), ("npc",)),
    ]
    vocabulary = build_vocabulary(notes)
    # "ada" is in two names of four (half); a shared year names nothing; the npc notes
    # share no name at all.
    assert vocabulary.stands_for == {("engineer",): frozenset({"ada"})}


# -- per-note cap and the next-best menu ---------------------------------------------------


def hit(path: str, start: int, section: str = "S", *, cut: bool = False) -> PassageHit:
    text = f"Passage of {path} at {start}, with a few words of its own to show."
    return PassageHit(path, (section,), start, start + len(text), text, 1.0, False, cut)


def test_diversify_lets_other_notes_in_before_a_note_s_extra_passages() -> None:
    ranked = [hit("a.md", 0), hit("a.md", 100), hit("a.md", 200), hit("b.md", 0), hit("a.md", 300)]
    order = [(h.path, h.start) for h in diversify(ranked, per_note=2)]
    assert order == [("a.md", 0), ("a.md", 100), ("b.md", 0), ("a.md", 200), ("a.md", 300)]


def test_next_best_skips_what_is_shown_and_repeats_no_section() -> None:
    shown = [hit("a.md", 0, "One")]
    candidates = [
        shown[0],
        hit("a.md", 50, "One"),  # the shown passage's section
        hit("b.md", 0, "Two"),
        hit("b.md", 90, "Two"),  # a second passage of a listed section
        hit("c.md", 0, "Three"),
        hit("d.md", 0, "Four"),
    ]
    menu = next_best(candidates, shown, entries=2)
    assert [(h.path, h.section) for h in menu] == [("b.md", ("Two",)), ("c.md", ("Three",))]


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
async def test_a_role_finds_the_passage_that_uses_the_name(
    small_vault: Path, tmp_path: Path
) -> None:
    query = "What does the engineer carry?"
    on = await retriever(small_vault, tmp_path).semantic_query(query, limit=1)
    off = await retriever(small_vault, tmp_path, stages_off=("expansion",)).semantic_query(
        query, limit=1
    )
    assert "brass spanner" in on.groups[0].passages[0].text
    assert off.groups[0].context.path == "People/Bo.md"


@pytest.mark.anyio
async def test_the_menu_offers_next_best_calls_within_the_budget(
    small_vault: Path, tmp_path: Path
) -> None:
    result = await retriever(small_vault, tmp_path).semantic_query(
        "cranes at night", limit=2, max_tokens=400
    )
    text = format_search(result)
    assert estimate_tokens(text) <= 400
    assert result.next_best and "next best:" in text
    shown = {(p.path, p.section) for group in result.groups for p in group.passages}
    assert not shown & {(h.path, h.section) for h in result.next_best}
    # The second call an agent makes is the menu's first: the benchmark follows it too.
    menu_first = text.split("next best:\n- ", 1)[1].splitlines()[0]
    followed = suggested_read(text)
    assert followed is not None and f'path="{followed["path"]}"' in menu_first

    plain = await retriever(small_vault, tmp_path, stages_off=("menu",)).semantic_query(
        "cranes at night", limit=2, max_tokens=400
    )
    assert not plain.next_best and "next best:" not in format_search(plain)


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
    # The default, chosen by measurement (Settings.stages_off), cuts passages only.
    assert Stages.without(Settings().stages_off) == Stages(
        expansion=False, note_cap=False, menu=False
    )
    monkeypatch.setenv("OBSIDIAN_STAGES_OFF", "[]")
    assert Stages.without(Settings().stages_off) == Stages()
    monkeypatch.setenv("OBSIDIAN_STAGES_OFF", '["menu", "note-cap"]')
    assert Stages.without(Settings().stages_off) == Stages(note_cap=False, menu=False)


def test_an_unknown_stage_name_is_refused_with_the_names_allowed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OBSIDIAN_STAGES_OFF", '["reranking"]')
    with pytest.raises(ValidationError, match="expansion"):
        Settings()
