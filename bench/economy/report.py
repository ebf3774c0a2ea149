"""The context economy's part of ``bench/REPORT.md``: its targets (retrieval, the first
response, the tool definitions, the peer really ran: "Targets: retrieval and context
economy"), the tokens-against-hit-rate chart, the sections "Context economy" (with what a
conversation costs, the definitions per tool, the slices, the usage log's check) and
"Updating a section", and the peer's raw answer in a file of its own beside the report.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.economy import edits, usage_check
from bench.economy.definitions import (
    BEFORE,
    BEFORE_COMMIT,
    BEFORE_MEMORY_ONLY,
    Definitions,
    tokens_of,
)
from bench.shared.harness import markdown_table
from bench.shared.targets import Target, num, pct, targets_section

ECONOMY_CHART = "context-economy.png"
# The raw answers to one question, beside the report and linked from it.
PEER_ANSWER = "peer-answer.md"
SAMPLE_CHARS = 6000
# Said wherever the peer's figures would be, when the run was made with --no-peer.
PEER_SKIPPED = "not run (--no-peer: the test suite's run, which must work offline)"


# --- targets ------------------------------------------------------------------------------


def _retrieval_targets(economy: dict[str, Any]) -> list[Target]:
    quality = economy["quality"]
    summary = quality["summary"]
    if "semantic" not in summary:
        return [
            Target(
                "3", "vault_semantic_query figures", "the tool exists", "not in the server", None
            )
        ]
    semantic, keyword = summary["semantic"], summary["keyword"]
    exact = quality["by_category"].get("exact-keyword", {}).get("keyword")
    targets = [
        Target(
            "3.1",
            "semantic source: gold in first response; median tokens",
            ">= 90%; <= 800",
            f"{pct(semantic['hit_rate'])}; {num(semantic['median_tokens'])}",
            semantic["hit_rate"] >= 90 and semantic["median_tokens"] <= 800,
        ),
        Target(
            "3.2",
            "keyword only (folder, no vectors): exact-keyword questions",
            ">= 90%",
            pct(exact["hit_rate"]) if exact else "no such questions",
            exact["hit_rate"] >= 90 if exact else None,
        ),
        Target(
            "3.2",
            "keyword only: all questions; says it fell back",
            ">= 70%; 100% labelled",
            f"{pct(keyword['hit_rate'])}; {pct(keyword['labelled_fallback'])} labelled",
            keyword["hit_rate"] >= 70 and keyword["labelled_fallback"] == 100,
        ),
    ]
    for name, ratio in quality["ratios"].items():
        targets.append(
            Target(
                "3.3",
                f"semantic vs {name}: median tokens ratio, hit rate not worse",
                ">= 5x; yes",
                f"{ratio['token_ratio']:.1f}x; {'yes' if ratio['hit_rate_not_worse'] else 'no'}",
                ratio["token_ratio"] >= 5 and bool(ratio["hit_rate_not_worse"]),
            )
        )
    return targets


# Retrieval pipeline issue (9), item 1, and passage index issue (8), item 7.
FIRST_RESPONSE_ALL = 75
FIRST_RESPONSE_PARAPHRASE = 70
FIRST_RESPONSE_TOKENS = 800
WITHIN_TWO = 90
FOLDER_PARAPHRASE = 60
MODES = {
    "semantic": "stand-in with /search/smart",
    "keyword": "folder only, no stored vectors",
    "folder+vectors": "folder with Smart Connections vectors",
}


def _first_response_targets(economy: dict[str, Any]) -> list[Target]:
    by_group = economy.get("first_two_by_group", {})
    targets: list[Target] = []
    for name, mode in MODES.items():
        groups = by_group.get(name)
        if not groups:
            continue
        every, paraphrase = groups["all"], groups.get("paraphrase")
        para = paraphrase["hit_first"] if paraphrase else math.nan
        targets.append(
            Target(
                "9.1",
                f"{mode}: first response, all; paraphrase; median tokens; within two calls",
                f">= {FIRST_RESPONSE_ALL}%; >= {FIRST_RESPONSE_PARAPHRASE}%; "
                f"<= {FIRST_RESPONSE_TOKENS}; >= {WITHIN_TWO}%",
                f"{pct(every['hit_first'])}; {pct(para)}; "
                f"{num(every['median_first_tokens'])}; {pct(every['hit_two'])}",
                every["hit_first"] >= FIRST_RESPONSE_ALL
                and para >= FIRST_RESPONSE_PARAPHRASE
                and every["median_first_tokens"] <= FIRST_RESPONSE_TOKENS
                and every["hit_two"] >= WITHIN_TWO,
            )
        )
        held = groups.get("held-out")
        if held:
            targets.append(
                Target(
                    "9.2",
                    f"{mode}: held-out questions, first response; within two calls",
                    "reported apart",
                    f"{pct(held['hit_first'])}; {pct(held['hit_two'])} "
                    f"({held['questions']} questions)",
                    True,
                )
            )
    folder = by_group.get("keyword", {}).get("paraphrase")
    if folder:
        targets.append(
            Target(
                "8.7",
                "folder only, no Obsidian: paraphrase, first response",
                f">= {FOLDER_PARAPHRASE}%",
                pct(folder["hit_first"]),
                folder["hit_first"] >= FOLDER_PARAPHRASE,
            )
        )
    return targets


# Tool definitions issue (19): tools/list plus instructions, in tokens. 2,500 until issue
# 34 (2,492 measured), which spent 35 on telling the model the read/edit contract (replace
# takes a target as read, heading line included; a cut read's version names its window).
DEFINITIONS_TOKENS = 2550
INSTRUCTIONS_TOKENS = 400
MEMORY_ONLY_TOKENS = 800


def _measured_definitions(economy: dict[str, Any]) -> tuple[Definitions, Definitions] | None:
    """Every tool's definitions and the memory family's alone, when the run measured them."""
    found = economy.get("definitions", {}).get("semantic")
    if found is None:
        return None
    return Definitions(**found), Definitions(**economy["memory_only_definitions"])


def _definitions_targets(economy: dict[str, Any]) -> list[Target]:
    measured = _measured_definitions(economy)
    if measured is None:
        return []
    every, memory = measured
    instructions = tokens_of(every.instructions)
    return [
        Target(
            "19.1",
            f"tools/list + instructions, every tool ({len(every.tools)}), tokens",
            f"<= {DEFINITIONS_TOKENS:,}",
            f"{every.tokens:,} (before: {BEFORE.tokens:,})",
            every.tokens <= DEFINITIONS_TOKENS,
        ),
        Target(
            "19.1",
            "instructions, tokens",
            f"<= {INSTRUCTIONS_TOKENS}",
            f"{instructions:,} (before: {tokens_of(BEFORE.instructions):,})",
            instructions <= INSTRUCTIONS_TOKENS,
        ),
        Target(
            "19.1",
            "OBSIDIAN_TOOLS=memory: tools/list + instructions, tokens",
            f"<= {MEMORY_ONLY_TOKENS}",
            f"{memory.tokens:,} (before: {BEFORE_MEMORY_ONLY.tokens:,})",
            memory.tokens <= MEMORY_ONLY_TOKENS,
        ),
    ]


def economy_targets(results: dict[str, Any]) -> list[Target]:
    """Retrieval, first response, tool definitions, and whether the peer really ran."""
    economy = results["economy"]
    peer = next((s for s in economy["strategies"] if s["name"] == "peer"), None)
    return [
        *_retrieval_targets(economy),
        *_first_response_targets(economy),
        *_definitions_targets(economy),
        Target(
            "5.2",
            "the peer really ran: version and raw answer in this report",
            "yes",
            f"{results['peer']['requirement']} (installed {results['peer']['version']}), "
            f"{peer['questions'] if peer else 0} questions, "
            f"{peer['errors'] if peer else 0} errors"
            if results["peer"]
            else PEER_SKIPPED,
            bool(peer) and peer["errors"] == 0 if results["peer"] else None,
        ),
    ]


# --- charts -------------------------------------------------------------------------------


def economy_chart(strategies: Sequence[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    fig, ax = plt.subplots(figsize=(9, 5), dpi=110)
    colours = plt.get_cmap("tab10")
    for index, row in enumerate(strategies):
        tokens = 1.0 if math.isnan(row["median_tokens"]) else max(row["median_tokens"], 1.0)
        ours = row["name"] not in ("drill-down", "peer")
        ax.scatter(
            tokens,
            row["hit"],
            s=90,
            marker="o" if ours else "s",
            color=colours(index % 10),
            label=f"{row['name']}{'' if ours else ', baseline'} ({row['questions']} questions)",
            zorder=3,
        )
    ax.set_xscale("log")
    plain = FuncFormatter(lambda value, _: f"{value:,.0f}")
    ax.xaxis.set_major_formatter(plain)
    ax.xaxis.set_minor_formatter(plain)
    ax.tick_params(axis="x", which="minor", labelsize=7)
    ax.set_xlabel("median tokens to the answer (characters / 4, log scale)")
    ax.set_ylabel("questions answered (%)")
    ax.set_ylim(-5, 105)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1))
    ax.set_title(
        "Context economy: tokens against hit rate\n"
        "(circles: this server's tools; squares: baselines)"
    )
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


# --- sections -----------------------------------------------------------------------------


def _peer_line(peer: dict[str, str] | None) -> str:
    if peer is None:
        return f"The peer: {PEER_SKIPPED}."
    return (
        f"The peer: {peer['requirement']} from PyPI (installed version {peer['version']}), "
        "in its own virtual environment."
    )


def _economy_section(economy: dict[str, Any], peer: dict[str, str] | None) -> str:
    rows = [
        [
            s["name"],
            s["how"],
            s["questions"],
            pct(s["hit_first"]),
            pct(s["hit_two"]),
            pct(s["hit"]),
            num(s["median_tokens"]),
            num(s["p90_tokens"]),
            f"{s['mean_calls']:.1f}",
            s["errors"],
        ]
        for s in economy["strategies"]
    ]
    parts = [
        "## Context economy",
        "",
        f"{economy['questions']} questions from `fixtures/questions.jsonl` on a copy of "
        "`fixtures/vault`, every strategy through a real MCP client (stdio). A strategy "
        "stops as soon as the gold phrase has appeared; tokens are characters / 4 of every "
        "response up to that one (of all of them on a miss). Our tools make a second call "
        "only on a miss: the `vault_read_note` their first response suggests. " + _peer_line(peer),
        "",
        markdown_table(
            [
                "strategy",
                "calls made",
                "questions",
                "hit after 1st call",
                "hit within 2",
                "answered",
                "median tokens",
                "p90 tokens",
                "mean calls",
                "errors",
            ],
            rows,
        ),
        "",
        f"![tokens against hit rate]({ECONOMY_CHART})",
    ]
    parts += ["", *_conversation_section(economy)]
    parts += ["", *_definitions_section(economy)]
    parts += ["", *_slices_section(economy)]
    if "usage_log" in economy:
        parts += ["", *usage_check.section(economy["usage_log"])]
    parts += [
        "",
        "### Retrieval issue figures (first response only)",
        "",
        "As `bench/retrieval/quality.py` defines them: a hit is the gold in the first "
        "response; the drill-down and `simple+note` (raw `/search/simple` with context "
        "length 100 plus the raw top note, no MCP) count every call they make.",
        "",
        economy["quality_markdown"].removeprefix("## Retrieval quality and context cost\n"),
    ]
    return "\n".join(parts)


def _conversation_cells(costs: dict[str, Any] | None) -> list[str]:
    if costs is None:
        return [PEER_SKIPPED] * 3
    two = costs["two_calls"]
    return [
        f"{costs['definitions']:,} ({costs['tools']} tools)",
        f"{num(costs['one_call'])} (replies {num(costs['one_call_replies'])})",
        f"{num(two)} (replies {num(costs['two_call_replies'])}; "
        f"{costs['two_call_questions']} questions)"
        if two is not None
        else "no question took two calls",
    ]


def _conversation_section(economy: dict[str, Any]) -> list[str]:
    costs = economy.get("conversations", {})
    if "semantic" not in costs:
        return []
    ours, peer = _conversation_cells(costs["semantic"]), _conversation_cells(costs.get("peer"))
    labels = [
        "tool definitions: tools/list + instructions",
        "one call: 2 requests x definitions + the reply",
        "two calls: 3 requests x definitions + both replies",
    ]
    return [
        "### What a conversation costs: the definitions with every request, plus the replies",
        "",
        "A client sends the tool definitions (the `tools/list` result as `json.dumps` writes "
        "it, plus the server's instructions) with every request, and a conversation of n "
        "tool calls makes n + 1 requests. Tokens, characters / 4; replies are medians over "
        "the questions (two calls: over those whose conversation took two). This server: "
        "`vault_semantic_query`, then the read it suggests on a miss (the `semantic` "
        "strategy); the peer: its simple search, then the top file. Both measured in this "
        "run, through the same MCP client.",
        "",
        markdown_table(["", "this server", "mcp-obsidian"], zip(labels, ours, peer, strict=True)),
    ]


def _chars_tokens(characters: int | None) -> str:
    return "none" if characters is None else f"{characters:,} ({tokens_of(characters):,})"


def _definitions_section(economy: dict[str, Any]) -> list[str]:
    measured = _measured_definitions(economy)
    if measured is None:
        return []
    after, memory = measured
    names = list(dict.fromkeys([*BEFORE.tools, *after.tools]))
    rows = [
        [f"`{name}`", _chars_tokens(BEFORE.tools.get(name)), _chars_tokens(after.tools.get(name))]
        for name in names
    ]
    rows += [
        [
            "tools/list (the whole result)",
            _chars_tokens(BEFORE.tools_list),
            _chars_tokens(after.tools_list),
        ],
        ["instructions", _chars_tokens(BEFORE.instructions), _chars_tokens(after.instructions)],
        ["**total**", _chars_tokens(BEFORE.total), _chars_tokens(after.total)],
        [
            "`OBSIDIAN_TOOLS=memory`: total",
            _chars_tokens(BEFORE_MEMORY_ONLY.total),
            _chars_tokens(memory.total),
        ],
    ]
    return [
        "### Tool definitions, per tool: characters (tokens)",
        "",
        f"Before: measured the same way at commit {BEFORE_COMMIT}, before issue 19 "
        "(recorded in `bench/economy/definitions.py`; there was no `OBSIDIAN_TOOLS` then, so the "
        "memory tools alone came with the whole instructions). This run: every tool, and "
        "the memory family alone. `python -m bench.economy.definitions` prints this run's column.",
        "",
        markdown_table(["definition", f"before ({BEFORE_COMMIT})", "this run"], rows),
    ]


def _slices_section(economy: dict[str, Any]) -> list[str]:
    by_group = economy.get("first_two_by_group", {})
    names = [name for name in MODES if name in by_group]
    if not names:
        return []
    rows = [
        [
            group,
            stats["questions"],
            *(
                f"{pct(by_group[n][group]['hit_first'])} / {pct(by_group[n][group]['hit_two'])}"
                f" / {num(by_group[n][group]['median_first_tokens'])}"
                for n in names
            ),
        ]
        for group, stats in by_group[names[0]].items()
    ]
    return [
        "### Answer in the first response, and within two calls, per slice",
        "",
        "`vault_semantic_query` with defaults; the second call is the `vault_read_note` the "
        "first response suggests, made only on a miss. Cells: hit after the first response / "
        "hit within two calls / median tokens of the first response. Held-out questions are "
        "never tuned on; the original 58 are the set earlier reports used "
        "(`bench/retrieval/questions.py`).",
        "",
        markdown_table(
            ["questions", "n", *(f"{n} ({MODES[n]})" for n in names)],
            rows,
        ),
    ]


def _fence(text: str) -> str:
    shown = (
        text
        if len(text) <= SAMPLE_CHARS
        else (text[:SAMPLE_CHARS] + f"\n[... {len(text) - SAMPLE_CHARS:,} more characters]")
    )
    return "````text\n" + shown + "\n````"


def _peer_answer(economy: dict[str, Any], peer: dict[str, str] | None, out: Path) -> str:
    """Write the raw answers to one question, call by call, into ``out/PEER_ANSWER``; return
    the report's short section that links to it (the answers are long and say nothing a
    table does not, but a reader should be able to see them whole)."""
    sample = economy["sample"]
    question = sample["question"]
    who_answered = (
        f"{peer['requirement']} (installed {peer['version']}) answered"
        if peer
        else f"The peer did not run ({PEER_SKIPPED}); this server answered"
    )
    said = (
        f'Question {question["id"]}: "{question["question"]}" (gold: '
        f"{' + '.join(repr(g) for g in question['gold'])}); keywords for search-based "
        f"strategies: `{sample['keywords']}`. {who_answered}, call by call, exactly as its "
        f"MCP tools returned it (cut at {SAMPLE_CHARS:,} characters)"
    )
    parts = ["# The peer's raw answer", "", said + ":"]
    for name in ("peer", "semantic"):
        texts = sample["answers"].get(name)
        if not texts:
            continue
        who = "mcp-obsidian" if name == "peer" else "this server, vault_semantic_query"
        for number, text in enumerate(texts, start=1):
            parts += ["", f"{who}, call {number} ({len(text) / 4:,.0f} tokens):", "", _fence(text)]
    (out / PEER_ANSWER).write_text("\n".join(parts) + "\n", "utf-8")
    return f"## The peer's raw answer\n\n{said}: [{PEER_ANSWER}]({PEER_ANSWER})."


def sections(results: dict[str, Any], out: Path) -> dict[str, str]:
    """The economy's sections by name, its chart and the peer's raw answer written into
    ``out``."""
    economy = results["economy"]
    economy_chart(economy["strategies"], out / ECONOMY_CHART)
    return {
        "targets-economy": targets_section(
            "retrieval and context economy", economy_targets(results)
        ),
        "economy": _economy_section(economy, results["peer"]),
        "peer-answer": _peer_answer(economy, results["peer"], out),
        "edit-economy": edits.section(results["edit_economy"]),
    }
