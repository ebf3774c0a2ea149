# pyright: strict
"""The retrieval service of one vault: ranked passages for a question, exact matches for
terms. One `Retriever` per `Vault`, kept across calls, holds the corpus cache.

`vault_semantic_query` is a pipeline of stages with plain data between them, each in its
own module, each passed once and in this order (`Retriever.semantic_query`):

1. candidates (`candidates.CandidateSources.gather`): one ranking per source;
2. fusion (`fusion.fuse`): one order;
3. currency (`currency.current_first`): what replaced a ranked note comes before it;
4. passage cutting (`cutting.cut_passages`): what of each passage is shown;
5. packing (`Retriever._packed`, `packing.pack`): what fits the budget, grouped by note;
6. rendering (`render.format_search`, in the tool layer).

`OBSIDIAN_STAGES_OFF` switches stages off for the ablation (`stages.Stages`).
"""

import logging
import posixpath
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import anyio.from_thread
import anyio.to_thread

from obsidian_mcp.config import Settings
from obsidian_mcp.errors import InvalidArgument, VaultError
from obsidian_mcp.index.embedder import cores_available, model_status, on_measured_scale
from obsidian_mcp.index.smart_env import SmartEnvCache
from obsidian_mcp.index.store import IndexStore
from obsidian_mcp.index.vectors import EmbedderSlot, EmbeddingBuilder, PassageVectors
from obsidian_mcp.paths import normalize_vault_path
from obsidian_mcp.retrieval.candidates import (
    CandidateSources,
    note_passage_scores,
    query_terms,
)
from obsidian_mcp.retrieval.corpus import (
    Corpus,
    NoteRecord,
    ProgressCallback,
    run_again_while_gone,
)
from obsidian_mcp.retrieval.currency import Currency, current_first, note_dates
from obsidian_mcp.retrieval.cutting import PassageHit, cut_passages, passage_hit
from obsidian_mcp.retrieval.exact import Needles, check_query_terms, file_score, parse_needles
from obsidian_mcp.retrieval.fusion import RankedPassages, fuse
from obsidian_mcp.retrieval.keyword import terms
from obsidian_mcp.retrieval.links import LinkGraph
from obsidian_mcp.retrieval.packing import (
    FileContext,
    SearchResult,
    by_score,
    group_by_file,
    next_read,
    pack,
)
from obsidian_mcp.retrieval.render import (
    concise_group_cost,
    concise_passage_cost,
    format_search,
    frame_tokens,
    group_cost,
    passage_cost,
)
from obsidian_mcp.retrieval.semantic import SemanticSources
from obsidian_mcp.retrieval.stages import Stages
from obsidian_mcp.retrieval.strength import MatchStrength, match_strength
from obsidian_mcp.sources.base import TextSearchHit, search_words, text_hit
from obsidian_mcp.text.markdown import LinkResolver, ParsedNote, gist
from obsidian_mcp.text.snippets import snippets_for_matches
from obsidian_mcp.text.tokens import estimate_tokens
from obsidian_mcp.vault import Vault

logger = logging.getLogger(__name__)

# A session is under way while a call came within this many seconds: an agent thinks
# between calls for tens of seconds; an idle server should cost nothing.
ACTIVE_SECONDS = 300.0
# The background listing starts this share of `index_refresh_seconds` after the last one
# started, so it comes before a question finds a listing due; at 10,000 notes one costs
# about 50 ms (3% of a core at the default 2 s), at 50,000 notes 0.7-1.1 s through the
# folder (half the time: `Corpus.seconds_to_next_listing`).
_LIST_AHEAD_SHARE = 0.8

# Passages left out for the budget that the footer names.
_OVER_BUDGET_NAMED = 3
_GIST_CHARS = 140
# Notes whose texts an exact scan reads from the index at once (one query, in a worker
# thread), and so scans between two chances to be cancelled: one exact scan of a note
# takes some microseconds, so 64 of them keep a cancelled search to about a millisecond.
_NOTES_PER_CHECKPOINT = 64
_CONTEXT_TAGS = 6
# While a first build reads: the question's words searched for ahead of it (the rarest,
# as far as the notes read so far tell: an invented name is rarest of all), and the most
# notes read at once for one question (each ~1 ms from a folder, a request through REST).
_RARE_WORDS = 2
_READ_FIRST_MOST = 20
# A search slower than this (a hung Obsidian) is not waited for: the answer says how far
# the build's read has got. At 10,000 generated notes (22 MB) the folder's scan for one
# word took 0.27 s with the files in the page cache and 1.4 s without, and over 2 s beside
# the build's own read in a new server's first seconds, when a bound of 2 s gave up on
# the first question and on the first exact search (which then waited 34 s for the read;
# python -m bench.speed.first_day).
_READ_FIRST_SECONDS = 8.0
# An exact search during the first read reads at once the unread notes that may match,
# up to this many (a note read from a folder costs about a millisecond); past it, it
# searches their files as they are (`_notes_that_may_hold`).
_READ_AHEAD_FOR_EXACT = 500
_WORD = re.compile(r"\w+")
# Ranked passages cut and offered to the packing, per passage the reply may hold.
OFFERED_PER_SHOWN = 4


def folder_prefix(folder: str) -> tuple[str, str]:
    """The folder as a clean vault path, and as a path prefix ('' for the whole vault)."""
    scope = normalize_vault_path(folder, folder=True)
    return scope, scope + "/" if scope else ""


def file_context(record: NoteRecord, *, with_gist: bool = True, replaced: str = "") -> FileContext:
    """A note's quick-context line; `replaced` says what replaced it (`Currency.label`)."""
    parsed = record.parsed
    dates = note_dates(parsed.frontmatter)
    return FileContext(
        path=record.path,
        title=parsed.title,
        gist=gist(parsed, _GIST_CHARS) if with_gist else "",
        tags=parsed.tags[:_CONTEXT_TAGS] if with_gist else (),
        tokens=estimate_tokens(parsed.content),
        # A date the path already shows ("Daily/2026-07-09.md") is not said twice.
        dates=tuple((key, day) for key, day in dates.dates if day not in record.path),
        replaced=replaced,
    )


def packed_result(
    frame: SearchResult,
    hits: Sequence[PassageHit],
    contexts: dict[str, FileContext],
    matches: dict[str, int] | None = None,
    *,
    concise: bool = False,
    parsed_of: Callable[[str], ParsedNote | None] | None = None,
) -> SearchResult:
    """The best of `hits` (best first) that fit `frame`'s limit and budget, grouped by note
    under `frame`'s first line and totals, at what each costs as it will be shown
    (`concise`: a line per note, no text); a hit whose note has no context is left out.
    `parsed_of` gives a note's structure for the `next:` hint (`packing.next_read`); without
    it (several vaults' answers merged) the hint names the best passage."""
    candidates = [hit for hit in hits if hit.path in contexts]
    budget = frame.max_tokens

    def build(chosen: Sequence[PassageHit], over: Sequence[PassageHit]) -> SearchResult:
        groups = group_by_file(chosen, contexts, matches)
        return replace(
            frame,
            groups=tuple(groups),
            total_passages=max(frame.total_passages, len(chosen)),
            total_files=max(frame.total_files, len(groups)),
            over_budget=tuple(by_score(over)[:_OVER_BUDGET_NAMED]),
            read_next=next(iter(by_score(chosen)), None)
            if parsed_of is None
            else next_read(groups, chosen, parsed_of, text_shown=not concise),
        )

    # The first line and footer are paid for first, at their longest (three passages
    # named as left out, a section to read next), so the passages get what remains.
    longest = build(candidates[:1], candidates)
    spent = frame_tokens(replace(longest, read_next=next(iter(candidates), None)))
    packing = pack(
        candidates,
        limit=frame.limit,
        budget=max(budget - spent, 0),
        passage_cost=concise_passage_cost if concise else passage_cost,
        group_cost=lambda path: (concise_group_cost if concise else group_cost)(contexts[path]),
    )
    chosen = list(packing.chosen)
    result = build(chosen, packing.over_budget)
    while chosen and estimate_tokens(format_search(result, concise=concise)) > budget:
        # Estimates of the frame can be off by a few tokens; the budget is a promise.
        chosen.pop()
        result = build(chosen, packing.over_budget)
    return result


@dataclass(frozen=True, slots=True)
class OfferedPassages:
    """A semantic query's passages in one vault before cutting (stages 1 to 3): the fused
    ranking, and the passages offered to cutting, best first, with their fused scores."""

    query: str
    scope: str
    found: RankedPassages
    offered: list[tuple[int, float]]
    weighted: list[tuple[str, float]]

    def relative_scores(self) -> list[float]:
        """The offered passages' scores as the reply shows them: relative to the best."""
        return [score / self.found.top_score for _, score in self.offered]


# A first question's wait for the meaning index is said in the answer when it was this
# long: the agent should know why its first call was slow.
_WAIT_WORTH_SAYING_SECONDS = 1.0


class Retriever:
    """Keyword index, the local passage index, semantic sources and packing over one vault."""

    def __init__(
        self,
        vault: Vault,
        settings: Settings,
        store: IndexStore,
        embedder: EmbedderSlot | None,
        builder: EmbeddingBuilder | None,
    ) -> None:
        self.vault = vault
        self.settings = settings
        self.corpus = Corpus(vault, store, refresh_seconds=settings.index_refresh_seconds)
        self.stages = Stages.without(settings.stages_off)
        # Only the first call of a session waits for unread notes while another task reads
        # them (`first_read_wait`); the next ones during the same build answer at once.
        self._waited_for_reading = False
        # Likewise only the first question waits for a small vault's meaning index.
        self._waited_for_meaning = False
        self.links = LinkGraph()
        self.currency = Currency(self.links)
        env_dir = vault.smart_env_dir
        self.candidates = CandidateSources(
            self.corpus,
            SemanticSources(
                vault.rest, settings.semantic_route, SmartEnvCache(env_dir) if env_dir else None
            ),
            embedder,
            builder,
        )

    @property
    def semantic(self) -> SemanticSources:
        return self.candidates.semantic

    @property
    def builder(self) -> EmbeddingBuilder | None:
        return self.candidates.builder

    @property
    def embedder(self) -> EmbedderSlot | None:
        return self.candidates.embedder

    # -- the local passage index -----------------------------------------------------------

    def close(self) -> None:
        """Stop the background build after its batch in hand, and close the index."""
        if self.candidates.builder is not None:
            self.candidates.builder.stop()
        if self.candidates.embedder is not None:
            self.candidates.embedder.settle()
        if self.semantic.smart_env is not None:
            self.semantic.smart_env.settle()
        self.corpus.store.close()

    async def link_resolver(self) -> LinkResolver:
        """The vault's link resolver, over the notes listed (at most `index_refresh_seconds`
        ago, or since this server's last write): made again only when they change. Built
        from a fresh listing of the vault, it took 50-80 ms of every `vault_peek_file` at
        10,000 notes, and its cached index kept 7-9 MB more beside this one."""
        await self.corpus.sync(read_all=False)
        return self.links.resolver_for(self.corpus)

    async def passage_vectors(self) -> PassageVectors | None:
        return await self.candidates.passage_vectors()

    async def warm_up(self) -> None:
        """From server start, in the background: read every note the index lacks and load
        the stored vectors, so the first question of a session finds them ready (or waits
        at most `index_read_wait_seconds` for unread notes: the first build of the
        generated 10,000-note vault reads for 24 s, of 50,000 notes for 127 s, python -m
        bench --big). Side by side: the vectors come from their snapshot (three blobs,
        `IndexStore.vector_snapshot`) while the notes are made from rows; at 10,000 notes
        both were ready after 0.88-0.97 s against 0.99-1.33 s one after the other (five
        new processes each, alternating). Before the snapshot, two threads building objects
        from rows fought over the interpreter lock: 1.2-1.6 s against 0.8 s."""

        async def read() -> None:
            await self.corpus.sync(read_all=True, by_a_call=False)
            await self._save_note_snapshot()

        async with anyio.create_task_group() as both:
            both.start_soon(self._logged, read, "reading the vault")
            both.start_soon(self._logged, self.passage_vectors, "loading passage vectors")

    async def keep_current(self) -> None:
        """Run for the server's life: while a session asks (a call within ACTIVE_SECONDS),
        list the vault's stats a little more often than `index_refresh_seconds`, read what
        changed and embed an edit's few new texts, so a question finds the index current
        instead of listing first. The listing took 50-80 ms of each question due at 10,000
        notes, and the question after an edit 0.24-0.26 s in all (in process; python -m
        bench.speed.index measures it through stdio). An idle server lists nothing."""
        period = self.settings.index_refresh_seconds * _LIST_AHEAD_SHARE
        if period <= 0:
            return  # every call lists for itself
        embedded_at = -1  # the corpus generation the last look for texts to embed saw
        while True:
            # A listing's age counts from its start, so the next one is timed from there.
            await anyio.sleep(self.corpus.seconds_to_next_listing(period))
            asked = self.corpus.asked_at
            if asked is None or time.monotonic() - asked > ACTIVE_SECONDS:
                await anyio.sleep(period)
                continue
            try:
                await self.corpus.list_ahead(older_than=period)
                # Only a change brings texts to embed: each look loads the model's slot and
                # refreshes the vectors in worker threads (15 ms every 1.6 s otherwise).
                if self.corpus.generation != embedded_at:
                    embedded_at = self.corpus.generation
                    await self.candidates.embed_a_few_left()
                    await self._save_note_snapshot()
            except VaultError as exc:  # the next call meets it too, and says so
                logger.debug("keeping the index current: %s", exc)

    async def _save_note_snapshot(self) -> None:
        """Write the notes' snapshot a new process loads from, when enough notes changed
        outside it (`IndexStore.save_note_snapshot`): after a read and after edits. Not
        while a first build reads: it is written when the read ends."""
        if not self.corpus.reading:
            await anyio.to_thread.run_sync(self.corpus.store.save_note_snapshot)

    @staticmethod
    async def _logged(work: Callable[[], Awaitable[object]], what: str) -> None:
        try:
            await work()
        except VaultError as exc:  # Obsidian unreachable or untrusted: said, no traceback
            logger.warning("%s in the background failed: %s", what, exc)
        except Exception:  # the task's last word: calls do the work again, and say why not
            logger.exception("%s in the background failed", what)

    async def build_index(self, progress: ProgressCallback | None = None) -> None:
        """Bring the whole index up to date now: read what changed, then embed every passage
        without a vector (what the background build would do, in the foreground, on every
        core: `EmbeddingBuilder.run_until_done`)."""
        await self.corpus.sync(read_all=True, progress=progress, by_a_call=False)
        await self._save_note_snapshot()
        if self.builder is None or self.embedder is None:
            return
        embedder = await anyio.to_thread.run_sync(self.embedder.get)
        store = self.corpus.store
        total = await anyio.to_thread.run_sync(store.count_unembedded, embedder.vector_space)
        done = 0

        def on_batch(count: int) -> None:
            nonlocal done
            done += count
            if progress is not None:
                report = progress  # narrowed for the closure below
                # A long passage is embedded as several windows of its sentences
                # (`corpus.embedding_texts`): what is counted here is windows.
                message = f"embedded {done:,} of {total:,} passage windows"

                async def notify() -> None:
                    await report(done, total, message)

                anyio.from_thread.run(notify)

        builder, cores = self.builder, cores_available()
        await anyio.to_thread.run_sync(lambda: builder.run_until_done(on_batch, side_by_side=cores))

    def index_status(self) -> dict[str, object]:
        """What `obsidian://status` says of the passage index."""
        stats = self.corpus.store.stats()
        updated = stats.last_updated
        status: dict[str, object] = {
            "path": stats.path,
            "notes": stats.notes,
            "passages": stats.passages,
            "embedded_passages": stats.embedded_passages,
            "passages_found_by_meaning": stats.searchable_passages,
            "model": stats.model,
            "bytes_on_disk": stats.bytes_on_disk,
            "last_updated": None
            if updated is None
            else datetime.fromtimestamp(updated, UTC).isoformat(timespec="seconds"),
            "meaning": "off (OBSIDIAN_INDEX_EMBEDDINGS=false)"
            if self.builder is None
            else "building"
            if self.builder.running
            else "idle",
        }
        if self.builder is not None and self.builder.failure:
            status["build_failure"] = self.builder.failure
        loaded = self.embedder.loaded if self.embedder is not None else None
        status["embedding_model"] = (
            model_status(loaded)
            if loaded is not None
            else "none: ranked by keywords"
            if self.embedder is None
            else "not loaded yet (it loads for the first search by meaning)"
        )
        return status

    # -- ranked search ---------------------------------------------------------------------

    def weighted_terms(self, query: str) -> list[tuple[str, float]]:
        """The query's terms and their variants, each weighted by its rarity in the vault."""
        index = self.corpus.index
        return [(t, w * index.idf(t)) for t, w in index.expand(query_terms(query))]

    async def ranked_passages(
        self,
        query: str,
        *,
        folder: str,
        progress: ProgressCallback | None = None,
    ) -> RankedPassages:
        """Stages 1 and 2: the candidates of every source, fused into one order."""
        _, prefix = folder_prefix(folder)
        began = anyio.current_time()
        corpus = self.corpus
        wait = self.first_read_wait()
        # One wait for what a first build still reads: the notes, then Smart Connections'
        # files in what is left of it. Notes not all read by then make a vault too big for
        # those files too (read, and checked against every note, in 9 s beside a first
        # build of 10,000 notes): a first question waited out its 2 s for them (2.2 s,
        # python -m bench.speed.scale).
        deadline = began + wait
        await corpus.sync(read_all=True, progress=progress, wait_seconds=wait)
        if corpus.may_lack_notes:
            deadline = anyio.current_time()
            with anyio.move_on_after(_READ_FIRST_SECONDS):
                await self._read_first_what_may_answer(query)
        meaning_wait = 0.0 if self._waited_for_meaning else self.settings.index_meaning_wait_seconds
        self._waited_for_meaning = True
        gathering = anyio.current_time()
        candidates = await self.candidates.gather(
            query,
            prefix,
            self.stages,
            read_wait=max(0.0, deadline - anyio.current_time()),
            meaning_wait=meaning_wait,
            on_demand=self.settings.index_on_demand_passages,
            asked_at=began,
            report=progress,
        )
        found = fuse(candidates, seats=self.stages.seats)
        index = self.corpus.index
        own_terms = [(t, index.idf(t)) for t in dict.fromkeys(query_terms(query))]
        # MEANING_FLOOR was measured on the bundled model's cosines: another model's match is
        # weighed by words, whose floor holds for any model.
        loaded = self.embedder.loaded if self.embedder is not None else None
        measured = loaded is not None and on_measured_scale(loaded)
        vectors = self.candidates.vectors if measured else None
        found = replace(found, strength=match_strength(self.corpus, candidates, vectors, own_terms))
        waited = anyio.current_time() - gathering
        if meaning_wait and waited >= _WAIT_WORTH_SAYING_SECONDS:
            built = f"waited {waited:.0f} s for the meaning index: first question only"
            found = replace(found, note="; ".join(n for n in (built, found.note) if n))
        reading = self.answered_unread("ask again in a minute for answers from all of them")
        if not reading:
            return found
        return replace(found, note="; ".join(n for n in (reading, found.note) if n))

    def first_read_wait(self) -> float:
        """How long a call waits for the notes a first build has not read yet before it
        answers from those read: `index_read_wait_seconds` until a call has answered
        without the rest, then nothing while the same build reads."""
        if self._waited_for_reading and self.corpus.reading:
            return 0.0
        return self.settings.index_read_wait_seconds

    def answered_unread(self, then: str) -> str:
        """What an answer made while a first build reads says of it ("notes read: ...",
        and `then`, what to do about it); "" once every note is read."""
        corpus = self.corpus
        unread = corpus.unread
        if not unread:
            return ""
        self._waited_for_reading = True
        read = corpus.listed - unread
        return f"notes read: {read:,} of {corpus.listed:,}, the rest is being read; {then}"

    async def _read_first_what_may_answer(self, query: str) -> None:
        """While a first build still reads the vault, the few unread notes that hold the
        question's rarest words (by the vault's own search: Obsidian's, or a scan of the
        folder) are read now, so the words' ranking sees them. A question naming someone
        found in one note of 10,000 was answered by none of the notes read in its first
        seconds (python -m bench.speed.first_day). A word in more notes than are read at
        once says too little to read any of them ahead, and so does one that the notes
        read already hold in as many passages: its search of the unread notes took 2.3-3 s
        of each question beside the first build of 50,000 notes, for nothing (a topic's
        common words; `vault_quick_context` 7 s a call, python -m bench big)."""
        index = self.corpus.index
        held: dict[str, int] = {}
        for word in _WORD.findall(query):
            found = terms(word)
            if found:  # a stop word narrows nothing
                held.setdefault(word, min(index.document_frequency(term) for term in found))
        # Rarest first; the next only if one reads nothing (one scan of the folder for
        # them all, or a request a word).
        rarest = sorted(held, key=lambda word: held[word])[:_RARE_WORDS]
        rarest = [word for word in rarest if held[word] < _READ_FIRST_MOST]
        if not rarest:
            return
        try:
            await self.corpus.read_unread_holding(rarest, _READ_FIRST_MOST)
        except VaultError as exc:  # the first build's read goes on; the answer says so
            logger.info("no search ahead of the first build's read: %s", exc)

    async def semantic_query(
        self,
        query: str,
        *,
        limit: int,
        folder: str = "",
        max_tokens: int | None = None,
        include_context: bool = True,
        concise: bool = False,
        progress: ProgressCallback | None = None,
    ) -> SearchResult:
        offered = await self.offered_passages(query, limit=limit, folder=folder, progress=progress)
        return self.answer(
            offered,
            limit=limit,
            max_tokens=max_tokens,
            include_context=include_context,
            concise=concise,
        )

    async def offered_passages(
        self,
        query: str,
        *,
        limit: int,
        folder: str = "",
        progress: ProgressCallback | None = None,
    ) -> OfferedPassages:
        """Stages 1 to 3 of `vault_semantic_query`: the passages offered to cutting; run
        again when a note they come from is read again meanwhile (`run_again_while_gone`)."""
        if not query.strip():
            raise InvalidArgument("query is empty; ask a question or give a few words.")
        scope, _ = folder_prefix(folder)

        async def offer() -> OfferedPassages:
            found = await self.ranked_passages(query, folder=scope, progress=progress)
            weighted = self.weighted_terms(query)
            offered = found.ranked[: limit * OFFERED_PER_SHOWN]
            if self.stages.currency:
                offered = current_first(
                    self.corpus, offered, self.currency, self._richest_passage(weighted, scope)
                )
            return OfferedPassages(query, scope, found, offered, weighted)

        return await run_again_while_gone(offer)

    def answer(
        self,
        offered: OfferedPassages,
        *,
        limit: int,
        max_tokens: int | None = None,
        include_context: bool = True,
        concise: bool = False,
        most_cut: int | None = None,
    ) -> SearchResult:
        """Stages 4 and 5 of `vault_semantic_query`: the offered passages cut and packed;
        only the first `most_cut` of them when given (`across.offered_shares`). A passage
        whose note was read again since it was offered (an await between, several vaults
        weighed against each other) is left out: its note's new passages were not ranked."""
        found = offered.found
        held = self.corpus.holds
        ranked = [(chunk_id, score) for chunk_id, score in found.ranked if held(chunk_id)]
        hits = cut_passages(
            self.corpus,
            [(chunk_id, score) for chunk_id, score in offered.offered[:most_cut] if held(chunk_id)],
            found.whole_blocks,
            offered.weighted,
            top=found.top_score,
            cutting=self.stages.cutting,
        )
        return self._packed(
            "vault_semantic_query",
            offered.query,
            offered.scope,
            found.source,
            found.note,
            hits,
            limit=limit,
            budget=max_tokens or self.settings.max_tokens,
            include_context=include_context,
            total_passages=found.total,
            total_files=len({self.corpus.chunk(c).path for c, _ in ranked}),
            strength=found.strength,
            concise=concise,
        )

    def _richest_passage(
        self, weighted: Sequence[tuple[str, float]], scope: str
    ) -> Callable[[NoteRecord], int | None]:
        """How a note no source ranked is stood for (`currency.current_first`): by its
        passage richest in the query's words, weighed by their rarity in the note; its
        first passage when none has them. None for a note outside the folder."""
        _, prefix = folder_prefix(scope)

        def pick(record: NoteRecord) -> int | None:
            if not record.chunks or not record.path.startswith(prefix):
                return None
            scores = note_passage_scores(self.corpus, record, weighted)
            return max(record.chunks, key=lambda c: (scores[c.id], -c.start)).id

        return pick

    def _packed(
        self,
        tool: str,
        query: str,
        scope: str,
        source: str,
        note: str,
        hits: Sequence[PassageHit],
        *,
        limit: int,
        budget: int,
        include_context: bool,
        total_passages: int,
        total_files: int,
        matches: dict[str, int] | None = None,
        strength: MatchStrength | None = None,
        concise: bool = False,
    ) -> SearchResult:
        """Stage 4, packing: the best passages that fit the budget, grouped by note, at what
        each costs as it will be shown (`concise`: a line per note, no text)."""
        contexts: dict[str, FileContext] = {}
        for path in dict.fromkeys(hit.path for hit in hits):
            record = self.corpus.record(path)
            if record is not None:
                contexts[path] = file_context(
                    record,
                    with_gist=include_context,
                    replaced=self.currency.label(self.corpus, record),
                )

        def parsed_of(path: str) -> ParsedNote | None:
            record = self.corpus.record(path)
            return None if record is None else record.parsed

        return packed_result(
            SearchResult(
                tool=tool,
                query=query,
                folder=scope,
                source=source,
                source_note=note,
                groups=(),
                limit=limit,
                max_tokens=budget,
                total_passages=total_passages,
                total_files=total_files,
                over_budget=(),
                strength=strength,
            ),
            hits,
            contexts,
            matches,
            concise=concise,
            parsed_of=parsed_of,
        )

    # -- exact search ----------------------------------------------------------------------

    async def text_hits(self, query: str) -> list[TextSearchHit]:
        """What the vault's simple search finds: the notes whose text holds every word of
        the query, case aside. Obsidian answers from its own index; a folder vault from
        this one's: the notes its trigrams say may hold the words, searched in memory.
        Reading every file from disk instead took 420-690 ms a call at 10,000 notes
        (python -m bench.speed.index, vault_search_map)."""
        if self.vault.rest is not None:
            return await self.vault.search_text(query, context_length=0)
        words = search_words(query)
        needles = Needles(words.words, words.patterns)
        hits: list[TextSearchHit] = []
        async for path, _, content in self._notes_that_may_hold(needles):
            hit = text_hit(path, content, words)
            if hit is not None:
                hits.append(hit)
        return hits

    async def _exact_candidates(
        self, needles: Needles, prefix: str
    ) -> dict[str, tuple[list[int], list[bool]]]:
        """Files holding every needle: per needle, content matches and whether the file's
        name or title holds it."""
        found: dict[str, tuple[list[int], list[bool]]] = {}
        if self.vault.rest is not None:
            # Obsidian searches its own index; only the notes shown are fetched here.
            await self.corpus.sync(read_all=False)
            longest = max(len(text) for text in needles.texts)
            phrases = [p for t, p in zip(needles.texts, needles.patterns, strict=True) if " " in t]
            for hit in await self.vault.search_text(needles.words, context_length=longest):
                if not hit.path.startswith(prefix):
                    continue
                contexts = [
                    hit.contexts.get(i, "")
                    for i, match in enumerate(hit.matches)
                    if match.source == "content"
                ]
                joined = " ".join(contexts)
                # Obsidian matches words anywhere in a note; a phrase needs its words
                # together, which the context around each match shows.
                if not all(p.search(joined) for p in phrases):
                    continue
                name = posixpath.basename(hit.path)
                found[hit.path] = (
                    [sum(1 for c in contexts if p.search(c)) for p in needles.patterns],
                    [bool(p.search(name)) for p in needles.patterns],
                )
            return found
        # The notes' text and stored titles, not their parses: parsing every note that held
        # "harbour" (6,289 of 10,000) took 4.8 s of the first such search.
        async for path, title, content in self._notes_that_may_hold(needles, prefix):
            names = posixpath.basename(path) + " " + title
            content_counts = needles.counts(content)
            name_hits = [bool(p.search(names)) for p in needles.patterns]
            if all(c or n for c, n in zip(content_counts, name_hits, strict=True)):
                found[path] = (content_counts, name_hits)
        if self.corpus.parsed_unkept:  # titles of an index stored before it kept them
            await anyio.to_thread.run_sync(self.corpus.keep_parsed)
        return found

    async def _notes_that_may_hold(
        self, needles: Needles, prefix: str = ""
    ) -> AsyncIterator[tuple[str, str, str]]:
        """The notes under `prefix` that may hold every needle: path, title and text. The
        notes read into the index, with those that may hold the needles read first while
        a first build has not (`_read_every_note_that_may_hold`); their texts are read
        from the index _NOTES_PER_CHECKPOINT at a time in a worker thread, which is also a
        checkpoint: a cancelled request (the client gave up) stops there instead of
        scanning the rest of the vault, and other requests get their turn meanwhile. When
        too many unread notes may hold them, those notes' files as they are, from one scan
        of the folder (title "": the name and text are searched): waiting for the whole
        read took the first such search 44 s at 10,000 notes (a common word, python -m
        bench.speed.scale). A needle only in an unread note's file name is not found."""
        every_one_read = await self._read_every_note_that_may_hold(needles)
        # Taken before the records, and only when the unread notes are scanned below: a
        # set of every path read, for each exact search of a built 50,000-note index.
        read_before = None if every_one_read else self.corpus.read_paths
        records = [
            r for r in await self._records_that_may_hold(needles) if r.path.startswith(prefix)
        ]
        for first in range(0, len(records), _NOTES_PER_CHECKPOINT):
            batch = records[first : first + _NOTES_PER_CHECKPOINT]
            contents = await anyio.to_thread.run_sync(self.corpus.contents, batch)
            for record, content in zip(batch, contents, strict=True):
                yield record.path, record.title, content
        if read_before is None:
            return
        # A note read since `read_before` is among the records and in the scan: once.
        yielded = {record.path for record in records}
        unread = await self.vault.texts_holding(
            needles.words, read_before, self.settings.index_refresh_seconds
        )
        for path, content in unread:
            if path.startswith(prefix) and path not in yielded:
                yield path, "", content

    async def _read_every_note_that_may_hold(self, needles: Needles) -> bool:
        """Have the notes read that could hold all the needles: whether every one is. While
        a first build reads the vault, the notes not read yet that hold the longest
        needle's longest word (the folder's own scan) or name it are read now, when they
        are few; otherwise, or when no word narrows, nothing is read (nor waited for)."""
        corpus = self.corpus
        # No wait for the read first: the read-ahead below makes the answer whole, and a
        # wait of `index_read_wait_seconds` made every exact search of a first build's
        # first minute take over 2.5 s (python -m bench.speed.first_day).
        await corpus.sync(read_all=False)
        if not corpus.may_lack_notes:
            return True
        # A note that holds a needle holds each of its words; a title's words are in the text.
        longest, named = max(
            zip(needles.texts, needles.patterns, strict=True), key=lambda n: len(n[0])
        )
        word = max(longest.split(), key=len)
        if len(word) >= 3:
            with anyio.move_on_after(_READ_FIRST_SECONDS):
                read = await corpus.read_unread_holding([word], _READ_AHEAD_FOR_EXACT, named)
                if read is not None:  # every unread note that may match is read now
                    return True
        return False

    async def _records_that_may_hold(self, needles: Needles) -> list[NoteRecord]:
        """The notes in which each needle may stand: its words in the text (the index's
        trigrams), or the needle in the file's name; every note when no needle narrows
        (words under three characters, an index without trigrams). A title is the
        frontmatter's or the first heading's words, which stand in the text, or the name."""
        corpus = self.corpus
        store = corpus.store
        narrowed: set[str] | None = None
        for text, pattern in zip(needles.texts, needles.patterns, strict=True):
            in_text = await anyio.to_thread.run_sync(store.notes_holding, text.split())
            if in_text is None:
                continue
            named = {path for path in corpus.paths if pattern.search(posixpath.basename(path))}
            held = in_text | named
            narrowed = held if narrowed is None else narrowed & held
        if narrowed is None:
            return list(corpus.records())
        return [record for path in sorted(narrowed) if (record := corpus.record(path))]

    async def smart_search(
        self,
        query: str,
        *,
        limit: int,
        snippet_length: int,
        folder: str = "",
        max_tokens: int | None = None,
        concise: bool = False,
    ) -> SearchResult:
        needles = parse_needles(query)
        if not needles.texts:
            raise InvalidArgument('query is empty; give words or "quoted phrases" to find.')
        check_query_terms(needles.texts)
        scope, prefix = folder_prefix(folder)
        budget = max_tokens or self.settings.max_tokens
        found = await self._exact_candidates(needles, prefix)
        ranked = sorted(found, key=lambda path: (-file_score(*found[path]), path))
        best = file_score(*found[ranked[0]]) if ranked else 1.0
        hits: list[PassageHit] = []
        matches = {path: sum(found[path][0]) for path in ranked}
        for path in ranked:
            if len(hits) >= limit * 2:
                break  # enough to fill the reply; the rest is only counted
            record = await self.corpus.note(path)
            spans = needles.spans(record.parsed.content) if record is not None else []
            if record is not None and not spans and any(found[path][0]):
                # Obsidian found the terms in the note's text and the cached copy lacks them:
                # the note changed since the last stat listing (at most
                # index_refresh_seconds ago). Its text is read now.
                record = await self.corpus.reread(path)
                spans = needles.spans(record.parsed.content) if record is not None else []
            if record is None:
                continue
            content = record.parsed.content
            matches[path] = len(spans)
            score = round(file_score(*found[path]) / best, 2)
            hits.extend(
                passage_hit(record, snippet.start, snippet.end, score)
                for snippet in snippets_for_matches(content, spans, snippet_length)
            )
        return self._packed(
            "vault_smart_search",
            query,
            scope,
            "exact",
            "",
            hits,
            limit=limit,
            budget=budget,
            include_context=True,
            total_passages=sum(matches.values()),
            total_files=len(found),
            matches=matches,
            concise=concise,
        )
