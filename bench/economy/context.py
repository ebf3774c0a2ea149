"""Context economy: what each strategy costs an agent, call by call, to reach the answer.

Every strategy is driven through a real MCP client (the SDK's ``Client`` on a stdio
subprocess), on the same questions, a copy of ``fixtures/vault``, and the same keywords
where a strategy needs words rather than a question (``KeywordPicker``):

- ``semantic``: ``vault_semantic_query`` with defaults (and the question's folder), our
  server on the stand-in Local REST API 5.x whose ``/search/smart`` ranks with
  ``fixtures/query_vectors.jsonl``;
- ``keyword`` and ``folder+vectors``: the same call through the folder source, without and
  with the vault's ``.smart-env`` vectors;
- ``smart-search``: ``vault_smart_search(keywords)`` on the exact-keyword questions;
- ``quick-context``: ``vault_quick_context(topic=keywords)`` on every question (the set has
  no separate topic category: each question's distinctive words are its topic);
- ``drill-down``: ``vault_search_map``, again in the top folder, ``vault_peek_file`` and
  ``vault_read_note`` of the top file (``bench.retrieval.strategies.drill_down_runner``);
- ``peer``: ``mcp-obsidian``'s simple search (context length 100), then its whole-file read
  of the top hit (``bench/shared/peer.py``).

Our strategies make a second call only when the first missed: the ``vault_read_note``
call that the first response itself suggests (an agent follows the hint). Every call is
recorded; calls asking for ``format="json"`` only steer the drill-down (which row is
top) and are neither counted nor checked. A strategy stops as soon as the answer appears:
"tokens" are those of the calls up to and including that one (all calls on a miss).
A hit is checked on each response and on the strings inside it when it is JSON (an agent
reads ``\\u00e9`` as ``é``), with ``harness.is_hit``.

Every question set slice (``bench.retrieval.questions.question_groups``: all, dev and held-out, the
original 58 and the new ones, each category, each trait) is summarised apart for the
strategies that answer from one ``vault_semantic_query`` (``FIRST_RESPONSE``): hit after
the first response, hit within two calls (the second being the read the first suggests),
and the first response's median tokens.

The same run also gives ``bench.retrieval.quality.quality_report`` its five strategies (with the
raw ``/search/simple`` plus whole-note baseline over plain HTTP), so the Retrieval
issue's figures come from this run too.

Replies are not all a conversation costs: a client sends the tool definitions (the
``tools/list`` result and the server's instructions, ``bench.economy.definitions``) with every
request, and a conversation of n tool calls makes n + 1 requests. The same sessions
measure ours and the peer's definitions, and ``conversation_costs`` adds them up for
conversations of one and two calls.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.economy import usage_check
from bench.economy.definitions import Definitions, measure_definitions, server_definitions
from bench.retrieval import quality as retrieval_quality
from bench.retrieval.questions import question_groups
from bench.retrieval.strategies import (
    Outcome,
    drill_down_runner,
    run_strategy,
    simple_search_runner,
)
from bench.retrieval.traces import Recorder, Step, Trace, follow_hint, run_traced, semantic_step
from bench.shared.harness import (
    QUERY_VECTORS,
    KeywordPicker,
    Question,
    build_indexes,
    copy_vault,
    median,
    percentile,
    server_env,
    stdio_session,
)
from bench.shared.peer import CONTEXT_LENGTH, PeerInstall, peer_calls, peer_session
from tests.standin.process import StandinProcess

SMART_SEARCH = "vault_smart_search"
QUICK_CONTEXT = "vault_quick_context"
KEYWORD_CATEGORY = "exact-keyword"
# The strategies that answer from one vault_semantic_query call (then the read it
# suggests): the retrieval pipeline issue's "first response" and "within two calls".
FIRST_RESPONSE = ("semantic", "keyword", "folder+vectors")


@dataclass(frozen=True)
class Strategy:
    name: str
    how: str  # the calls, as the report shows them


STRATEGIES = (
    Strategy("semantic", "vault_semantic_query (defaults), stand-in with /search/smart"),
    Strategy("keyword", "vault_semantic_query, folder source, no vectors"),
    Strategy("folder+vectors", "vault_semantic_query, folder source, stored vectors"),
    Strategy("smart-search", "vault_smart_search(keywords), exact-keyword questions"),
    Strategy("quick-context", "vault_quick_context(topic=keywords)"),
    Strategy("drill-down", "vault_search_map, again in top folder, peek, read top file"),
    Strategy(
        "peer",
        f"mcp-obsidian: obsidian_simple_search(keywords, context_length={CONTEXT_LENGTH}), "
        "then obsidian_get_file_contents(top hit)",
    ),
)


def tool_step(recorder: Recorder, tool: str, argument: str, picker: KeywordPicker) -> Step:
    async def step(question: Question) -> None:
        args: dict[str, Any] = {argument: picker.pick(question.question)}
        if question.folder and tool == SMART_SEARCH:
            args["folder"] = question.folder
        await follow_hint(recorder, question, await recorder.call(tool, args))

    return step


def drill_down_step(recorder: Recorder, picker: KeywordPicker) -> Step:
    return drill_down_runner(recorder, picker)


def peer_step(recorder: Recorder, picker: KeywordPicker) -> Step:
    async def step(question: Question) -> None:
        await peer_calls(recorder, picker, question)

    return step


def conversation_costs(traces: Sequence[Trace], definitions: Definitions) -> dict[str, Any]:
    """Tokens of whole conversations: the definitions with each of the n + 1 requests of n
    calls, plus the replies (medians over the questions; two calls: over the questions
    whose conversation took two)."""
    first = median([t.first_tokens for t in traces])
    both = [t.tokens for t in traces if t.calls == 2]
    two = median(both) if both else None
    return {
        "definitions": definitions.tokens,
        "tools": len(definitions.tools),
        "one_call_replies": first,
        "one_call": 2 * definitions.tokens + first,
        "two_call_questions": len(both),
        "two_call_replies": two,
        "two_calls": 3 * definitions.tokens + two if two is not None else None,
    }


def summarise(traces: Sequence[Trace]) -> dict[str, float]:
    count = len(traces) or 1
    tokens = [t.tokens for t in traces]
    return {
        "questions": len(traces),
        "hit_first": 100 * sum(t.hit_first for t in traces) / count,
        "hit_two": 100 * sum(t.hit_two for t in traces) / count,
        "hit": 100 * sum(t.hit for t in traces) / count,
        "median_tokens": median(tokens),
        "p90_tokens": percentile(tokens, 90),
        "median_first_tokens": median([t.first_tokens for t in traces]),
        "mean_calls": sum(t.calls for t in traces) / count,
        "errors": sum(1 for t in traces if t.error),
    }


async def _ours_on_standin(
    standin: StandinProcess,
    config_dir: Path,
    questions: Sequence[Question],
    picker: KeywordPicker,
    embeddings: bool,
    recorders: list[Recorder],
) -> tuple[dict[str, list[Trace]], dict[str, list[Outcome]], Definitions]:
    traces: dict[str, list[Trace]] = {}
    outcomes: dict[str, list[Outcome]] = {}
    env = server_env(standin=standin, config_dir=config_dir, embeddings=embeddings)
    env |= usage_check.usage_env(config_dir / "usage-cache")
    build_indexes([env])
    async with stdio_session(env) as session:
        definitions = await measure_definitions(session.client)
        recorder = Recorder(session.client)
        recorders.append(recorder)
        keyword_questions = [q for q in questions if q.category == KEYWORD_CATEGORY]
        plan: list[tuple[str, Step, Sequence[Question]]] = [
            ("semantic", semantic_step(recorder), questions),
            ("smart-search", tool_step(recorder, SMART_SEARCH, "query", picker), keyword_questions),
            ("quick-context", tool_step(recorder, QUICK_CONTEXT, "topic", picker), questions),
            ("drill-down", drill_down_step(recorder, picker), questions),
        ]
        for name, step, asked in plan:
            traces[name], found = await run_traced(name, recorder, step, asked)
            if found:
                outcomes[name] = found
    return traces, outcomes, definitions


async def economy(
    questions: Sequence[Question],
    work: Path,
    peer: PeerInstall | None,
    peer_log: Path,
    *,
    embeddings: bool = True,
    keep_usage_log: Path | None = None,
) -> dict[str, Any]:
    """Run every strategy; return the traces, their summaries, the Retrieval issue's
    quality report and a sample question's raw answers from the peer and from us.
    `embeddings=False`: without the local model (no index to build; the quick run).
    Our server logs its calls (`OBSIDIAN_USAGE_LOG=on`), and `obsidian-mcp stats` must
    agree with what the run counted (`usage_check`); the log is copied into
    `keep_usage_log/usage`."""
    with_env = copy_vault(work / "with-env" / "vault", vectors=True)
    without_env = copy_vault(work / "no-env" / "vault", vectors=False)
    picker = KeywordPicker(with_env)
    config_dir = work / "config"
    ours: list[Recorder] = []
    started = time.perf_counter()
    async with StandinProcess(
        with_env, plugin_version="5.1.0", smart="upstream", query_vectors=QUERY_VECTORS
    ) as standin:
        traces, outcomes, our_definitions = await _ours_on_standin(
            standin, config_dir, questions, picker, embeddings, ours
        )
        definitions: dict[str, Definitions] = {"semantic": our_definitions}
        if peer is not None:
            async with peer_session(peer, standin, peer_log) as session:
                definitions["peer"] = await measure_definitions(session.client)
                recorder = Recorder(session.client)
                traces["peer"], _ = await run_traced(
                    "peer", recorder, peer_step(recorder, picker), questions
                )
        async with standin.async_client(timeout=30) as http:
            outcomes["simple+note"] = await run_strategy(
                "simple+note", simple_search_runner(http, picker), questions
            )
    if "semantic" in traces:
        envs = retrieval_quality.folder_strategies(with_env, without_env, config_dir, embeddings)
        for name, env in envs.items():
            env |= usage_check.usage_env(config_dir / "usage-cache")
            async with stdio_session(env) as session:
                recorder = Recorder(session.client)
                ours.append(recorder)
                traces[name], outcomes[name] = await run_traced(
                    name, recorder, semantic_step(recorder), questions
                )
    usage = usage_check.check(
        [recorder.history for recorder in ours],
        config_dir / "usage-cache",
        our_definitions.tokens,
        keep_usage_log,
    )
    quality_md, quality = retrieval_quality.quality_report(outcomes, questions)
    groups = question_groups(questions)
    sample = questions[0]
    return {
        "seconds": time.perf_counter() - started,
        "questions": len(questions),
        "strategies": [
            {**asdict(s), **summarise(traces[s.name])} for s in STRATEGIES if s.name in traces
        ],
        "traces": {
            name: [{k: v for k, v in asdict(t).items() if k != "texts"} for t in found]
            for name, found in traces.items()
        },
        "first_two_by_group": {
            name: {
                group: summarise([t for t in traces[name] if t.question in ids])
                for group, ids in groups.items()
            }
            for name in FIRST_RESPONSE
            if name in traces
        },
        "definitions": {name: asdict(found) for name, found in definitions.items()},
        "memory_only_definitions": asdict(await server_definitions("memory")),
        "conversations": {
            name: conversation_costs(traces[name], found)
            for name, found in definitions.items()
            if name in traces
        },
        "usage_log": usage,
        "quality_markdown": quality_md,
        "quality": quality,
        "sample": {
            "question": asdict(sample),
            "keywords": picker.pick(sample.question),
            "answers": {
                name: found[0].texts
                for name, found in traces.items()
                if found and found[0].question == sample.id
            },
        },
    }
