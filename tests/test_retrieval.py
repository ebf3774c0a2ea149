"""Unit tests of the retrieval core: terms, BM25, fusion, packing, stored vectors,
custom-route shapes, exact matching, link resolution and the corpus cache."""

import contextlib
import json
import logging
import math
import os
import sqlite3
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from obsidian_mcp.index import store as store_module
from obsidian_mcp.index.coding import Codes
from obsidian_mcp.index.embedder import Matrix
from obsidian_mcp.index.smart_env import (
    load_vectors,
    model_key,
    parse_ajson,
    split_block_key,
)
from obsidian_mcp.index.store import Ids, IndexStore, NoteRow, PassageRow
from obsidian_mcp.index.vectors import (
    GROWTH,
    LOAD_BATCH,
    LOAD_HEADROOM,
    RANKED_FIRST,
    PassageVectors,
)
from obsidian_mcp.retrieval.corpus import (
    HEADING_WEIGHT,
    NAME_WEIGHT,
    PASSAGE_CHARS,
    Corpus,
    passage_spans,
)
from obsidian_mcp.retrieval.cutting import PassageHit
from obsidian_mcp.retrieval.exact import file_score, parse_needles
from obsidian_mcp.retrieval.fusion import reciprocal_rank_fusion
from obsidian_mcp.retrieval.keyword import VARIANT_WEIGHT, Bm25Index, fold, terms
from obsidian_mcp.retrieval.links import (
    LinkSite,
    backlinks_to,
    is_attachment_target,
    linking_notes,
)
from obsidian_mcp.retrieval.packing import (
    FileContext,
    SearchResult,
    group_by_file,
    next_read,
    pack,
    shorten,
)
from obsidian_mcp.retrieval.render import format_search, read_call, search_data
from obsidian_mcp.retrieval.semantic import Seed, normalise_hits, prf_hits
from obsidian_mcp.sources.folder import FolderSource
from obsidian_mcp.text.markdown import LinkResolver, parse_note
from obsidian_mcp.text.tokens import estimate_tokens
from obsidian_mcp.vault import Vault
from tests.conftest import count_parses
from tests.fixture_vault import REPO_ROOT, copy_fixture_vault

# -- terms and BM25 ----------------------------------------------------------------------


def test_fold_removes_case_and_accents() -> None:
    assert fold("Élodie Brûlé") == "elodie brule"
    assert fold("Æsa Þórdóttir") == "aesa thordottir"


def test_terms_drop_stopwords_and_stem_plurals() -> None:
    assert terms("What are the fears of the lamplighters?") == ["fear", "lamplighter"]


def index_of(
    store: IndexStore, docs: dict[str, str], lengths: dict[int, int] | None = None
) -> dict[str, int]:
    """Store each text as a note of one passage; the passage ids, by note. `lengths` gets
    each passage's length, as a corpus holds it (`Bm25Index.matches`)."""
    stored = store.put_notes(
        [
            NoteRow(
                name,
                0,
                len(text),
                text,
                (),
                None,
                (PassageRow(("",), 0, len(text), tuple(terms(text)), (), (text,)),),
                (),
                name,
            )
            for name, text in docs.items()
        ]
    )
    if lengths is not None:
        lengths.update({p.id: p.length for note in stored.values() for p in note.passages})
    return {name: stored[name].passages[0].id for name in docs}


class HeldLengths(dict[int, int]):
    """Passage lengths as a corpus holds them, looked up the way `Bm25Index.matches` asks."""

    def of(self, ids: Ids) -> Ids:
        return np.array([self.get(i, -1) for i in ids.tolist()], dtype=np.int64)


def test_bm25_ranks_rare_terms_and_tf_higher() -> None:
    store = IndexStore(":memory:")
    lengths = HeldLengths()
    ids = index_of(
        store,
        {
            "1": "the goat is named Tax Assessor",
            "2": "the ship carries a goat and a cargo of oil",
            "3": "the ship sails at dawn",
        },
        lengths,
    )
    scores = Bm25Index(store).scores([("goat", 1.0), ("named", 1.0)], lengths.of)
    assert set(scores) == {ids["1"], ids["2"]}
    assert scores[ids["1"]] > scores[ids["2"]]


def test_bm25_forgets_a_deleted_note() -> None:
    store = IndexStore(":memory:")
    lengths = HeldLengths()
    index = Bm25Index(store)
    index_of(store, {"1": "eels in the archive", "2": "lamps on the quay"}, lengths)
    store.delete_notes(["1"])
    assert store.keyword_totals() == (1, 2)
    assert index.document_frequency("eel") == 0
    assert index.scores([("eel", 1.0)], lengths.of) == {}
    ids = index_of(store, {"1": "more eels"}, lengths)
    assert set(index.scores([("eel", 1.0)], lengths.of)) == {ids["1"]}


def test_bm25_variants_join_word_forms() -> None:
    store = IndexStore(":memory:")
    lengths = HeldLengths()
    ids = index_of(
        store, {"1": "Apprentices are taken at fourteen", "2": "a journeyman's wage"}, lengths
    )
    index = Bm25Index(store)
    expanded = dict(index.expand(["apprenticeship"]))
    assert "apprentice" in expanded
    assert expanded["apprentice"] < expanded["apprenticeship"]
    assert set(index.scores(index.expand(["apprenticeship"]), lengths.of)) == {ids["1"]}


def test_bm25_keeps_terms_byte_for_byte() -> None:
    """The FTS5 tokenizer only splits on spaces: underscores, digits and letters beyond
    ASCII stay inside the term, and a term is never folded twice."""
    store = IndexStore(":memory:")
    lengths = HeldLengths()
    ids = index_of(
        store, {"1": "snake_case x86 Þórdóttir straße Москва", "2": "snake case москвы"}, lengths
    )
    index = Bm25Index(store)
    for term in ("snake_case", "x86", "thordottir", "strasse", "москва"):
        assert set(index.scores([(term, 1.0)], lengths.of)) == {ids["1"]}, term
    assert index.document_frequency("snake") == 1


def test_bm25_scores_only_touch_postings() -> None:
    store = IndexStore(":memory:")
    lengths = HeldLengths()
    index_of(store, {f"{n}": f"note number {n} about lamps" for n in range(200)}, lengths)
    ids = index_of(store, {"999": "the sluice keys"}, lengths)
    assert set(Bm25Index(store).scores([("sluice", 1.0)], lengths.of)) == {ids["999"]}


# -- fusion ------------------------------------------------------------------------------


def test_rrf_rewards_agreement_and_weights() -> None:
    fused = reciprocal_rank_fusion([(["a", "b", "c"], 1.0), (["c", "a", "d"], 1.0)])
    assert max(fused, key=fused.__getitem__) == "a"
    assert fused["c"] > fused["b"]
    weighted = reciprocal_rank_fusion([(["a", "b"], 1.0), (["b", "a"], 3.0)])
    assert weighted["b"] > weighted["a"]


def test_rrf_counts_a_repeated_item_once_per_ranking() -> None:
    fused = reciprocal_rank_fusion([(["a", "a", "b"], 1.0)])
    assert fused["a"] == pytest.approx(1 / 61)
    assert fused["b"] == pytest.approx(1 / 63)


# -- packing -----------------------------------------------------------------------------


def hit(path: str, text: str, start: int = 0) -> PassageHit:
    return PassageHit(path, ("Heading",), start, start + len(text), text, 1.0, False, False)


def simple_cost(passage: PassageHit) -> int:
    return estimate_tokens(passage.text) + 10


SENTENCES = "The lamp was lit at dusk. " * 20


def test_pack_respects_limit_and_budget() -> None:
    hits = [hit(f"n{i}.md", SENTENCES.strip()) for i in range(10)]
    packing = pack(hits, limit=3, budget=10_000, passage_cost=simple_cost, group_cost=lambda p: 5)
    assert len(packing.chosen) == 3
    tight = pack(hits, limit=10, budget=400, passage_cost=simple_cost, group_cost=lambda p: 5)
    assert tight.tokens <= 400
    assert tight.over_budget


def test_pack_shortens_at_sentence_boundaries_only() -> None:
    long = hit("a.md", SENTENCES.strip())
    packing = pack([long], limit=5, budget=80, passage_cost=simple_cost, group_cost=lambda p: 5)
    (chosen,) = packing.chosen
    assert chosen.text.endswith("dusk.")
    assert chosen.cut_after
    assert len(chosen.text) < len(long.text)


def test_shorten_refuses_a_useless_stub() -> None:
    one_sentence = hit("a.md", "A single long sentence " * 20 + "ends here.")
    assert shorten(one_sentence, 100) is None


def test_pack_skips_what_does_not_fit_and_takes_a_smaller_one() -> None:
    big = hit("a.md", "x" * 2000)  # one unbreakable "sentence"
    small = hit("b.md", "Short and sweet.")
    packing = pack(
        [big, small], limit=5, budget=100, passage_cost=simple_cost, group_cost=lambda p: 5
    )
    assert [p.path for p in packing.chosen] == ["b.md"]
    assert [p.path for p in packing.over_budget] == ["a.md"]


# -- the section the `next:` hint reads ---------------------------------------------------

COMPASS = """---
tags: [item]
---
# Tide-Compass

A brass compass with two needles. Rook bought it at the market.

## Behaviour in play

The second needle spins when the holder stands in moving water. It settles on land.

## History

Made in Vellmouth by an instrument maker.

### The engraving

COME HOME BY THE LOW ROAD.
"""
LANTERN = "# Mira's Lantern\n\nThe lantern burns fire-ink. It was never handed back.\n"
NOTES = {
    "Items/Tide-Compass.md": parse_note("Items/Tide-Compass.md", COMPASS),
    "Items/Mira's Lantern.md": parse_note("Items/Mira's Lantern.md", LANTERN),
}


def shown(path: str, text: str, section: tuple[str, ...], score: float) -> PassageHit:
    """A passage of one of NOTES as a reply shows it (its section as displayed: the title
    heading left out)."""
    start = NOTES[path].content.index(text)
    return PassageHit(path, section, start, start + len(text), text, score, False, False)


def reply(*hits: PassageHit, concise: bool = False) -> SearchResult:
    """A reply showing `hits`, given in the order fusion seated them."""
    contexts = {p: FileContext(p, NOTES[p].title, "", (), 100) for p in {h.path for h in hits}}
    groups = tuple(group_by_file(hits, contexts))
    return SearchResult(
        tool="vault_semantic_query",
        query="compass",
        folder="",
        source="local-index",
        source_note="",
        groups=groups,
        limit=5,
        max_tokens=1000,
        total_passages=len(hits),
        total_files=len(groups),
        over_budget=(),
        read_next=next_read(groups, hits, NOTES.get, text_shown=not concise),
    )


COMPASS_PATH = "Items/Tide-Compass.md"
BEHAVIOUR = shown(
    COMPASS_PATH,
    "The second needle spins when the holder stands in moving water. It settles on land.",
    ("Behaviour in play",),
    1.0,
)
# The best passage cut short of its section.
BEHAVIOUR_CUT = shown(
    COMPASS_PATH,
    "The second needle spins when the holder stands in moving water.",
    ("Behaviour in play",),
    1.0,
)
HISTORY = shown(COMPASS_PATH, "Made in Vellmouth by an instrument maker.", ("History",), 0.9)
ENGRAVING = shown(COMPASS_PATH, "COME HOME BY THE LOW ROAD.", ("History", "The engraving"), 0.8)
INTRO = shown(
    COMPASS_PATH, "A brass compass with two needles. Rook bought it at the market.", (), 0.7
)
LANTERN_FIRST = shown("Items/Mira's Lantern.md", "The lantern burns fire-ink.", (), 0.6)


def test_the_hint_reads_the_best_passage_whose_section_has_more_than_the_reply() -> None:
    # The best passage is its section whole: reading it adds nothing. The next one's
    # section, read with its subsections, holds the engraving the reply does not show.
    result = reply(BEHAVIOUR, HISTORY)
    assert result.read_next == HISTORY
    last = format_search(result).splitlines()[-1]
    assert last == f"next: {read_call(COMPASS_PATH, ('History',))}"
    assert search_data(result)["next"] == [read_call(COMPASS_PATH, ("History",))]
    # A best passage cut from a longer section is read in full.
    assert reply(BEHAVIOUR_CUT, HISTORY).read_next == BEHAVIOUR_CUT
    # Two passages that show a paragraph between them show it whole.
    second_sentence = shown(COMPASS_PATH, "It settles on land.", ("Behaviour in play",), 0.95)
    assert reply(BEHAVIOUR_CUT, second_sentence, HISTORY).read_next == HISTORY


def test_the_hint_moves_to_another_note_when_the_best_is_shown_whole() -> None:
    # The compass is shown whole (its frontmatter is not text the read would add); the
    # lantern's note has a sentence more.
    result = reply(INTRO, BEHAVIOUR, HISTORY, ENGRAVING, LANTERN_FIRST)
    assert result.best == BEHAVIOUR
    assert result.read_next == LANTERN_FIRST
    assert read_call(LANTERN_FIRST.path, ()) in format_search(result).splitlines()[-1]


def test_after_a_best_shown_whole_the_hint_follows_the_order_fusion_seated() -> None:
    # The best passage is its section whole; the history (scored higher) and the lantern
    # both hold more than the reply shows: the one fusion seated first is read.
    assert reply(BEHAVIOUR, LANTERN_FIRST, HISTORY).read_next == LANTERN_FIRST
    assert reply(BEHAVIOUR, HISTORY, LANTERN_FIRST).read_next == HISTORY
    # A best passage that holds more is named wherever fusion seated it.
    assert reply(LANTERN_FIRST, HISTORY, BEHAVIOUR_CUT).read_next == BEHAVIOUR_CUT


def test_no_read_is_suggested_when_the_reply_shows_every_section_whole() -> None:
    result = reply(INTRO, BEHAVIOUR, HISTORY, ENGRAVING)
    assert result.read_next is None
    assert "vault_read_note" not in format_search(result)
    assert search_data(result)["next"] == []
    # Concise replies show no text: the best passage's section is what there is to read.
    assert reply(INTRO, BEHAVIOUR, HISTORY, ENGRAVING, concise=True).read_next == BEHAVIOUR


# -- passages of a note ------------------------------------------------------------------


def test_passages_stay_within_sections_and_size() -> None:
    body = "\n\n".join(f"Sentence number {i} is here. Another one follows." for i in range(30))
    content = f"# Title\n\nIntro.\n\n## Long\n\n{body}\n\n## Short\n\nJust this.\n"
    parsed = parse_note("n.md", content)
    spans = passage_spans(parsed)
    for section_index, start, end in spans:
        section = parsed.sections[section_index]
        assert section.body_start <= start < end <= section.end
        assert end - start <= PASSAGE_CHARS
    assert any(content[s:e] == "Just this." for _, s, e in spans)


# -- stored vectors (.smart-env) ---------------------------------------------------------


def test_parse_ajson_later_lines_win_and_null_deletes() -> None:
    text = "\n".join(
        [
            '"smart_sources:a.md": {"path": "a.md", "v": 1},',
            '"smart_sources:b.md": {"path": "b.md"},',
            '"smart_sources:a.md": {"path": "a.md", "v": 2},',
            '"smart_sources:b.md": null,',
            '"smart_sources:c.md": {"torn',
        ]
    )
    items = parse_ajson(text)
    assert items == {"smart_sources:a.md": {"path": "a.md", "v": 2}}


def test_split_block_key() -> None:
    assert split_block_key("Notes/A.md#Top##Sub") == ("Notes/A.md", ("Top", "Sub"))
    assert split_block_key("A.md#Top#Sub") == ("A.md", ("Top", "Sub"))
    assert split_block_key("A.md#Top#{2}") == ("A.md", ("Top",))
    assert split_block_key("A.md") == ("A.md", ())


def write_env(root: Path, settings: object, lines: list[str]) -> Path:
    env = root / ".smart-env"
    (env / "multi").mkdir(parents=True)
    if settings is not None:
        (env / "smart_env.json").write_text(json.dumps(settings))
    (env / "multi" / "a_md.ajson").write_text("\n".join(lines))
    return env


def entry(collection: str, key: str, vec: list[float], model: str = "m", **extra: object) -> str:
    data = {"embeddings": {model: {"vec": vec}}, **extra}
    return f'"{collection}:{key}": {json.dumps(data)},'


def test_model_key_from_settings_or_the_only_model(tmp_path: Path) -> None:
    settings = {"smart_sources": {"embed_model": {"adapter": "t", "t": {"model_key": "x/y"}}}}
    env = write_env(tmp_path / "one", settings, [])
    assert model_key(env, {}) == "x/y"
    env = write_env(tmp_path / "two", None, [])
    items = parse_ajson(entry("smart_sources", "a.md", [1.0, 0.0], model="only"))
    assert model_key(env, items) == "only"


def test_load_vectors_notes_blocks_and_lookup(tmp_path: Path) -> None:
    env = write_env(
        tmp_path,
        None,
        [
            entry("smart_sources", "a.md", [1.0, 0.0, 0.0]),
            entry("smart_blocks", "a.md#Top", [0.0, 1.0, 0.0], lines=[1, 10]),
            entry("smart_blocks", "a.md#Top##Sub", [0.0, 0.0, 2.0], lines=[5, 10]),
            entry("smart_sources", "b.md", [0.9, 0.1, 0.0]),
            '"smart_blocks:gone.md#X": null,',
        ],
    )
    vectors = load_vectors(env)
    assert vectors is not None
    assert vectors.model == "m"
    assert np.allclose(np.linalg.norm(vectors.matrix, axis=1), 1.0)
    sub = vectors.row_for_line("a.md", 6)
    assert sub is not None and vectors.items[sub].headings == ("Top", "Sub")
    top = vectors.row_for_line("a.md", 2)
    assert top is not None and vectors.items[top].headings == ("Top",)
    note = vectors.note_row("a.md")
    assert note is not None
    nearest = vectors.nearest(vectors.matrix[note], limit=5, blocks=False)
    assert [vectors.items[row].path for row, _ in nearest] == ["a.md", "b.md"]


def test_prf_ranks_blocks_near_the_seed_passages(tmp_path: Path) -> None:
    env = write_env(
        tmp_path,
        None,
        [
            entry("smart_blocks", "a.md#Eels", [1.0, 0.0], lines=[1, 5]),
            entry("smart_blocks", "b.md#Eels again", [0.9, 0.2], lines=[1, 5]),
            entry("smart_blocks", "c.md#Lamps", [0.0, 1.0], lines=[1, 5]),
        ],
    )
    vectors = load_vectors(env)
    assert vectors is not None
    hits = prf_hits(vectors, [Seed("a.md", 2, 1.0)], limit=2, folder="")
    assert [h.path for h in hits] == ["a.md", "b.md"]
    assert hits[1].headings == ("Eels again",)
    assert hits[1].lines == (1, 5)


# -- custom route shapes -----------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        [{"path": "A/Note.md#Top#Sub", "score": 0.8, "text": "t"}],
        {"results": [{"filename": "A/Note.md#Top#Sub", "similarity": 0.8, "content": "t"}]},
        {"hits": [{"key": "A/Note#Top#Sub", "relevance": 0.8, "snippet": "t"}]},
    ],
)
def test_normalise_hits_common_shapes(body: object) -> None:
    (found,) = normalise_hits(body)
    assert found.path == "A/Note.md"
    assert found.headings == ("Top", "Sub")
    assert found.score == pytest.approx(0.8)
    assert found.text == "t"


def test_normalise_hits_drops_junk() -> None:
    assert normalise_hits({"error": "nope"}) == []
    assert normalise_hits([{"score": 1}, 7, None]) == []
    assert [h.path for h in normalise_hits(["A.md"])] == ["A.md"]


# -- exact search ------------------------------------------------------------------------


def test_parse_needles_phrases_and_words() -> None:
    needles = parse_needles('"sluice keys" Tomas tomas "unclosed')
    assert needles.texts == ("sluice keys", "Tomas", "unclosed")
    text = "Tomas held the sluice\nkeys."
    assert needles.counts(text) == [1, 1, 0]
    assert needles.spans(text)[0] == (0, 5)


def test_file_score_names_count_double_and_repeats_diminish() -> None:
    assert file_score([1], [True]) > file_score([3], [False])
    assert file_score([50], [False]) < file_score([1, 1], [False, False]) * 4


# -- links -------------------------------------------------------------------------------


def test_link_resolver_follows_obsidian_rules() -> None:
    resolver = LinkResolver(["Characters/Rook.md", "Places/Rook.md", "Lore/Gods/Hael.md"])
    assert resolver.resolve("Hael", "Sessions/S1.md") == "Lore/Gods/Hael.md"
    assert resolver.resolve("Rook", "Places/Vellmouth.md") == "Places/Rook.md"
    assert resolver.resolve("Characters/Rook", "x.md") == "Characters/Rook.md"
    assert resolver.resolve("rook.md", "Characters/Other.md") == "Characters/Rook.md"
    assert resolver.resolve("Nobody", "x.md") is None
    assert resolver.resolve("#Heading", "x.md") == "x.md"


def test_backlinks_skip_attachments_and_self_links() -> None:
    resolver = LinkResolver(["a.md", "b.md", "map.png"])
    links = {"a.md": [("b", 0, 5), ("a", 6, 9), ("map.png", 10, 20)], "b.md": []}
    named = linking_notes(links.items())
    assert backlinks_to("b.md", resolver, named, links.get) == [LinkSite("a.md", 0, 5)]
    assert backlinks_to("a.md", resolver, named, links.get) == []
    assert backlinks_to("map.png", resolver, named, links.get) == []
    assert is_attachment_target("Attachments/map.png")
    assert not is_attachment_target("Old Tomas (the ferryman)")


# -- the corpus cache --------------------------------------------------------------------


@pytest.mark.anyio
async def test_corpus_rereads_only_changed_notes(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# A\n\nThe lamp was lit.\n")
    (tmp_path / "b.md").write_text("# B\n\nThe eels were fed.\n")
    corpus = Corpus(Vault(None, FolderSource(tmp_path)), IndexStore(":memory:"), refresh_seconds=0)
    await corpus.sync(read_all=True)
    assert set(corpus.paths) == {"a.md", "b.md"}
    before_b = corpus.record("b.md")

    (tmp_path / "a.md").write_text("# A\n\nThe lamp went out in the storm.\n")
    stat = (tmp_path / "a.md").stat()
    os.utime(tmp_path / "a.md", ns=(stat.st_atime_ns, stat.st_mtime_ns + 5_000_000))
    (tmp_path / "c.md").write_text("# C\n\nNew note about storms.\n")
    (tmp_path / "b.md").unlink()
    await corpus.sync(read_all=True)

    assert set(corpus.paths) == {"a.md", "c.md"}
    assert corpus.record("b.md") is None and before_b is not None
    record = corpus.record("a.md")
    assert record is not None and "storm" in record.parsed.content
    found = {corpus.chunk(c).path for c in corpus.scores(terms("storm"))}
    assert found == {"a.md", "c.md"}
    assert corpus.scores(terms("eels")) == {}


_SAME_BODIES = (
    "The lamp was lit.",
    "The eels were fed.",
    "The lamp was lit.\n\nThe eels were fed.",
)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(-1, len(_SAME_BODIES) - 1)),
        min_size=1,
        max_size=8,
    )
)
def test_the_passages_of_a_text_are_those_holding_it_through_edits(
    steps: list[tuple[int, int]],
) -> None:
    """Law: after any run of writes and deletions, the passages the corpus gives for an
    embedded text's hash are exactly the passages holding that text, and the lengths it
    gives by id are those of the passages it holds. Notes of one title
    in one folder share texts, so a hash held by several passages, then by one, then by
    none, is drawn often."""
    import tempfile

    async def run(root: Path) -> None:
        corpus = Corpus(Vault(None, FolderSource(root)), IndexStore(":memory:"), refresh_seconds=0)
        for tick, (note, body) in enumerate(steps, start=1):
            path = root / f"N{note}.md"
            if body < 0:
                path.unlink(missing_ok=True)
            else:
                path.write_text(f"# Same\n\n{_SAME_BODIES[body]}\n")
                os.utime(path, ns=(tick * 10**9, tick * 10**9))
            await corpus.sync(read_all=True)
            holding: dict[str, set[int]] = {}
            for record in corpus.records():
                for chunk in record.chunks:
                    for digest in chunk.text_hashes:
                        holding.setdefault(digest, set()).add(chunk.id)
            assert set(corpus.text_hashes) == set(holding)
            for digest, chunk_ids in holding.items():
                assert corpus.chunks_of_text(digest) == chunk_ids
            assert corpus.chunks_of_texts(holding) == {c for ids in holding.values() for c in ids}
            # The lengths BM25 looks up at once are the held passages', and -1 for the rest.
            held = {chunk.id: chunk.length for r in corpus.records() for chunk in r.chunks}
            every_id = np.arange(max(held, default=0) + 3, dtype=np.int64)
            lengths = corpus._lengths_of(every_id).tolist()  # pyright: ignore[reportPrivateUsage]
            assert lengths == [held.get(i, -1) for i in every_id.tolist()]

    with tempfile.TemporaryDirectory() as root:
        anyio.run(run, Path(root))


def reference_scores(corpus: Corpus, query: list[str]) -> dict[int, float]:
    """Keyword scores as the in-memory index gave them before FTS5 (every passage's terms
    in a Python BM25, heading and name bonuses), computed here from the passages' text."""
    chunks = [chunk for record in corpus.records() for chunk in record.chunks]
    ids = [chunk.id for chunk in chunks]
    texts = dict(zip(ids, corpus.chunks_terms(ids), strict=True))
    count, average = len(texts), sum(map(len, texts.values())) / len(texts)
    frequency = Counter(term for terms_of in texts.values() for term in set(terms_of))

    def idf(term: str) -> float:
        return math.log(1 + (count - frequency[term] + 0.5) / (frequency[term] + 0.5))

    weighted = dict.fromkeys(query, 0.0)
    for term in query:
        weighted[term] += 1.0
    for term in list(weighted):
        stem_part = term[: max(5, len(term) - 4)]
        for other in sorted(frequency):
            close = other.startswith(stem_part) and abs(len(other) - len(term)) <= 4
            if len(term) > 5 and other != term and close:
                weighted.setdefault(other, VARIANT_WEIGHT)
    scores: dict[int, float] = {}
    for term, weight in weighted.items():
        for chunk_id, terms_of in texts.items():
            if n := terms_of.count(term):
                norm = 1.2 * (0.25 + 0.75 * len(terms_of) / average)
                score = weight * idf(term) * n * 2.2 / (n + norm)
                scores[chunk_id] = scores.get(chunk_id, 0.0) + score
    bonus: dict[int, float] = {}
    for term, weight in weighted.items():
        value = weight * idf(term)
        named = [r.chunks for r in corpus.records() if term in r.label_terms and r.chunks]
        for note_chunks in named:
            scores.setdefault(note_chunks[0].id, 0.0)
        for chunk in chunks:
            if term in terms(" ".join(chunk.section)):
                bonus[chunk.id] = bonus.get(chunk.id, 0.0) + HEADING_WEIGHT * value
        for chunk in (chunk for note_chunks in named for chunk in note_chunks):
            if chunk.id in scores:
                bonus[chunk.id] = bonus.get(chunk.id, 0.0) + NAME_WEIGHT * value
    for chunk_id, extra in bonus.items():
        scores[chunk_id] = scores.get(chunk_id, 0.0) + extra
    return scores


@pytest.mark.anyio
async def test_the_unread_count_follows_listings_reads_and_skips(tmp_path: Path) -> None:
    """`unread` is counted again only when something it depends on changes: at each step
    it equals a fresh count of the stats not read and not skipped."""
    for n in range(5):
        (tmp_path / f"n{n}.md").write_text(f"Note {n}.\n")
    corpus = Corpus(Vault(None, FolderSource(tmp_path)), IndexStore(":memory:"), refresh_seconds=0)

    def fresh() -> int:
        return len(corpus._missing())

    await corpus.sync(read_all=False)
    assert corpus.unread == fresh() == 5
    await corpus.sync(read_all=True)
    assert corpus.unread == fresh() == 0
    (tmp_path / "new.md").write_text("A new note.\n")
    (tmp_path / "odd.md").write_bytes(b"\x00\xff binary, not text")
    await corpus.sync(read_all=False)
    assert corpus.unread == fresh() == 2
    await corpus.sync(read_all=True)  # odd.md is skipped: not text
    assert corpus.unread == fresh() == 0
    (tmp_path / "n0.md").unlink()
    (tmp_path / "n1.md").write_text("Changed.\n")
    os.utime(tmp_path / "n1.md", ns=(1, 1))
    await corpus.sync(read_all=False)
    assert corpus.unread == fresh() == 1
    await corpus.sync(read_all=True)
    assert corpus.unread == fresh() == 0


@pytest.mark.anyio
async def test_fts5_keyword_scores_are_the_in_memory_index_scores(tmp_path: Path) -> None:
    vault = copy_fixture_vault(tmp_path / "vault")
    corpus = Corpus(Vault(None, FolderSource(vault)), IndexStore(":memory:"), refresh_seconds=0)
    await corpus.sync(read_all=True)
    rows = (REPO_ROOT / "fixtures" / "questions.jsonl").read_text("utf-8").splitlines()
    questions = [json.loads(row)["question"] for row in rows[::6]]
    questions += ["apprenticeship lamplighters", "Élodie's maps", "tidecraft basics"]
    for question in questions:
        query = terms(question)
        got, want = corpus.scores(query), reference_scores(corpus, query)
        assert set(got) == set(want), question
        assert got == pytest.approx(want, rel=1e-9), question
        top = sorted(want, key=lambda c: (-want[c], c))[:5]
        assert sorted(got, key=lambda c: (-got[c], c))[:5] == top, question


@pytest.mark.anyio
async def test_corpus_reports_progress_on_a_cold_build(tmp_path: Path) -> None:
    for n in range(30):
        (tmp_path / f"n{n}.md").write_text(f"Note {n}.\n")
    corpus = Corpus(Vault(None, FolderSource(tmp_path)), IndexStore(":memory:"), refresh_seconds=0)
    seen: list[tuple[float, float | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total))

    await corpus.sync(read_all=True, progress=progress)
    assert seen[0] == (0, 30) and seen[-1] == (30, 30)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
    seen.clear()
    await corpus.sync(read_all=True, progress=progress)
    assert seen == []  # warm: nothing to read, nothing to report


# -- stored vectors, ranked ----------------------------------------------------------------


def test_passage_vectors_rank_every_text_in_order_past_the_partial_sort() -> None:
    """An ordering test of the matrix and its partial sort, not of retrieval: the vectors
    are arbitrary unit rows, stored and read back the way the index does it."""
    rng = np.random.default_rng(7)
    count = RANKED_FIRST * 2 + 11
    matrix = rng.standard_normal((count, 8)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    hashes = [f"h{n}" for n in range(count)]
    store = IndexStore(":memory:")
    store.put_vectors("m", hashes[:100], matrix[:100])
    vectors = PassageVectors("m", 8)
    assert vectors.refresh(store) == 100
    store.put_vectors("m", hashes[100:], matrix[100:])  # a second batch grows the matrix
    assert vectors.refresh(store) == count - 100
    assert vectors.refresh(store) == 0
    query = matrix[3]
    ranked = list(vectors.ranked(query))
    expected = dict(zip(hashes, (matrix @ query).tolist(), strict=True))
    assert [digest for digest, _ in ranked[:1]] == ["h3"]
    assert sorted(digest for digest, _ in ranked) == sorted(hashes)
    scores = [score for _, score in ranked]
    assert scores == sorted(scores, reverse=True)
    # Held as int8 codes: each score within a few steps of the exact one.
    assert all(abs(score - expected[digest]) < 0.01 for digest, score in ranked)


def test_passage_vectors_load_batch_after_batch_and_score_within_the_code_step() -> None:
    """Model-sized rows (384-d) over several load batches: every row is taken in once,
    and the int8 codes score each within 0.005 of its float32 cosine similarity."""
    rng = np.random.default_rng(11)
    count = 2 * LOAD_BATCH + 5
    matrix = rng.standard_normal((count, 384)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    hashes = [f"h{n}" for n in range(count)]
    store = IndexStore(":memory:")
    store.put_vectors("m", hashes, matrix)
    vectors = PassageVectors("m", 384)
    assert vectors.refresh(store) == count
    query = matrix[count - 1]
    exact = matrix @ query
    near = vectors.similarity(query, hashes)
    assert max(abs(near[h] - e) for h, e in zip(hashes, exact.tolist(), strict=True)) < 0.005
    assert next(iter(vectors.ranked(query)))[0] == hashes[-1]


def test_a_loaded_index_takes_an_edits_vectors_without_copying_its_matrix() -> None:
    """A first load leaves room for a tenth more rows, so an edit's new vectors go in
    place; past the room the matrix grows by a quarter, not by double."""
    rng = np.random.default_rng(13)
    matrix = rng.standard_normal((1200, 16)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    store = IndexStore(":memory:")
    store.put_vectors("m", [f"h{n}" for n in range(1000)], matrix[:1000])
    vectors = PassageVectors("m", 16)
    vectors.refresh(store)
    loaded = vectors._codes
    assert len(loaded) == 1000 + math.ceil(1000 * LOAD_HEADROOM)
    store.put_vectors("m", [f"h{n}" for n in range(1000, 1100)], matrix[1000:1100])
    assert vectors.refresh(store) == 100
    assert vectors._codes is loaded  # no copy
    store.put_vectors("m", [f"h{n}" for n in range(1100, 1200)], matrix[1100:])
    assert vectors.refresh(store) == 100
    assert len(vectors._codes) == math.ceil(len(loaded) * GROWTH)
    ranked = list(vectors.ranked(matrix[1150]))
    assert len(ranked) == 1200 and ranked[0][0] == "h1150"


class RacingStore(IndexStore):
    """An index whose vector reads wait up to a second for another reader to come in, and
    count how many readers were in at once."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.barrier = threading.Barrier(2, timeout=1.0)
        self.most_at_once = 0
        self._inside = 0
        self._counting = threading.Lock()

    def vectors_since(
        self, model: str, seq: int, limit: int
    ) -> tuple[int, list[str], Codes | None, Matrix]:
        with self._counting:
            self._inside += 1
            self.most_at_once = max(self.most_at_once, self._inside)
        found = super().vectors_since(model, seq, limit)
        with contextlib.suppress(threading.BrokenBarrierError):
            self.barrier.wait()
        with self._counting:
            self._inside -= 1
        return found


def test_two_refreshes_at_once_take_each_vector_in_once() -> None:
    """Two worker threads refreshing together both read the same new rows, and would take
    them in twice (seen as a shape error in 1 of 500 calls under HTTP load): one refresh
    reads the store at a time."""
    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((40, 8)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    racing = RacingStore()
    racing.put_vectors("m", [f"h{n}" for n in range(40)], matrix)
    vectors = PassageVectors("m", 8)
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(vectors.refresh, racing) for _ in range(2)]
        taken = [future.result() for future in futures]
    assert racing.most_at_once == 1
    assert sorted(taken) == [0, 40]
    assert len(vectors) == 40
    ranked = list(vectors.ranked(matrix[25]))
    assert len(ranked) == 40 and ranked[0][0] == "h25"


def test_keep_only_drops_rows_of_old_texts_and_keeps_rows_added_since() -> None:
    rng = np.random.default_rng(5)
    matrix = rng.standard_normal((6, 8)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    store = IndexStore(":memory:")
    store.put_vectors("m", [f"h{n}" for n in range(6)], matrix)
    vectors = PassageVectors("m", 8)
    vectors.refresh(store)
    # h5 arrived after the live texts were taken (rows_seen=5): kept though not listed.
    assert vectors.keep_only(frozenset({"h0", "h2", "h4"}), rows_seen=5) == 2
    assert len(vectors) == 4 and "h1" not in vectors and "h5" in vectors
    assert next(iter(vectors.ranked(matrix[4])))[0] == "h4"
    assert vectors.similarity(matrix[2], ["h2", "h3"]) == pytest.approx({"h2": 1.0}, abs=0.01)


def test_float32_rows_an_older_version_stores_are_read_beside_coded_ones(tmp_path: Path) -> None:
    """A process of an older version, still running after another upgraded the file,
    stores float32 vectors with no scale: a refresh takes them in as codes all the same."""
    rng = np.random.default_rng(13)
    matrix = rng.standard_normal((3, 8)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    file = tmp_path / "index.sqlite3"
    store = IndexStore(file)
    store.put_vectors("m", ["h0", "h1"], matrix[:2])
    with sqlite3.connect(file) as db:
        db.execute(
            "INSERT INTO passage_vectors (model, text_hash, vector) VALUES ('m', 'h2', ?)",
            (matrix[2].tobytes(),),
        )
    vectors = PassageVectors("m", 8)
    assert vectors.refresh(store) == 3
    assert next(iter(vectors.ranked(matrix[2])))[0] == "h2"
    assert vectors.similarity(matrix[2], ["h2"]) == pytest.approx({"h2": 1.0}, abs=0.01)
    store.close()


def test_a_vector_stored_after_the_newest_were_pruned_is_taken_in() -> None:
    """Pruning the newest vectors must not hand their seqs to the next ones: a process
    reads what was stored after the last seq it saw."""
    rng = np.random.default_rng(17)
    matrix = rng.standard_normal((4, 8)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    store = IndexStore(":memory:")
    store.put_vectors("m", ["h0", "h1", "h2"], matrix[:3])
    vectors = PassageVectors("m", 8)
    assert vectors.refresh(store) == 3
    assert store.prune_vectors() == 3  # no passage has these texts any more
    store.put_vectors("m", ["h3"], matrix[3:])
    assert vectors.refresh(store) == 1
    assert next(iter(vectors.ranked(matrix[3])))[0] == "h3"


# -- the vectors' snapshot: a new process takes in what the rows hold --------------------

_SNAPSHOT_DIMS = 8


def _snapshot_note(path: str, texts: list[str]) -> NoteRow:
    """A note of one passage whose embedded texts are `texts`."""
    passage = PassageRow(("Top",), 0, 1, ("word",), (), tuple(texts))
    return NoteRow(path, 1, 1, "x", (), None, (passage,), (), path)


def _rows_as_stored(file: Path, model: str) -> dict[str, tuple[bytes, float]]:
    with sqlite3.connect(file) as db:
        return {
            digest: (blob, scale)
            for digest, blob, scale in db.execute(
                "SELECT text_hash, vector, scale FROM passage_vectors WHERE model = ?", (model,)
            )
        }


def _held(vectors: PassageVectors) -> dict[str, tuple[bytes, float]]:
    return {
        digest: (vectors._codes[row].tobytes(), float(vectors._scales[row]))
        for digest, row in vectors._rows.items()
    }


_snapshot_steps = st.lists(
    st.one_of(
        st.tuples(st.just("store"), st.integers(1, 9)),
        st.tuples(st.just("snapshot"), st.just(0)),
        st.tuples(st.just("delete"), st.integers(0, 5)),
    ),
    max_size=10,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=_snapshot_steps)
def test_law_a_new_process_holds_exactly_the_stored_vectors_snapshot_or_not(
    tmp_path: Path, steps: list[tuple[str, int]]
) -> None:
    """The law of the vectors' snapshot: whatever was stored, snapshotted, deleted (its note
    gone, its vectors pruned) and stored again in between, a new process takes in exactly
    the vectors the rows hold, each with its stored codes and scale; and so does a process
    that was running all along and refreshed after each step. It fails if the snapshot
    misses a row stored before it, keeps a pruned one, or a load reads a row twice."""
    rng = np.random.default_rng(len(steps))
    file = tmp_path / f"law-{os.getpid()}-{rng.integers(1 << 40)}.sqlite3"
    store = IndexStore(file)
    running = PassageVectors("m", _SNAPSHOT_DIMS)
    notes: list[str] = []
    made = 0
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(store_module, "SNAPSHOT_MIN_ROWS", 3)  # small enough to be due
        for step, size in steps:
            if step == "store":
                # Some texts again (a deleted note's, or a live one's: stored once per text).
                texts = [f"text {made - n}" for n in range(size)]
                made += 1
                path = f"N{made}.md"
                stored = store.put_notes([_snapshot_note(path, texts)])
                notes.append(path)
                hashes = list(
                    dict.fromkeys(h for p in stored[path].passages for h in p.text_hashes)
                )
                matrix = rng.standard_normal((len(hashes), _SNAPSHOT_DIMS)).astype(np.float32)
                store.put_vectors("m", hashes, matrix)
            elif step == "snapshot":
                store.save_vector_snapshot("m")
            elif notes:
                store.delete_notes([notes.pop(size % len(notes))])
                store.prune_vectors()
                running = PassageVectors("m", _SNAPSHOT_DIMS)  # it held the pruned rows
            running.refresh(store)
        fresh = PassageVectors("m", _SNAPSHOT_DIMS)
        fresh.refresh(store)
    expected = _rows_as_stored(file, "m")
    assert _held(fresh) == expected
    assert len(fresh) == len(expected)
    assert _held(running) == expected
    store.close()


class RowCountingStore(IndexStore):
    """An index that counts the vectors read row by row (not from a snapshot)."""

    rows_read = 0

    def vectors_since(
        self, model: str, seq: int, limit: int
    ) -> tuple[int, list[str], Codes | None, Matrix]:
        found = super().vectors_since(model, seq, limit)
        self.rows_read += len(found[1])
        return found


def test_a_snapshot_is_read_in_one_piece_and_a_damaged_one_set_aside(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rng = np.random.default_rng(19)
    file = tmp_path / "index.sqlite3"
    store = RowCountingStore(file)
    count = store_module.SNAPSHOT_MIN_ROWS + 5
    matrix = rng.standard_normal((count, _SNAPSHOT_DIMS)).astype(np.float32)
    store.put_vectors("m", [f"h{n}" for n in range(count)], matrix)
    assert store.save_vector_snapshot("m") == count
    assert store.save_vector_snapshot("m") == 0  # nothing outside it: not due
    store.put_vectors("m", ["after"], matrix[:1])
    snapshot = store.vector_snapshot("m")
    assert snapshot is not None and len(snapshot.hashes) == count  # the newer row is not in it
    vectors = PassageVectors("m", _SNAPSHOT_DIMS)
    assert vectors.refresh(store) == count + 1
    assert store.rows_read == 1  # only the row stored after the snapshot, one by one
    assert _held(vectors) == _rows_as_stored(file, "m")
    with sqlite3.connect(file) as db:
        db.execute("UPDATE vector_snapshots SET scales = substr(scales, 5)")
    again = PassageVectors("m", _SNAPSHOT_DIMS)
    with caplog.at_level(logging.WARNING):
        assert again.refresh(store) == count + 1
    assert "vector snapshot of m is damaged" in caplog.text
    assert _held(again) == _rows_as_stored(file, "m")
    store.close()


def test_a_snapshot_or_a_parse_that_cannot_be_kept_is_logged_not_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both only save a later process time: with the index's write lock held elsewhere
    (another process mid-transaction, past the busy timeout), the caller goes on."""
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_MS", 50)
    monkeypatch.setattr(store_module, "SNAPSHOT_MIN_ROWS", 1)
    file = tmp_path / "index.sqlite3"
    store = IndexStore(file)
    store.put_notes([_snapshot_note("N.md", ["one", "two"])])
    store.put_vectors("m", ["h0", "h1"], np.eye(2, _SNAPSHOT_DIMS, dtype=np.float32))
    other = sqlite3.connect(file, isolation_level=None)
    other.execute("UPDATE notes SET links = NULL, title = NULL")  # stored before it kept them
    other.execute("BEGIN IMMEDIATE")
    found = [("N.md", store_module.text_hash("x"), [], "N")]
    with caplog.at_level(logging.WARNING):
        assert store.save_vector_snapshot("m") == 0
        store.put_parsed(found)
    assert caplog.text.count("not kept") == 1 and "no vector snapshot written" in caplog.text
    other.execute("ROLLBACK")
    other.close()
    assert store.save_vector_snapshot("m") == 2  # once the lock is free
    store.put_parsed(found)
    with sqlite3.connect(file) as db:
        assert db.execute("SELECT title FROM notes").fetchone() == ("N",)
    store.close()


def test_only_the_parses_used_last_are_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    """A note parsed again after its parse was dropped parses the same; one used since
    stays, and no more than PARSES_KEPT are held whatever a session touches."""
    from obsidian_mcp.retrieval import corpus as corpus_module
    from obsidian_mcp.sources.base import FileStat

    monkeypatch.setattr(corpus_module, "PARSES_KEPT", 2)
    parses = count_parses(monkeypatch)
    texts = {f"N{n}.md": f"# Note {n}\n\nText {n}.\n" for n in range(3)}
    records = [
        corpus_module.NoteRecord(
            FileStat(path, 1, 1), path, lambda record: texts[record.path], (), None, ()
        )
        for path in texts
    ]
    first = records[0].parsed
    assert records[0].parsed is first and records[1].parsed.title == "Note 1"
    assert parses == ["N0.md", "N1.md"]
    assert records[0].parsed is first  # used last: N1 goes first when N2 comes
    assert records[2].parsed.title == "Note 2"
    assert records[0].parsed is first
    assert parses == ["N0.md", "N1.md", "N2.md"]
    again = records[1].parsed  # dropped: parsed again, the same
    assert parses[-1] == "N1.md" and again.title == "Note 1"
    assert len(corpus_module._recent_parses._parses) == 2
